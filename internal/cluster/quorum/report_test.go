package quorum

import (
	"fmt"
	"slices"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// progress is the leader's view of peer's replication state (Poll's goroutine only).
func progress(lead *Loop, peer uint64) tracker.StateType {
	return lead.rn.Status().Progress[peer].State
}

// TestReportSnapshot: a MsgSnap the network loses leaves the follower behind for good
// (the leader sends a follower in StateSnapshot nothing else) until the transport
// reports the failure; then the leader sends the snapshot again and the follower
// catches up.
func TestReportSnapshot(t *testing.T) {
	p := newPolled(t, 3, func(o *Options) { o.SnapshotBytes, o.CatchUpEntries = 20, 1 })
	lead := p.elect()
	lag := p.loops[slices.IndexFunc(p.loops, func(l *Loop) bool { return l != lead })]
	lagID := lag.opts.ID
	p.drop = func(m *pb.Message) bool { return m.GetTo() == lagID || m.GetFrom() == lagID }
	var want []string
	for i := range 20 {
		d := fmt.Sprintf("entry %d", i)
		want = append(want, d)
		if _, err := lead.ProposeAsync([]byte(d)); err != nil {
			t.Fatal(err)
		}
		p.settle()
	}
	snaps := 0
	p.drop = func(m *pb.Message) bool {
		if m.GetType() == pb.MessageType_MsgSnap {
			snaps++
			return true
		}
		return false
	}
	tickLeader := func(n int) {
		for range n {
			if err := lead.Tick(); err != nil {
				t.Fatal(err)
			}
			p.settle()
		}
	}
	tickLeader(30)
	if snaps != 1 {
		t.Fatalf("%d snapshots sent to the lagging follower, want 1 (then nothing until it is reported)", snaps)
	}
	if st := progress(lead, lagID); st != tracker.StateSnapshot {
		t.Fatalf("the leader's progress of the lagging follower: %v, want StateSnapshot", st)
	}
	if lag.Current().Index >= lead.Current().Index {
		t.Fatal("the follower caught up without the snapshot")
	}

	if err := lead.ReportSnapshot(lagID, raft.SnapshotFailure); err != nil {
		t.Fatal(err)
	}
	p.drop = nil
	tickLeader(3)
	if got := state(lag); !slices.Equal(got, want) || lag.Current().Index != lead.Current().Index {
		t.Fatalf("after the failure report the follower has %q at %d, leader at %d", got, lag.Current().Index, lead.Current().Index)
	}
	if st := progress(lead, lagID); st != tracker.StateReplicate {
		t.Fatalf("the caught-up follower's progress: %v, want StateReplicate", st)
	}
}

// TestReportUnreachable: a follower reported unreachable drops from optimistic
// replication to probing, and is back to replicating once it answers again.
func TestReportUnreachable(t *testing.T) {
	p := newPolled(t, 3)
	lead := p.elect()
	if _, err := lead.ProposeAsync([]byte("a")); err != nil {
		t.Fatal(err)
	}
	p.settle()
	peer := p.loops[slices.IndexFunc(p.loops, func(l *Loop) bool { return l != lead })].opts.ID
	if st := progress(lead, peer); st != tracker.StateReplicate {
		t.Fatalf("progress %v before the report, want StateReplicate", st)
	}
	if err := lead.ReportUnreachable(peer); err != nil {
		t.Fatal(err)
	}
	p.settle()
	if st := progress(lead, peer); st != tracker.StateProbe {
		t.Fatalf("progress %v after the report, want StateProbe", st)
	}
	if err := lead.Tick(); err != nil { // a heartbeat; its answer resumes replication
		t.Fatal(err)
	}
	p.settle()
	if st := progress(lead, peer); st != tracker.StateReplicate {
		t.Fatalf("progress %v after a heartbeat round, want StateReplicate", st)
	}
}
