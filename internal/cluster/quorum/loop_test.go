package quorum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/raftstore"
	"github.com/exactq/exactq/internal/testclock"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// listMachine is the test's state machine: the applied entries' data, in order (an
// immutable slice: Apply copies). It stands in for the metadata image until it lands.
type listMachine struct{}

func (listMachine) Empty() any { return []string(nil) }
func (listMachine) Apply(st any, index uint64, data []byte) (any, any, error) {
	return append(slices.Clone(st.([]string)), string(data)), string(data), nil
}
func (listMachine) Encode(st any) ([]byte, error) { return json.Marshal(st) }
func (listMachine) Decode(b []byte) (any, error) {
	var s []string
	err := json.Unmarshal(b, &s)
	return s, err
}

var quietRaft = &raft.DefaultLogger{Logger: stdlog.New(io.Discard, "", 0)}

// cluster is n loops in one process on real stores, with in-memory message delivery
// that a test can filter.
type cluster struct {
	t      *testing.T
	dirs   []string
	clock  *testclock.Clock
	mu     sync.Mutex
	drop   func(m *pb.Message) bool
	loops  []*Loop
	stores []*raftstore.Store
	stops  []func()
	tune   func(*Options)
}

func newCluster(t *testing.T, n int, tune func(*Options)) *cluster {
	c := &cluster{t: t, clock: testclock.New(), loops: make([]*Loop, n), stores: make([]*raftstore.Store, n), stops: make([]func(), n), tune: tune}
	for i := 0; i < n; i++ {
		c.dirs = append(c.dirs, t.TempDir())
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range n {
			c.stop(i)
		}
	})
	return c
}

func (c *cluster) setDrop(f func(m *pb.Message) bool) {
	c.mu.Lock()
	c.drop = f
	c.mu.Unlock()
}

func (c *cluster) send(ms []*pb.Message) {
	c.mu.Lock()
	drop := c.drop
	loops := slices.Clone(c.loops)
	c.mu.Unlock()
	for _, m := range ms {
		if drop != nil && drop(m) {
			continue
		}
		if to := loops[m.GetTo()-1]; to != nil {
			_ = to.Step(m) // a full queue loses the message, as a network would; raft resends
		}
	}
}

func (c *cluster) start(i int) {
	c.t.Helper()
	s, err := raftstore.Open(c.dirs[i], raftstore.Options{SegmentBytes: 2000, CatchUpEntries: 3, Now: c.clock.Now})
	if err != nil {
		c.t.Fatal(err)
	}
	var voters []uint64
	for j := range c.loops {
		voters = append(voters, uint64(len(c.loops)-j)) // unsorted on purpose
	}
	opts := Options{ID: uint64(i + 1), Store: s, Voters: voters, Machine: listMachine{}, Send: c.send,
		Now: c.clock.Now, RaftLogger: quietRaft}
	if c.tune != nil {
		c.tune(&opts)
	}
	l, err := New(opts)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- l.Run(ctx) }()
	c.mu.Lock()
	c.loops[i], c.stores[i] = l, s
	c.mu.Unlock()
	c.stops[i] = func() {
		cancel()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			c.t.Errorf("loop %d: Run: %v", i+1, err)
		}
		if err := s.Close(); err != nil {
			c.t.Error(err)
		}
	}
}

func (c *cluster) stop(i int) {
	if c.stops[i] == nil {
		return
	}
	c.stops[i]()
	c.stops[i] = nil
	c.mu.Lock()
	c.loops[i] = nil
	c.mu.Unlock()
}

func (c *cluster) tickAll(only ...int) {
	for i, l := range c.loops {
		if l != nil && (len(only) == 0 || slices.Contains(only, i)) {
			_ = l.Tick()
		}
	}
}

// leader ticks the given loops (all when none) until one leads; it returns its index.
func (c *cluster) leader(only ...int) int {
	c.t.Helper()
	lead := -1
	err := await.Until(20*time.Second, time.Millisecond, func() error {
		c.tickAll(only...)
		for i, l := range c.loops {
			if l == nil {
				continue
			}
			st, err := l.Status(context.Background())
			if err != nil {
				return err
			}
			if st.RaftState == raft.StateLeader {
				lead = i
				return nil
			}
		}
		return errors.New("no leader")
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return lead
}

// propose proposes on loop i until it serves (a new leader first applies its empty entry).
func (c *cluster) propose(i int, data string) {
	c.t.Helper()
	err := await.Until(20*time.Second, time.Millisecond, func() error {
		c.tickAll()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.loops[i].Propose(ctx, []byte(data))
		if errors.Is(err, ErrNotController) {
			return err
		}
		return await.Stop(err)
	})
	if err != nil {
		c.t.Fatalf("propose %q on %d: %v", data, i+1, err)
	}
}

func state(l *Loop) []string { return l.Current().State.([]string) }

// TestOneVoter: a lone voter leads after its first Ready, every proposal is applied when
// Propose returns, checkpoints are written as the cadence says, and after a restart from
// the files the state is the same and the node leads again.
func TestOneVoter(t *testing.T) {
	c := newCluster(t, 1, func(o *Options) { o.SnapshotBytes = 40 })
	l := c.loops[0]
	if err := await.Until(5*time.Second, time.Millisecond, func() error {
		if _, ok := l.Serving(); !ok {
			return errors.New("a lone voter does not serve")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first, sub, cancel := l.Subscribe(100)
	defer cancel()
	var want []string
	for i := range 30 {
		d := fmt.Sprintf("entry %d", i)
		want = append(want, d)
		// No ticks: a lone voter campaigned at start and serves without an election.
		idx, err := l.Propose(context.Background(), []byte(d))
		if err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
		if cur := l.Current().Index; idx != cur {
			t.Fatalf("proposal %d answered index %d; the last applied is %d", i, idx, cur)
		}
		if got := state(l); !slices.Equal(got, want) {
			t.Fatalf("after proposal %d the state is %q", i, got)
		}
	}
	// The subscription saw every entry once, in order, with increasing indexes.
	var deltas []string
	last := first.Index
	for len(deltas) < len(want) {
		a := <-sub
		if a.Index <= last {
			t.Fatalf("published index %d after %d", a.Index, last)
		}
		last = a.Index
		for _, d := range a.Deltas {
			deltas = append(deltas, d.(string))
		}
	}
	if !slices.Equal(deltas, want) {
		t.Fatalf("deltas %q", deltas)
	}
	applied := l.Current().Index
	c.stop(0)
	c.start(0)
	l = c.loops[0]
	// (Current may already be past the checkpoint: a lone voter's log is all committed,
	// and the loop applies it at once.)
	if snap, err := c.stores[0].Storage().Snapshot(); err != nil || snap.GetMetadata().GetIndex() == 0 {
		t.Fatalf("restart did not begin from a checkpoint: %v %+v", err, snap.GetMetadata())
	}
	if err := l.WaitApplied(context.Background(), applied); err != nil {
		t.Fatal(err)
	}
	if got := state(l); !slices.Equal(got, want) {
		t.Fatalf("after the restart the state is %q", got)
	}
	c.propose(0, "after restart")
	if got := state(l); got[len(got)-1] != "after restart" {
		t.Fatalf("state %q", got)
	}
}

// TestThreeVoters: elect, propose on the leader (a follower refuses), every node applies
// the same entries, and after all restart from their files they have the same state and
// elect again.
func TestThreeVoters(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader()
	var want []string
	for i := range 10 {
		d := fmt.Sprintf("e%d", i)
		want = append(want, d)
		c.propose(lead, d)
	}
	follower := (lead + 1) % 3
	if _, err := c.loops[follower].Propose(context.Background(), []byte("x")); !errors.Is(err, ErrNotController) {
		t.Fatalf("a follower's Propose: %v", err)
	}
	applied := c.loops[lead].Current().Index
	check := func(what string) {
		t.Helper()
		for i, l := range c.loops {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := l.WaitApplied(ctx, applied)
			cancel()
			if err != nil {
				t.Fatalf("%s: node %d: %v", what, i+1, err)
			}
			if got := state(l); !slices.Equal(got, want) {
				t.Fatalf("%s: node %d has %q", what, i+1, got)
			}
		}
	}
	// Followers learn the commit index from the next message; ticks send heartbeats.
	stopTicks := c.ticker()
	check("running")
	stopTicks()
	for i, l := range c.loops {
		if got := l.Leader(); got != uint64(lead+1) {
			t.Fatalf("node %d names leader %d, node %d leads", i+1, got, lead+1)
		}
	}
	for i := range 3 {
		c.stop(i)
	}
	for i := range 3 {
		c.start(i)
	}
	for i, s := range c.stores {
		if v, empty, err := LogVoters(s.Storage()); err != nil || empty || !slices.Equal(v, []uint64{1, 2, 3}) {
			t.Fatalf("node %d's log voters: %v empty %v, %v", i+1, v, empty, err)
		}
	}
	stopTicks = c.ticker()
	check("restarted")
	stopTicks()
	lead = c.leader()
	c.propose(lead, "again")
}

// ticker ticks every loop every millisecond until stopped.
func (c *cluster) ticker() func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				c.mu.Lock()
				loops := slices.Clone(c.loops)
				c.mu.Unlock()
				for _, l := range loops {
					if l != nil {
						_ = l.Tick()
					}
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// TestLeaderLossFailsWaiters: a proposal waiting on a leader cut off from its followers
// gets ErrNotController once CheckQuorum makes it step down.
func TestLeaderLossFailsWaiters(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader()
	c.propose(lead, "committed")
	c.setDrop(func(m *pb.Message) bool { return m.GetFrom() == uint64(lead+1) || m.GetTo() == uint64(lead+1) })
	got := make(chan error, 1)
	go func() {
		_, err := c.loops[lead].Propose(context.Background(), []byte("lost"))
		got <- err
	}()
	stopTicks := c.ticker()
	defer stopTicks()
	select {
	case err := <-got:
		if !errors.Is(err, ErrNotController) {
			t.Fatalf("the cut-off leader's proposal: %v", err)
		}
		if _, ok := c.loops[lead].Serving(); ok {
			t.Fatal("the cut-off leader still says it serves")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cut-off leader's proposal still waits")
	}
}

// TestNewLeaderServesAfterItsFirstEntry: a node that won the election but whose empty
// entry is not committed (its followers' append responses are lost) leads but refuses
// proposals; once the entry commits and is applied it serves.
func TestNewLeaderServesAfterItsFirstEntry(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.setDrop(func(m *pb.Message) bool { return m.GetType() == pb.MessageType_MsgAppResp })
	lead := c.leader(0) // only node 1 ticks, so it campaigns first
	if lead != 0 {
		t.Fatalf("leader %d", lead+1)
	}
	st, _ := c.loops[0].Status(context.Background())
	if st.RaftState != raft.StateLeader {
		t.Fatalf("state %v", st.RaftState)
	}
	if _, err := c.loops[0].Propose(context.Background(), []byte("too early")); !errors.Is(err, ErrNotController) {
		t.Fatalf("a leader whose first entry is not applied accepted a proposal: %v", err)
	}
	c.setDrop(nil)
	c.propose(0, "served")
	if got := state(c.loops[0]); !slices.Equal(got, []string{"served"}) {
		t.Fatalf("state %q", got)
	}
}

// TestQueueFull: a full input queue refuses at once with ErrQueueFull.
func TestQueueFull(t *testing.T) {
	l, err := unstarted(t, 1, []uint64{1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Not running: nothing drains the queue.
	for i := range 2 {
		if err := l.Tick(); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
	if err := l.Tick(); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third tick: %v", err)
	}
	if _, err := l.Propose(context.Background(), []byte("x")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("propose: %v", err)
	}
	if err := l.Step(&pb.Message{}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("step: %v", err)
	}
}

// TestBootstrapNeedsItself: a node not among the voters does not bootstrap.
// A store with nothing in it has no voters yet (LogVoters reports it empty), and a loop
// that stopped names no leader.
func TestLogVotersOfNewStoreAndStoppedLeader(t *testing.T) {
	s, err := raftstore.Open(t.TempDir(), raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, empty, err := LogVoters(s.Storage()); err != nil || !empty || v != nil {
		t.Fatalf("a new store: %v empty %v, %v", v, empty, err)
	}
	c := newCluster(t, 1, nil)
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if got := c.loops[0].Leader(); got != 1 {
			return fmt.Errorf("a lone voter names leader %d", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	l := c.loops[0]
	c.stop(0)
	if got := l.Leader(); got != 0 {
		t.Fatalf("a stopped loop names leader %d", got)
	}
}

func TestBootstrapNeedsItself(t *testing.T) {
	if _, err := unstarted(t, 4, []uint64{1, 2, 3}, 0); err == nil {
		t.Fatal("a node outside the voters bootstrapped")
	}
}

// unstarted makes a loop on a new store without running it.
func unstarted(t *testing.T, id uint64, voters []uint64, queue int) (*Loop, error) {
	s, err := raftstore.Open(t.TempDir(), raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return New(Options{ID: id, Store: s, Voters: voters, Machine: listMachine{}, Send: func([]*pb.Message) {}, QueueSize: queue, RaftLogger: quietRaft})
}

// TestLaggingFollowerGetsSnapshot: a follower cut off while the leader checkpoints and
// compacts past it catches up through MsgSnap, and installs the leader's state.
func TestLaggingFollowerGetsSnapshot(t *testing.T) {
	c := newCluster(t, 3, func(o *Options) { o.SnapshotBytes, o.CatchUpEntries = 20, 1 })
	lead := c.leader()
	lag := (lead + 1) % 3
	_, sub, cancel := c.loops[lag].Subscribe(1000)
	defer cancel()
	c.setDrop(func(m *pb.Message) bool { return m.GetFrom() == uint64(lag+1) || m.GetTo() == uint64(lag+1) })
	var want []string
	for i := range 20 {
		d := fmt.Sprintf("entry %d", i)
		want = append(want, d)
		c.propose(lead, d)
	}
	c.setDrop(nil)
	stopTicks := c.ticker()
	defer stopTicks()
	ctx, cancelWait := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelWait()
	if err := c.loops[lag].WaitApplied(ctx, c.loops[lead].Current().Index); err != nil {
		t.Fatal(err)
	}
	if got := state(c.loops[lag]); !slices.Equal(got, want) {
		t.Fatalf("the lagging follower has %q", got)
	}
	snapshot := false
	for len(sub) > 0 {
		if a := <-sub; a != nil && a.Snapshot {
			snapshot = true
		}
	}
	if !snapshot {
		t.Fatal("the lagging follower caught up without a snapshot: the leader's log was not compacted past it")
	}
}
