package raftnet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/wire"
)

// Reporter takes the Sender's delivery reports: *quorum.Loop.
type Reporter interface {
	ReportUnreachable(id uint64) error
	ReportSnapshot(id uint64, status raft.SnapshotStatus) error
}

// SenderConfig configures a Sender. Zero limits take the defaults.
type SenderConfig struct {
	// Transport sends the requests (peer.TCP, or peer.Route over it); RaftMessage goes
	// on the control lane to NodeOf(message.To).
	Transport peer.Transport
	// NodeID and DirectoryID are this node's, sent with every request.
	NodeID      int32
	DirectoryID [16]byte
	// ClusterID is this node's cluster id, "" while it does not know one (a new
	// cluster's followers before the ClusterRecord is applied). Nil: never known.
	ClusterID func() string
	// OnReplaced is called (on a destination's goroutine) when a peer answers that this
	// node was replaced: the DirectoryId registered for NodeID is another one, so this
	// directory must stop taking part in raft under its raft id. Nil: logged only.
	OnReplaced func(peerNode int32)
	// QueueMessages and QueueBytes bound what one destination holds not yet sent
	// (1,024 messages, 64 MiB; the lane's bounds). One message larger than QueueBytes is
	// admitted into an empty queue only, so a large snapshot still goes.
	QueueMessages int
	QueueBytes    int64
	// BatchBytes is the most message bytes one request carries when more are queued
	// (4 MiB: four of raft's 1 MiB appends); a larger message goes alone.
	BatchBytes int64
	Logger     *slog.Logger
}

// Sender turns the quorum loop's Send calls into RaftMessage requests.
type Sender struct {
	cfg    SenderConfig
	max    int             // the largest message sent: MaxMessageBytes (tests lower it)
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	rep    atomic.Pointer[Reporter]

	mu     sync.Mutex
	dests  map[uint64]*dest
	closed bool
	wg     sync.WaitGroup
}

// dest is one destination raft id: its queue and the goroutine (run) that drains it.
type dest struct {
	s    *Sender
	id   uint64
	node int32
	wake chan struct{} // capacity 1

	mu    sync.Mutex
	queue []queued
	bytes int64
	// Reports owed to raft for messages that never reached the queue (dropped on
	// overload, a snapshot too large): flags, so that a burst of drops costs one report.
	unreachable, snapFailed bool

	lastLog time.Time // run's: rate-limits the failure log lines
}

type queued struct {
	m    *pb.Message
	size int
}

// NewSender returns a Sender; a destination's goroutine starts with its first message.
func NewSender(cfg SenderConfig) *Sender {
	if cfg.Transport == nil {
		panic("raftnet: SenderConfig.Transport is required")
	}
	if cfg.QueueMessages <= 0 {
		cfg.QueueMessages = peer.MaxQueued
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = peer.MaxQueuedBytes
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 4 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sender{cfg: cfg, max: MaxMessageBytes, ctx: ctx, cancel: cancel, dests: map[uint64]*dest{}}
}

// SetReporter sets where delivery reports go (the loop). Call it before the loop runs;
// until it is set, reports are dropped.
func (s *Sender) SetReporter(r Reporter) { s.rep.Store(&r) }

// Send queues ms for their destinations and returns at once: it is the loop's
// Options.Send. The messages must not be modified afterwards (raft does not).
func (s *Sender) Send(ms []*pb.Message) {
	for _, m := range ms {
		d := s.dest(m.GetTo())
		if d == nil {
			return // closed
		}
		d.push(m)
	}
}

// Close stops every destination's goroutine (what is queued is dropped) and waits for
// them.
func (s *Sender) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

func (s *Sender) dest(id uint64) *dest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	d := s.dests[id]
	if d == nil {
		d = &dest{s: s, id: id, node: NodeOf(id), wake: make(chan struct{}, 1)}
		s.dests[id] = d
		s.wg.Go(d.run)
	}
	return d
}

// push queues m, or drops it with the report raft needs.
func (d *dest) push(m *pb.Message) {
	size := proto.Size(m)
	snap := m.GetType() == pb.MessageType_MsgSnap
	d.mu.Lock()
	switch {
	case size > d.s.max:
		// Only a MsgSnap can be this large (appends are bounded by MaxSizePerMsg).
		d.snapFailed = d.snapFailed || snap
		d.unreachable = true
		d.mu.Unlock()
		d.s.cfg.Logger.Error("raftnet: raft message too large for one RaftMessage, not sent: the checkpoint exceeds the frame limit",
			"to_node", d.node, "to_raft_id", d.id, "type", m.GetType().String(), "bytes", size, "limit", d.s.max)
	case len(d.queue) > 0 && (len(d.queue) >= d.s.cfg.QueueMessages || d.bytes+int64(size) > d.s.cfg.QueueBytes):
		// Overload: raft resends what is lost (appends after a probe, heartbeats on the
		// next tick, a snapshot once its failure is reported).
		d.snapFailed = d.snapFailed || snap
		d.unreachable = true
		d.mu.Unlock()
	default:
		d.queue = append(d.queue, queued{m, size})
		d.bytes += int64(size)
		d.mu.Unlock()
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// take returns the next batch (in queue order, at most BatchBytes unless its first
// message alone is larger) and the reports owed.
func (d *dest) take() (batch []*pb.Message, unreachable, snapFailed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	unreachable, snapFailed = d.unreachable, d.snapFailed
	d.unreachable, d.snapFailed = false, false
	var n int
	var bytes int64
	for n < len(d.queue) && (n == 0 || bytes+int64(d.queue[n].size) <= d.s.cfg.BatchBytes) {
		batch = append(batch, d.queue[n].m)
		bytes += int64(d.queue[n].size)
		n++
	}
	d.queue = d.queue[n:]
	d.bytes -= bytes
	if len(d.queue) == 0 {
		d.queue = nil // let a large backlog's array go
	}
	return batch, unreachable, snapFailed
}

func (d *dest) run() {
	for {
		batch, unreachable, snapFailed := d.take()
		if unreachable {
			d.reportUnreachable()
		}
		if snapFailed {
			d.reportSnapshot(raft.SnapshotFailure)
		}
		if len(batch) > 0 {
			d.send(batch)
			continue
		}
		select {
		case <-d.wake:
		case <-d.s.ctx.Done():
			return
		}
	}
}

// send sends one batch and reports the outcome to raft.
func (d *dest) send(batch []*pb.Message) {
	req := wire.NewPtrRaftMessageRequest()
	if d.s.cfg.ClusterID != nil {
		req.ClusterID = d.s.cfg.ClusterID()
	}
	req.SenderNodeID, req.SenderDirectoryID = d.s.cfg.NodeID, d.s.cfg.DirectoryID
	req.DestinationRaftID = int64(d.id)
	snaps := 0
	for _, m := range batch {
		b, err := proto.Marshal(m)
		if err != nil {
			// raft's own messages always marshal; nothing to send if one does not.
			d.s.cfg.Logger.Error("raftnet: marshalling a raft message", "to_raft_id", d.id, "type", m.GetType().String(), "err", err)
			continue
		}
		req.Messages = append(req.Messages, b)
		if m.GetType() == pb.MessageType_MsgSnap {
			snaps++
		}
	}
	err := d.deliver(req)
	if err != nil {
		d.reportUnreachable()
		d.logFailure(err)
	}
	for range snaps {
		if err != nil {
			d.reportSnapshot(raft.SnapshotFailure)
		} else {
			d.reportSnapshot(raft.SnapshotFinish)
		}
	}
}

// deliver sends req and turns a refusal into an error.
func (d *dest) deliver(req *wire.RaftMessageRequest) error {
	resp, err := d.s.cfg.Transport.Send(d.s.ctx, d.node, peer.Control, req)
	if err != nil {
		return err
	}
	r, ok := resp.(*wire.RaftMessageResponse)
	if !ok {
		return errors.New("raftnet: not a RaftMessage response")
	}
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		if errors.Is(err, kerr.InconsistentVoterSet) && d.s.cfg.OnReplaced != nil {
			d.s.cfg.OnReplaced(d.node)
		}
		return err
	}
	return nil
}

// logFailure logs a failed delivery at most every 10 s per destination: a peer that is
// down fails every heartbeat.
func (d *dest) logFailure(err error) {
	if now := time.Now(); now.Sub(d.lastLog) >= 10*time.Second {
		d.lastLog = now
		lvl := slog.LevelWarn
		if errors.Is(err, kerr.InconsistentVoterSet) || errors.Is(err, kerr.InconsistentClusterID) {
			lvl = slog.LevelError
		}
		d.s.cfg.Logger.Log(d.s.ctx, lvl, "raftnet: raft messages not delivered", "to_node", d.node, "to_raft_id", d.id, "err", err)
	}
}

func (d *dest) reporter() Reporter {
	if r := d.s.rep.Load(); r != nil {
		return *r
	}
	return nil
}

// reportUnreachable is advisory (raft also probes on its own): one try.
func (d *dest) reportUnreachable() {
	if r := d.reporter(); r != nil {
		_ = r.ReportUnreachable(d.id)
	}
}

// reportSnapshot must reach raft (a snapshot never reported leaves the follower behind
// for good), so a full loop queue is retried until the loop stops or the Sender closes.
func (d *dest) reportSnapshot(status raft.SnapshotStatus) {
	r := d.reporter()
	if r == nil {
		return
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := r.ReportSnapshot(d.id, status)
		if !errors.Is(err, quorum.ErrQueueFull) {
			return
		}
		select {
		case <-time.After(wait):
		case <-d.s.ctx.Done():
			return
		}
	}
}
