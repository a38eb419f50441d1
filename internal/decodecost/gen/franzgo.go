// Code in this file is copied from franz-go's generator, the program that writes
// github.com/twmb/franz-go/pkg/kmsg: github.com/twmb/franz-go v1.22.3, directory generate/
// (main.go: the type model, defaults and die; parse.go: the definitions parser, whole;
// gen.go: TypeName and minSize/lenSize/inBody). It is copied, not imported, because the
// generator is a main package. Changes: the file header and imports only; the code is
// verbatim, so the walker decodes the same type model kmsg was generated from.
//
// Copyright 2020, Travis Bischel.
// All rights reserved.
//
// Redistribution and use in source and binary forms, with or without
// modification, are permitted provided that the following conditions are met:
//     * Redistributions of source code must retain the above copyright
//       notice, this list of conditions and the following disclaimer.
//     * Redistributions in binary form must reproduce the above copyright
//       notice, this list of conditions and the following disclaimer in the
//       documentation and/or other materials provided with the distribution.
//     * Neither the name of the library nor the
//       names of its contributors may be used to endorse or promote products
//       derived from this software without specific prior written permission.
//
// THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND
// ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED
// WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
// DISCLAIMED. IN NO EVENT SHALL <COPYRIGHT HOLDER> BE LIABLE FOR ANY
// DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES
// (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES;
// LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND
// ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
// (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS
// SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// ---- from generate/main.go ----

var maxKey int

func die(why string, args ...any) {
	fmt.Fprintf(os.Stderr, why+"\n", args...)
	os.Exit(1)
}

type (
	// LineWriter writes lines at a time.
	LineWriter struct {
		buf  *bytes.Buffer
		line int
	}

	Type interface {
		TypeName() string
	}

	Bool struct {
		HasDefault bool
		Default    bool
	}
	Int8 struct {
		HasDefault bool
		Default    int8
	}
	Int16 struct {
		HasDefault bool
		Default    int16
	}
	Uint16 struct {
		HasDefault bool
		Default    uint16
	}
	Int32 struct {
		HasDefault bool
		Default    int32
	}
	Int64 struct {
		HasDefault bool
		Default    int64
	}
	Float64 struct {
		HasDefault bool
		Default    float64
	}
	Uint32 struct {
		HasDefault bool
		Default    uint32
	}
	Varint struct {
		HasDefault bool
		Default    int32
	}
	Varlong struct {
		HasDefault bool
		Default    int64
	}
	Uuid         struct{}
	VarintString struct{}
	VarintBytes  struct{}

	FieldLengthMinusBytes struct {
		Field       string
		LengthMinus int
	}

	// The following types can be encoded "compact"; this happens on
	// flexible versions. If adding types here, be sure to add the
	// AsFromFlexible method below.

	String struct {
		FromFlexible bool
	}
	NullableString struct {
		HasDefault      bool
		FromFlexible    bool
		NullableVersion int
	}
	Bytes struct {
		FromFlexible bool
	}
	NullableBytes struct {
		HasDefault   bool
		FromFlexible bool
	}

	Array struct {
		Inner           Type
		IsVarintArray   bool
		IsNullableArray bool
		NullableVersion int

		HasDefault bool

		// FromFlexible is true if this is inside a struct that has
		// flexible versions.
		FromFlexible bool
	}

	StructField struct {
		Comment    string
		MinVersion int
		MaxVersion int
		Tag        int
		FieldName  string
		Type       Type
	}

	Throttle struct {
		Switchup int
	}
	Timeout struct {
		Int32
	}

	Struct struct {
		TopLevel         bool
		WithVersionField bool // if not top level
		WithNoEncoding   bool // if not top level
		Anonymous        bool // if inner struct
		Comment          string
		Name             string

		HasDefault bool

		// FromFlexible tracks if this struct is either
		// (a) top level and has flexible versions, or
		// (b) nested in a top level struct that has flexible versions
		FromFlexible bool
		Nullable     bool

		Fields []StructField

		Key int // -1 if not top level

		// Only TopLevel relevant fields:
		Admin            bool
		GroupCoordinator bool
		TxnCoordinator   bool
		ShareCoordinator bool
		MaxVersion       int
		FlexibleAt       int
		ResponseKind     string // for requests
		RequestKind      string // for responses
	}

	EnumValue struct {
		Comment string
		Value   int
		Word    string
	}

	Enum struct {
		Comment string
		Name    string
		Type

		HasZero   bool
		CamelCase bool

		Values []EnumValue
	}
)

/////////////////////
// DEFAULT SETTING //
/////////////////////

type Defaulter interface {
	SetDefault(string) Type
	GetDefault() (any, bool)
	GetTypeDefault() any
}

// Parse helpers for default values, dying on error.
func mustParseInt(s, name string, bitSize int) int64 {
	v, err := strconv.ParseInt(s, 0, bitSize)
	if err != nil {
		die("invalid %s default: %v", name, err)
	}
	return v
}

func mustParseUint(s, name string, base, bitSize int) uint64 {
	v, err := strconv.ParseUint(s, base, bitSize)
	if err != nil {
		die("invalid %s default: %v", name, err)
	}
	return v
}

func (e Enum) SetDefault(s string) Type {
	e.Type = e.Type.(Defaulter).SetDefault(s)
	return e
}
func (e Enum) GetDefault() (any, bool) { return e.Type.(Defaulter).GetDefault() }
func (e Enum) GetTypeDefault() any     { return e.Type.(Defaulter).GetTypeDefault() }

func (b Bool) SetDefault(s string) Type {
	v, err := strconv.ParseBool(s)
	if err != nil {
		die("invalid bool default: %v", err)
	}
	b.Default = v
	b.HasDefault = true
	return b
}
func (b Bool) GetDefault() (any, bool) { return b.Default, b.HasDefault }
func (Bool) GetTypeDefault() any       { return false }

func (i Int8) SetDefault(s string) Type {
	i.Default, i.HasDefault = int8(mustParseInt(s, "int8", 8)), true
	return i
}
func (i Int8) GetDefault() (any, bool) { return i.Default, i.HasDefault }
func (Int8) GetTypeDefault() any       { return 0 }

func (i Int16) SetDefault(s string) Type {
	i.Default, i.HasDefault = int16(mustParseInt(s, "int16", 16)), true
	return i
}
func (i Int16) GetDefault() (any, bool) { return i.Default, i.HasDefault }
func (Int16) GetTypeDefault() any       { return 0 }

func (u Uint16) SetDefault(s string) Type {
	u.Default, u.HasDefault = uint16(mustParseUint(s, "uint16", 0, 16)), true
	return u
}
func (u Uint16) GetDefault() (any, bool) { return u.Default, u.HasDefault }
func (Uint16) GetTypeDefault() any       { return 0 }

func (i Int32) SetDefault(s string) Type {
	i.Default, i.HasDefault = int32(mustParseInt(s, "int32", 32)), true
	return i
}
func (i Int32) GetDefault() (any, bool) { return i.Default, i.HasDefault }
func (Int32) GetTypeDefault() any       { return 0 }

func (t Timeout) SetDefault(s string) Type {
	t.Int32 = t.Int32.SetDefault(s).(Int32)
	return t
}

func (i Int64) SetDefault(s string) Type {
	i.Default, i.HasDefault = mustParseInt(s, "int64", 64), true
	return i
}
func (i Int64) GetDefault() (any, bool) { return i.Default, i.HasDefault }
func (Int64) GetTypeDefault() any       { return 0 }

func (f Float64) SetDefault(s string) Type {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		die("invalid float64 default: %v", err)
	}
	f.Default, f.HasDefault = v, true
	return f
}
func (f Float64) GetDefault() (any, bool) { return f.Default, f.HasDefault }
func (Float64) GetTypeDefault() any       { return 0 }

func (u Uint32) SetDefault(s string) Type {
	u.Default, u.HasDefault = uint32(mustParseUint(s, "uint32", 10, 32)), true
	return u
}
func (u Uint32) GetDefault() (any, bool) { return u.Default, u.HasDefault }
func (Uint32) GetTypeDefault() any       { return 0 }

func (i Varint) SetDefault(s string) Type {
	i.Default, i.HasDefault = int32(mustParseInt(s, "varint", 32)), true
	return i
}
func (i Varint) GetDefault() (any, bool) { return i.Default, i.HasDefault }
func (Varint) GetTypeDefault() any       { return 0 }

func (i Varlong) SetDefault(s string) Type {
	i.Default, i.HasDefault = mustParseInt(s, "varlong", 64), true
	return i
}
func (i Varlong) GetDefault() (any, bool) { return i.Default, i.HasDefault }
func (Varlong) GetTypeDefault() any       { return 0 }

func (s NullableString) SetDefault(v string) Type {
	if v != "null" {
		die("unknown non-null default for nullable string")
	}
	s.HasDefault = true
	return s
}

func (s NullableString) GetDefault() (any, bool) {
	return "nil", s.HasDefault // we return the string so it is rendered correctly
}
func (NullableString) GetTypeDefault() any { return "nil" }

func (b NullableBytes) SetDefault(v string) Type {
	if v != "null" {
		die("unknown non-null default for nullable string")
	}
	b.HasDefault = true
	return b
}

func (b NullableBytes) GetDefault() (any, bool) {
	return "nil", b.HasDefault
}
func (NullableBytes) GetTypeDefault() any { return "nil" }

func (a Array) SetDefault(v string) Type {
	if v != "null" {
		die("unknown non-null default for array")
	}
	a.HasDefault = true
	return a
}

func (a Array) GetDefault() (any, bool) {
	return "nil", a.HasDefault
}
func (Array) GetTypeDefault() any { return "nil" }

func (s Struct) SetDefault(string) Type {
	die("cannot set default on a struct; we already have a default")
	return s
}

func (Struct) GetDefault() (any, bool) {
	return "", false // no GetDefault
}

func (s Struct) GetTypeDefault() any {
	if s.Nullable {
		return "nil"
	}
	// This will not work if a tagged type has its own arrays, but for now
	// nothing has that.
	return fmt.Sprintf("(func() %[1]s { var v %[1]s; v.Default(); return v })() ", s.Name)
}

func (u Uuid) SetDefault(string) Type {
	die("cannot set default on a uuid")
	return u
}

func (Uuid) GetDefault() (any, bool) {
	return "", false // no GetDefault
}

func (Uuid) GetTypeDefault() any {
	return "[16]byte{}"
}

type FlexibleSetter interface {
	AsFromFlexible() Type
}

func (s String) AsFromFlexible() Type         { dup := s; dup.FromFlexible = true; return dup }
func (s NullableString) AsFromFlexible() Type { dup := s; dup.FromFlexible = true; return dup }
func (b Bytes) AsFromFlexible() Type          { dup := b; dup.FromFlexible = true; return dup }
func (b NullableBytes) AsFromFlexible() Type  { dup := b; dup.FromFlexible = true; return dup }
func (a Array) AsFromFlexible() Type          { dup := a; dup.FromFlexible = true; return dup }
func (s Struct) AsFromFlexible() Type         { dup := s; dup.FromFlexible = true; return dup }

func (l *LineWriter) Write(line string, args ...any) {
	fmt.Fprintf(l.buf, line, args...)
	l.buf.WriteByte('\n')
	l.line++
}

func validateMaxVersions(top, on *Struct) {
	for _, f := range on.Fields {
		if f.MinVersion > top.MaxVersion {
			die("field %s min version %d > containing struct %s max version %d", f.FieldName, f.MinVersion, top.Name, top.MaxVersion)
		}
		if f.MaxVersion > top.MaxVersion {
			die("field %s max version %d > containing struct %s max version %d", f.FieldName, f.MaxVersion, top.Name, top.MaxVersion)
		}
		t := f.Type
		for {
			array, ok := t.(Array)
			if !ok {
				break
			}
			t = array.Inner
		}
		if substruct, ok := t.(Struct); ok {
			validateMaxVersions(top, &substruct)
		}
	}
}

// ---- from generate/parse.go ----

// If you are looking here, yes this is a shoddy parser, but it does the job.

// newStructs and newEnums are top level structs that we print at the end.
var (
	newStructs []Struct
	newEnums   []Enum
)

var enums = make(map[string]Enum)

var types = map[string]Type{
	"bool":            Bool{},
	"int8":            Int8{},
	"int16":           Int16{},
	"uint16":          Uint16{},
	"int32":           Int32{},
	"int64":           Int64{},
	"float64":         Float64{},
	"uint32":          Uint32{},
	"varint":          Varint{},
	"varlong":         Varlong{},
	"uuid":            Uuid{},
	"string":          String{},
	"nullable-string": NullableString{},
	"bytes":           Bytes{},
	"nullable-bytes":  NullableBytes{},
	"varint-string":   VarintString{},
	"varint-bytes":    VarintBytes{},
}

// LineScanner is a shoddy scanner that allows us to peek an entire line.
type LineScanner struct {
	file   string
	lineno int
	buf    string
	nlat   int
}

func (l *LineScanner) dief(why string, args ...any) {
	die("%s:%d: "+why, append([]any{l.file, l.lineno}, args...)...)
}

func (l *LineScanner) Ok() bool {
	if l.nlat >= 0 {
		return true
	}
	l.nlat = strings.IndexByte(l.buf, '\n')
	return l.nlat >= 0
}

func (l *LineScanner) Peek() string {
	return l.buf[:l.nlat]
}

func (l *LineScanner) Next() {
	l.lineno++
	l.buf = l.buf[l.nlat+1:]
	l.nlat = -1
}

// BuildFrom parses a struct, building it from the current scanner. Level
// signifies how nested this struct is. Top level structs have a level of 0.
//
// If a blank line is ever encountered, the struct is done being built and
// the done status is bubbled up through all recursion levels.
func (s *Struct) BuildFrom(scanner *LineScanner, key, level int) (done bool) {
	fieldSpaces := strings.Repeat(" ", 2*(level+1))

	var nextComment string
	var err error

	for !done && scanner.Ok() {
		line := scanner.Peek()
		if len(line) == 0 { // struct we were working on is done
			scanner.Next()
			return true
		}
		if !strings.HasPrefix(line, fieldSpaces) {
			return false // inner level struct done
		}

		scanner.Next() // we will be keeping this line, so skip the scanner to the next now

		line = line[len(fieldSpaces):]
		if strings.HasPrefix(line, "//") { // buffer comments
			if nextComment != "" {
				nextComment += "\n"
			}
			nextComment += line
			continue
		}

		// ThrottleMillis and TimeoutMillis are special fields with
		// their own syntax (no ": " separator). TimeoutMillis can
		// also appear as a regular field (with ":"), so we only
		// treat it specially when there is no colon.
		if sf, ok := parseSpecialField(scanner, line); ok {
			if nextComment != "" {
				scanner.dief("unexpected comment on %s: %s", sf.FieldName, nextComment)
			}
			nextComment = ""
			s.Fields = append(s.Fields, sf)
			continue
		}

		// Fields are name on left, type on right.
		fields := strings.Split(line, ": ")
		if len(fields) != 2 || len(fields[0]) == 0 || len(fields[1]) == 0 {
			scanner.dief("improper struct field format on line %q", line)
		}

		f := StructField{
			Comment:    nextComment,
			FieldName:  fields[0],
			MaxVersion: -1,
			Tag:        -1,
		}
		nextComment = ""

		typ := fields[1]

		// We parse field comments first; this is everything following
		// a // after the field.
		if idx := strings.Index(typ, " // "); idx >= 0 {
			f.MinVersion, f.MaxVersion, f.Tag, err = parseFieldComment(typ[idx:])
			if err != nil {
				scanner.dief("unable to parse field comment on line %q: %v", line, err)
			}
			typ = typ[:idx]
		}

		// Now we do some array processing. Arrays can be nested
		// (although they are not nested in our definitions since
		// the flexible tag support).
		// We count the array depth here, check if it is encoded
		// specially, and remove any array decoration.
		//
		// This does not support special modifiers at any level but
		// the outside level.
		var isArray,
			isVarintArray,
			isNullableArray bool
		nullableVersion := 0
		arrayLevel := strings.Count(typ, "[")
		if arrayLevel > 0 {
			if strings.HasPrefix(typ, "varint[") {
				isVarintArray = true
				typ = typ[len("varint"):]
			} else if strings.HasPrefix(typ, "nullable") {
				isNullableArray = true
				typ = typ[len("nullable"):]
				if strings.HasPrefix(typ, "-v") {
					typ = typ[len("-v"):]
					vend := strings.IndexByte(typ, '[')
					if vend < 2 {
						scanner.dief("empty nullable array version number")
					}
					if typ[vend-1] != '+' {
						scanner.dief("max version number bound is unhandled in arrays")
					}
					if nullableVersion, err = strconv.Atoi(typ[:vend-1]); err != nil {
						scanner.dief("improper nullable array version number %q: %v", typ[:vend-1], err)
					}
					typ = typ[vend:]
				}
			}
			typ = typ[arrayLevel : len(typ)-arrayLevel]
			isArray = true
		}

		// Now we check for defaults.
		var hasDefault bool
		var def string
		if start := strings.IndexByte(typ, '('); start >= 0 {
			end := strings.IndexByte(typ[start:], ')')
			if end <= 0 {
				scanner.dief("invalid default: start %d, end %d", start, end)
			}
			hasDefault = true
			def = typ[start+1 : start+end]
			typ = typ[:start]
			if len(f.Comment) > 0 {
				f.Comment += "\n//\n"
			}
			f.Comment += "// This field has a default of " + def + "."
		}

		if strings.HasPrefix(typ, "=>") || strings.HasPrefix(typ, "nullable=>") {
			// Nested struct; recurse.
			newS := Struct{
				FromFlexible: s.FromFlexible,
				FlexibleAt:   s.FlexibleAt,
				Nullable:     strings.HasPrefix(typ, "nullable"),
			}
			newS.Name = s.Name + f.FieldName
			newS.Key = key // for kmsg generating ordering purposes
			newS.Anonymous = true
			if isArray {
				if rename := typ[2:]; rename != "" { // allow rename hint after `=>`; braces were stripped above
					newS.Name = s.Name + rename
				} else {
					newS.Name = singularize(newS.Name)
				}
			}
			done = newS.BuildFrom(scanner, key, level+1)
			f.Type = newS
			newStructs = append(newStructs, newS)
		} else {
			f.Type = resolveType(scanner, s, typ, key, line)
			if hasDefault {
				f.Type = f.Type.(Defaulter).SetDefault(def)
			}
			if s.FromFlexible {
				if setter, ok := f.Type.(FlexibleSetter); ok {
					f.Type = setter.AsFromFlexible()
				}
			}
		}

		// Finally, this field is an array, wrap what we parsed in an
		// array (perhaps multilevel).
		if isArray {
			for arrayLevel > 1 {
				f.Type = Array{Inner: f.Type, FromFlexible: s.FromFlexible}
				arrayLevel--
			}
			f.Type = Array{
				Inner:           f.Type,
				IsVarintArray:   isVarintArray,
				IsNullableArray: isNullableArray,
				NullableVersion: nullableVersion,
				FromFlexible:    s.FromFlexible,
			}
		}

		s.Fields = append(s.Fields, f)
	}

	return done
}

// resolveType resolves a type name string to a Type, handling special type
// prefixes (length-field-minus, nullable-string-v, enum-) and named type
// lookup. The caller handles defaults and flexible setter application.
func resolveType(scanner *LineScanner, s *Struct, typ string, key int, line string) Type {
	switch {
	case strings.HasPrefix(typ, "length-field-minus => "):
		typ = strings.TrimPrefix(typ, "length-field-minus => ")
		from, minus, err := parseFieldLength(typ)
		if err != nil {
			scanner.dief("unable to parse field-length-bytes in %q: %v", typ, err)
		}
		return FieldLengthMinusBytes{
			Field:       from,
			LengthMinus: minus,
		}

	case strings.HasPrefix(typ, "nullable-string-v"):
		if typ[len(typ)-1] != '+' {
			scanner.dief("invalid missing + at end of nullable-string-v; nullable-strings cannot become nullable and then become non-nullable")
		}
		nullableVersion, err := strconv.Atoi(typ[len("nullable-string-v") : len(typ)-1])
		if err != nil {
			scanner.dief("improper nullable string version number in %q: %v", typ, err)
		}
		return NullableString{
			FromFlexible:    s.FromFlexible,
			NullableVersion: nullableVersion,
		}

	case strings.HasPrefix(typ, "enum-"):
		typ = strings.TrimPrefix(typ, "enum-")
		if _, ok := enums[typ]; !ok {
			scanner.dief("unknown enum %q on line %q", typ, line)
		}
		return enums[typ]

	default:
		got := types[typ]
		if got == nil {
			scanner.dief("unknown type %q on line %q", typ, line)
		}
		if s, ok := got.(Struct); ok {
			// If this field's struct type specified no encoding, then it
			// is not anonymous, but it is tied to a request and should be
			// ordered by that request when generating code.
			//
			// The default key is -1, so if we still have the key, we fix
			// it and also fix the key in the newStructs slice.
			if s.WithNoEncoding && s.Key == -1 {
				for i := range newStructs {
					if newStructs[i].Name == s.Name {
						newStructs[i].Key = key
					}
				}
				s.Key = key
				types[typ] = s
			}
		}
		return got
	}
}

// validateStructs validates all parsed structs. This centralizes checks that
// were previously scattered across code generation, catching errors earlier
// with clearer messages.
func validateStructs() {
	for _, s := range newStructs {
		validateStructFields(s.Name, s.Fields, s.FromFlexible)
	}
}

func validateStructFields(structName string, fields []StructField, fromFlexible bool) {
	tags := make(map[int]StructField)
	for _, f := range fields {
		if f.MinVersion == -1 && f.MaxVersion > 0 {
			die("struct %s field %s: unexpected negative min version %d while max version %d", structName, f.FieldName, f.MinVersion, f.MaxVersion)
		}
		if f.MinVersion == -1 && f.Tag < 0 {
			die("struct %s field %s: min version -1 with no tag", structName, f.FieldName)
		}
		if f.Tag >= 0 {
			if prev, exists := tags[f.Tag]; exists {
				die("struct %s: duplicate tag %d on fields %s and %s", structName, f.Tag, prev.FieldName, f.FieldName)
			}
			tags[f.Tag] = f
		}
	}
	if fromFlexible {
		for i := range len(tags) {
			f, exists := tags[i]
			if !exists {
				die("struct %s: saw %d tags, but did not see tag %d; expected monotonically increasing", structName, len(tags), i)
			}
			if _, canDefault := f.Type.(Defaulter); !canDefault {
				die("struct %s field %s: tagged field has no Defaulter", structName, f.FieldName)
			}
		}
	}
}

// 0: entire line
// 1: min version, if versioned
// 2: max version, if versioned, if exists
// 3: tag, if versioned, if exists
// 4: tag, if not versioned
var fieldRe = regexp.MustCompile(`^ // (?:v(\d+)(?:\+|\-v(\d+))(?:, tag (\d+))?|tag (\d+))$`)

func parseFieldComment(in string) (min, max, tag int, err error) {
	match := fieldRe.FindStringSubmatch(in)
	if len(match) == 0 {
		return 0, 0, 0, fmt.Errorf("invalid field comment %q", in)
	}

	if match[4] != "" { // not versioned
		tag, _ := strconv.Atoi(match[4])
		return -1, -1, tag, nil
	}

	min, _ = strconv.Atoi(match[1])
	max, _ = strconv.Atoi(match[2])
	tag, _ = strconv.Atoi(match[3])
	if match[2] == "" {
		max = -1
	} else if max < min {
		return 0, 0, 0, fmt.Errorf("min %d > max %d on line %q", min, max, in)
	}
	if match[3] == "" {
		tag = -1
	}
	return min, max, tag, nil
}

func parseFieldLength(in string) (string, int, error) {
	lr := strings.Split(in, " - ")
	if len(lr) != 2 {
		return "", 0, fmt.Errorf("expected only two fields around ' = ', saw %d", len(lr))
	}
	length, err := strconv.Atoi(lr[1])
	if err != nil {
		return "", 0, fmt.Errorf("unable to parse length sub in %q", lr[1])
	}
	return lr[0], length, nil
}

// 0: entire thing
// 1: optional version switched to post-reply throttling
// 2: optional version introduced
var throttleRe = regexp.MustCompile(`^ThrottleMillis(?:\((\d+)\))?(?: // v(\d+)\+)?$`)

func parseThrottleMillis(scanner *LineScanner, in string) StructField {
	match := throttleRe.FindStringSubmatch(in)
	if len(match) == 0 {
		scanner.dief("throttle line does not match: %s", in)
	}

	typ := Throttle{}
	typ.Switchup, _ = strconv.Atoi(match[1])

	s := StructField{
		MaxVersion: -1,
		Tag:        -1,
		FieldName:  "ThrottleMillis",
		Type:       typ,
	}
	s.MinVersion, _ = strconv.Atoi(match[2])

	const switchupFmt = `// ThrottleMillis is how long of a throttle Kafka will apply to the client
// after this request.
// For Kafka < 2.0.0, the throttle is applied before issuing a response.
// For Kafka >= 2.0.0, the throttle is applied after issuing a response.
//
// This request switched at version %d.`

	const static = `// ThrottleMillis is how long of a throttle Kafka will apply to the client
// after responding to this request.`

	s.Comment = static
	if typ.Switchup > 0 {
		s.Comment = fmt.Sprintf(switchupFmt, typ.Switchup)
	}

	return s
}

// 0: entire thing
// 1: optional default
// 2: optional version introduced
var timeoutRe = regexp.MustCompile(`^TimeoutMillis(?:\((\d+)\))?(?: // v(\d+)\+)?$`)

func parseTimeoutMillis(scanner *LineScanner, in string) StructField {
	match := timeoutRe.FindStringSubmatch(in)
	if len(match) == 0 {
		scanner.dief("timeout line does not match: %s", in)
	}

	s := StructField{
		Comment: `// TimeoutMillis is how long Kafka can wait before responding to this request.
// This field has no effect on Kafka's processing of the request; the request
// will continue to be processed if the timeout is reached. If the timeout is
// reached, Kafka will reply with a REQUEST_TIMED_OUT error.`,
		MaxVersion: -1,
		Tag:        -1,
		FieldName:  "TimeoutMillis",
		Type:       Timeout{},
	}
	s.MinVersion, _ = strconv.Atoi(match[2])
	def := "15000" // default to 15s for all timeouts
	if match[1] != "" {
		def = match[1]
	}
	s.Comment += "\n//\n// This field has a default of " + def + "."
	s.Type = s.Type.(Defaulter).SetDefault(def)

	return s
}

// parseSpecialField checks if a line is a special field (ThrottleMillis or
// TimeoutMillis without a colon separator) and returns the parsed field.
func parseSpecialField(scanner *LineScanner, line string) (StructField, bool) {
	if strings.Contains(line, "ThrottleMillis") {
		return parseThrottleMillis(scanner, line), true
	}
	if strings.Contains(line, "TimeoutMillis") && !strings.Contains(line, ":") {
		return parseTimeoutMillis(scanner, line), true
	}
	return StructField{}, false
}

const notTopLevelSuffix = " => not top level"

// Parse parses the raw contents of a messages file and adds all newly
// parsed structs to newStructs.
func Parse(file string, raw []byte) {
	scanner := &LineScanner{
		file: file,
		buf:  string(raw),
		nlat: -1,
	}

	var nextComment strings.Builder
	resetComment := func() {
		l := nextComment.Len()
		nextComment.Reset()
		nextComment.Grow(l)
	}

	for scanner.Ok() {
		line := scanner.Peek()
		scanner.Next()
		if len(line) == 0 { // allow for arbitrary comments
			resetComment()
			continue
		}

		if strings.HasPrefix(line, "//") { // comment? keep and continue
			if nextComment.Len() > 0 {
				nextComment.WriteByte('\n')
			}
			nextComment.WriteString(line)
			continue
		}

		s := Struct{
			Comment: nextComment.String(),

			FlexibleAt: -1, // by default, not flexible
		}
		resetComment()

		topLevel := true
		withVersionField, withNoEncoding := false, false

		flexibleAt := -1
		fromFlexible := false

		name := line
		if idx := strings.Index(line, notTopLevelSuffix); idx > 0 {
			name = line[:idx]
			rem := line[idx+len(notTopLevelSuffix):]
			if rem != "" {
				for _, part := range strings.Split(strings.TrimPrefix(rem, ", "), ", ") {
					switch {
					case part == "no encoding":
						withNoEncoding = true
					case part == "with version field":
						withVersionField = true
					case strings.HasPrefix(part, "flexible v"):
						vstr := strings.TrimSuffix(part[len("flexible v"):], "+")
						flexible, err := strconv.Atoi(vstr)
						if err != nil || flexible < 0 {
							scanner.dief("flexible version on line %q parse err: %v", line, err)
						}
						flexibleAt = flexible
						fromFlexible = true
					default:
						scanner.dief("unknown not-top-level modifier %q on line %q", part, line)
					}
				}
			}
		}

		key := -1
		save := func() {
			s.Name = name
			s.TopLevel = topLevel
			s.WithVersionField = withVersionField
			s.WithNoEncoding = withNoEncoding
			s.Key = key
			if !topLevel && fromFlexible {
				s.FromFlexible = fromFlexible
				s.FlexibleAt = flexibleAt
			}

			s.BuildFrom(scanner, key, 0)
			types[name] = s
			newStructs = append(newStructs, s)
		}

		if line != name { // if we trimmed, this is not top level
			topLevel = false
			save()
			continue
		}

		if strings.HasSuffix(name, "Response =>") { // response following a request?
			last := strings.Replace(name, "Response =>", "Request", 1)
			prior := &newStructs[len(newStructs)-1]
			if prior.Name != last {
				scanner.dief("from %q does not refer to last message defn on line %q", last, line)
			}
			name = strings.TrimSuffix(name, " =>")
			prior.ResponseKind = name
			s.RequestKind = prior.Name
			if prior.FromFlexible {
				s.FlexibleAt = prior.FlexibleAt
				s.FromFlexible = true
			}
			key = prior.Key
			s.MaxVersion = prior.MaxVersion
			save()
			continue
		}

		// At this point, we are dealing with a top level request.
		// Format: Name => key N, max version N[, admin|group coordinator|txn coordinator][, flexible vN+]
		delim := strings.Index(name, " => ")
		if delim == -1 {
			scanner.dief("missing struct delimiter on line %q", line)
		}
		modifiers := name[delim+4:]
		name = name[:delim]

		for _, part := range strings.Split(modifiers, ", ") {
			switch {
			case strings.HasPrefix(part, "key "):
				var err error
				if key, err = strconv.Atoi(part[len("key "):]); err != nil {
					scanner.dief("key on line %q parse err: %v", line, err)
				}
				if key > maxKey {
					maxKey = key
				}
			case strings.HasPrefix(part, "max version "):
				max, err := strconv.Atoi(part[len("max version "):])
				if err != nil {
					scanner.dief("max version on line %q parse err: %v", line, err)
				}
				s.MaxVersion = max
			case part == "admin":
				s.Admin = true
			case part == "group coordinator":
				s.GroupCoordinator = true
			case part == "txn coordinator":
				s.TxnCoordinator = true
			case part == "share coordinator":
				s.ShareCoordinator = true
			case strings.HasPrefix(part, "flexible v"):
				vstr := strings.TrimSuffix(part[len("flexible v"):], "+")
				flexible, err := strconv.Atoi(vstr)
				if err != nil || flexible < 0 {
					scanner.dief("flexible version on line %q parse err: %v", line, err)
				}
				s.FlexibleAt = flexible
				s.FromFlexible = true
			default:
				scanner.dief("unknown request modifier %q on line %q", part, line)
			}
		}

		save()
	}
}

// singularize converts a plural field name to singular for struct type naming.
func singularize(s string) string {
	switch {
	case strings.HasSuffix(s, "us"): // already singular (Status, Corpus, etc.)
		return s
	case strings.HasSuffix(s, "ches"),
		strings.HasSuffix(s, "shes"),
		strings.HasSuffix(s, "sses"),
		strings.HasSuffix(s, "xes"),
		strings.HasSuffix(s, "zes"):
		return strings.TrimSuffix(s, "es")
	case strings.HasSuffix(s, "ies"):
		return strings.TrimSuffix(s, "ies") + "y"
	default:
		return strings.TrimSuffix(s, "s")
	}
}

func ParseEnums(file string, raw []byte) {
	scanner := &LineScanner{
		file: file,
		buf:  string(raw),
		nlat: -1,
	}

	var nextComment strings.Builder
	resetComment := func() {
		l := nextComment.Len()
		nextComment.Reset()
		nextComment.Grow(l)
	}

	writeComment := func(line string) {
		if nextComment.Len() > 0 {
			nextComment.WriteByte('\n')
		}
		nextComment.WriteString(line)
	}

	getComment := func() string {
		r := nextComment.String()
		resetComment()
		return r
	}

	// 1: name
	// 2: type
	// 3: if camel case (optional)
	enumNameRe := regexp.MustCompile(`^([A-Za-z]+) ([^ ]+) (camelcase )?\($`)
	// 1: value (number)
	// 2: word (meaning)
	enumFieldRe := regexp.MustCompile(`^ {2}(\d+): ([A-Z_a-z]+)$`)

	for scanner.Ok() {
		line := scanner.Peek()
		scanner.Next()
		if len(line) == 0 { // allow for arbitrary empty lines
			resetComment()
			continue
		}

		if strings.HasPrefix(line, "//") { // comment? keep and continue
			writeComment(line)
			continue
		}
		nameMatch := enumNameRe.FindStringSubmatch(line)
		if len(nameMatch) == 0 {
			scanner.dief("invalid enum name, unable to match `Name type (`")
		}

		e := Enum{
			Comment: getComment(),

			Name:      nameMatch[1],
			Type:      types[nameMatch[2]],
			CamelCase: nameMatch[3] != "",
		}

		var ev EnumValue
		canStop := true
		saveValue := func() {
			ev.Comment = getComment()
			e.Values = append(e.Values, ev)
			if ev.Value == 0 {
				e.HasZero = true
			}
			ev = EnumValue{}
			canStop = true
		}

	out:
		for scanner.Ok() {
			line := scanner.Peek()
			scanner.Next()

			fieldMatch := enumFieldRe.FindStringSubmatch(line)

			switch {
			default:
				scanner.dief("unable to determine line %s", line)
			case strings.HasPrefix(line, "  //"):
				canStop = false
				writeComment(line)
			case len(fieldMatch) > 0:
				num, err := strconv.Atoi(fieldMatch[1])
				if err != nil {
					scanner.dief("unable to convert to number on line %s", line)
				}
				ev.Value = num
				ev.Word = fieldMatch[2]

				saveValue()

			case line == ")":
				break out
			}
		}
		if !canStop {
			scanner.dief("invalid enum ending with a comment")
		}

		enums[e.Name] = e
		newEnums = append(newEnums, e)
	}
}

// ---- from generate/gen.go ----

func (Bool) TypeName() string                  { return "bool" }
func (Int8) TypeName() string                  { return "int8" }
func (Int16) TypeName() string                 { return "int16" }
func (Uint16) TypeName() string                { return "uint16" }
func (Int32) TypeName() string                 { return "int32" }
func (Int64) TypeName() string                 { return "int64" }
func (Float64) TypeName() string               { return "float64" }
func (Uint32) TypeName() string                { return "uint32" }
func (Varint) TypeName() string                { return "int32" }
func (Varlong) TypeName() string               { return "int64" }
func (Uuid) TypeName() string                  { return "[16]byte" }
func (String) TypeName() string                { return "string" }
func (NullableString) TypeName() string        { return "*string" }
func (Bytes) TypeName() string                 { return "[]byte" }
func (NullableBytes) TypeName() string         { return "[]byte" }
func (VarintString) TypeName() string          { return "string" }
func (VarintBytes) TypeName() string           { return "[]byte" }
func (a Array) TypeName() string               { return "[]" + a.Inner.TypeName() }
func (Throttle) TypeName() string              { return "int32" }
func (FieldLengthMinusBytes) TypeName() string { return "[]byte" }

func (s Struct) TypeName() string {
	if s.Nullable {
		return "*" + s.Name
	}
	return s.Name
}

func (e Enum) TypeName() string { return e.Name }

// minSize returns the fewest bytes t can be encoded in at version, if the
// version is flexible or not.
func minSize(t Type, version int, flexible bool) int {
	switch t := t.(type) {
	case Bool, Int8, Varint, Varlong, VarintString, VarintBytes:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Throttle, Timeout:
		return 4
	case Int64, Float64:
		return 8
	case Uuid:
		return 16
	case FieldLengthMinusBytes:
		return 0
	case Enum:
		return minSize(t.Type, version, flexible)
	case String:
		return lenSize(t.FromFlexible && flexible, 2)
	case NullableString:
		return lenSize(t.FromFlexible && flexible, 2)
	case Bytes:
		return lenSize(t.FromFlexible && flexible, 4)
	case NullableBytes:
		return lenSize(t.FromFlexible && flexible, 4)
	case Array:
		return lenSize(t.FromFlexible && flexible || t.IsVarintArray, 4)
	case Struct:
		if t.Nullable {
			return 1
		}
		fields := t.Fields
		if t.WithVersionField {
			fields = fields[1:] // see Struct.WriteDecode
		}
		var n int
		for _, f := range fields {
			if f.inBody(version) {
				n += minSize(f.Type, version, flexible)
			}
		}
		if t.FromFlexible && flexible {
			n++ // the tag count
		}
		return n
	}
	die("unknown type %T for minSize", t)
	return 0
}

// lenSize returns the fewest bytes of a length: a one byte uvarint if compact,
// or the classic size.
func lenSize(compact bool, classic int) int {
	if compact {
		return 1
	}
	return classic
}

// inBody returns whether f is decoded outside of tags at version, matching
// writeBeginAndTag.
func (f StructField) inBody(version int) bool {
	switch {
	case f.MaxVersion > -1:
		return version >= f.MinVersion && version <= f.MaxVersion
	case f.MinVersion > 0:
		return version >= f.MinVersion
	case f.MinVersion == -1:
		return false
	default:
		return true
	}
}

// lastVersionChange returns the version from which minSize(t) stops changing.
func lastVersionChange(t Type) int {
	s, ok := t.(Struct)
	if !ok || s.Nullable {
		return 0
	}
	var last int
	for _, f := range s.Fields {
		last = max(last, f.MinVersion, f.MaxVersion+1, lastVersionChange(f.Type))
	}
	return last
}
