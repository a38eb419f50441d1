package sharepartition

import (
	"runtime/metrics"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/alloctest"
)

// A log batch's offset span is not bounded by its bytes: compaction leaves gaps,
// and a 72-byte batch may claim lastOffsetDelta 999,999,999 (issue 17 finding 1).
// Every step below used to allocate or loop per offset of such a span (40+ bytes
// an offset: ~40 GB for 10^9); each must now cost what the distinct states cost.

const hugeSpan = int64(1) << 40

// stepBudgetBytes is what one step may allocate however large the span is.
const stepBudgetBytes = 64 << 10

func hugeBatch(base int64) FetchedBatch {
	return FetchedBatch{BaseOffset: base, LastOffset: base + hugeSpan - 1, ProducerID: -1}
}

// bounded runs step once and fails if it allocated more than stepBudgetBytes.
func bounded(t *testing.T, what string, step func()) {
	t.Helper()
	if d := alloctest.Bytes(step); d > stepBudgetBytes {
		t.Fatalf("%s allocated %d bytes over a span of %d offsets (budget %d)", what, d, hugeSpan, stepBudgetBytes)
	}
}

// allocatedBytes is the process's cumulative heap allocation, cheap to read (no
// stop-the-world, unlike runtime.ReadMemStats) but counted a span at a time.
func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// runCount is the number of state entries the partition holds.
func (sp *SharePartition) runCount() int {
	n := 0
	for _, b := range sp.batches {
		n += b.runCount()
	}
	return n
}

func wantRuns(t *testing.T, sp *SharePartition, max int) {
	t.Helper()
	if n := sp.runCount(); n > max {
		t.Fatalf("partition holds %d state runs, want at most %d: %+v", n, max, sp.Describe().Records)
	}
}

// acquireHuge acquires one huge log batch at base for member.
func acquireHuge(t *testing.T, sp *SharePartition, now int64, member string, base int64, mode AcquireMode) AcquireResult {
	t.Helper()
	var res AcquireResult
	bounded(t, "acquire", func() {
		res = sp.Acquire(now, AcquireRequest{Member: member, FetchOffset: base, Batches: []FetchedBatch{hugeBatch(base)},
			MaxRecords: 10, BatchSize: 10, Mode: mode})
	})
	return res
}

// The crash: a share consumer acquires the whole lying batch, then
// acknowledges offset 0 alone.
func TestHugeBatchAcknowledgeOneOffset(t *testing.T) {
	sp := newSP(t, 0)
	res := acquireHuge(t, sp, 0, "m", 0, BatchOptimized)
	wantAcquired(t, res, AcquiredRecords{0, hugeSpan - 1, 1})
	bounded(t, "ack of offset 0", func() { mustAck(t, sp, 1, "m", ack(0, 0, AckAccept)) })
	wantOffsets(t, sp, 1, hugeSpan-1)
	bounded(t, "ack of one offset in the middle", func() { mustAck(t, sp, 1, "m", ack(hugeSpan/2, hugeSpan/2, AckReject)) })
	bounded(t, "per-offset ack types", func() {
		mustAck(t, sp, 1, "m", ack(100, 103, AckAccept, AckRelease, AckAccept, AckRenew))
	})
	wantRuns(t, sp, 9) // 8 states at or above the SPSO, and offset 0 below it
	wantState(t, sp, 101, 101, Available, 1)
	wantState(t, sp, hugeSpan/2, hugeSpan/2, Archived, 1)
	bounded(t, "ack of the rest", func() {
		mustAck(t, sp, 1, "m", ack(104, hugeSpan/2-1, AckAccept), ack(hugeSpan/2+1, hugeSpan-1, AckAccept))
	})
	bounded(t, "ack before", func() { mustAck(t, sp, 1, "m", ack(1, 99, AckAccept)) })
	wantOffsets(t, sp, 101, hugeSpan-1)
	wantRuns(t, sp, 7) // 6 distinct states from the SPSO on, and one run below it
}

// A client's acknowledgement range is a claim too: FirstOffset 0, LastOffset 2^62.
func TestHugeAcknowledgementRange(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 10)
	bounded(t, "ack 0-2^62", func() {
		_, err := sp.Acknowledge(1, "m", []AckBatch{ack(0, 1<<62, AckAccept)})
		wantErr(t, err, kerr.InvalidRequest)
	})
	bounded(t, "ack 0-2^62 with one type per offset claimed", func() {
		_, err := sp.Acknowledge(1, "m", []AckBatch{ack(0, 1<<62, AckAccept, AckAccept)})
		wantErr(t, err, kerr.InvalidRequest)
	})
	sp = newSP(t, 0)
	acquireHuge(t, sp, 0, "m", 0, BatchOptimized)
	bounded(t, "RENEW of a huge range", func() { mustAck(t, sp, 1, "m", ack(0, hugeSpan-1, AckRenew)) })
	bounded(t, "RENEW of part of a huge range", func() { mustAck(t, sp, 2, "m", ack(5, hugeSpan-7, AckRenew)) })
	bounded(t, "stage of a huge range", func() {
		if _, err := sp.StageTxnAcks("m", 7, 0, []AckBatch{ack(0, 1<<62, AckAccept)}); err == nil {
			t.Fatal("staging past the window succeeded")
		}
	})
}

// record_limit mode caches the rest of the log batch AVAILABLE; it used to
// write one entry per offset of it.
func TestHugeBatchRecordLimitAcquire(t *testing.T) {
	sp := newSP(t, 0)
	res := acquireHuge(t, sp, 0, "m", 0, RecordLimit)
	wantAcquired(t, res, AcquiredRecords{0, 9, 1})
	wantState(t, sp, 10, 10, Available, 0)
	// Drain 1000 record_limit fetches from the batch: the runs stay coalesced.
	for i := int64(0); i < 1000; i++ {
		mustAck(t, sp, 1, "m", ack(i*10, i*10+9, AckAccept))
		bounded(t, "record_limit re-acquire", func() {
			fo := sp.NextFetchOffset()
			res = sp.Acquire(1, AcquireRequest{Member: "m", FetchOffset: fo, Batches: []FetchedBatch{hugeBatch(0)},
				MaxRecords: 10, BatchSize: 10, Mode: RecordLimit})
		})
		wantAcquired(t, res, AcquiredRecords{i*10 + 10, i*10 + 19, 1})
		wantRuns(t, sp, 3)
	}
}

// Lock expiry, a member leaving, and re-acquisition of a split huge batch.
func TestHugeBatchLocksAndRelease(t *testing.T) {
	sp := newSP(t, 0)
	acquireHuge(t, sp, 0, "m", 0, BatchOptimized)
	for i := int64(1); i <= 100; i++ { // renew pieces at distinct times: one lock deadline each
		o := i * (hugeSpan / 200)
		bounded(t, "renew", func() { mustAck(t, sp, i, "m", ack(o, o, AckRenew)) })
	}
	wantRuns(t, sp, 201)
	bounded(t, "NextDeadline", func() { sp.NextDeadline() })
	bounded(t, "tick", func() { sp.Tick(lockMs + 50) })
	wantState(t, sp, 0, 0, Available, 1)
	wantState(t, sp, 60*(hugeSpan/200), 60*(hugeSpan/200), Acquired, 1)
	bounded(t, "NextFetchOffset", func() { sp.NextFetchOffset() })
	bounded(t, "leave", func() { sp.ReleaseMember("m") })
	wantRuns(t, sp, 1) // all AVAILABLE with count 1 again: one run
	bounded(t, "re-acquire one record", func() {
		sp.Acquire(lockMs+60, AcquireRequest{Member: "n", FetchOffset: 0, Batches: []FetchedBatch{hugeBatch(0)}, MaxRecords: 1, Mode: RecordLimit})
	})
	wantState(t, sp, 0, 0, Acquired, 2)
	bounded(t, "re-acquire the rest", func() {
		sp.Acquire(lockMs+60, AcquireRequest{Member: "n", FetchOffset: 1, Batches: []FetchedBatch{hugeBatch(0)}, MaxRecords: 500, BatchSize: 500})
	})
	wantState(t, sp, hugeSpan-1, hugeSpan-1, Acquired, 2)
	bounded(t, "Holds", func() { sp.Holds("n") })
	bounded(t, "rebuild locks", func() { sp.rebuildLocks() })
	bounded(t, "describe", func() { sp.Describe() })
}

// TX_PENDING on part of a huge batch: stage, unstage, marker.
func TestHugeBatchTransaction(t *testing.T) {
	sp := newSP(t, 0)
	acquireHuge(t, sp, 0, "m", 0, BatchOptimized)
	bs := []AckBatch{ack(5, 5, AckAccept), ack(hugeSpan/3, hugeSpan/2, AckReject)}
	bounded(t, "stage", func() {
		if _, err := sp.StageTxnAcks("m", 7, 0, bs); err != nil {
			t.Fatal(err)
		}
	})
	if n := sp.TxPendingRecords(); n != 1+hugeSpan/2-hugeSpan/3+1 {
		t.Fatalf("TX_PENDING %d", n)
	}
	bounded(t, "unstage", func() { sp.UnstageTxnAcks(1, 7, 0, bs) })
	bounded(t, "stage again", func() {
		if _, err := sp.StageTxnAcks("m", 7, 0, bs); err != nil {
			t.Fatal(err)
		}
	})
	bounded(t, "TxnProducers", func() { sp.TxnProducers() })
	bounded(t, "commit marker", func() { sp.CompleteTxn(7, 1, true) })
	wantState(t, sp, 5, 5, Acknowledged, 1)
	wantState(t, sp, hugeSpan/2, hugeSpan/2, Archived, 1)
	wantRuns(t, sp, 5)
}

// Retention or DeleteRecords moving the log start into a huge batch, and a
// fetch that finds part of one compacted away.
func TestHugeBatchLogStartAndCompaction(t *testing.T) {
	sp := newSP(t, 0)
	acquireHuge(t, sp, 0, "m", 0, BatchOptimized)
	mustAck(t, sp, 1, "m", ack(7, 7, AckAccept))
	bounded(t, "log start into the batch", func() { sp.AdvanceLogStart(hugeSpan / 4) })
	wantOffsets(t, sp, hugeSpan/4, hugeSpan-1)
	sp.ReleaseMember("m")
	// Compaction removed everything up to 3/4 of the span: the read starts there.
	bounded(t, "archive stale", func() {
		sp.Acquire(2, AcquireRequest{Member: "m", FetchOffset: hugeSpan / 4,
			Batches: []FetchedBatch{{BaseOffset: 3 * hugeSpan / 4, LastOffset: hugeSpan - 1, ProducerID: -1}}, MaxRecords: 10, Mode: RecordLimit})
	})
	wantOffsets(t, sp, 3*hugeSpan/4, hugeSpan-1)
	wantRuns(t, sp, 3)
}

// read_committed: a huge batch of an aborted transaction is archived when acquired.
func TestHugeAbortedBatch(t *testing.T) {
	sp := newSP(t, 0)
	fb := hugeBatch(0)
	fb.ProducerID, fb.Transactional = 3, true
	marker := FetchedBatch{BaseOffset: hugeSpan, LastOffset: hugeSpan, ProducerID: 3, Transactional: true, Control: true, AbortMarker: true}
	bounded(t, "acquire aborted", func() {
		sp.Acquire(0, AcquireRequest{Member: "m", FetchOffset: 0, Batches: []FetchedBatch{fb, marker},
			Aborted: []AbortedTxn{{ProducerID: 3, FirstOffset: 0}}, MaxRecords: 10, Mode: RecordLimit})
	})
	wantState(t, sp, 10, 10, Available, 0)
	bounded(t, "acquire aborted, whole", func() {
		sp.Acquire(0, AcquireRequest{Member: "m", FetchOffset: 10, Batches: []FetchedBatch{fb, marker},
			Aborted: []AbortedTxn{{ProducerID: 3, FirstOffset: 0}}, MaxRecords: 10, BatchSize: 10})
	})
	wantOffsets(t, sp, hugeSpan, hugeSpan)
}

// Persisted state with huge ranges: snapshot, restore, and a partial
// re-acquisition of a restored range.
func TestHugeSnapshotRestore(t *testing.T) {
	sp := newSP(t, 0)
	acquireHuge(t, sp, 0, "m", 0, BatchOptimized)
	mustAck(t, sp, 1, "m", ack(hugeSpan/2, hugeSpan/2, AckAccept))
	var snap Snapshot
	bounded(t, "snapshot", func() { snap = sp.Snapshot() })
	if len(snap.Batches) != 3 {
		t.Fatalf("snapshot %+v", snap.Batches)
	}
	var rp *SharePartition
	bounded(t, "restore", func() {
		var err error
		if rp, err = Restore(testConfig(), Snapshot{StartOffset: 0, Batches: []StateBatch{sb(0, 1<<62, Available, 2)}}); err != nil {
			t.Fatal(err)
		}
	})
	bounded(t, "acquire from restored", func() {
		rp.Acquire(1, AcquireRequest{Member: "m", FetchOffset: 0, Batches: []FetchedBatch{hugeBatch(0)}, MaxRecords: 10, Mode: RecordLimit})
	})
	wantState(t, rp, 9, 9, Acquired, 3)
	wantState(t, rp, 10, 10, Available, 2)
	if _, err := Restore(testConfig(), Snapshot{StartOffset: 0, Batches: []StateBatch{sb(0, 1<<63-1, Available, 2)}}); err == nil {
		t.Fatal("restored a batch ending at the largest offset: the window end would overflow")
	}
}
