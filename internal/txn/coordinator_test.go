package txn

import (
	"slices"
	"testing"
)

func TestCommitWritesMarkersThenComplete(t *testing.T) {
	e := newEnv(t, 4)
	pid, epoch, code := e.init("a", 60000)
	if code != 0 || epoch != 0 {
		t.Fatalf("init: %d %d %d", pid, epoch, code)
	}
	if c := e.add1("a", pid, epoch, tp("t", 0), tp("t", 1), tp("u", 0)); c != 0 {
		t.Fatalf("add: %d", c)
	}
	if got := e.state("a"); got != Ongoing {
		t.Fatalf("state %v", got)
	}
	if c, _, _ := e.end(3, "a", pid, epoch, true); c != 0 {
		t.Fatalf("end: %d", c)
	}
	if got := e.state("a"); got != CompleteCommit {
		t.Fatalf("state %v", got)
	}
	ms := e.b.markers()
	if len(ms) != 3 {
		t.Fatalf("markers %+v", ms)
	}
	for _, m := range ms {
		if !m.Commit || m.PID != pid || m.Epoch != epoch || !m.OK {
			t.Fatalf("marker %+v", m)
		}
	}
	var states []State
	for _, m := range e.logged("a") {
		states = append(states, m.State)
	}
	if want := []State{Empty, Ongoing, PrepareCommit, CompleteCommit}; !slices.Equal(states, want) {
		t.Fatalf("log %v, want %v", states, want)
	}
}
