package log

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/testclock"
)

func TestAppendReadRoundTrip(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	var want [][]byte
	for i := 0; i < 20; i++ {
		n := 1 + i%4
		b := valueBatch(n, 10+i, int64(1000+i))
		first, last := appendT(t, l, clone(b)...)
		end := int64(0)
		if len(want) > 0 {
			end = lastOffset(want[len(want)-1]) + 1
		}
		if first != end || last != end+int64(n)-1 {
			t.Fatalf("append %d: offsets [%d,%d], want [%d,%d]", i, first, last, end, end+int64(n)-1)
		}
		batch.SetBaseOffset(b, first)
		want = append(want, b)
	}
	// Several batches in one append get consecutive offsets.
	first, last := appendT(t, l, clone(valueBatch(2, 5, 1), valueBatch(3, 5, 1))...)
	if last-first != 4 {
		t.Fatalf("multi-batch append got [%d,%d]", first, last)
	}
	if l.EndOffset() != last+1 {
		t.Fatalf("EndOffset %d, want %d", l.EndOffset(), last+1)
	}
	// Reading from any offset returns the batch containing it, then the rest.
	for _, w := range want {
		for off := batch.BaseOffset(w); off <= lastOffset(w); off++ {
			got, err := l.Read(off, math.MaxInt32, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			bs := splitT(t, got)
			if !bytes.Equal(bs[0], w) {
				t.Fatalf("Read(%d): first batch base %d, want %d", off, batch.BaseOffset(bs[0]), batch.BaseOffset(w))
			}
			if lastOffset(bs[len(bs)-1]) != last {
				t.Fatalf("Read(%d) did not reach the end", off)
			}
		}
	}
	if got, err := l.Read(l.EndOffset(), 1000, math.MaxInt64); err != nil || got != nil {
		t.Fatalf("Read(end) = %d bytes, %v; want empty", len(got), err)
	}
	if _, err := l.Read(l.EndOffset()+1, 1000, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(end+1) err %v", err)
	}
	if _, err := l.Read(-1, 1000, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(-1) err %v", err)
	}
}

func TestReadLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 100 // index entries every couple of batches
	l := openT(t, t.TempDir(), cfg, nil)
	defer l.Close()
	big := valueBatch(1, 5000, 1)
	small := valueBatch(1, 50, 1)
	appendT(t, l, clone(big, small, small, small, big, small)...)
	all := scanAll(t, l)

	// KIP-74: the first batch is returned whole even if larger than maxBytes.
	got, _ := l.Read(0, 10, math.MaxInt64)
	if bs := splitT(t, got); len(bs) != 1 || !bytes.Equal(bs[0], all[0]) {
		t.Fatalf("oversized first batch: got %d batches", len(bs))
	}
	// maxBytes cuts at whole batches.
	limit := int32(len(all[1]) * 2)
	got, _ = l.Read(1, limit+int32(len(all[1]))-1, math.MaxInt64)
	if bs := splitT(t, got); len(bs) != 2 {
		t.Fatalf("Read with room for 2.x batches returned %d", len(bs))
	}
	// The big batch does not fit after the small ones.
	got, _ = l.Read(1, 4000, math.MaxInt64)
	if bs := splitT(t, got); len(bs) != 3 {
		t.Fatalf("got %d batches, want the 3 small ones", len(bs))
	}
	// maxOffset excludes batches whose base offset is >= it.
	for maxOff := int64(1); maxOff <= 6; maxOff++ {
		got, _ = l.Read(0, math.MaxInt32, maxOff)
		if bs := splitT(t, got); int64(len(bs)) != maxOff {
			t.Fatalf("maxOffset %d: %d batches", maxOff, len(bs))
		}
	}
	if got, err := l.Read(3, math.MaxInt32, 3); err != nil || got != nil {
		t.Fatalf("Read at maxOffset: %d bytes, %v", len(got), err)
	}
}

func TestRollBySizeAndReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	cfg.IndexIntervalBytes = 150
	l := openT(t, dir, cfg, nil)
	b := valueBatch(2, 100, 1) // about 290 bytes: 3 per segment
	for i := 0; i < 10; i++ {
		appendT(t, l, clone(b)...)
	}
	if n := l.NumSegments(); n != 4 {
		t.Fatalf("%d segments, want 4", n)
	}
	if _, _, err := l.Append(clone(valueBatch(10, 100, 1))); !errors.Is(err, ErrRecordListTooLarge) {
		t.Fatalf("append larger than a segment: %v", err)
	}
	before := scanAll(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed segments have index files; the active one does not.
	for _, base := range []int64{0, 6, 12} {
		if _, err := os.Stat(indexPath(dir, base)); err != nil {
			t.Fatalf("index of closed segment %d: %v", base, err)
		}
	}
	if _, err := os.Stat(indexPath(dir, 18)); err == nil {
		t.Fatalf("active segment has an index file")
	}
	l = openT(t, dir, cfg, nil)
	defer l.Close()
	after := scanAll(t, l)
	if len(after) != len(before) || l.EndOffset() != 20 || l.NumSegments() != 4 {
		t.Fatalf("reopen: %d batches, end %d, %d segments", len(after), l.EndOffset(), l.NumSegments())
	}
	requireBatches(t, "reopen", after, before)
	first, _ := appendT(t, l, clone(b)...)
	if first != 20 {
		t.Fatalf("append after reopen at %d", first)
	}
	// Reads seek with the loaded index.
	for off := int64(0); off < 22; off++ {
		got, err := l.Read(off, 1, math.MaxInt64)
		if err != nil || len(splitT(t, got)) != 1 || lastOffset(got) < off || batch.BaseOffset(got) > off {
			t.Fatalf("Read(%d) after reopen: %v", off, err)
		}
	}
}

func TestRollByTime(t *testing.T) {
	clk := testclock.New()
	cfg := DefaultConfig()
	cfg.SegmentMs = 1000
	l := openT(t, t.TempDir(), cfg, clk)
	defer l.Close()
	appendT(t, l, clone(valueBatch(1, 10, clk.Ms()))...)
	clk.Advance(1000 * time.Millisecond)
	appendT(t, l, clone(valueBatch(1, 10, clk.Ms()))...)
	if l.NumSegments() != 1 {
		t.Fatalf("rolled before segment.ms elapsed")
	}
	clk.Advance(time.Millisecond)
	appendT(t, l, clone(valueBatch(1, 10, clk.Ms()))...)
	if l.NumSegments() != 2 {
		t.Fatalf("did not roll after segment.ms: %d segments", l.NumSegments())
	}
}

func TestDeleteRecordsBeforePersists(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	l := openT(t, dir, cfg, nil)
	b := valueBatch(2, 100, 1)
	for i := 0; i < 10; i++ {
		appendT(t, l, clone(b)...)
	}
	if got, err := l.DeleteRecordsBefore(21); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecordsBefore(end+1) = %d, %v", got, err)
	}
	got, err := l.DeleteRecordsBefore(13)
	if err != nil || got != 13 || l.StartOffset() != 13 {
		t.Fatalf("DeleteRecordsBefore(13) = %d, %v; start %d", got, err, l.StartOffset())
	}
	if l.NumSegments() != 2 { // [0,6) and [6,12) are gone
		t.Fatalf("%d segments left, want 2", l.NumSegments())
	}
	if got, _ := l.DeleteRecordsBefore(5); got != 13 {
		t.Fatalf("start offset lowered to %d", got)
	}
	if _, err := l.Read(12, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below start: %v", err)
	}
	// The batch containing 13 starts at 12: Kafka returns it whole.
	if got, err := l.Read(13, 1, math.MaxInt64); err != nil || batch.BaseOffset(got) != 12 {
		t.Fatalf("Read(13): %v", err)
	}
	l.Close()
	l = openT(t, dir, cfg, nil)
	defer l.Close()
	if l.StartOffset() != 13 || l.EndOffset() != 20 {
		t.Fatalf("after reopen start %d end %d", l.StartOffset(), l.EndOffset())
	}
	// All the way to the end: the active segment stays, empty of live records.
	if got, err := l.DeleteRecordsBefore(20); err != nil || got != 20 {
		t.Fatalf("DeleteRecordsBefore(end) = %d, %v", got, err)
	}
	if got, err := l.Read(20, 100, math.MaxInt64); err != nil || got != nil {
		t.Fatalf("Read(end) after delete: %v", err)
	}
}

func TestRetentionTime(t *testing.T) {
	clk := testclock.New()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	cfg.RetentionMs = 10_000
	l := openT(t, t.TempDir(), cfg, clk)
	defer l.Close()
	for i := 0; i < 9; i++ { // 3 segments of 3 batches, each 1s apart
		appendT(t, l, clone(valueBatch(2, 100, clk.Ms()))...)
		clk.Advance(time.Second)
	}
	if n, err := l.EnforceRetention(); err != nil || n != 0 {
		t.Fatalf("nothing expired yet, deleted %d (%v)", n, err)
	}
	// Segment 0's newest batch is at t0+2s: expired once now > t0+12s.
	clk.Advance(3 * time.Second) // now t0+12s
	if n, _ := l.EnforceRetention(); n != 0 {
		t.Fatalf("deleted %d at the boundary", n)
	}
	clk.Advance(time.Millisecond)
	if n, _ := l.EnforceRetention(); n != 1 || l.StartOffset() != 6 {
		t.Fatalf("deleted %d, start %d; want 1, 6", n, l.StartOffset())
	}
	clk.Advance(time.Hour) // everything expired, but the active segment stays
	if n, _ := l.EnforceRetention(); n != 1 || l.NumSegments() != 1 || l.StartOffset() != 12 {
		t.Fatalf("deleted %d, %d segments, start %d", n, l.NumSegments(), l.StartOffset())
	}
	cfg.Delete = false // compact-only topics keep everything
	l.SetConfig(cfg)
	for i := 0; i < 9; i++ {
		appendT(t, l, clone(valueBatch(2, 100, 0))...)
	}
	if n, _ := l.EnforceRetention(); n != 0 {
		t.Fatalf("retention without the delete policy deleted %d", n)
	}
}

func TestRetentionBytes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	cfg.RetentionMs = -1
	l := openT(t, t.TempDir(), cfg, nil)
	defer l.Close()
	b := valueBatch(2, 100, 1)
	for i := 0; i < 10; i++ { // segments of 3,3,3,1 batches
		appendT(t, l, clone(b)...)
	}
	seg := int64(3 * len(b))
	cfg.RetentionBytes = l.Size() - seg // one segment too many
	l.SetConfig(cfg)
	if n, _ := l.EnforceRetention(); n != 1 {
		t.Fatalf("deleted %d, want 1", n)
	}
	cfg.RetentionBytes = l.Size() - 2*seg - 1 // two segments too many; the active one stays
	l.SetConfig(cfg)
	if n, _ := l.EnforceRetention(); n != 2 || l.StartOffset() != 18 || l.NumSegments() != 1 {
		t.Fatalf("deleted %d, start %d", n, l.StartOffset())
	}
	if bs := scanAll(t, l); len(bs) != 1 {
		t.Fatalf("%d batches left", len(bs))
	}
}

func TestDeleteRemovesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	l := openT(t, dir, DefaultConfig(), nil)
	appendT(t, l, clone(valueBatch(1, 1, 1))...)
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dir still there: %v", err)
	}
	if _, _, err := l.Append(clone(valueBatch(1, 1, 1))); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after delete: %v", err)
	}
}

func TestWaitDurable(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	_, last := appendT(t, l, clone(valueBatch(3, 10, 1))...)
	if l.DurableEnd() != 0 {
		t.Fatalf("durable before any sync: %d", l.DurableEnd())
	}
	done := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() { done <- l.WaitDurable(last + 1) }()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if l.DurableEnd() != last+1 {
		t.Fatalf("DurableEnd %d, want %d", l.DurableEnd(), last+1)
	}
}

// TestSyncAsyncReportsDurable: SyncAsync needs no waiting goroutine of the caller's; the
// flusher makes the appends durable and reports the durable end through OnDurable.
func TestSyncAsyncReportsDurable(t *testing.T) {
	reported := make(chan int64, 16)
	l, err := Open(memTempDir(t), DefaultConfig(), Options{OnDurable: func(end int64) { reported <- end }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 3; i++ {
		_, last := appendT(t, l, clone(valueBatch(2, 10, 1))...)
		l.SyncAsync()
		for end := int64(-1); end < last+1; {
			end = <-reported
		}
		if l.DurableEnd() < last+1 {
			t.Fatalf("OnDurable reported %d before DurableEnd reached it (%d)", last+1, l.DurableEnd())
		}
	}
}
