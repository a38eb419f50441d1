package main

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordFormat is a compiled --format template, kcat -f style:
//
//	%t topic   %p partition   %o offset   %T timestamp (ms)   %k key   %v or %s value
//	%K key length (-1: null)   %S value length (-1: null)   %h headers as k=v,k=v   %% a %
//	\n \t \r \\ escapes
//
// Share consumption (parseShareFormat) adds %d, the record's delivery count.
type recordFormat []formatPart

// formatPart is literal text (verb 0) or one % verb.
type formatPart struct {
	verb byte
	text string
}

func parseFormat(s string) (recordFormat, error) { return parseFormatVerbs(s, false) }

// parseShareFormat is parseFormat with %d, the delivery count of a share-group record.
func parseShareFormat(s string) (recordFormat, error) { return parseFormatVerbs(s, true) }

func parseFormatVerbs(s string, delivery bool) (recordFormat, error) {
	var out recordFormat
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			out = append(out, formatPart{text: string(lit)})
			lit = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '\\' {
			lit = append(lit, c)
			continue
		}
		if i+1 == len(s) {
			return nil, usagef("--format %q: %c at the end", s, c)
		}
		i++
		n := s[i]
		if c == '\\' {
			switch n {
			case 'n':
				lit = append(lit, '\n')
			case 't':
				lit = append(lit, '\t')
			case 'r':
				lit = append(lit, '\r')
			case '\\':
				lit = append(lit, '\\')
			default:
				return nil, usagef("--format %q: unknown escape \\%c (\\n, \\t, \\r, \\\\)", s, n)
			}
			continue
		}
		switch n {
		case '%':
			lit = append(lit, '%')
		case 's':
			flush()
			out = append(out, formatPart{verb: 'v'})
		case 't', 'p', 'o', 'T', 'k', 'v', 'K', 'S', 'h':
			flush()
			out = append(out, formatPart{verb: n})
		case 'd':
			if !delivery {
				return nil, usagef("--format %q: %%d (delivery count) is for share consume only", s)
			}
			flush()
			out = append(out, formatPart{verb: n})
		default:
			verbs := "%t %p %o %T %k %v %s %K %S %h %%"
			if delivery {
				verbs = "%t %p %o %T %k %v %s %K %S %h %d %%"
			}
			return nil, usagef("--format %q: unknown verb %%%c (%s)", s, n, verbs)
		}
	}
	flush()
	return out, nil
}

// appendRecord appends r formatted to dst.
func (f recordFormat) appendRecord(dst []byte, r *kgo.Record) []byte {
	for _, p := range f {
		switch p.verb {
		case 0:
			dst = append(dst, p.text...)
		case 't':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'd':
			dst = strconv.AppendInt(dst, int64(r.DeliveryCount()), 10)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'k':
			dst = append(dst, r.Key...)
		case 'v':
			dst = append(dst, r.Value...)
		case 'K':
			dst = appendLen(dst, r.Key)
		case 'S':
			dst = appendLen(dst, r.Value)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst
}

func appendLen(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "-1"...)
	}
	return strconv.AppendInt(dst, int64(len(b)), 10)
}
