package sharepartition

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Tests named after kip-1289.md section 9.2 (state machine), 9.3 (staged state)
// and the extra cases of 9.6 that concern a single share partition.

func stage(t *testing.T, sp *SharePartition, member string, pid int64, epoch int16, bs ...AckBatch) Update {
	t.Helper()
	u, err := sp.StageTxnAcks(member, pid, epoch, bs)
	if err != nil {
		t.Fatalf("stage %v: %v", bs, err)
	}
	return u
}

// 17. The full transition table of section 2.2 and forId, with AVAILABLE → ARCHIVED,
// which Kafka does outside validateTransition (InFlightState.archive: log start
// movement, stale batches after compaction), and the one revert, TX_PENDING → ACQUIRED.
func TestRecordStateValidateTransition(t *testing.T) {
	all := []State{Available, Acquired, Acknowledged, Archiving, Archived, TxPending}
	allowed := map[State][]State{
		Available: {Acquired, Archived},
		Acquired:  {Available, Acknowledged, Archiving, Archived, TxPending},
		Archiving: {Archived},
		TxPending: {Available, Acknowledged, Archiving, Archived},
	}
	for _, from := range all {
		for _, to := range all {
			want := false
			for _, s := range allowed[from] {
				want = want || s == to
			}
			if got := CanTransition(from, to); got != want {
				t.Fatalf("%v → %v: %v, want %v", from, to, got, want)
			}
		}
	}
	for _, from := range all {
		for _, to := range all {
			if got, want := CanRevert(from, to), from == TxPending && to == Acquired; got != want {
				t.Fatalf("revert %v → %v: %v, want %v", from, to, got, want)
			}
		}
	}
	for id := int8(0); id <= 5; id++ {
		if s, err := StateForID(id); err != nil || int8(s) != id {
			t.Fatalf("forId(%d) = %v, %v", id, s, err)
		}
	}
	if _, err := StateForID(6); err == nil {
		t.Fatal("forId(6) succeeded")
	}
}

// 18. Staging from ACQUIRED sets TX_PENDING, the staged fields and clears the lock.
func TestStageTxnAcknowledgeFromAcquired(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 10, 14, 5, 500)
	u := stage(t, sp, "m", 7, 3, ack(10, 14, AckAccept))
	wantState(t, sp, 10, 14, TxPending, 1)
	r := sp.find(10).at(10)
	if r.stagedPID != 7 || r.stagedEpoch != 3 || r.stagedAck != AckAccept || r.deadlineMs != 0 || r.member != "m" {
		t.Fatalf("%+v", r)
	}
	want := StateBatch{FirstOffset: 10, LastOffset: 14, DeliveryState: TxPending, DeliveryCount: 1,
		StagedProducerID: 7, StagedProducerEpoch: 3, StagedAckType: AckAccept, StagedDeliveryState: Acknowledged, StagedAbortState: Available}
	if len(u.Batches) != 1 || u.Batches[0] != want {
		t.Fatalf("staging must persist the pending metadata: %+v", u.Batches)
	}
	// The lock no longer runs: a tick long after changes nothing.
	if u := sp.Tick(10 * lockMs); !u.Empty() {
		t.Fatal("TX_PENDING expired")
	}
	if sp.TxPendingRecords() != 5 {
		t.Fatal(sp.TxPendingRecords())
	}
}

func TestStageTxnAcknowledgeRejectsReleaseAndRenew(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	for _, typ := range []AckType{AckRelease, AckRenew} {
		_, err := sp.StageTxnAcks("m", 7, 0, []AckBatch{ack(0, 4, typ)})
		wantErr(t, err, kerr.InvalidRequest)
	}
	_, err := sp.StageTxnAcks("m", 7, 0, []AckBatch{{FirstOffset: 0, LastOffset: 4, Types: []AckType{AckAccept, AckRelease, AckAccept, AckAccept, AckAccept}}})
	wantErr(t, err, kerr.InvalidRequest)
	wantState(t, sp, 0, 4, Acquired, 1)
}

func TestStageTxnAcknowledgeFromAvailableAcknowledgedOrTxPendingFails(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 1, "m", ack(0, 0, AckRelease), ack(1, 1, AckAccept))
	stage(t, sp, "m", 7, 0, ack(2, 2, AckAccept))
	for _, o := range []int64{0, 1, 2} {
		_, err := sp.StageTxnAcks("m", 7, 0, []AckBatch{ack(o, o, AckAccept)})
		wantErr(t, err, kerr.InvalidRecordState)
	}
	// Another member's records, and all-or-nothing.
	_, err := sp.StageTxnAcks("other", 7, 0, []AckBatch{ack(3, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	_, err = sp.StageTxnAcks("m", 7, 0, []AckBatch{ack(2, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	wantState(t, sp, 3, 9, Acquired, 1)
}

// 19. Commit ACCEPT → ACKNOWLEDGED, commit REJECT/gap → ARCHIVED, abort → AVAILABLE, staged fields reset.
func TestApplyTxnMarkerCommitAndAbort(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 8, 9, 500)
	stage(t, sp, "m", 7, 0, AckBatch{FirstOffset: 0, LastOffset: 2, Types: []AckType{AckAccept, AckReject, AckGap}})
	stage(t, sp, "m", 8, 0, AckBatch{FirstOffset: 3, LastOffset: 5, Types: []AckType{AckAccept, AckReject, AckGap}})
	u, n := sp.CompleteTxn(8, 1, false)
	if n != 3 || len(u.Batches) != 1 || u.Batches[0].DeliveryState != Available || u.Batches[0].StagedProducerID != -1 {
		t.Fatalf("abort: %d %+v", n, u.Batches)
	}
	wantState(t, sp, 3, 5, Available, 1)
	if r := sp.find(3).at(3); r.member != "" || r.stagedPID != -1 || r.stagedAck != ackNone {
		t.Fatalf("%+v", r)
	}
	u, n = sp.CompleteTxn(7, 1, true)
	if n != 3 {
		t.Fatal(n)
	}
	wantOffsets(t, sp, 3, 8) // 0 ACKNOWLEDGED, 1-2 ARCHIVED: SPSO moves to the aborted records
	if u.StartOffset != 3 || len(u.Batches) != 2 || u.Batches[0].DeliveryState != Acknowledged || u.Batches[1].DeliveryState != Archived {
		t.Fatalf("commit: %+v", u)
	}
	c := sp.Counters()
	if c.TxnStaged != 6 || c.TxnCommitted != 3 || c.TxnAborted != 3 || c.Acknowledged != 1 || c.Rejected != 1 {
		t.Fatalf("%+v", c)
	}
}

// 20. Wrong pid, lower epoch, or a record that is not pending: the marker is ignored.
func TestApplyTxnMarkerWrongOwnerOrEpochIgnored(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	stage(t, sp, "m", 7, 3, ack(0, 2, AckAccept))
	for _, c := range []struct {
		pid   int64
		epoch int16
	}{{8, 4}, {7, 2}} {
		if u, n := sp.CompleteTxn(c.pid, c.epoch, true); n != 0 || !u.Empty() {
			t.Fatalf("marker %+v resolved %d", c, n)
		}
	}
	wantState(t, sp, 0, 2, TxPending, 1)
	wantState(t, sp, 3, 4, Acquired, 1) // not pending: untouched
	// Decision D6: a marker with the bumped epoch (transaction version 2) resolves.
	if _, n := sp.CompleteTxn(7, 4, true); n != 3 {
		t.Fatal(n)
	}
	// ...and so does one with the staged epoch itself (transaction version 1).
	fetch(t, sp, 0, "m", 5, 5, 1, 500)
	stage(t, sp, "m", 7, 4, ack(5, 5, AckAccept))
	if _, n := sp.CompleteTxn(7, 4, false); n != 1 {
		t.Fatal(n)
	}
}

// 21. TX_PENDING is never re-acquired or delivered and holds the SPSO.
func TestTxPendingBlocksReacquisition(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	stage(t, sp, "m", 7, 0, ack(0, 4, AckAccept))
	sp.ReleaseMember("m") // the consumer leaves: staged records stay pending
	if res := fetch(t, sp, 1, "m2", 0, 4, 5, 500); len(res.Records) != 0 {
		t.Fatalf("delivered %v", res.Records)
	}
	if sp.NextFetchOffset() != 5 {
		t.Fatal(sp.NextFetchOffset())
	}
	fetch(t, sp, 1, "m2", 5, 9, 5, 500)
	mustAck(t, sp, 2, "m2", ack(5, 9, AckAccept))
	wantOffsets(t, sp, 0, 9) // SPSO held by TX_PENDING
	sp.CompleteTxn(7, 1, true)
	wantOffsets(t, sp, 10, 10)
}

// 22. A commit resolves only its own transaction.
func TestCommitLeavesOtherAcquisitionsAndTransactionsUntouched(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "a", 0, 4, 5, 500)
	fetch(t, sp, 0, "b", 5, 9, 5, 500)
	stage(t, sp, "a", 1, 0, ack(0, 1, AckAccept))
	stage(t, sp, "b", 2, 0, ack(5, 6, AckAccept))
	sp.CompleteTxn(1, 1, true)
	wantState(t, sp, 2, 4, Acquired, 1)
	wantState(t, sp, 5, 6, TxPending, 1)
	wantState(t, sp, 7, 9, Acquired, 1)
}

// 23. A failed durable write of the staged state reverts to ACQUIRED.
func TestSynchronousStageFailureRevertsToAcquired(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	stage(t, sp, "m", 1, 0, ack(0, 4, AckAccept)) // durable (earlier poll of the same transaction)
	stage(t, sp, "m", 1, 0, ack(5, 7, AckReject)) // this write fails
	sp.UnstageTxnAcks(100, 1, 0, []AckBatch{ack(5, 7, AckReject)})
	wantState(t, sp, 0, 4, TxPending, 1)
	wantState(t, sp, 5, 7, Acquired, 1)
	if sp.TxPendingRecords() != 5 {
		t.Fatal(sp.TxPendingRecords())
	}
	// The reverted records are the member's again, with a fresh lock.
	mustAck(t, sp, 101, "m", ack(5, 5, AckAccept))
	sp.Tick(100 + lockMs)
	wantState(t, sp, 6, 7, Available, 1)
}

// 24/25. The disposition is fixed at resolution; abort clears the staged producer.
func TestResolvedDispositionDoesNotFollowLaterStateMutations(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 0, 1, 500)
	stage(t, sp, "m", 1, 0, ack(0, 0, AckAccept))
	sp.CompleteTxn(1, 1, false)
	wantState(t, sp, 0, 0, Available, 1)
	wantAcquired(t, fetch(t, sp, 1, "m2", 0, 0, 1, 500), AcquiredRecords{0, 0, 2})
	if _, n := sp.CompleteTxn(1, 1, true); n != 0 {
		t.Fatal("a repeated marker resolved a later acquisition")
	}
	wantState(t, sp, 0, 0, Acquired, 2)
}

// 27. A late marker of an older transaction cannot resolve a newer staging.
func TestDelayedMarkerCannotResolveNewTransaction(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 0, 1, 500)
	stage(t, sp, "m", 1, 0, ack(0, 0, AckAccept))
	sp.CompleteTxn(1, 1, false) // first transaction aborted, epoch bumped to 1
	fetch(t, sp, 1, "m", 0, 0, 1, 500)
	stage(t, sp, "m", 1, 2, ack(0, 0, AckAccept)) // next transaction, epoch 2
	if _, n := sp.CompleteTxn(1, 1, true); n != 0 {
		t.Fatal("old marker resolved the new transaction")
	}
	wantState(t, sp, 0, 0, TxPending, 2)
}

// 37. Commit of staged 10-14 empties the cache and moves SPSO to 15.
func TestStageTxnAcknowledgeAcceptThenCommitMarkerTransitionsToAcknowledged(t *testing.T) {
	sp := newSP(t, 10)
	fetch(t, sp, 0, "m", 10, 14, 5, 500)
	stage(t, sp, "m", 1, 0, ack(10, 14, AckAccept))
	u, _ := sp.CompleteTxn(1, 1, true)
	wantOffsets(t, sp, 15, 15)
	if len(sp.batches) != 0 || u.StartOffset != 15 {
		t.Fatalf("%+v", u)
	}
}

// 38. Lock expiry before staging: the stage fails and nothing is staged.
func TestLockExpiryBeforeStagingFailsStage(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	sp.Tick(lockMs)
	fetch(t, sp, lockMs, "m2", 0, 4, 5, 500)
	_, err := sp.StageTxnAcks("m", 1, 0, []AckBatch{ack(0, 4, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	wantState(t, sp, 0, 4, Acquired, 2)
}

// 39/40. A coordinator-side abort (timeout, fencing) is an ABORT marker: records come back.
func TestTransactionTimeoutAbortMakesRecordsAvailable(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	stage(t, sp, "m", 1, 0, ack(0, 4, AckReject))
	sp.CompleteTxn(1, 1, false)
	wantState(t, sp, 0, 4, Available, 1)
	wantAcquired(t, fetch(t, sp, 1, "m", 0, 4, 5, 500), AcquiredRecords{0, 4, 2})
}

// 42. Decision D5: abort at the delivery limit archives.
func TestAbortAtDeliveryLimitArchives(t *testing.T) {
	sp := newSP(t, 0)
	cfg := testConfig()
	cfg.DeliveryCountLimit = 2
	sp.SetConfig(cfg)
	fetch(t, sp, 0, "m", 0, 4, 5, 500)
	stage(t, sp, "m", 1, 0, ack(0, 4, AckAccept))
	sp.CompleteTxn(1, 1, false) // count 1 < 2: AVAILABLE
	wantAcquired(t, fetch(t, sp, 1, "m", 0, 4, 5, 500), AcquiredRecords{0, 4, 2})
	stage(t, sp, "m", 1, 1, ack(0, 4, AckAccept))
	u, _ := sp.CompleteTxn(1, 2, false) // count 2 == limit: ARCHIVED, a poison record cannot loop
	if u.Batches[0].DeliveryState != Archived {
		t.Fatalf("%+v", u.Batches)
	}
	wantOffsets(t, sp, 5, 5)
	if c := sp.Counters(); c.ArchivedOnAbort != 5 || c.TxnAborted != 10 {
		t.Fatalf("%+v", c)
	}
}

// 43. Two transactions staging disjoint offsets: one commits, one aborts.
func TestTwoTransactionsOneCommitsOneAborts(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "a", 0, 9, 10, 500)
	stage(t, sp, "a", 1, 0, ack(0, 4, AckAccept))
	stage(t, sp, "a", 2, 0, ack(5, 9, AckAccept))
	sp.CompleteTxn(2, 1, false)
	sp.CompleteTxn(1, 1, true)
	wantOffsets(t, sp, 5, 9)
	wantState(t, sp, 5, 9, Available, 1)
}

// 44. The TX_PENDING gauge rises on stage and falls on resolution.
func TestTxnPendingRecordsCount(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "a", 0, 9, 10, 500)
	stage(t, sp, "a", 1, 0, ack(0, 3, AckAccept))
	stage(t, sp, "a", 2, 0, ack(4, 4, AckReject))
	if sp.TxPendingRecords() != 5 {
		t.Fatal(sp.TxPendingRecords())
	}
	sp.CompleteTxn(1, 1, true)
	if sp.TxPendingRecords() != 1 || len(sp.TxnProducers()) != 1 {
		t.Fatal(sp.TxPendingRecords())
	}
}

// 11/13. The staged state survives a restart: restored TX_PENDING, then resolved.
func TestTxPendingRestoredFromSnapshotThenCommitted(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	stage(t, sp, "m", 1, 0, ack(0, 4, AckAccept))
	sp2 := restore(t, sp.Snapshot())
	wantState(t, sp2, 0, 4, TxPending, 1)
	wantState(t, sp2, 5, 9, Available, 1) // ACQUIRED comes back AVAILABLE
	if res := fetch(t, sp2, 0, "m2", 0, 9, 10, 500); len(res.Records) != 1 || res.Records[0] != (AcquiredRecords{5, 9, 2}) {
		t.Fatalf("%v", res.Records)
	}
	sp2.CompleteTxn(1, 1, true)
	wantOffsets(t, sp2, 5, 9)
}

// Persisted staged state restores exactly (the store's view).
func TestRestoreStagedFields(t *testing.T) {
	staged := StateBatch{FirstOffset: 3, LastOffset: 4, DeliveryState: TxPending, DeliveryCount: 2,
		StagedProducerID: 9, StagedProducerEpoch: 5, StagedAckType: AckReject, StagedDeliveryState: Archived}
	sp := restore(t, Snapshot{StartOffset: 3, Batches: []StateBatch{staged}})
	if got := sp.Snapshot().Batches; len(got) != 1 || got[0] != staged {
		t.Fatalf("%+v", got)
	}
	bad := staged
	bad.StagedAckType = AckRelease
	if _, err := Restore(testConfig(), Snapshot{StartOffset: 3, Batches: []StateBatch{bad}}); err == nil {
		t.Fatal("restored a staged RELEASE")
	}
}

// 30. Offsets below a moved start offset are archived, whatever their state.
func TestLogStartPastTxPendingArchives(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	stage(t, sp, "m", 1, 0, ack(0, 4, AckAccept))
	sp.AdvanceLogStart(3)
	wantOffsets(t, sp, 3, 9)
	wantState(t, sp, 3, 4, TxPending, 1)
	if sp.TxPendingRecords() != 2 {
		t.Fatal(sp.TxPendingRecords())
	}
}

// 42 (D5). The abort target is decided at staging: a delivery limit changed between
// staging and the marker changes nothing, in memory or after a restore, so the
// share partition and the store (which holds StagedAbortState) agree.
func TestAbortTargetDecidedAtStaging(t *testing.T) {
	limit := func(sp *SharePartition, n int16) {
		cfg := testConfig()
		cfg.DeliveryCountLimit = n
		if err := sp.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	for _, restore := range []bool{false, true} {
		sp := newSP(t, 0)
		limit(sp, 1)
		fetch(t, sp, 0, "m", 0, 4, 5, 500) // count 1 == limit: ARCHIVED on abort
		u := stage(t, sp, "m", 1, 0, ack(0, 4, AckAccept))
		if u.Batches[0].StagedAbortState != Archived {
			t.Fatalf("staged %+v", u.Batches)
		}
		limit(sp, 5) // raised before the marker
		if restore {
			var err error
			if sp, err = Restore(testConfig(), sp.Snapshot()); err != nil {
				t.Fatal(err)
			}
		}
		if d := sp.Describe(); d.Records[0].StagedAbortState != Archived {
			t.Fatalf("describe %+v", d.Records)
		}
		sp.CompleteTxn(1, 1, false)
		wantOffsets(t, sp, 5, 5)

		sp = newSP(t, 0)
		fetch(t, sp, 0, "m", 0, 4, 5, 500) // count 1 < 5: AVAILABLE on abort
		u = stage(t, sp, "m", 1, 0, ack(0, 4, AckAccept))
		if u.Batches[0].StagedAbortState != Available {
			t.Fatalf("staged %+v", u.Batches)
		}
		limit(sp, 1) // lowered before the marker
		if restore {
			cfg := testConfig()
			cfg.DeliveryCountLimit = 1
			var err error
			if sp, err = Restore(cfg, sp.Snapshot()); err != nil {
				t.Fatal(err)
			}
		}
		sp.CompleteTxn(1, 1, false)
		wantState(t, sp, 0, 4, Available, 1)
	}
}

// A TX_PENDING batch restored without a recorded abort state (-1) decides it with
// the limit current at the restore.
func TestRestoreWithoutAbortStateUsesLimit(t *testing.T) {
	staged := StateBatch{FirstOffset: 0, LastOffset: 1, DeliveryState: TxPending, DeliveryCount: 5,
		StagedProducerID: 9, StagedProducerEpoch: 0, StagedAckType: AckAccept, StagedDeliveryState: Acknowledged, StagedAbortState: -1}
	sp, err := Restore(testConfig(), Snapshot{StartOffset: 0, Batches: []StateBatch{staged}})
	if err != nil {
		t.Fatal(err)
	}
	sp.CompleteTxn(9, 0, false)
	wantOffsets(t, sp, 2, 2)
}

// DeliveryCompleteCount counts terminal records at or above the SPSO.
func TestDeliveryCompleteCount(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 500)
	mustAck(t, sp, 0, "m", ack(2, 3, AckAccept), ack(5, 5, AckReject))
	if n := sp.DeliveryCompleteCount(); n != 3 {
		t.Fatalf("delivery-complete count %d, want 3", n)
	}
	stage(t, sp, "m", 1, 0, ack(0, 1, AckAccept))
	sp.CompleteTxn(1, 1, true) // SPSO moves past 0..3
	if n := sp.DeliveryCompleteCount(); n != 1 || sp.StartOffset() != 4 {
		t.Fatalf("delivery-complete count %d spso %d, want 1 and 4", n, sp.StartOffset())
	}
}
