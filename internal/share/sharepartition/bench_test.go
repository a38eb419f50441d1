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

// BenchmarkAcquireAlternatePerRecord accepts and rejects alternately, record by record,
// while the first record of each 500-record batch stays acquired until the others are
// done (so the start offset waits): every record gets a state of its own, P7's shape,
// and the batch ends up packed while it is being acknowledged.
func BenchmarkAcquireAlternatePerRecord(b *testing.B) {
	const batchLen = 500
	sp, _ := New(DefaultConfig(), 0, 0)
	acks := make([]AckBatch, 1)
	types := [][]AckType{{AckAccept}, {AckReject}}
	b.ReportAllocs()
	b.ResetTimer()
	var base, i int64
	for n := 0; n < b.N; n++ {
		if i == 0 {
			sp.Acquire(int64(n), AcquireRequest{Member: "m", FetchOffset: base,
				Batches: []FetchedBatch{{BaseOffset: base, LastOffset: base + batchLen - 1, ProducerID: -1}}, MaxRecords: batchLen, BatchSize: batchLen})
		}
		off := base + (i+1)%batchLen // 1, 2, ... 499, then the held 0
		acks[0] = AckBatch{FirstOffset: off, LastOffset: off, Types: types[off%2]}
		if _, err := sp.Acknowledge(int64(n), "m", acks); err != nil {
			b.Fatal(err)
		}
		if i++; i == batchLen {
			base, i = base+batchLen, 0
		}
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
