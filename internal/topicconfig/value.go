package topicconfig

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Type is a config's value type. The numbers are the ConfigType codes of DescribeConfigs v3+.
type Type int8

const (
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3 // 32-bit, parsed to int32
	TypeShort    Type = 4 // 16-bit, parsed to int16
	TypeLong     Type = 5 // 64-bit, parsed to int64
	TypeDouble   Type = 6 // parsed to float64
	TypeList     Type = 7 // comma separated, parsed to []string
	TypeClass    Type = 8 // a Java class name, kept as a string
	TypePassword Type = 9 // kept as a string, never shown
)

// ConfigType is the DescribeConfigs v3+ code.
func (t Type) ConfigType() kmsg.ConfigType { return kmsg.ConfigType(t) }

// javaName is the name Kafka uses in "Not a number of type INT" messages.
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "BOOLEAN"
	case TypeString:
		return "STRING"
	case TypeInt:
		return "INT"
	case TypeShort:
		return "SHORT"
	case TypeLong:
		return "LONG"
	case TypeDouble:
		return "DOUBLE"
	case TypeList:
		return "LIST"
	case TypeClass:
		return "CLASS"
	case TypePassword:
		return "PASSWORD"
	}
	return "UNKNOWN"
}

// commaWithWhitespace is ConfigDef.COMMA_WITH_WHITESPACE.
var commaWithWhitespace = regexp.MustCompile(`\s*,\s*`)

// parse converts a raw string to the typed value, as ConfigDef.parseType does: the value is
// trimmed first; numbers are decimal; booleans are case-insensitive true/false; an empty list
// string is the empty list.
func parse(name, raw string, t Type) (any, *Error) {
	s := strings.TrimSpace(raw)
	notNumber := func() *Error { return valueError(name, raw, "Not a number of type "+t.String()) }
	switch t {
	case TypeBoolean:
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, valueError(name, raw, "Expected value to be either true or false")
	case TypeString, TypeClass, TypePassword:
		return s, nil
	case TypeInt:
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, notNumber()
		}
		return int32(v), nil
	case TypeShort:
		v, err := strconv.ParseInt(s, 10, 16)
		if err != nil {
			return nil, notNumber()
		}
		return int16(v), nil
	case TypeLong:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, notNumber()
		}
		return v, nil
	case TypeDouble:
		// Java's Double.parseDouble accepts NaN; no Kafka range check can hold for it, so we
		// refuse it here rather than store a value no validator understood.
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) {
			return nil, notNumber()
		}
		return v, nil
	case TypeList:
		if s == "" {
			return []string{}, nil
		}
		return commaWithWhitespace.Split(s, -1), nil
	}
	panic(fmt.Sprintf("topicconfig: unknown type %d", t))
}

// format renders a typed value as Kafka's ConfigDef.convertToString does.
func format(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return javaDouble(x)
	case []string:
		return strings.Join(x, ",")
	}
	panic(fmt.Sprintf("topicconfig: cannot format %T", v))
}

// javaString renders a value as Java's toString would in an exception message (lists as
// "[a, b]").
func javaString(v any) string {
	if l, ok := v.([]string); ok {
		return "[" + strings.Join(l, ", ") + "]"
	}
	return format(v)
}

// javaDouble mimics Double.toString: "0.5", "1.0", "1.0E-4", "1.0E7".
func javaDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64) // e.g. 1E-04, 1.5E+07
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// validator checks a parsed value. It returns nil when the value is acceptable.
type validator func(name string, v any) *Error

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int16:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	panic(fmt.Sprintf("topicconfig: %T is not a number", v))
}

// atLeast is ConfigDef.Range.atLeast.
func atLeast(min int64) validator {
	return func(name string, v any) *Error {
		if toFloat(v) < float64(min) {
			return valueError(name, v, "Value must be at least "+strconv.FormatInt(min, 10))
		}
		return nil
	}
}

// between is ConfigDef.Range.between.
func between(min, max int64) validator {
	return func(name string, v any) *Error {
		f := toFloat(v)
		if f < float64(min) {
			return valueError(name, v, "Value must be at least "+strconv.FormatInt(min, 10))
		}
		if f > float64(max) {
			return valueError(name, v, "Value must be no more than "+strconv.FormatInt(max, 10))
		}
		return nil
	}
}

// oneOf is ConfigDef.ValidString.in (case-sensitive).
func oneOf(valid ...string) validator {
	return func(name string, v any) *Error {
		s := v.(string)
		for _, ok := range valid {
			if s == ok {
				return nil
			}
		}
		return valueError(name, v, "String must be one of: "+strings.Join(valid, ", "))
	}
}

// oneOfFold is ConfigDef.CaseInsensitiveValidString.in.
func oneOfFold(valid ...string) validator {
	return func(name string, v any) *Error {
		s := v.(string)
		for _, ok := range valid {
			if strings.EqualFold(s, ok) {
				return nil
			}
		}
		return valueError(name, v, "String must be one of (case insensitive): "+strings.Join(valid, ", "))
	}
}

// listOf is ConfigDef.ValidList.in(valid...): the empty list is allowed, entries must be
// non-empty, unique and among valid.
func listOf(valid ...string) validator {
	str := oneOf(valid...)
	return func(name string, v any) *Error {
		l := v.([]string)
		seen := make(map[string]bool, len(l))
		for _, e := range l {
			if seen[e] {
				return invalidConfig("Configuration '%s' values must not be duplicated.", name)
			}
			seen[e] = true
		}
		for _, e := range l {
			if e == "" {
				return invalidConfig("Configuration '%s' values must not be empty.", name)
			}
			if err := str(name, e); err != nil {
				return err
			}
		}
		return nil
	}
}

var replicaEntry = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

// throttledReplicas is ThrottledReplicaListValidator: "*" or partition:broker pairs.
func throttledReplicas(name string, v any) *Error {
	l := v.([]string)
	all := true
	for _, e := range l {
		if !replicaEntry.MatchString(strings.TrimSpace(e)) {
			all = false
			break
		}
	}
	if all || strings.Join(l, "") == "*" {
		return nil
	}
	return valueError(name, v, name+" must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
}

// gzipLevel is CompressionType.GZIP.levelValidator: 1..9 or -1 (zlib's default).
func gzipLevel(name string, v any) *Error {
	l := v.(int32)
	if l > 9 || (l < 1 && l != -1) {
		return valueError(name, v, "Value must be between 1 and 9 or equal to -1")
	}
	return nil
}
