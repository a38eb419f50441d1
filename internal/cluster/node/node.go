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
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
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
	// Cluster is a node with other voters: their controller listeners, its own, and the
	// controller it serves there; the node sends and receives raft messages itself. Nil,
	// or voters naming this node alone, is a lone voter: no listener, nothing sent.
	Cluster *Cluster
	// Voters and Send are the in-process alternative to Cluster (tests that carry raft
	// messages themselves, stepping them into Loop): the node ids of a new log's voters
	// (nil is this node alone; a log that exists keeps the voters it has), and what
	// carries raft messages to the others, which must not block.
	Voters       []int32
	Send         func([]*pb.Message)
	TickInterval time.Duration // 0 = 100 ms (KRaft's quorum tick)
	ElectionTick int           // 0 = 10 ticks (quorum.election.timeout.ms 1,000)
	// SnapshotBytes is the entry data between checkpoints; 0 = 20 MiB.
	SnapshotBytes uint64
	// RestartBackoff is how long the node waits before reopening a log whose loop stopped
	// on a storage error; 0 = 1 s.
	RestartBackoff time.Duration
	Now            func() time.Time // nil = time.Now
	Logger         *slog.Logger     // nil = slog.Default()
	RaftLogger     raft.Logger      // nil = raft's lines through Logger (raftlog.go)
}

// Node is one node's running metadata stack.
//
// A loop that stops on a storage error (a full disk fails its fsync or its quorum-state
// write) is not the end of the node: the supervisor opens the store again from its files,
// as after a crash, and starts a new loop once RestartBackoff has passed, so metadata
// changes fail while the disk is full and work again once it is not. Meanwhile Image
// keeps answering the newest image applied before the failure, never an older one.
type Node struct {
	cfg    Config
	voters []uint64
	net    *clusterNet // nil for a lone voter and with Config.Send
	// loneLog: the log opened (or bootstrapped) has this node as its only voter, so Open
	// waits until it serves. A node configured alone whose log has grown other voters
	// is not: it needs them to elect.
	loneLog bool

	// inc is the running loop and its store, replaced by the supervisor; floor is the
	// newest Applied of a loop that failed. Atomic: Image is on request paths.
	inc   atomic.Pointer[incarnation]
	floor atomic.Pointer[quorum.Applied]
	// proposeMu serializes Propose: see the package comment. changeMu is held by the
	// voter change in progress (AddVoter, RemoveVoter): one at a time.
	proposeMu sync.Mutex
	changeMu  sync.Mutex

	closing  chan struct{}
	done     chan struct{} // closed when the supervisor has stopped the last loop
	closeMu  sync.Mutex
	closeErr error
	closed   bool
}

// incarnation is one loop over one open store.
type incarnation struct {
	store  *raftstore.Store
	loop   *quorum.Loop
	cancel context.CancelFunc
	ran    chan error // Run's result
}

// ErrStopped is returned while the node's loop is stopped (Close, or a failed disk).
var ErrStopped = quorum.ErrStopped

// Open opens (or creates) the metadata log under cfg.DataDir and starts its loop. A lone
// voter is the controller at once: Open returns once it serves, so the caller can propose
// its start-up records (registration, a new cluster's ClusterRecord) straight away; if its
// disk fails first (a full disk cannot take the new term), Open returns the node with the
// image of its files, and the supervisor keeps trying.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.RestartBackoff <= 0 {
		cfg.RestartBackoff = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RaftLogger == nil {
		cfg.RaftLogger = raftLogger{cfg.Logger.With("component", "raft")}
	}
	if c := cfg.Cluster; c != nil {
		if cfg.Send != nil || len(cfg.Voters) > 0 {
			return nil, errors.New("node: Cluster and Voters/Send are alternatives")
		}
		if err := c.validate(cfg.NodeID); err != nil {
			return nil, err
		}
		cfg.Voters = slices.Sorted(maps.Keys(c.Voters))
		if len(c.Voters) == 1 && !c.Join && c.Listener == nil && c.ListenAddr == "" {
			// This node alone and no controller listener: a lone voter, as without
			// voters. With a listener it is one that others can join.
			cfg.Cluster = nil
		}
	}
	voters := []uint64{RaftID(cfg.NodeID)}
	if len(cfg.Voters) > 0 {
		voters = voters[:0]
		for _, v := range cfg.Voters {
			voters = append(voters, RaftID(v))
		}
	}
	join := cfg.Cluster != nil && cfg.Cluster.Join
	lone := len(voters) == 1 && voters[0] == RaftID(cfg.NodeID) && !join
	n := &Node{cfg: cfg, voters: voters, closing: make(chan struct{}), done: make(chan struct{})}
	switch {
	case n.cfg.Cluster != nil:
		if err := n.openNet(); err != nil {
			return nil, err
		}
	case n.cfg.Send == nil && !lone:
		return nil, errors.New("node: several voters need a Cluster or a Send")
	}
	inc, err := n.start(true)
	if err != nil {
		if n.net != nil {
			n.net.close()
		}
		return nil, err
	}
	n.inc.Store(inc)
	if n.net != nil {
		n.serveNet()
	}
	go n.supervise()
	if n.loneLog {
		if err := n.awaitServing(ctx, inc); err != nil && !errors.Is(err, errLoopFailed) {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// start opens the store and starts a loop over it; first is Open's start, which checks
// the log's voters against the configured ones.
func (n *Node) start(first bool) (*incarnation, error) {
	cfg := n.cfg
	store, err := raftstore.Open(filepath.Join(cfg.DataDir, LogDir), raftstore.Options{Now: cfg.Now, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	if first {
		if err := n.checkLog(store); err != nil {
			store.Close()
			return nil, err
		}
	}
	send := cfg.Send
	if send == nil {
		send = func([]*pb.Message) {} // a lone voter sends nothing
	}
	loop, err := quorum.New(quorum.Options{
		ID: RaftID(cfg.NodeID), Store: store, Voters: n.voters, Join: cfg.Cluster != nil && cfg.Cluster.Join, Machine: metadata.Machine{}, Send: send,
		TickInterval: cfg.TickInterval, ElectionTick: cfg.ElectionTick, SnapshotBytes: cfg.SnapshotBytes,
		Now: cfg.Now, Logger: cfg.Logger, RaftLogger: cfg.RaftLogger,
	})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("node %d: %w", cfg.NodeID, err)
	}
	if n.net != nil {
		// Before Run: delivery reports go to this incarnation's loop, not a stopped one.
		n.net.snd.SetReporter(loop)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inc := &incarnation{store: store, loop: loop, cancel: cancel, ran: make(chan error, 1)}
	go func() { inc.ran <- loop.Run(ctx) }()
	return inc, nil
}

// supervise waits for the running loop to stop; on a failure it starts a new one from the
// files after the backoff, until Close.
func (n *Node) supervise() {
	defer close(n.done)
	backoff := n.cfg.RestartBackoff
	for {
		inc := n.current()
		started := time.Now()
		var err error
		select {
		case err = <-inc.ran:
		case <-n.closing:
			inc.cancel()
			err = <-inc.ran
			if errors.Is(err, context.Canceled) {
				err = nil
			}
			n.setCloseErr(errors.Join(err, inc.store.Close()))
			return
		}
		if a, f := inc.loop.Current(), n.floor.Load(); f == nil || a.Index > f.Index {
			n.floor.Store(a) // only this goroutine writes it
		}
		inc.store.Close()
		// The backoff doubles, up to 30 s, while loops fail within a minute of starting
		// or the store will not open: a full disk stays full for a while, and each
		// attempt logs at error level.
		if time.Since(started) > time.Minute {
			backoff = n.cfg.RestartBackoff
		}
		n.cfg.Logger.Error("metadata log stopped; reopening it from its files", "node", n.cfg.NodeID, "err", err, "retry_in", backoff)
		for {
			select {
			case <-n.closing:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			next, err := n.start(false)
			if err == nil {
				n.inc.Store(next)
				break
			}
			n.cfg.Logger.Error("reopening the metadata log", "node", n.cfg.NodeID, "err", err, "retry_in", backoff)
		}
	}
}

func (n *Node) current() *incarnation {
	return n.inc.Load()
}

func (n *Node) setCloseErr(err error) {
	n.closeMu.Lock()
	n.closeErr = err
	n.closeMu.Unlock()
}

var errLoopFailed = errors.New("node: the metadata loop failed")

func (n *Node) awaitServing(ctx context.Context, inc *incarnation) error {
	for {
		_, ch, cancel := inc.loop.Subscribe(16)
		err := n.awaitServingOn(ctx, inc.loop, ch)
		cancel()
		if !errors.Is(err, errResubscribe) {
			return err
		}
	}
}

var errResubscribe = errors.New("node: subscription dropped")

// awaitServingOn waits on one subscription: Serving turns true when an entry is applied,
// and every apply is published.
func (n *Node) awaitServingOn(ctx context.Context, loop *quorum.Loop, ch <-chan *quorum.Applied) error {
	for {
		if _, ok := loop.Serving(); ok {
			return nil
		}
		select {
		case _, open := <-ch:
			if !open {
				if err := loop.Err(); err != nil {
					return fmt.Errorf("%w: %v", errLoopFailed, err)
				}
				return errResubscribe
			}
		case <-loop.Done():
			return fmt.Errorf("%w: %v", errLoopFailed, loop.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Image is the newest applied image and the raft index it is at.
func (n *Node) Image() (*metadata.Image, uint64) {
	a := n.applied()
	return a.State.(*metadata.Image), a.Index
}

// applied is the running loop's newest Applied, or the one a failed loop reached while a
// new loop has not applied that far yet.
func (n *Node) applied() *quorum.Applied {
	inc, floor := n.inc.Load(), n.floor.Load()
	a := inc.loop.Current()
	if floor != nil && floor.Index > a.Index {
		return floor
	}
	return a
}

// Propose appends records as one entry and returns its raft index once it is applied
// here (the image then holds it). A batch that does not apply to the current image is
// refused with an error wrapping metadata.ErrRefused and never proposed; a node that is
// not the controller answers quorum.ErrNotController.
func (n *Node) Propose(ctx context.Context, records []wire.MetadataRecord) (uint64, error) {
	n.proposeMu.Lock()
	defer n.proposeMu.Unlock()
	loop := n.current().loop
	select {
	case <-loop.Done():
		return 0, fmt.Errorf("%w: %v", ErrStopped, loop.Err())
	default:
	}
	if _, ok := loop.Serving(); !ok {
		return 0, quorum.ErrNotController
	}
	a := loop.Current()
	im, applied := a.State.(*metadata.Image), a.Index
	// The entry's index will be above applied; applied+1 stands in for it (it only
	// matters as a registration's epoch, which must exceed the broker's last one).
	if _, _, err := metadata.ApplyEntry(im, applied+1, records); err != nil {
		return 0, err
	}
	data, err := metadata.EncodeEntry(n.cfg.Now().UnixMilli(), records)
	if err != nil {
		return 0, err
	}
	return loop.Propose(ctx, data)
}

// WaitApplied returns once index is applied here.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	return n.current().loop.WaitApplied(ctx, index)
}

// Serving reports whether this node is the controller (the serving raft leader), and in
// which term.
func (n *Node) Serving() (term uint64, ok bool) { return n.current().loop.Serving() }

// Loop is the node's running quorum loop, for the transport that delivers peers' raft
// messages (Step) and for status requests; after a storage failure it is another one.
func (n *Node) Loop() *quorum.Loop { return n.current().loop }

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
// a subscriber that lets buf fill is dropped and its channel closed; so is every
// subscriber of a loop that stops).
func (n *Node) Subscribe(buf int) (first *quorum.Applied, ch <-chan *quorum.Applied, cancel func()) {
	return n.current().loop.Subscribe(buf)
}

// Close stops the loop and closes the log. Safe to call twice.
func (n *Node) Close() error {
	n.closeMu.Lock()
	first := !n.closed
	if first {
		n.closed = true
	}
	n.closeMu.Unlock()
	var netErr error
	if first {
		if n.net != nil {
			// The listener first: peers see the node gone at once and elect without it.
			netErr = n.net.close()
		}
		close(n.closing)
	}
	<-n.done
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if netErr != nil {
		n.closeErr = errors.Join(n.closeErr, netErr)
	}
	return n.closeErr
}
