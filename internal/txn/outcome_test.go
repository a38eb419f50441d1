package txn

import "testing"

// TransactionOutcome tells only about each transactional id's latest transaction: open
// while it runs, decided (with the epoch its markers carried) once it completed under
// transaction version 2, and nothing it cannot be sure of: an earlier transaction of
// the producer, an unknown producer id, a restarted coordinator answers the same.
func TestTransactionOutcome(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch, _ := e.init("x", 60000)
	want := func(what string, ep int16, w Outcome) {
		t.Helper()
		if got := e.c.TransactionOutcome(pid, ep); got != w {
			t.Fatalf("%s: outcome of %d/%d %+v, want %+v", what, pid, ep, got, w)
		}
	}
	want("no transaction yet", epoch, Outcome{})
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != 0 {
		t.Fatalf("add: %d", c)
	}
	want("ongoing", epoch, Outcome{Open: true})
	if c, _, ep := e.end(5, "x", pid, epoch, true); c != 0 || ep != epoch+1 {
		t.Fatalf("commit: %d %d", c, ep)
	}
	committed := Outcome{Decided: true, Commit: true, MarkerEpoch: epoch + 1}
	want("committed", epoch, committed)
	want("an epoch it did not run at", epoch+1, Outcome{})
	e.restart()
	want("committed, after a restart", epoch, committed)
	if got := e.c.TransactionOutcome(pid+1, epoch); got != (Outcome{}) {
		t.Fatalf("unknown producer: %+v", got)
	}

	// The next transaction runs at the bumped epoch; the committed one is no longer the
	// latest, so the coordinator cannot tell about it any more.
	epoch++
	if c := e.c.VerifyOrAdd(ctx, "x", pid, epoch, "t", 0, true); c != 0 {
		t.Fatalf("add: %d", c)
	}
	want("the next transaction, ongoing", epoch, Outcome{Open: true})
	want("the committed one, once the next runs", epoch-1, Outcome{})
	if c, _, _ := e.end(5, "x", pid, epoch, false); c != 0 {
		t.Fatalf("abort: %d", c)
	}
	want("aborted", epoch, Outcome{Decided: true, MarkerEpoch: epoch + 1})
}
