// The helpers generated code calls, copied from github.com/twmb/franz-go/pkg/kmsg v1.15.1
// (codec.go whole; from api.go: Tags, internalReadTags and internalReadTagsSlow), because
// kmsg's are unexported and the generator writes calls to them unqualified. Changes: the
// package clause and the kbin import (franz-go's public pkg/kbin, which kmsg's internal
// kbin copies); the code is verbatim, so these messages encode and decode as kmsg's do.
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

package wire

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request, Response and Requestor are kmsg's: the generated types satisfy kmsg.Request
// and kmsg.Response, so kgo sends them and exactq's server dispatches them like kmsg's.
type (
	Request   = kmsg.Request
	Response  = kmsg.Response
	Requestor = kmsg.Requestor
)

// ---- from kmsg/codec.go ----
// Generated code reads and appends fixed size fields with these. A call is
// much smaller than the inlined kbin function at every field.

//go:noinline
func readBool(b *kbin.Reader) bool { return b.Bool() }

//go:noinline
func readInt8(b *kbin.Reader) int8 { return b.Int8() }

//go:noinline
func readInt16(b *kbin.Reader) int16 { return b.Int16() }

//go:noinline
func readUint16(b *kbin.Reader) uint16 { return b.Uint16() }

//go:noinline
func readInt32(b *kbin.Reader) int32 { return b.Int32() }

//go:noinline
func readInt64(b *kbin.Reader) int64 { return b.Int64() }

//go:noinline
func readUuid(b *kbin.Reader) [16]byte { return b.Uuid() }

//go:noinline
func appendBool(dst []byte, v bool) []byte { return kbin.AppendBool(dst, v) }

//go:noinline
func appendInt8(dst []byte, v int8) []byte { return kbin.AppendInt8(dst, v) }

//go:noinline
func appendInt16(dst []byte, v int16) []byte { return kbin.AppendInt16(dst, v) }

//go:noinline
func appendUint16(dst []byte, v uint16) []byte { return kbin.AppendUint16(dst, v) }

//go:noinline
func appendInt32(dst []byte, v int32) []byte { return kbin.AppendInt32(dst, v) }

//go:noinline
func appendInt64(dst []byte, v int64) []byte { return kbin.AppendInt64(dst, v) }

//go:noinline
func appendUuid(dst []byte, v [16]byte) []byte { return kbin.AppendUuid(dst, v) }

// Generated code reads and appends strings, bytes, and array lengths that can
// be compact or unsafe with the functions below, rather than choosing between
// kbin functions at every field.
//
// Most compact lengths are one byte. The read functions decode that byte
// themselves, since Reader.Uvarint is not inlined. The read functions for
// strings and bytes store into dst; see writeDecodeInto in the generator.

func readString(b *kbin.Reader, dst *string, flexible, unsafe bool) {
	var l int
	if flexible {
		if src := b.Src; len(src) > 0 && src[0] < 0x80 {
			b.Src = src[1:]
			l = int(src[0]) - 1
		} else {
			l = int(b.Uvarint()) - 1
		}
	} else {
		l = int(b.Int16())
	}
	if unsafe {
		*dst = kbin.UnsafeString(b.Span(l))
	} else {
		*dst = string(b.Span(l))
	}
}

func readNullableString(b *kbin.Reader, dst **string, flexible, unsafe bool) {
	var l int
	if flexible {
		if src := b.Src; len(src) > 0 && src[0] < 0x80 {
			b.Src = src[1:]
			l = int(src[0]) - 1
		} else {
			l = int(b.Uvarint()) - 1
		}
	} else {
		l = int(b.Int16())
	}
	if l < 0 {
		*dst = nil
		return
	}
	var s string
	if unsafe {
		s = kbin.UnsafeString(b.Span(l))
	} else {
		s = string(b.Span(l))
	}
	*dst = &s
}

func readVarintString(b *kbin.Reader, dst *string, unsafe bool) {
	if unsafe {
		*dst = kbin.UnsafeString(b.VarintBytes())
	} else {
		*dst = string(b.VarintBytes())
	}
}

func readVarintBytes(b *kbin.Reader, dst *[]byte) { *dst = b.VarintBytes() }

func readBytes(b *kbin.Reader, dst *[]byte, flexible bool) {
	var l int
	if flexible {
		if src := b.Src; len(src) > 0 && src[0] < 0x80 {
			b.Src = src[1:]
			l = int(src[0]) - 1
		} else {
			l = int(b.Uvarint()) - 1
		}
	} else {
		l = int(b.Int32())
	}
	if l == -1 { // see kbin.Reader.Bytes
		*dst = []byte{}
		return
	}
	*dst = b.Span(l)
}

func readNullableBytes(b *kbin.Reader, dst *[]byte, flexible bool) {
	var l int
	if flexible {
		if src := b.Src; len(src) > 0 && src[0] < 0x80 {
			b.Src = src[1:]
			l = int(src[0]) - 1
		} else {
			l = int(b.Uvarint()) - 1
		}
	} else {
		l = int(b.Int32())
	}
	if l < 0 {
		*dst = nil
		return
	}
	*dst = b.Span(l)
}

func appendString(dst []byte, s string, flexible bool) []byte {
	if flexible {
		dst = kbin.AppendUvarint(dst, 1+uint32(len(s)))
	} else {
		dst = kbin.AppendInt16(dst, int16(len(s)))
	}
	return append(dst, s...)
}

func appendNullableString(dst []byte, s *string, flexible bool) []byte {
	if s == nil {
		if flexible {
			return append(dst, 0)
		}
		return kbin.AppendInt16(dst, -1)
	}
	if flexible {
		dst = kbin.AppendUvarint(dst, 1+uint32(len(*s)))
	} else {
		dst = kbin.AppendInt16(dst, int16(len(*s)))
	}
	return append(dst, *s...)
}

func appendBytes(dst, b []byte, flexible bool) []byte {
	if flexible {
		dst = kbin.AppendUvarint(dst, 1+uint32(len(b)))
	} else {
		dst = kbin.AppendInt32(dst, int32(len(b)))
	}
	return append(dst, b...)
}

func appendNullableBytes(dst, b []byte, flexible bool) []byte {
	if b == nil {
		if flexible {
			return append(dst, 0)
		}
		return kbin.AppendInt32(dst, -1)
	}
	if flexible {
		dst = kbin.AppendUvarint(dst, 1+uint32(len(b)))
	} else {
		dst = kbin.AppendInt32(dst, int32(len(b)))
	}
	return append(dst, b...)
}

func readArrayLen(b *kbin.Reader, flexible bool) int32 {
	if flexible {
		if src := b.Src; len(src) > 0 && src[0] < 0x80 && int(src[0]) <= len(src) {
			b.Src = src[1:]
			return int32(src[0]) - 1
		}
		return b.CompactArrayLen()
	}
	return b.ArrayLen()
}

func appendArrayLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return kbin.AppendCompactArrayLen(dst, n)
	}
	return kbin.AppendArrayLen(dst, n)
}

func appendNullableArrayLen(dst []byte, n int, isNil, flexible bool) []byte {
	if flexible {
		return kbin.AppendCompactNullableArrayLen(dst, n, isNil)
	}
	return kbin.AppendNullableArrayLen(dst, n, isNil)
}

// ---- from kmsg/api.go ----

// internalReadTags reads tags in a reader into dst from a duplicated inner
// kbin.Reader.
func internalReadTags(b *kbin.Reader, dst *Tags) {
	if len(b.Src) > 0 && b.Src[0] == 0 {
		b.Src = b.Src[1:]
		*dst = Tags{}
		return
	}
	*dst = internalReadTagsSlow(b)
}

func internalReadTagsSlow(b *kbin.Reader) Tags {
	var t Tags
	for num := b.Uvarint(); num > 0 && b.Ok(); num-- {
		key, size := b.Uvarint(), b.Uvarint()
		t.Set(key, b.Span(int(size)))
	}
	return t
}

// Tags is an opaque structure capturing unparsed tags.
type Tags struct {
	keyvals map[uint32][]byte
}

// Len returns the number of keyvals in Tags.
func (t *Tags) Len() int { return len(t.keyvals) }

// Each calls fn for each key and val in the tags.
func (t *Tags) Each(fn func(uint32, []byte)) {
	if len(t.keyvals) == 0 {
		return
	}
	// We must encode keys in order. We expect to have limited (no) unknown
	// keys, so for now, we take a lazy approach and allocate an ordered
	// slice.
	ordered := make([]uint32, 0, len(t.keyvals))
	for key := range t.keyvals {
		ordered = append(ordered, key)
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i] < ordered[j] })
	for _, key := range ordered {
		fn(key, t.keyvals[key])
	}
}

// Set sets a tag's key and val.
//
// Note that serializing tags does NOT check if the set key overlaps with an
// existing used key. It is invalid to set a key used by Kafka itself.
func (t *Tags) Set(key uint32, val []byte) {
	if t.keyvals == nil {
		t.keyvals = make(map[uint32][]byte)
	}
	t.keyvals[key] = val
}

// AppendEach appends each keyval in tags to dst and returns the updated dst.
func (t *Tags) AppendEach(dst []byte) []byte {
	if len(t.keyvals) == 0 {
		return dst
	}
	return t.appendEach(dst)
}

// appendWithCount appends the number of tags and then each tag, for a struct
// that has no tags of its own.
func (t *Tags) appendWithCount(dst []byte) []byte {
	if len(t.keyvals) == 0 {
		return append(dst, 0)
	}
	dst = kbin.AppendUvarint(dst, uint32(len(t.keyvals)))
	return t.appendEach(dst)
}

func (t *Tags) appendEach(dst []byte) []byte {
	t.Each(func(key uint32, val []byte) {
		dst = kbin.AppendUvarint(dst, key)
		dst = kbin.AppendUvarint(dst, uint32(len(val)))
		dst = append(dst, val...)
	})
	return dst
}
