package cluster

import (
	"container/heap"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	stdlog "log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/cluster/raftstore"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Timing of the simulated cluster (virtual time). The raft tick and election timeout
// are the design's (100 ms, 10 ticks); the network is a LAN with jitter.
const (
	tickInterval    = 100 * time.Millisecond
	electionTick    = 10
	minDelay        = 1 * time.Millisecond
	maxDelay        = 15 * time.Millisecond
	localDelay      = 50 * time.Microsecond // a broker to the controller on its own node (peer.Local)
	startClockMs    = 1_700_000_000_000
	traceTailOnFail = 300
	// Small checkpoints and catch-up windows so that crashes meet checkpoints, compaction
	// and MsgSnap, not only a log replayed from its first entry.
	snapshotBytes  = 2 << 10
	catchUpEntries = 8
)

// lane separates raft traffic from controller RPCs: each has its own FIFO per ordered
// pair of nodes, as the transport's lanes do.
type lane int

const (
	laneRaft lane = iota
	laneRPC
	numLanes
)

type eventKind int

const (
	evTick    eventKind = iota // a node's 100 ms tick (raft and its controller)
	evRaft                     // a raft message arrives
	evRequest                  // a broker's request arrives at a node's controller
	evReply                    // a controller's answer arrives at a broker
	evBroker                   // a broker's timer
	evFault                    // the fault schedule's next move
	evRestart                  // a crashed node comes back
	evResume                   // a paused node runs again
	evReport                   // the transport reports a raft message's fate to its sender
)

type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	node int // the node the event happens at (evBroker: the broker's index)
	from int
	gen  int // the destination's process generation when scheduled (evTick, evResume)
	raft []byte
	rpc  *rpc
	// sentGen is the sender's connection generation: a connection reset (a cut, a
	// crash) drops what was in flight on it.
	sentGen int
	ln      lane
	what    string // for the trace
	snap    bool   // a MsgSnap
	// senderGen is the sending process's life (evRaft): a report goes to it only.
	senderGen int
	lost      bool // evReport: the message was lost (else: a MsgSnap arrived)
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// faults are the network's and nodes' misbehaviour knobs, drawn per seed.
type faults struct {
	dropPct, dupPct int           // per message, in percent
	meanFault       time.Duration // mean time between fault moves
}

// world is one seeded history: nodes, brokers, the network and the virtual clock, all
// stepped on the test's goroutine.
type world struct {
	seed    uint64
	rng     *rand.Rand
	now     time.Duration // virtual time since the start
	q       eventQueue
	seq     uint64
	nodes   []*simNode
	brokers []*simBroker
	f       faults
	// cut[a][b]: messages from node a to node b are lost (one direction of a partition).
	cut [][]bool
	// connGen[a][b] counts resets of the connection a->b; a message sent on an older
	// one is dropped on arrival.
	connGen [][]int
	// lastAt[a][b][lane] keeps each lane FIFO: nothing overtakes what was sent before.
	lastAt [][][numLanes]time.Duration
	healed bool // no cut, no node down or paused: the liveness clock runs
	// healthySince is when the cluster last became healthy (healed); -1 while it is not.
	healthySince time.Duration
	chaosUntil   time.Duration // faults are scheduled until then; afterwards only healing

	trace     []string // the last traceTailOnFail lines
	traceHash hash.Hash64
	lines     int
	errs      []string
	stats     map[string]int
	chk       checker
	tempDir   func() string
	// lyingDisk makes every crash lose writes that were fsynced (the newest part of the
	// log and quorum-state), a disk raft cannot be safe on: only the test that shows the
	// checks catch it sets it.
	lyingDisk bool
	snapSent  []string // MsgSnaps sent, for the diagnosis of a cluster that does not settle
	// reportDelivery: the transport reports lost raft messages and delivered snapshots
	// to their sender, as quorum.Loop's ReportUnreachable and ReportSnapshot ask.
	reportDelivery bool
	rc             *reconfig // the voter change under way, nil when none
}

func newWorld(seed uint64, voters int, chaos time.Duration, tempDir func() string) *world {
	w := &world{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), traceHash: fnv.New64a(), stats: map[string]int{},
		tempDir: tempDir, chaosUntil: chaos, healthySince: 0, healed: true, reportDelivery: true}
	w.f = faults{dropPct: w.rng.IntN(4), dupPct: w.rng.IntN(3), meanFault: time.Duration(1500+w.rng.IntN(3000)) * time.Millisecond}
	w.chk = newChecker()
	w.cut = make([][]bool, voters)
	w.connGen = make([][]int, voters)
	w.lastAt = make([][][numLanes]time.Duration, voters)
	for i := range voters {
		w.cut[i] = make([]bool, voters)
		w.connGen[i] = make([]int, voters)
		w.lastAt[i] = make([][numLanes]time.Duration, voters)
	}
	var ids []uint64
	for i := range voters {
		ids = append(ids, node.RaftID(int32(i+1)))
	}
	for i := range voters {
		n := &simNode{w: w, index: i, id: int32(i + 1), dir: tempDir(), voters: ids}
		w.nodes = append(w.nodes, n)
		w.brokers = append(w.brokers, newBroker(w, n))
	}
	w.tracef("seed %d: %d voters, drop %d%%, dup %d%%, a fault every %v on average", seed, voters, w.f.dropPct, w.f.dupPct, w.f.meanFault)
	for _, n := range w.nodes {
		n.start()
		// Ticks of different nodes are out of phase, as their processes' tickers are.
		w.schedule(&event{at: time.Duration(w.rng.Int64N(int64(tickInterval))), kind: evTick, node: n.index, gen: n.gen})
	}
	for _, b := range w.brokers {
		b.start()
	}
	w.schedule(&event{at: w.faultDelay(), kind: evFault})
	return w
}

func (w *world) faultDelay() time.Duration {
	return time.Duration(w.rng.Int64N(int64(2 * w.f.meanFault)))
}

func (w *world) schedule(e *event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.q, e)
}

func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("%9.3fs ", w.now.Seconds()) + fmt.Sprintf(format, args...)
	w.traceHash.Write([]byte(line))
	w.traceHash.Write([]byte{'\n'})
	w.lines++
	if len(w.trace) == traceTailOnFail && !*flagTrace {
		copy(w.trace, w.trace[1:])
		w.trace = w.trace[:traceTailOnFail-1]
	}
	w.trace = append(w.trace, line)
}

func (w *world) failf(format string, args ...any) {
	msg := fmt.Sprintf("%9.3fs ", w.now.Seconds()) + fmt.Sprintf(format, args...)
	w.tracef("VIOLATION %s", msg)
	w.errs = append(w.errs, msg)
}

// send puts a message on the a->b lane: lost across a cut or by the drop rate, else
// delivered after a seeded delay but never before what was sent earlier on that lane,
// sometimes twice.
func (w *world) send(e *event, from, to int, what string) {
	e.from, e.node = from, to
	e.what = what
	if w.cut[from][to] {
		w.stats["lost.cut"]++
		w.tracef("  lost %d->%d (cut) %s", from+1, to+1, what)
		w.lostRaft(e)
		return
	}
	delay := localDelay
	if from != to {
		if w.rng.IntN(100) < w.f.dropPct {
			w.stats["lost.drop"]++
			w.tracef("  lost %d->%d (drop) %s", from+1, to+1, what)
			w.lostRaft(e)
			return
		}
		delay = minDelay + time.Duration(w.rng.Int64N(int64(maxDelay-minDelay)))
	}
	at := max(w.now+delay, w.lastAt[from][to][e.ln])
	w.lastAt[from][to][e.ln] = at
	e.at, e.sentGen = at, w.connGen[from][to]
	w.schedule(e)
	if from != to && w.rng.IntN(100) < w.f.dupPct {
		dup := *e
		dup.at = at + time.Duration(w.rng.Int64N(int64(20*time.Millisecond)))
		w.stats["dup"]++
		w.schedule(&dup)
	}
}

// arrived reports whether a message survives to its delivery: not across a cut made
// meanwhile, not on a connection reset since it was sent, not to a node that is down.
func (w *world) arrived(e *event) bool {
	if w.cut[e.from][e.node] || w.connGen[e.from][e.node] != e.sentGen {
		w.stats["lost.reset"]++
		return false
	}
	return w.nodes[e.node].up
}

// lostRaft: the transport tells the sender that a raft message was not delivered
// (peer's OnRaftDrop, a failed connection): ReportUnreachable, and for a MsgSnap
// ReportSnapshot(SnapshotFailure). A transport that did not would leave the leader's
// progress for that follower in StateSnapshot, sending it nothing, until leadership
// changes (TestUnreportedSnapshotStalls).
func (w *world) lostRaft(e *event) {
	if e.kind != evRaft {
		return
	}
	if e.snap {
		w.stats["lost.snap"]++
	}
	if w.reportDelivery {
		w.schedule(&event{at: w.now, kind: evReport, node: e.from, from: e.node, senderGen: e.senderGen, snap: e.snap, lost: true})
	}
}

// reset breaks every connection to and from node i (a crash, or a cut made).
func (w *world) resetConns(i int) {
	for j := range w.nodes {
		w.connGen[i][j]++
		w.connGen[j][i]++
	}
}

// step runs the next event. It returns false when nothing is left before until.
func (w *world) step(until time.Duration) bool {
	if len(w.q) == 0 || w.q[0].at > until {
		return false
	}
	e := heap.Pop(&w.q).(*event)
	w.now = max(w.now, e.at)
	switch e.kind {
	case evTick:
		n := w.nodes[e.node]
		if !n.up || n.gen != e.gen {
			return true // the tick chain of a crashed life ends
		}
		w.schedule(&event{at: w.now + tickInterval, kind: evTick, node: n.index, gen: n.gen})
		if n.paused() {
			return true // a stalled process misses its ticks (a ticker drops them)
		}
		n.tick()
	case evRaft:
		n := w.nodes[e.node]
		if !w.arrived(e) {
			w.tracef("  lost %d->%d on arrival %s", e.from+1, e.node+1, e.what)
			w.lostRaft(e)
			return true
		}
		if n.paused() {
			w.defer_(e, n)
			return true
		}
		if e.snap && w.reportDelivery {
			w.schedule(&event{at: w.now, kind: evReport, node: e.from, from: e.node, senderGen: e.senderGen, snap: true})
		}
		n.deliver(e.raft)
	case evRequest:
		n := w.nodes[e.node]
		if !w.arrived(e) {
			w.tracef("  lost %d->%d %s", e.from+1, e.node+1, e.rpc)
			return true
		}
		if n.paused() {
			w.defer_(e, n)
			return true
		}
		n.request(e.rpc)
	case evReply:
		if !w.arrived(e) {
			w.tracef("  lost %d->%d answer %s", e.from+1, e.node+1, e.rpc)
			return true
		}
		w.brokers[e.node].answer(e.rpc)
	case evBroker:
		w.brokers[e.node].timer(e.gen)
	case evFault:
		w.fault()
	case evRestart:
		w.nodes[e.node].restart()
	case evReport:
		n := w.nodes[e.node]
		if !n.up || n.gen != e.senderGen {
			return true
		}
		if n.paused() {
			w.defer_(e, n)
			return true
		}
		n.report(e)
	case evResume:
		n := w.nodes[e.node]
		if n.up && n.gen == e.gen && n.pausedUntil <= w.now {
			w.tracef("n%d resumes", n.id)
			n.afterInput()
		}
	}
	w.updateHealth()
	w.chk.afterStep(w)
	return true
}

// defer_ holds a message for a paused node until it runs again, in arrival order.
func (w *world) defer_(e *event, n *simNode) {
	d := *e
	d.at = n.pausedUntil
	w.schedule(&d)
}

func (w *world) updateHealth() {
	healthy := true
	for i, n := range w.nodes {
		if !n.up || n.paused() {
			healthy = false
		}
		for j := range w.nodes {
			if w.cut[i][j] {
				healthy = false
			}
		}
	}
	switch {
	case healthy && w.healthySince < 0:
		w.healthySince = w.now
	case !healthy:
		w.healthySince = -1
	}
}

// quietRaft keeps raft's own logging out of the test output.
var quietRaft = &raft.DefaultLogger{Logger: stdlog.New(io.Discard, "", 0)}

var quietLog = slog.New(slog.DiscardHandler)

// simNode is one voter: its data directory survives crashes, everything else is one
// process life.
type simNode struct {
	w      *world
	index  int
	id     int32
	dir    string
	voters []uint64
	up     bool
	gen    int // process lives started
	store  *raftstore.Store
	loop   *quorum.Loop
	ctrl   *simController
	// skew is how far this node's clock is ahead of virtual time (a stalled process or
	// a VM that was suspended sees its monotonic clock leap).
	skew        time.Duration
	pausedUntil time.Duration
	obs         nodeObs // what the checks saw of this life
}

func (n *simNode) now() time.Time {
	return time.UnixMilli(startClockMs).Add(n.w.now + n.skew)
}

func (n *simNode) image() *metadata.Image { return n.loop.Current().State.(*metadata.Image) }

func (n *simNode) paused() bool { return n.pausedUntil > n.w.now }

// start opens the node's store from its files and a new loop over it: a new life.
func (n *simNode) start() {
	n.gen++
	s, err := raftstore.Open(n.dir, raftstore.Options{Now: n.now, CatchUpEntries: catchUpEntries, Logger: quietLog})
	if err != nil {
		n.w.failf("n%d: reopening its store: %v", n.id, err)
		return
	}
	gen := n.gen
	l, err := quorum.New(quorum.Options{ID: node.RaftID(n.id), Store: s, Voters: n.voters, Machine: metadata.Machine{},
		Send: func(ms []*pb.Message) { n.sendRaft(gen, ms) }, ElectionTick: electionTick,
		SnapshotBytes: snapshotBytes, CatchUpEntries: catchUpEntries, Now: n.now, Logger: quietLog, RaftLogger: quietRaft})
	if err != nil {
		n.w.failf("n%d: a loop over its store: %v", n.id, err)
		return
	}
	n.store, n.loop, n.up, n.ctrl = s, l, true, newController(n)
	n.obs = nodeObs{epochs: map[int32]int64{}}
	hs := s.DurableHardState()
	n.w.tracef("n%d starts (life %d): term %d vote %d, applied %d", n.id, n.gen, hs.GetTerm(), hs.GetVote(), l.Current().Index)
	n.afterInput()
}

// crash drops the process: the loop, the controller and its waiters, the broker on this
// node. The store is not closed (nothing is flushed at a crash): the next life reopens
// the files as they are. Every SaveReady returned with its writes fsynced, and Poll
// returns only at a Ready boundary, so a crash here loses no unsynced write; raftstore
// and internal/log have no seam to lose one (their own crash tests tear log tails).
func (n *simNode) crash() {
	n.w.tracef("n%d crashes", n.id)
	if n.w.lyingDisk {
		n.loseSyncedWrites()
	}
	n.up, n.loop, n.store, n.ctrl, n.pausedUntil = false, nil, nil, nil, 0
	n.w.resetConns(n.index)
	n.w.brokers[n.index].die()
}

func (n *simNode) restart() {
	if n.up {
		return
	}
	n.start()
	if n.up {
		n.w.schedule(&event{at: n.w.now + time.Duration(n.w.rng.Int64N(int64(tickInterval))), kind: evTick, node: n.index, gen: n.gen})
		n.w.brokers[n.index].start()
	}
}

func (n *simNode) sendRaft(gen int, ms []*pb.Message) {
	if gen != n.gen || !n.up {
		return
	}
	for _, m := range ms {
		to := int(m.GetTo()) - 2 // raft id = node id + 1, node id = index + 1
		b, err := proto.Marshal(m)
		if err != nil {
			n.w.failf("n%d: marshalling %v: %v", n.id, m.GetType(), err)
			continue
		}
		what := fmt.Sprintf("%s t%d i%d c%d n=%d", m.GetType(), m.GetTerm(), m.GetIndex(), m.GetCommit(), len(m.GetEntries()))
		if m.GetType() == pb.MsgSnap {
			what += fmt.Sprintf(" snapshot i%d", m.GetSnapshot().GetMetadata().GetIndex())
			n.w.snapSent = append(n.w.snapSent, fmt.Sprintf("n%d->n%d at %.3fs (i%d)", n.id, to+1, n.w.now.Seconds(), m.GetSnapshot().GetMetadata().GetIndex()))
		}
		n.w.send(&event{kind: evRaft, raft: b, ln: laneRaft, snap: m.GetType() == pb.MsgSnap, senderGen: gen}, n.index, to, what)
	}
}

func (n *simNode) tick() {
	if err := n.loop.Tick(); err != nil {
		n.w.failf("n%d: tick: %v", n.id, err)
		return
	}
	n.poll()
	n.ctrl.tick()
	n.w.driveReconfig(n)
	n.afterInput()
}

func (n *simNode) deliver(b []byte) {
	m := &pb.Message{}
	if err := proto.Unmarshal(b, m); err != nil {
		n.w.failf("n%d: unmarshalling a raft message: %v", n.id, err)
		return
	}
	n.w.tracef("%d->%d %s t%d i%d c%d n=%d", int(m.GetFrom())-1, n.id, m.GetType(), m.GetTerm(), m.GetIndex(), m.GetCommit(), len(m.GetEntries()))
	if err := n.loop.Step(m); err != nil {
		n.w.failf("n%d: step: %v", n.id, err)
		return
	}
	n.afterInput()
}

// report is the transport's word on a message this node sent to peer e.from.
func (n *simNode) report(e *event) {
	peer := node.RaftID(int32(e.from + 1))
	var err error
	switch {
	case e.snap && e.lost:
		n.w.tracef("n%d: snapshot to n%d failed", n.id, e.from+1)
		if err = n.loop.ReportSnapshot(peer, raft.SnapshotFailure); err == nil {
			err = n.loop.ReportUnreachable(peer)
		}
	case e.snap:
		n.w.tracef("n%d: snapshot to n%d delivered", n.id, e.from+1)
		err = n.loop.ReportSnapshot(peer, raft.SnapshotFinish)
	default:
		err = n.loop.ReportUnreachable(peer)
	}
	if err != nil {
		n.w.failf("n%d: reporting to its loop: %v", n.id, err)
		return
	}
	n.afterInput()
}

func (n *simNode) request(r *rpc) {
	n.w.tracef("n%d gets %s", n.id, r)
	n.ctrl.handle(r)
	n.afterInput()
}

// afterInput polls the loop and the controller until neither has anything to do: the
// Readys of the input, answers to proposals, the proposals and decisions they allow.
func (n *simNode) afterInput() {
	for range 64 {
		if !n.up {
			return
		}
		n.poll()
		if !n.up || !n.ctrl.pump() {
			return
		}
	}
	n.w.failf("n%d: loop and controller still busy after 64 rounds", n.id)
}

func (n *simNode) poll() {
	defer func() {
		// raft panics on a log it cannot be safe on (the lying disk's).
		if p := recover(); p != nil {
			n.w.failf("n%d: raft panicked: %v", n.id, p)
			n.crash()
		}
	}()
	if _, err := n.loop.Poll(); err != nil {
		// The loop stopped: a failed disk or an entry that does not apply (diverged
		// images). The process would exit; the simulation reports it.
		n.w.failf("n%d: quorum loop stopped: %v", n.id, err)
		n.crash()
	}
}

// loseSyncedWrites is the lying disk's crash: quorum-state (the term and the vote) is
// gone and the newest log segment loses a seeded part of its tail.
func (n *simNode) loseSyncedWrites() {
	if err := os.Remove(filepath.Join(n.dir, "quorum-state")); err != nil && !errors.Is(err, os.ErrNotExist) {
		n.w.failf("n%d: %v", n.id, err)
	}
	segs, _ := filepath.Glob(filepath.Join(n.dir, "*.log"))
	if len(segs) == 0 {
		return
	}
	slices.Sort(segs)
	seg := segs[len(segs)-1]
	fi, err := os.Stat(seg)
	if err != nil || fi.Size() == 0 {
		return
	}
	cut := n.w.rng.Int64N(fi.Size())
	if err := os.Truncate(seg, cut); err != nil {
		n.w.failf("n%d: %v", n.id, err)
	}
	n.w.tracef("n%d's disk lied: quorum-state lost, %s cut to %d of %d bytes", n.id, filepath.Base(seg), cut, fi.Size())
}
