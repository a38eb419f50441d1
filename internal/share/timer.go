package share

import (
	"container/heap"
	"sync"
	"time"
)

// timerHeap orders the live share partitions by their next acquisition-lock deadline
// (SharePartition.NextDeadline): one entry per partition, never one per record, and one
// goroutine (timerLoop) sleeping until the earliest. A SharePartition's deadline may be
// early, never late, and a spurious Tick does nothing, so the heap only has to be
// refreshed after each step on a partition (partition.persist does it).
type timerHeap struct {
	mu    sync.Mutex
	items []*partition
	kick  chan struct{} // the earliest deadline moved earlier
}

func (h *timerHeap) init() { h.kick = make(chan struct{}, 1) }

// heap.Interface over items; the index lives in partition.heapIdx.
type byDeadline []*partition

func (b byDeadline) Len() int           { return len(b) }
func (b byDeadline) Less(i, j int) bool { return b[i].deadlineMs < b[j].deadlineMs }
func (b byDeadline) Swap(i, j int) {
	b[i], b[j] = b[j], b[i]
	b[i].heapIdx, b[j].heapIdx = i, j
}
func (b *byDeadline) Push(x any) {
	p := x.(*partition)
	p.heapIdx = len(*b)
	*b = append(*b, p)
}
func (b *byDeadline) Pop() any {
	old := *b
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*b = old[:len(old)-1]
	p.heapIdx = -1
	return p
}

// schedule (re)places p by its SharePartition's NextDeadline. Called with p.mu held.
func (h *timerHeap) schedule(p *partition) {
	if p.sp == nil {
		return
	}
	d, ok := p.sp.NextDeadline()
	h.mu.Lock()
	defer h.mu.Unlock()
	b := (*byDeadline)(&h.items)
	if !ok {
		if p.heapIdx >= 0 {
			heap.Remove(b, p.heapIdx)
		}
		return
	}
	if p.heapIdx >= 0 {
		if p.deadlineMs == d {
			return
		}
		p.deadlineMs = d
		heap.Fix(b, p.heapIdx)
	} else {
		p.deadlineMs = d
		heap.Push(b, p)
	}
	if h.items[0] == p {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

func (h *timerHeap) remove(p *partition) {
	h.mu.Lock()
	if p.heapIdx >= 0 {
		heap.Remove((*byDeadline)(&h.items), p.heapIdx)
	}
	h.mu.Unlock()
}

// popDue removes and returns the partitions whose deadline is at or before nowMs.
func (h *timerHeap) popDue(nowMs int64) []*partition {
	h.mu.Lock()
	defer h.mu.Unlock()
	var due []*partition
	b := (*byDeadline)(&h.items)
	for len(h.items) > 0 && h.items[0].deadlineMs <= nowMs {
		due = append(due, heap.Pop(b).(*partition))
	}
	return due
}

// next returns the earliest deadline.
func (h *timerHeap) next() (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].deadlineMs, true
}

// Tick expires the acquisition locks due at Now on every share partition (Kafka's
// releaseAcquisitionLockOnTimeout): the records go back to AVAILABLE, or ARCHIVED at the
// delivery limit, long polls are woken, and the changes are persisted; Tick returns once
// they are durable. The in-memory transition stands even if a write fails (kip-932 2.5).
// The timer goroutine calls it; with Config.ManualTick, tests do.
func (m *Manager) Tick() {
	nowMs := m.nowMs()
	var ws []*write
	for _, p := range m.timers.popDue(nowMs) {
		p.mu.Lock()
		if p.dropped || p.sp == nil {
			p.mu.Unlock()
			continue
		}
		ws = append(ws, p.persistAndWake(p.sp.Tick(nowMs)))
		p.mu.Unlock()
	}
	for _, w := range ws {
		_ = w.wait() // logged by the writer; the partition reloads from the store
	}
}

// timerLoop is the one goroutine that drives every lock expiry.
func (m *Manager) timerLoop() {
	defer close(m.done)
	const idle = time.Hour
	for {
		wait := idle
		if d, ok := m.timers.next(); ok {
			wait = time.Duration(d-m.nowMs()) * time.Millisecond
		}
		if wait <= 0 {
			m.Tick()
			continue
		}
		t := m.cfg.NewTimer(wait)
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-m.timers.kick:
			t.Stop()
		case <-t.C():
			m.Tick()
		}
	}
}
