package sharestate

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/exactq/exactq/internal/coordlog"
)

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// refFixture is today's Store (reference_test.go) over in-memory partitions.
type refFixture struct {
	t     fataler
	cfg   Config
	now   time.Time
	parts []*coordlog.Memory
	s     *refStore
}

func newRefFixture(t fataler, numPartitions int32, updatesPerSnapshot int) *refFixture {
	f := &refFixture{t: t, now: time.UnixMilli(1_700_000_000_000)}
	f.cfg = Config{NumPartitions: numPartitions, UpdatesPerSnapshot: updatesPerSnapshot, ColdSnapshotInterval: time.Minute,
		Now: func() time.Time { return f.now }}
	for i := range numPartitions {
		f.parts = append(f.parts, coordlog.NewMemory(i))
	}
	f.restart()
	return f
}

// restart replaces the store with one replayed from the partitions.
func (f *refFixture) restart() {
	f.t.Helper()
	lps := make([]coordlog.Partition, len(f.parts))
	for i, p := range f.parts {
		lps[i] = p
	}
	s, err := newRefStore(f.cfg, lps)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s = s
}

// coreLog is a Core over an in-memory log, doing synchronously what the driver does: it
// appends a Step's batches (joined into one write or not), tells the Core the offsets
// (Committed) and appends the marker.
type coreLog struct {
	t    fataler
	cfg  CoreConfig
	core *Core
	mem  *coordlog.Memory
	join bool
}

func newCoreLog(t fataler, cfg CoreConfig) *coreLog {
	return &coreLog{t: t, cfg: cfg, core: NewCore(cfg), mem: coordlog.NewMemory(cfg.Partition)}
}

func (l *coreLog) step(in Input) Step {
	l.t.Helper()
	st := l.core.Step(in)
	if l.join && len(st.Append) > 1 {
		var all coordlog.Batch
		all.ProducerID = -1
		for _, b := range st.Append {
			all.Records = append(all.Records, b.Records...)
		}
		l.append(all)
	} else {
		for _, b := range st.Append {
			l.append(b)
		}
	}
	if m := st.Marker; m != nil {
		l.mem.AppendMarker(m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch)
	}
	return st
}

func (l *coreLog) append(b coordlog.Batch) {
	l.t.Helper()
	base, err := l.mem.Append(context.Background(), b)
	if err != nil {
		l.t.Fatal(err)
	}
	l.core.Step(Committed{BaseOffset: base, Records: len(b.Records)})
}

// replayed is a new Core rebuilt from the log.
func (l *coreLog) replayed() *Core {
	l.t.Helper()
	c := NewCore(l.cfg)
	err := l.mem.Replay(func(st coordlog.Stored) error {
		return c.Step(Replayed{Stored: st}).Reply.(Done).Err
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return c
}

// sameKeyspace fails unless a and b hold the same keys, indexes and counts. end is
// compared only when withEnd: a marker appended live does not move end (the log does not
// say where it went) while its replay does.
func sameKeyspace(t fataler, what string, a, b *keyspace, withEnd bool) {
	t.Helper()
	if !reflect.DeepEqual(canonicalKeys(a), canonicalKeys(b)) {
		t.Fatalf("%s: keys differ\n%s\n%s", what, dumpKeys(a), dumpKeys(b))
	}
	if !reflect.DeepEqual(a.pending, b.pending) || !maps.Equal(a.markerEpoch, b.markerEpoch) ||
		a.txPending.Load() != b.txPending.Load() {
		t.Fatalf("%s: indexes differ: pending %v / %v, marker epochs %v / %v, tx pending %d / %d", what,
			a.pending, b.pending, a.markerEpoch, b.markerEpoch, a.txPending.Load(), b.txPending.Load())
	}
	if withEnd && a.end != b.end {
		t.Fatalf("%s: end %d / %d", what, a.end, b.end)
	}
}

// canonicalKeys is p's keys with their batches decoded, whether they are hot or not: what
// they hold, not how (compact.go).
func canonicalKeys(p *keyspace) map[Key]entry {
	out := make(map[Key]entry, len(p.keys))
	for k, e := range p.keys {
		c := *e
		c.batches, c.packed, c.hot, c.hotAt, c.hotCounted = e.batches, nil, false, nil, 0
		if !e.hot {
			c.batches = decodeBatches(nil, e.packed)
		}
		if len(c.batches) == 0 {
			c.batches = nil
		}
		c.batches = slices.Clip(c.batches)
		out[k] = c
	}
	return out
}

func dumpKeys(p *keyspace) string {
	s := ""
	for _, k := range slices.SortedFunc(maps.Keys(p.keys), compareKeys) {
		s += fmt.Sprintf("  %s %+v\n", k, *p.keys[k])
	}
	return s
}

// sameBatches fails unless the Step's batches are, record for record, those appended.
func sameBatches(t fataler, what string, want []coordlog.Stored, got []coordlog.Batch) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d batches, the store appended %d", what, len(got), len(want))
	}
	for i := range want {
		if len(want[i].Records) != len(got[i].Records) {
			t.Fatalf("%s: batch %d has %d records, the store's %d", what, i, len(got[i].Records), len(want[i].Records))
		}
		if got[i].ProducerID != -1 {
			t.Fatalf("%s: batch %d is transactional", what, i)
		}
		for j := range want[i].Records {
			w, g := &want[i].Records[j], &got[i].Records[j]
			if !slices.Equal(w.Key, g.Key) || !slices.Equal(w.Value, g.Value) || (w.Value == nil) != (g.Value == nil) {
				t.Fatalf("%s: batch %d record %d differs", what, i, j)
			}
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

var diffKeys = append(slices.Clone(modelKeys), Key{GroupID: "a", TopicID: [16]byte{9}, Partition: 0}, Key{GroupID: "e", TopicID: [16]byte{9}, Partition: 3})

// TestCoreMatchesStore drives today's Store and a Core per partition with the same random
// inputs and requires the same replies, the same records in the same batches, the same
// memory, and, at every restart, a Core replayed from its log equal to the live one.
func TestCoreMatchesStore(t *testing.T) {
	defer coldKeys()()
	rapid.Check(t, func(rt *rapid.T) {
		ups := rapid.IntRange(1, 4).Draw(rt, "updatesPerSnapshot")
		f := newRefFixture(rt, modelPartitions, ups)
		cores := make([]*coreLog, modelPartitions)
		for i := range cores {
			cores[i] = newCoreLog(rt, CoreConfig{Partition: int32(i), UpdatesPerSnapshot: ups, ColdSnapshotIntervalMs: time.Minute.Milliseconds()})
		}
		markerSinceAppend := make([]bool, modelPartitions)
		// run performs op on the Store and in on the Core owning k (or partition p), and
		// checks the batches; it returns the Step.
		run := func(what string, p int32, op func(), in Input) Step {
			before := len(stored(rt, f.parts[p]))
			op()
			appended := stored(rt, f.parts[p])[before:]
			appended = slices.DeleteFunc(appended, func(s coordlog.Stored) bool { return s.Marker != nil })
			l := cores[p]
			l.join = rapid.Bool().Draw(rt, "join")
			st := l.step(in)
			sameBatches(rt, what, appended, st.Append)
			if st.Marker != nil {
				markerSinceAppend[p] = true
			} else if len(st.Append) > 0 {
				markerSinceAppend[p] = false
			}
			return st
		}
		now := func() int64 { return f.now.UnixMilli() }
		// lengths and stepAll are run for inputs the Store applies to every partition at
		// once: the batch counts before, then one Step per partition compared with what
		// the Store appended there since.
		var before []int
		lengths := func() []int {
			n := make([]int, modelPartitions)
			for p := range n {
				n[p] = len(stored(rt, f.parts[p]))
			}
			return n
		}
		stepAll := func(in Input) []Step {
			out := make([]Step, modelPartitions)
			for p, l := range cores {
				l.join = rapid.Bool().Draw(rt, "join")
				out[p] = l.step(in)
				sameBatches(rt, fmt.Sprintf("%T", in), stored(rt, f.parts[p])[before[p]:], out[p].Append)
				markerSinceAppend[p] = markerSinceAppend[p] && len(out[p].Append) == 0 // a marker since the last append
			}
			return out
		}
		sameErr := func(what string, want, got error) {
			if errText(want) != errText(got) {
				rt.Fatalf("%s: core %v, store %v", what, got, want)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"initialize": func(rt *rapid.T) {
				k := rapid.SampledFrom(diffKeys).Draw(rt, "key")
				se := int32(rapid.IntRange(-1, 3).Draw(rt, "stateEpoch"))
				start := rapid.Int64Range(-1, 5).Draw(rt, "start")
				var err error
				st := run("initialize", f.s.PartitionFor(k), func() { err = f.s.Initialize(ctx, k, se, start) },
					Initialize{Key: k, StateEpoch: se, StartOffset: start, NowMs: now()})
				sameErr("initialize", err, st.Reply.(Done).Err)
			},
			"reinitialize": func(rt *rapid.T) {
				k := rapid.SampledFrom(diffKeys).Draw(rt, "key")
				se := int32(rapid.IntRange(0, 5).Draw(rt, "stateEpoch"))
				start := rapid.Int64Range(-1, 5).Draw(rt, "start")
				var (
					got int32
					err error
				)
				st := run("reinitialize", f.s.PartitionFor(k), func() { got, err = f.s.Reinitialize(ctx, k, se, start) },
					Reinitialize{Key: k, StateEpoch: se, StartOffset: start, NowMs: now()})
				r := st.Reply.(ReinitializeReply)
				sameErr("reinitialize", err, r.Err)
				if err == nil && got != r.StateEpoch {
					rt.Fatalf("reinitialize: core state epoch %d, store %d", r.StateEpoch, got)
				}
			},
			"write": func(rt *rapid.T) {
				k := rapid.SampledFrom(diffKeys).Draw(rt, "key")
				se := int32(rapid.IntRange(0, 3).Draw(rt, "stateEpoch"))
				le := int32(rapid.IntRange(0, 3).Draw(rt, "leaderEpoch"))
				start := rapid.Int64Range(-1, 12).Draw(rt, "start")
				dcc := rapid.Int64Range(-1, 10).Draw(rt, "dcc")
				var bs []StateBatch
				for i := range rapid.IntRange(0, 3).Draw(rt, "batches") {
					bs = append(bs, drawBatch(rt, fmt.Sprint(i)))
				}
				var err error
				st := run("write", f.s.PartitionFor(k), func() { err = f.s.Write(ctx, k, se, le, start, dcc, bs) },
					Write{Key: k, StateEpoch: se, LeaderEpoch: le, StartOffset: start, DeliveryCompleteCount: dcc, Batches: bs, NowMs: now()})
				sameErr("write", err, st.Reply.(Done).Err)
			},
			"read": func(rt *rapid.T) {
				k := rapid.SampledFrom(diffKeys).Draw(rt, "key")
				le := int32(rapid.IntRange(-2, 4).Draw(rt, "leaderEpoch"))
				var (
					s   State
					err error
				)
				st := run("read", f.s.PartitionFor(k), func() { s, err = f.s.Read(ctx, k, le) }, Read{Key: k, LeaderEpoch: le, NowMs: now()})
				r := st.Reply.(ReadReply)
				sameErr("read", err, r.Err)
				if !reflect.DeepEqual(s, r.State) {
					rt.Fatalf("read: core %+v, store %+v", r.State, s)
				}
			},
			"summary": func(rt *rapid.T) {
				k := rapid.SampledFrom(diffKeys).Draw(rt, "key")
				le := int32(rapid.IntRange(-2, 4).Draw(rt, "leaderEpoch"))
				var (
					s   Summary
					err error
				)
				st := run("summary", f.s.PartitionFor(k), func() { s, err = f.s.ReadSummary(ctx, k, le) }, ReadSummary{Key: k, LeaderEpoch: le})
				r := st.Reply.(SummaryReply)
				sameErr("summary", err, r.Err)
				if s != r.Summary {
					rt.Fatalf("summary: core %+v, store %+v", r.Summary, s)
				}
			},
			"delete": func(rt *rapid.T) {
				k := rapid.SampledFrom(diffKeys).Draw(rt, "key")
				var err error
				st := run("delete", f.s.PartitionFor(k), func() { err = f.s.Delete(ctx, k) }, Delete{Key: k})
				sameErr("delete", err, st.Reply.(Done).Err)
			},
			"deleteTopics": func(rt *rapid.T) {
				topic := rapid.SampledFrom([][16]byte{testTopic, {9}}).Draw(rt, "topic")
				deleted := func(id [16]byte) bool { return id == topic }
				before = lengths()
				want, err := f.s.DeleteTopics(ctx, deleted)
				if err != nil {
					rt.Fatal(err)
				}
				var got []Key
				for _, st := range stepAll(DeleteTopics{Deleted: deleted}) {
					got = append(got, st.Reply.(DeleteTopicsReply).Keys...)
				}
				if !slices.Equal(got, want) {
					rt.Fatalf("deleteTopics: core %v, store %v", got, want)
				}
			},
			"marker": func(rt *rapid.T) {
				p := int32(rapid.IntRange(0, modelPartitions-1).Draw(rt, "partition"))
				m := Marker{
					ProducerID: rapid.Int64Range(1, 3).Draw(rt, "pid"), Epoch: int16(rapid.IntRange(0, 3).Draw(rt, "epoch")),
					Commit: rapid.Bool().Draw(rt, "commit"), CoordinatorEpoch: 7,
				}
				var (
					want MarkerResult
					err  error
				)
				viaApply := rapid.Bool().Draw(rt, "viaApplyMarker")
				st := run("marker", p, func() {
					if viaApply {
						want, err = f.s.ApplyMarkerResult(ctx, p, m.ProducerID, m.Epoch, m.Commit, func(context.Context) error {
							f.parts[p].AppendMarker(m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch)
							return nil
						})
					} else {
						f.parts[p].AppendMarker(m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch)
						want.Keys = f.s.CompleteTxn(p, m.ProducerID, m.Epoch, m.Commit)
					}
				}, m)
				if err != nil {
					rt.Fatal(err)
				}
				got := st.Reply.(MarkerReply).Result
				if !viaApply {
					got = MarkerResult{Keys: got.Keys}
				}
				if !reflect.DeepEqual(got, want) {
					rt.Fatalf("marker: core %+v, store %+v", got, want)
				}
				if len(st.Resolved) != len(got.Keys) {
					rt.Fatalf("marker: %d resolutions for %d keys", len(st.Resolved), len(got.Keys))
				}
				for i, r := range st.Resolved {
					if r != (Resolution{Key: got.Keys[i], ProducerID: m.ProducerID, Epoch: m.Epoch, Commit: m.Commit}) {
						rt.Fatalf("marker: resolution %+v", r)
					}
				}
			},
			"tick": func(rt *rapid.T) {
				f.now = f.now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "seconds")) * time.Second)
				before = lengths()
				want, err := f.s.SnapshotCold(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				got := 0
				for _, st := range stepAll(Tick{NowMs: now()}) {
					got += st.Reply.(TickReply).ColdSnapshots
				}
				if got != want {
					rt.Fatalf("tick: core %d cold snapshots, store %d", got, want)
				}
			},
			"restart": func(rt *rapid.T) {
				f.restart()
				for p, l := range cores {
					c := l.replayed()
					sameKeyspace(rt, fmt.Sprint("replay of partition ", p), &c.keyspace, &l.core.keyspace, !markerSinceAppend[p])
					l.core = c
					markerSinceAppend[p] = false
				}
			},
			"": func(rt *rapid.T) {
				for p, l := range cores {
					sp := f.s.parts[int32(p)]
					sameKeyspace(rt, fmt.Sprint("partition ", p), &sp.keyspace, &l.core.keyspace, true)
					off, _ := f.s.LastRedundantOffset(int32(p))
					if got := l.core.LastRedundantOffset(); got != off {
						rt.Fatalf("partition %d: core last redundant offset %d, store %d", p, got, off)
					}
				}
				var stagings []Staging
				pending := map[Key]int64{}
				var keys []Key
				for _, l := range cores {
					stagings = append(stagings, l.core.Stagings()...)
					maps.Copy(pending, l.core.TxPendingByKey())
					keys = append(keys, l.core.Keys()...)
				}
				slices.SortFunc(keys, compareKeys)
				if !slices.Equal(stagings, f.s.Stagings()) || !maps.Equal(pending, f.s.TxPendingByKey()) || !slices.Equal(keys, f.s.Keys()) {
					rt.Fatalf("listings differ: stagings %v / %v, pending %v / %v, keys %v / %v",
						stagings, f.s.Stagings(), pending, f.s.TxPendingByKey(), keys, f.s.Keys())
				}
			},
		})
	})
}

// stored is every batch of m.
func stored(t fataler, m *coordlog.Memory) []coordlog.Stored {
	var out []coordlog.Stored
	if err := m.Replay(func(s coordlog.Stored) error { out = append(out, s); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
