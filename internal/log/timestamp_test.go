package log

import (
	"math/rand"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// timedBatch builds a batch whose records have the given timestamps, compressed with
// codec (batch.Encode) or plain.
func timedBatch(t *testing.T, tss []int64, codec int8) []byte {
	t.Helper()
	if codec == batch.CodecNone {
		recs := make([]rec, len(tss))
		for i, ts := range tss {
			recs[i] = rec{key: []byte{byte(i)}, value: []byte("v"), ts: ts}
		}
		return makeBatch(recs, plain)
	}
	first := tss[0]
	recs := make([]kmsg.Record, len(tss))
	for i, ts := range tss {
		recs[i] = kmsg.Record{TimestampDelta64: ts - first, Key: []byte{byte(i)}, Value: []byte("value")}
	}
	b, err := batch.Encode(nil, batch.NoProducer(0, first), recs, codec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bruteTimes lists every record's offset and timestamp from a full scan.
func bruteTimes(t *testing.T, l *Log) []recordTime {
	t.Helper()
	var all []recordTime
	for _, b := range scanAll(t, l) {
		rs, err := recordTimes(b)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rs...)
	}
	return all
}

func checkTimestamps(t *testing.T, l *Log, what string) {
	t.Helper()
	all := bruteTimes(t, l)
	start := l.StartOffset()
	for target := int64(-5); target <= 1100; target += 7 {
		wantOff, wantTs, wantOK := int64(-1), int64(-1), false
		for _, r := range all {
			if r.offset >= start && r.ts >= target {
				wantOff, wantTs, wantOK = r.offset, r.ts, true
				break
			}
		}
		off, ts, ok, err := l.OffsetForTimestamp(target)
		if err != nil || ok != wantOK || off != wantOff || ts != wantTs {
			t.Fatalf("%s: OffsetForTimestamp(%d) = %d,%d,%v,%v; want %d,%d,%v", what, target, off, ts, ok, err, wantOff, wantTs, wantOK)
		}
	}
	wantTs, wantOff := int64(-1), int64(-1)
	for _, r := range all {
		if r.ts > wantTs {
			wantTs, wantOff = r.ts, r.offset
		}
	}
	ts, off, err := l.MaxTimestamp()
	if err != nil || ts != wantTs || off != wantOff {
		t.Fatalf("%s: MaxTimestamp = %d@%d, %v; want %d@%d", what, ts, off, err, wantTs, wantOff)
	}
}

func TestTimestamps(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 150
	l := openT(t, dir, cfg, nil)
	if ts, off, err := l.MaxTimestamp(); ts != -1 || off != -1 || err != nil {
		t.Fatalf("empty log MaxTimestamp = %d@%d, %v", ts, off, err)
	}
	if _, _, ok, _ := l.OffsetForTimestamp(0); ok {
		t.Fatalf("empty log found a timestamp")
	}
	codecs := []int8{batch.CodecNone, batch.CodecNone, batch.CodecGzip, batch.CodecLZ4, batch.CodecZstd, batch.CodecSnappy}
	base := int64(0)
	for i := 0; i < 80; i++ {
		base += int64(rng.Intn(20)) // roughly rising, with records out of order
		tss := make([]int64, 1+rng.Intn(5))
		for j := range tss {
			tss[j] = base + int64(rng.Intn(40)) - 20
		}
		b := timedBatch(t, tss, codecs[rng.Intn(len(codecs))])
		if i%10 == 3 {
			batch.SetLogAppendTime(b, base+5) // every record reads as base+5
		}
		appendT(t, l, b)
	}
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, got %d", l.NumSegments())
	}
	checkTimestamps(t, l, "fresh")
	l.Close()
	l = openT(t, dir, cfg, nil) // closed segments' time indexes come from their files
	defer l.Close()
	checkTimestamps(t, l, "reopened")
	// Cut in front of the max so that MaxTimestamp must look past it.
	_, maxOff, _ := l.MaxTimestamp()
	for _, cut := range []int64{maxOff + 1, l.EndOffset() / 2, l.EndOffset() - 3} {
		if _, err := l.DeleteRecordsBefore(cut); err != nil {
			t.Fatal(err)
		}
		checkTimestamps(t, l, "after DeleteRecords") // never answers below the start offset
	}
}

// TestMaxTimestampBelowStart: when DeleteRecords cuts off the batch with the largest
// timestamp inside a segment, MaxTimestamp answers from what is left.
func TestMaxTimestampBelowStart(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	for _, tss := range [][]int64{{1000, 900}, {10}, {20, 500, 30}, {500}} {
		appendT(t, l, timedBatch(t, tss, batch.CodecNone))
	}
	if ts, off, _ := l.MaxTimestamp(); ts != 1000 || off != 0 {
		t.Fatalf("MaxTimestamp = %d@%d, want 1000@0", ts, off)
	}
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if ts, off, _ := l.MaxTimestamp(); ts != 500 || off != 4 {
		t.Fatalf("MaxTimestamp after DeleteRecords = %d@%d, want 500@4", ts, off)
	}
	if off, ts, ok, _ := l.OffsetForTimestamp(900); !ok && off == -1 && ts == -1 {
		// 900 was at offset 1, below the start offset now: nothing is >= 900.
	} else {
		t.Fatalf("OffsetForTimestamp(900) = %d,%d,%v; want none", off, ts, ok)
	}
}
