package log

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wantHeaders is what ScanHeaders must report for batches as Scan returns them: each
// header, with the records of control batches only.
func wantHeaders(t fataler, bs [][]byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for _, b := range bs {
		h, err := parseStored(b)
		if err != nil {
			t.Fatalf("stored batch: %v", err)
		}
		if h.Attributes&batch.AttrControl == 0 {
			h.Records = nil
		} else {
			h.Records = append([]byte(nil), h.Records...)
		}
		out = append(out, h)
	}
	return out
}

func scanHeadersT(t fataler, l *Log, from int64) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	if err := l.ScanHeaders(from, func(h *kmsg.RecordBatch) error {
		c := *h
		if c.Records != nil {
			c.Records = append([]byte(nil), c.Records...)
		}
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatalf("ScanHeaders(%d): %v", from, err)
	}
	return out
}

// TestScanHeaders: ScanHeaders reports exactly the headers of the batches Scan returns, from
// any offset, over segments of small and large batches, transaction markers and the gaps
// compaction leaves.
func TestScanHeaders(t *testing.T) {
	rng := rand.New(rand.NewSource(10))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 300_000
	cfg.IndexIntervalBytes = 1000
	l := openT(t, dir, cfg, nil)
	defer l.Close()
	for i := 0; i < 300; i++ {
		var b []byte
		switch r := rng.Intn(10); {
		case r == 0:
			b = controlBatch(7, 1, rng.Intn(2) == 0, int64(i))
		case r < 3:
			b = valueBatch(1+rng.Intn(20), 1000+rng.Intn(2000), int64(i)) // large: one pread per header
		default:
			b = makeBatch([]rec{{key: []byte{byte(rng.Intn(5))}, value: []byte("v"), ts: int64(i)}},
				batchOpts{producerID: 7, producerEpoch: 1, firstSeq: int32(i)})
		}
		appendT(t, l, clone(b)...)
	}
	cfg.Compact = true
	l.SetConfig(cfg)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, got %d", l.NumSegments())
	}
	all := scanAll(t, l)
	for from := int64(0); from <= l.EndOffset(); from += 1 + rng.Int63n(20) {
		var want [][]byte
		for _, b := range all {
			if lastOffset(b) >= from {
				want = append(want, b)
			}
		}
		if got, w := scanHeadersT(t, l, from), wantHeaders(t, want); !reflect.DeepEqual(got, w) {
			t.Fatalf("ScanHeaders(%d): %d headers, want %d (or they differ)", from, len(got), len(w))
		}
	}
}
