package txn

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/testclock"
)

// model watches the coordinator from its two seams (the log and the broker) and holds
// what the invariants need: the durable, undecided-marker Prepare record of each id.
type model struct {
	b        *fakeBroker
	mu       sync.Mutex
	prepared map[string]prepared // guarded by mu
	// writers are the producers that added partitions to each id's open transaction
	// (KIP-939 keeps one transaction across producers): its decision must carry their
	// producer id and an epoch at least theirs, or markers would not resolve what they
	// wrote (the KIP-1289 epoch rule). Guarded by mu.
	writers map[string][]handle
	// failure is the first broken invariant seen by a seam; seams run on the
	// coordinator's goroutines, so the test goroutine reports it. Guarded by fmu.
	fmu     sync.Mutex
	failure string
}

type prepared struct {
	meta      Metadata
	markerIdx int // markers written before this Prepare record was durable
}

func (m *model) fail(format string, args ...any) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	if m.failure == "" {
		m.failure = fmt.Sprintf(format, args...)
	}
}

func (m *model) check(t tester) {
	t.Helper()
	m.fmu.Lock()
	defer m.fmu.Unlock()
	if m.failure != "" {
		t.Fatal(m.failure)
	}
}

// checkPart is a partition that checks, at every append of a Complete* record, that every
// partition of the Prepare* record got its marker (same producer, epoch and outcome) after
// that record was durable.
type checkPart struct {
	*coordlog.Memory
	m *model
}

func (p *checkPart) Append(ctx context.Context, b coordlog.Batch) (int64, error) {
	for _, r := range b.Records {
		id, meta, _, _ := decodeRecord(r.Key, r.Value)
		if meta != nil && (meta.State == CompleteCommit || meta.State == CompleteAbort) {
			p.m.checkComplete(id, meta)
		}
	}
	n := len(p.m.b.markers())
	off, err := p.Memory.Append(ctx, b)
	if err != nil {
		return off, err
	}
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	for _, r := range b.Records {
		id, meta, _, _ := decodeRecord(r.Key, r.Value)
		switch {
		case meta == nil:
		case meta.State == PrepareCommit || meta.State == PrepareAbort:
			p.m.prepared[id] = prepared{meta: *meta, markerIdx: n}
			for _, w := range p.m.writers[id] {
				if w.pid != meta.ProducerID || w.epoch > meta.ProducerEpoch {
					p.m.fail("%s: decision %d/%d cannot resolve what %v wrote", id, meta.ProducerID, meta.ProducerEpoch, w)
				}
			}
			delete(p.m.writers, id)
		case meta.State == CompleteCommit || meta.State == CompleteAbort:
			delete(p.m.prepared, id)
		}
	}
	return off, err
}

func (m *model) checkComplete(id string, meta *Metadata) {
	m.mu.Lock()
	p, ok := m.prepared[id]
	m.mu.Unlock()
	if !ok {
		m.fail("%s: Complete without a durable Prepare", id)
		return
	}
	commit := p.meta.State == PrepareCommit
	if (meta.State == CompleteCommit) != commit {
		m.fail("%s: decided %v, completing %v", id, p.meta.State, meta.State)
	}
	writes := m.b.markers()[p.markerIdx:]
	for _, tp := range p.meta.Partitions {
		found := false
		for _, w := range writes {
			if w.OK && w.TP == tp && w.PID == p.meta.ProducerID && w.Epoch == p.meta.ProducerEpoch && w.Commit == commit {
				found = true
			}
		}
		if !found {
			m.fail("%s: %v completed without a marker on %v", id, meta.State, tp)
		}
	}
}

// onMarker checks a marker against the durable decisions: some id must have a Prepare
// record of that producer, epoch and outcome whose markers are outstanding.
func (m *model) onMarker(pid int64, epoch int16, commit bool, _ []TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.prepared {
		if p.meta.ProducerID == pid && p.meta.ProducerEpoch == epoch && (p.meta.State == PrepareCommit) == commit {
			return
		}
	}
	m.fail("marker pid %d epoch %d commit %v without a durable decision", pid, epoch, commit)
}

type handle struct {
	pid   int64
	epoch int16
}

func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &model{prepared: make(map[string]prepared), writers: make(map[string][]handle)}
		// The env is built by hand: the broker's marker hook and the checking
		// partitions must be in place before the coordinator starts.
		b := newFakeBroker()
		m.b = b
		b.onWrite = m.onMarker
		e := &env{t: rt, clock: testclock.New(), b: b,
			wrap: func(mem *coordlog.Memory) coordlog.Partition { return &checkPart{mem, m} }}
		for i := int32(0); i < 2; i++ {
			e.parts = append(e.parts, coordlog.NewMemory(i))
		}
		// VerifyOrAdd gives up at once instead of waiting for a completion that broken
		// markers may hold back.
		gaveUp := make(chan time.Time)
		close(gaveUp)
		e.cfg = Config{NumPartitions: 2, MaxTimeoutMs: 900000, AbortTimedOutIntervalMs: 10000, TwoPhaseCommitEnable: true,
			Now: e.clock.Now, ManualTicks: true, After: func(time.Duration) <-chan time.Time { return gaveUp }}
		e.start()
		defer func() { e.c.Close() }()

		ids := []string{"a", "b", "c"}
		tps := []TopicPartition{tp("t", 0), tp("t", 1), tp("u", 0)}
		handles := map[string][]handle{}
		fenced := map[string]map[handle]bool{}
		pick := func(rt *rapid.T, id string) (handle, bool) {
			hs := handles[id]
			if len(hs) == 0 {
				return handle{}, false
			}
			i := len(hs) - 1
			if rapid.Bool().Draw(rt, "stale") {
				i = rapid.IntRange(0, len(hs)-1).Draw(rt, "handle")
			}
			return hs[i], true
		}
		prepares := func(id string) int {
			n := 0
			for _, r := range e.logged(id) {
				if r != nil && (r.State == PrepareCommit || r.State == PrepareAbort) {
					n++
				}
			}
			return n
		}
		newHandle := func(rt *rapid.T, id string, h handle) {
			hs := handles[id]
			if len(hs) > 0 {
				last := hs[len(hs)-1]
				if h.pid == last.pid && h.epoch < last.epoch {
					rt.Fatalf("%s: epoch went backwards %v -> %v", id, last, h)
				}
				if h == last {
					return
				}
			}
			handles[id] = append(hs, h)
		}

		fenceAll := func(id string) {
			if fenced[id] == nil {
				fenced[id] = map[handle]bool{}
			}
			for _, h := range handles[id] {
				fenced[id][h] = true
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"init": func(rt *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				// Half the inits are KIP-939 two-phase participants (no timeout).
				h, _, code := e.init6(id, 10000, rapid.Bool().Draw(rt, "2pc"), false, -1, -1)
				if code == 0 {
					fenceAll(id)
					newHandle(rt, id, h)
				}
			},
			"keep": func(rt *rapid.T) {
				// KIP-939 recovery: InitProducerId with KeepPreparedTxn. Sometimes at an
				// exhausted epoch, to rotate the producer id.
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				if m, pending, ok := e.meta(id); ok && pending == noState && m.State == Ongoing && !m.Kept &&
					!epochExhausted(m.ProducerEpoch) && rapid.IntRange(0, 4).Draw(rt, "exhaust") == 0 {
					// Jump the epoch to the last one a client may hold, durably, so the
					// keep has to rotate the producer id.
					m.ProducerEpoch = maxEpoch - 1
					e.c.mu.Lock()
					t, err := e.c.core.entries[id].prepare(m)
					e.c.mu.Unlock()
					if err != nil {
						rt.Fatal(err)
					}
					if e.c.persist(ctx, t, false) == 0 {
						fenceAll(id)
						handles[id] = append(handles[id], handle{m.ProducerID, m.ProducerEpoch})
					}
				}
				before, _, existed := e.meta(id)
				h, ongoing, code := e.init6(id, 10000, rapid.Bool().Draw(rt, "2pc"), true, -1, -1)
				if code != 0 {
					return
				}
				fenceAll(id)
				newHandle(rt, id, h)
				after, _, _ := e.meta(id)
				switch {
				case existed && before.State == Ongoing:
					want := handle{before.ProducerID, before.ProducerEpoch}
					if before.Kept {
						want = handle{before.KeptProducerID, before.KeptProducerEpoch}
					}
					if ongoing != want || after.State != Ongoing || !slices.Equal(after.Partitions, before.Partitions) {
						rt.Fatalf("%s: keep of %+v gave ongoing %v, state %+v", id, before, ongoing, after)
					}
				case ongoing != (handle{-1, -1}):
					rt.Fatalf("%s: keep in %v reported ongoing %v", id, before.State, ongoing)
				}
			},
			"add": func(rt *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				h, ok := pick(rt, id)
				if !ok {
					return
				}
				p := rapid.SampledFrom(tps).Draw(rt, "tp")
				var code int16
				if rapid.Bool().Draw(rt, "tv2") {
					code = e.c.VerifyOrAdd(ctx, id, h.pid, h.epoch, p.Topic, p.Partition, true)
					e.idle()
				} else {
					code = e.add1(id, h.pid, h.epoch, p)
				}
				if code == 0 && fenced[id][h] {
					rt.Fatalf("%s: fenced producer %v added a partition", id, h)
				}
				if code == 0 {
					m.mu.Lock()
					m.writers[id] = append(m.writers[id], h)
					m.mu.Unlock()
				}
			},
			"end": func(rt *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				h, ok := pick(rt, id)
				if !ok {
					return
				}
				commit := rapid.Bool().Draw(rt, "commit")
				version := rapid.SampledFrom([]int16{3, 5}).Draw(rt, "version")
				before := prepares(id)
				code, pid, epoch := e.end(version, id, h.pid, h.epoch, commit)
				if fenced[id][h] && prepares(id) != before {
					rt.Fatalf("%s: fenced producer %v decided a transaction (commit %v)", id, h, commit)
				}
				if code == 0 && version == 5 && !fenced[id][h] {
					newHandle(rt, id, handle{pid, epoch})
				}
			},
			"breakMarkers": func(rt *rapid.T) {
				bad := rapid.SampledFrom(tps).Draw(rt, "bad")
				e.b.setFail(func(p TopicPartition) error {
					if p == bad {
						return errDisk
					}
					return nil
				})
			},
			"healMarkers": func(rt *rapid.T) { e.b.setFail(nil) },
			"failAppend": func(rt *rapid.T) {
				e.parts[rapid.IntRange(0, 1).Draw(rt, "part")].FailAppend = errDisk
			},
			"tick": func(rt *rapid.T) {
				var twoPC []string
				for _, id := range ids {
					if m, pending, ok := e.meta(id); ok && pending == noState && m.State == Ongoing && m.IsTwoPhase() {
						twoPC = append(twoPC, id)
					}
				}
				e.tick(time.Duration(rapid.IntRange(0, 15000).Draw(rt, "ms")) * time.Millisecond)
				for _, id := range twoPC {
					if s := e.state(id); s != Ongoing {
						rt.Fatalf("%s: two-phase transaction %v after a tick", id, s)
					}
				}
			},
			"restart": func(rt *rapid.T) { e.restart() },
			"": func(rt *rapid.T) {
				m.check(rt)
				// The log: a decision is followed only by its completion, and a
				// producer id's epoch never decreases.
				for _, id := range ids {
					var prev *Metadata
					for _, r := range e.logged(id) {
						if prev != nil && r != nil {
							if (prev.State == PrepareCommit && r.State != CompleteCommit) || (prev.State == PrepareAbort && r.State != CompleteAbort) {
								rt.Fatalf("%s: %v followed by %v", id, prev.State, r.State)
							}
							if r.ProducerID == prev.ProducerID && r.ProducerEpoch < prev.ProducerEpoch {
								rt.Fatalf("%s: epoch %d after %d", id, r.ProducerEpoch, prev.ProducerEpoch)
							}
						}
						prev = r
					}
				}
			},
		})

		m.check(rt)
		// Liveness: once markers and the log work again, every decision completes.
		e.b.setFail(nil)
		for _, p := range e.parts {
			p.FailAppend = nil
		}
		e.tick(time.Second)
		e.tick(time.Second)
		for _, id := range ids {
			if m, pending, ok := e.meta(id); ok && (pending != noState || m.State == PrepareCommit || m.State == PrepareAbort) {
				rt.Fatalf("%s stuck in %v (pending %v)", id, m.State, pending)
			}
		}
	})
}
