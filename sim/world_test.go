package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/share"
	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/internal/txn"
)

// Sizes of the simulated system. Small on purpose: collisions (two members on one
// record, two transactions on one state partition, timeouts racing stagings) are what
// the simulation is for.
const (
	numInputParts     = 2 // share partitions of topic "in" (one share group)
	numStateParts     = 2 // __share_group_state partitions
	numTxnParts       = 2 // __transaction_state partitions
	numWorkers        = 4 // consumer member + transactional producer pairs
	maxInputRecords   = 400
	lockDurationMs    = 10000
	deliveryLimit     = 3
	maxInFlight       = 40
	markerRetryMs     = 100
	groupID           = "sim-group"
	outTopic          = "out"
	stateTopic        = "__share_group_state"
	startClockMs      = 1_700_000_000_000
	traceLinesOnError = 400
)

var inTopicID = [16]byte{'i', 'n'}

// inBatch is one record batch of an input partition's log.
type inBatch struct{ base, last int64 }

// recKey names one input record.
type recKey struct {
	part int
	off  int64
}

func (r recKey) String() string { return fmt.Sprintf("in-%d@%d", r.part, r.off) }

// inputInfo is what the simulation knows about one input record, across crashes.
type inputInfo struct {
	terminal  sharepartition.State // ACKNOWLEDGED or ARCHIVED once observed, else 0 (AVAILABLE)
	stagedIn  *simTxn              // durable staging waiting for its marker, nil otherwise
	stagedAck sharepartition.AckType
	abortArch bool // the staging decided ARCHIVED on abort (delivery limit reached)
	committed int  // committed outputs produced for it
	// acceptCommitted: an ACCEPT staged in a committed transaction; exactly one committed
	// output must exist for it.
	acceptCommitted bool
}

// simTxn is one producer transaction (producer id, epoch) as the simulation sees it.
type simTxn struct {
	id       int
	client   string
	pid      int64
	epoch    int16
	staged   []recKey
	outputs  []int // indexes into world.data
	decided  bool
	commit   bool
	markerEp int16          // epoch of the markers that decided it
	applied  map[int32]bool // state partitions whose marker was applied
}

func (t *simTxn) String() string { return fmt.Sprintf("T%d(pid=%d,e=%d)", t.id, t.pid, t.epoch) }

// dataEntry is one entry of the simulated output partition: a transactional record or a
// marker.
type dataEntry struct {
	marker   bool
	pid      int64
	epoch    int16
	commit   bool // marker
	input    recKey
	txn      *simTxn
	resolved bool
	visible  bool // committed, visible to read_committed
}

type pendingStage struct {
	member  string
	batches []sharepartition.AckBatch
	recs    []recKey
	acks    []sharepartition.AckType
	part    int
	// produceAfter: the outputs are produced once the staging is answered.
	produceAfter bool
}

// client is one transactional producer instance.
type client struct {
	name      string
	txnID     string
	timeoutMs int32
	ready     bool
	pid       int64
	epoch     int16
	txn       *simTxn // open transaction (something registered in it)
	doomed    bool    // a step of the transaction failed: it must abort
	pending   *pendingStage
}

// worker is one share consumer (member) and its producer.
type worker struct {
	idx    int
	gen    int
	member string // "" while not in the group
	held   []recKey
	cl     *client
	zombie *client // the fenced previous producer instance, still trying
}

// markerFault is injected into the next marker write.
type markerFault int

const (
	faultNone         markerFault = iota
	faultPartial                  // the last partition's marker fails (retried)
	faultCompleteFail             // markers land, the Complete* append fails (retried)
)

// world is the simulated broker plus its clients. Everything runs on the test
// goroutine, except the coordinator's marker jobs, which run while the test goroutine
// waits for them (Coordinator.Quiesce) and so never concurrently with it.
type world struct {
	seed  uint64
	rng   *rand.Rand
	step  int
	trace []string
	errs  []string

	nowMs int64

	// durable
	txnLogs   []*coordlog.Memory
	stateLogs []*coordlog.Memory
	inLogs    [numInputParts][]inBatch
	inEnd     [numInputParts]int64
	data      []dataEntry
	nextPID   int64

	// volatile (rebuilt by crash)
	coord *txn.Coordinator
	store *sharestate.Store
	sps   [numInputParts]*sharepartition.SharePartition

	mu        sync.Mutex // marker writes (coordinator goroutines)
	fault     markerFault
	retryAtMs int64 // a marker job waits for a retry at this time; 0 if none

	workers []*worker
	inputs  map[recKey]*inputInfo
	txns    []*simTxn
	open    map[int64][]*simTxn // undecided transactions by producer id
	stats   map[string]int
}

func (w *world) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%5d t=%d ", w.step, w.nowMs-startClockMs)+fmt.Sprintf(format, args...))
}

// violate records an invariant violation (it may be called from a marker goroutine).
func (w *world) violate(format string, args ...any) {
	msg := fmt.Sprintf("step %d: ", w.step) + fmt.Sprintf(format, args...)
	w.errs = append(w.errs, msg)
	w.trace = append(w.trace, "      VIOLATION "+msg)
}

func newWorld(seed uint64) *world {
	w := &world{
		seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		nowMs: startClockMs, nextPID: 1000,
		inputs: map[recKey]*inputInfo{}, open: map[int64][]*simTxn{}, stats: map[string]int{},
	}
	for i := range numTxnParts {
		w.txnLogs = append(w.txnLogs, coordlog.NewMemory(int32(i)))
	}
	for i := range numStateParts {
		w.stateLogs = append(w.stateLogs, coordlog.NewMemory(int32(i)))
	}
	for i := range numWorkers {
		wk := &worker{idx: i}
		wk.member = fmt.Sprintf("member-%d-%d", i, wk.gen)
		wk.cl = &client{name: fmt.Sprintf("tx-%d", i), txnID: fmt.Sprintf("tx-%d", i),
			timeoutMs: int32(8000 + 2000*i + w.rng.IntN(500))}
		w.workers = append(w.workers, wk)
	}
	for p := range numInputParts {
		w.produceInput(p, 10)
	}
	w.startStore()
	for p := range numInputParts {
		if err := w.store.Initialize(context.Background(), w.key(p), 0, 0); err != nil {
			panic(err)
		}
	}
	w.startPartitions()
	w.startCoordinator()
	return w
}

func (w *world) key(p int) sharestate.Key {
	return sharestate.Key{GroupID: groupID, TopicID: inTopicID, Partition: int32(p)}
}

func (w *world) statePart(p int) int32 { return w.store.PartitionFor(w.key(p)) }

func (w *world) now() time.Time { return time.UnixMilli(w.nowMs) }

func (w *world) startStore() {
	parts := make([]coordlog.Partition, len(w.stateLogs))
	for i, m := range w.stateLogs {
		parts[i] = m
	}
	s, err := sharestate.New(sharestate.Config{NumPartitions: numStateParts, UpdatesPerSnapshot: 7, Now: w.now}, parts)
	if err != nil {
		panic(err)
	}
	w.store = s
}

func spConfig() sharepartition.Config {
	return sharepartition.Config{RecordLockDurationMs: lockDurationMs, DeliveryCountLimit: deliveryLimit,
		MaxInFlightRecords: maxInFlight, RenewEnabled: true}
}

// startPartitions loads every share partition from the store, as the share-partition
// leader does on first use (share.Manager.load).
func (w *world) startPartitions() {
	for p := range numInputParts {
		st, err := w.store.Read(context.Background(), w.key(p), 0)
		if err != nil {
			panic(err)
		}
		sp, err := sharepartition.Restore(spConfig(), share.FromStoreState(st))
		if err != nil {
			w.violate("restore %s: %v", w.key(p), err)
			sp, _ = sharepartition.New(spConfig(), 0, 0)
		}
		w.sps[p] = sp
	}
}

func (w *world) startCoordinator() {
	cfg := txn.Config{
		NumPartitions: numTxnParts, MaxTimeoutMs: 900000, AbortTimedOutIntervalMs: 1,
		TransactionalIDExpirationMs: 1 << 40, RemoveExpiredIntervalMs: 1 << 40,
		MarkerRetryBackoffMs: markerRetryMs, Now: w.now,
		// No ticker goroutine: the simulation ticks (advance) and settles itself.
		ManualTicks: true,
		// VerifyOrAdd answers CONCURRENT_TRANSACTIONS at once instead of waiting.
		After: func(time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		},
	}
	parts := make([]coordlog.Partition, len(w.txnLogs))
	for i, m := range w.txnLogs {
		parts[i] = m
	}
	c, err := txn.New(cfg, parts, (*simBroker)(w))
	if err != nil {
		panic(err)
	}
	w.coord = c
	w.settle()
}

// settle waits until the coordinator's background work (marker jobs) is done.
func (w *world) settle() { w.coord.Quiesce() }

func (w *world) produceInput(p, n int) {
	for n > 0 && w.inEnd[p] < maxInputRecords {
		size := int64(1 + w.rng.IntN(4))
		b := inBatch{base: w.inEnd[p], last: w.inEnd[p] + size - 1}
		w.inLogs[p] = append(w.inLogs[p], b)
		for o := b.base; o <= b.last; o++ {
			w.inputs[recKey{p, o}] = &inputInfo{}
		}
		w.inEnd[p] = b.last + 1
		n -= int(size)
	}
}

// writeUpdate persists a share-partition step as the leader does (WriteShareGroupState
// at leader epoch 0); the simulation injects no store failures, so every write must land.
func (w *world) writeUpdate(p int, u sharepartition.Update) error {
	if u.Empty() {
		return nil
	}
	return w.store.Write(context.Background(), w.key(p), u.StateEpoch, 0, u.StartOffset, u.DeliveryCompleteCount, share.ToStoreBatches(u.Batches))
}

func (w *world) mustWrite(p int, u sharepartition.Update, what string) {
	if err := w.writeUpdate(p, u); err != nil {
		w.violate("%s: share-state write of %s failed: %v", what, w.key(p), err)
	}
}

// ---- The broker seam of the transaction coordinator. ----

type simBroker world

func (b *simBroker) PartitionExists(topic string, partition int32) bool {
	switch topic {
	case outTopic:
		return partition == 0
	case stateTopic:
		return partition >= 0 && partition < numStateParts
	}
	return false
}

func (b *simBroker) AllocateProducerID() (int64, error) {
	w := (*world)(b)
	w.nextPID++ // the broker's producer-id block: survives crashes
	return w.nextPID, nil
}

// WriteMarkers writes one transaction's markers as the broker does: on the output
// partition a control batch; on a __share_group_state partition
// sharestate.Store.ApplyMarkerResult (the control batch appended under the store
// partition's lock) and then SharePartition.CompleteTxn on the live share partitions
// whose keys the store resolved (share.Manager.ApplyMarker).
func (b *simBroker) WriteMarkers(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32, parts []txn.TopicPartition) map[txn.TopicPartition]error {
	w := (*world)(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logf("  markers pid=%d epoch=%d commit=%v parts=%v", pid, epoch, commit, parts)
	w.stats["marker batches"]++
	t := w.decide(pid, epoch, commit)
	errs := map[txn.TopicPartition]error{}
	fault := w.fault
	w.fault = faultNone
	for i, tp := range parts {
		if fault == faultPartial && i == len(parts)-1 {
			w.logf("  marker to %v fails (injected)", tp)
			errs[tp] = kerr.NotLeaderForPartition
			w.retryAtMs = w.nowMs + markerRetryMs
			continue
		}
		switch tp.Topic {
		case outTopic:
			w.dataMarker(pid, epoch, commit, t)
		case stateTopic:
			res, err := w.store.ApplyMarkerResult(ctx, tp.Partition, pid, epoch, commit, func(context.Context) error {
				w.stateLogs[tp.Partition].AppendMarker(pid, epoch, commit, coordinatorEpoch)
				return nil
			})
			if err != nil {
				w.violate("ApplyMarker %v pid=%d: %v", tp, pid, err)
				errs[tp] = err
				continue
			}
			for _, k := range res.Keys {
				if k.GroupID == groupID && k.TopicID == inTopicID {
					w.sps[k.Partition].CompleteTxn(pid, epoch, commit)
				}
			}
			if t != nil {
				t.applied[tp.Partition] = true
			}
		default:
			w.violate("marker for unexpected partition %v", tp)
		}
	}
	if fault == faultCompleteFail {
		w.logf("  Complete* append fails (injected)")
		w.txnLogs[w.coord.PartitionFor(t.clientTxnID(w))].FailAppend = errors.New("injected: disk full")
		w.retryAtMs = w.nowMs + markerRetryMs
	}
	return errs
}

func (t *simTxn) clientTxnID(w *world) string {
	if t == nil {
		return ""
	}
	for _, wk := range w.workers {
		for _, c := range []*client{wk.cl, wk.zombie} {
			if c != nil && c.name == t.client {
				return c.txnID
			}
		}
	}
	return ""
}

// decide records the outcome a marker (pid, epoch) carries (invariant 1: an outcome
// never changes). Under transaction version 2 every marker carries an epoch above the
// transaction's (EndTxn and coordinator aborts bump it), so the marker decides the
// undecided transactions of pid with a lower epoch; a repeated marker must agree.
func (w *world) decide(pid int64, epoch int16, commit bool) *simTxn {
	var found *simTxn
	for _, t := range w.txns {
		if t.pid != pid || !t.decided || t.markerEp != epoch {
			continue
		}
		if t.commit != commit {
			w.violate("%s was decided commit=%v, now a marker says commit=%v", t, t.commit, commit)
		}
		found = t
	}
	var rest []*simTxn
	for _, t := range w.open[pid] {
		if t.epoch >= epoch {
			rest = append(rest, t)
			continue
		}
		t.decided, t.commit, t.markerEp = true, commit, epoch
		w.logf("  %s decided commit=%v", t, commit)
		if commit {
			w.stats["txn committed"]++
		} else {
			w.stats["txn aborted"]++
		}
		if found != nil {
			w.violate("marker pid=%d epoch=%d decides both %s and %s", pid, epoch, found, t)
		}
		found = t
	}
	w.open[pid] = rest
	return found
}

func (w *world) dataMarker(pid int64, epoch int16, commit bool, t *simTxn) {
	w.data = append(w.data, dataEntry{marker: true, pid: pid, epoch: epoch, commit: commit})
	for i := range w.data {
		d := &w.data[i]
		if d.marker || d.resolved || d.pid != pid || d.epoch >= epoch {
			continue
		}
		d.resolved, d.visible = true, commit
		if d.txn != t {
			w.violate("output %d of %s resolved by the marker of %v", i, d.txn, t)
		}
		if commit {
			in := w.inputs[d.input]
			in.committed++
			if in.committed > 1 {
				w.violate("input %s has %d committed outputs", d.input, in.committed)
			}
		}
	}
}

// view is one record's state, per offset.
type view struct {
	state  sharepartition.State
	count  int16
	member string
	pid    int64
	epoch  int16
	ack    sharepartition.AckType
	abort  sharepartition.State
}

// spView is a share partition's window per offset (offsets >= SPSO that a batch covers).
func spView(sp *sharepartition.SharePartition) (int64, map[int64]view) {
	d := sp.Describe()
	m := map[int64]view{}
	for _, r := range d.Records {
		for o := r.FirstOffset; o <= r.LastOffset; o++ {
			m[o] = view{state: r.State, count: r.DeliveryCount, member: r.Member, pid: r.StagedProducerID,
				epoch: r.StagedProducerEpoch, ack: r.StagedAckType, abort: r.StagedAbortState}
		}
	}
	return d.StartOffset, m
}

// storeView is the store's persisted state of p per offset.
func (w *world) storeView(p int) (int64, map[int64]view, error) {
	st, err := w.store.Read(context.Background(), w.key(p), -1)
	if err != nil {
		return 0, nil, err
	}
	m := map[int64]view{}
	for _, b := range st.Batches {
		for o := b.FirstOffset; o <= b.LastOffset; o++ {
			v := view{state: sharepartition.State(b.DeliveryState), count: b.DeliveryCount, pid: -1, epoch: -1, ack: -1, abort: -1}
			if b.DeliveryState == sharestate.StateTxPending {
				v.pid, v.epoch, v.ack = b.TxnProducerID, b.TxnProducerEpoch, sharepartition.AckType(b.TxnAckType)
				v.abort = sharepartition.State(b.TxnAbortState)
			}
			m[o] = v
		}
	}
	return st.StartOffset, m, nil
}

// durableEqual compares what a share partition holds with what is durable: a record
// ACQUIRED or AVAILABLE in memory is AVAILABLE or not recorded (an acquisition is never
// persisted); any other state must be persisted exactly. what names the comparison.
func (w *world) durableEqual(what string, p int, memStart int64, mem map[int64]view, durStart int64, dur map[int64]view) {
	var offs []int64
	for o := range mem {
		offs = append(offs, o)
	}
	for o := range dur {
		if _, ok := mem[o]; !ok && o >= memStart {
			offs = append(offs, o)
		}
	}
	slices.Sort(offs)
	for _, o := range offs {
		m, inMem := mem[o]
		d, inDur := dur[o]
		if o < durStart {
			inDur = false
		}
		switch {
		case !inMem:
			if d.state != sharepartition.Available {
				w.violate("%s: in-%d@%d durable %v but not in memory (SPSO %d)", what, p, o, d.state, memStart)
			}
		case m.state == sharepartition.Acquired || m.state == sharepartition.Available:
			if inDur && d.state != sharepartition.Available {
				w.violate("%s: in-%d@%d is %v in memory, %v durable", what, p, o, m.state, d.state)
			}
		case !inDur:
			w.violate("%s: in-%d@%d is %v in memory, not durable", what, p, o, m.state)
		case m.state != d.state || m.count != d.count ||
			(m.state == sharepartition.TxPending && (m.pid != d.pid || m.epoch != d.epoch || m.ack != d.ack || m.abort != d.abort)):
			w.violate("%s: in-%d@%d memory %+v, durable %+v", what, p, o, m, d)
		}
	}
}

// describeTxns returns the coordinator's view of every worker's transactional id.
func (w *world) describeTxns() map[string]kmsg.DescribeTransactionsResponseTransactionState {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	for _, wk := range w.workers {
		req.TransactionalIDs = append(req.TransactionalIDs, wk.cl.txnID)
	}
	resp := w.coord.DescribeTransactions(context.Background(), 0, req)
	out := map[string]kmsg.DescribeTransactionsResponseTransactionState{}
	for _, s := range resp.TransactionStates {
		out[s.TransactionalID] = s
	}
	return out
}
