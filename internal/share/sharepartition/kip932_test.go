package sharepartition

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// One test per share-partition scenario of kip-932.md section 7.2, named after
// the Kafka SharePartitionTest it follows (facts from Kafka 4.4, our code).

func restore(t *testing.T, snap Snapshot) *SharePartition {
	t.Helper()
	sp, err := Restore(testConfig(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func sb(first, last int64, s State, count int16) StateBatch {
	return StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: s, DeliveryCount: count,
		StagedProducerID: -1, StagedProducerEpoch: -1, StagedAckType: ackNone, StagedDeliveryState: -1, StagedAbortState: -1}
}

func TestMaybeInitialize(t *testing.T) {
	sp := restore(t, Snapshot{StartOffset: 5, StateEpoch: 3, Batches: []StateBatch{sb(5, 10, Available, 2), sb(11, 15, Archived, 3)}})
	wantOffsets(t, sp, 5, 15)
	if sp.StateEpoch() != 3 || sp.NextFetchOffset() != 5 {
		t.Fatalf("epoch %d next fetch %d", sp.StateEpoch(), sp.NextFetchOffset())
	}
	wantState(t, sp, 5, 10, Available, 2)
	wantState(t, sp, 11, 15, Archived, 3)
}

func TestMaybeInitializeWithEmptyStateBatches(t *testing.T) {
	sp := restore(t, Snapshot{StartOffset: 10})
	wantOffsets(t, sp, 10, 10)
	if sp.NextFetchOffset() != 10 || sp.InFlightRecords() != 0 {
		t.Fatal("empty restore")
	}
}

func TestMaybeInitializeStateBatchesWithGapAtBeginning(t *testing.T) {
	sp := restore(t, Snapshot{StartOffset: 10, Batches: []StateBatch{sb(15, 20, Acknowledged, 1), sb(21, 30, Available, 2)}})
	// 10-14 were acquired but never persisted: fetched again, and SPSO cannot pass them.
	wantOffsets(t, sp, 10, 30)
	if got := sp.NextFetchOffset(); got != 10 {
		t.Fatalf("next fetch %d", got)
	}
	res := fetch(t, sp, 0, "m", 10, 30, 5, 500)
	wantAcquired(t, res, AcquiredRecords{10, 14, 1}, AcquiredRecords{21, 30, 3})
	mustAck(t, sp, 1, "m", ack(10, 14, AckAccept))
	wantOffsets(t, sp, 21, 30)
}

func TestMaybeInitializeStateBatchesWithMultipleGaps(t *testing.T) {
	sp := restore(t, Snapshot{StartOffset: 10, Batches: []StateBatch{sb(15, 20, Acknowledged, 1), sb(31, 40, Archived, 1)}})
	if got := sp.NextFetchOffset(); got != 10 {
		t.Fatalf("next fetch %d", got)
	}
	res := fetch(t, sp, 0, "m", 10, 40, 1, 500)
	wantAcquired(t, res, AcquiredRecords{10, 14, 1}, AcquiredRecords{21, 30, 1})
	mustAck(t, sp, 1, "m", ack(10, 14, AckAccept), ack(21, 30, AckReject))
	wantOffsets(t, sp, 41, 41)
}

func TestMaybeInitializeStateBatchesWithGapNotAtBeginning(t *testing.T) {
	sp := restore(t, Snapshot{StartOffset: 15, Batches: []StateBatch{sb(15, 20, Acknowledged, 1), sb(26, 30, Available, 1)}})
	wantOffsets(t, sp, 21, 30)
	if got := sp.NextFetchOffset(); got != 21 {
		t.Fatalf("next fetch %d", got)
	}
}

func TestMaybeInitializeWithInvalidStartOffsetStateBatches(t *testing.T) {
	for _, snap := range []Snapshot{
		{StartOffset: 6, Batches: []StateBatch{sb(5, 10, Available, 1)}},
		{StartOffset: 5, Batches: []StateBatch{sb(10, 9, Available, 1)}},
		{StartOffset: 5, Batches: []StateBatch{sb(5, 10, Available, 1), sb(8, 12, Available, 1)}},
		{StartOffset: -1},
	} {
		if _, err := Restore(testConfig(), snap); err == nil {
			t.Fatalf("restore of %+v succeeded", snap)
		}
	}
}

func TestMaybeInitializeWhenReadStateRpcReturnsZeroAvailableRecords(t *testing.T) {
	sp := restore(t, Snapshot{StartOffset: 0, Batches: []StateBatch{sb(0, 9, Acknowledged, 1), sb(10, 14, Archived, 2)}})
	wantOffsets(t, sp, 15, 15)
}

func TestMaybeInitializeDefaultStartEpochGroupConfigReturnsEarliestLatestByDuration(t *testing.T) {
	oft := func(ts int64) int64 {
		if ts <= 1000 {
			return 40
		}
		return -1
	}
	for _, c := range []struct {
		cfg  string
		want int64
	}{{"latest", 100}, {"", 100}, {"earliest", 7}, {"by_duration:PT1H", 40}, {"by_duration:P1DT1M", 40}} {
		r, err := ParseAutoOffsetReset(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Resolve(7, 100, 1000+time.Hour.Milliseconds(), oft); got != c.want {
			t.Fatalf("%q resolved to %d, want %d", c.cfg, got, c.want)
		}
	}
	for _, bad := range []string{"none", "by_duration:1H", "by_duration:-PT1H", "by_duration:PT"} {
		if _, err := ParseAutoOffsetReset(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestAcquireMultipleRecords(t *testing.T) {
	sp := newSP(t, 0)
	res := fetch(t, sp, 0, "m", 10, 14, 5, 500)
	wantAcquired(t, res, AcquiredRecords{10, 14, 1})
	wantOffsets(t, sp, 10, 14)
	if sp.NextFetchOffset() != 15 {
		t.Fatal(sp.NextFetchOffset())
	}
}

func TestAcquireWithMaxFetchRecords(t *testing.T) {
	// MaxRecords is soft in batch_optimized mode: whole log batches are acquired.
	sp := newSP(t, 0)
	res := fetch(t, sp, 0, "m", 0, 29, 10, 15)
	wantAcquired(t, res, AcquiredRecords{0, 19, 1}) // one range: no log batch boundary 15 records in
	if res.Count != 20 {
		t.Fatal(res.Count)
	}
}

func TestAcquireWithBatchSizeAndMultipleBatches(t *testing.T) {
	sp := newSP(t, 0)
	res := sp.Acquire(0, AcquireRequest{Member: "m", Batches: logBatches(0, 29, 5), MaxRecords: 100, BatchSize: 10})
	wantAcquired(t, res, AcquiredRecords{0, 9, 1}, AcquiredRecords{10, 19, 1}, AcquiredRecords{20, 29, 1})
}

func TestShareFetchRequestWithMaxRecordsAndBatchSize(t *testing.T) {
	sp := newSP(t, 0)
	res := sp.Acquire(0, AcquireRequest{Member: "m", Batches: logBatches(0, 9, 1), MaxRecords: 1, BatchSize: 1})
	wantAcquired(t, res, AcquiredRecords{0, 0, 1})
	sp = newSP(t, 0)
	res = sp.Acquire(0, AcquireRequest{Member: "m", Batches: logBatches(0, 9, 1), MaxRecords: 5, BatchSize: 1})
	wantAcquired(t, res, AcquiredRecords{0, 0, 1}, AcquiredRecords{1, 1, 1}, AcquiredRecords{2, 2, 1}, AcquiredRecords{3, 3, 1}, AcquiredRecords{4, 4, 1})
}

func TestAcquireSameBatchAgain(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m1", 0, 9, 10, 500)
	res := fetch(t, sp, 0, "m2", 0, 9, 10, 500)
	if len(res.Records) != 0 {
		t.Fatalf("re-acquired %v", res.Records)
	}
}

func TestAcquireWithMaxInFlightRecordsAndTryAcquireNewBatch(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.MaxInFlightRecords = 10
	sp.SetConfig(cfg)
	res := fetch(t, sp, 0, "m", 0, 29, 10, 500)
	wantAcquired(t, res, AcquiredRecords{0, 9, 1})
	if sp.CanAcquire() {
		t.Fatal("can acquire at the record-lock cap")
	}
	if res := fetch(t, sp, 0, "m", 10, 19, 10, 500); len(res.Records) != 0 {
		t.Fatalf("acquired past the cap: %v", res.Records)
	}
	// Dynamic increase lets it continue.
	cfg.MaxInFlightRecords = 20
	sp.SetConfig(cfg)
	wantAcquired(t, fetch(t, sp, 0, "m", 10, 29, 10, 500), AcquiredRecords{10, 19, 1})
}

func TestAcquireWithMaxInFlightRecordsReleaseBatchAndAcquireSubsetRecords(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.MaxInFlightRecords = 20
	sp.SetConfig(cfg)
	fetch(t, sp, 0, "m", 0, 19, 10, 500)
	mustAck(t, sp, 1, "m", ack(12, 13, AckRelease))
	if !sp.CanAcquire() || sp.NextFetchOffset() != 12 {
		t.Fatalf("next fetch %d", sp.NextFetchOffset())
	}
	// The log read from 12 returns the batch 10-19 and beyond; only the released offsets come back.
	res := sp.Acquire(2, AcquireRequest{Member: "m2", FetchOffset: 12, Batches: logBatches(10, 39, 10), MaxRecords: 500, BatchSize: 500})
	wantAcquired(t, res, AcquiredRecords{12, 13, 2})
	wantOffsets(t, sp, 0, 19)
}

func TestAcquireReleasedRecord(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	mustAck(t, sp, 1, "m", ack(0, 4, AckRelease))
	wantState(t, sp, 0, 4, Available, 1)
	wantAcquired(t, fetch(t, sp, 2, "m", 0, 4, 5, 500), AcquiredRecords{0, 4, 2})
}

func TestAcquireWhenBatchesRemovedForFetchOffset(t *testing.T) {
	// Compaction removed 0-9 after it was released: the read from 0 starts at 10,
	// so the stale AVAILABLE batch is archived and SPSO moves.
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 1, "m", ack(0, 9, AckRelease))
	res := sp.Acquire(2, AcquireRequest{Member: "m", FetchOffset: 0, Batches: logBatches(10, 14, 5), MaxRecords: 500, BatchSize: 500})
	wantAcquired(t, res, AcquiredRecords{10, 14, 1})
	wantOffsets(t, sp, 10, 14)
}

func TestAcquireSingleBatchInRecordLimitMode(t *testing.T) {
	sp := newSP(t, 0)
	res := sp.Acquire(0, AcquireRequest{Member: "m", Batches: logBatches(0, 9, 10), MaxRecords: 5, Mode: RecordLimit})
	wantAcquired(t, res, AcquiredRecords{0, 4, 1})
	wantOffsets(t, sp, 0, 9)
	wantState(t, sp, 5, 9, Available, 0)
	if sp.NextFetchOffset() != 5 {
		t.Fatal(sp.NextFetchOffset())
	}
	res = sp.Acquire(0, AcquireRequest{Member: "m2", FetchOffset: 5, Batches: logBatches(0, 9, 10), MaxRecords: 3, Mode: RecordLimit})
	wantAcquired(t, res, AcquiredRecords{5, 7, 1})
}

func TestAcquireMultipleBatchesInRecordLimitMode(t *testing.T) {
	sp := newSP(t, 0)
	res := sp.Acquire(0, AcquireRequest{Member: "m", Batches: logBatches(0, 29, 10), MaxRecords: 15, BatchSize: 2, Mode: RecordLimit})
	wantAcquired(t, res, AcquiredRecords{0, 14, 1})
	wantOffsets(t, sp, 0, 19)
	wantState(t, sp, 15, 19, Available, 0)
}

func TestAcquireWhenInsufficientRecordsInRecordLimitMode(t *testing.T) {
	sp := newSP(t, 0)
	res := sp.Acquire(0, AcquireRequest{Member: "m", Batches: logBatches(0, 3, 4), MaxRecords: 10, Mode: RecordLimit})
	wantAcquired(t, res, AcquiredRecords{0, 3, 1})
}

func TestAcknowledgeInRecordLimitMode(t *testing.T) {
	sp := newSP(t, 0)
	sp.Acquire(0, AcquireRequest{Member: "m", Batches: logBatches(0, 9, 10), MaxRecords: 5, Mode: RecordLimit})
	mustAck(t, sp, 1, "m", ack(0, 4, AckAccept))
	wantOffsets(t, sp, 5, 9)
	_, err := sp.Acknowledge(1, "m", []AckBatch{ack(5, 5, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
}

func TestAcknowledgeMultipleRecordBatchWithGapOffsets(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 5, 14, 10, 500)
	u := mustAck(t, sp, 1, "m", AckBatch{FirstOffset: 5, LastOffset: 9, Types: []AckType{AckAccept, AckGap, AckAccept, AckGap, AckAccept}},
		ack(10, 14, AckAccept))
	wantOffsets(t, sp, 15, 15)
	if len(u.Batches) != 5 { // 9 and 10-14 coalesce
		t.Fatalf("update %+v", u.Batches)
	}
	if u.Batches[1].DeliveryState != Archived || u.Batches[1].FirstOffset != 6 {
		t.Fatalf("gap not archived: %+v", u.Batches[1])
	}
}

func TestAcknowledgeWhenOffsetNotAcquired(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 1, "m", ack(0, 9, AckRelease))
	_, err := sp.Acknowledge(1, "m", []AckBatch{ack(0, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	_, err = sp.Acknowledge(1, "m", []AckBatch{ack(3, 4, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
}

func TestAcknowledgeRollbackWithFullBatchError(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	fetch(t, sp, 0, "m2", 5, 9, 5, 500)
	_, err := sp.Acknowledge(1, "m", []AckBatch{ack(0, 4, AckAccept), ack(5, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	wantState(t, sp, 0, 4, Acquired, 1)
	wantOffsets(t, sp, 0, 9)
}

func TestAcknowledgeRollbackWithSubsetError(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 1, "m", ack(7, 7, AckRelease))
	_, err := sp.Acknowledge(1, "m", []AckBatch{ack(0, 3, AckAccept), ack(5, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	wantState(t, sp, 0, 6, Acquired, 1)
	wantState(t, sp, 7, 7, Available, 1)
}

func TestAcknowledgeOutOfRangeCachedData(t *testing.T) {
	sp := newSP(t, 0)
	_, err := sp.Acknowledge(0, "m", []AckBatch{ack(0, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState) // nothing cached
	fetch(t, sp, 0, "m", 5, 9, 5, 500)
	_, err = sp.Acknowledge(0, "m", []AckBatch{ack(20, 25, AckAccept)})
	wantErr(t, err, kerr.InvalidRequest) // first offset past the acquired records
	_, err = sp.Acknowledge(0, "m", []AckBatch{ack(5, 12, AckAccept)})
	wantErr(t, err, kerr.InvalidRequest) // last offset past the acquired records
	if _, err = sp.Acknowledge(0, "m", []AckBatch{ack(2, 4, AckAccept)}); err != nil {
		t.Fatalf("below the SPSO is skipped silently: %v", err)
	}
	wantState(t, sp, 5, 9, Acquired, 1)
}

func TestInvalidAcknowledgeTypeInBatchAcknowledgement(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	for _, bs := range [][]AckBatch{
		{ack(0, 9, AckType(5))},
		{ack(0, 9, AckType(-1))},
		{{FirstOffset: 0, LastOffset: 9}},            // no types
		{ack(0, 9, AckAccept, AckAccept)},            // wrong number of types
		{ack(5, 4, AckAccept)},                       // first > last
		{ack(0, 5, AckAccept), ack(3, 9, AckAccept)}, // overlap
		{ack(5, 9, AckAccept), ack(0, 3, AckAccept)}, // unsorted
	} {
		_, err := sp.Acknowledge(1, "m", bs)
		wantErr(t, err, kerr.InvalidRequest)
	}
	wantState(t, sp, 0, 9, Acquired, 1)
	// Version rules the broker applies with ValidateAckBatches.
	wantErr(t, ValidateAckBatches([]AckBatch{ack(0, 9, AckRenew)}, false, true), kerr.InvalidRequest)
	wantErr(t, ValidateAckBatches([]AckBatch{ack(0, 9, AckRenew)}, true, false), kerr.InvalidRequest)
	if err := ValidateAckBatches([]AckBatch{ack(0, 5, AckAccept), ack(5, 9, AckAccept)}, false, false); err != nil {
		t.Fatalf("Kafka lets a batch start on the previous last offset: %v", err)
	}
	// ...and the state check then refuses the second touch, changing nothing.
	_, err := sp.Acknowledge(1, "m", []AckBatch{ack(0, 5, AckAccept), ack(5, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	wantState(t, sp, 0, 9, Acquired, 1)
}

func TestAckTypeToRecordStateMapping(t *testing.T) {
	for typ, want := range map[AckType]State{AckGap: Archived, AckAccept: Acknowledged, AckRelease: Available, AckReject: Archived, AckRenew: Acquired} {
		sp := newSP(t, 0)
		fetch(t, sp, 0, "m", 0, 0, 1, 500)
		fetch(t, sp, 0, "m", 1, 1, 1, 500) // keeps the SPSO from clearing offset 0
		mustAck(t, sp, 1, "m", ack(0, 0, typ))
		if typ == AckAccept || typ == AckReject || typ == AckGap {
			if sp.StartOffset() != 1 {
				t.Fatalf("%v: SPSO %d", typ, sp.StartOffset())
			}
			continue
		}
		wantState(t, sp, 0, 0, want, 1)
	}
}

func TestAcquisitionLockForAcquiringSingleRecord(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 100, "m", 0, 0, 1, 500)
	if u := sp.Tick(100 + lockMs - 1); !u.Empty() {
		t.Fatal("expired early")
	}
	u := sp.Tick(100 + lockMs)
	wantState(t, sp, 0, 0, Available, 1)
	if len(u.Batches) != 1 || sp.Counters().LockExpired != 1 {
		t.Fatalf("update %+v counters %+v", u, sp.Counters())
	}
	if _, ok := sp.NextDeadline(); ok {
		t.Fatal("deadline left")
	}
}

func TestAcquisitionLockTimeoutCauseMaxDeliveryCountExceed(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.DeliveryCountLimit = 2
	sp.SetConfig(cfg)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	fetch(t, sp, 0, "m", 5, 9, 5, 500)
	sp.Tick(lockMs)
	wantAcquired(t, fetch(t, sp, lockMs, "m", 0, 9, 5, 500), AcquiredRecords{0, 4, 2}, AcquiredRecords{5, 9, 2})
	sp.Tick(2 * lockMs)
	wantOffsets(t, sp, 10, 10) // archived at the limit, so SPSO moved
	if sp.Counters().Archived != 10 {
		t.Fatalf("%+v", sp.Counters())
	}
}

func TestAcquisitionLockTimeoutCauseSPSOMoveForward(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.DeliveryCountLimit = 1
	sp.SetConfig(cfg)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 1, "m", ack(5, 9, AckAccept))
	wantOffsets(t, sp, 0, 9)
	sp.Tick(lockMs)
	wantOffsets(t, sp, 10, 10)
}

func TestAcknowledgeAfterAcquisitionLockTimeout(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	sp.Tick(lockMs)
	_, err := sp.Acknowledge(lockMs, "m", []AckBatch{ack(0, 4, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
}

func TestScheduleAcquisitionLockTimeoutValueFromGroupConfig(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.RecordLockDurationMs = 15000
	sp.SetConfig(cfg)
	res := fetch(t, sp, 10, "m", 0, 4, 5, 500)
	if d, _ := sp.NextDeadline(); d != 15010 || res.LockDurationMs != 15000 {
		t.Fatalf("deadline %d lock %d", d, res.LockDurationMs)
	}
}

func TestReleaseSingleRecordBatch(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 0, 1, 500)
	u := sp.ReleaseMember("m")
	wantState(t, sp, 0, 0, Available, 1)
	if len(u.Batches) != 1 || u.Batches[0].DeliveryState != Available {
		t.Fatalf("%+v", u)
	}
}

func TestReleaseAcquiredRecordsWithAnotherMember(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m1", 0, 4, 5, 500)
	fetch(t, sp, 0, "m2", 5, 9, 5, 500)
	mustAck(t, sp, 1, "m2", ack(5, 6, AckRenew)) // splits m2's batch
	sp.ReleaseMember("m2")
	wantState(t, sp, 0, 4, Acquired, 1)
	wantState(t, sp, 5, 9, Available, 1)
}

func TestReleaseAcquiredRecordsDoNotDecreaseDeliveryCount(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	sp.Tick(lockMs)
	fetch(t, sp, lockMs, "m", 0, 4, 5, 500)
	sp.ReleaseMember("m")
	wantState(t, sp, 0, 4, Available, 2)
}

func TestMaxDeliveryCountLimitExceededForRecordsSubsetCacheCleared(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.DeliveryCountLimit = 1
	sp.SetConfig(cfg)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 1, "m", ack(0, 4, AckAccept))
	sp.ReleaseMember("m")
	wantOffsets(t, sp, 10, 10)
	if sp.InFlightRecords() != 0 {
		t.Fatal("cache not cleared")
	}
}

func TestMaybeUpdateCachedStateWhenAcknowledgeTypeAcceptRejectRelease(t *testing.T) {
	for _, c := range []struct {
		typ  AckType
		spso int64
	}{{AckAccept, 10}, {AckReject, 10}, {AckRelease, 0}} {
		sp := newSP(t, 0)
		fetch(t, sp, 0, "m", 0, 9, 10, 500)
		mustAck(t, sp, 1, "m", ack(0, 9, c.typ))
		if sp.StartOffset() != c.spso {
			t.Fatalf("%v: SPSO %d, want %d", c.typ, sp.StartOffset(), c.spso)
		}
	}
}

func TestMaybeUpdateCachedStateWhenAllRecordsInCachedStateAreAcknowledged(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 5, 500)
	fetch(t, sp, 0, "m", 10, 19, 5, 500)
	mustAck(t, sp, 1, "m", ack(10, 19, AckAccept))
	wantOffsets(t, sp, 0, 19)
	u := mustAck(t, sp, 1, "m", ack(0, 9, AckAccept))
	wantOffsets(t, sp, 20, 20)
	if len(sp.batches) != 0 || u.StartOffset != 20 || u.DeliveryCompleteCount != 0 {
		t.Fatalf("batches %d update %+v", len(sp.batches), u)
	}
}

func TestLsoMovementForArchivingBatches(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 5, 500)
	mustAck(t, sp, 1, "m", ack(0, 4, AckRelease))
	sp.AdvanceLogStart(7)
	wantOffsets(t, sp, 7, 9)
	wantState(t, sp, 7, 9, Acquired, 1)
	// Acks below the SPSO are skipped silently.
	mustAck(t, sp, 1, "m", ack(5, 9, AckAccept))
	wantOffsets(t, sp, 10, 10)
}

func TestLsoMovementAheadOfEndOffset(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 5, 500)
	sp.AdvanceLogStart(15)
	wantOffsets(t, sp, 15, 15)
	if sp.NextFetchOffset() != 15 {
		t.Fatal(sp.NextFetchOffset())
	}
}

func TestLsoMovementWithGapsInCachedStateMap(t *testing.T) {
	sp := restore(t, Snapshot{StartOffset: 0, Batches: []StateBatch{sb(5, 9, Available, 1), sb(15, 19, Available, 1)}})
	sp.AdvanceLogStart(12)
	wantOffsets(t, sp, 12, 19)
	if sp.NextFetchOffset() != 12 {
		t.Fatalf("gap 12-14 must still be fetched: %d", sp.NextFetchOffset())
	}
}

func TestAcquireWithReadCommittedIsolationLevel(t *testing.T) {
	sp := newSP(t, 0)
	batches := []FetchedBatch{
		{BaseOffset: 0, LastOffset: 4, ProducerID: -1},
		{BaseOffset: 5, LastOffset: 9, ProducerID: 7, Transactional: true}, // aborted
		{BaseOffset: 10, LastOffset: 10, ProducerID: 7, Transactional: true, Control: true, AbortMarker: true},
		{BaseOffset: 11, LastOffset: 14, ProducerID: 8, Transactional: true}, // committed
		{BaseOffset: 15, LastOffset: 15, ProducerID: 8, Transactional: true, Control: true},
		{BaseOffset: 16, LastOffset: 19, ProducerID: 7, Transactional: true}, // a later, committed txn of 7
		{BaseOffset: 20, LastOffset: 20, ProducerID: 7, Transactional: true, Control: true},
	}
	res := sp.Acquire(0, AcquireRequest{Member: "m", Batches: batches, Aborted: []AbortedTxn{{ProducerID: 7, FirstOffset: 5}}, MaxRecords: 500, BatchSize: 500})
	wantAcquired(t, res, AcquiredRecords{0, 4, 1}, AcquiredRecords{10, 20, 1})
	wantState(t, sp, 5, 9, Archived, 1)
	// Read uncommitted (no aborted list): everything is delivered.
	sp = newSP(t, 0)
	wantAcquired(t, sp.Acquire(0, AcquireRequest{Member: "m", Batches: batches, MaxRecords: 500, BatchSize: 500}), AcquiredRecords{0, 20, 1})
}

func TestRenewAcknowledgeWithCompleteBatchAck(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	u := mustAck(t, sp, 20000, "m", ack(0, 9, AckRenew))
	if !u.Empty() {
		t.Fatal("RENEW persisted")
	}
	sp.Tick(lockMs)
	wantState(t, sp, 0, 9, Acquired, 1)
	sp.Tick(20000 + lockMs)
	wantState(t, sp, 0, 9, Available, 1)
}

func TestRenewAcknowledgeWithPerOffsetAck(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 2, 3, 500)
	mustAck(t, sp, 20000, "m", AckBatch{FirstOffset: 0, LastOffset: 2, Types: []AckType{AckRenew, AckAccept, AckRenew}})
	sp.Tick(lockMs)
	wantState(t, sp, 0, 0, Acquired, 1)
	wantState(t, sp, 1, 1, Acknowledged, 1)
}

func TestRenewAcknowledgeOnExpiredBatch(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	sp.Tick(lockMs)
	_, err := sp.Acknowledge(lockMs, "m", []AckBatch{ack(0, 9, AckRenew)})
	wantErr(t, err, kerr.InvalidRecordState)
}

func TestRenewAcknowledgeDisabledWithCompleteBatchAck(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.RenewEnabled = false
	sp.SetConfig(cfg)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	_, err := sp.Acknowledge(1, "m", []AckBatch{ack(0, 9, AckRenew)})
	wantErr(t, err, kerr.InvalidRecordState)
}

func TestDynamicDeliveryCountDecreaseCausesArchival(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	mustAck(t, sp, 1, "m", ack(0, 4, AckRelease))
	fetch(t, sp, 1, "m", 0, 4, 5, 500) // delivery 2
	cfg := testConfig()
	cfg.DeliveryCountLimit = 2
	sp.SetConfig(cfg)
	mustAck(t, sp, 2, "m", ack(0, 4, AckRelease))
	wantOffsets(t, sp, 5, 5)
}

func TestDeliveryLimitReachedBeforeAcquisitionArchivesInsteadOfDelivering(t *testing.T) {
	// exactq: an AVAILABLE record whose count already reached the limit (after a
	// restart from a snapshot taken while it was acquired, or a lower limit) is
	// archived at acquisition, never delivered past the limit.
	sp := restore(t, Snapshot{StartOffset: 0, Batches: []StateBatch{sb(0, 4, Available, 5), sb(5, 9, Available, 2)}})
	res := fetch(t, sp, 0, "m", 0, 9, 5, 500)
	wantAcquired(t, res, AcquiredRecords{5, 9, 3})
	if len(res.Update.Batches) != 1 || res.Update.Batches[0].DeliveryState != Archived {
		t.Fatalf("archival not persisted: %+v", res.Update)
	}
	wantOffsets(t, sp, 5, 9)
}

func TestDynamicPartitionMaxRecordLocksDecrease(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 19, 10, 500)
	cfg := testConfig()
	cfg.MaxInFlightRecords = 10
	sp.SetConfig(cfg)
	if sp.CanAcquire() {
		t.Fatal("can acquire over the lowered cap")
	}
	mustAck(t, sp, 1, "m", ack(0, 9, AckAccept))
	wantAcquired(t, fetch(t, sp, 1, "m", 20, 39, 10, 500)) // still at the cap (10..19 in flight)
	mustAck(t, sp, 1, "m", ack(10, 14, AckAccept))
	wantAcquired(t, fetch(t, sp, 1, "m", 20, 39, 5, 500), AcquiredRecords{20, 24, 1})
}

func TestNumberOfWriteCallsOnUpdates(t *testing.T) {
	sp := newSP(t, 0)
	if u := fetch(t, sp, 0, "m", 0, 9, 10, 500).Update; !u.Empty() {
		t.Fatal("acquire wrote")
	}
	if u := mustAck(t, sp, 1, "m", ack(0, 9, AckRenew)); !u.Empty() {
		t.Fatal("renew wrote")
	}
	if u := mustAck(t, sp, 1, "m", ack(0, 4, AckAccept), ack(5, 9, AckReject)); len(u.Batches) != 2 {
		t.Fatalf("one write of two ranges expected: %+v", u.Batches)
	}
}

func TestDescribeAndCounters(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 1, "m", ack(2, 3, AckReject), ack(5, 5, AckRelease))
	d := sp.Describe()
	if d.StartOffset != 0 || d.EndOffset != 9 || len(d.Records) != 5 {
		t.Fatalf("%+v", d)
	}
	if r := d.Records[1]; r.FirstOffset != 2 || r.LastOffset != 3 || r.State != Archived {
		t.Fatalf("%+v", r)
	}
	if r := d.Records[0]; r.Member != "m" || r.LockDeadlineMs != lockMs {
		t.Fatalf("%+v", r)
	}
	c := sp.Counters()
	if c.Acquired != 10 || c.Rejected != 2 || c.Released != 1 || c.Archived != 2 {
		t.Fatalf("%+v", c)
	}
}
