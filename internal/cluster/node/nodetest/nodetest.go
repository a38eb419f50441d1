// Package nodetest runs metadata quorums of real node.Nodes over TCP on loopback for
// other packages' tests (the CLI's cluster commands, Kafka's kafka-metadata-quorum): the
// node stack alone (raft log in a temp directory, quorum loop, controller listener), no
// broker.
package nodetest

import (
	"context"
	"errors"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/node"
)

// Quorum is a running quorum: Nodes by node id (joiners appended), Addrs their controller
// listeners.
type Quorum struct {
	t      *testing.T
	Voters map[int32]string // the voters it bootstrapped with
	Nodes  []*node.Node
	Addrs  []string
}

// DirectoryID is test node id's directory id.
func DirectoryID(id int32) [16]byte { return [16]byte{0xd1, byte(id + 1)} }

// Start opens n voters (node ids 0..n-1) and waits until one serves; they close at the
// test's end.
func Start(t *testing.T, n int) *Quorum {
	t.Helper()
	q := &Quorum{t: t, Voters: map[int32]string{}}
	lns := make([]net.Listener, n)
	for i := range lns {
		lns[i] = listen(t)
		q.Voters[int32(i)] = lns[i].Addr().String()
	}
	for i, ln := range lns {
		q.open(int32(i), ln, false)
	}
	q.Leader()
	return q
}

// Join opens a new node with an empty directory that joins the quorum (node.Cluster.Join)
// and returns its id; it is a member once AddRaftVoter has added it.
func (q *Quorum) Join() int32 {
	q.t.Helper()
	id := int32(len(q.Nodes))
	q.open(id, listen(q.t), true)
	return id
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func (q *Quorum) open(id int32, ln net.Listener, join bool) {
	q.t.Helper()
	n, err := node.Open(context.Background(), node.Config{NodeID: id, DataDir: q.t.TempDir(), TickInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), RaftLogger: &raft.DefaultLogger{Logger: stdlog.New(io.Discard, "", 0)},
		Cluster: &node.Cluster{Voters: q.Voters, Join: join, Listener: ln, DirectoryID: DirectoryID(id)}})
	if err != nil {
		ln.Close()
		q.t.Fatal(err)
	}
	q.t.Cleanup(func() { n.Close() })
	q.Nodes = append(q.Nodes, n)
	q.Addrs = append(q.Addrs, ln.Addr().String())
}

// Leader waits until a node serves (the raft leader, its term's first entry applied)
// and returns its id and term.
func (q *Quorum) Leader() (id int32, term uint64) {
	q.t.Helper()
	err := await.Until(30*time.Second, 5*time.Millisecond, func() error {
		for i, n := range q.Nodes {
			if t, ok := n.Serving(); ok {
				id, term = int32(i), t
				return nil
			}
		}
		return errors.New("no node serves")
	})
	if err != nil {
		q.t.Fatal(err)
	}
	return id, term
}
