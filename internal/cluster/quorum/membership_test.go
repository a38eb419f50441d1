package quorum

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/cluster/raftstore"
	"github.com/exactq/exactq/internal/testclock"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// join adds to p a loop with raft id len(p.loops)+1 over an empty store started with
// Join: no member until the leader adds it.
func (p *polled) join(clock *testclock.Clock) *Loop {
	p.t.Helper()
	s, err := raftstore.Open(p.t.TempDir(), raftstore.Options{Now: clock.Now})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = s.Close() })
	l, err := New(Options{ID: uint64(len(p.loops) + 1), Store: s, Join: true, Machine: listMachine{}, Now: clock.Now, RaftLogger: quietRaft,
		Send: func(ms []*pb.Message) { p.net = append(p.net, ms...) }})
	if err != nil {
		p.t.Fatal(err)
	}
	p.loops = append(p.loops, l)
	return l
}

// change proposes cc at l and settles; it returns the answer.
func (p *polled) change(l *Loop, cc *pb.ConfChangeV2) Proposed {
	p.t.Helper()
	reply, err := l.ProposeConfChangeAsync(cc)
	if err != nil {
		p.t.Fatal(err)
	}
	p.settle()
	_ = l.Tick() // followers learn the commit with the next heartbeat
	p.settle()
	select {
	case a := <-reply:
		return a
	default:
		p.t.Fatal("the conf change is not answered after the loops settled")
		return Proposed{}
	}
}

func ids(rs []Replica) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.RaftID)
	}
	return out
}

// A node started with Join on an empty store is nobody's member until the leader adds
// it as a learner; it then gets the whole log, is described as an observer with its
// Match and timestamps, is promoted to voter, and a voter (the leader itself) is
// removed; every node ends with the same voters and the members' contexts. One change at
// a time: a second one proposed before the first is applied is refused.
func TestGrowAndShrinkTheVoterSet(t *testing.T) {
	clock := testclock.New()
	p := newPolled(t, 3, func(o *Options) { o.Now = clock.Now })
	joiner := p.join(clock)
	lead := p.elect()
	for _, d := range []string{"a", "b", "c"} {
		if _, err := lead.ProposeAsync([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	p.settle()
	if st := joiner.DescribeNow(); len(st.Voters)+len(st.Learners) != 0 || st.Applied != 0 {
		t.Fatalf("the joiner before it is added: %+v", st)
	}

	m := Member{RaftID: 4, NodeID: 3, DirectoryID: [16]byte{4}, Endpoint: "127.0.0.1:9004"}
	clock.Advance(time.Second)
	if a := p.change(lead, AddLearner(m)); a.Err != nil || a.Index == 0 {
		t.Fatalf("adding the learner: %+v", a)
	}
	_ = lead.Tick()
	p.settle()
	if got := state(joiner); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("the learner applied %q, want the whole log", got)
	}
	st := lead.DescribeNow()
	if !st.Leading || !slices.Equal(ids(st.Voters), []uint64{1, 2, 3}) || !slices.Equal(ids(st.Learners), []uint64{4}) {
		t.Fatalf("the leader describes voters %v learners %v", ids(st.Voters), ids(st.Learners))
	}
	obs := st.Learners[0]
	if obs.Match != st.LastIndex || !obs.LastHeard.Equal(clock.Now()) || !obs.LastCaughtUp.Equal(clock.Now()) {
		t.Fatalf("the observer: %+v, leader's last index %d, now %v", obs, st.LastIndex, clock.Now())
	}
	for _, l := range p.loops {
		if got := l.Members()[4]; got != m {
			t.Fatalf("loop %d knows member 4 as %+v", l.opts.ID, got)
		}
	}

	// Two changes queued together: the first is taken, the second refused.
	first, err := lead.ProposeConfChangeAsync(Promote(4))
	if err != nil {
		t.Fatal(err)
	}
	second, err := lead.ProposeConfChangeAsync(Remove(2))
	if err != nil {
		t.Fatal(err)
	}
	p.settle()
	_ = lead.Tick()
	p.settle()
	if a := <-second; !errors.Is(a.Err, ErrChangePending) {
		t.Fatalf("a second change while one is pending: %+v, want ErrChangePending", a)
	}
	if a := <-first; a.Err != nil {
		t.Fatalf("promoting the learner: %+v", a)
	}
	if st := joiner.DescribeNow(); !slices.Equal(ids(st.Voters), []uint64{1, 2, 3, 4}) || len(st.Learners) != 0 {
		t.Fatalf("the joiner after its promotion sees voters %v learners %v", ids(st.Voters), ids(st.Learners))
	}

	// Refusals decided on the applied configuration.
	for _, tc := range []struct {
		cc   *pb.ConfChangeV2
		want error
	}{
		{AddLearner(Member{RaftID: 4}), ErrAlreadyMember},
		{Promote(9), ErrNotMember},
		{Remove(9), ErrNotMember},
		{&pb.ConfChangeV2{}, ErrBadChange},
	} {
		if a := p.change(lead, tc.cc); !errors.Is(a.Err, tc.want) {
			t.Fatalf("%v: %+v, want %v", tc.cc, a, tc.want)
		}
	}

	// The leader removes itself: it steps down once the removal is applied, the others
	// elect a leader among them that commits.
	old := lead
	if a := p.change(lead, Remove(old.opts.ID)); a.Err != nil {
		t.Fatalf("removing the leader: %+v", a)
	}
	for range 100 {
		if l := p.leader(); l != nil && l != old {
			break
		}
		for _, l := range p.loops {
			_ = l.Tick()
		}
		p.settle()
	}
	lead = p.leader()
	if lead == nil || lead == old {
		t.Fatal("no new leader after the old one removed itself")
	}
	reply, err := lead.ProposeAsync([]byte("d"))
	if err != nil {
		t.Fatal(err)
	}
	p.settle()
	if a := <-reply; a.Err != nil {
		t.Fatalf("a proposal after the removal: %+v", a)
	}
	want := slices.DeleteFunc([]uint64{1, 2, 3, 4}, func(id uint64) bool { return id == old.opts.ID })
	for _, l := range p.loops {
		if l == old {
			continue
		}
		voters, _, err := LogVoters(l.opts.Store.Storage())
		if err != nil || !slices.Equal(voters, want) {
			t.Fatalf("loop %d's log voters %v (%v), want %v", l.opts.ID, voters, err, want)
		}
	}
}

// The last voter is never removed; a learner may be.
func TestCheckChange(t *testing.T) {
	one := &pb.ConfState{Voters: []uint64{1}, Learners: []uint64{2}}
	if err := checkChange(one, Remove(1)); !errors.Is(err, ErrLastVoter) {
		t.Fatalf("removing the last voter: %v", err)
	}
	if err := checkChange(one, Remove(2)); err != nil {
		t.Fatalf("removing a learner: %v", err)
	}
	if err := checkChange(one, AddLearner(Member{RaftID: 3})); err != nil {
		t.Fatalf("adding a learner: %v", err)
	}
	joint := &pb.ConfChangeV2{Transition: pb.ConfChangeTransition_ConfChangeTransitionJointExplicit.Enum(), Changes: Promote(2).GetChanges()}
	if err := checkChange(one, joint); !errors.Is(err, ErrBadChange) {
		t.Fatalf("a joint change: %v", err)
	}
}

// A checkpoint carries the members after the Machine's data; one without members is the
// Machine's data alone (as every checkpoint before members existed), and reads back.
func TestCheckpointKeepsMembers(t *testing.T) {
	l := &Loop{opts: Options{Machine: listMachine{}}}
	plain, err := l.encodeCheckpoint([]string{"a"})
	if err != nil || string(plain) != `["a"]` {
		t.Fatalf("without members: %q, %v", plain, err)
	}
	m := Member{RaftID: 4, NodeID: 3, DirectoryID: [16]byte{9}, Endpoint: "h:1"}
	l.setMember(m)
	data, err := l.encodeCheckpoint([]string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{plain, data} {
		st, members, err := l.decodeCheckpoint(b)
		if err != nil || !slices.Equal(st.([]string), []string{"a"}) {
			t.Fatalf("decoding %q: %v, %v", b, st, err)
		}
		if len(b) == len(data) && members[4] != m {
			t.Fatalf("members read back: %v", members)
		}
	}
	if _, _, err := l.decodeCheckpoint(data[:len(checkpointMagic)+1]); err == nil {
		t.Fatal("a cut members header decoded")
	}
}

// A lone voter with a learner still campaigns at start: learners do not vote, so it is
// leader after its first Ready, without an election timeout.
func TestLoneVoterWithLearnerCampaignsAtStart(t *testing.T) {
	clock := testclock.New()
	p := newPolled(t, 1, func(o *Options) { o.Now = clock.Now })
	p.join(clock)
	lead := p.elect()
	if a := p.change(lead, AddLearner(Member{RaftID: 2, NodeID: 1})); a.Err != nil {
		t.Fatalf("adding the learner: %+v", a)
	}
	again, err := New(lead.opts) // a restart over the same store
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Poll(); err != nil {
		t.Fatal(err)
	}
	if st := again.DescribeNow(); !slices.Equal(ids(st.Learners), []uint64{2}) {
		t.Fatalf("the restarted loop's learners %v", ids(st.Learners))
	}
	if st := again.RaftStatus(); st.RaftState != raft.StateLeader {
		t.Fatalf("a lone voter with a learner after its first Poll: %v, want leader", st.RaftState)
	}
}
