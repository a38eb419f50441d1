package sharestate

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

func staged(first, last int64, count int16, pid int64, epoch int16, ack int8) StateBatch {
	return StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: StateTxPending, DeliveryCount: count,
		TxnProducerID: pid, TxnProducerEpoch: epoch, TxnAckType: ack}
}

// marker appends a transaction marker to k's partition and resolves it, as the broker's
// WriteTxnMarkers handler does through ApplyMarker.
func (f *fixture) marker(k Key, pid int64, epoch int16, commit bool) []Key {
	f.t.Helper()
	p := f.s.PartitionFor(k)
	keys, err := f.s.ApplyMarker(ctx, p, pid, epoch, commit, func(context.Context) error {
		f.parts[p].AppendMarker(pid, epoch, commit, 0)
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return keys
}

// stagedKey initializes k with offsets 0..9 delivered once (acquired: not persisted) and
// stages b, as TxnShareAcknowledge does.
func stagedKey(t *testing.T, f *fixture, k Key, b ...StateBatch) {
	t.Helper()
	must(t, f.s.Initialize(ctx, k, 0, 0))
	must(t, f.s.Write(ctx, k, 0, 0, 0, 0, b))
}

// Commit and abort, for each staged type (kip-1289.md §2.4, D5).
func TestMarkerResolution(t *testing.T) {
	rows := []struct {
		name   string
		batch  StateBatch
		commit bool
		want   StateBatch
		dcc    int64
	}{
		{"CommitAcceptIsAcknowledged", staged(0, 4, 1, 7, 0, AckAccept), true, sb(0, 4, StateAcknowledged, 1), 5},
		{"CommitRejectIsArchived", staged(0, 4, 1, 7, 0, AckReject), true, sb(0, 4, StateArchived, 1), 5},
		{"CommitGapIsArchived", staged(0, 4, 1, 7, 0, AckGap), true, sb(0, 4, StateArchived, 1), 5},
		{"CommitRejectWithDLQIsArchiving", func() StateBatch {
			b := staged(0, 4, 1, 7, 0, AckReject)
			b.TxnCommitState = StateArchiving
			return b
		}(), true, sb(0, 4, StateArchiving, 1), 0},
		{"AbortAcceptIsAvailable", staged(0, 4, 2, 7, 0, AckAccept), false, sb(0, 4, StateAvailable, 2), 0},
		{"AbortRejectIsAvailable", staged(0, 4, 2, 7, 0, AckReject), false, sb(0, 4, StateAvailable, 2), 0},
		{"AbortGapIsAvailable", staged(0, 4, 2, 7, 0, AckGap), false, sb(0, 4, StateAvailable, 2), 0},
		{"AbortAtDeliveryLimitIsArchived", func() StateBatch {
			b := staged(0, 4, 5, 7, 0, AckAccept)
			b.TxnAbortState = StateArchived
			return b
		}(), false, sb(0, 4, StateArchived, 5), 5},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newFixture(t, 3, 500)
			k := key("g", 0)
			stagedKey(t, f, k, r.batch)
			st := f.mustRead(k, 0)
			if len(st.Batches) != 1 || st.Batches[0].DeliveryState != StateTxPending {
				t.Fatalf("staged state %+v", st.Batches)
			}
			if keys := f.marker(k, 7, 0, r.commit); !slices.Equal(keys, []Key{k}) {
				t.Fatalf("affected keys %v", keys)
			}
			st = f.mustRead(k, 0)
			if !reflect.DeepEqual(st.Batches, bl(r.want)) || st.DeliveryCompleteCount != r.dcc {
				t.Fatalf("resolved %+v dcc %d, want %+v dcc %d", st.Batches, st.DeliveryCompleteCount, r.want, r.dcc)
			}
			f.restart()
			if again := f.mustRead(k, 0); !reflect.DeepEqual(again, st) {
				t.Fatalf("replay %+v\nlive %+v", again, st)
			}
		})
	}
}

func TestMarkerOfAnotherProducerOrOlderEpochResolvesNothing(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	stagedKey(t, f, k, staged(0, 4, 1, 7, 3, AckAccept), staged(5, 9, 1, 8, 0, AckAccept))
	before := f.mustRead(k, 0)
	if keys := f.marker(k, 9, 5, true); keys != nil {
		t.Fatalf("other producer resolved %v", keys)
	}
	if keys := f.marker(k, 7, 2, false); keys != nil { // epoch below the staging epoch
		t.Fatalf("older epoch resolved %v", keys)
	}
	if st := f.mustRead(k, 0); !reflect.DeepEqual(st, before) {
		t.Fatalf("%+v", st)
	}
	// TV2: the marker carries the bumped epoch; it resolves producer 7 only.
	f.marker(k, 7, 4, true)
	want := bl(sb(0, 4, StateAcknowledged, 1), staged(5, 9, 1, 8, 0, AckAccept))
	want[1].TxnCommitState = StateAcknowledged
	if st := f.mustRead(k, 0); !reflect.DeepEqual(st.Batches, want) {
		t.Fatalf("%+v", st.Batches)
	}
	f.restart()
	if st := f.mustRead(k, 0); !reflect.DeepEqual(st.Batches, want) {
		t.Fatalf("replay %+v", st.Batches)
	}
}

// A staging write that reaches the store after its transaction's marker (the coordinator
// aborted on timeout while TxnShareAcknowledge was in flight) would stay TX_PENDING for
// ever; it is refused, also after a restart.
func TestStagingAfterMarkerIsFenced(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	f.marker(k, 7, 4, false)
	for range 2 {
		wantCode(t, f.s.Write(ctx, k, 0, 0, 0, -1, bl(staged(0, 0, 1, 7, 3, AckAccept))), kerr.InvalidProducerEpoch)
		f.restart()
	}
	must(t, f.s.Write(ctx, k, 0, 0, 0, -1, bl(staged(0, 0, 1, 7, 4, AckAccept)))) // the next transaction
}

func TestStagingValidation(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	bad := []StateBatch{
		staged(0, 0, 1, 7, 0, 2),  // RELEASE cannot be staged (D3)
		staged(0, 0, 1, 7, 0, 4),  // nor RENEW
		staged(0, 0, 1, -1, 0, 1), // no producer
		func() StateBatch { b := staged(0, 0, 1, 7, 0, AckAccept); b.TxnCommitState = StateArchived; return b }(),
		func() StateBatch {
			b := staged(0, 0, 1, 7, 0, AckReject)
			b.TxnAbortState = StateAcknowledged
			return b
		}(),
	}
	for _, b := range bad {
		wantCode(t, f.s.Write(ctx, k, 0, 0, 0, -1, bl(b)), kerr.InvalidRequest)
	}
	// Staging fields of other states are dropped.
	b := sb(0, 0, StateAcknowledged, 1)
	b.TxnProducerID = 9
	must(t, f.s.Write(ctx, k, 0, 0, 0, -1, bl(b)))
	if st := f.mustRead(k, 0); st.Batches[0] != sb(0, 0, StateAcknowledged, 1) {
		t.Fatalf("%+v", st.Batches)
	}
}

// A crash after the marker is durable but before the store resolved it: replay resolves it.
func TestMarkerInLogWithoutCompleteTxnResolvesOnReplay(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	stagedKey(t, f, k, staged(0, 4, 1, 7, 0, AckAccept))
	f.parts[0].AppendMarker(7, 1, true, 0) // the broker crashed before CompleteTxn
	f.restart()
	if st := f.mustRead(k, 0); !reflect.DeepEqual(st.Batches, bl(sb(0, 4, StateAcknowledged, 1))) {
		t.Fatalf("%+v", st.Batches)
	}
}

// One marker resolves the producer's stagings in every key of the partition, and only
// there; the staging survives snapshots.
func TestMarkerAcrossKeysAndSnapshots(t *testing.T) {
	f := newFixture(t, 1, 2)
	a, b := key("a", 0), key("b", 3)
	stagedKey(t, f, a, staged(0, 1, 1, 7, 0, AckAccept))
	stagedKey(t, f, b, staged(5, 6, 1, 7, 0, AckReject))
	for i := range 3 { // push a past a snapshot with the staging inside
		must(t, f.s.Write(ctx, a, 0, 0, -1, -1, bl(sb(int64(10+i), int64(10+i), StateAcknowledged, 1))))
	}
	if s, _, _ := f.records(a); s < 3 {
		t.Fatalf("expected snapshots, got %d", s)
	}
	keys := f.marker(a, 7, 0, true)
	if !slices.Equal(keys, []Key{a, b}) {
		t.Fatalf("keys %v", keys)
	}
	if keys := f.s.CompleteTxn(0, 7, 0, true); keys != nil {
		t.Fatalf("second resolution %v", keys)
	}
	sa, sb2 := f.mustRead(a, 0), f.mustRead(b, 0)
	f.restart()
	if ra, rb := f.mustRead(a, 0), f.mustRead(b, 0); !reflect.DeepEqual(ra, sa) || !reflect.DeepEqual(rb, sb2) {
		t.Fatalf("replay differs:\n%+v\n%+v\nlive\n%+v\n%+v", ra, rb, sa, sb2)
	}
	if sb2.Batches[0].DeliveryState != StateArchived {
		t.Fatalf("%+v", sb2.Batches)
	}
}

func TestApplyMarkerAppendFailureResolvesNothing(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	stagedKey(t, f, k, staged(0, 0, 1, 7, 0, AckAccept))
	boom := errors.New("no")
	if _, err := f.s.ApplyMarker(ctx, 0, 7, 0, true, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if st := f.mustRead(k, 0); st.Batches[0].DeliveryState != StateTxPending {
		t.Fatalf("%+v", st.Batches)
	}
}

// ApplyMarkerResult counts what a marker resolved, for the broker's metrics (D5: an
// abort at the delivery limit archives).
func TestApplyMarkerResultCounts(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	atLimit := staged(5, 6, 5, 7, 0, AckAccept)
	atLimit.TxnAbortState = StateArchived
	stagedKey(t, f, k, staged(0, 4, 1, 7, 0, AckAccept), atLimit, staged(7, 7, 1, 8, 0, AckReject))
	res, err := f.s.ApplyMarkerResult(ctx, 0, 7, 1, false, func(context.Context) error {
		f.parts[0].AppendMarker(7, 1, false, 0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != 7 || res.ArchivedOnAbort != 2 || res.Committed != 0 || !reflect.DeepEqual(res.Keys, []Key{k}) {
		t.Fatalf("%+v", res)
	}
	res, err = f.s.ApplyMarkerResult(ctx, 0, 8, 1, true, func(context.Context) error {
		f.parts[0].AppendMarker(8, 1, true, 0)
		return nil
	})
	if err != nil || res.Committed != 1 || res.Aborted != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

// A failed append leaves the outcome unknown (ErrOutcomeUnknown); a write refused before
// the append does not.
func TestWriteOutcomeUnknownOnlyAfterAppendFailure(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	f.parts[0].FailAppend = errors.New("disk")
	err := f.s.Write(ctx, k, 0, 0, 0, 0, []StateBatch{sb(0, 0, StateAcknowledged, 1)})
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("append failure: %v", err)
	}
	f.marker(k, 7, 3, false)
	err = f.s.Write(ctx, k, 0, 0, 0, 0, []StateBatch{staged(0, 0, 1, 7, 2, AckAccept)})
	if errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("late staging: %v", err)
	}
}

// Alter and delete of share offsets must not drop acknowledgements staged in an open
// transaction: both are refused with CONCURRENT_TRANSACTIONS until its marker resolves them.
func TestReinitializeAndDeleteRefusedWhileStaged(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	stagedKey(t, f, k, staged(0, 4, 1, 7, 0, AckAccept))
	_, err := f.s.Reinitialize(ctx, k, 1, 3)
	wantCode(t, err, kerr.ConcurrentTransactions)
	wantCode(t, f.s.Delete(ctx, k), kerr.ConcurrentTransactions)
	if st := f.mustRead(k, 0); len(st.Batches) != 1 || st.Batches[0].DeliveryState != StateTxPending {
		t.Fatalf("a refused reset changed the state: %+v", st)
	}
	f.marker(k, 7, 1, true)
	if _, err := f.s.Reinitialize(ctx, k, 1, 3); err != nil {
		t.Fatalf("reset after the marker: %v", err)
	}
	must(t, f.s.Delete(ctx, k))
}

// DeleteTopics tombstones every group's keys of the deleted topics, also keys with
// acknowledgements staged in an open transaction (the records are gone with the topic),
// durably: a restart replays the tombstones, and a later marker resolves nothing there.
func TestDeleteTopics(t *testing.T) {
	f := newFixture(t, 3, 10)
	other := [16]byte{9}
	var keys []Key
	for _, g := range []string{"g1", "g2", "g3"} {
		for p := range int32(4) {
			k := key(g, p)
			must(t, f.s.Initialize(ctx, k, 0, 0))
			keys = append(keys, k)
		}
		must(t, f.s.Initialize(ctx, Key{GroupID: g, TopicID: other, Partition: 0}, 0, 0))
	}
	stagedKey(t, f, key("g4", 0), staged(0, 4, 1, 7, 0, AckAccept))
	keys = append(keys, key("g4", 0))
	slices.SortFunc(keys, compareKeys)
	got, err := f.s.DeleteTopics(ctx, func(id [16]byte) bool { return id == testTopic })
	must(t, err)
	slices.SortFunc(got, compareKeys)
	if !reflect.DeepEqual(got, keys) {
		t.Fatalf("deleted %v, want %v", got, keys)
	}
	for _, restart := range []bool{false, true} {
		if restart {
			f.restart()
		}
		for _, k := range f.s.Keys() {
			if k.TopicID == testTopic {
				t.Fatalf("restart %v: %s still has state", restart, k)
			}
		}
		if n := len(f.s.Keys()); n != 3 {
			t.Fatalf("restart %v: %d keys left, want the other topic's 3", restart, n)
		}
	}
	if resolved := f.marker(key("g4", 0), 7, 1, true); len(resolved) != 0 {
		t.Fatalf("a marker after the delete resolved %v", resolved)
	}
}

// TxPendingRecords counts the staged offsets of the durable state: it rises with a
// staging, falls with the marker that resolves it, is rebuilt by a replay (a restart), and
// drops a key's offsets when the key is deleted with its topic.
func TestTxPendingRecordsFollowsDurableState(t *testing.T) {
	f := newFixture(t, 3, 2) // a snapshot every 2 updates: the count survives snapshots too
	want := func(what string, n int64) {
		t.Helper()
		if got := f.s.TxPendingRecords(); got != n {
			t.Fatalf("%s: TxPendingRecords %d, want %d", what, got, n)
		}
	}
	a, b := key("g", 0), key("h", 1)
	want("empty store", 0)
	stagedKey(t, f, a, staged(0, 4, 1, 7, 0, AckAccept), staged(5, 6, 1, 8, 0, AckReject))
	stagedKey(t, f, b, staged(3, 9, 1, 7, 0, AckAccept))
	want("after staging", 5+2+7)
	if got := f.s.TxPendingByKey(); !reflect.DeepEqual(got, map[Key]int64{a: 7, b: 7}) {
		t.Fatalf("TxPendingByKey after staging: %v", got)
	}
	must(t, f.s.Write(ctx, a, 0, 0, -1, -1, []StateBatch{sb(7, 8, StateAcknowledged, 1)}))
	want("after an unrelated write", 14)
	f.restart()
	want("after a restart", 14)
	f.marker(a, 7, 1, true)
	want("after producer 7's commit on a's partition", 14-5-func() int64 {
		if f.s.PartitionFor(a) == f.s.PartitionFor(b) {
			return 7
		}
		return 0
	}())
	f.marker(b, 7, 1, true)
	f.marker(a, 8, 1, false)
	want("after every marker", 0)
	if got := f.s.TxPendingByKey(); len(got) != 0 {
		t.Fatalf("TxPendingByKey after every marker: %v", got)
	}
	f.restart()
	want("after a restart with everything resolved", 0)
	stagedKey(t, f, key("g", 2), staged(0, 9, 1, 9, 0, AckAccept))
	want("after a new staging", 10)
	if _, err := f.s.DeleteTopics(ctx, func([16]byte) bool { return true }); err != nil {
		t.Fatal(err)
	}
	want("after its topic was deleted", 0)
}

// Stagings lists every (partition, producer, epoch) with TX_PENDING offsets in the durable
// state, sorted, with their counts, after a restart too, and forgets what a marker resolved.
func TestStagingsListsPendingTransactions(t *testing.T) {
	f := newFixture(t, 1, 500)
	a, b := key("g", 0), key("h", 1)
	stagedKey(t, f, a, staged(0, 4, 1, 7, 3, AckAccept), staged(5, 6, 1, 8, 0, AckReject))
	stagedKey(t, f, b, staged(0, 2, 1, 7, 3, AckAccept), staged(3, 3, 1, 7, 4, AckGap))
	want := []Staging{{0, 7, 3, 8}, {0, 7, 4, 1}, {0, 8, 0, 2}}
	if got := f.s.Stagings(); !reflect.DeepEqual(got, want) {
		t.Fatalf("stagings %+v, want %+v", got, want)
	}
	f.restart()
	if got := f.s.Stagings(); !reflect.DeepEqual(got, want) {
		t.Fatalf("stagings after a restart %+v, want %+v", got, want)
	}
	f.marker(a, 7, 3, true) // resolves epoch 3 only
	want = []Staging{{0, 7, 4, 1}, {0, 8, 0, 2}}
	if got := f.s.Stagings(); !reflect.DeepEqual(got, want) {
		t.Fatalf("stagings after producer 7's marker at epoch 3 %+v, want %+v", got, want)
	}
}

// A staged batch whose commit or abort state is missing (-1: written before exactq
// recorded them, or by another writer) still gets a real state from its marker: the
// commit state of its ack type, or AVAILABLE on abort. It used to take the -1 as its
// delivery state, a state no record can be in, which the share partition then refused to
// restore.
func TestMarkerGivesRecordedlessStagingsARealState(t *testing.T) {
	for _, r := range []struct {
		name   string
		ack    int8
		commit bool
		want   int8
	}{
		{"CommitAccept", AckAccept, true, StateAcknowledged},
		{"CommitReject", AckReject, true, StateArchived},
		{"AbortAccept", AckAccept, false, StateAvailable},
	} {
		t.Run(r.name, func(t *testing.T) {
			f := newFixture(t, 1, 500)
			k := key("g", 0)
			must(t, f.s.Initialize(ctx, k, 0, 0))
			b := staged(0, 4, 1, 7, 0, r.ack)
			b.TxnCommitState, b.TxnAbortState = -1, -1
			rec := kmsg.Record{Key: encodeKey(nil, recordKey{Type: recordTypeUpdate, Key: k}),
				Value: encodeUpdateValue(nil, &updateValue{LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: -1, Batches: []StateBatch{b}})}
			if _, err := f.mem(k).Append(ctx, coordlog.Batch{Records: []kmsg.Record{rec}, ProducerID: -1}); err != nil {
				t.Fatal(err)
			}
			f.restart()
			f.marker(k, 7, 1, r.commit)
			for _, st := range []State{f.mustRead(k, 0), func() State { f.restart(); return f.mustRead(k, 0) }()} {
				if len(st.Batches) != 1 || st.Batches[0].DeliveryState != r.want {
					t.Fatalf("resolved batches %+v, want state %d", st.Batches, r.want)
				}
			}
		})
	}
}
