package txn

import (
	"cmp"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// core is the pure transaction coordinator: the metadata of every loaded transactional id
// and the rules of TransactionCoordinator.scala. Every method is a step
// (state, input, now) → (new state, outputs); it never blocks, sleeps or does I/O. The one
// outside input it may ask for, a fresh producer id, comes through an allocFunc the caller
// passes in. The caller (Coordinator) persists the returned transits, then calls
// completed; it writes the markers of markerJobs, then persists their complete transit.
type core struct {
	entries      map[string]*entry
	maxTimeoutMs int32
	twoPhase     bool // transaction.two.phase.commit.enable
}

type allocFunc func() (int64, error)

func newCore(maxTimeoutMs int32, twoPhase bool) *core {
	return &core{entries: make(map[string]*entry), maxTimeoutMs: maxTimeoutMs, twoPhase: twoPhase}
}

// markerJob is the marker phase of one decided transaction: the Prepare* record is
// durable; markers go to remaining; then complete is persisted.
type markerJob struct {
	id        string
	pid       int64
	epoch     int16
	commit    bool
	remaining []TopicPartition
	complete  *transit
	running   bool // the edge has an attempt in flight
	retryAtMs int64
	attempts  int
}

// allocCode turns a producer id allocation failure into the answer for the client.
func allocCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return codeCoordinatorNotAvailable
}

// maxIDBytes bounds a transactional id: the TransactionLogKey v0 string has an int16
// length, so Kafka cannot persist a longer id (its serializer throws). We refuse it up
// front with INVALID_REQUEST.
const maxIDBytes = 32767

// initResult is InitProducerId's outcome: an answer now (code != 0 or ok with no
// transit), or a transit to persist first.
type initResult struct {
	code int16
	t    *transit
	// kept is set when a KeepPreparedTxn request kept an Ongoing transaction; ongoing is
	// then the pair that transaction was written under (OngoingTxnProducerId/Epoch).
	kept    bool
	ongoing pidEpoch
	// fence: t is the PrepareAbort of the id's ongoing transaction (fenced by this
	// request); once durable, the abort markers go out and the client gets
	// CONCURRENT_TRANSACTIONS so it retries (and gets the epoch after the abort).
	fence bool
}

// pidEpoch is the KIP-360 (ProducerID, ProducerEpoch) of an InitProducerId request.
type pidEpoch struct {
	pid   int64
	epoch int16
}

func (c *core) validTimeout(ms int32) bool { return ms > 0 && ms <= c.maxTimeoutMs }

// initOpts are InitProducerId v6's KIP-939 fields.
type initOpts struct {
	enable2PC bool // Enable2Pc
	keep      bool // KeepPreparedTxn
}

// initProducerID is handleInitProducerId + prepareInitProducerIdTransit, with KIP-939:
// Enable2Pc needs transaction.two.phase.commit.enable (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka) and makes the timeout MaxInt32 without
// checking it against transaction.max.timeout.ms; KeepPreparedTxn keeps an Ongoing
// transaction instead of aborting it (keep). Kafka 4.4 answers UNSUPPORTED_VERSION to
// KeepPreparedTxn; exactq implements the KIP's design.
func (c *core) initProducerID(id string, timeoutMs int32, expected *pidEpoch, opts initOpts, nowMs int64, alloc allocFunc) initResult {
	if id == "" || len(id) > maxIDBytes {
		return initResult{code: codeInvalidRequest}
	}
	if opts.enable2PC && !c.twoPhase {
		return initResult{code: codeTxnIDAuthorizationFailed}
	}
	if opts.enable2PC {
		timeoutMs = twoPhaseTimeoutMs
	} else if !c.validTimeout(timeoutMs) {
		return initResult{code: codeInvalidTxnTimeout}
	}
	e := c.entries[id]
	if e == nil {
		pid, err := alloc()
		if err != nil {
			return initResult{code: allocCode(err)}
		}
		// As in Kafka, the new id is cached before anything is persisted; it becomes
		// durable with the Empty record below.
		e = &entry{id: id, pending: noState, meta: Metadata{
			ProducerID: pid, PrevProducerID: noProducerID, NextProducerID: noProducerID, NextProducerEpoch: noProducerEpoch,
			ProducerEpoch: noProducerEpoch, LastProducerEpoch: noProducerEpoch, KeptProducerID: noProducerID, KeptProducerEpoch: noProducerEpoch,
			TimeoutMs: timeoutMs, State: Empty, StartMs: -1, LastUpdateMs: nowMs,
		}}
		c.entries[id] = e
	}
	if e.pending != noState {
		return initResult{code: codeConcurrentTxns}
	}
	m := e.meta
	if expected != nil {
		// KIP-360: the producer says which id/epoch it had. Fence it unless the id is
		// new, the producer id matches (the epoch is checked below), or it is a retry
		// across a producer id rotation.
		valid := m.ProducerEpoch == noProducerEpoch || expected.pid == m.ProducerID ||
			(expected.pid == m.PrevProducerID && epochExhausted(expected.epoch))
		// A kept transaction belongs to the producer that kept it: an older instance
		// (the fenced writer, or an earlier keeper) cannot abort it with a KIP-360 bump.
		if !valid || (m.Kept && m.State == Ongoing && *expected != (pidEpoch{m.ProducerID, m.ProducerEpoch})) {
			return initResult{code: codeProducerFenced}
		}
	}
	switch m.State {
	case PrepareAbort, PrepareCommit:
		return initResult{code: codeConcurrentTxns}
	case CompleteAbort, CompleteCommit, Empty:
		if epochExhausted(m.ProducerEpoch) && (expected == nil || expected.epoch == m.ProducerEpoch) {
			pid, err := alloc()
			if err != nil {
				return initResult{code: allocCode(err)}
			}
			t, err := e.prepareRotate(pid, timeoutMs, nowMs, expected != nil)
			if err != nil {
				return initResult{code: codeUnknownServerError}
			}
			return initResult{t: t}
		}
		var exp *int16
		if expected != nil {
			exp = &expected.epoch
		}
		t, code, err := e.prepareIncrementEpoch(timeoutMs, exp, nowMs)
		if err != nil {
			return initResult{code: codeUnknownServerError}
		}
		if code != 0 {
			return initResult{code: code}
		}
		return initResult{t: t}
	case Ongoing:
		if opts.keep {
			return c.keep(e, timeoutMs, !opts.enable2PC, nowMs, alloc)
		}
		// Abort the open transaction with a bumped epoch; the client retries and then
		// gets one more bump (Kafka never returns the fencing epoch).
		t, code := c.fenceAbort(e, nowMs, alloc)
		if code != 0 {
			return initResult{code: code}
		}
		return initResult{t: t, fence: true}
	}
	return initResult{code: codeUnknownServerError}
}

// keep is InitProducerId with KeepPreparedTxn on an Ongoing transaction: bump the epoch
// (or rotate the producer id when the epoch is exhausted) without ending the transaction,
// and answer the new pair with the pair the transaction was written under as ongoing.
func (c *core) keep(e *entry, timeoutMs int32, restart bool, nowMs int64, alloc allocFunc) initResult {
	m := e.meta
	ongoing := pidEpoch{m.ProducerID, m.ProducerEpoch}
	if m.Kept {
		ongoing = pidEpoch{m.KeptProducerID, m.KeptProducerEpoch}
	}
	newPID := noProducerID
	if epochExhausted(m.ProducerEpoch) {
		pid, err := alloc()
		if err != nil {
			return initResult{code: allocCode(err)}
		}
		newPID = pid
	}
	t, err := e.prepareKeep(newPID, timeoutMs, restart, nowMs)
	if err != nil {
		return initResult{code: codeUnknownServerError}
	}
	return initResult{t: t, kept: true, ongoing: ongoing}
}

// end prepares the decision of e's Ongoing (or, for an abort, idle) transaction at
// transaction version tv: the Prepare* transit with the epoch bump of TV2, a fresh
// producer id for the client when its epoch is exhausted, and the markers of a kept
// transaction whose producer id was rotated going to that transaction's producer id.
func (c *core) end(e *entry, to State, tv int16, nowMs int64, noPartitionAdded bool, alloc allocFunc) (*transit, int16) {
	next := noProducerID
	if tv >= 2 && epochExhausted(e.meta.ProducerEpoch) {
		p, err := alloc()
		if err != nil {
			return nil, allocCode(err)
		}
		next = p
	}
	var t *transit
	var err error
	if e.meta.keptRotated() {
		t, err = e.prepareKeptRotatedEnd(to, tv, next, nowMs)
	} else {
		t, err = e.prepareAbortOrCommit(to, tv, next, nowMs, noPartitionAdded)
	}
	if err != nil {
		return nil, codeUnknownServerError
	}
	return t, 0
}

// fenceAbort aborts e's ongoing transaction on the coordinator's own initiative (a new
// InitProducerId or a timeout). Kafka does prepareFenceProducerEpoch followed by
// endTransaction(ABORT, isFromClient=false) at the server's transaction version; exactq's
// server version is 2, so the PrepareAbort bumps the epoch once (and rotates the producer
// id when the epoch is exhausted), which fences the old producer at every partition when
// the markers land.
func (c *core) fenceAbort(e *entry, nowMs int64, alloc allocFunc) (*transit, int16) {
	if e.pending != noState || e.meta.State != Ongoing {
		return nil, codeConcurrentTxns
	}
	return c.end(e, PrepareAbort, serverTV, nowMs, false, alloc)
}

// serverTV is the finalized transaction.version exactq runs at: the version used for the
// coordinator's own aborts (timeouts, fencing), as Kafka uses its finalized level.
const serverTV int16 = 2

// endResult is EndTxn's outcome: an immediate answer (code, or a no-op success with
// pid/epoch for TV2 retries), or a Prepare* transit to persist.
type endResult struct {
	code  int16
	pid   int64
	epoch int16
	t     *transit
}

// endTxn is handleEndTransaction for a client request at transaction version tv.
func (c *core) endTxn(id string, pid int64, epoch int16, commit bool, tv int16, nowMs int64, alloc allocFunc) endResult {
	fail := func(code int16) endResult { return endResult{code: code, pid: noProducerID, epoch: noProducerEpoch} }
	if id == "" {
		return fail(codeInvalidRequest)
	}
	e := c.entries[id]
	if e == nil {
		return fail(codeInvalidPIDMapping)
	}
	if tv < 2 {
		return c.endTxnV1(e, pid, epoch, commit, nowMs)
	}
	m := e.meta
	retryOnOverflow := m.PrevProducerID == pid && epoch == maxEpoch-1 && m.ProducerEpoch == 0
	retryOnBump := int32(m.ProducerEpoch) == int32(epoch)+1
	var validEpoch bool
	switch m.State {
	case PrepareCommit, PrepareAbort:
		validEpoch = retryOnBump
	case CompleteCommit, CompleteAbort:
		validEpoch = retryOnBump || retryOnOverflow || epoch == m.ProducerEpoch
	default:
		validEpoch = epoch == m.ProducerEpoch
	}
	isRetry := retryOnBump || retryOnOverflow
	switch {
	case e.pending != noState:
		return fail(codeConcurrentTxns)
	case m.keptZombie(pid):
		return fail(codeProducerFenced)
	case m.ProducerID != pid && !retryOnOverflow:
		return fail(codeInvalidPIDMapping)
	case !validEpoch:
		return fail(codeProducerFenced)
	}
	decide := func(to State, noPartitionAdded bool) endResult {
		t, code := c.end(e, to, tv, nowMs, noPartitionAdded, alloc)
		if code != 0 {
			return fail(code)
		}
		return endResult{t: t}
	}
	ok := endResult{pid: m.ProducerID, epoch: m.ProducerEpoch}
	// The TV2 table of TransactionCoordinator.scala: a retry (epoch one below, or across
	// a producer id rotation) of the outcome already reached succeeds without a change;
	// the current epoch may abort from any idle state (the client may not know whether
	// its transaction started) but only commit an ongoing transaction.
	switch m.State {
	case Ongoing:
		if commit {
			return decide(PrepareCommit, false)
		}
		return decide(PrepareAbort, false)
	case CompleteCommit:
		if commit {
			if isRetry {
				return ok
			}
			return fail(codeInvalidTxnState)
		}
		if isRetry {
			return fail(codeInvalidTxnState)
		}
		return decide(PrepareAbort, true)
	case CompleteAbort:
		if !commit {
			if isRetry {
				return ok
			}
			return decide(PrepareAbort, true)
		}
		return fail(codeInvalidTxnState)
	case PrepareCommit:
		if commit {
			return fail(codeConcurrentTxns)
		}
		return fail(codeInvalidTxnState)
	case PrepareAbort:
		if !commit {
			return fail(codeConcurrentTxns)
		}
		return fail(codeInvalidTxnState)
	case Empty:
		if !commit {
			return decide(PrepareAbort, true)
		}
		return fail(codeInvalidTxnState)
	}
	return fail(codeUnknownServerError)
}

// endTxnV1 is endTransactionWithTV1 for client requests: the epoch must match exactly,
// and a repeated EndTxn of the outcome already completed succeeds.
func (c *core) endTxnV1(e *entry, pid int64, epoch int16, commit bool, nowMs int64) endResult {
	fail := func(code int16) endResult { return endResult{code: code, pid: noProducerID, epoch: noProducerEpoch} }
	m := e.meta
	switch {
	case m.keptZombie(pid):
		return fail(codeProducerFenced)
	case m.ProducerID != pid:
		return fail(codeInvalidPIDMapping)
	case epoch != m.ProducerEpoch:
		return fail(codeProducerFenced)
	case e.pending != noState:
		return fail(codeConcurrentTxns)
	}
	ok := endResult{pid: noProducerID, epoch: noProducerEpoch}
	switch m.State {
	case Ongoing:
		to := PrepareAbort
		if commit {
			to = PrepareCommit
		}
		t, code := c.end(e, to, 0, nowMs, false, nil)
		if code != 0 {
			return fail(code)
		}
		return endResult{t: t}
	case CompleteCommit:
		if commit {
			return ok
		}
	case CompleteAbort:
		if !commit {
			return ok
		}
	case PrepareCommit:
		if commit {
			return fail(codeConcurrentTxns)
		}
	case PrepareAbort:
		if !commit {
			return fail(codeConcurrentTxns)
		}
	}
	return fail(codeInvalidTxnState)
}

// beginMarkers is called once e's Prepare* record is durable (and e.meta is Prepare*): it
// prepares the Complete* transition (so e stays pending until it is durable) and returns
// the markers to write. Markers carry the Prepare* record's producer id and epoch.
func (c *core) beginMarkers(e *entry, nowMs int64) (*markerJob, error) {
	if e.meta.State != PrepareCommit && e.meta.State != PrepareAbort {
		return nil, errInternal("markers for %q in state %v", e.id, e.meta.State)
	}
	job := &markerJob{
		id: e.id, pid: e.meta.ProducerID, epoch: e.meta.ProducerEpoch,
		commit:    e.meta.State == PrepareCommit,
		remaining: slices.Clone(e.meta.Partitions),
	}
	t, err := e.prepareComplete(nowMs)
	if err != nil {
		return nil, err
	}
	job.complete = t
	e.markers = job
	return job, nil
}

// markersWritten records that the markers for done are durable. It reports whether the
// job has nothing left to write.
func (c *core) markersWritten(job *markerJob, done []TopicPartition) bool {
	e := c.entries[job.id]
	job.remaining = slices.DeleteFunc(job.remaining, func(tp TopicPartition) bool {
		return slices.ContainsFunc(done, func(d TopicPartition) bool { return compareTP(d, tp) == 0 })
	})
	if e != nil && e.markers == job {
		// Kafka removes partitions from the in-memory metadata as their markers land, so
		// DescribeTransactions shows what is still outstanding.
		e.meta.Partitions = slices.DeleteFunc(e.meta.Partitions, func(tp TopicPartition) bool {
			return slices.ContainsFunc(done, func(d TopicPartition) bool { return compareTP(d, tp) == 0 })
		})
	}
	return len(job.remaining) == 0
}

// addPartitions is handleAddPartitionsToTransaction (AddPartitionsToTxn, AddOffsetsToTxn
// and the TV2 implicit add from produce). code != 0 or t == nil means answer now.
func (c *core) addPartitions(id string, pid int64, epoch int16, tps []TopicPartition, tv int16, nowMs int64) (int16, *transit) {
	if id == "" {
		return codeInvalidRequest, nil
	}
	e := c.entries[id]
	if e == nil {
		return codeInvalidPIDMapping, nil
	}
	m := e.meta
	switch {
	case e.pending != noState:
		return codeConcurrentTxns, nil
	case m.keptZombie(pid):
		return codeProducerFenced, nil
	case m.ProducerID != pid:
		return codeInvalidPIDMapping, nil
	case m.ProducerEpoch != epoch:
		return codeProducerFenced, nil
	case m.State == PrepareCommit || m.State == PrepareAbort:
		return codeConcurrentTxns, nil
	case m.Kept && m.State == Ongoing:
		// A kept transaction may only be ended: its markers go to the partitions it
		// had, for the pair it was written under.
		return codeInvalidTxnState, nil
	case m.State == Ongoing && m.hasAll(tps):
		return codeNone, nil
	}
	t, err := e.prepareAddPartitions(tps, nowMs, tv)
	if err != nil {
		return codeUnknownServerError, nil
	}
	return codeNone, t
}

// verify is handleVerifyPartitionsInTransaction (KIP-890 part 1): a transaction-wide
// error, or one code per partition (TRANSACTION_ABORTABLE when it was never added).
func (c *core) verify(id string, pid int64, epoch int16, tps []TopicPartition) (int16, []int16) {
	if id == "" {
		return codeInvalidRequest, nil
	}
	e := c.entries[id]
	switch {
	case e == nil:
		return codeInvalidPIDMapping, nil
	case e.meta.keptZombie(pid):
		return codeProducerFenced, nil
	case e.meta.ProducerID != pid:
		return codeInvalidPIDMapping, nil
	case e.meta.ProducerEpoch != epoch:
		return codeProducerFenced, nil
	case e.meta.State == PrepareCommit || e.meta.State == PrepareAbort:
		return codeConcurrentTxns, nil
	case e.meta.Kept && e.meta.State == Ongoing:
		return codeInvalidTxnState, nil
	}
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		if !e.meta.has(tp) {
			codes[i] = codeTransactionAbortable
		}
	}
	return codeNone, codes
}

// timedOut lists the ids whose ongoing transaction is older than its timeout.
func (c *core) timedOut(nowMs int64) []string {
	var ids []string
	for id, e := range c.entries {
		// A two-phase-commit transaction has no timeout (KIP-939): only its producer, or
		// an InitProducerId without KeepPreparedTxn, ends it.
		if e.pending == noState && e.meta.State == Ongoing && !e.meta.IsTwoPhase() && e.meta.StartMs+int64(e.meta.TimeoutMs) < nowMs {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// expired prepares the Dead transition of every idle id last updated at least
// expirationMs ago; the caller writes their tombstones.
func (c *core) expired(nowMs, expirationMs int64) []*transit {
	var out []*transit
	for _, e := range c.entries {
		if e.pending == noState && e.meta.State.expirationAllowed() && e.meta.LastUpdateMs <= nowMs-expirationMs {
			if t, err := e.prepareDead(); err == nil {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b *transit) int { return cmp.Compare(a.id, b.id) })
	return out
}

// completed applies a durable transit. A durable Dead transition removes the id.
func (c *core) completed(t *transit) error {
	e := c.entries[t.id]
	if e == nil {
		return errInternal("completed transit for unknown id %q", t.id)
	}
	if t.meta.State == Dead {
		if e.pending == Dead {
			delete(c.entries, t.id)
			return nil
		}
		return errInternal("tombstone for %q while pending %v", t.id, e.pending)
	}
	if err := e.complete(t); err != nil {
		return err
	}
	if t.meta.State == CompleteCommit || t.meta.State == CompleteAbort {
		e.markers = nil
	}
	return nil
}

// failed drops a transit whose record could not be persisted: the id is as before.
func (c *core) failed(t *transit) {
	if e := c.entries[t.id]; e != nil && e.pending == t.meta.State {
		e.pending = noState
	}
}

// load applies one replayed record (meta nil: a tombstone).
func (c *core) load(id string, meta *Metadata) {
	if meta == nil {
		delete(c.entries, id)
		return
	}
	m := meta.clone()
	m.LastProducerEpoch = noProducerEpoch // not persisted, as in Kafka
	c.entries[id] = &entry{id: id, meta: m, pending: noState}
}
