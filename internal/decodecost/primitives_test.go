package decodecost

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPrimitivesMatchKbin: every read of reader consumes what the kbin.Reader read it
// mirrors consumes, and fails where it fails, on random short inputs rich in varint edge
// bytes. github.com/twmb/franz-go/pkg/kbin (v1.22.3) is byte for byte kmsg v1.15.1's
// internal kbin.
func TestPrimitivesMatchKbin(t *testing.T) {
	type pair struct {
		name string
		mine func(*reader) int64 // a value to compare, or 0
		kbin func(*kbin.Reader) int64
	}
	pairs := []pair{
		{"Int8", func(r *reader) int64 { return int64(r.int8()) }, func(b *kbin.Reader) int64 { return int64(b.Int8()) }},
		{"Int16", func(r *reader) int64 { return int64(r.int16()) }, func(b *kbin.Reader) int64 { return int64(b.Int16()) }},
		{"Int32", func(r *reader) int64 { return int64(r.int32()) }, func(b *kbin.Reader) int64 { return int64(b.Int32()) }},
		{"Int64", func(r *reader) int64 { r.skip(8); return 0 }, func(b *kbin.Reader) int64 { b.Int64(); return 0 }},
		{"Uuid", func(r *reader) int64 { r.skip(16); return 0 }, func(b *kbin.Reader) int64 { b.Uuid(); return 0 }},
		{"Uvarint", func(r *reader) int64 { return int64(r.uvarint()) }, func(b *kbin.Reader) int64 { return int64(b.Uvarint()) }},
		{"Varint", func(r *reader) int64 { return int64(r.varint()) }, func(b *kbin.Reader) int64 { return int64(b.Varint()) }},
		{"Varlong", func(r *reader) int64 { r.varlong(); return 0 }, func(b *kbin.Reader) int64 { b.Varlong(); return 0 }},
		{"String", func(r *reader) int64 { r.string(false); return 0 }, func(b *kbin.Reader) int64 { _ = b.String(); return 0 }},
		{"CompactString", func(r *reader) int64 { r.string(true); return 0 }, func(b *kbin.Reader) int64 { _ = b.CompactString(); return 0 }},
		{"NullableString", func(r *reader) int64 { r.nullableString(false); return 0 }, func(b *kbin.Reader) int64 { b.NullableString(); return 0 }},
		{"CompactNullableString", func(r *reader) int64 { r.nullableString(true); return 0 }, func(b *kbin.Reader) int64 { b.CompactNullableString(); return 0 }},
		{"Bytes", func(r *reader) int64 { r.bytes(false); return 0 }, func(b *kbin.Reader) int64 { b.Bytes(); return 0 }},
		{"CompactBytes", func(r *reader) int64 { r.bytes(true); return 0 }, func(b *kbin.Reader) int64 { b.CompactBytes(); return 0 }},
		{"NullableBytes", func(r *reader) int64 { r.nullableBytes(false); return 0 }, func(b *kbin.Reader) int64 { b.NullableBytes(); return 0 }},
		{"CompactNullableBytes", func(r *reader) int64 { r.nullableBytes(true); return 0 }, func(b *kbin.Reader) int64 { b.CompactNullableBytes(); return 0 }},
		{"VarintString", func(r *reader) int64 { r.varintString(); return 0 }, func(b *kbin.Reader) int64 { _ = b.VarintString(); return 0 }},
		{"VarintBytes", func(r *reader) int64 { r.varintBytes(); return 0 }, func(b *kbin.Reader) int64 { b.VarintBytes(); return 0 }},
		{"ArrayLen", func(r *reader) int64 { return int64(r.arrayLen(false)) }, func(b *kbin.Reader) int64 { return int64(b.ArrayLen()) }},
		{"CompactArrayLen", func(r *reader) int64 { return int64(r.arrayLen(true)) }, func(b *kbin.Reader) int64 { return int64(b.CompactArrayLen()) }},
		{"VarintArrayLen", func(r *reader) int64 { return int64(r.varintArrayLen()) }, func(b *kbin.Reader) int64 { return int64(b.VarintArrayLen()) }},
		{"ReadTags", func(r *reader) int64 { r.tags(); return 0 }, func(b *kbin.Reader) int64 { kmsg.ReadTags(b); return 0 }},
	}
	edge := []byte{0, 1, 2, 3, 0x0f, 0x10, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	rng := rand.New(rand.NewPCG(7, 8))
	in := make([]byte, 16)
	for range 100_000 {
		in = in[:rng.IntN(cap(in)+1)]
		for i := range in {
			if rng.IntN(3) == 0 {
				in[i] = byte(rng.Uint32())
			} else {
				in[i] = edge[rng.IntN(len(edge))]
			}
		}
		for _, p := range pairs {
			r, b := reader{src: in}, kbin.Reader{Src: in}
			mine, theirs := p.mine(&r), p.kbin(&b)
			if r.bad != !b.Ok() || len(r.src) != len(b.Src) || (!r.bad && mine != theirs) {
				t.Fatalf("%s(%x): reader failed %v, %d left, value %d; kbin failed %v, %d left, value %d",
					p.name, in, r.bad, len(r.src), mine, !b.Ok(), len(b.Src), theirs)
			}
		}
	}
}
