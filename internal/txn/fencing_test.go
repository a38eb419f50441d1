package txn

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A second InitProducerId while a transaction is open aborts it with a bumped epoch
// (PrepareEpochFence → PrepareAbort, markers at the bumped epoch), answers
// CONCURRENT_TRANSACTIONS, and the retry gets one more bump. The old producer is fenced.
func TestInitFencesOngoingTransaction(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing)
	e.b.setFail(func(TopicPartition) error { return errDisk })
	if _, _, c := e.init("x", 60000); c != codeConcurrentTxns {
		t.Fatalf("fencing init: %d", c)
	}
	if s := e.state("x"); s != PrepareAbort {
		t.Fatalf("state %v", s)
	}
	if _, _, c := e.init("x", 60000); c != codeConcurrentTxns {
		t.Fatalf("init while completing: %d", c)
	}
	e.b.setFail(nil)
	e.tick(time.Second)
	if s := e.state("x"); s != CompleteAbort {
		t.Fatalf("state %v", s)
	}
	for _, m := range e.b.markers() {
		if m.Commit || m.PID != pid || m.Epoch != epoch+1 {
			t.Fatalf("fencing marker %+v", m)
		}
	}
	p2, e2, c := e.init("x", 60000)
	if c != 0 || p2 != pid || e2 != epoch+2 {
		t.Fatalf("retry: %d/%d %d", p2, e2, c)
	}
	// The zombie can neither add nor commit.
	if c := e.add1("x", pid, epoch, tp0); c != codeProducerFenced {
		t.Fatalf("zombie add: %d", c)
	}
	if c, _, _ := e.end(3, "x", pid, epoch, true); c != codeProducerFenced {
		t.Fatalf("zombie commit: %d", c)
	}
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, false); c != codeInvalidProducerEpoch {
		t.Fatalf("zombie produce: %d", c)
	}
}

// An Ongoing transaction older than its timeout is aborted by the coordinator with an
// epoch bump, so the zombie is fenced; read_committed readers then move on.
func TestTimeoutAbortsAndFences(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing)
	e.tick(30 * time.Second) // not yet timed out (timeout 60s)
	if s := e.state("x"); s != Ongoing {
		t.Fatalf("state %v", s)
	}
	e.tick(31 * time.Second)
	if s := e.state("x"); s != CompleteAbort {
		t.Fatalf("state %v", s)
	}
	ms := e.b.markers()
	if len(ms) != 2 {
		t.Fatalf("markers %+v", ms)
	}
	for _, m := range ms {
		if m.Commit || m.Epoch != epoch+1 || m.PID != pid {
			t.Fatalf("marker %+v", m)
		}
	}
	if c, _, _ := e.end(3, "x", pid, epoch, true); c != codeProducerFenced {
		t.Fatalf("zombie commit: %d", c)
	}
	if c, _, _ := e.end(5, "x", pid, epoch, true); c != codeInvalidTxnState {
		// TV2: epoch one below CompleteAbort is a retry; a commit retry of an abort is
		// INVALID_TXN_STATE (the zombie still cannot commit).
		t.Fatalf("zombie TV2 commit: %d", c)
	}
	// The scan runs every AbortTimedOutIntervalMs only.
	e2 := newEnv(t, 1)
	setup(t, e2, Ongoing)
	e2.tick(61 * time.Second)
	e2.tick(time.Second)
	if s := e2.state("x"); s != CompleteAbort {
		t.Fatalf("state %v", s)
	}
}

func TestTimeoutUsesTransactionStart(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing)
	e.clock.Advance(50 * time.Second)
	e.add1("x", pid, epoch, tp("u", 0)) // does not extend the transaction
	e.tick(11 * time.Second)
	if s := e.state("x"); s != CompleteAbort {
		t.Fatalf("state %v", s)
	}
}

// A crash between PrepareCommit and CompleteCommit: the restarted coordinator re-sends
// exactly the Prepare record's markers, then writes CompleteCommit.
func TestRestartMidPrepareResendsMarkers(t *testing.T) {
	for _, commit := range []bool{true, false} {
		e := newEnv(t, 2)
		pid, epoch, _ := e.init("x", 60000)
		e.add1("x", pid, epoch, tp0, tp1, tp("u", 4))
		// Only t-1 gets its marker before the crash.
		e.b.setFail(func(p TopicPartition) error {
			if p == tp1 {
				return nil
			}
			return errDisk
		})
		if c, _, _ := e.end(3, "x", pid, epoch, commit); c != 0 {
			t.Fatal(c)
		}
		e.c.Close()
		e.b.setFail(nil)
		before := len(e.b.markers())
		e.start()
		want := CompleteAbort
		if commit {
			want = CompleteCommit
		}
		if s := e.state("x"); s != want {
			t.Fatalf("after restart: %v", s)
		}
		var got []TopicPartition
		for _, m := range e.b.markers()[before:] {
			if m.Commit != commit || m.PID != pid || m.Epoch != epoch || !m.OK {
				t.Fatalf("marker %+v", m)
			}
			got = append(got, m.TP)
		}
		slices.SortFunc(got, compareTP)
		if !slices.Equal(got, []TopicPartition{tp0, tp1, tp("u", 4)}) {
			t.Fatalf("re-sent %v", got)
		}
		log := e.logged("x")
		if last := log[len(log)-1]; last.State != want || len(last.Partitions) != 0 {
			t.Fatalf("last record %+v", last)
		}
		e.restart()
		if s := e.state("x"); s != want {
			t.Fatalf("second restart: %v", s)
		}
	}
}

func TestMarkerFailureRetriedWithBackoff(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing)
	e.b.setFail(func(p TopicPartition) error {
		if p == tp1 {
			return errDisk
		}
		return nil
	})
	e.end(3, "x", pid, epoch, true)
	if s := e.state("x"); s != PrepareCommit {
		t.Fatalf("state %v", s)
	}
	d := e.c.DescribeTransactions(ctx, 0, &kmsg.DescribeTransactionsRequest{TransactionalIDs: []string{"x"}})
	st := d.TransactionStates[0]
	if st.State != "PrepareCommit" || len(st.Topics) != 1 || !slices.Equal(st.Topics[0].Partitions, []int32{1}) {
		t.Fatalf("describe %+v", st)
	}
	n := len(e.b.markers())
	e.tick(50 * time.Millisecond) // before the backoff: no attempt
	if len(e.b.markers()) != n {
		t.Fatal("retried before backoff")
	}
	e.tick(60 * time.Millisecond)
	if len(e.b.markers()) != n+1 {
		t.Fatalf("retry attempts %d", len(e.b.markers())-n)
	}
	e.b.setFail(nil)
	e.tick(100 * time.Millisecond)
	if s := e.state("x"); s != CompleteCommit {
		t.Fatalf("state %v", s)
	}
	ms := e.b.markers()
	if last := ms[len(ms)-1]; last.TP != tp1 || !last.OK {
		t.Fatalf("only the failed partition is retried: %+v", last)
	}
}

func TestCompleteAppendFailureRetried(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing)
	e.b.setFail(func(TopicPartition) error { return errDisk })
	e.end(3, "x", pid, epoch, false)
	e.b.setFail(nil)
	e.parts[0].FailAppend = errDisk
	e.tick(time.Second)
	if s := e.state("x"); s != PrepareAbort {
		t.Fatalf("state %v", s)
	}
	e.tick(time.Second)
	if s := e.state("x"); s != CompleteAbort {
		t.Fatalf("state %v", s)
	}
}

func TestAppendFailureLeavesStateUnchanged(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing)
	e.parts[0].FailAppend = errDisk
	if c, _, _ := e.end(3, "x", pid, epoch, true); c != codeCoordinatorNotAvailable {
		t.Fatalf("end: %d", c)
	}
	if s := e.state("x"); s != Ongoing {
		t.Fatalf("state %v", s)
	}
	if len(e.b.markers()) != 0 {
		t.Fatal("markers before the decision was durable")
	}
	if c, _, _ := e.end(3, "x", pid, epoch, true); c != 0 {
		t.Fatalf("retry: %d", c)
	}
}

func TestExpiration(t *testing.T) {
	e := newEnv(t, 1)
	e.cfg.TransactionalIDExpirationMs = 3600_000
	e.cfg.RemoveExpiredIntervalMs = 600_000
	e.restart()
	setup(t, e, CompleteCommit)
	setup(t, e, Empty) // re-init: Empty again
	setupOngoing := func(id string) {
		p, ep, _ := e.init(id, 900000)
		e.add1(id, p, ep, tp0)
	}
	setupOngoing("busy")
	e.tick(30 * time.Minute)
	e.tick(31 * time.Minute) // 61 minutes idle, scan due
	if _, _, ok := e.meta("x"); ok {
		t.Fatal("x not expired")
	}
	if _, _, ok := e.meta("busy"); !ok {
		t.Fatal("an ongoing id expired")
	}
	log := e.logged("x")
	if log[len(log)-1] != nil {
		t.Fatal("no tombstone")
	}
	e.restart()
	if _, _, ok := e.meta("x"); ok {
		t.Fatal("x back after restart")
	}
	d := e.c.DescribeTransactions(ctx, 0, &kmsg.DescribeTransactionsRequest{TransactionalIDs: []string{"x"}})
	if d.TransactionStates[0].ErrorCode != codeTransactionalIDNotFound {
		t.Fatal(d.TransactionStates[0].ErrorCode)
	}
	// The id can start over.
	if _, ep, c := e.init("x", 1000); c != 0 || ep != 0 {
		t.Fatal(ep, c)
	}
}
