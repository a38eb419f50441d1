package sharepartition

import (
	"cmp"
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"sync"
)

// record is the share state of one record, or of every record of a batch that
// has not been split. 40 bytes; big uniform batches share one.
type record struct {
	deadlineMs  int64  // lock deadline; ACQUIRED only
	stagedPID   int64  // TX_PENDING only
	member      string // owner while ACQUIRED or TX_PENDING, "" otherwise
	count       int16  // delivery count, incremented on acquisition
	stagedEpoch int16  // TX_PENDING only
	state       State
	stagedAck   AckType // TX_PENDING only, else ackNone
	// abortArchive is the abort target decided at staging (TX_PENDING only): true when
	// the delivery count had reached the delivery limit then, so an ABORT archives the
	// record (decision D5) whatever the limit is when the marker arrives.
	abortArchive bool
}

func (r *record) clearOwner() {
	r.member, r.deadlineMs = "", 0
	r.stagedPID, r.stagedEpoch, r.stagedAck = -1, -1, ackNone
	r.abortArchive = false
}

// samePersisted reports whether a and b persist identically (StateBatch
// fields), so adjacent ranges can be coalesced.
func (a *record) samePersisted(b *record) bool {
	return a.state == b.state && a.count == b.count && a.stagedPID == b.stagedPID &&
		a.stagedEpoch == b.stagedEpoch && a.stagedAck == b.stagedAck && a.abortArchive == b.abortArchive
}

// batch is one in-flight batch: an acquired range [first, last] as handed to a
// consumer, or a range restored from persisted state. While runs and pk are nil
// every record has the state rec (Kafka's batch-level state). Once an operation
// touches part of the batch it keeps per-offset state (Kafka's
// InFlightBatch.offsetState), but as runs of consecutive offsets sharing one
// record, not one entry per offset as Kafka does: a log batch's offset span is
// not bounded by its bytes (compaction leaves gaps, and a 72-byte batch may
// claim a billion offsets), so memory and every loop here grow with the number
// of distinct states, never with the span. A batch with nearly as many distinct
// states as offsets is packed between steps instead (packed.go): two bytes an
// offset.
type batch struct {
	first, last int64
	rec         record
	runs        []run   // nil, or sorted and contiguous over [first, last]
	pk          *packed // non-nil instead of runs while packed
}

// run is a range of offsets of a batch sharing one record.
type run struct {
	first, last int64
	rec         record
}

func (r *run) len() int64 { return r.last - r.first + 1 }

func (b *batch) len() int64 { return b.last - b.first + 1 }

// runIndex returns the index of the run holding o (b.runs != nil, o in the batch).
func (b *batch) runIndex(o int64) int {
	return sort.Search(len(b.runs), func(i int) bool { return b.runs[i].last >= o })
}

// at returns the record of offset o (read-only use: of a packed batch, a copy).
func (b *batch) at(o int64) *record {
	b.settle()
	if b.pk != nil {
		r := deadRecord()
		if o >= b.pk.lo {
			r = b.pk.record(b.pk.codes[o-b.pk.lo])
		}
		return &r
	}
	if b.runs == nil {
		return &b.rec
	}
	return &b.runs[b.runIndex(o)].rec
}

// overlapping returns the runs overlapping [lo, hi], for reading: the first and
// the last may reach outside it. nil when the batch has batch-level state.
func (b *batch) overlapping(lo, hi int64) []run {
	if b.runs == nil {
		return nil
	}
	i := b.runIndex(max(lo, b.first))
	j := sort.Search(len(b.runs), func(j int) bool { return b.runs[j].first > hi })
	return b.runs[i:j]
}

// carve switches b to per-offset state and splits its runs so that [lo, hi]
// (inside the batch) is covered by whole runs, which it returns for the caller
// to change: at most two runs are added; of a packed batch, the range decoded
// (packed.go). The caller must not carve again, nor read the batch, while it holds
// the result: reading a packed batch writes the carved runs back.
func (sp *SharePartition) carve(b *batch, lo, hi int64) []run {
	b.settle()
	switch {
	case b.pk != nil:
		sp.touch(b)
		return b.pk.carve(b, lo, hi)
	case b.runs == nil:
		b.runs = []run{{first: b.first, last: b.last, rec: b.rec}}
	}
	sp.touch(b)
	i := b.cut(lo)
	j := b.cut(hi + 1)
	return b.runs[i:j]
}

// cut makes o (in [first, last+1]) the first offset of a run and returns that
// run's index (len(runs) for last+1).
func (b *batch) cut(o int64) int {
	i := b.runIndex(o)
	if i == len(b.runs) || b.runs[i].first == o {
		return i
	}
	right := b.runs[i]
	right.first = o
	b.runs[i].last = o - 1
	b.runs = slices.Insert(b.runs, i+1, right)
	return i + 1
}

// coalesce merges adjacent runs holding equal records, and the runs wholly
// below the SPSO (all terminal, never read again) into one.
func (b *batch) coalesce(spso int64) {
	out := b.runs[:0]
	for _, r := range b.runs {
		if n := len(out); n > 0 && (out[n-1].rec == r.rec || r.last < spso) {
			out[n-1].last = r.last
			out[n-1].rec = r.rec
			continue
		}
		out = append(out, r)
	}
	clear(b.runs[len(out):]) // drop member strings
	b.runs = out
}

// touch notes that b's runs changed, so the step's end coalesces them.
func (sp *SharePartition) touch(b *batch) {
	if n := len(sp.carved); n == 0 || sp.carved[n-1] != b {
		sp.carved = append(sp.carved, b)
	}
}

// coalesceCarved coalesces the batches carved since the last call, and packs
// those that have nearly a state per offset: every step ends with it, so a batch
// holds no more runs than distinct states, or two bytes an offset.
func (sp *SharePartition) coalesceCarved() {
	for i, b := range sp.carved {
		sp.carved[i] = nil
		b.settle()
		switch {
		case b.last < sp.spso: // dropped
		case b.runs != nil:
			b.coalesce(sp.spso)
			b.maybePack(sp.spso)
		case b.pk != nil:
			b.pk.trim(sp.spso)
		}
	}
	sp.carved = sp.carved[:0]
	if sp.rebuildDue {
		sp.rebuildDue = false
		sp.rebuildLocks()
	}
}

// Counters are cumulative record counts for metrics (issue 4 and 5). They are
// per partition instance: a restored partition starts from zero.
type Counters struct {
	Acquired        int64 // records handed to consumers
	Acknowledged    int64 // records that reached ACKNOWLEDGED (ACCEPT, or a committed staged ACCEPT)
	Released        int64 // records given back by RELEASE or by a member leaving
	Rejected        int64 // REJECT acks, direct or committed
	Archived        int64 // records that reached ARCHIVED, for any reason
	LockExpired     int64 // acquisition locks that expired
	Renewed         int64 // RENEW acks
	TxnStaged       int64 // records moved to TX_PENDING
	TxnCommitted    int64 // TX_PENDING records resolved by a COMMIT marker
	TxnAborted      int64 // TX_PENDING records resolved by an ABORT marker
	ArchivedOnAbort int64 // aborted records archived because they reached the delivery limit
}

// SharePartition is the share state of one (share group, topic-partition): the
// in-flight window [StartOffset, EndOffset] of records with their states,
// delivery counts, owners, lock deadlines and staged transactions.
//
// It is a pure state machine: it does no I/O, starts no goroutines, reads no
// clock. Every input carries the current time (nowMs, Unix milliseconds) and
// every mutating step returns the Update to persist. It is not safe for
// concurrent use; its owner serializes calls. See doc.go for how to drive it.
type SharePartition struct {
	cfg        Config
	stateEpoch int32

	spso       int64 // share-partition start offset: every cached offset below it is terminal
	nextOffset int64 // one past the highest offset ever cached; == spso when the cache is empty
	batches    []*batch
	carved     []*batch // batches carved by the current step, coalesced when it ends

	// Acquirable gaps after Restore: offsets in [gapStart, gapEnd] not covered by a
	// batch were acquired before the restart but never persisted, so they must be
	// fetched again and SPSO must not pass them (Kafka's GapWindow, kip-932.md 4.7).
	gapStart, gapEnd int64

	mayHaveAvailable bool // false once NextFetchOffset found no AVAILABLE record; set again by any release
	locks            lockHeap
	liveLocks        int   // heap entries the last rebuildLocks kept
	rebuildDue       bool  // the heap outgrew its bound during the step: rebuild at its end
	txPending        int64 // records currently TX_PENDING
	complete         int64 // terminal records at or above the SPSO (KIP-1226 DeliveryCompleteCount)
	counters         Counters

	refusals    int64 // state changes setState refused since TakeRefusals last ran
	lastRefusal error
}

// TransitionError is a record-state change the transition table refused: the records
// First..Last stayed in From instead of moving to To.
type TransitionError struct {
	First, Last int64
	From, To    State
	Revert      bool // the change was asked as a revert (CanRevert)
}

func (e *TransitionError) Error() string {
	what := "transition"
	if e.Revert {
		what = "revert"
	}
	return fmt.Sprintf("record state %s %v → %v of offsets %d-%d refused by the transition table", what, e.From, e.To, e.First, e.Last)
}

// setState is the only place a record's state changes. It moves the n records starting
// at offset first that share r to state to when the table allows it (CanTransition, or
// CanRevert when revert is set) and reports true. Otherwise it refuses: r is left
// exactly as it was, the refusal is kept for TakeRefusals, and it reports false so the
// caller leaves its counters and its Update alone. Every caller checks the state it
// expects first, so a refusal is a bug here, never a client's doing.
//
// Moving to ACQUIRED or TX_PENDING keeps the owner (the caller sets the lock or the
// staging); any other target clears the owner, the lock and the staging. It keeps the
// TX_PENDING count and notes that AVAILABLE records may exist.
func (sp *SharePartition) setState(r *record, first, n int64, to State, revert bool) bool {
	from := r.state
	if !CanTransition(from, to) && !(revert && CanRevert(from, to)) {
		sp.refusals++
		sp.lastRefusal = &TransitionError{First: first, Last: first + n - 1, From: from, To: to, Revert: revert}
		return false
	}
	if to != Acquired && to != TxPending {
		r.clearOwner()
	}
	if from == TxPending {
		sp.txPending -= n
	}
	if to == TxPending {
		sp.txPending += n
	}
	if to == Available {
		sp.mayHaveAvailable = true
	}
	r.state = to
	return true
}

// TakeRefusals returns how many state changes the transition table refused since the
// last call, and the last of them, and forgets them. The broker logs them: the refused
// records kept their state, so nothing was corrupted, but some step did not do what it
// meant to.
func (sp *SharePartition) TakeRefusals() (int64, error) {
	n, err := sp.refusals, sp.lastRefusal
	sp.refusals, sp.lastRefusal = 0, nil
	return n, err
}

// New returns an empty share partition starting at startOffset: the offset
// the broker resolved with share.auto.offset.reset for a new share partition,
// or 0 for a new partition of a topic the group already knows (kip-932.md 2.9).
func New(cfg Config, startOffset int64, stateEpoch int32) (*SharePartition, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if startOffset < 0 {
		return nil, fmt.Errorf("start offset %d: resolve share.auto.offset.reset first", startOffset)
	}
	return &SharePartition{cfg: cfg, stateEpoch: stateEpoch, spso: startOffset, nextOffset: startOffset, gapStart: 1, gapEnd: 0}, nil
}

// SetConfig changes the effective group configs (dynamic, kip-932.md 2.3, 2.6).
func (sp *SharePartition) SetConfig(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	sp.cfg = cfg
	return nil
}

// Config returns the effective configs.
func (sp *SharePartition) Config() Config { return sp.cfg }

// StartOffset is the SPSO.
func (sp *SharePartition) StartOffset() int64 { return sp.spso }

// EndOffset is the SPEO with Kafka's meaning: the last cached offset, or the
// SPSO when nothing is cached.
func (sp *SharePartition) EndOffset() int64 {
	if len(sp.batches) == 0 {
		return sp.spso
	}
	return sp.nextOffset - 1
}

// StateEpoch is the state epoch the partition was initialized with.
func (sp *SharePartition) StateEpoch() int32 { return sp.stateEpoch }

// InFlightRecords is the number of offsets in the window SPSO..SPEO, the
// quantity share.partition.max.record.locks caps.
func (sp *SharePartition) InFlightRecords() int64 { return sp.nextOffset - sp.spso }

// TxPendingRecords is the number of records currently TX_PENDING.
func (sp *SharePartition) TxPendingRecords() int64 { return sp.txPending }

// Counters returns the cumulative counters.
func (sp *SharePartition) Counters() Counters { return sp.counters }

func (sp *SharePartition) gapActive() bool { return sp.gapStart <= sp.gapEnd }

// floorIdx returns the index of the last batch with first <= o, or -1.
func (sp *SharePartition) floorIdx(o int64) int {
	return sort.Search(len(sp.batches), func(i int) bool { return sp.batches[i].first > o }) - 1
}

// find returns the batch holding offset o, or nil.
func (sp *SharePartition) find(o int64) *batch {
	if i := sp.floorIdx(o); i >= 0 && sp.batches[i].last >= o {
		return sp.batches[i]
	}
	return nil
}

func (sp *SharePartition) insert(b *batch) {
	i := sp.floorIdx(b.first) + 1
	sp.batches = slices.Insert(sp.batches, i, b)
}

// inGap reports whether o is an acquirable gap: uncovered and in the gap window.
func (sp *SharePartition) inGap(o int64) bool {
	return sp.gapActive() && o >= sp.gapStart && o <= sp.gapEnd && sp.find(o) == nil
}

// firstGap returns the first acquirable gap offset.
func (sp *SharePartition) firstGap() (int64, bool) {
	if !sp.gapActive() {
		return 0, false
	}
	cur := sp.gapStart
	i := max(sp.floorIdx(cur), 0)
	for ; i < len(sp.batches) && cur <= sp.gapEnd; i++ {
		b := sp.batches[i]
		if b.last < cur {
			continue
		}
		if b.first > cur {
			return cur, true
		}
		cur = b.last + 1
	}
	if cur <= sp.gapEnd {
		return cur, true
	}
	sp.gapStart, sp.gapEnd = 1, 0 // no gap left: close the window
	return 0, false
}

// advance moves the SPSO past the terminal records at its front, jumping over
// offsets no batch covers unless they are acquirable gaps, and drops batches
// that lie wholly below it (Kafka's maybeUpdateCachedStateAndOffsets).
func (sp *SharePartition) advance() {
	for sp.spso < sp.nextOffset {
		i := sp.floorIdx(sp.spso)
		if i < 0 || sp.batches[i].last < sp.spso {
			if sp.inGap(sp.spso) {
				break
			}
			if i+1 < len(sp.batches) {
				sp.spso = sp.batches[i+1].first
			} else {
				sp.spso = sp.nextOffset
			}
			continue
		}
		b := sp.batches[i]
		if b.uniform() {
			if !b.rec.state.Terminal() {
				break
			}
			sp.complete -= b.last + 1 - sp.spso
			sp.spso = b.last + 1
			continue
		}
		if b.pk != nil {
			to, found := b.findState(sp.spso, b.last, func(s State) bool { return !s.Terminal() })
			if !found {
				to = b.last + 1
			}
			if to > sp.spso {
				sp.touch(b) // the codes now below the SPSO may be trimmed
			}
			sp.complete -= to - sp.spso
			sp.spso = to
			if found {
				break
			}
			continue
		}
		rs := b.overlapping(sp.spso, b.last)
		k := 0
		for k < len(rs) && rs[k].rec.state.Terminal() {
			k++
		}
		to := b.last + 1
		if k < len(rs) {
			to = rs[k].first
		}
		sp.complete -= to - sp.spso
		sp.spso = to
		if k > 0 {
			sp.touch(b) // runs now below the SPSO collapse into one
		}
		if k < len(rs) {
			break
		}
	}
	n := 0
	for n < len(sp.batches) && sp.batches[n].last < sp.spso {
		n++
	}
	if n > 0 {
		sp.batches = slices.Delete(sp.batches, 0, n)
	}
	if sp.gapActive() && sp.gapStart < sp.spso {
		sp.gapStart = sp.spso
	}
	sp.coalesceCarved()
}

// deliveryCompleteCount is the number of terminal records at or above the
// SPSO (KIP-1226's DeliveryCompleteCount), kept up to date by every transition.
func (sp *SharePartition) deliveryCompleteCount() int64 { return sp.complete }

// DeliveryCompleteCount is the number of ACKNOWLEDGED or ARCHIVED records at or
// above the SPSO (KIP-1226): lag is the log end offset - SPSO - this count.
func (sp *SharePartition) DeliveryCompleteCount() int64 { return sp.complete }

// countComplete recounts deliveryCompleteCount from the batches.
func (sp *SharePartition) countComplete() int64 {
	var n int64
	for _, b := range sp.batches {
		b.each(sp.spso, b.last, func(first, last int64, r *record) bool {
			if r.state.Terminal() {
				n += last - first + 1
			}
			return true
		})
	}
	return n
}

// Update is what one step asks the broker to persist, in the shape of a
// WriteShareGroupState request / ShareUpdate record (kip-932.md 4.2-4.3): only
// the ranges that changed, plus the current SPSO and delivery-complete count.
// An Update with no Batches needs no write (Kafka writes nothing for
// acquisitions, RENEW, log-start archiving and aborted-transaction archiving;
// the new SPSO travels with the next write).
type Update struct {
	StartOffset           int64
	StateEpoch            int32
	DeliveryCompleteCount int64
	Batches               []StateBatch
}

// Empty reports whether there is nothing to persist.
func (u Update) Empty() bool { return len(u.Batches) == 0 }

// changes collects changed ranges during one step.
type changes struct{ batches []StateBatch }

func toStateBatch(first, last int64, r *record) StateBatch {
	sb := StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: r.state, DeliveryCount: r.count,
		StagedProducerID: -1, StagedProducerEpoch: -1, StagedAckType: ackNone, StagedDeliveryState: -1, StagedAbortState: -1}
	if r.state == Acquired { // never persisted as such
		sb.DeliveryState = Available
	}
	if r.state == TxPending {
		sb.StagedProducerID, sb.StagedProducerEpoch, sb.StagedAckType = r.stagedPID, r.stagedEpoch, r.stagedAck
		sb.StagedDeliveryState = commitTarget(r.stagedAck)
		sb.StagedAbortState = abortTarget(r.abortArchive)
	}
	return sb
}

func sameStateBatch(a, b *StateBatch) bool {
	return a.DeliveryState == b.DeliveryState && a.DeliveryCount == b.DeliveryCount && a.StagedProducerID == b.StagedProducerID &&
		a.StagedProducerEpoch == b.StagedProducerEpoch && a.StagedAckType == b.StagedAckType &&
		a.StagedAbortState == b.StagedAbortState
}

func (c *changes) add(first, last int64, r *record) {
	sb := toStateBatch(first, last, r)
	if n := len(c.batches); n > 0 {
		p := &c.batches[n-1]
		if p.LastOffset+1 == first && sameStateBatch(p, &sb) {
			p.LastOffset = last
			return
		}
	}
	c.batches = append(c.batches, sb)
}

// update finishes a step: SPSO advance, then the Update.
func (sp *SharePartition) update(c *changes) Update {
	sp.advance()
	u := Update{StartOffset: sp.spso, StateEpoch: sp.stateEpoch}
	if len(c.batches) == 0 {
		return u
	}
	bs := c.batches
	if !slices.IsSortedFunc(bs, func(a, b StateBatch) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) }) {
		slices.SortFunc(bs, func(a, b StateBatch) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
		out := bs[:1]
		for _, sb := range bs[1:] {
			p := &out[len(out)-1]
			if p.LastOffset+1 == sb.FirstOffset && sameStateBatch(p, &sb) {
				p.LastOffset = sb.LastOffset
				continue
			}
			out = append(out, sb)
		}
		bs = out
	}
	u.Batches = bs
	u.DeliveryCompleteCount = sp.deliveryCompleteCount()
	return u
}

// Snapshot is the full persisted state of a share partition: the shape of a
// ShareSnapshot value / ReadShareGroupState response (kip-932.md 4.2, 4.7).
type Snapshot struct {
	StartOffset           int64
	StateEpoch            int32
	DeliveryCompleteCount int64
	Batches               []StateBatch
}

// Snapshot returns the full state to persist. ACQUIRED records are written as
// AVAILABLE with their current delivery count (an acquisition is never
// persisted as such); records below the SPSO are omitted.
func (sp *SharePartition) Snapshot() Snapshot {
	var c changes
	for _, b := range sp.batches {
		b.each(sp.spso, b.last, func(first, last int64, r *record) bool {
			c.add(first, last, r)
			return true
		})
	}
	return Snapshot{StartOffset: sp.spso, StateEpoch: sp.stateEpoch, DeliveryCompleteCount: sp.deliveryCompleteCount(), Batches: c.batches}
}

// Restore builds a share partition from persisted state (Kafka's
// SharePartition.maybeInitialize, kip-932.md 4.7): each batch comes back with
// its state and delivery count and no owner; TX_PENDING comes back with its
// staged producer id, epoch and ack type and waits for its marker; offsets
// between SPSO and the last batch that no batch covers were acquired but never
// persisted, so they become acquirable gaps the SPSO cannot pass. ARCHIVING
// (KIP-1191 DLQ, unsupported) is restored as ARCHIVED and ACQUIRED (never
// written by exactq) as AVAILABLE. A StartOffset of -1 must first be resolved
// with AutoOffsetReset; batches below the StartOffset, inverted or overlapping
// fail the restore, as Kafka fails the initialization.
func Restore(cfg Config, snap Snapshot) (*SharePartition, error) {
	return RestoreFrom(cfg, snap.StartOffset, snap.StateEpoch, slices.Values(snap.Batches))
}

// RestoreFrom is Restore with the persisted batches handed over one at a time, so that a
// caller converting them from another shape (the share-state store's) need not build a
// Snapshot of them first: a restore then allocates little more than what it keeps.
func RestoreFrom(cfg Config, startOffset int64, stateEpoch int32, batches iter.Seq[StateBatch]) (*SharePartition, error) {
	snap := Snapshot{StartOffset: startOffset, StateEpoch: stateEpoch}
	sp, err := New(cfg, snap.StartOffset, snap.StateEpoch)
	if err != nil {
		return nil, err
	}
	scratch := restoreScratch.Get().(*[]run)
	defer restoreScratch.Put(scratch)
	group := (*scratch)[:0] // the runs of the batch being restored (restoreBatch)
	defer func() { *scratch = group[:0] }()
	prev := snap.StartOffset - 1
	for sb := range batches {
		if sb.FirstOffset > sb.LastOffset || sb.FirstOffset < snap.StartOffset || sb.LastOffset == math.MaxInt64 {
			return nil, fmt.Errorf("persisted batch %d-%d is invalid for start offset %d", sb.FirstOffset, sb.LastOffset, snap.StartOffset)
		}
		if sb.FirstOffset <= prev {
			return nil, fmt.Errorf("persisted batch %d-%d overlaps or precedes offset %d", sb.FirstOffset, sb.LastOffset, prev)
		}
		if sb.DeliveryCount < 0 {
			return nil, fmt.Errorf("persisted batch %d-%d has delivery count %d", sb.FirstOffset, sb.LastOffset, sb.DeliveryCount)
		}
		prev = sb.LastOffset
		r := record{count: sb.DeliveryCount}
		r.clearOwner()
		switch sb.DeliveryState {
		case Available, Acquired:
			r.state = Available
		case Acknowledged:
			r.state = Acknowledged
		case Archived, Archiving:
			r.state = Archived
		case TxPending:
			if sb.StagedAckType != AckAccept && sb.StagedAckType != AckReject && sb.StagedAckType != AckGap {
				return nil, fmt.Errorf("persisted TX_PENDING batch %d-%d has staged ack type %d", sb.FirstOffset, sb.LastOffset, sb.StagedAckType)
			}
			r.state, r.stagedPID, r.stagedEpoch, r.stagedAck = TxPending, sb.StagedProducerID, sb.StagedProducerEpoch, sb.StagedAckType
			switch sb.StagedAbortState {
			case Available:
			case Archived:
				r.abortArchive = true
			default: // not recorded (older state): decide with the current limit
				r.abortArchive = sb.DeliveryCount >= cfg.DeliveryCountLimit
			}
			sp.txPending += sb.LastOffset - sb.FirstOffset + 1
		default:
			return nil, fmt.Errorf("persisted batch %d-%d has state %d", sb.FirstOffset, sb.LastOffset, sb.DeliveryState)
		}
		group = sp.restoreBatch(group, sb.FirstOffset, sb.LastOffset, r)
	}
	sp.endRestoredBatch(group)
	sp.nextOffset = prev + 1
	if prev >= snap.StartOffset {
		sp.gapStart, sp.gapEnd = snap.StartOffset, prev
		if _, ok := sp.firstGap(); !ok {
			sp.gapStart, sp.gapEnd = 1, 0
		}
	}
	sp.mayHaveAvailable = true
	sp.complete = sp.countComplete()
	sp.advance()
	return sp, nil
}

// restoreScratch holds the slices restores build their batches' runs in: a restore of a
// window with a state per record would otherwise grow one from nothing each time,
// allocating several times what it finally packs into two bytes an offset (garbage that
// sets the heap's high-water mark when a broker loads hundreds of share partitions).
var restoreScratch = sync.Pool{New: func() any { return new([]run) }}

// restoreBatch adds the restored range [first, last] with record r. Kafka makes an
// in-flight batch of every persisted one; exactq does too, except that a range
// continuing the previous one joins it as a run when either side is terminal. A
// terminal record never changes again, so no step can tell the difference: what a
// batch boundary decides (acquired ranges are not merged across it) only concerns
// records that are acquired, and the store keeps every neighbour distinct, so a
// partition whose records alternate between two terminal states comes back as one
// batch (packed when the restore ends), not as a batch per record.
//
// group holds the runs of the batch being built (a scratch slice, reused): they become
// a batch, packed if it qualifies, once a range does not continue it.
func (sp *SharePartition) restoreBatch(group []run, first, last int64, r record) []run {
	if n := len(group); n > 0 {
		if g := &group[n-1]; g.last+1 != first || !(r.state.Terminal() || g.rec.state.Terminal()) {
			sp.endRestoredBatch(group)
			group = group[:0]
		}
	}
	return append(group, run{first: first, last: last, rec: r})
}

// endRestoredBatch makes the batch of group's runs: batch-level state for one, else
// packed, else runs of exactly the size needed.
func (sp *SharePartition) endRestoredBatch(group []run) {
	if len(group) == 0 {
		return
	}
	b := &batch{first: group[0].first, last: group[len(group)-1].last, rec: group[0].rec}
	if len(group) > 1 {
		b.runs = group
		b.coalesce(sp.spso)
		b.maybePack(sp.spso)
		if b.runs != nil {
			b.runs = slices.Clone(b.runs)
		}
		clear(group) // drop member strings
	}
	sp.batches = append(sp.batches, b)
}

// RecordRange describes consecutive records sharing one state, for `exactq
// share describe`.
type RecordRange struct {
	FirstOffset, LastOffset int64
	State                   State
	DeliveryCount           int16
	Member                  string  // ACQUIRED and TX_PENDING
	LockDeadlineMs          int64   // ACQUIRED
	StagedProducerID        int64   // TX_PENDING, else -1
	StagedProducerEpoch     int16   // TX_PENDING, else -1
	StagedAckType           AckType // TX_PENDING, else -1
	StagedAbortState        State   // TX_PENDING: AVAILABLE or ARCHIVED on abort (decided at staging), else -1
}

// Description is the in-flight window as operators see it.
type Description struct {
	StartOffset, EndOffset int64
	InFlightRecords        int64
	TxPendingRecords       int64
	Records                []RecordRange // offsets >= StartOffset only; offsets no batch covers are absent
	Counters               Counters
}

// Describe lists the per-record states of the window, coalesced into ranges.
func (sp *SharePartition) Describe() Description {
	d := Description{StartOffset: sp.spso, EndOffset: sp.EndOffset(), InFlightRecords: sp.InFlightRecords(),
		TxPendingRecords: sp.txPending, Counters: sp.counters}
	add := func(first, last int64, r *record) {
		rr := RecordRange{FirstOffset: first, LastOffset: last, State: r.state, DeliveryCount: r.count, Member: r.member,
			LockDeadlineMs: r.deadlineMs, StagedProducerID: r.stagedPID, StagedProducerEpoch: r.stagedEpoch, StagedAckType: r.stagedAck,
			StagedAbortState: -1}
		if r.state == TxPending {
			rr.StagedAbortState = abortTarget(r.abortArchive)
		}
		if n := len(d.Records); n > 0 {
			p := &d.Records[n-1]
			if p.LastOffset+1 == first && p.State == rr.State && p.DeliveryCount == rr.DeliveryCount && p.Member == rr.Member &&
				p.LockDeadlineMs == rr.LockDeadlineMs && p.StagedProducerID == rr.StagedProducerID &&
				p.StagedProducerEpoch == rr.StagedProducerEpoch && p.StagedAckType == rr.StagedAckType &&
				p.StagedAbortState == rr.StagedAbortState {
				p.LastOffset = last
				return
			}
		}
		d.Records = append(d.Records, rr)
	}
	for _, b := range sp.batches {
		b.each(sp.spso, b.last, func(first, last int64, r *record) bool {
			add(first, last, r)
			return true
		})
	}
	return d
}
