package compress

import (
	"errors"
	"sync"
	"time"
)

// ErrBudgetTimeout: a decompression waited its whole bounded wait for budget.
var ErrBudgetTimeout = errors.New("compress: no decompression budget within the wait")

// Budget bounds the memory of the decompressions running at once across the broker
// (Reader's MemoryBound plus the caller's window each): over it, a caller waits, first
// come first served, for at most its wait, instead of the heap growing with the number of
// producers sending compressed batches. A reservation larger than the whole budget is cut
// to the budget, so it runs alone rather than never.
type Budget struct {
	capacityBytes int64
	maxWait       time.Duration

	mu        sync.Mutex
	usedBytes int64           // guarded by mu
	peakBytes int64           // guarded by mu
	waiters   []*budgetWaiter // guarded by mu; FIFO, one per blocked caller
}

type budgetWaiter struct {
	bytes int64
	ready chan struct{} // closed when the reservation is granted
}

// NewBudget returns a Budget of capacityBytes whose callers wait at most maxWait.
func NewBudget(capacityBytes int64, maxWait time.Duration) *Budget {
	return &Budget{capacityBytes: max(capacityBytes, 1), maxWait: maxWait}
}

// Acquire reserves n bytes, waiting at most the budget's maxWait. It returns the bytes
// actually reserved (n cut to the capacity), to be given to Release, or ErrBudgetTimeout.
func (b *Budget) Acquire(n int64) (int64, error) {
	n = min(max(n, 0), b.capacityBytes)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.usedBytes+n <= b.capacityBytes {
		b.grantLocked(n)
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{bytes: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	timer := time.NewTimer(b.maxWait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return n, nil
	case <-timer.C:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted just as the wait ran out
		return n, nil
	default:
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.wakeLocked() // the next waiter may fit now that this one left the head
	return 0, ErrBudgetTimeout
}

// Release gives back n bytes returned by Acquire.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	b.usedBytes -= n
	b.wakeLocked()
	b.mu.Unlock()
}

// PeakBytes is the most that was ever reserved at once.
func (b *Budget) PeakBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peakBytes
}

// CapacityBytes is the budget's size.
func (b *Budget) CapacityBytes() int64 { return b.capacityBytes }

func (b *Budget) grantLocked(n int64) {
	b.usedBytes += n
	b.peakBytes = max(b.peakBytes, b.usedBytes)
}

// wakeLocked grants waiters in arrival order while the head fits.
func (b *Budget) wakeLocked() {
	for len(b.waiters) > 0 && b.usedBytes+b.waiters[0].bytes <= b.capacityBytes {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.grantLocked(w.bytes)
		close(w.ready)
	}
}
