package compress

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/exactq/exactq/internal/alloctest"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
)

var codecs = []int8{None, Gzip, Snappy, LZ4, Zstd}

func inputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 200<<10)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	var text []byte
	for i := 0; len(text) < 300<<10; i++ {
		text = fmt.Appendf(text, "key-%d value-%d some repeated payload text\n", i%13, i)
	}
	return map[string][]byte{
		"empty":  {},
		"one":    {'x'},
		"text":   text,
		"random": random,
	}
}

func TestRoundTrip(t *testing.T) {
	for _, codec := range codecs {
		for name, in := range inputs() {
			t.Run(Name(codec)+"/"+name, func(t *testing.T) {
				prefix := []byte("prefix")
				c, err := Compress(codec, append([]byte{}, prefix...), in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(c, prefix) {
					t.Fatal("Compress did not append to dst")
				}
				out, err := Decompress(codec, c[len(prefix):])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out, in) {
					t.Fatalf("round trip mismatch: %d bytes in, %d out", len(in), len(out))
				}
				// Appending variant keeps dst's contents.
				out, err = AppendDecompress([]byte("dst"), codec, c[len(prefix):], len(in))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out, append([]byte("dst"), in...)) {
					t.Fatal("AppendDecompress mismatch")
				}
			})
		}
	}
}

// TestRoundTripReuse runs each codec many times on varying sizes so pooled encoders and
// decoders are reused with leftover state.
func TestRoundTripReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, codec := range codecs {
		for i := 0; i < 50; i++ {
			in := bytes.Repeat([]byte{byte(i)}, rng.IntN(70<<10))
			for j := 0; j < len(in); j += 1 + rng.IntN(100) {
				in[j] = byte(rng.UintN(256))
			}
			c, err := Compress(codec, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := DecompressLimit(codec, c, len(in))
			if err != nil || !bytes.Equal(out, in) {
				t.Fatalf("%s #%d: err %v, equal %v", Name(codec), i, err, bytes.Equal(out, in))
			}
			// A corrupt input in between must not poison the pooled decoder.
			if len(c) > 20 {
				bad := append([]byte{}, c...)
				bad[len(bad)/2] ^= 0xff
				bad = bad[:len(bad)-3]
				_, _ = Decompress(codec, bad)
			}
		}
	}
}

// TestInterop decodes frames produced once by franz-go v1.22.3's DefaultCompressor (gzip,
// raw snappy, lz4, zstd) and by klauspost/compress/snappy/xerial (the Java snappy-java
// framing); see testdata/README.
func TestInterop(t *testing.T) {
	plain, err := os.ReadFile("testdata/plain.txt")
	if err != nil {
		t.Fatal(err)
	}
	for file, codec := range map[string]int8{
		"franz-go.gzip":       Gzip,
		"franz-go.snappy-raw": Snappy,
		"franz-go.lz4":        LZ4,
		"franz-go.zstd":       Zstd,
		"xerial.snappy":       Snappy,
	} {
		t.Run(file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := DecompressLimit(codec, src, len(plain))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, plain) {
				t.Fatal("decoded bytes differ from testdata/plain.txt")
			}
			if _, err := DecompressLimit(codec, src, len(plain)-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("limit one below the size: got %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestXerialMultiBlock(t *testing.T) {
	in := inputs()["text"] // 300 KiB: several 32 KiB xerial blocks
	enc := xerial.Encode(nil, in)
	if !bytes.HasPrefix(enc, xerialMagic) {
		t.Fatal("xerial.Encode did not write the magic")
	}
	out, err := Decompress(Snappy, enc)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("err %v, equal %v", err, bytes.Equal(out, in))
	}
	if _, err := DecompressLimit(Snappy, enc, len(in)-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	// Header only: an empty stream.
	out, err = Decompress(Snappy, enc[:xerialHeaderSize])
	if err != nil || len(out) != 0 {
		t.Fatalf("header only: %v, %d bytes", err, len(out))
	}
	// Truncated block.
	if _, err := Decompress(Snappy, enc[:len(enc)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: got %v, want ErrCorrupt", err)
	}
}

// TestSnappyRejectsS2 checks that the S2 extensions (which a Java consumer cannot decode)
// are refused: S2's "repeat offset" copy is encoded as a copy with offset 0.
func TestSnappyRejectsS2(t *testing.T) {
	in := bytes.Repeat([]byte("abcdefgh12345678"), 4096)
	enc := s2.Encode(nil, in) // S2 block format, uses repeat offsets on this input
	if _, err := s2.Decode(nil, enc); err != nil {
		t.Fatal(err)
	}
	if _, err := Decompress(Snappy, enc); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt for an S2-only block", err)
	}
}

// TestBombs feeds small inputs that expand a lot and checks the limit holds.
func TestBombs(t *testing.T) {
	zeros := make([]byte, 8<<20)
	for _, codec := range codecs[1:] {
		t.Run(Name(codec), func(t *testing.T) {
			c, err := Compress(codec, nil, zeros)
			if err != nil {
				t.Fatal(err)
			}
			if len(c) > 1<<20 {
				t.Fatalf("8 MiB of zeros compressed to %d bytes; not a bomb", len(c))
			}
			for _, limit := range []int{0, 1, 1000, 1 << 20, len(zeros) - 1} {
				if _, err := DecompressLimit(codec, c, limit); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("limit %d: got %v, want ErrTooLarge", limit, err)
				}
			}
			out, err := DecompressLimit(codec, c, len(zeros))
			if err != nil || len(out) != len(zeros) {
				t.Fatalf("exact limit: %v, %d bytes", err, len(out))
			}
		})
	}
}

// TestZstdNoContentSize covers zstd frames that do not declare their size (streamed
// encoders write those): the limit must still hold.
func TestZstdNoContentSize(t *testing.T) {
	zeros := make([]byte, 4<<20)
	// Two concatenated frames: each declares a size within the limit, together over it.
	c, _ := Compress(Zstd, nil, zeros)
	c, _ = Compress(Zstd, c, zeros)
	if _, err := DecompressLimit(Zstd, c, 5<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	out, err := DecompressLimit(Zstd, c, 8<<20)
	if err != nil || len(out) != 8<<20 {
		t.Fatalf("%v, %d", err, len(out))
	}
}

func TestErrors(t *testing.T) {
	if _, err := Compress(7, nil, []byte("x")); !errors.Is(err, ErrUnknownCodec) {
		t.Fatal(err)
	}
	if _, err := Decompress(5, []byte("x")); !errors.Is(err, ErrUnknownCodec) {
		t.Fatal(err)
	}
	for _, codec := range codecs[1:] {
		if _, err := Decompress(codec, []byte("definitely not compressed data")); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: got %v, want ErrCorrupt", Name(codec), err)
		}
	}
	if _, err := DecompressLimit(None, []byte("abc"), 2); !errors.Is(err, ErrTooLarge) {
		t.Fatal(err)
	}
}

func FuzzDecompress(f *testing.F) {
	for _, codec := range codecs {
		for _, in := range [][]byte{nil, []byte("hello hello hello hello"), make([]byte, 3000)} {
			c, _ := Compress(codec, nil, in)
			f.Add(uint8(codec), c)
		}
	}
	if x, err := os.ReadFile("testdata/xerial.snappy"); err == nil {
		f.Add(uint8(Snappy), x)
	}
	f.Fuzz(func(t *testing.T, codec uint8, src []byte) {
		const limit = 1 << 20
		out, err := DecompressLimit(int8(codec%6), src, limit)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownCodec) {
			t.Fatalf("untyped error %v", err)
		}
		if len(out) > limit {
			t.Fatalf("output %d over limit", len(out))
		}
		checkStream(t, int8(codec%6), src, limit, out, err)
	})
}

// checkStream: a Reader over src yields exactly what whole decompression did (out, err),
// through a small buffer, allocating (measured) no more than MemoryBound and a little:
// never the decompressed size.
func checkStream(t *testing.T, codec int8, src []byte, limit int, out []byte, wholeErr error) {
	t.Helper()
	var got []byte
	var err error
	allocated := alloctest.Bytes(func() {
		var r *Reader
		if r, err = NewReader(codec, src, limit); err != nil {
			return
		}
		defer r.Close()
		got, err = readAll(r, 4096)
	})
	if (err == nil) != (wholeErr == nil) || err == nil && !bytes.Equal(got, out) {
		t.Fatalf("stream: %d bytes, %v; whole: %d bytes, %v", len(got), err, len(out), wholeErr)
	}
	// readAll's own output grows to len(got); the rest is the Reader's.
	bound := uint64(MemoryBound(codec, src, limit) + 3*len(got) + 512<<10)
	if !alloctest.RaceEnabled && allocated > bound {
		t.Fatalf("Reader allocated %d bytes for %d compressed bytes (bound %d)", allocated, len(src), bound)
	}
}

func benchmarkCodec(b *testing.B, codec int8, decode bool) {
	in := inputs()["text"][:64<<10]
	c, _ := Compress(codec, nil, in)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		if decode {
			var err error
			if buf, err = AppendDecompress(buf[:0], codec, c, len(in)); err != nil {
				b.Fatal(err)
			}
		} else {
			buf, _ = Compress(codec, buf[:0], in)
		}
	}
}

func BenchmarkDecompress(b *testing.B) {
	for _, codec := range codecs[1:] {
		b.Run(Name(codec), func(b *testing.B) { benchmarkCodec(b, codec, true) })
	}
}

func BenchmarkCompress(b *testing.B) {
	for _, codec := range codecs[1:] {
		b.Run(Name(codec), func(b *testing.B) { benchmarkCodec(b, codec, false) })
	}
}

// TestCompressLevel: gzip levels reach the encoder (the header's XFL byte says 4 for
// level 1, 2 for level 9, 0 for the default), zstd levels map onto different encoders
// (level 1 and 19 produce different frames), and every output decompresses to the input.
func TestCompressLevel(t *testing.T) {
	var src []byte
	for i := 0; len(src) < 200<<10; i++ {
		src = append(src, fmt.Sprintf("record %d of a level test, key k%d, value %x; ", i, i%97, i*7919)...)
	}
	roundTrip := func(codec int8, level int) []byte {
		t.Helper()
		out, err := CompressLevel(codec, level, nil, src)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecompressLimit(codec, out, len(src))
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("codec %d level %d: round trip failed: %v", codec, level, err)
		}
		return out
	}
	for level, xfl := range map[int]byte{1: 4, 9: 2, -1: 0, DefaultLevel: 0} {
		if got := roundTrip(Gzip, level)[8]; got != xfl {
			t.Errorf("gzip level %d: XFL %d, want %d", level, got, xfl)
		}
	}
	fast, best := roundTrip(Zstd, 1), roundTrip(Zstd, 19)
	if bytes.Equal(fast, best) || len(best) >= len(fast) {
		t.Errorf("zstd level 19 gave %d bytes, level 1 %d: want smaller, different output", len(best), len(fast))
	}
	if def := roundTrip(Zstd, DefaultLevel); !bytes.Equal(def, roundTrip(Zstd, 3)) {
		t.Error("zstd DefaultLevel differs from level 3")
	}
	roundTrip(Zstd, -1)
}
