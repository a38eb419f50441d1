package raftstore

import (
	"fmt"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// cluster is three voters on three stores in one goroutine, messages delivered in order
// unless a node is cut off (dropped both ways).
type cluster struct {
	t     *testing.T
	dirs  []string
	nodes []*node
	cut   map[uint64]bool
	queue []*pb.Message
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, cut: map[uint64]bool{}}
	root := t.TempDir()
	for id := uint64(1); id <= 3; id++ {
		c.dirs = append(c.dirs, filepath.Join(root, fmt.Sprint(id)))
	}
	for id := range uint64(3) {
		c.start(id+1, 0)
		if err := c.nodes[id].rn.Bootstrap([]raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// start opens node id's store and a RawNode on it (applied: where its state machine is).
func (c *cluster) start(id, applied uint64) {
	s := openStore(c.t, c.dirs[id-1], testOptions(nil))
	rn, err := raft.NewRawNode(&raft.Config{ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: s.Storage(),
		Applied: applied, MaxSizePerMsg: 4 << 10, MaxInflightMsgs: 256, PreVote: true, Logger: quietRaft})
	if err != nil {
		c.t.Fatal(err)
	}
	_, cs, _ := s.Storage().InitialState()
	n := &node{t: c.t, s: s, rn: rn, cs: cs}
	if int(id) <= len(c.nodes) {
		c.nodes[id-1] = n
	} else {
		c.nodes = append(c.nodes, n)
	}
}

func (c *cluster) node(id uint64) *node { return c.nodes[id-1] }

// settle handles every node's Readies and delivers messages until nothing moves.
func (c *cluster) settle() {
	c.t.Helper()
	for moved := true; moved; {
		moved = false
		for _, n := range c.nodes {
			for n.rn.HasReady() {
				moved = true
				rd := n.rn.Ready()
				if err := n.s.SaveReady(rd); err != nil {
					c.t.Fatalf("SaveReady: %v", err)
				}
				c.queue = append(c.queue, rd.Messages...)
				n.applyCommitted(rd.CommittedEntries)
				n.rn.Advance(rd)
			}
		}
		for len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			moved = true
			from, to := m.GetFrom(), m.GetTo()
			if c.cut[from] || c.cut[to] {
				if m.GetType() == pb.MsgSnap {
					c.node(from).rn.ReportSnapshot(to, raft.SnapshotFailure)
				}
				continue
			}
			if err := c.node(to).rn.Step(m); err != nil {
				c.t.Fatalf("Step %v to %d: %v", m.GetType(), to, err)
			}
			if m.GetType() == pb.MsgSnap {
				c.node(from).rn.ReportSnapshot(to, raft.SnapshotFinish)
			}
		}
	}
}

// heartbeat ticks every node once (HeartbeatTick is 1: the leader sends heartbeats; far
// from any election timeout) and settles.
func (c *cluster) heartbeat() {
	for _, n := range c.nodes {
		n.rn.Tick()
	}
	c.settle()
}

func (c *cluster) leader() uint64 {
	for _, n := range c.nodes {
		if st := n.rn.Status(); st.RaftState == raft.StateLeader && !c.cut[st.ID] {
			return st.ID
		}
	}
	return 0
}

// TestThreeVotersOverStores runs real raft between three stores: a follower cut off
// while the leader compacts catches up through a snapshot (SaveReady's snapshot path), a
// leader cut off with an uncommitted tail has it overwritten by the next leader (the
// truncating append), and after every node restarts from its files the three agree on
// every committed entry and go on committing.
func TestThreeVotersOverStores(t *testing.T) {
	c := newCluster(t)
	c.settle()
	if err := c.node(1).rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	c.settle()
	if c.leader() != 1 {
		t.Fatalf("leader %d, want 1", c.leader())
	}
	propose := func(id uint64, from, n int) {
		for i := from; i < from+n; i++ {
			if err := c.node(id).rn.Propose(metadataBatch(t, i)); err != nil {
				t.Fatal(err)
			}
		}
		c.settle()
	}
	propose(1, 0, 10)

	// Node 3 misses entries that the leader then compacts away.
	c.cut[3] = true
	propose(1, 10, 20)
	n1 := c.node(1)
	applied := n1.applied[len(n1.applied)-1].GetIndex()
	if _, err := n1.s.Checkpoint(applied, n1.cs, image(upTo(n1.applied, applied))); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.s.Compact(0); err != nil {
		t.Fatal(err)
	}
	delete(c.cut, 3)
	propose(1, 30, 2)
	if sn, _ := c.node(3).s.Storage().Snapshot(); sn.GetMetadata().GetIndex() != applied {
		t.Fatalf("node 3 has snapshot %d, want the leader's %d", sn.GetMetadata().GetIndex(), applied)
	}

	// The leader, cut off, appends what cannot commit; node 2 takes over and overwrites it.
	c.cut[1] = true
	propose(1, 1000, 5)
	if err := c.node(2).rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	c.settle()
	if c.leader() != 2 {
		t.Fatalf("leader %d, want 2", c.leader())
	}
	propose(2, 40, 8)
	delete(c.cut, 1)
	c.heartbeat() // node 1 learns of term 2, and the leader probes it again
	propose(2, 48, 2)
	st1, st2 := c.node(1).rn.Status(), c.node(2).rn.Status()
	if st1.RaftState != raft.StateFollower || st1.HardState.GetCommit() != st2.HardState.GetCommit() {
		t.Fatalf("node 1: %v at commit %d, leader at %d", st1.RaftState, st1.HardState.GetCommit(), st2.HardState.GetCommit())
	}

	// Everyone restarts from the files, replaying from its checkpoint.
	committed := committedData(c.node(2))
	for id := uint64(1); id <= 3; id++ {
		n := c.node(id)
		if err := n.s.Close(); err != nil {
			t.Fatal(err)
		}
		sn, _ := openSnapshotIndex(t, c.dirs[id-1])
		c.start(id, sn)
	}
	c.settle()
	if err := c.node(3).rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	c.settle()
	propose(c.leader(), 60, 3)
	for id := uint64(1); id <= 3; id++ {
		got := committedData(c.node(id))
		if len(got) < 3 {
			t.Fatalf("node %d applied %d entries after the restart", id, len(got))
		}
		replayed, fresh := got[:len(got)-3], got[len(got)-3:]
		want := committed[len(committed)-len(replayed):]
		for i := range want {
			if string(replayed[i]) != string(want[i]) {
				t.Fatalf("node %d: replayed entry %d of %d differs from what was committed", id, i, len(want))
			}
		}
		for i, d := range fresh {
			if string(d) != string(metadataBatch(t, 60+i)) {
				t.Fatalf("node %d: entry %d proposed after the restart differs", id, i)
			}
		}
		for _, e := range c.node(id).applied {
			if string(e.GetData()) == string(metadataBatch(t, 1000)) {
				t.Fatalf("node %d applied an entry that never committed", id)
			}
		}
	}
	if len(committed) != 42 { // 10 + 20 + 2 by node 1, 8 + 2 by node 2
		t.Fatalf("%d proposals committed before the restart, want 42", len(committed))
	}
}

// committedData is the proposals node n applied, in order.
func committedData(n *node) [][]byte { return proposed(n.applied) }

// image is a stand-in state machine image: the proposals applied.
func image(es []*pb.Entry) []byte {
	var b []byte
	for _, d := range proposed(es) {
		b = append(b, d...)
	}
	return b
}

// openSnapshotIndex returns the index of the snapshot the store in dir starts from.
func openSnapshotIndex(t *testing.T, dir string) (uint64, error) {
	s := openStore(t, dir, testOptions(nil))
	defer s.Close()
	sn, err := s.Storage().Snapshot()
	return sn.GetMetadata().GetIndex(), err
}
