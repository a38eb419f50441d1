package quorum

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/cryptotest"

	"github.com/exactq/exactq/internal/cluster/raftstore"
	"github.com/exactq/exactq/internal/testclock"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// polled is three loops driven by Poll from the test goroutine, messages delivered in
// send order: what sim/cluster builds on.
type polled struct {
	t     *testing.T
	loops []*Loop
	net   []*pb.Message
	trace []string
	drop  func(m *pb.Message) bool // a message it matches is lost
}

func newPolled(t *testing.T, n int, tune ...func(*Options)) *polled {
	p := &polled{t: t}
	clock := testclock.New()
	var voters []uint64
	for i := range n {
		voters = append(voters, uint64(i+1))
	}
	for i := range n {
		s, err := raftstore.Open(t.TempDir(), raftstore.Options{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		opts := Options{ID: uint64(i + 1), Store: s, Voters: voters, Machine: listMachine{}, Now: clock.Now, RaftLogger: quietRaft,
			Send: func(ms []*pb.Message) { p.net = append(p.net, ms...) }}
		for _, f := range tune {
			f(&opts)
		}
		l, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		p.loops = append(p.loops, l)
	}
	return p
}

// settle polls every loop and delivers messages until nothing moves.
func (p *polled) settle() {
	p.t.Helper()
	for {
		for _, l := range p.loops {
			if _, err := l.Poll(); err != nil {
				p.t.Fatal(err)
			}
		}
		if len(p.net) == 0 {
			return
		}
		ms := p.net
		p.net = nil
		for _, m := range ms {
			if p.drop != nil && p.drop(m) {
				continue
			}
			p.trace = append(p.trace, fmt.Sprintf("%d->%d %s t%d", m.GetFrom(), m.GetTo(), m.GetType(), m.GetTerm()))
			if err := p.loops[m.GetTo()-1].Step(m); err != nil {
				p.t.Fatal(err)
			}
		}
	}
}

// elect ticks every loop and settles until one leads (at most 100 ticks).
func (p *polled) elect() *Loop {
	p.t.Helper()
	p.settle()
	for range 100 {
		if l := p.leader(); l != nil {
			return l
		}
		for _, l := range p.loops {
			if err := l.Tick(); err != nil {
				p.t.Fatal(err)
			}
		}
		p.settle()
	}
	p.t.Fatal("no leader after 100 ticks")
	return nil
}

func (p *polled) leader() *Loop {
	for _, l := range p.loops {
		if l.RaftStatus().RaftState == raft.StateLeader {
			return l
		}
	}
	return nil
}

// TestPollDrivesLoops: loops driven by Poll on one goroutine elect a leader by ticks,
// answer a ProposeAsync once applied (every node applies it), refuse it on a follower,
// and with crypto/rand fixed by SetGlobalRandom one seed gives one message history.
func TestPollDrivesLoops(t *testing.T) {
	run := func() []string {
		cryptotest.SetGlobalRandom(t, 7)
		p := newPolled(t, 3)
		lead := p.elect()
		follower := p.loops[slices.IndexFunc(p.loops, func(l *Loop) bool { return l != lead })]
		refused, err := follower.ProposeAsync([]byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		p.settle()
		if ans := <-refused; !errors.Is(ans.Err, ErrNotController) {
			t.Fatalf("a follower's proposal: %v, want ErrNotController", ans.Err)
		}
		reply, err := lead.ProposeAsync([]byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		p.settle()
		select {
		case ans := <-reply:
			if ans.Err != nil || ans.Index == 0 {
				t.Fatalf("proposal: %+v", ans)
			}
		default:
			t.Fatal("the proposal is not answered after the loops settled")
		}
		// Followers learn the commit with the next heartbeat.
		_ = lead.Tick()
		p.settle()
		for i, l := range p.loops {
			if got := state(l); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("loop %d applied %q, want [a]", i+1, got)
			}
		}
		return p.trace
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatalf("one seed, two histories:\n%v\n%v", a, b)
	}
}
