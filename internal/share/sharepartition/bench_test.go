package sharepartition

import (
	"runtime"
	"testing"
)

// BenchmarkAcquireAccept is one consumer fetching 500-record log batches and
// accepting each batch whole: the steady-state cost per record.
func BenchmarkAcquireAccept(b *testing.B) {
	const batchLen = 500
	cfg := DefaultConfig()
	sp, _ := New(cfg, 0, 0)
	batches := make([]FetchedBatch, 1)
	acks := make([]AckBatch, 1)
	types := []AckType{AckAccept}
	b.ReportAllocs()
	b.ResetTimer()
	var off int64
	for i := 0; i < b.N; i += batchLen {
		batches[0] = FetchedBatch{BaseOffset: off, LastOffset: off + batchLen - 1, ProducerID: -1}
		res := sp.Acquire(int64(i), AcquireRequest{Member: "m", FetchOffset: off, Batches: batches, MaxRecords: batchLen, BatchSize: batchLen})
		if res.Count != batchLen {
			b.Fatal(res.Count)
		}
		acks[0] = AckBatch{FirstOffset: off, LastOffset: off + batchLen - 1, Types: types}
		if _, err := sp.Acknowledge(int64(i), "m", acks); err != nil {
			b.Fatal(err)
		}
		off += batchLen
	}
}

// BenchmarkAcquireAcceptPerRecord accepts record by record (per-offset state).
func BenchmarkAcquireAcceptPerRecord(b *testing.B) {
	const batchLen = 500
	sp, _ := New(DefaultConfig(), 0, 0)
	acks := make([]AckBatch, 1)
	types := []AckType{AckAccept}
	b.ReportAllocs()
	b.ResetTimer()
	var off int64
	for i := 0; i < b.N; i++ {
		if off == sp.nextOffset {
			sp.Acquire(int64(i), AcquireRequest{Member: "m", FetchOffset: off,
				Batches: []FetchedBatch{{BaseOffset: off, LastOffset: off + batchLen - 1, ProducerID: -1}}, MaxRecords: batchLen, BatchSize: batchLen})
		}
		acks[0] = AckBatch{FirstOffset: off, LastOffset: off, Types: types}
		if _, err := sp.Acknowledge(int64(i), "m", acks); err != nil {
			b.Fatal(err)
		}
		off++
	}
}

// BenchmarkInFlightMemory holds 1M ACQUIRED records in uniform batches of 500
// and reports the heap bytes per in-flight record.
func BenchmarkInFlightMemory(b *testing.B) {
	const records, batchLen = 1_000_000, 500
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cfg := DefaultConfig()
		cfg.MaxInFlightRecords = records
		sp, _ := New(cfg, 0, 0)
		for off := int64(0); off < records; off += batchLen {
			sp.Acquire(0, AcquireRequest{Member: "consumer-1", FetchOffset: off,
				Batches: []FetchedBatch{{BaseOffset: off, LastOffset: off + batchLen - 1, ProducerID: -1}}, MaxRecords: batchLen, BatchSize: batchLen})
		}
		if sp.InFlightRecords() != records {
			b.Fatal(sp.InFlightRecords())
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/records, "bytes/record")
		runtime.KeepAlive(sp)
	}
}
