package sharestate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/coordlog"
)

// fixture is a store over in-memory partitions with a fake clock.
type fixture struct {
	t     *testing.T
	cfg   Config
	parts []*coordlog.Memory
	now   time.Time
	s     *Store
}

func newFixture(t *testing.T, numPartitions int32, updatesPerSnapshot int) *fixture {
	t.Helper()
	f := &fixture{t: t, now: time.UnixMilli(1_700_000_000_000)}
	f.cfg = Config{NumPartitions: numPartitions, UpdatesPerSnapshot: updatesPerSnapshot, Now: func() time.Time { return f.now }}
	for i := range numPartitions {
		f.parts = append(f.parts, coordlog.NewMemory(i))
	}
	f.restart()
	return f
}

// restart replaces the store with one replayed from the partitions.
func (f *fixture) restart() {
	f.t.Helper()
	if f.s != nil {
		f.s.Close()
	}
	lps := make([]coordlog.Partition, len(f.parts))
	for i, p := range f.parts {
		lps[i] = p
	}
	s, err := New(f.cfg, lps)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s = s
}

func (f *fixture) mem(k Key) *coordlog.Memory { return f.parts[f.s.PartitionFor(k)] }

// records counts the records (not markers) in k's partition, by type.
func (f *fixture) records(k Key) (snapshots, updates, tombstones int) {
	f.t.Helper()
	_ = f.mem(k).Replay(func(st coordlog.Stored) error {
		for _, r := range st.Records {
			rk, err := decodeKey(r.Key)
			if err != nil {
				f.t.Fatal(err)
			}
			switch {
			case r.Value == nil:
				tombstones++
			case rk.Type == recordTypeSnapshot:
				snapshots++
			default:
				updates++
			}
		}
		return nil
	})
	return
}

func (f *fixture) mustRead(k Key, leaderEpoch int32) State {
	f.t.Helper()
	st, err := f.s.Read(context.Background(), k, leaderEpoch)
	if err != nil {
		f.t.Fatalf("read %s: %v", k, err)
	}
	return st
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code *kerr.Error) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("got %v, want %s", err, code.Message)
	}
}

var ctx = context.Background()

func key(g string, p int32) Key { return Key{GroupID: g, TopicID: testTopic, Partition: p} }

func TestInitializeReadWrite(t *testing.T) {
	f := newFixture(t, 3, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 1, 0))
	must(t, f.s.Write(ctx, k, 1, 0, 0, 0, bl(sb(0, 9, StateAvailable, 1))))
	must(t, f.s.Write(ctx, k, 1, 0, 5, 3, bl(sb(5, 7, StateAcknowledged, 1))))
	got := f.mustRead(k, 0)
	want := State{StateEpoch: 1, LeaderEpoch: 0, StartOffset: 5, DeliveryCompleteCount: 3,
		Batches: bl(sb(5, 7, StateAcknowledged, 1), sb(8, 9, StateAvailable, 1))}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if s, u, _ := f.records(k); s != 1 || u != 2 {
		t.Fatalf("%d snapshots, %d updates", s, u)
	}
	f.restart()
	if again := f.mustRead(k, 0); !reflect.DeepEqual(again, want) {
		t.Fatalf("after restart %+v", again)
	}
}

// testWriteFailsOnUninitializedPartition, testReadFailsOnUninitializedPartition.
func TestUninitialized(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	wantCode(t, f.s.Write(ctx, k, 0, 0, 0, -1, nil), kerr.InvalidRequest)
	_, err := f.s.Read(ctx, k, 0)
	wantCode(t, err, kerr.InvalidRequest)
	sum, err := f.s.ReadSummary(ctx, k, 0)
	if err != nil || sum != (Summary{StartOffset: -1, DeliveryCompleteCount: -1}) {
		t.Fatalf("summary %+v %v", sum, err)
	}
	must(t, f.s.Delete(ctx, k)) // testDeleteStateUninitializedRecord
	if s, u, ts := f.records(k); s+u+ts != 0 {
		t.Fatal("wrote records for an uninitialized key")
	}
}

// Kafka's testSnapshotUpdateCountBoundary: after UpdatesPerSnapshot updates the next write
// is a snapshot of the merged state, pruned below the start offset, and counting restarts.
func TestSnapshotAfterUpdatesPerSnapshot(t *testing.T) {
	const n = 3
	f := newFixture(t, 1, n)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	for i := range n {
		must(t, f.s.Write(ctx, k, 0, 0, 0, -1, bl(sb(int64(i), int64(i), StateAcknowledged, 1))))
	}
	if s, u, _ := f.records(k); s != 1 || u != n {
		t.Fatalf("before the threshold: %d snapshots, %d updates", s, u)
	}
	must(t, f.s.Write(ctx, k, 0, 0, 2, 1, bl(sb(3, 3, StateArchived, 1))))
	if s, u, _ := f.records(k); s != 2 || u != n {
		t.Fatalf("at the threshold: %d snapshots, %d updates", s, u)
	}
	var last *snapshotValue
	_ = f.parts[0].Replay(func(st coordlog.Stored) error {
		for _, r := range st.Records {
			if rk, _ := decodeKey(r.Key); rk.Type == recordTypeSnapshot {
				last, _ = decodeSnapshotValue(r.Value)
			}
		}
		return nil
	})
	want := &snapshotValue{SnapshotEpoch: 1, StartOffset: 2, DeliveryCompleteCount: 1,
		CreateTimestamp: f.now.UnixMilli(), WriteTimestamp: f.now.UnixMilli(),
		Batches: bl(sb(2, 2, StateAcknowledged, 1), sb(3, 3, StateArchived, 1))}
	if !reflect.DeepEqual(last, want) {
		t.Fatalf("snapshot %+v\nwant %+v", last, want)
	}
	must(t, f.s.Write(ctx, k, 0, 0, -1, -1, bl(sb(4, 4, StateAcknowledged, 1))))
	if s, u, _ := f.records(k); s != 2 || u != n+1 {
		t.Fatalf("after the snapshot: %d snapshots, %d updates", s, u)
	}
	st := f.mustRead(k, 0)
	f.restart()
	if again := f.mustRead(k, 0); !reflect.DeepEqual(again, st) {
		t.Fatalf("replay %+v, live %+v", again, st)
	}
}

// The fencing rules of kip-932.md §4.5, one test each.
func TestFencing(t *testing.T) {
	setup := func(t *testing.T) (*fixture, Key) {
		f := newFixture(t, 1, 500)
		k := key("g", 0)
		must(t, f.s.Initialize(ctx, k, 5, 0))
		must(t, f.s.Write(ctx, k, 5, 7, 0, -1, nil))
		return f, k
	}
	t.Run("WriteLowerLeaderEpochIsFencedLeaderEpoch", func(t *testing.T) { // testWriteStateFencedLeaderEpochError
		f, k := setup(t)
		wantCode(t, f.s.Write(ctx, k, 5, 6, 0, -1, nil), kerr.FencedLeaderEpoch)
	})
	t.Run("WriteLowerStateEpochIsFencedStateEpoch", func(t *testing.T) { // testWriteStateFencedStateEpochError
		f, k := setup(t)
		wantCode(t, f.s.Write(ctx, k, 4, 7, 0, -1, nil), kerr.FencedStateEpoch)
	})
	t.Run("ReadLowerLeaderEpochIsFencedLeaderEpoch", func(t *testing.T) { // testReadStateFencedLeaderEpochError
		f, k := setup(t)
		_, err := f.s.Read(ctx, k, 6)
		wantCode(t, err, kerr.FencedLeaderEpoch)
		_, err = f.s.ReadSummary(ctx, k, 6)
		wantCode(t, err, kerr.FencedLeaderEpoch)
	})
	t.Run("ReadHigherLeaderEpochIsRecorded", func(t *testing.T) { // testReadStateLeaderEpochUpdateSuccess
		f, k := setup(t)
		_, u0, _ := f.records(k)
		if st := f.mustRead(k, 9); st.LeaderEpoch != 9 {
			t.Fatalf("leader epoch %d", st.LeaderEpoch)
		}
		if _, u, _ := f.records(k); u != u0+1 {
			t.Fatal("the higher leader epoch was not written")
		}
		f.restart()
		wantCode(t, f.s.Write(ctx, k, 5, 8, 0, -1, nil), kerr.FencedLeaderEpoch)
		_, err := f.s.Read(ctx, k, 8)
		wantCode(t, err, kerr.FencedLeaderEpoch)
	})
	t.Run("ReadSameLeaderEpochWritesNothing", func(t *testing.T) {
		f, k := setup(t)
		_, u0, _ := f.records(k)
		f.mustRead(k, 7)
		if _, u, _ := f.records(k); u != u0 {
			t.Fatal("a read at the stored leader epoch wrote")
		}
	})
	t.Run("InitializeLowerStateEpochIsFencedStateEpoch", func(t *testing.T) {
		f, k := setup(t)
		wantCode(t, f.s.Initialize(ctx, k, 4, 0), kerr.FencedStateEpoch)
		must(t, f.s.Initialize(ctx, k, 5, 10)) // equal is allowed
		if st := f.mustRead(k, 7); st.StartOffset != 10 || len(st.Batches) != 0 {
			t.Fatalf("re-initialized state %+v", st)
		}
	})
	t.Run("InitializeKeepsLeaderEpochAndBumpsSnapshotEpoch", func(t *testing.T) {
		f, k := setup(t)
		must(t, f.s.Initialize(ctx, k, 6, 0))
		wantCode(t, f.s.Write(ctx, k, 6, 6, 0, -1, nil), kerr.FencedLeaderEpoch)
		wantCode(t, f.s.Write(ctx, k, 5, 7, 0, -1, nil), kerr.FencedStateEpoch)
		var epoch int32
		f.s.parts[0].inspect(func(c *Core) { epoch = c.keys[k].snapshotEpoch })
		if epoch != 1 {
			t.Fatalf("snapshot epoch %d", epoch)
		}
	})
	t.Run("NegativeValuesAreInvalidRequest", func(t *testing.T) { // testInitializeStateInvalidStateEpochRequestData
		f, k := setup(t)
		wantCode(t, f.s.Write(ctx, k, -1, 7, 0, -1, nil), kerr.InvalidRequest)
		wantCode(t, f.s.Write(ctx, k, 5, -1, 0, -1, nil), kerr.InvalidRequest)
		wantCode(t, f.s.Write(ctx, key("g", -1), 5, 7, 0, -1, nil), kerr.InvalidRequest)
		wantCode(t, f.s.Initialize(ctx, k, -1, 0), kerr.InvalidRequest)
		wantCode(t, f.s.Write(ctx, k, 5, 7, 0, -1, bl(sb(3, 2, 0, 1))), kerr.InvalidRequest)
		wantCode(t, f.s.Write(ctx, k, 5, 7, 0, -1, bl(sb(3, 4, 1, 1))), kerr.InvalidRequest) // ACQUIRED is never persisted
	})
	t.Run("DeletedKeyForgetsEpochs", func(t *testing.T) {
		f, k := setup(t)
		must(t, f.s.Delete(ctx, k))
		must(t, f.s.Initialize(ctx, k, 0, 0))
		must(t, f.s.Write(ctx, k, 0, 0, 0, -1, nil))
	})
}

// testWriteStateDiscardsStartOffsetRegression and the delivery-complete count rules.
func TestWriteDiscardsRegressions(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	must(t, f.s.Write(ctx, k, 0, 0, 10, 4, bl(sb(10, 19, StateAcknowledged, 1))))
	must(t, f.s.Write(ctx, k, 0, 0, 5, 9, nil)) // stale start offset: both ignored
	if st := f.mustRead(k, 0); st.StartOffset != 10 || st.DeliveryCompleteCount != 4 {
		t.Fatalf("%+v", st)
	}
	must(t, f.s.Write(ctx, k, 0, 0, 10, 2, nil)) // same start offset, lower count: kept
	if st := f.mustRead(k, 0); st.DeliveryCompleteCount != 4 {
		t.Fatalf("%+v", st)
	}
	must(t, f.s.Write(ctx, k, 0, 0, 15, 1, nil)) // start offset moved: the count may drop
	st := f.mustRead(k, 0)
	if st.StartOffset != 15 || st.DeliveryCompleteCount != 1 || !reflect.DeepEqual(st.Batches, bl(sb(15, 19, StateAcknowledged, 1))) {
		t.Fatalf("%+v", st)
	}
	f.restart()
	if again := f.mustRead(k, 0); !reflect.DeepEqual(again, st) {
		t.Fatalf("replay %+v", again)
	}
}

// A batch may span any number of offsets below the largest one, and costs one entry.
func TestWriteHugeRanges(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	must(t, f.s.Write(ctx, k, 0, 0, 0, 0, bl(sb(0, 1<<62, StateAvailable, 1), sb(1<<62+1, math.MaxInt64-1, StateArchived, 2))))
	must(t, f.s.Write(ctx, k, 0, 0, 0, 0, bl(sb(5, 5, StateAcknowledged, 1))))
	if st := f.mustRead(k, 0); len(st.Batches) != 4 {
		t.Fatalf("%+v", st.Batches)
	}
	if err := f.s.Write(ctx, k, 0, 0, 0, 0, bl(sb(7, math.MaxInt64, StateArchived, 2))); err == nil {
		t.Fatal("a batch ending at the largest offset was stored")
	}
}

// testDeleteStateSuccess: a tombstone on the snapshot key; replay forgets the key.
func TestDeleteWritesTombstone(t *testing.T) {
	f := newFixture(t, 1, 500)
	k, other := key("g", 0), key("h", 1)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	must(t, f.s.Initialize(ctx, other, 0, 3))
	must(t, f.s.Write(ctx, k, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1))))
	must(t, f.s.Delete(ctx, k))
	if _, _, ts := f.records(k); ts != 1 {
		t.Fatal("no tombstone")
	}
	var tomb []byte
	_ = f.parts[0].Replay(func(st coordlog.Stored) error {
		for _, r := range st.Records {
			if r.Value == nil {
				tomb = r.Key
			}
		}
		return nil
	})
	if rk, _ := decodeKey(tomb); rk.Type != recordTypeSnapshot || rk.Key != k {
		t.Fatalf("tombstone key %+v", rk)
	}
	f.restart()
	_, err := f.s.Read(ctx, k, 0)
	wantCode(t, err, kerr.InvalidRequest)
	if st := f.mustRead(other, 0); st.StartOffset != 3 {
		t.Fatalf("other key %+v", st)
	}
}

// A failed append leaves memory unsure of the log; the partition replays the log on its
// next use instead of staying unavailable until a restart.
func TestFailedAppendReloadsOnNextUse(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	f.parts[0].FailAppend = errors.New("disk on fire")
	wantCode(t, f.s.Write(ctx, k, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1))), kerr.CoordinatorNotAvailable)
	if st := f.mustRead(k, 0); len(st.Batches) != 0 {
		t.Fatalf("a write that never reached the log is visible after the reload: %+v", st)
	}
}

// When the write reached the log but its acknowledgement was lost, the reload shows it:
// the log, not memory, is the truth.
func TestLostAppendAckReloadsWhatTheLogHolds(t *testing.T) {
	f := newFixture(t, 1, 500)
	k := key("g", 0)
	must(t, f.s.Initialize(ctx, k, 0, 0))
	f.parts[0].FailAfterAppend = errors.New("ack lost")
	err := f.s.Write(ctx, k, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1)))
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("lost ack: %v", err)
	}
	if st := f.mustRead(k, 0); len(st.Batches) != 1 || st.Batches[0].DeliveryState != StateAcknowledged {
		t.Fatalf("the logged write is missing after the reload: %+v", st)
	}
}

func TestClosedAndUnownedAreNotCoordinator(t *testing.T) {
	f := newFixture(t, 2, 500)
	k := key("g", 0)
	s, err := New(Config{NumPartitions: 2}, []coordlog.Partition{coordlog.NewMemory(1 - f.s.PartitionFor(k))})
	must(t, err)
	wantCode(t, s.Initialize(ctx, k, 0, 0), kerr.NotCoordinator)
	f.s.Close()
	wantCode(t, f.s.Initialize(ctx, k, 0, 0), kerr.NotCoordinator)
}

func TestPruningAndColdSnapshots(t *testing.T) {
	f := newFixture(t, 1, 500)
	f.cfg.ColdSnapshotInterval = time.Minute
	f.restart()
	a, b := key("a", 0), key("b", 0)
	must(t, f.s.Initialize(ctx, a, 0, 0)) // offset 0
	must(t, f.s.Initialize(ctx, b, 0, 0)) // offset 1
	must(t, f.s.Write(ctx, a, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1))))
	if off, ok := f.s.LastRedundantOffset(0); !ok || off != 0 {
		t.Fatalf("redundant offset %d", off)
	}
	f.now = f.now.Add(2 * time.Minute)
	n, err := f.s.SnapshotCold(ctx)
	if err != nil || n != 2 {
		t.Fatalf("cold snapshots %d %v", n, err)
	}
	if off, _ := f.s.LastRedundantOffset(0); off != 3 {
		t.Fatalf("redundant offset after cold snapshots %d", off)
	}
	must(t, f.s.Delete(ctx, a))
	must(t, f.s.Delete(ctx, b))
	if off, _ := f.s.LastRedundantOffset(0); off != 7 {
		t.Fatalf("redundant offset with no keys %d", off)
	}
}

// Concurrent callers on keys of the same and of different partitions; run with -race.
// Afterwards the live state equals a replay.
func TestConcurrentWritesReplayEqual(t *testing.T) {
	f := newFixture(t, 4, 3)
	keys := make([]Key, 16)
	for i := range keys {
		keys[i] = key(fmt.Sprint("g", i), int32(i))
		must(t, f.s.Initialize(ctx, keys[i], 0, 0))
	}
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			for j := range 50 {
				o := int64(j)
				b := sb(o, o, StateAcknowledged, 1)
				if j%3 == 0 {
					b = staged(o, o, 1, int64(i%2), 0, AckAccept)
				}
				if err := f.s.Write(ctx, k, 0, 0, o/2, -1, bl(b)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for p := range int32(4) {
		wg.Go(func() {
			for range 10 {
				_, err := f.s.ApplyMarker(ctx, p, int64(p%2), 0, p%2 == 0, func(context.Context) error {
					f.parts[p].AppendMarker(int64(p%2), 0, p%2 == 0, 0)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	live := map[Key]State{}
	for _, k := range keys {
		live[k] = f.mustRead(k, 0)
	}
	f.restart()
	for _, k := range keys {
		if got := f.mustRead(k, 0); !reflect.DeepEqual(got, live[k]) {
			t.Fatalf("%s: replay %+v\nlive %+v", k, got, live[k])
		}
	}
}
