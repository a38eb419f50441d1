package batch

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// auto as a record length: the length of the fields.
const auto = math.MinInt64

// record builds one record in wire form from its fields, so a test can get any of them
// wrong.
func record(length int64, offsetDelta, keyLen int64, key []byte, valueLen int64, value []byte, headers ...[]byte) []byte {
	body := []byte{0}                   // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, offsetDelta)
	body = binary.AppendVarint(body, keyLen)
	body = append(body, key...)
	body = binary.AppendVarint(body, valueLen)
	body = append(body, value...)
	body = binary.AppendVarint(body, int64(len(headers)))
	for _, h := range headers {
		body = append(body, h...)
	}
	if length == auto {
		length = int64(len(body))
	}
	return append(binary.AppendVarint(nil, length), body...)
}

// goodRecord is record i of a well-formed batch.
func goodRecord(i int) []byte { return record(auto, int64(i), 1, []byte("k"), 5, []byte("value")) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// batchOf assembles a CRC-valid batch with the given count, last offset delta, codec and
// (uncompressed) record bytes.
func batchOf(t testing.TB, numRecords, lastOffsetDelta int32, codec int8, records []byte) []byte {
	t.Helper()
	payload := records
	if codec != CodecNone {
		var err error
		if payload, err = compress.Compress(codec, nil, records); err != nil {
			t.Fatal(err)
		}
	}
	return assemble(kmsg.RecordBatch{Attributes: int16(codec), NumRecords: numRecords, LastOffsetDelta: lastOffsetDelta,
		FirstTimestamp: 1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: payload})
}

// TestValidateRecordFraming: every v2 batch, uncompressed or compressed, has its records
// checked as Kafka's DefaultRecordBatch/DefaultRecord do, with the options the broker
// passes. Before #17 (finding 3) the uncompressed ones were all accepted, stored and
// served: Java's KafkaConsumer then threw at that offset on every poll.
func TestValidateRecordFraming(t *testing.T) {
	hdr := func(key string, valueLen int64) []byte {
		b := binary.AppendVarint(nil, int64(len(key)))
		b = append(b, key...)
		return binary.AppendVarint(b, valueLen)
	}
	three := cat(goodRecord(0), goodRecord(1), goodRecord(2))
	good := record(auto, 0, 1, []byte("k"), 5, []byte("value"))
	body := binary.AppendVarint(good[1:len(good)-1], -1) // header count -1 for 0
	negativeHeaderCount := append(binary.AppendVarint(nil, int64(len(body))), body...)
	cases := []struct {
		name      string
		n, last   int32
		records   []byte
		compacted bool
		err       error
		code      int16
	}{
		{"good", 3, 2, three, false, nil, 0},
		{"negative key length", 1, 0, record(auto, 0, -2, nil, 5, []byte("value")), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"negative value length", 1, 0, record(auto, 0, 1, []byte("k"), -7, nil), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"negative record length", 1, 0, record(-3, 0, 1, []byte("k"), 5, []byte("value")), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"record length short of its fields", 1, 0, record(5, 0, 1, []byte("k"), 5, []byte("value")), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"record length past its fields", 1, 0, append(record(15, 0, 1, []byte("k"), 5, []byte("value")), 0), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"key longer than the record", 1, 0, record(auto, 0, 100, []byte("k"), 5, []byte("value")), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"garbage record bytes", 1, 0, []byte{0x13, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"more records than the count", 2, 1, three, false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"fewer records than the count", 4, 3, three, false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"a count with no record bytes", 3, 2, nil, false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"offset deltas not 0..n-1", 3, 2, cat(goodRecord(0), goodRecord(2), goodRecord(1)), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"negative header count", 1, 0, negativeHeaderCount, false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"null header key", 1, 0, record(auto, 0, 1, []byte("k"), 5, []byte("value"), append(binary.AppendVarint(nil, -1), 0)), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"header value past the record", 1, 0, record(auto, 0, 1, []byte("k"), 5, []byte("value"), hdr("h", 9)), false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"good header", 1, 0, record(auto, 0, 1, []byte("k"), 5, []byte("value"), cat(hdr("h", 1), []byte("v"))), false, nil, 0},
		{"bad varint", 1, 0, record(auto, 0, 1, []byte("k"), 5, []byte("value"))[:2], false, ErrBadRecord, kerr.InvalidRecord.Code},
		{"compacted without key", 1, 0, record(auto, 0, -1, nil, 5, []byte("value")), true, ErrNoKey, kerr.InvalidRecord.Code},
	}
	for _, c := range cases {
		for _, codec := range allCodecs {
			t.Run(c.name+"/"+compress.Name(codec), func(t *testing.T) {
				b := batchOf(t, c.n, c.last, codec, c.records)
				_, err := Validate(b, ValidateOptions{MaxBatchBytes: 1 << 20, Compacted: c.compacted})
				if c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
					t.Fatalf("got %v, want %v", err, c.err)
				}
				if got := KafkaCode(err); got != c.code {
					t.Fatalf("KafkaCode = %d, want %d", got, c.code)
				}
				// A batch Validate accepts reads back with kmsg's own record reader.
				if err == nil {
					recs, err := Records(b)
					if err != nil || len(recs) != int(c.n) {
						t.Fatalf("Records after Validate: %d records, %v", len(recs), err)
					}
				}
			})
		}
	}
}

// TestValidateBatchLyingAboutItsSize is #17 finding 1 at the door: a 72-byte uncompressed
// batch holding one record whose header claims a billion (lastOffsetDelta 999,999,999) was
// accepted, and a share consumer then acquired a billion offsets. Kafka refuses it
// (INVALID_RECORD: the iterator finds the payload ends after one record; with a count of
// one, "Inconsistent batch offset range and count of records").
func TestValidateBatchLyingAboutItsSize(t *testing.T) {
	rec := record(auto, 0, 1, []byte("k"), 3, []byte("val"))
	for _, n := range []int32{1_000_000_000, 1} {
		b := batchOf(t, n, 999_999_999, CodecNone, rec)
		if len(b) != 72 {
			t.Fatalf("batch is %d bytes, want 72", len(b))
		}
		_, err := Validate(b, ValidateOptions{MaxBatchBytes: 1 << 20})
		if KafkaCode(err) != kerr.InvalidRecord.Code {
			t.Fatalf("count %d: got %v (code %d), want INVALID_RECORD", n, err, KafkaCode(err))
		}
	}
}

// TestValidateRecordTimestamps: message.timestamp.before/after.max.ms apply to every record
// of a CreateTime batch, as Kafka's LogValidator.validateTimestamp does, not only to the
// header's first and max timestamps (a record out of timestamp order was let through).
func TestValidateRecordTimestamps(t *testing.T) {
	const now, hourMs = int64(1_700_000_000_000), int64(3_600_000)
	rule := TimestampRule{Check: true, NowMs: now, BeforeMaxMs: hourMs, AfterMaxMs: hourMs}
	header := func(first int64, attrs int16) Header {
		return Header{PartitionLeaderEpoch: -1, Attributes: attrs, FirstTimestamp: first, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	}
	cases := []struct {
		name   string
		first  int64
		attrs  int16
		deltas []int64
		rule   TimestampRule
		err    error
	}{
		{"all in range", now, 0, []int64{0, -hourMs + 1, hourMs - 1}, rule, nil},
		{"middle record two hours old", now, 0, []int64{0, -2 * hourMs, 0}, rule, ErrTimestamp},
		{"middle record two hours ahead", now - hourMs/2, 0, []int64{0, 2*hourMs + hourMs/2, 0}, rule, ErrTimestamp},
		{"no timestamps", -1, 0, []int64{0, 0}, rule, nil},
		{"LogAppendTime batch", now, AttrTimestampType, []int64{0, -2 * hourMs}, rule, nil},
		{"not checked", now, 0, []int64{0, -2 * hourMs}, TimestampRule{}, nil},
	}
	for _, c := range cases {
		for _, codec := range allCodecs {
			recs := make([]kmsg.Record, len(c.deltas))
			for i, d := range c.deltas {
				recs[i] = kmsg.Record{TimestampDelta64: d, Key: []byte("k")}
			}
			b := mustEncode(t, header(c.first, c.attrs), recs, codec)
			_, err := Validate(b, ValidateOptions{Timestamps: c.rule, Compacted: true})
			if c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
				t.Fatalf("%s/%s: got %v, want %v", c.name, compress.Name(codec), err, c.err)
			}
			if c.err != nil && KafkaCode(err) != kerr.InvalidTimestamp.Code {
				t.Fatalf("%s: code %d", c.name, KafkaCode(err))
			}
		}
	}
}
