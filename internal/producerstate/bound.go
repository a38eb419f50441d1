package producerstate

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// Producer state is bounded (Kafka 4.4 bounds it only by producer.id.expiration.ms; a
// client that opens producers faster than they expire grows it without limit). Entries
// are listed by last activity (a data batch or a marker, as the broker saw it, not the
// client's timestamps). A new producer while the partition holds Config.MaxProducers
// entries, or while the shared Budget is full, evicts the least recently active entry
// without an open transaction: what expiration would forget first. An evicted producer
// that comes back is a new producer (any sequence accepted), exactly as after its
// expiration; a producer active since the evicted one is never the one evicted.

// evictScanLimit bounds how many entries with open transactions an eviction steps over
// before it gives up and lets the partition exceed its cap by one: entries with open
// transactions cannot be forgotten, and their number is bounded by the transaction
// coordinator (one per transactional id), not here.
const evictScanLimit = 16

// Budget caps the producer entries of many States together: a broker's partitions. Safe
// for concurrent use; each State changes it under its own owner's lock.
type Budget struct {
	maxEntries int64
	used       atomic.Int64
}

// NewBudget returns a budget of maxEntries producer entries (<= 0: no cap, only counted).
func NewBudget(maxEntries int64) *Budget { return &Budget{maxEntries: maxEntries} }

// Used returns how many entries the States sharing b hold.
func (b *Budget) Used() int64 { return b.used.Load() }

func (b *Budget) full() bool { return b != nil && b.maxEntries > 0 && b.used.Load() >= b.maxEntries }

func (b *Budget) add(n int64) {
	if b != nil {
		b.used.Add(n)
	}
}

// insert makes a new entry for pid, the most recently active one.
func (s *State) insert(pid int64) *Entry {
	e := &Entry{ProducerID: pid, Epoch: NoEpoch, CoordinatorEpoch: -1, LastTimestampMs: -1,
		CurrentTxnFirstOffset: NoOffset}
	s.producers[pid] = e
	s.link(e)
	s.cfg.Budget.add(1)
	return e
}

// remove forgets e.
func (s *State) remove(e *Entry) {
	delete(s.producers, e.ProducerID)
	s.unlink(e)
	s.cfg.Budget.add(-1)
}

// makeRoom evicts one entry when the partition or the budget is full.
func (s *State) makeRoom() {
	full := s.cfg.MaxProducers > 0 && len(s.producers) >= s.cfg.MaxProducers
	if !full && !s.cfg.Budget.full() {
		return
	}
	e := s.oldest
	for range evictScanLimit {
		if e == nil {
			return
		}
		if e.CurrentTxnFirstOffset == NoOffset {
			s.remove(e)
			s.evictions++
			return
		}
		e = e.newer
	}
}

// Evictions returns how many producers were forgotten to make room for new ones.
func (s *State) Evictions() int64 { return s.evictions }

// Release forgets every producer and gives their entries back to the budget: the
// partition is deleted.
func (s *State) Release() {
	s.cfg.Budget.add(-int64(len(s.producers)))
	clear(s.producers)
	s.oldest, s.newest = nil, nil
}

// Config returns the State's configuration (to restore a snapshot with the same one).
func (s *State) Config() Config { return s.cfg }

func (s *State) link(e *Entry) {
	e.older, e.newer = s.newest, nil
	if s.newest != nil {
		s.newest.newer = e
	} else {
		s.oldest = e
	}
	s.newest = e
}

func (s *State) unlink(e *Entry) {
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		s.oldest = e.newer
	}
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		s.newest = e.older
	}
	e.older, e.newer = nil, nil
}

// touch makes e the most recently active entry.
func (s *State) touch(e *Entry) {
	if s.newest != e {
		s.unlink(e)
		s.link(e)
	}
}

// orderByLastTimestamp relinks the entries by last timestamp (then id), the best
// recency a snapshot records.
func (s *State) orderByLastTimestamp() {
	es := make([]*Entry, 0, len(s.producers))
	for _, e := range s.producers {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *Entry) int {
		if a.LastTimestampMs != b.LastTimestampMs {
			return cmp.Compare(a.LastTimestampMs, b.LastTimestampMs)
		}
		return cmp.Compare(a.ProducerID, b.ProducerID)
	})
	s.oldest, s.newest = nil, nil
	for _, e := range es {
		s.link(e)
	}
}
