// Package quorum is the metadata quorum loop: one goroutine per node owns the raft
// RawNode, the raftstore.Store under it and the applied state, and nothing else touches
// them. Its inputs come through one bounded queue (ticks, raft messages from peers,
// the transport's delivery reports, proposals, "applied index >= N" waiters); a full
// queue is refused with ErrQueueFull rather than blocking the sender (a peer's lane or a
// request handler).
//
// Per Ready, in raft's order: SaveReady (snapshot, entries, HardState, one fsync), then
// the messages are sent (never before they are durable), then the committed entries are
// applied and published, then Advance. Proposals are answered once their entry is
// applied; when the term changes or this node stops leading, every waiting proposal gets
// ErrNotController. A new leader accepts proposals only after the empty entry raft
// appends at the start of its term is applied, so it never answers from less than its
// log holds.
//
// The applied state is the State machine's value (an immutable image): Current returns
// the newest, Subscribe delivers each one and its delta in order.
package quorum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/internal/cluster/raftstore"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Machine is what the loop applies committed entries to: metadata.Machine in exactq (the
// image), small ones of their own in this package's tests. States are immutable values:
// Apply returns a new one.
type Machine interface {
	// Empty is the state of a log with nothing applied.
	Empty() any
	// Apply applies one committed entry's data at index to state.
	Apply(state any, index uint64, data []byte) (next any, delta any, err error)
	// Encode is state's checkpoint data; Decode reads it back.
	Encode(state any) ([]byte, error)
	Decode(data []byte) (any, error)
}

// Applied is one applied state, published in index order.
type Applied struct {
	Index uint64 // the last applied raft index
	State any    // the Machine's state after Index
	// Deltas are the Machine's deltas of the entries since the previous Applied, in
	// order (none after a snapshot, or when only raft's own entries were applied).
	Deltas []any
	// Snapshot is true when State was installed from a snapshot rather than by Apply.
	Snapshot bool
}

// Errors the loop's callers see.
var (
	ErrQueueFull     = errors.New("quorum: input queue full")
	ErrNotController = errors.New("quorum: not the controller (not the raft leader, or its term's first entry is not applied yet)")
	ErrStopped       = errors.New("quorum: loop stopped")
	ErrEmptyProposal = errors.New("quorum: empty proposal") // raft's own entries are empty; ours never are
)

// Options configure a Loop. Zero values take the design's defaults.
type Options struct {
	ID    uint64 // this node's raft id
	Store *raftstore.Store
	// Voters bootstraps a new, empty store: the raft ids of the initial voters (this node
	// among them). Sorted before use, so every voter of a new cluster writes the same
	// first entries. Ignored when the store has a log.
	Voters []uint64
	// Join starts a new, empty store without bootstrapping it: this node is no member
	// until the leader adds it (a learner, then a voter: AddRaftVoter) and its first
	// MsgApp or MsgSnap brings the log and the configuration. Voters are then ignored.
	Join    bool
	Machine Machine
	// Send delivers raft messages to peers; called on the loop goroutine after the
	// messages' Ready is durable. It must not block (queue and drop on overload: raft
	// resends).
	Send func([]*pb.Message)

	QueueSize    int           // the input queue's capacity; 0 = 4096
	TickInterval time.Duration // 0 = no ticker: the caller ticks with Tick (tests)
	ElectionTick int           // ticks; 0 = 10 (quorum.election.timeout.ms 1,000 / 100 ms)
	// Snapshot cadence: a checkpoint is written once SnapshotBytes of entry data were
	// applied since the last one (metadata.log.max.record.bytes.between.snapshots, 20 MiB)
	// or SnapshotInterval passed with something applied (metadata.log.max.snapshot.interval.ms, 1 h).
	SnapshotBytes    uint64
	SnapshotInterval time.Duration
	CatchUpEntries   uint64           // entries kept behind a checkpoint; 0 = 5,000
	Now              func() time.Time // nil = time.Now
	Logger           *slog.Logger
	RaftLogger       raft.Logger // nil = raft's default
}

// Loop is one node's quorum loop.
type Loop struct {
	opts Options
	in   chan input
	done chan struct{}
	err  error // why Run stopped; read after done is closed
	cur  atomic.Pointer[Applied]
	// servingTerm is the term this node serves as controller in, 0 when it does not
	// (written by the loop goroutine, read by anyone through Serving).
	servingTerm atomic.Uint64
	// lead is the raft leader this node knows of (raft's SoftState.Lead), 0 when none:
	// written by the loop goroutine, read by anyone through Leader.
	lead   atomic.Uint64
	subsMu sync.Mutex
	subs   map[*subscriber]struct{}
	// membersPub is members for other goroutines (Members).
	membersPub atomic.Pointer[map[uint64]Member]

	// Owned by the Run goroutine.
	rn            *raft.RawNode
	cs            *pb.ConfState
	state         any
	applied       uint64
	term          uint64 // the term of the last HardState seen
	leading       bool
	serving       bool // leading, and this term's first entry is applied
	pending       []*proposal
	waiters       []*waiter
	lastAssigned  uint64
	sinceSnapshot uint64
	snapshotAt    time.Time
	begun         bool // Poll did begin
	// members are the members known from conf change contexts (copied on write: the
	// map is published).
	members map[uint64]Member
	// heard and caughtUp are, while leading, when each peer's last message arrived and
	// when its Match last reached the commit index.
	heard, caughtUp map[uint64]time.Time
	confInFlight    bool // a conf change proposed in this term is not applied yet
}

type inputKind int

const (
	inTick inputKind = iota
	inMessage
	inPropose
	inWait
	inStatus
	inUnreachable
	inSnapshotStatus
	inDescribe
)

type input struct {
	kind   inputKind
	msg    *pb.Message
	prop   *proposal
	wait   *waiter
	status chan raft.BasicStatus
	desc   chan Status
	peer   uint64              // inUnreachable, inSnapshotStatus: the raft id reported on
	snap   raft.SnapshotStatus // inSnapshotStatus
}

type proposal struct {
	data  []byte
	conf  *pb.ConfChangeV2 // a conf change instead of data
	index uint64           // assigned when raft appended it
	term  uint64
	// refused: raft appended an empty entry in place of this conf change.
	refused bool
	reply   chan Proposed
}

// Proposed is a proposal's answer: the raft index of its entry once applied here, or why
// it was not (ErrNotController, ErrStopped).
type Proposed struct {
	Index uint64
	Err   error
}

type waiter struct {
	index uint64
	reply chan error
}

type subscriber struct{ ch chan *Applied }

// New makes a loop over opts.Store: a new store is bootstrapped with opts.Voters, a used
// one restarts from its checkpoint and log. Run starts it.
func New(opts Options) (*Loop, error) {
	if opts.ID == 0 || opts.Store == nil || opts.Machine == nil || opts.Send == nil {
		return nil, errors.New("quorum: ID, Store, Machine and Send are required")
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.ElectionTick <= 0 {
		opts.ElectionTick = 10
	}
	if opts.SnapshotBytes == 0 {
		opts.SnapshotBytes = 20 << 20
	}
	if opts.SnapshotInterval <= 0 {
		opts.SnapshotInterval = time.Hour
	}
	if opts.CatchUpEntries == 0 {
		opts.CatchUpEntries = 5000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Loop{opts: opts, in: make(chan input, opts.QueueSize), done: make(chan struct{}), subs: map[*subscriber]struct{}{},
		heard: map[uint64]time.Time{}, caughtUp: map[uint64]time.Time{}}
	ms := opts.Store.Storage()
	snap, err := ms.Snapshot()
	if err != nil {
		return nil, err
	}
	if err := commitLoneVoterLog(ms, opts.ID); err != nil {
		return nil, err
	}
	l.state = opts.Machine.Empty()
	if !raft.IsEmptySnap(snap) {
		var members map[uint64]Member
		if l.state, members, err = l.decodeCheckpoint(snap.GetData()); err != nil {
			return nil, fmt.Errorf("quorum: checkpoint %d: %w", snap.GetMetadata().GetIndex(), err)
		}
		l.applied = snap.GetMetadata().GetIndex()
		l.setMembers(members)
	}
	cfg := &raft.Config{
		ID: opts.ID, ElectionTick: opts.ElectionTick, HeartbeatTick: 1, Storage: ms, Applied: l.applied,
		CheckQuorum: true, PreVote: true, StepDownOnRemoval: true, DisableProposalForwarding: true,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256,
		MaxUncommittedEntriesSize: 64 << 20, MaxCommittedSizePerReady: 16 << 20,
		Logger: opts.RaftLogger,
	}
	if l.rn, err = raft.NewRawNode(cfg); err != nil {
		return nil, err
	}
	last, _ := ms.LastIndex()
	hs, cs, _ := ms.InitialState()
	if last == 0 && raft.IsEmptyHardState(hs) && opts.Join {
		cs = &pb.ConfState{}
	} else if last == 0 && raft.IsEmptyHardState(hs) {
		if len(opts.Voters) == 0 {
			return nil, errors.New("quorum: a new store needs its voters")
		}
		voters := slices.Sorted(slices.Values(opts.Voters))
		if !slices.Contains(voters, opts.ID) {
			return nil, fmt.Errorf("quorum: raft id %d is not among the voters %v", opts.ID, voters)
		}
		peers := make([]raft.Peer, 0, len(voters))
		for _, v := range slices.Compact(voters) {
			peers = append(peers, raft.Peer{ID: v})
		}
		if err := l.rn.Bootstrap(peers); err != nil {
			return nil, err
		}
		cs = &pb.ConfState{}
	}
	l.cs = cs
	l.term = hs.GetTerm()
	l.snapshotAt = opts.Now()
	l.cur.Store(&Applied{Index: l.applied, State: l.state, Snapshot: !raft.IsEmptySnap(snap)})
	return l, nil
}

// commitLoneVoterLog raises the stored Commit to the last index when the log's voter set
// is this node alone (its checkpoint's voters and every conf change after it add only
// id). A lone voter is its own majority, so every entry durable in its log is committed,
// but quorum-state's Commit is only rewritten with Term and Vote: without this, a lone
// voter that cannot win its election after a restart (a full disk cannot take the new
// term) would apply only up to that stale Commit, and its image would lose what the log
// holds.
func commitLoneVoterLog(ms *raft.MemoryStorage, id uint64) error {
	hs, cs, err := ms.InitialState()
	if err != nil {
		return err
	}
	for _, v := range append(slices.Clone(cs.GetVoters()), cs.GetLearners()...) {
		if v != id {
			return nil
		}
	}
	first, _ := ms.FirstIndex()
	last, _ := ms.LastIndex()
	if last < first || hs.GetCommit() >= last {
		return nil
	}
	ents, err := ms.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		return err
	}
	for _, e := range ents {
		cc, err := confChangeOf(e)
		if err != nil {
			return err
		}
		if cc == nil {
			continue
		}
		for _, c := range cc.AsV2().GetChanges() {
			if c.GetType() != pb.ConfChangeType_ConfChangeAddNode || c.GetNodeId() != id {
				return nil // the voter set changed: only raft knows what is committed
			}
		}
	}
	hs.Commit = proto.Uint64(last)
	return ms.SetHardState(hs)
}

// LogVoters is the voter set ms's log holds: its checkpoint's voters changed by every
// conf change entry after it, committed or not (what a node restarting from it would
// have once it applies them). empty reports a store with no log at all (a new
// directory, which bootstraps with Options.Voters).
func LogVoters(ms *raft.MemoryStorage) (voters []uint64, empty bool, err error) {
	hs, cs, err := ms.InitialState()
	if err != nil {
		return nil, false, err
	}
	first, _ := ms.FirstIndex()
	last, _ := ms.LastIndex()
	if last == 0 && raft.IsEmptyHardState(hs) {
		return nil, true, nil
	}
	set := map[uint64]bool{}
	for _, v := range cs.GetVoters() {
		set[v] = true
	}
	if last >= first {
		ents, err := ms.Entries(first, last+1, math.MaxUint64)
		if err != nil {
			return nil, false, err
		}
		for _, e := range ents {
			cc, err := confChangeOf(e)
			if err != nil {
				return nil, false, err
			}
			if cc == nil {
				continue
			}
			for _, c := range cc.AsV2().GetChanges() {
				switch c.GetType() {
				case pb.ConfChangeType_ConfChangeAddNode:
					set[c.GetNodeId()] = true
				case pb.ConfChangeType_ConfChangeRemoveNode, pb.ConfChangeType_ConfChangeAddLearnerNode:
					delete(set, c.GetNodeId())
				}
			}
		}
	}
	for v := range set {
		voters = append(voters, v)
	}
	slices.Sort(voters)
	return voters, false, nil
}

// confChangeOf decodes a conf change entry (nil for any other entry).
func confChangeOf(e *pb.Entry) (pb.ConfChangeI, error) {
	var cc pb.ConfChangeI
	switch e.GetType() {
	case pb.EntryConfChange:
		cc = &pb.ConfChange{}
	case pb.EntryConfChangeV2:
		cc = &pb.ConfChangeV2{}
	default:
		return nil, nil
	}
	if err := proto.Unmarshal(e.GetData(), cc.(proto.Message)); err != nil {
		return nil, fmt.Errorf("quorum: conf change at %d: %w", e.GetIndex(), err)
	}
	return cc, nil
}

// Run drives the loop until ctx ends or the store fails; it returns why it stopped.
// Everything waiting gets ErrStopped.
func (l *Loop) Run(ctx context.Context) error {
	err := l.run(ctx)
	l.stop(err)
	return err
}

// stop ends the loop with err: everything waiting gets ErrStopped, subscriptions close.
func (l *Loop) stop(err error) {
	l.err = err
	close(l.done)
	for _, p := range l.pending {
		p.reply <- Proposed{Err: ErrStopped}
	}
	for _, w := range l.waiters {
		w.reply <- ErrStopped
	}
	l.subsMu.Lock()
	for s := range l.subs {
		close(s.ch)
		delete(l.subs, s)
	}
	l.subsMu.Unlock()
}

// begin is the loop's start: the bootstrap entries' Ready, then a lone voter campaigns
// at once (zero-config serve is leader after one Ready rather than after an election
// timeout); learners do not vote, so one with learners too.
func (l *Loop) begin() error {
	if err := l.handleReady(); err != nil {
		return err
	}
	if len(l.cs.GetVoters()) == 1 && l.cs.GetVoters()[0] == l.opts.ID {
		if err := l.rn.Campaign(); err != nil {
			return err
		}
	}
	return nil
}

func (l *Loop) run(ctx context.Context) error {
	var tick <-chan time.Time
	if l.opts.TickInterval > 0 {
		t := time.NewTicker(l.opts.TickInterval)
		defer t.Stop()
		tick = t.C
	}
	if err := l.begin(); err != nil {
		return err
	}
	for {
		if err := l.handleReady(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			l.rn.Tick()
		case in := <-l.in:
			l.handle(in)
		}
	}
}

func (l *Loop) handle(in input) {
	switch in.kind {
	case inTick:
		l.rn.Tick()
	case inMessage:
		// A message for a term or a peer raft no longer knows is raft's to ignore; its
		// error says only that (ErrStepLocalMsg, ErrStepPeerNotFound).
		if err := l.rn.Step(in.msg); err != nil {
			l.opts.Logger.Debug("quorum: step", "from", in.msg.GetFrom(), "type", in.msg.GetType(), "err", err)
		}
		l.noteHeard(in.msg)
	case inPropose:
		if !l.serving {
			in.prop.reply <- Proposed{Err: ErrNotController}
			return
		}
		if in.prop.conf != nil {
			if err := l.proposeConfChange(in.prop); err != nil {
				in.prop.reply <- Proposed{Err: err}
				return
			}
		} else if err := l.rn.Propose(in.prop.data); err != nil {
			if errors.Is(err, raft.ErrProposalDropped) {
				err = ErrNotController
			}
			in.prop.reply <- Proposed{Err: err}
			return
		}
		in.prop.term = l.term
		l.pending = append(l.pending, in.prop)
	case inWait:
		if l.applied >= in.wait.index {
			in.wait.reply <- nil
			return
		}
		l.waiters = append(l.waiters, in.wait)
	case inStatus:
		in.status <- l.rn.BasicStatus()
	case inDescribe:
		in.desc <- l.status()
	case inUnreachable:
		l.rn.ReportUnreachable(in.peer)
	case inSnapshotStatus:
		l.rn.ReportSnapshot(in.peer, in.snap)
	}
}

func (l *Loop) handleReady() error {
	for l.rn.HasReady() {
		rd := l.rn.Ready()
		if err := l.opts.Store.SaveReady(rd); err != nil {
			return fmt.Errorf("quorum: %w", err)
		}
		if hs := rd.HardState; hs != nil && hs.GetTerm() != l.term {
			l.term = hs.GetTerm()
			l.loseLeadership()
		}
		if ss := rd.SoftState; ss != nil {
			l.lead.Store(ss.Lead)
			leading := ss.RaftState == raft.StateLeader
			if l.leading && !leading {
				l.loseLeadership()
			}
			if leading && !l.leading {
				// A new term's view of its peers: nothing heard from them yet.
				clear(l.heard)
				clear(l.caughtUp)
			}
			l.leading = leading
		}
		l.assign(rd.Entries)
		if len(rd.Messages) > 0 {
			l.opts.Send(rd.Messages)
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := l.installSnapshot(rd.Snapshot); err != nil {
				return err
			}
		}
		if err := l.apply(rd.CommittedEntries); err != nil {
			return err
		}
		l.rn.Advance(rd)
	}
	return nil
}

// assign gives the proposals waiting for their index the entries this node appended as
// leader, in order: raft appends one entry per accepted Propose or ProposeConfChange, and
// the only entries without data never carry a proposal: its own empty entry at the
// start of the term, and a conf change it refused (it appends an empty entry in its
// place), which the conf change proposal then meets.
func (l *Loop) assign(ents []*pb.Entry) {
	if !l.leading {
		return
	}
	i := 0
	for i < len(l.pending) && l.pending[i].index != 0 {
		i++
	}
	for _, e := range ents {
		if e.GetIndex() <= l.lastAssigned || e.GetTerm() != l.term {
			continue
		}
		conf := e.GetType() == pb.EntryConfChangeV2
		refusedConf := e.GetType() == pb.EntryNormal && len(e.GetData()) == 0 && i < len(l.pending) && l.pending[i].conf != nil
		if !conf && !refusedConf && (e.GetType() != pb.EntryNormal || len(e.GetData()) == 0) {
			continue
		}
		l.lastAssigned = e.GetIndex()
		if i < len(l.pending) {
			l.pending[i].index = e.GetIndex()
			l.pending[i].refused = refusedConf
			i++
		}
	}
}

// loseLeadership fails every waiting proposal: the retry goes to the new controller. An
// entry it proposed may still commit under the next leader (the retry then meets its own
// effect, as after a KRaft controller failover).
func (l *Loop) loseLeadership() {
	l.serving = false
	l.confInFlight = false
	l.servingTerm.Store(0)
	for _, p := range l.pending {
		p.reply <- Proposed{Err: ErrNotController}
	}
	l.pending = nil
}

func (l *Loop) installSnapshot(snap *pb.Snapshot) error {
	st, members, err := l.decodeCheckpoint(snap.GetData())
	if err != nil {
		return fmt.Errorf("quorum: snapshot %d from the leader: %w", snap.GetMetadata().GetIndex(), err)
	}
	l.state, l.applied, l.cs = st, snap.GetMetadata().GetIndex(), snap.GetMetadata().GetConfState()
	l.setMembers(members)
	l.sinceSnapshot, l.snapshotAt = 0, l.opts.Now()
	l.publish(&Applied{Index: l.applied, State: st, Snapshot: true})
	l.release()
	return nil
}

func (l *Loop) apply(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	var deltas []any
	var answers []func() // sent after publishing, so a caller sees its entry in Current
	for _, e := range ents {
		if e.GetIndex() <= l.applied {
			continue
		}
		switch e.GetType() {
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			cc, err := confChangeOf(e)
			if err != nil {
				return err
			}
			l.cs = l.rn.ApplyConfChange(cc)
			l.noteMembers(cc)
		default:
			if len(e.GetData()) > 0 {
				st, d, err := l.opts.Machine.Apply(l.state, e.GetIndex(), e.GetData())
				if err != nil {
					// Entries are facts the controller validated: one that does not apply
					// means the images diverged, and going on would spread it.
					return fmt.Errorf("quorum: applying entry %d: %w", e.GetIndex(), err)
				}
				l.state = st
				if d != nil {
					deltas = append(deltas, d)
				}
				l.sinceSnapshot += uint64(len(e.GetData()))
			}
		}
		l.applied = e.GetIndex()
		if l.leading && e.GetTerm() == l.term {
			l.serving = true // this term's first entry (raft's empty one) is applied
		}
		for len(l.pending) > 0 && l.pending[0].index != 0 && l.pending[0].index <= l.applied {
			p := l.pending[0]
			l.pending = l.pending[1:]
			ans := Proposed{Index: p.index}
			switch {
			case p.index == e.GetIndex() && e.GetTerm() != p.term:
				ans = Proposed{Err: ErrNotController} // its index holds another leader's entry
			case p.refused:
				ans = Proposed{Err: ErrChangePending}
			}
			if p.conf != nil {
				l.confInFlight = false
			}
			answers = append(answers, func() { p.reply <- ans })
		}
	}
	l.publish(&Applied{Index: l.applied, State: l.state, Deltas: deltas})
	for _, a := range answers {
		a()
	}
	l.release()
	return l.maybeCheckpoint()
}

func (l *Loop) release() {
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		if w.index <= l.applied {
			w.reply <- nil
		} else {
			kept = append(kept, w)
		}
	}
	l.waiters = kept
}

func (l *Loop) maybeCheckpoint() error {
	if l.sinceSnapshot == 0 || (l.sinceSnapshot < l.opts.SnapshotBytes && l.opts.Now().Sub(l.snapshotAt) < l.opts.SnapshotInterval) {
		return nil
	}
	data, err := l.encodeCheckpoint(l.state)
	if err != nil {
		return fmt.Errorf("quorum: encoding the checkpoint at %d: %w", l.applied, err)
	}
	if _, err := l.opts.Store.Checkpoint(l.applied, l.cs, data); err != nil {
		return fmt.Errorf("quorum: checkpoint at %d: %w", l.applied, err)
	}
	if _, err := l.opts.Store.Compact(l.opts.CatchUpEntries); err != nil {
		return fmt.Errorf("quorum: compaction after %d: %w", l.applied, err)
	}
	l.sinceSnapshot, l.snapshotAt = 0, l.opts.Now()
	return nil
}

func (l *Loop) publish(a *Applied) {
	// Under the lock, so that a subscriber gets a either as its first or on its channel,
	// never both nor neither.
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	l.cur.Store(a)
	if l.serving {
		// After Current, so that whoever sees Serving finds every entry before this
		// term's first in Current (node.Propose checks a batch against it); before the
		// subscribers hear of a, so that one woken by it sees Serving.
		l.servingTerm.Store(l.term)
	}
	for s := range l.subs {
		select {
		case s.ch <- a:
		default:
			// A subscriber that fell a whole buffer behind cannot be given its deltas in
			// order any more; its channel is closed and it resubscribes from Current.
			close(s.ch)
			delete(l.subs, s)
		}
	}
}

func (l *Loop) enqueue(in input) error {
	select {
	case <-l.done:
		return ErrStopped
	default:
	}
	select {
	case l.in <- in:
		return nil
	default:
		return ErrQueueFull
	}
}

// Tick advances raft's logical clock by one tick (when Options.TickInterval is 0).
func (l *Loop) Tick() error { return l.enqueue(input{kind: inTick}) }

// Step hands the loop a raft message from a peer.
func (l *Loop) Step(m *pb.Message) error { return l.enqueue(input{kind: inMessage, msg: m}) }

// ReportUnreachable tells raft that a message to peer (a raft id) was not delivered (a
// failed connection, a full lane), so a leader replicating to it optimistically falls
// back to probing instead of waiting for answers to appends that were lost.
func (l *Loop) ReportUnreachable(peer uint64) error {
	return l.enqueue(input{kind: inUnreachable, peer: peer})
}

// ReportSnapshot tells raft whether the MsgSnap sent to peer arrived (SnapshotFinish) or
// not (SnapshotFailure). A leader sends nothing else to a follower with a snapshot in
// flight, so a lost snapshot that is never reported leaves that follower behind for
// good; the transport must report every MsgSnap it sends or drops, and retry the report
// when the queue is full.
func (l *Loop) ReportSnapshot(peer uint64, status raft.SnapshotStatus) error {
	return l.enqueue(input{kind: inSnapshotStatus, peer: peer, snap: status})
}

// Propose proposes data (a metadata batch) and returns its entry's raft index once it is
// applied here, or ErrNotController if this node is not the serving leader or loses
// leadership first.
func (l *Loop) Propose(ctx context.Context, data []byte) (uint64, error) {
	reply, err := l.ProposeAsync(data)
	if err != nil {
		return 0, err
	}
	select {
	case p := <-reply:
		return p.Index, p.Err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-l.done:
		select {
		case p := <-reply:
			return p.Index, p.Err
		default:
			return 0, ErrStopped
		}
	}
}

// ProposeAsync queues a proposal of data and returns at once; the channel gets Propose's
// answer, exactly once, unless the loop is dropped without stopping (a simulated crash).
func (l *Loop) ProposeAsync(data []byte) (<-chan Proposed, error) {
	if len(data) == 0 {
		return nil, ErrEmptyProposal
	}
	p := &proposal{data: data, reply: make(chan Proposed, 1)}
	if err := l.enqueue(input{kind: inPropose, prop: p}); err != nil {
		return nil, err
	}
	return p.reply, nil
}

// Poll drives the loop on the caller's goroutine instead of Run (the deterministic
// simulation, sim/cluster): it handles every input queued so far (Tick, Step,
// ProposeAsync, WaitApplied), one at a time in order, each followed by the Readys it
// causes (SaveReady, Send, apply and publish, Advance), exactly as Run would, and
// returns how many it handled. The first call also does what Run does at start (the
// bootstrap entries, a lone voter's campaign). An error stops the loop as it would stop
// Run (everything waiting gets ErrStopped); later calls return it again. Never call
// Poll on a loop that Run drives, nor from two goroutines.
func (l *Loop) Poll() (int, error) {
	select {
	case <-l.done:
		return 0, l.err
	default:
	}
	if !l.begun {
		l.begun = true
		if err := l.begin(); err != nil {
			l.stop(err)
			return 0, err
		}
	}
	n := 0
	for {
		if err := l.handleReady(); err != nil {
			l.stop(err)
			return n, err
		}
		select {
		case in := <-l.in:
			l.handle(in)
			n++
		default:
			return n, nil
		}
	}
}

// RaftStatus is raft's BasicStatus read directly: only for the goroutine that calls
// Poll (Status asks the Run goroutine).
func (l *Loop) RaftStatus() raft.BasicStatus { return l.rn.BasicStatus() }

// WaitApplied returns once index is applied on this node.
func (l *Loop) WaitApplied(ctx context.Context, index uint64) error {
	if l.cur.Load().Index >= index {
		return nil
	}
	w := &waiter{index: index, reply: make(chan error, 1)}
	if err := l.enqueue(input{kind: inWait, wait: w}); err != nil {
		return err
	}
	return l.await(ctx, w.reply)
}

func (l *Loop) await(ctx context.Context, reply <-chan error) error {
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-l.done:
		select {
		case err := <-reply:
			return err
		default:
			return ErrStopped
		}
	}
}

// Describe is the quorum as this node sees it, read on the loop goroutine: on the leader
// with every member's progress (DescribeQuorum).
func (l *Loop) Describe(ctx context.Context) (Status, error) {
	ch := make(chan Status, 1)
	if err := l.enqueue(input{kind: inDescribe, desc: ch}); err != nil {
		return Status{}, err
	}
	select {
	case st := <-ch:
		return st, nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	case <-l.done:
		return Status{}, ErrStopped
	}
}

// Status is raft's BasicStatus, read on the loop goroutine.
func (l *Loop) Status(ctx context.Context) (raft.BasicStatus, error) {
	ch := make(chan raft.BasicStatus, 1)
	if err := l.enqueue(input{kind: inStatus, status: ch}); err != nil {
		return raft.BasicStatus{}, err
	}
	select {
	case st := <-ch:
		return st, nil
	case <-ctx.Done():
		return raft.BasicStatus{}, ctx.Err()
	case <-l.done:
		return raft.BasicStatus{}, ErrStopped
	}
}

// Serving reports whether this node is the serving leader (the controller): raft leader
// with its term's first entry applied, so proposals are accepted; term is that term.
func (l *Loop) Serving() (term uint64, ok bool) {
	t := l.servingTerm.Load()
	return t, t != 0
}

// Leader is the raft id of the leader this node last heard of, 0 when it knows none (an
// election is on, or the loop stopped). Brokers send controller requests there: the
// leader serves them once its term's first entry is applied (Serving), and answers
// NOT_CONTROLLER until then, which they retry.
func (l *Loop) Leader() uint64 {
	select {
	case <-l.done:
		return 0
	default:
		return l.lead.Load()
	}
}

// Done is closed when the loop has stopped; Err then says why.
func (l *Loop) Done() <-chan struct{} { return l.done }

// Err is why the loop stopped, once Done is closed.
func (l *Loop) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// Current is the newest applied state.
func (l *Loop) Current() *Applied { return l.cur.Load() }

// Subscribe returns a channel of every Applied after the current one, in order, buffered
// to buf. A subscriber that lets the buffer fill is dropped: its channel is closed.
// cancel unsubscribes.
func (l *Loop) Subscribe(buf int) (first *Applied, ch <-chan *Applied, cancel func()) {
	s := &subscriber{ch: make(chan *Applied, max(buf, 1))}
	l.subsMu.Lock()
	defer l.subsMu.Unlock()
	select {
	case <-l.done:
		close(s.ch)
		return l.cur.Load(), s.ch, func() {}
	default:
	}
	l.subs[s] = struct{}{}
	return l.cur.Load(), s.ch, func() {
		l.subsMu.Lock()
		defer l.subsMu.Unlock()
		if _, ok := l.subs[s]; ok {
			delete(l.subs, s)
			close(s.ch)
		}
	}
}
