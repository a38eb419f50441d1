package share

import (
	"context"
	"runtime"
	"testing"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
)

// P7's in-flight shape (docs/benchmarks.md): 250 share partitions with a window of
// 4000 records each, the first held ACQUIRED and then RELEASEd (AVAILABLE, so the
// start offset stays), the rest ACCEPTed and REJECTed alternately: a state per record,
// the worst case for a compact representation. Acquisitions are P7's raw share fetches
// (about 1 MiB of 50-record log batches, BatchSize = the lock limit) and the acknowledgements
// one list of per-offset types per fetched range.
const (
	p7Partitions   = 250
	p7Locks        = 4000
	p7LogBatch     = 50
	p7FetchRecords = 1000
	p7InFlight     = p7Partitions * p7Locks
	// p7StatePartitions is share.coordinator.state.topic.num.partitions, as the broker has it.
	p7StatePartitions = 50
	// p7BoundPerRecB is BENCHMARKS.md's target for memory per in-flight share record,
	// which this test holds the heap to. Before the compact representation (#15) it was
	// 98.6 B as built (57.5 in the share partitions, 41.0 in the store) and 129.3 B
	// restarted (88.3 + 41.0); with it, about 7 B.
	p7BoundPerRecB = 32
)

// heapInUse is the live heap after a full collection: what the process must hold.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// allocated is the heap allocated so far, garbage included.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func p7Key(p int) sharestate.Key {
	return sharestate.Key{GroupID: "p7", TopicID: [16]byte{7}, Partition: int32(p)}
}

// buildP7Partition makes one partition's in-flight state and writes every Update to the
// store, as the Manager does.
func buildP7Partition(t *testing.T, store *sharestate.Store, p int) *sharepartition.SharePartition {
	t.Helper()
	ctx := context.Background()
	k := p7Key(p)
	if err := store.Initialize(ctx, k, 0, 0); err != nil {
		t.Fatal(err)
	}
	cfg := sharepartition.DefaultConfig()
	cfg.MaxInFlightRecords, cfg.DeliveryCountLimit = p7Locks, 10
	sp, err := sharepartition.New(cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	write := func(u sharepartition.Update) {
		if u.Empty() {
			return
		}
		if err := store.Write(ctx, k, u.StateEpoch, leaderEpoch, u.StartOffset, u.DeliveryCompleteCount, ToStoreBatches(u.Batches)); err != nil {
			t.Fatal(err)
		}
	}
	var acks []sharepartition.AckBatch
	for off := int64(0); off < p7Locks; off += p7FetchRecords {
		var read []sharepartition.FetchedBatch
		for b := off; b < off+p7FetchRecords; b += p7LogBatch {
			read = append(read, sharepartition.FetchedBatch{BaseOffset: b, LastOffset: b + p7LogBatch - 1, ProducerID: -1})
		}
		res := sp.Acquire(0, sharepartition.AcquireRequest{Member: "member-1", FetchOffset: sp.NextFetchOffset(), Batches: read,
			MaxRecords: p7Locks, BatchSize: p7Locks})
		write(res.Update)
		for _, r := range res.Records {
			ab := sharepartition.AckBatch{FirstOffset: r.FirstOffset, LastOffset: r.LastOffset}
			for o := r.FirstOffset; o <= r.LastOffset; o++ {
				typ := sharepartition.AckAccept
				switch {
				case o == 0:
					typ = sharepartition.AckRelease // the held record
				case o%2 == 1:
					typ = sharepartition.AckReject
				}
				ab.Types = append(ab.Types, typ)
			}
			acks = append(acks, ab)
		}
	}
	u, err := sp.Acknowledge(0, "member-1", acks)
	if err != nil {
		t.Fatal(err)
	}
	write(u)
	if sp.InFlightRecords() != p7Locks || sp.StartOffset() != 0 || sp.NextFetchOffset() != 0 {
		t.Fatalf("partition %d: %d in flight from %d, next fetch %d", p, sp.InFlightRecords(), sp.StartOffset(), sp.NextFetchOffset())
	}
	return sp
}

// TestInFlightMemoryP7 measures the heap that P7's one million in-flight records cost,
// for the live share partitions and for the share-state store separately, twice: as the
// operations built them, and after a restart (the store replayed from its log, every
// partition restored from the store's Read and its held record acquired by a new
// member), which is what P7 measures.
func TestInFlightMemoryP7(t *testing.T) {
	if testing.Short() {
		t.Skip("builds one million in-flight records")
	}
	ctx := context.Background()
	// __share_group_state with the broker's 50 partitions: each is a Core of its own, with
	// its share of the store's budget of decoded batches.
	logs := make([]coordlog.Partition, p7StatePartitions)
	for i := range logs {
		logs[i] = coordlog.NewMemory(int32(i))
	}
	stateConfig := sharestate.Config{NumPartitions: p7StatePartitions}

	store, err := sharestate.New(stateConfig, logs)
	if err != nil {
		t.Fatal(err)
	}
	sps := make([]*sharepartition.SharePartition, p7Partitions)
	for p := range sps {
		sps[p] = buildP7Partition(t, store, p)
	}
	store.Keys() // each driver has tidied once its queue ran empty
	all := heapInUse()
	store.Close()
	store = nil
	noStore := heapInUse()
	runtime.KeepAlive(sps)
	sps = nil
	logOnly := heapInUse()
	liveBuilt := float64(noStore-logOnly) / p7InFlight
	storeBuilt := float64(all-noStore) / p7InFlight

	// Restart: a new store replays the log; each partition is restored from it.
	allocs := allocated()
	store, err = sharestate.New(stateConfig, logs)
	if err != nil {
		t.Fatal(err)
	}
	replayed := allocated()
	sps = make([]*sharepartition.SharePartition, p7Partitions)
	cfg := sharepartition.DefaultConfig()
	cfg.MaxInFlightRecords, cfg.DeliveryCountLimit = p7Locks, 10
	for p := range sps {
		st, err := store.Read(ctx, p7Key(p), leaderEpoch)
		if err != nil {
			t.Fatal(err)
		}
		if sps[p], err = sharepartition.RestoreFrom(cfg, st.StartOffset, st.StateEpoch, fromStoreBatches(st.Batches)); err != nil {
			t.Fatal(err)
		}
		if sps[p].InFlightRecords() != p7Locks || sps[p].NextFetchOffset() != 0 {
			t.Fatalf("restored partition %d: %d in flight, next fetch %d", p, sps[p].InFlightRecords(), sps[p].NextFetchOffset())
		}
		// P7 measures once a new member's first share fetch was answered: it acquires
		// the released record again.
		res := sps[p].Acquire(0, sharepartition.AcquireRequest{Member: "member-2", FetchOffset: 0,
			Batches: []sharepartition.FetchedBatch{{BaseOffset: 0, LastOffset: p7LogBatch - 1, ProducerID: -1}}, MaxRecords: 500, BatchSize: 500})
		if res.Count != 1 || res.Records[0].DeliveryCount != 2 {
			t.Fatalf("restored partition %d: first fetch acquired %+v", p, res.Records)
		}
	}
	loaded := allocated()
	store.Keys()
	all = heapInUse()
	store.Close()
	store = nil
	noStore = heapInUse()
	runtime.KeepAlive(sps)
	liveRestored := float64(noStore-logOnly) / p7InFlight
	storeRestored := float64(all-noStore) / p7InFlight
	runtime.KeepAlive(logs)

	t.Logf("bytes per in-flight record, as built: share partitions %.1f, store %.1f, total %.1f",
		liveBuilt, storeBuilt, liveBuilt+storeBuilt)
	t.Logf("bytes per in-flight record, restarted: share partitions %.1f, store %.1f, total %.1f",
		liveRestored, storeRestored, liveRestored+storeRestored)
	// What the restart allocated on the way (garbage at once): P7 measures RSS, which
	// the heap's high-water mark sets.
	t.Logf("bytes allocated per in-flight record by the restart: store replay %.1f, partition loads %.1f",
		float64(replayed-allocs)/p7InFlight, float64(loaded-replayed)/p7InFlight)
	for _, total := range []float64{liveBuilt + storeBuilt, liveRestored + storeRestored} {
		if total >= p7BoundPerRecB {
			t.Errorf("%.1f bytes per in-flight record, want < %d", total, p7BoundPerRecB)
		}
	}
}
