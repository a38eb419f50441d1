package log

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/testclock"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rec is one record to put in a test batch. A nil value is a tombstone.
type rec struct {
	key, value []byte
	ts         int64
}

// batchOpts are the header fields of a test batch.
type batchOpts struct {
	attrs         int16 // batch.AttrTransactional, batch.AttrControl, ...
	producerID    int64
	producerEpoch int16
	firstSeq      int32
}

var plain = batchOpts{producerID: -1, producerEpoch: -1, firstSeq: -1}

// makeBatch encodes an uncompressed v2 batch with a valid CRC (base offset 0).
func makeBatch(recs []rec, o batchOpts) []byte {
	var records []byte
	first, maxTs := recs[0].ts, int64(math.MinInt64)
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.ts - first, OffsetDelta: int32(i), Key: r.key, Value: r.value}
		body := kr.AppendTo(nil)[1:] // encoded with Length 0, a one-byte varint
		kr.Length = int32(len(body))
		records = kr.AppendTo(records)
		maxTs = max(maxTs, r.ts)
	}
	rb := kmsg.RecordBatch{
		Magic:           2,
		Attributes:      o.attrs,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  first,
		MaxTimestamp:    maxTs,
		ProducerID:      o.producerID,
		ProducerEpoch:   o.producerEpoch,
		FirstSequence:   o.firstSeq,
		NumRecords:      int32(len(recs)),
		Records:         records,
	}
	rb.Length = int32(batch.HeaderSize - batch.LengthPrefix + len(records))
	b := rb.AppendTo(nil)
	batch.UpdateCRC(b)
	if _, err := batch.Parse(b); err != nil {
		panic(fmt.Sprintf("makeBatch built an invalid batch: %v", err))
	}
	return b
}

// valueBatch is a batch of n records with values of size valueBytes and timestamp ts.
func valueBatch(n, valueBytes int, ts int64) []byte {
	recs := make([]rec, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueBytes)
		recs[i] = rec{key: []byte(fmt.Sprintf("k%d", i)), value: v, ts: ts}
	}
	return makeBatch(recs, plain)
}

// controlBatch is a transaction marker (commit or abort) for a producer.
func controlBatch(pid int64, epoch int16, commit bool, ts int64) []byte {
	typ := int16(0)
	if commit {
		typ = 1
	}
	key := []byte{0, 0, byte(typ >> 8), byte(typ)}
	value := []byte{0, 0, 0, 0, 0, 0} // version 0, coordinator epoch 0
	return makeBatch([]rec{{key: key, value: value, ts: ts}},
		batchOpts{attrs: batch.AttrControl | batch.AttrTransactional, producerID: pid, producerEpoch: epoch, firstSeq: -1})
}

// clone copies batches so the log can own (and rewrite the base offset of) the copies.
func clone(bs ...[]byte) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = append([]byte(nil), b...)
	}
	return out
}

func openT(t testing.TB, dir string, cfg Config, clk *testclock.Clock) *Log {
	t.Helper()
	var opts Options
	if clk != nil {
		opts.Now = clk.Now
	}
	l, err := Open(dir, cfg, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func appendT(t testing.TB, l *Log, bs ...[]byte) (int64, int64) {
	t.Helper()
	first, last, err := l.Append(bs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return first, last
}

// scanAll returns copies of every batch in the log from the start offset.
func scanAll(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	if err := l.Scan(0, func(b []byte) error {
		out = append(out, append([]byte(nil), b...))
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

// requirePrefix fails the test unless got is want or a prefix of it, batch for batch: what
// a log holds after a crash that may have lost what was not yet durable.
func requirePrefix(t testing.TB, what string, got, want [][]byte) {
	t.Helper()
	if len(got) > len(want) {
		t.Fatalf("%s: %d batches, appended %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: batch %d differs", what, i)
		}
	}
}

// requireBatches fails the test unless got is exactly want, batch for batch.
func requireBatches(t testing.TB, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d batches, want %d", what, len(got), len(want))
	}
	requirePrefix(t, what, got, want)
}

// splitT splits Read output into batches.
func splitT(t testing.TB, b []byte) [][]byte {
	t.Helper()
	bs, err := batch.Split(b)
	if err != nil {
		t.Fatalf("Read returned partial batches: %v", err)
	}
	return bs
}

// memTempDir returns a temporary directory on tmpfs when the machine has one, for tests
// that reopen logs hundreds of times: they check recovery logic, not the disk, and fsync on
// tmpfs costs nothing. Elsewhere it is t.TempDir().
func memTempDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "exactq-log-test-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// tinyKeyMap is a compaction key map of three slots (two keys): compacting more keys
// than that takes several passes, so every compaction test covers them.
func tinyKeyMap(t testing.TB) *KeyMap {
	t.Helper()
	m, err := NewKeyMap(3 * keySlotBytes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
