package log

import (
	"bytes"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/exactq/exactq/internal/testclock"
)

// TestReadChunksMatchesRead: the chunks of a read are exactly the bytes Read copies, across
// segments, with the offset limit and the KIP-74 first batch.
func TestReadChunksMatchesRead(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 500
	l := openT(t, t.TempDir(), cfg, nil)
	defer l.Close()
	for i := range 40 {
		appendT(t, l, valueBatch(1+i%3, 200+40*(i%5), 1_700_000_000_000))
	}
	if l.NumSegments() < 5 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	end := l.EndOffset()
	for _, c := range []struct {
		offset    int64
		maxBytes  int32
		maxOffset int64
	}{
		{0, 1 << 20, math.MaxInt64}, // everything, many segments
		{0, 1, math.MaxInt64},       // first batch only (KIP-74)
		{5, 2500, math.MaxInt64},
		{17, 6000, end - 3},
		{end - 1, 100, math.MaxInt64},
		{end, 100, math.MaxInt64}, // at the end: nothing
		{3, 100, 3},               // at the offset limit: nothing
	} {
		want, werr := l.Read(c.offset, c.maxBytes, c.maxOffset)
		chunks, n, err := l.ReadChunks(nil, c.offset, c.maxBytes, c.maxOffset)
		if werr != nil || err != nil {
			t.Fatalf("%+v: Read %v, ReadChunks %v", c, werr, err)
		}
		got := readChunksT(t, chunks)
		ReleaseChunks(chunks)
		if n != int64(len(want)) || !bytes.Equal(got, want) {
			t.Fatalf("%+v: ReadChunks gave %d bytes (%d in chunks), Read %d", c, n, len(got), len(want))
		}
		if len(want) == 0 && len(chunks) != 0 {
			t.Fatalf("%+v: empty read returned %d chunks", c, len(chunks))
		}
	}
	for _, off := range []int64{-1, end + 1} {
		chunks, _, err := l.ReadChunks(nil, off, 100, math.MaxInt64)
		if !errors.Is(err, ErrOffsetOutOfRange) || len(chunks) != 0 {
			t.Fatalf("ReadChunks(%d): %v, %d chunks; want ErrOffsetOutOfRange", off, err, len(chunks))
		}
	}
}

// TestChunksOutliveTheirSegment: a held chunk keeps delivering its bytes after retention
// deleted its segment, compaction replaced it and the log was closed; its file is closed
// when the last hold is released, not before.
func TestChunksOutliveTheirSegment(t *testing.T) {
	for _, remove := range []struct {
		name string
		do   func(t *testing.T, l *Log)
	}{
		{"DeleteRecords", func(t *testing.T, l *Log) {
			if _, err := l.DeleteRecordsBefore(l.EndOffset()); err != nil {
				t.Fatal(err)
			}
		}},
		{"retention", func(t *testing.T, l *Log) {
			cfg := l.config()
			cfg.RetentionBytes = 0
			l.SetConfig(cfg)
			if n, err := l.EnforceRetention(); err != nil || n == 0 {
				t.Fatalf("EnforceRetention: %d segments, %v", n, err)
			}
		}},
		{"compaction", func(t *testing.T, l *Log) {
			cfg := l.config()
			cfg.Compact = true
			l.SetConfig(cfg)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := l.Compact(tinyKeyMap(t)); err != nil {
				t.Fatal(err)
			}
		}},
		{"Close", func(t *testing.T, l *Log) {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{"Delete", func(t *testing.T, l *Log) {
			if err := l.Delete(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(remove.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 300
			dir := t.TempDir()
			l := openT(t, dir, cfg, testclock.New())
			defer l.Close()
			for range 12 { // one key per batch, rewritten: compaction empties old segments
				appendT(t, l, makeBatch([]rec{kv("k", "value-of-some-length-to-fill-segments", 1_700_000_000_000)}, plain))
			}
			want, err := l.Read(0, 1<<20, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			a, _, err := l.ReadChunks(nil, 0, 1<<20, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			b, _, err := l.ReadChunks(nil, 0, 1<<20, math.MaxInt64) // a second hold on the same files
			if err != nil {
				t.Fatal(err)
			}
			first := a[0].File()

			if l.NumSegments() < 3 {
				t.Fatalf("want several segments, have %d", l.NumSegments())
			}
			remove.do(t, l)
			if _, err := os.Stat(logPath(dir, 0)); remove.name != "Close" && remove.name != "compaction" && err == nil {
				t.Fatalf("the first segment file is still in the directory")
			}
			if got := readChunksT(t, a); !bytes.Equal(got, want) {
				t.Fatalf("held bytes changed after %s", remove.name)
			}
			ReleaseChunks(a)
			if got := readChunksT(t, b); !bytes.Equal(got, want) {
				t.Fatalf("bytes of the second hold changed after the first was released")
			}
			ReleaseChunks(b)
			if remove.name == "Close" || remove.name == "Delete" || remove.name == "DeleteRecords" || remove.name == "retention" {
				var buf [1]byte
				if _, err := first.ReadAt(buf[:], 0); !errors.Is(err, os.ErrClosed) {
					t.Fatalf("file still open after the log and every chunk let go: %v", err)
				}
			}
		})
	}
}

// TestChunkHeldByLogOnly: releasing every chunk leaves a live segment's file open for the log.
func TestChunkHeldByLogOnly(t *testing.T) {
	l := openT(t, t.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	appendT(t, l, valueBatch(2, 100, 1_700_000_000_000))
	chunks, _, err := l.ReadChunks(nil, 0, 1<<20, math.MaxInt64)
	if err != nil || len(chunks) != 1 {
		t.Fatalf("ReadChunks: %d chunks, %v", len(chunks), err)
	}
	ReleaseChunks(chunks)
	if _, err := l.Read(0, 1<<20, math.MaxInt64); err != nil {
		t.Fatalf("Read after releasing a chunk: %v", err)
	}
	appendT(t, l, valueBatch(2, 100, 1_700_000_000_000))
}
