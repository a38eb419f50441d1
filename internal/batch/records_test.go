package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/exactq/exactq/internal/alloctest"
	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []int8{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

func sampleRecords(n int) []kmsg.Record {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i] = kmsg.Record{
			TimestampDelta64: int64(i * 3),
			Key:              fmt.Appendf(nil, "key-%d", i),
			Value:            bytes.Repeat([]byte{byte(i)}, i%50),
		}
		switch i % 4 {
		case 1:
			recs[i].Key = nil // null key
		case 2:
			recs[i].Value = nil // null value (tombstone)
		case 3:
			recs[i].Headers = []kmsg.Header{{Key: "h1", Value: []byte("v1")}, {Key: "", Value: nil}}
		}
	}
	return recs
}

func idempotentHeader() Header {
	return Header{BaseOffset: 0, PartitionLeaderEpoch: -1, FirstTimestamp: 1_700_000_000_000,
		ProducerID: 7, ProducerEpoch: 1, BaseSequence: 100}
}

// assemble encodes rb with a correct length, magic and CRC around an arbitrary payload.
func assemble(rb kmsg.RecordBatch) []byte {
	rb.Magic = 2
	rb.Length = int32(HeaderSize - LengthPrefix + len(rb.Records))
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offsetCRC:], crc32.Checksum(b[offsetAttributes:], castagnoli))
	return b
}

func rawRecords(recs []kmsg.Record) []byte {
	var out []byte
	for i := range recs {
		r := recs[i]
		body := r.AppendTo(nil)[1:] // Length 0 encodes as one byte
		out = binary.AppendVarint(out, int64(len(body)))
		out = append(out, body...)
	}
	return out
}

func TestEncodeRecordsRoundTrip(t *testing.T) {
	for _, codec := range allCodecs {
		for _, n := range []int{1, 2, 100} {
			t.Run(fmt.Sprintf("%s/%d", compress.Name(codec), n), func(t *testing.T) {
				in := sampleRecords(n)
				b, err := Encode([]byte("junk"), idempotentHeader(), in, codec)
				if err != nil {
					t.Fatal(err)
				}
				b = b[4:]
				h, err := Validate(b, ValidateOptions{MaxBatchBytes: len(b)})
				if err != nil {
					t.Fatal(err)
				}
				if h.NumRecords != int32(n) || h.LastOffsetDelta != int32(n-1) ||
					int8(h.Attributes&AttrCompressionMask) != codec || h.ProducerID != 7 ||
					h.FirstSequence != 100 || h.MaxTimestamp != h.FirstTimestamp+int64(3*(n-1)) {
					t.Fatalf("header %+v", h)
				}
				out, err := Records(b)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != n {
					t.Fatalf("%d records, want %d", len(out), n)
				}
				for i := range out {
					want := in[i]
					got := out[i]
					if got.OffsetDelta != int32(i) || got.TimestampDelta64 != want.TimestampDelta64 ||
						!bytes.Equal(got.Key, want.Key) || (got.Key == nil) != (want.Key == nil) ||
						!bytes.Equal(got.Value, want.Value) || (got.Value == nil) != (want.Value == nil) ||
						len(got.Headers) != len(want.Headers) {
						t.Fatalf("record %d: got %+v want %+v", i, got, want)
					}
					for j := range got.Headers {
						if got.Headers[j].Key != want.Headers[j].Key || !bytes.Equal(got.Headers[j].Value, want.Headers[j].Value) {
							t.Fatalf("record %d header %d", i, j)
						}
					}
				}
				if in[0].OffsetDelta != 0 || in[0].Length != 0 {
					t.Fatal("Encode modified its input")
				}
			})
		}
	}
}

// TestRecordsLengthPrefix checks Encode's length prefix against kmsg: a record's Length
// field read back by kmsg equals what follows it.
func TestRecordsLengthPrefix(t *testing.T) {
	b, _ := Encode(nil, idempotentHeader(), sampleRecords(5), CodecNone)
	out, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out {
		r2 := r
		r2.Length = 0
		if want := int32(len(r2.AppendTo(nil)) - 1); r.Length != want {
			t.Fatalf("record %d: length %d, want %d", i, r.Length, want)
		}
	}
}

func TestRecordsCorrupt(t *testing.T) {
	recs := sampleRecords(3)
	good := rawRecords(recs)
	base := kmsg.RecordBatch{LastOffsetDelta: 2, NumRecords: 3, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}
	withOffsets := func(deltas ...int32) []byte {
		rs := sampleRecords(len(deltas))
		for i := range rs {
			rs[i].OffsetDelta = deltas[i]
		}
		return rawRecords(rs)
	}
	// A record whose length prefix claims one byte more than its fields.
	longRec := func() []byte {
		r := recs[0]
		body := r.AppendTo(nil)[1:]
		out := binary.AppendVarint(nil, int64(len(body)+1))
		out = append(out, body...)
		return append(append(out, 0), rawRecords(recs[1:])...)
	}()
	compressed := func(p []byte) []byte { c, _ := compress.Compress(CodecZstd, nil, p); return c }
	cases := []struct {
		name    string
		mut     func(rb *kmsg.RecordBatch)
		wantErr error
	}{
		{"fewer records than declared (compressed)", func(rb *kmsg.RecordBatch) {
			rb.Attributes = CodecZstd
			rb.Records = compressed(rawRecords(recs[:2]))
		}, ErrBadRecord},
		{"trailing bytes", func(rb *kmsg.RecordBatch) { rb.Records = append(append([]byte{}, good...), 0) }, ErrBadRecord},
		{"offset deltas repeat", func(rb *kmsg.RecordBatch) {
			rb.Attributes = CodecZstd
			rb.Records = compressed(withOffsets(0, 1, 1))
		}, ErrBadRecord},
		{"offset delta beyond last", func(rb *kmsg.RecordBatch) {
			rb.Attributes = CodecZstd
			rb.Records = compressed(withOffsets(0, 1, 3))
		}, ErrBadRecord},
		{"negative offset delta", func(rb *kmsg.RecordBatch) {
			rb.Attributes = CodecZstd
			rb.Records = compressed(withOffsets(-1, 0, 1))
		}, ErrBadRecord},
		{"record length over its fields", func(rb *kmsg.RecordBatch) { rb.Records = longRec }, ErrBadRecord},
		{"truncated record", func(rb *kmsg.RecordBatch) { rb.Records = good[:len(good)-1] }, ErrBadRecord},
		{"count too large for payload", func(rb *kmsg.RecordBatch) {
			rb.Attributes = CodecZstd
			rb.NumRecords, rb.LastOffsetDelta = 1<<30, 1<<30-1
			rb.Records = compressed(good)
		}, ErrBadRecord},
		{"garbage compressed payload", func(rb *kmsg.RecordBatch) { rb.Attributes = CodecLZ4 }, ErrCorrupt},
		{"unknown codec", func(rb *kmsg.RecordBatch) { rb.Attributes = 6 }, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rb := base
			rb.Records = good
			c.mut(&rb)
			b := assemble(rb)
			_, err := Records(b)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Records: got %v, want %v", err, c.wantErr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good, _ := Encode(nil, idempotentHeader(), sampleRecords(3), CodecNone)
	noKey := sampleRecords(3)
	noKey[1].Key = nil
	zeros := make([]kmsg.Record, 1)
	zeros[0].Value = make([]byte, 4<<20)
	cases := []struct {
		name string
		b    func() []byte
		opts ValidateOptions
		err  error
		code int16
	}{
		{"good", func() []byte { return good }, ValidateOptions{}, nil, 0},
		{"max.message.bytes", func() []byte { return good }, ValidateOptions{MaxBatchBytes: len(good) - 1}, ErrTooLarge, kerr.MessageTooLarge.Code},
		{"max.message.bytes exact", func() []byte { return good }, ValidateOptions{MaxBatchBytes: len(good)}, nil, 0},
		{"control batch from client", func() []byte { return ControlBatch(7, 1, true, 0, 1) }, ValidateOptions{}, ErrControl, kerr.InvalidRecord.Code},
		{"too many records", func() []byte { return good }, ValidateOptions{MaxRecords: 2}, ErrTooManyRecords, kerr.InvalidRecord.Code},
		{"count vs last offset delta (compressed)", func() []byte {
			rb, _ := Parse(mustEncode(t, idempotentHeader(), sampleRecords(3), CodecGzip))
			rb.LastOffsetDelta = 5
			return assemble(rb)
		}, ValidateOptions{}, ErrInvalidBatch, kerr.InvalidRecord.Code},
		{"negative sequence with producer id", func() []byte {
			h := idempotentHeader()
			h.BaseSequence = -1
			return mustEncode(t, h, sampleRecords(1), CodecNone)
		}, ValidateOptions{}, ErrInvalidBatch, kerr.InvalidRecord.Code},
		{"transactional without producer id", func() []byte {
			h := NoProducer(0, 1)
			h.Attributes = AttrTransactional
			return mustEncode(t, h, sampleRecords(1), CodecNone)
		}, ValidateOptions{}, ErrInvalidBatch, kerr.InvalidRecord.Code},
		{"compacted without key", func() []byte { return mustEncode(t, idempotentHeader(), noKey, CodecNone) }, ValidateOptions{Compacted: true}, ErrNoKey, kerr.InvalidRecord.Code},
		{"compacted without key, compressed", func() []byte { return mustEncode(t, idempotentHeader(), noKey, CodecSnappy) }, ValidateOptions{Compacted: true}, ErrNoKey, kerr.InvalidRecord.Code},
		{"decompression bomb", func() []byte { return mustEncode(t, NoProducer(0, 1), zeros, CodecZstd) }, ValidateOptions{MaxDecompressedBytes: 1 << 20}, ErrTooLarge, kerr.MessageTooLarge.Code},
		{"bad CRC", func() []byte {
			b := append([]byte{}, good...)
			b[len(b)-1] ^= 1
			return b
		}, ValidateOptions{}, ErrCRC, kerr.CorruptMessage.Code},
		{"magic 1", func() []byte {
			b := append([]byte{}, good...)
			b[offsetMagic] = 1
			return b
		}, ValidateOptions{}, ErrMagic, kerr.UnsupportedForMessageFormat.Code},
		{"truncated", func() []byte { return good[:len(good)-1] }, ValidateOptions{}, ErrTruncated, kerr.CorruptMessage.Code},
		{"bad record framing", func() []byte {
			rb, _ := Parse(good)
			rb.Records = append(append([]byte{}, rb.Records...), 0)
			return assemble(rb)
		}, ValidateOptions{}, ErrBadRecord, kerr.InvalidRecord.Code},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Validate(c.b(), c.opts)
			if c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
				t.Fatalf("got %v, want %v", err, c.err)
			}
			if got := KafkaCode(err); got != c.code {
				t.Fatalf("KafkaCode = %d, want %d", got, c.code)
			}
		})
	}
	if KafkaCode(errors.New("other")) != kerr.UnknownServerError.Code {
		t.Fatal("unknown error code")
	}
}

func mustEncode(t testing.TB, h Header, recs []kmsg.Record, codec int8) []byte {
	t.Helper()
	b, err := Encode(nil, h, recs, codec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestControlBatch(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := ControlBatch(42, 3, commit, 17, 1_700_000_000_123)
		h, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.Attributes != AttrControl|AttrTransactional || h.ProducerID != 42 || h.ProducerEpoch != 3 ||
			h.FirstSequence != -1 || h.NumRecords != 1 || h.FirstTimestamp != 1_700_000_000_123 ||
			h.MaxTimestamp != h.FirstTimestamp || h.PartitionLeaderEpoch != -1 {
			t.Fatalf("header %+v", h)
		}
		m, err := ParseMarker(&h)
		if err != nil {
			t.Fatal(err)
		}
		if m.Commit != commit || m.CoordinatorEpoch != 17 {
			t.Fatalf("marker %+v", m)
		}
		recs, _ := Records(b)
		wantType := byte(0)
		if commit {
			wantType = 1
		}
		if !bytes.Equal(recs[0].Key, []byte{0, 0, 0, wantType}) || !bytes.Equal(recs[0].Value, []byte{0, 0, 0, 0, 0, 17}) {
			t.Fatalf("control record %x %x", recs[0].Key, recs[0].Value)
		}
	}
	h, _ := Parse(mustEncode(t, idempotentHeader(), sampleRecords(1), CodecNone))
	if _, err := ParseMarker(&h); !errors.Is(err, ErrNotMarker) {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(mustEncode(f, idempotentHeader(), sampleRecords(3), CodecNone))
	f.Add(ControlBatch(1, 1, true, 1, 1))
	for _, codec := range allCodecs[1:] {
		f.Add(mustEncode(f, idempotentHeader(), sampleRecords(5), codec))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err != nil {
			if KafkaCode(err) <= 0 {
				t.Fatalf("error %v without Kafka code", err)
			}
			return
		}
		if len(h.Records) != len(b)-HeaderSize {
			t.Fatal("records slice does not match length")
		}
		checkValidate(t, b)
		_, _ = ParseMarker(&h)
	})
}

// FuzzRecords fuzzes the record payload (fixing up the CRC, which would otherwise reject
// nearly every input) under a valid header.
func FuzzRecords(f *testing.F) {
	for _, codec := range allCodecs {
		b := mustEncode(f, idempotentHeader(), sampleRecords(4), codec)
		f.Add(uint8(codec), int32(4), b[HeaderSize:])
	}
	f.Fuzz(func(t *testing.T, codec uint8, n int32, payload []byte) {
		rb := kmsg.RecordBatch{Attributes: int16(codec % 8), NumRecords: n, LastOffsetDelta: n - 1,
			ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: payload}
		b := assemble(rb)
		recs, err := RecordsLimit(b, fuzzLimit)
		if err != nil {
			if KafkaCode(err) <= 0 {
				t.Fatalf("error %v without Kafka code", err)
			}
		} else if len(recs) != int(n) {
			t.Fatalf("%d records, header says %d", len(recs), n)
		}
		if accepted := checkValidate(t, b); accepted && err != nil {
			t.Fatalf("Validate accepted what Records refuses: %v", err)
		}
	})
}

// FuzzRecordWindow: walking a payload through a stream window of a few bytes (every
// record larger than it parsed field by field, every field possibly cut by a refill) finds
// exactly what walking it in place does.
func FuzzRecordWindow(f *testing.F) {
	f.Add(int32(4), rawRecords(sampleRecords(4)), uint8(16))
	f.Add(int32(1), record(auto, 0, 1, []byte("k"), 300, bytes.Repeat([]byte{'v'}, 300)), uint8(10))
	f.Fuzz(func(t *testing.T, n int32, payload []byte, window uint8) {
		h := kmsg.RecordBatch{NumRecords: n, LastOffsetDelta: n - 1}
		if n < 0 || int(n) > len(payload) {
			return
		}
		inPlace := recordReader{buf: payload}
		want := walkRecords(&h, &inPlace, nil)
		streamed := recordReader{buf: make([]byte, 0, 10+int(window)), src: bytes.NewReader(payload)}
		got := walkRecords(&h, &streamed, nil)
		if (want == nil) != (got == nil) || KafkaCode(want) != KafkaCode(got) {
			t.Fatalf("in place: %v; through a %d-byte window: %v", want, 10+int(window), got)
		}
	})
}

// fuzzLimit is the decompressed-size limit of the fuzz targets.
const fuzzLimit = 1 << 20

// checkValidate runs Validate on b and checks what a consumer relies on: b is either
// refused with a Kafka error code or it validates, and then every record parses with
// kmsg's record reader and with franz-go's consumer (kgo.ProcessFetchPartition), exactly
// as many as the header counts, at the header's offsets. What Validate allocates is bounded
// by the bytes b holds, whatever the header or the compressed payload claim: the
// decompressor's state and window (compress.MemoryBound, cold pools included) and a
// little more, never the decompressed size or the record count.
func checkValidate(t *testing.T, b []byte) (accepted bool) {
	t.Helper()
	var h kmsg.RecordBatch
	var err error
	allocated := alloctest.Bytes(func() {
		h, err = Validate(b, ValidateOptions{MaxDecompressedBytes: fuzzLimit, Compacted: len(b)%2 == 0})
	})
	bound := uint64(64 << 10)
	if len(b) > HeaderSize {
		codec := int8(b[offsetAttributes+1] & AttrCompressionMask)
		bound += uint64(compress.MemoryBound(codec, b[HeaderSize:], fuzzLimit)) + streamWindowBytes + 512<<10
	}
	if !alloctest.RaceEnabled && allocated > bound {
		t.Fatalf("Validate allocated %d bytes for a %d-byte batch (bound %d)", allocated, len(b), bound)
	}
	if err != nil {
		if KafkaCode(err) <= 0 {
			t.Fatalf("error %v without Kafka code", err)
		}
		return false
	}
	recs, err := RecordsLimit(b, fuzzLimit)
	if err != nil || len(recs) != int(h.NumRecords) {
		t.Fatalf("validated, but kmsg reads %d records (%v), header says %d", len(recs), err, h.NumRecords)
	}
	rp := &kmsg.FetchResponseTopicPartition{HighWatermark: 1 << 40, LastStableOffset: 1 << 40,
		RecordBatches: append([]byte(nil), b...)}
	SetBaseOffset(rp.RecordBatches, 0)
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"}, rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil || len(fp.Records) != int(h.NumRecords) {
		t.Fatalf("validated, but franz-go reads %d records (%v), header says %d", len(fp.Records), fp.Err, h.NumRecords)
	}
	for i, r := range fp.Records {
		if r.Offset != int64(i) {
			t.Fatalf("franz-go reads record %d at offset %d", i, r.Offset)
		}
	}
	return true
}

// BenchmarkParse measures Parse (header decode + CRC-32C) on a 16 KiB batch.
func BenchmarkParse(b *testing.B) {
	recs := make([]kmsg.Record, 16)
	for i := range recs {
		recs[i].Value = bytes.Repeat([]byte{byte(i)}, 1000)
	}
	raw := mustEncode(b, idempotentHeader(), recs, CodecNone)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateDeep adds the allocation-free record framing walk.
func BenchmarkValidateDeep(b *testing.B) {
	recs := make([]kmsg.Record, 16)
	for i := range recs {
		recs[i].Value = bytes.Repeat([]byte{byte(i)}, 1000)
	}
	raw := mustEncode(b, idempotentHeader(), recs, CodecNone)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(raw, ValidateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateCompressed measures the produce-path cost of a 16 KiB (uncompressed)
// batch per codec: decompress + walk.
func BenchmarkValidateCompressed(b *testing.B) {
	recs := make([]kmsg.Record, 64)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "%0250d", i)
	}
	for _, codec := range allCodecs[1:] {
		raw := mustEncode(b, idempotentHeader(), recs, codec)
		b.Run(compress.Name(codec), func(b *testing.B) {
			b.SetBytes(16 << 10)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(raw, ValidateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
