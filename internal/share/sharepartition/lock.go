package sharepartition

import (
	"container/heap"
	"slices"
)

// lockEntry says: batch first may hold ACQUIRED records whose lock ends at
// deadlineMs. Entries are never removed when a lock ends early (ack, release,
// renew); a stale entry costs one look-up when it pops. Every ACQUIRED record
// with deadline d has an entry (d, first of its batch), so the top of the heap
// is never later than the earliest real deadline.
type lockEntry struct {
	deadlineMs int64
	first      int64
}

type lockHeap []lockEntry

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].deadlineMs < h[j].deadlineMs }
func (h lockHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lockHeap) Push(x any)        { *h = append(*h, x.(lockEntry)) }
func (h *lockHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// arm records that batch b holds records locked until deadlineMs.
func (sp *SharePartition) arm(b *batch, deadlineMs int64) {
	heap.Push(&sp.locks, lockEntry{deadlineMs: deadlineMs, first: b.first})
	// The rebuild waits for the step's end (coalesceCarved): it reads every batch, and
	// reading a packed batch writes back the runs a caller may still be changing.
	sp.rebuildDue = sp.rebuildDue || len(sp.locks) > 2*sp.liveLocks+4*len(sp.batches)+64
}

// rebuildLocks drops stale entries: one entry per distinct deadline per batch.
// It runs when the heap has grown to twice what the last rebuild kept (plus
// slack), so its cost is amortized over the arms that grew it, however many
// runs a batch holds.
func (sp *SharePartition) rebuildLocks() {
	sp.locks = sp.locks[:0]
	for _, b := range sp.batches {
		if b.pk != nil {
			var last int64 = -1
			b.each(b.first, b.last, func(_, _ int64, r *record) bool {
				if r.state == Acquired && r.deadlineMs != last {
					sp.locks = append(sp.locks, lockEntry{r.deadlineMs, b.first})
					last = r.deadlineMs
				}
				return true
			})
			continue
		}
		if b.runs == nil {
			if b.rec.state == Acquired {
				sp.locks = append(sp.locks, lockEntry{b.rec.deadlineMs, b.first})
			}
			continue
		}
		var last int64 = -1
		for i := range b.runs {
			if r := &b.runs[i].rec; r.state == Acquired && r.deadlineMs != last {
				sp.locks = append(sp.locks, lockEntry{r.deadlineMs, b.first})
				last = r.deadlineMs
			}
		}
	}
	sp.liveLocks = len(sp.locks)
	heap.Init(&sp.locks)
}

// NextDeadline returns the time at which the broker should call Tick next: never
// later than the earliest acquisition-lock deadline, possibly earlier (a
// spurious Tick does nothing). ok is false when no lock may be pending. A
// timer wheel keyed by partition needs only this value after each step.
func (sp *SharePartition) NextDeadline() (deadlineMs int64, ok bool) {
	for len(sp.locks) > 0 {
		e := sp.locks[0]
		if b := sp.find(e.first); b != nil && b.first == e.first {
			locked := func(r *record) bool { return r.state == Acquired && r.deadlineMs == e.deadlineMs }
			if b.runs != nil || (b.pk != nil && b.anyOwner(locked)) || (b.uniform() && locked(&b.rec)) {
				return e.deadlineMs, true
			}
		}
		heap.Pop(&sp.locks) // stale: the batch is gone or no longer holds this lock
	}
	return 0, false
}

// Tick expires every acquisition lock whose deadline is at or before nowMs
// (Kafka's releaseAcquisitionLockOnTimeout): the records go back to AVAILABLE,
// or to ARCHIVED when their delivery count has reached the limit, their owner
// is cleared, and the change is returned for persistence. The in-memory
// transition stands whatever happens to the write (kip-932.md 2.5).
func (sp *SharePartition) Tick(nowMs int64) Update {
	var c changes
	var firsts []int64 // batches with expired entries; each is scanned once however many entries it had
	for len(sp.locks) > 0 && sp.locks[0].deadlineMs <= nowMs {
		firsts = append(firsts, heap.Pop(&sp.locks).(lockEntry).first)
	}
	slices.Sort(firsts)
	for _, first := range slices.Compact(firsts) {
		b := sp.find(first)
		if b == nil || b.first != first {
			continue
		}
		if b.pk != nil {
			expired := func(r *record) bool { return r.state == Acquired && r.deadlineMs <= nowMs }
			sp.changeMatching(b, expired, func(r *run) {
				if sp.releaseRecord(&r.rec, r.first, r.len()) {
					sp.counters.LockExpired += r.len()
					c.add(r.first, r.last, &r.rec)
				}
			})
			continue
		}
		if b.runs == nil {
			if b.rec.state == Acquired && b.rec.deadlineMs <= nowMs && sp.releaseRecord(&b.rec, b.first, b.len()) {
				sp.counters.LockExpired += b.len()
				c.add(b.first, b.last, &b.rec)
			}
			continue
		}
		for i := range b.runs {
			if r := &b.runs[i]; r.rec.state == Acquired && r.rec.deadlineMs <= nowMs && sp.releaseRecord(&r.rec, r.first, r.len()) {
				sp.counters.LockExpired += r.len()
				c.add(r.first, r.last, &r.rec)
				sp.touch(b) // released runs may now equal their neighbours
			}
		}
	}
	return sp.update(&c)
}

// releaseRecord gives n ACQUIRED records (starting at offset first, sharing r)
// back: AVAILABLE, or ARCHIVED when the delivery count has reached the limit
// or the records are below the SPSO. The delivery count is kept. It reports
// whether the records changed (setState).
func (sp *SharePartition) releaseRecord(r *record, first, n int64) bool {
	if r.count >= sp.cfg.DeliveryCountLimit || first < sp.spso {
		if !sp.setState(r, first, n, Archived, false) {
			return false
		}
		sp.counters.Archived += n
		sp.complete += n
		return true
	}
	return sp.setState(r, first, n, Available, false)
}

// ReleaseMember gives back every record ACQUIRED by member: on share-session
// close (epoch -1), on the close of the connection that owns the session
// (kip-932.md 2.11-2.12). Records go to AVAILABLE, or ARCHIVED at the delivery
// limit; the delivery count is kept (Kafka 4.4, KAFKA-19972: it no longer
// decrements it, so a consumer that crashes on a poison record cannot loop
// forever). TX_PENDING records of the member stay staged: their transaction
// resolves them (kip-1289.md D7).
func (sp *SharePartition) ReleaseMember(member string) Update {
	var c changes
	held := func(r *record) bool { return r.state == Acquired && r.member == member }
	for _, b := range sp.batches {
		if b.pk != nil {
			sp.changeMatching(b, held, func(r *run) {
				if sp.releaseRecord(&r.rec, r.first, r.len()) {
					sp.counters.Released += r.len()
					c.add(r.first, r.last, &r.rec)
				}
			})
			continue
		}
		if b.runs == nil {
			if b.rec.state == Acquired && b.rec.member == member && sp.releaseRecord(&b.rec, b.first, b.len()) {
				sp.counters.Released += b.len()
				c.add(b.first, b.last, &b.rec)
			}
			continue
		}
		for i := range b.runs {
			if r := &b.runs[i]; r.rec.state == Acquired && r.rec.member == member && sp.releaseRecord(&r.rec, r.first, r.len()) {
				sp.counters.Released += r.len()
				c.add(r.first, r.last, &r.rec)
				sp.touch(b)
			}
		}
	}
	return sp.update(&c)
}
