package sharepartition

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// The transition test drives a SharePartition with random operations, valid and not,
// and watches every offset's state from the outside (Describe) before and after each
// one: every change it sees must be a transition the table allows (CanTransition), or
// the one revert (CanRevert) when the operation was the undo of a failed staging; an
// offset the start offset passes must have become terminal. No operation may have a
// state change refused (TakeRefusals): callers check first, so a refusal is a bug.
// Unlike TestModel it predicts no outcome; it checks only that nothing breaks the table.

// observed is the state of every offset of the window as Describe shows it, with the
// window's bounds. Offsets of the window no range covers (acquirable gaps after a
// restore) are AVAILABLE, as they are in the log.
type observed struct {
	spso, next int64
	states     map[int64]State
}

func observe(sp *SharePartition) observed {
	ob := observed{spso: sp.StartOffset(), next: sp.nextOffset, states: map[int64]State{}}
	for o := ob.spso; o < ob.next; o++ {
		ob.states[o] = Available
	}
	for _, r := range sp.Describe().Records {
		for o := r.FirstOffset; o <= r.LastOffset; o++ {
			ob.states[o] = r.State
		}
	}
	return ob
}

// stateAt is the state of offset o: AVAILABLE past the window (not read yet).
func (ob observed) stateAt(o int64) State {
	if s, ok := ob.states[o]; ok {
		return s
	}
	return Available
}

// checkTransitions fails unless every change from before to after is allowed.
func checkTransitions(t *rapid.T, op string, before, after observed, revert bool) {
	for o := before.spso; o < max(before.next, after.next); o++ {
		from := before.stateAt(o)
		if o < after.spso { // passed by the start offset: it must be terminal now
			if !from.Terminal() && !CanTransition(from, Archived) && !CanTransition(from, Acknowledged) {
				t.Fatalf("%s: offset %d passed by the start offset from %v", op, o, from)
			}
			continue
		}
		to := after.stateAt(o)
		if from == to {
			continue
		}
		if !CanTransition(from, to) && !(revert && CanRevert(from, to)) {
			t.Fatalf("%s: offset %d changed %v → %v, which the transition table does not allow", op, o, from, to)
		}
		transitionStats[fmt.Sprintf("%v→%v", from, to)]++
	}
}

var transitionStats = map[string]int{}

type transitionTest struct {
	sp      *SharePartition
	cfg     Config
	log     *fakeLog
	now     int64
	epochs  map[int64]int16
	members []string
	// lastStage is the last successful staging, which unstage undoes as a refused
	// write would.
	lastStage *struct {
		pid   int64
		epoch int16
		bs    []AckBatch
	}
}

// randomBatches draws acknowledgement batches around the window, valid or not.
func (tt *transitionTest) randomBatches(t *rapid.T, types []AckType) []AckBatch {
	lo, hi := tt.sp.StartOffset()-2, tt.sp.nextOffset+2
	var bs []AckBatch
	prev := lo
	for range rapid.IntRange(1, 3).Draw(t, "batches") {
		if prev > hi {
			break
		}
		first := rapid.Int64Range(prev, hi).Draw(t, "first")
		last := rapid.Int64Range(first, min(first+8, hi)).Draw(t, "last")
		bs = append(bs, drawAckBatch(t, first, last, types))
		prev = last + 1
	}
	return bs
}

// step runs op and checks the changes it made.
func (tt *transitionTest) step(t *rapid.T, name string, revert bool, op func()) {
	before := observe(tt.sp)
	op()
	checkTransitions(t, name, before, observe(tt.sp), revert)
	if n, err := tt.sp.TakeRefusals(); n > 0 {
		t.Fatalf("%s: %d state changes refused, last: %v", name, n, err)
	}
}

func (tt *transitionTest) member(t *rapid.T) string {
	return rapid.SampledFrom(tt.members).Draw(t, "member")
}

func TestTransitionsFollowTheTable(t *testing.T) {
	defer packSmallBatches()()
	setRapidDefaults()
	defer func() { t.Logf("transitions seen: %v", transitionStats) }()
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{RecordLockDurationMs: 1000, DeliveryCountLimit: rapid.Int16Range(2, 4).Draw(t, "limit"),
			MaxInFlightRecords: rapid.Int64Range(5, 60).Draw(t, "maxInFlight"), RenewEnabled: true}
		sp, err := New(cfg, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		tt := &transitionTest{sp: sp, cfg: cfg, log: genLog(t), epochs: map[int64]int16{1: 0, 2: 0}, members: []string{"a", "b"}}
		readCommitted := rapid.Bool().Draw(t, "readCommitted")
		t.Repeat(map[string]func(*rapid.T){
			"acquire": func(t *rapid.T) {
				fo := tt.sp.NextFetchOffset()
				read := tt.log.read(fo, rapid.IntRange(0, 6).Draw(t, "readBatches"))
				if len(read) > 1 && rapid.IntRange(0, 4).Draw(t, "compacted") == 0 {
					read = read[1:] // compaction removed the first batch: the read skips it
				}
				req := AcquireRequest{Member: tt.member(t), FetchOffset: fo, Batches: read,
					MaxRecords: rapid.IntRange(0, 20).Draw(t, "maxRecords"), BatchSize: rapid.IntRange(1, 10).Draw(t, "batchSize"),
					Mode: AcquireMode(rapid.IntRange(0, 1).Draw(t, "mode"))}
				if readCommitted {
					req.Aborted = tt.log.aborted
				}
				tt.step(t, "acquire", false, func() { tt.sp.Acquire(tt.now, req) })
			},
			"acknowledge": func(t *rapid.T) {
				bs := tt.randomBatches(t, []AckType{AckGap, AckAccept, AckRelease, AckReject, AckRenew})
				member := tt.member(t)
				tt.step(t, "acknowledge", false, func() { _, _ = tt.sp.Acknowledge(tt.now, member, bs) })
			},
			"tick": func(t *rapid.T) {
				tt.now += rapid.Int64Range(0, 1500).Draw(t, "dt")
				tt.step(t, "tick", false, func() { tt.sp.Tick(tt.now) })
			},
			"leave": func(t *rapid.T) {
				member := tt.member(t)
				tt.step(t, "leave", false, func() { tt.sp.ReleaseMember(member) })
			},
			"stage": func(t *rapid.T) {
				pid := rapid.Int64Range(1, 2).Draw(t, "pid")
				bs := tt.randomBatches(t, []AckType{AckGap, AckAccept, AckReject})
				member := tt.member(t)
				tt.step(t, "stage", false, func() {
					if _, err := tt.sp.StageTxnAcks(member, pid, tt.epochs[pid], bs); err == nil {
						tt.lastStage = &struct {
							pid   int64
							epoch int16
							bs    []AckBatch
						}{pid, tt.epochs[pid], bs}
					}
				})
			},
			"unstage": func(t *rapid.T) {
				if tt.lastStage == nil {
					return
				}
				ls := tt.lastStage
				tt.lastStage = nil
				tt.step(t, "unstage", true, func() { tt.sp.UnstageTxnAcks(tt.now, ls.pid, ls.epoch, ls.bs) })
			},
			"marker": func(t *rapid.T) {
				pid := rapid.Int64Range(1, 2).Draw(t, "pid")
				commit := rapid.Bool().Draw(t, "commit")
				tt.epochs[pid]++ // transaction version 2: the marker carries the bumped epoch
				tt.lastStage = nil
				tt.step(t, "marker", false, func() { tt.sp.CompleteTxn(pid, tt.epochs[pid], commit) })
			},
			"logStart": func(t *rapid.T) {
				lso := min(tt.sp.StartOffset()+rapid.Int64Range(0, 5).Draw(t, "lsoDelta"), tt.log.end)
				tt.step(t, "logStart", false, func() { tt.sp.AdvanceLogStart(lso) })
			},
			"lowerLimit": func(t *rapid.T) {
				// A lowered delivery limit: AVAILABLE records already at it are archived by
				// the next acquisition instead of being delivered.
				cfg := tt.cfg
				cfg.DeliveryCountLimit = rapid.Int16Range(2, tt.cfg.DeliveryCountLimit).Draw(t, "newLimit")
				if err := tt.sp.SetConfig(cfg); err != nil {
					t.Fatal(err)
				}
			},
			"restore": func(t *rapid.T) {
				// A restart: ACQUIRED comes back AVAILABLE (a reload, not a transition).
				sp, err := Restore(tt.sp.Config(), tt.sp.Snapshot())
				if err != nil {
					t.Fatal(err)
				}
				tt.sp, tt.lastStage = sp, nil
			},
		})
	})
}

// setState refuses what the table does not allow and leaves the record exactly as it
// was; the refusal is reported once by TakeRefusals.
func TestSetStateRefusesAndKeepsTheRecord(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 9, 10, 100)
	mustAck(t, sp, 0, "m", ack(0, 4, AckAccept))
	b := sp.find(0)
	r := b.at(0)
	kept := *r
	for _, to := range []State{Available, Acquired, Archived, TxPending} {
		if sp.setState(r, 0, 5, to, false) {
			t.Fatalf("ACKNOWLEDGED → %v allowed", to)
		}
		if sp.setState(r, 0, 5, to, true) {
			t.Fatalf("ACKNOWLEDGED → %v allowed as a revert", to)
		}
	}
	if *r != kept {
		t.Fatalf("refused changes altered the record: %+v, was %+v", *r, kept)
	}
	n, err := sp.TakeRefusals()
	var te *TransitionError
	if n != 8 || !errors.As(err, &te) || te.From != Acknowledged || te.To != TxPending || te.First != 0 || te.Last != 4 {
		t.Fatalf("refusals %d, last %v", n, err)
	}
	if n, err := sp.TakeRefusals(); n != 0 || err != nil {
		t.Fatalf("refusals reported twice: %d %v", n, err)
	}
	// An allowed transition goes through, owner cleared, and reports nothing.
	if r := sp.find(5).at(5); !sp.setState(r, 5, 5, Available, false) || r.state != Available || r.member != "" {
		t.Fatalf("ACQUIRED → AVAILABLE: %+v", r)
	}
	if n, _ := sp.TakeRefusals(); n != 0 {
		t.Fatalf("an allowed transition reported %d refusals", n)
	}
}
