// Package node is one exactq node's metadata stack: the raft log in
// <data>/__cluster_metadata-0 (raftstore), the quorum loop that applies it to the
// metadata image (metadata.Machine), and the goroutine that runs the loop. Zero-config
// serve is a node whose only voter is itself; a cluster node is the same stack with peers
// to send raft messages to.
//
// Proposals from one node are serialized and each is checked against the image it will
// be applied to before it is proposed: a serving leader's log holds nothing after its
// applied index but its own proposals, so a batch that applies to the current image when
// it is proposed applies when it commits. A batch that would not apply never reaches the
// log, where it would stop every node's loop.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/cluster/raftstore"
	"github.com/exactq/exactq/wire"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// LogDir is the metadata log's directory under a data directory (KRaft's name).
const LogDir = "__cluster_metadata-0"

// RaftID is the raft id of node id n: raft reserves 0 for "none", Kafka node ids start at 0.
func RaftID(n int32) uint64 { return uint64(n) + 1 }

// NodeID is the node id of a raft id (RaftID's inverse; generations above bit 32 aside).
func NodeID(raftID uint64) int32 { return int32(uint32(raftID) - 1) }

// Config configures Open. Zero values take the defaults.
type Config struct {
	NodeID  int32
	DataDir string
	// Voters are the node ids of a new log's voters; nil is this node alone. A log that
	// exists keeps the voters it has.
	Voters []int32
	// Send carries raft messages to the other nodes; nil for a lone voter. It must not block.
	Send         func([]*pb.Message)
	TickInterval time.Duration // 0 = 100 ms (KRaft's quorum tick)
	ElectionTick int           // 0 = 10 ticks (quorum.election.timeout.ms 1,000)
	// SnapshotBytes is the entry data between checkpoints; 0 = 20 MiB.
	SnapshotBytes uint64
	Now           func() time.Time // nil = time.Now
	Logger        *slog.Logger     // nil = slog.Default()
	RaftLogger    raft.Logger      // nil = raft's default
}

// Node is one node's running metadata stack.
type Node struct {
	cfg    Config
	store  *raftstore.Store
	loop   *quorum.Loop
	cancel context.CancelFunc
	ran    chan error
	// proposeMu serializes Propose: see the package comment.
	proposeMu sync.Mutex
}

// ErrStopped is returned once the node's loop has stopped (Close, or a failed disk).
var ErrStopped = quorum.ErrStopped

// Open opens (or creates) the metadata log under cfg.DataDir and starts its loop. A lone
// voter is the controller at once: Open returns once it serves, so the caller can propose
// its start-up records (registration, a new cluster's ClusterRecord) straight away.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	voters := []uint64{RaftID(cfg.NodeID)}
	if len(cfg.Voters) > 0 {
		voters = voters[:0]
		for _, v := range cfg.Voters {
			voters = append(voters, RaftID(v))
		}
	}
	lone := len(voters) == 1 && voters[0] == RaftID(cfg.NodeID)
	if cfg.Send == nil {
		if !lone {
			return nil, errors.New("node: several voters need a Send")
		}
		cfg.Send = func([]*pb.Message) {} // a lone voter sends nothing
	}
	store, err := raftstore.Open(filepath.Join(cfg.DataDir, LogDir), raftstore.Options{Now: cfg.Now, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	loop, err := quorum.New(quorum.Options{
		ID: RaftID(cfg.NodeID), Store: store, Voters: voters, Machine: metadata.Machine{}, Send: cfg.Send,
		TickInterval: cfg.TickInterval, ElectionTick: cfg.ElectionTick, SnapshotBytes: cfg.SnapshotBytes,
		Now: cfg.Now, Logger: cfg.Logger, RaftLogger: cfg.RaftLogger,
	})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("node %d: %w", cfg.NodeID, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, store: store, loop: loop, cancel: cancel, ran: make(chan error, 1)}
	go func() { n.ran <- loop.Run(runCtx) }()
	if lone {
		if err := n.awaitServing(ctx); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

func (n *Node) awaitServing(ctx context.Context) error {
	for {
		_, ch, cancel := n.loop.Subscribe(16)
		err := n.awaitServingOn(ctx, ch)
		cancel()
		if !errors.Is(err, errResubscribe) {
			return err
		}
	}
}

var errResubscribe = errors.New("node: subscription dropped")

// awaitServingOn waits on one subscription: Serving turns true when an entry is applied,
// and every apply is published.
func (n *Node) awaitServingOn(ctx context.Context, ch <-chan *quorum.Applied) error {
	for {
		if _, ok := n.loop.Serving(); ok {
			return nil
		}
		select {
		case _, open := <-ch:
			if !open {
				if err := n.loop.Err(); err != nil {
					return fmt.Errorf("node %d: metadata loop: %w", n.cfg.NodeID, err)
				}
				return errResubscribe
			}
		case <-n.loop.Done():
			return fmt.Errorf("node %d: metadata loop: %w", n.cfg.NodeID, n.loop.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Image is the newest applied image and the raft index it is at.
func (n *Node) Image() (*metadata.Image, uint64) {
	a := n.loop.Current()
	return a.State.(*metadata.Image), a.Index
}

// Propose appends records as one entry and returns its raft index once it is applied
// here (the image then holds it). A batch that does not apply to the current image is
// refused with an error wrapping metadata.ErrRefused and never proposed; a node that is
// not the controller answers quorum.ErrNotController.
func (n *Node) Propose(ctx context.Context, records []wire.MetadataRecord) (uint64, error) {
	n.proposeMu.Lock()
	defer n.proposeMu.Unlock()
	if _, ok := n.loop.Serving(); !ok {
		return 0, quorum.ErrNotController
	}
	im, applied := n.Image()
	// The entry's index will be above applied; applied+1 stands in for it (it only
	// matters as a registration's epoch, which must exceed the broker's last one).
	if _, _, err := metadata.ApplyEntry(im, applied+1, records); err != nil {
		return 0, err
	}
	data, err := metadata.EncodeEntry(n.cfg.Now().UnixMilli(), records)
	if err != nil {
		return 0, err
	}
	return n.loop.Propose(ctx, data)
}

// WaitApplied returns once index is applied here.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	return n.loop.WaitApplied(ctx, index)
}

// Serving reports whether this node is the controller (the serving raft leader), and in
// which term.
func (n *Node) Serving() (term uint64, ok bool) { return n.loop.Serving() }

// Loop is the node's quorum loop, for the transport that delivers peers' raft messages
// (Step) and for status requests.
func (n *Node) Loop() *quorum.Loop { return n.loop }

// Update is one applied image and what changed since the previous one.
type Update struct {
	Index    uint64
	Image    *metadata.Image
	Deltas   []*metadata.Delta // in order; none after a snapshot
	Snapshot bool              // Image was installed from a snapshot: compare it whole
}

// UpdateOf reads a quorum.Applied of this node's loop.
func UpdateOf(a *quorum.Applied) Update {
	u := Update{Index: a.Index, Image: a.State.(*metadata.Image), Snapshot: a.Snapshot}
	for _, d := range a.Deltas {
		u.Deltas = append(u.Deltas, d.(*metadata.Delta))
	}
	return u
}

// Subscribe delivers every applied image after first, in order (see quorum.Loop.Subscribe:
// a subscriber that lets buf fill is dropped and its channel closed).
func (n *Node) Subscribe(buf int) (first *quorum.Applied, ch <-chan *quorum.Applied, cancel func()) {
	return n.loop.Subscribe(buf)
}

// Close stops the loop and closes the log. Safe to call twice.
func (n *Node) Close() error {
	n.cancel()
	err, ok := <-n.ran
	if !ok {
		return nil
	}
	close(n.ran)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if cerr := n.store.Close(); err == nil {
		err = cerr
	}
	return err
}
