package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

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
