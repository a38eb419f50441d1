package raftnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/cluster/raftstore"
	"github.com/exactq/exactq/internal/server"
)

// listMachine is the test's state machine: the applied entries' data in order.
type listMachine struct{}

func (listMachine) Empty() any { return []string(nil) }
func (listMachine) Apply(st any, _ uint64, data []byte) (any, any, error) {
	return append(slices.Clone(st.([]string)), string(data)), nil, nil
}
func (listMachine) Encode(st any) ([]byte, error) { return json.Marshal(st) }
func (listMachine) Decode(b []byte) (any, error) {
	var s []string
	err := json.Unmarshal(b, &s)
	return s, err
}

var (
	quietRaft = &raft.DefaultLogger{Logger: stdlog.New(io.Discard, "", 0)}
	quiet     = slog.New(slog.DiscardHandler)
)

// tcpCluster is n nodes in one process, each with its raftstore in a temp dir, its
// quorum loop on a real ticker, a server listener on 127.0.0.1:0 serving RaftMessage and
// its own peer.TCP to the others: everything but the process boundary.
type tcpCluster struct {
	t     *testing.T
	n     int
	dirs  []string
	tune  func(*quorum.Options)
	mu    sync.Mutex
	addrs map[int32]string
	nodes []*tcpNode
}

type tcpNode struct {
	loop  *quorum.Loop
	stop  func()
	snaps chan struct{} // gets a value per snapshot installed
}

func dirID(node int32) [16]byte { return [16]byte{0xd1, byte(node)} }

func newTCPCluster(t *testing.T, n int, tune func(*quorum.Options)) *tcpCluster {
	c := &tcpCluster{t: t, n: n, tune: tune, addrs: map[int32]string{}, nodes: make([]*tcpNode, n)}
	for range n {
		c.dirs = append(c.dirs, t.TempDir())
	}
	for i := range n {
		c.start(int32(i))
	}
	t.Cleanup(func() {
		for i := range n {
			c.stop(int32(i))
		}
	})
	return c
}

func (c *tcpCluster) addr(node int32) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.addrs[node]
	return a, ok
}

func (c *tcpCluster) start(node int32) {
	t := c.t
	t.Helper()
	store, err := raftstore.Open(c.dirs[node], raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := peer.NewTCP(peer.Config{Self: node, Addr: c.addr})
	snd := NewSender(SenderConfig{Transport: tr, NodeID: node, DirectoryID: dirID(node),
		ClusterID: func() string { return "test-cluster" }, Logger: quiet})
	var voters []uint64
	for i := range c.n {
		voters = append(voters, RaftID(int32(i)))
	}
	opts := quorum.Options{ID: RaftID(node), Store: store, Voters: voters, Machine: listMachine{}, Send: snd.Send,
		TickInterval: 20 * time.Millisecond, Logger: quiet, RaftLogger: quietRaft}
	if c.tune != nil {
		c.tune(&opts)
	}
	loop, err := quorum.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	snd.SetReporter(loop)
	rcv := NewReceiver(ReceiverConfig{RaftID: RaftID(node), Step: loop.Step, Logger: quiet,
		ClusterID:   func() string { return "test-cluster" },
		DirectoryOf: func(n int32) ([16]byte, bool) { return dirID(n), n >= 0 && int(n) < c.n }})
	srv := server.New(server.Config{}, NewHandler(rcv), quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c.mu.Lock()
	c.addrs[node] = ln.Addr().String()
	c.mu.Unlock()

	_, sub, cancelSub := loop.Subscribe(1 << 16)
	snaps := make(chan struct{}, 1<<16)
	go func() {
		for a := range sub {
			if a.Snapshot {
				snaps <- struct{}{}
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- loop.Run(ctx) }()
	c.nodes[node] = &tcpNode{loop: loop, snaps: snaps, stop: func() {
		// The listener first: peers see the node gone at once, as when its process dies.
		_ = srv.Close()
		if err := <-served; !errors.Is(err, server.ErrServerClosed) {
			t.Errorf("node %d: Serve: %v", node, err)
		}
		cancel()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("node %d: Run: %v", node, err)
		}
		cancelSub()
		snd.Close()
		tr.Close()
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	}}
}

func (c *tcpCluster) stop(node int32) {
	if nd := c.nodes[node]; nd != nil {
		nd.stop()
		c.nodes[node] = nil
	}
}

// leader waits until one running node serves as controller; it returns its node id.
func (c *tcpCluster) leader() int32 {
	c.t.Helper()
	lead := int32(-1)
	if err := await.Until(30*time.Second, 5*time.Millisecond, func() error {
		for i, nd := range c.nodes {
			if nd == nil {
				continue
			}
			if _, ok := nd.loop.Serving(); ok {
				lead = int32(i)
				return nil
			}
		}
		return errors.New("no node serves")
	}); err != nil {
		c.t.Fatal(err)
	}
	return lead
}

// propose proposes data at the current leader, retrying while leadership moves; it
// returns the entry's index.
func (c *tcpCluster) propose(data string) uint64 {
	c.t.Helper()
	var index uint64
	if err := await.Until(30*time.Second, 5*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		index, err = c.nodes[c.leader()].loop.Propose(ctx, []byte(data))
		if errors.Is(err, quorum.ErrNotController) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return await.Stop(err)
	}); err != nil {
		c.t.Fatalf("propose %q: %v", data, err)
	}
	return index
}

// applied waits until every running node has applied index and holds want.
func (c *tcpCluster) applied(index uint64, want []string) {
	c.t.Helper()
	for i, nd := range c.nodes {
		if nd == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := nd.loop.WaitApplied(ctx, index)
		cancel()
		if err != nil {
			c.t.Fatalf("node %d: applying %d: %v", i, index, err)
		}
		if got := nd.loop.Current().State.([]string); !slices.Equal(got, want) {
			c.t.Fatalf("node %d at %d: %q, want %q", i, index, got, want)
		}
	}
}

// TestThreeVotersOverTCP: three quorum loops exchanging raft messages as RaftMessage
// requests over real TCP (peer.TCP to server listeners) elect a leader and commit on all
// three; with the leader's listener and loop closed the other two elect a new leader and
// go on committing; the old leader restarted from its directory on a new port catches
// up, through a snapshot sent as one RaftMessage since the leader compacted past it.
func TestThreeVotersOverTCP(t *testing.T) {
	c := newTCPCluster(t, 3, func(o *quorum.Options) { o.SnapshotBytes, o.CatchUpEntries = 200, 2 })
	var want []string
	var index uint64
	commit := func(n int, prefix string) {
		for i := range n {
			d := fmt.Sprintf("%s-%d", prefix, i)
			want = append(want, d)
			index = c.propose(d)
		}
		c.applied(index, want)
	}
	commit(10, "first")

	old := c.leader()
	c.stop(old)
	if lead := c.leader(); lead == old {
		t.Fatalf("node %d still leads after it stopped", old)
	}
	commit(30, "after-failover")

	c.start(old)
	c.applied(index, want)
	select {
	case <-c.nodes[old].snaps:
	default:
		t.Fatal("the restarted node caught up without a snapshot: the leader did not compact past it")
	}
	commit(5, "all-three")
}
