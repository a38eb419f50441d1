package producerstate

import (
	"runtime"
	"testing"
)

// heapBytesPerProducer is the live heap one producer entry costs, measured over n
// producers that each appended one batch (what a flood of fresh producer ids leaves).
func heapBytesPerProducer(n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewWithConfig(Config{})
	for i := range n {
		s.Update(Batch{ProducerID: int64(i + 1), Epoch: 0, BaseSeq: 0, LastSeq: 0, FirstOffset: int64(i), LastOffset: int64(i), TimestampMs: 1})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// A producer that appended one batch costs ~135 bytes of heap (247 when every entry had
// room for five batches; the issue's ~350 B each was resident memory, GC headroom
// included).
func TestProducerEntryBytes(t *testing.T) {
	got := heapBytesPerProducer(200_000)
	t.Logf("%.0f bytes per one-batch producer", got)
	if got > 180 {
		t.Fatalf("a one-batch producer entry costs %.0f heap bytes, want at most 180", got)
	}
}
