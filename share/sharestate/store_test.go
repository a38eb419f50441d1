package sharestate

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/coordlog"
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
