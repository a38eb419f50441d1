package txn

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transaction version 2 end to end: produce adds partitions implicitly, EndTxn v5 bumps
// the epoch at every commit and returns it, markers carry the bumped epoch.
func TestTV2Lifecycle(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch, _ := e.init("x", 60000)
	for round := 0; round < 3; round++ {
		if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != 0 {
			t.Fatalf("round %d add: %d", round, c)
		}
		if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != 0 {
			t.Fatalf("round %d re-add: %d", round, c)
		}
		m, _, _ := e.meta("x")
		if m.ClientTV != 2 {
			t.Fatalf("client tv %d", m.ClientTV)
		}
		c, p, ep := e.end(5, "x", pid, epoch, true)
		if c != 0 || p != pid || ep != epoch+1 {
			t.Fatalf("round %d end: %d %d/%d", round, c, p, ep)
		}
		ms := e.b.markers()
		if last := ms[len(ms)-1]; last.Epoch != epoch+1 || !last.Commit {
			t.Fatalf("marker %+v", last)
		}
		// The old epoch is fenced from producing.
		if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != codeInvalidProducerEpoch {
			t.Fatalf("old epoch produce: %d", c)
		}
		epoch = ep
	}
	recs := e.logged("x")
	if last := recs[len(recs)-1]; last.ClientTV != 2 || last.PrevProducerID != pid || last.ProducerEpoch != epoch {
		t.Fatalf("last record %+v", last)
	}
}

// With TV2 an exhausted epoch rotates the producer id at the commit: markers go out at
// epoch 32767, the client continues with the new id at epoch 0, and a retry with the old
// id and epoch 32766 succeeds (retryOnOverflow).
func TestTV2EpochOverflowRotatesProducerID(t *testing.T) {
	e := newEnv(t, 1)
	pid, _, _ := e.init("x", 60000)
	e.c.core.entries["x"].meta.ProducerEpoch = maxEpoch - 1
	epoch := maxEpoch - 1
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != 0 {
		t.Fatal(c)
	}
	c, p2, e2 := e.end(5, "x", pid, epoch, true)
	if c != 0 || p2 == pid || e2 != 0 {
		t.Fatalf("end: %d %d/%d", c, p2, e2)
	}
	ms := e.b.markers()
	if last := ms[len(ms)-1]; last.PID != pid || last.Epoch != maxEpoch {
		t.Fatalf("marker %+v", last)
	}
	m, _, _ := e.meta("x")
	if m.ProducerID != p2 || m.ProducerEpoch != 0 || m.PrevProducerID != pid || m.State != CompleteCommit {
		t.Fatalf("meta %+v", m)
	}
	c, p3, e3 := e.end(5, "x", pid, epoch, true)
	if c != 0 || p3 != p2 || e3 != 0 {
		t.Fatalf("retry: %d %d/%d", c, p3, e3)
	}
	// A restart keeps the rotation.
	e.restart()
	m, _, _ = e.meta("x")
	if m.ProducerID != p2 || m.ProducerEpoch != 0 {
		t.Fatalf("after restart %+v", m)
	}
}

// Fencing an exhausted epoch (timeout) rotates the producer id too.
func TestTimeoutAtExhaustedEpoch(t *testing.T) {
	e := newEnv(t, 1)
	pid, _, _ := e.init("x", 1000)
	e.c.core.entries["x"].meta.ProducerEpoch = maxEpoch - 1
	e.add1("x", pid, maxEpoch-1, tp0)
	e.tick(11 * time.Second)
	m, _, _ := e.meta("x")
	if m.State != CompleteAbort || m.ProducerID == pid || m.ProducerEpoch != 0 {
		t.Fatalf("%+v", m)
	}
	ms := e.b.markers()
	if last := ms[len(ms)-1]; last.PID != pid || last.Epoch != maxEpoch || last.Commit {
		t.Fatalf("marker %+v", last)
	}
}

// VerifyOrAdd(add=true) right after EndTxn waits for the markers instead of failing the
// produce, and gives up with CONCURRENT_TRANSACTIONS after the retry window.
func TestVerifyOrAddWaitsForCompletion(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch, _ := e.init("x", 60000)
	e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true)
	e.b.setFail(func(TopicPartition) error { return errDisk })
	_, _, epoch = e.end(5, "x", pid, epoch, true)

	expired := make(chan time.Time)
	close(expired)
	e.c.cfg.After = func(time.Duration) <-chan time.Time { return expired }
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != codeConcurrentTxns {
		t.Fatalf("gave up with %d", c)
	}
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, false); c != codeNotEnoughReplicas {
		t.Fatalf("verify-only while completing: %d", c)
	}

	e.c.cfg.After = func(time.Duration) <-chan time.Time { return nil }
	done := make(chan int16)
	go func() { done <- e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 1, true) }()
	e.b.setFail(nil)
	e.tick(time.Second)
	if c := <-done; c != 0 {
		t.Fatalf("after completion: %d", c)
	}
	if s := e.state("x"); s != Ongoing {
		t.Fatalf("state %v", s)
	}
}

func TestVerifyOnlyErrors(t *testing.T) {
	e := newEnv(t, 1)
	if c := e.c.VerifyOrAdd(ctx, "nope", 1, 0, "t", 0, false); c != codeInvalidPIDMapping {
		t.Fatal(c)
	}
	pid, epoch, _ := e.init("x", 60000)
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, false); c != codeTransactionAbortable {
		t.Fatal(c)
	}
	if LegacyProduceError(codeTransactionAbortable, 10) != codeInvalidTxnState || LegacyProduceError(codeTransactionAbortable, 11) != codeTransactionAbortable {
		t.Fatal("legacy mapping")
	}
	e.add1("x", pid, epoch, tp0)
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, false); c != 0 {
		t.Fatal(c)
	}
	if c := e.c.VerifyOrAdd(ctx, "", pid, epoch, "t", 0, false); c != codeInvalidRequest {
		t.Fatal(c)
	}
}

func TestNotCoordinator(t *testing.T) {
	e := newEnv(t, 2)
	e.parts = e.parts[:1] // own only partition 0
	e.restart()
	var other string
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		if e.c.PartitionFor(id) == 1 {
			other = id
			break
		}
	}
	if _, _, c := e.init(other, 1000); c != codeNotCoordinator {
		t.Fatal(c)
	}
	e.c.Close()
	if _, _, c := e.init("x", 1000); c != codeNotCoordinator {
		t.Fatal(c)
	}
}

func TestListTransactions(t *testing.T) {
	e := newEnv(t, 3)
	setupID := func(id string, ongoing bool) int64 {
		p, ep, _ := e.init(id, 60000)
		if ongoing {
			e.add1(id, p, ep, tp0)
		}
		return p
	}
	pa := setupID("app-1", true)
	e.clock.Advance(10 * time.Second)
	setupID("app-2", true)
	setupID("other", false)
	list := func(v int16, mod func(*kmsg.ListTransactionsRequest)) []string {
		req := kmsg.NewPtrListTransactionsRequest()
		mod(req)
		r := e.c.ListTransactions(ctx, v, req)
		var ids []string
		for _, s := range r.TransactionStates {
			ids = append(ids, s.TransactionalID)
		}
		return ids
	}
	if got := list(0, func(*kmsg.ListTransactionsRequest) {}); len(got) != 3 {
		t.Fatal(got)
	}
	if got := list(0, func(r *kmsg.ListTransactionsRequest) { r.StateFilters = []string{"Ongoing"} }); len(got) != 2 {
		t.Fatal(got)
	}
	if got := list(0, func(r *kmsg.ListTransactionsRequest) { r.ProducerIDFilters = []int64{pa} }); len(got) != 1 || got[0] != "app-1" {
		t.Fatal(got)
	}
	// Open longer than 5s: app-1 (10s); app-2 is new; "other" has start -1 and passes, as in Kafka.
	if got := list(1, func(r *kmsg.ListTransactionsRequest) { r.DurationFilterMillis = 5000 }); len(got) != 2 || got[0] != "app-1" || got[1] != "other" {
		t.Fatal(got)
	}
	pat := "app-.*"
	if got := list(2, func(r *kmsg.ListTransactionsRequest) { r.TransactionalIDPattern = &pat }); len(got) != 2 {
		t.Fatal(got)
	}
	bad := "app-("
	req := kmsg.NewPtrListTransactionsRequest()
	req.TransactionalIDPattern = &bad
	if r := e.c.ListTransactions(ctx, 2, req); r.ErrorCode != codeInvalidRegularExpression {
		t.Fatal(r.ErrorCode)
	}
	req = kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Bogus"}
	if r := e.c.ListTransactions(ctx, 0, req); len(r.UnknownStateFilters) != 1 {
		t.Fatal(r.UnknownStateFilters)
	}
}
