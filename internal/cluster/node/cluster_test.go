package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/wire"
)

var quiet = slog.New(slog.DiscardHandler)

// testCluster is three nodes in one process over real TCP: each node's controller
// listener bound on 127.0.0.1:0 before any node opens (so --voters can name them), its
// own peer.TCP, its raftstore in a temp dir.
type testCluster struct {
	t      *testing.T
	dirs   []string
	voters map[int32]string
	// joiners are the nodes started after the others with Cluster.Join, by id: their
	// controller listeners (not among voters, which every node is configured with).
	joiners map[int32]string
	nodes   []*Node
	// heartbeats counts the controller requests each node's Controller func answered;
	// running is each node for that func (read on the listener's goroutines).
	heartbeats []atomic.Int64
	running    []atomic.Pointer[Node]
}

func newTestCluster(t *testing.T, n int) *testCluster {
	c := &testCluster{t: t, voters: map[int32]string{}, joiners: map[int32]string{}, nodes: make([]*Node, n),
		heartbeats: make([]atomic.Int64, maxTestNodes), running: make([]atomic.Pointer[Node], maxTestNodes)}
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		c.voters[int32(i)] = ln.Addr().String()
		c.dirs = append(c.dirs, t.TempDir())
	}
	for i := range n {
		c.open(int32(i), lns[i])
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(int32(i))
		}
	})
	return c
}

// maxTestNodes bounds a testCluster's nodes, joiners included.
const maxTestNodes = 8

// addr is node id's controller listener address.
func (c *testCluster) addr(id int32) string {
	if a, ok := c.joiners[id]; ok {
		return a
	}
	return c.voters[id]
}

// join starts a new node with an empty directory and Cluster.Join (the voters' addresses
// only) and returns its id.
func (c *testCluster) join() int32 {
	c.t.Helper()
	id := int32(len(c.nodes))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	c.joiners[id] = ln.Addr().String()
	c.dirs = append(c.dirs, c.t.TempDir())
	c.nodes = append(c.nodes, nil)
	c.open(id, ln)
	return id
}

func (c *testCluster) config(id int32, ln net.Listener) Config {
	_, join := c.joiners[id]
	return Config{NodeID: id, DataDir: c.dirs[id], TickInterval: 20 * time.Millisecond, Logger: quiet, RaftLogger: quietRaft,
		Cluster: &Cluster{Voters: c.voters, Join: join, Listener: ln, DirectoryID: dirOf(id),
			ClusterID: func() string { return "" },
			// The controller's stand-in: answers a heartbeat with NOT_CONTROLLER unless this
			// node serves, as controller.Driver does.
			Controller: func(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
				c.heartbeats[id].Add(1)
				resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
				resp.SetVersion(req.GetVersion())
				if n := c.running[id].Load(); n == nil || !func() bool { _, ok := n.Serving(); return ok }() {
					resp.ErrorCode = kerr.NotController.Code
				}
				return resp, nil
			}}}
}

func (c *testCluster) open(id int32, ln net.Listener) {
	c.t.Helper()
	if ln == nil {
		// A restart binds the address its peers know.
		var err error
		if ln, err = net.Listen("tcp", c.addr(id)); err != nil {
			c.t.Fatal(err)
		}
	}
	n, err := Open(context.Background(), c.config(id, ln))
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id] = n
	c.running[id].Store(n)
}

func (c *testCluster) stop(id int32) {
	if n := c.nodes[id]; n != nil {
		if err := n.Close(); err != nil {
			c.t.Errorf("node %d: Close: %v", id, err)
		}
		c.nodes[id] = nil
		c.running[id].Store(nil)
	}
}

// controller waits until a running node serves and every running node names it as the
// controller.
func (c *testCluster) controller() int32 {
	c.t.Helper()
	lead := int32(-1)
	err := await.Until(30*time.Second, 5*time.Millisecond, func() error {
		lead = -1
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			if _, ok := n.Serving(); ok {
				lead = int32(i)
			}
		}
		if lead < 0 {
			return errors.New("no node serves")
		}
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			if got, ok := n.Controller(); !ok || got != lead {
				return fmt.Errorf("node %d names controller %d (%v), node %d serves", i, got, ok, lead)
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return lead
}

// propose proposes records at the controller, retrying while it moves.
func (c *testCluster) propose(recs []wire.MetadataRecord) uint64 {
	c.t.Helper()
	var index uint64
	err := await.Until(30*time.Second, 5*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		index, err = c.nodes[c.controller()].Propose(ctx, recs)
		if errors.Is(err, quorum.ErrNotController) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return await.Stop(err)
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return index
}

// holds waits until every running node has applied index and has the topics.
func (c *testCluster) holds(index uint64, topics ...string) {
	c.t.Helper()
	for i, n := range c.nodes {
		if n == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := n.WaitApplied(ctx, index)
		cancel()
		if err != nil {
			c.t.Fatalf("node %d applying %d: %v", i, index, err)
		}
		im, _ := n.Image()
		for _, name := range topics {
			if im.Topic(name) == nil {
				c.t.Fatalf("node %d at %d lacks topic %s", i, index, name)
			}
		}
	}
}

// Three nodes over real TCP elect a controller that every node names, commit its
// proposals on all three, serve controller requests on the controller listener (the
// leader's own answer, a follower's NOT_CONTROLLER); with the controller closed the other
// two elect a new one and go on committing; the old controller reopened from its
// directory on its address catches up with everything.
func TestThreeNodesOverTCP(t *testing.T) {
	c := newTestCluster(t, 3)
	var topics []string
	var index uint64
	commit := func(prefix string, n int) {
		for i := range n {
			name := fmt.Sprintf("%s-%d", prefix, i)
			topics = append(topics, name)
			index = c.propose(topic(name, byte(len(topics)), 1))
		}
		c.holds(index, topics...)
	}
	commit("first", 5)

	lead := c.controller()
	tr := peer.NewTCP(peer.Config{Self: 99, Addr: func(id int32) (string, bool) { a, ok := c.voters[id]; return a, ok }})
	defer tr.Close()
	for id := range int32(3) {
		resp, err := tr.Send(context.Background(), id, peer.Control, kmsg.NewPtrBrokerHeartbeatRequest())
		if err != nil {
			t.Fatalf("heartbeat to node %d's controller listener: %v", id, err)
		}
		want := kerr.NotController.Code
		if id == lead {
			want = 0
		}
		if got := resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode; got != want {
			t.Fatalf("node %d (controller %d) answered %d, want %d", id, lead, got, want)
		}
		if c.heartbeats[id].Load() != 1 {
			t.Fatalf("node %d's Controller func answered %d requests, want 1", id, c.heartbeats[id].Load())
		}
	}

	c.stop(lead)
	if next := c.controller(); next == lead {
		t.Fatalf("node %d still the controller after it closed", lead)
	}
	commit("after-failover", 10)

	c.open(lead, nil)
	c.holds(index, topics...)
	commit("all-three", 3)
}

// "Bootstrap and growth": a one-voter log cannot bootstrap with other voters, nor can a
// directory from before the metadata log; a log with other voters does not run alone.
func TestBootstrapRule(t *testing.T) {
	voters := map[int32]string{0: "127.0.0.1:1", 1: "127.0.0.1:2", 2: "127.0.0.1:3"}
	cluster := func(c *Config) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.Cluster = &Cluster{Voters: voters, Listener: ln}
	}
	openErr := func(dir string, tune func(*Config)) error {
		cfg := Config{NodeID: 0, DataDir: dir, Logger: quiet, RaftLogger: quietRaft}
		tune(&cfg)
		n, err := Open(context.Background(), cfg)
		if err == nil {
			n.Close()
		}
		return err
	}

	lone := t.TempDir()
	n := open(t, lone, nil)
	if _, err := n.Propose(context.Background(), topic("a", 1, 1)); err != nil {
		t.Fatal(err)
	}
	n.Close()
	if err := openErr(lone, cluster); err == nil || !strings.Contains(err.Error(), "only voter") {
		t.Fatalf("a one-voter log with three voters: %v, want the only-voter refusal", err)
	}
	// Naming this node alone is a lone voter: the log opens as before.
	if err := openErr(lone, func(c *Config) { c.Cluster = &Cluster{Voters: map[int32]string{0: "127.0.0.1:1"}} }); err != nil {
		t.Fatalf("a one-voter log with voters naming this node alone: %v", err)
	}

	legacy := t.TempDir()
	if err := os.Mkdir(filepath.Join(legacy, legacyTopicsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := openErr(legacy, cluster); err == nil || !strings.Contains(err.Error(), "before the metadata log") {
		t.Fatalf("a directory from before the metadata log with three voters: %v", err)
	}
	if _, err := os.Stat(filepath.Join(legacy, LogDir, "quorum-state")); err == nil {
		t.Fatal("the refused legacy directory got a bootstrapped log")
	}

	three := t.TempDir()
	if err := openErr(three, cluster); err != nil {
		t.Fatalf("an empty directory with three voters: %v", err)
	}
	if err := openErr(three, func(*Config) {}); err == nil || !strings.Contains(err.Error(), "has the voters [0 1 2]") {
		t.Fatalf("a three-voter log opened alone: %v", err)
	}
	if err := openErr(t.TempDir(), func(c *Config) { cluster(c); c.NodeID = 5 }); err == nil || !strings.Contains(err.Error(), "not among the voters") {
		t.Fatalf("a controller missing from the voters: %v", err)
	}
}

func TestParseVoters(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[int32]string
		err  string
	}{
		{in: "1@a:9093", want: map[int32]string{1: "a:9093"}},
		{in: "0@10.0.0.1:9093, 1@10.0.0.2:9093,2@[::1]:9093", want: map[int32]string{0: "10.0.0.1:9093", 1: "10.0.0.2:9093", 2: "[::1]:9093"}},
		{in: "1@a:9093,1@b:9093", err: "listed twice"},
		{in: "1@a:9093,2@a:9093", err: "node 1's too"},
		{in: "a:9093", err: "want id@host:port"},
		{in: "x@a:9093", err: "node id must be a number"},
		{in: "-1@a:9093", err: "node id must be a number"},
		{in: "1@a", err: "missing port"},
		{in: "1@:9093", err: "no host"},
		{in: "1@a:0", err: "port must be"},
		{in: "1@a:http", err: "port must be"},
		{in: "", err: "want id@host:port"},
	} {
		got, err := ParseVoters(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseVoters(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("ParseVoters(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for id, a := range tc.want {
			if got[id] != a {
				t.Errorf("ParseVoters(%q)[%d] = %q, want %q", tc.in, id, got[id], a)
			}
		}
	}
}

// dirOf is test node id's directory id.
func dirOf(id int32) [16]byte { return [16]byte{0xd1, byte(id)} }
