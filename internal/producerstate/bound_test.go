package producerstate

import "testing"

func oneBatch(s *State, pid, offset int64) {
	s.Update(Batch{ProducerID: pid, Epoch: 0, BaseSeq: 0, LastSeq: 0, FirstOffset: offset, LastOffset: offset, TimestampMs: 1})
}

func has(s *State, pid int64) bool { _, ok := s.Producer(pid); return ok }

// A new producer beyond MaxProducers evicts the least recently active one; a producer
// active since then keeps its state (and so its duplicate detection).
func TestMaxProducersEvictsLeastRecentlyActive(t *testing.T) {
	s := NewWithConfig(Config{MaxProducers: 3})
	oneBatch(s, 1, 0)
	oneBatch(s, 2, 1)
	oneBatch(s, 3, 2)
	s.Update(Batch{ProducerID: 1, Epoch: 0, BaseSeq: 1, LastSeq: 1, FirstOffset: 3, LastOffset: 3, TimestampMs: 1})
	oneBatch(s, 4, 4) // evicts 2, the least recently active
	if s.NumProducers() != 3 || has(s, 2) || !has(s, 1) || !has(s, 3) || !has(s, 4) {
		t.Fatalf("after eviction: %d producers, 1:%v 2:%v 3:%v 4:%v", s.NumProducers(), has(s, 1), has(s, 2), has(s, 3), has(s, 4))
	}
	if s.Evictions() != 1 {
		t.Fatalf("evictions %d", s.Evictions())
	}
	// Producer 1 still detects its duplicate.
	if r, err := s.Check(1, 0, 1, 1, false); err != nil || !r.Duplicate {
		t.Fatalf("retry of producer 1's batch: %+v %v", r, err)
	}
	// An evicted producer comes back as a new one, like an expired one.
	if _, err := s.Check(2, 0, 7, 7, false); err != nil {
		t.Fatalf("evicted producer returning: %v", err)
	}
	for pid := int64(10); pid < 1000; pid++ {
		oneBatch(s, pid, pid)
	}
	if s.NumProducers() != 3 {
		t.Fatalf("a flood of new producers left %d entries, cap 3", s.NumProducers())
	}
}

// A producer with an open transaction is never evicted: its first offset holds the last
// stable offset, and forgetting it would let read_committed consumers past it.
func TestMaxProducersKeepsOpenTransactions(t *testing.T) {
	s := NewWithConfig(Config{MaxProducers: 2})
	s.Update(Batch{ProducerID: 1, Epoch: 0, BaseSeq: 0, LastSeq: 0, Transactional: true, FirstOffset: 0, LastOffset: 0, TimestampMs: 1})
	for pid := int64(2); pid < 100; pid++ {
		oneBatch(s, pid, pid)
	}
	if !has(s, 1) {
		t.Fatal("producer with an open transaction was evicted")
	}
	if fuo, ok := s.FirstUnstableOffset(); !ok || fuo != 0 {
		t.Fatalf("first unstable offset %d %v", fuo, ok)
	}
	if s.NumProducers() != 2 {
		t.Fatalf("%d producers, cap 2", s.NumProducers())
	}
	// Once every entry has an open transaction, the cap gives way (by the entries the
	// transaction coordinator bounds) rather than forget one.
	s.Update(Batch{ProducerID: 99, Epoch: 0, BaseSeq: 1, LastSeq: 1, Transactional: true, FirstOffset: 200, LastOffset: 200, TimestampMs: 1})
	oneBatch(s, 500, 201)
	if !has(s, 1) || !has(s, 99) || !has(s, 500) {
		t.Fatal("open transactions evicted when over the cap")
	}
}

// A Budget caps the entries of several States together; Release and Restore keep its
// count right.
func TestBudgetSharedByPartitions(t *testing.T) {
	b := NewBudget(10)
	a := NewWithConfig(Config{Budget: b})
	c := NewWithConfig(Config{Budget: b})
	for pid := int64(1); pid <= 8; pid++ {
		oneBatch(a, pid, pid)
	}
	for pid := int64(100); pid < 200; pid++ {
		oneBatch(c, pid, pid)
	}
	if b.Used() != 10 || a.NumProducers() != 8 || c.NumProducers() != 2 {
		t.Fatalf("budget %d, a %d, c %d", b.Used(), a.NumProducers(), c.NumProducers())
	}
	a.Expire(1 + DefaultExpirationMs)
	if b.Used() != 2 || a.NumProducers() != 0 {
		t.Fatalf("after expiry: budget %d, a %d", b.Used(), a.NumProducers())
	}
	snap := c.Snapshot()
	c.Release()
	if b.Used() != 0 {
		t.Fatalf("after release: budget %d", b.Used())
	}
	r, err := Restore(snap, Config{Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	if b.Used() != 2 || r.NumProducers() != 2 {
		t.Fatalf("after restore: budget %d, producers %d", b.Used(), r.NumProducers())
	}
	if _, err := Restore(snap[:len(snap)-1], Config{Budget: b}); err == nil || b.Used() != 2 {
		t.Fatalf("corrupt restore: %v, budget %d", err, b.Used())
	}
}

// Restore orders the restored producers by last timestamp, so the ones idle longest are
// evicted first.
func TestRestoreOrdersByLastTimestamp(t *testing.T) {
	s := NewWithConfig(Config{})
	s.Update(Batch{ProducerID: 1, BaseSeq: 0, LastSeq: 0, FirstOffset: 0, LastOffset: 0, TimestampMs: 30})
	s.Update(Batch{ProducerID: 2, BaseSeq: 0, LastSeq: 0, FirstOffset: 1, LastOffset: 1, TimestampMs: 10})
	s.Update(Batch{ProducerID: 3, BaseSeq: 0, LastSeq: 0, FirstOffset: 2, LastOffset: 2, TimestampMs: 20})
	r, err := Restore(s.Snapshot(), Config{MaxProducers: 3})
	if err != nil {
		t.Fatal(err)
	}
	oneBatch(r, 4, 3)
	if has(r, 2) || !has(r, 1) || !has(r, 3) {
		t.Fatalf("evicted the wrong producer: 1:%v 2:%v 3:%v", has(r, 1), has(r, 2), has(r, 3))
	}
}
