// KRaft metadata records for the wire target. A record is a "not top level, with version
// field" struct, as franz-go's misc file defines the group and transaction log records,
// and the MetadataRecordType enum maps each record type (KRaft's apiKey) to the struct of
// that name. KRaft frames a record as unsigned varints (frame version, type, version)
// before the body (MetadataRecordSerde), where franz-go's AppendTo and ReadFrom put the
// version as an int16 before it; so each record also gets AppendBodyTo and ReadBodyFrom,
// written by franz-go's own field writers over the fields after Version.

package main

import (
	"fmt"
	"regexp"
	"strconv"
)

// metadataRecordEnum names the enum whose values are the metadata record types.
const metadataRecordEnum = "MetadataRecordType"

// metadataRecords returns the record structs of the MetadataRecordType enum, in enum
// order, and the enum; nil if the definitions have no such enum.
func metadataRecords() ([]Struct, *Enum) {
	var e *Enum
	for i := range newEnums {
		if newEnums[i].Name == metadataRecordEnum {
			e = &newEnums[i]
		}
	}
	if e == nil {
		return nil, nil
	}
	if !e.CamelCase {
		die("enum %s: must be camelcase (its words are record type names)", metadataRecordEnum)
	}
	byName := make(map[string]Struct)
	for _, s := range newStructs {
		byName[s.Name] = s
	}
	var recs []Struct
	for _, v := range e.Values {
		s, ok := byName[v.Word]
		if !ok {
			die("enum %s value %d: no struct %s", metadataRecordEnum, v.Value, v.Word)
		}
		if s.TopLevel || !s.WithVersionField || s.FlexibleAt < 0 {
			die("metadata record %s: must be 'not top level, with version field, flexible v<N>+'", s.Name)
		}
		recs = append(recs, s)
	}
	return recs, e
}

// recordMaxVersion is the top of a record's versions, from its enum value's comment
// ("versions 0-N", Kafka's validVersions): a version that only adds a tagged field (most
// of KRaft's) shows in no field, so it cannot be inferred from the definition.
func recordMaxVersion(v EnumValue) int {
	m := versionsRe.FindStringSubmatch(v.Comment)
	if m == nil {
		die("enum %s value %s: its comment must say \"versions 0-N\"", metadataRecordEnum, v.Word)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var versionsRe = regexp.MustCompile(`^ *// versions 0-(\d+)$`)

// recordBody is s without its Version field: what KRaft encodes after the frame.
func recordBody(s Struct) Struct {
	body := s
	body.Fields = s.Fields[1:]
	body.WithVersionField = false
	return body
}

// writeMetadataRecords writes the methods that make each record a wire.MetadataRecord and
// NewMetadataRecord, which makes an empty record of a type.
func writeMetadataRecords(l *LineWriter) {
	recs, e := metadataRecords()
	if e == nil {
		return
	}
	for i, s := range recs {
		const_ := fmt.Sprintf("%s%s", metadataRecordEnum, e.Values[i].Word)
		l.Write("// Type returns %s (%d).", const_, e.Values[i].Value)
		l.Write("func (*%s) Type() %s { return %s }", s.Name, metadataRecordEnum, const_)
		l.Write("// MaxVersion returns the highest version of %s this package encodes.", s.Name)
		l.Write("func (*%s) MaxVersion() int16 { return %d }", s.Name, recordMaxVersion(e.Values[i]))
		l.Write("func (v *%s) GetVersion() int16 { return v.Version }", s.Name)
		l.Write("func (v *%s) SetVersion(version int16) { v.Version = version }", s.Name)

		l.Write("// AppendBodyTo appends v's body at v.Version, as KRaft writes it after the frame:")
		l.Write("// AppendTo without the int16 version before the fields.")
		l.Write("func (v *%s) AppendBodyTo(dst []byte) []byte {", s.Name)
		l.Write("version := v.Version")
		l.Write("_ = version")
		l.Write("isFlexible := version >= %d", s.FlexibleAt)
		l.Write("_ = isFlexible")
		recordBody(s).WriteAppend(l)
		l.Write("return dst")
		l.Write("}")

		l.Write("// ReadBodyFrom decodes src, a body at version as AppendBodyTo writes it, into v;")
		l.Write("// bytes after the body are an error (ErrMetadataTrailing), as in KRaft.")
		l.Write("func (v *%s) ReadBodyFrom(src []byte, version int16) error {", s.Name)
		l.Write("return v.readBodyFrom(src, version, false)")
		l.Write("}")
		l.Write("// UnsafeReadBodyFrom is ReadBodyFrom with strings aliasing src.")
		l.Write("func (v *%s) UnsafeReadBodyFrom(src []byte, version int16) error {", s.Name)
		l.Write("return v.readBodyFrom(src, version, true)")
		l.Write("}")
		l.Write("func (v *%s) readBodyFrom(src []byte, version int16, unsafe bool) error {", s.Name)
		l.Write("v.Default()")
		l.Write("v.Version = version")
		l.Write("b := kbin.Reader{Src: src}")
		l.Write("isFlexible := version >= %d", s.FlexibleAt)
		l.Write("_ = isFlexible")
		s.WriteDecode(l) // skips the Version field of a 'with version field' struct
		l.Write("if err := b.Complete(); err != nil { return err }")
		l.Write("if len(b.Src) > 0 { return ErrMetadataTrailing }") // KRaft refuses them too
		l.Write("return nil")
		l.Write("}")
	}

	l.Write("// MetadataRecordTypes returns every record type this package has, ascending.")
	l.Write("func MetadataRecordTypes() []%s {", metadataRecordEnum)
	l.Write("return []%s{", metadataRecordEnum)
	for i := range recs {
		l.Write("%s%s,", metadataRecordEnum, e.Values[i].Word)
	}
	l.Write("}")
	l.Write("}")

	l.Write("// NewMetadataRecord returns an empty record of type t with its defaults set, or nil")
	l.Write("// if t is no type of this package.")
	l.Write("func NewMetadataRecord(t %s) MetadataRecord {", metadataRecordEnum)
	l.Write("switch t {")
	for i, s := range recs {
		l.Write("case %s%s:", metadataRecordEnum, e.Values[i].Word)
		l.Write("r := New%s()", s.Name)
		l.Write("return &r")
	}
	l.Write("}")
	l.Write("return nil")
	l.Write("}")
}
