package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/txn/txnwire"
)

// Transactional producer errors. Kafka's own errors (kerr.ProducerFenced,
// kerr.TransactionAbortable, ...) are wrapped inside these, so both
// errors.Is(err, ErrTransactionAbortable) and errors.Is(err, kerr.ProducerFenced) work.
var (
	// ErrNotTransactional is returned by the transaction methods of a producer without
	// a TransactionalID.
	ErrNotTransactional = errors.New("client: producer is not transactional")
	// ErrNoTransaction is returned by Produce, SendOffsetsToTransaction, Commit and Abort
	// of a transactional producer outside a transaction (before BeginTransaction, or while
	// the transaction is being committed or aborted).
	ErrNoTransaction = errors.New("client: no transaction in progress")
	// ErrTransactionInProgress is returned by BeginTransaction while a transaction is open.
	ErrTransactionInProgress = errors.New("client: transaction already in progress")
	// ErrTransactionAbortable means the current transaction failed (a record was not
	// written, a partition or the offsets could not be added, the coordinator answered
	// TRANSACTION_ABORTABLE, the group generation moved on). It cannot commit: call
	// AbortTransaction, then start again. The producer stays usable.
	ErrTransactionAbortable = errors.New("client: transaction must be aborted")
	// ErrProducerFatal means the producer can no longer write transactionally: it was
	// fenced by a newer instance with the same TransactionalID (kerr.ProducerFenced,
	// also reported for INVALID_PRODUCER_EPOCH), is not authorized, or the coordinator
	// reported a state the client cannot recover from. Close it and make a new one.
	ErrProducerFatal = errors.New("client: transactional producer is unusable")
	// ErrTransactionAborted completes the records that AbortTransaction dropped before
	// they were sent.
	ErrTransactionAborted = errors.New("client: record dropped by AbortTransaction")
)

// defaultTransactionTimeout is Kafka's transaction.timeout.ms default.
const defaultTransactionTimeout = time.Minute

// Transaction protocol version caps below "transactions v2" (KIP-890): these versions
// tell the broker the client adds partitions itself and expects no epoch bump on EndTxn.
const (
	tv1MaxProduce         = 11
	tv1MaxEndTxn          = 4
	tv1MaxTxnOffsetCommit = 4
	tv2MinEndTxn          = 5
	tv2MinProduce         = 12
)

// txnPhase is where the transactional producer is in its life cycle.
type txnPhase uint8

const (
	txnUninitialized txnPhase = iota // InitTransactions not done yet
	txnReady                         // between transactions
	txnOpen                          // BeginTransaction called: Produce and SendOffsets allowed
	txnCommitting                    // CommitTransaction running (or failed midway: call it again)
	txnAborting                      // AbortTransaction running (or failed midway: call it again)
	txnPrepared                      // KIP-939: PrepareTransaction or RecoverPreparedTransaction; only the end is allowed
)

// txnState is the transactional part of a Producer. opMu serialises the public
// transaction methods; everything else is guarded by Producer.mu.
type txnState struct {
	id      string
	timeout time.Duration
	coord   *coordinator

	opMu sync.Mutex

	phase txnPhase
	// v2 is true when the coordinator finalized transaction.version ≥ 2 (KIP-890) and
	// both sides speak Produce v12 and EndTxn v5: the broker adds partitions itself and
	// EndTxn returns a bumped epoch. Decided at InitTransactions.
	v2 bool
	// started is true once the coordinator knows about this transaction (a partition or
	// the offsets were added, or a record was sent under v2). A transaction that never
	// started ends locally: the coordinator would answer INVALID_TXN_STATE to an EndTxn
	// for an empty transaction (Java's TransactionManager does the same).
	started bool
	// added are the partitions the coordinator has in this transaction (v1); pending are
	// partitions with records waiting to be added; adding is true while an
	// AddPartitionsToTxn is in flight.
	added   map[TopicPartition]bool
	pending map[TopicPartition]bool
	adding  bool
	// endSent is true once EndTxn was sent for this transaction: the outcome is then
	// decided by the coordinator and only the same EndTxn may be retried.
	endSent bool
	// abortable is the first error that doomed the current transaction; fatal the error
	// that made the producer unusable.
	abortable error
	fatal     error
	// forceV1 makes InitTransactions use transactions v1 whatever the broker finalized
	// (tests of the v1 path against a v2 broker; set before the first InitTransactions).
	forceV1 bool
	// bump is set when sequence numbers may be out of step with the broker (a batch with
	// a sequence was dropped, or the broker reported a gap): after the abort the epoch is
	// bumped with InitProducerId (KIP-360), since a transactional producer cannot bump
	// locally.
	bump bool

	// enable2PC is ProducerConfig.Enable2PC (KIP-939). prepared is the state of the
	// transaction PrepareTransaction prepared or RecoverPreparedTransaction recovered;
	// hasPrepared stays set until that transaction ends (reset), so CompleteTransaction
	// can be repeated after a failure midway.
	enable2PC   bool
	prepared    PreparedTxnState
	hasPrepared bool
}

func newTxnState(cl *cluster, id string, timeout time.Duration) *txnState {
	return &txnState{
		id:      id,
		timeout: timeout,
		coord:   newCoordinator(cl, coordinatorTxn, id),
		added:   map[TopicPartition]bool{},
		pending: map[TopicPartition]bool{},
	}
}

// reset clears per-transaction state after a commit or an abort (Producer.mu held).
func (t *txnState) reset() {
	t.phase = txnReady
	t.prepared, t.hasPrepared = noPreparedTxnState, false
	t.started, t.endSent, t.adding = false, false, false
	t.added = map[TopicPartition]bool{}
	t.pending = map[TopicPartition]bool{}
	t.abortable = nil
}

// fail records err as the transaction's outcome (Producer.mu held): fatal errors make the
// producer unusable, anything else dooms the current transaction only.
func (t *txnState) fail(err error) {
	if err == nil || t.fatal != nil {
		return
	}
	if isFatalTxnErr(err) {
		t.fatal = fatalErr(err)
		return
	}
	if t.abortable == nil && (t.phase == txnOpen || t.phase == txnCommitting || t.phase == txnPrepared) {
		t.abortable = fmt.Errorf("%w: %w", ErrTransactionAbortable, err)
	}
}

// notOpenErr is the error of Produce and of staging offsets or share acknowledgements
// outside an open transaction (Producer.mu held): ErrTransactionPrepared while a
// transaction is prepared, else ErrNoTransaction; nil inside one.
func (t *txnState) notOpenErr() error {
	switch t.phase {
	case txnOpen:
		return nil
	case txnPrepared:
		return ErrTransactionPrepared
	}
	return ErrNoTransaction
}

// err is the error a transactional operation returns in the current state, or nil.
func (t *txnState) err() error {
	if t.fatal != nil {
		return t.fatal
	}
	return t.abortable
}

// isFatalTxnErr reports errors after which no transaction can succeed with this producer
// (Java's fatalError cases).
func isFatalTxnErr(err error) bool {
	return errors.Is(err, ErrProducerFatal) ||
		errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// fatalErr wraps err in ErrProducerFatal. INVALID_PRODUCER_EPOCH is reported as
// PRODUCER_FENCED as well, as the Java client does: older coordinators and partition
// leaders use it for a fenced producer.
func fatalErr(err error) error {
	if errors.Is(err, ErrProducerFatal) {
		return err
	}
	if errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		return fmt.Errorf("%w: %w: %w", ErrProducerFatal, kerr.ProducerFenced, err)
	}
	return fmt.Errorf("%w: %w", ErrProducerFatal, err)
}

// ---- public API ----

// InitTransactions registers the TransactionalID with its transaction coordinator
// (FindCoordinator, InitProducerId): it fences any earlier producer with the same id and
// aborts (or finishes) that producer's open transaction. BeginTransaction calls it when it
// was not called yet; calling it first makes the fencing happen before any work.
//
// IT ABORTS A PREPARED TWO-PHASE-COMMIT TRANSACTION TOO (KIP-939, as Kafka does): a
// transaction an earlier instance prepared with PrepareTransaction is aborted by
// InitTransactions whatever the external coordinator decided. A producer that recovers
// from a crash in a two-phase-commit protocol must call RecoverPreparedTransaction
// instead, then CompleteTransaction.
//
// With Enable2PC it asks for two-phase commit (InitProducerId v6 with Enable2Pc): a broker
// without transaction.two.phase.commit.enable answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// (the error wraps ErrProducerFatal and kerr.TransactionalIDAuthorizationFailed), a broker
// without InitProducerId v6 kerr.UnsupportedVersion.
func (p *Producer) InitTransactions(ctx context.Context) error {
	t := p.txn
	if t == nil {
		return ErrNotTransactional
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	p.mu.Lock()
	phase, err := t.phase, t.fatal
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if phase != txnUninitialized {
		return nil
	}
	return p.initTxnID(ctx, false)
}

// BeginTransaction starts a transaction: records produced until CommitTransaction or
// AbortTransaction belong to it.
func (p *Producer) BeginTransaction(ctx context.Context) error {
	t := p.txn
	if t == nil {
		return ErrNotTransactional
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	p.mu.Lock()
	phase, err := t.phase, t.fatal
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if phase == txnUninitialized {
		if err := p.initTxnID(ctx, false); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.phase == txnPrepared {
		return ErrTransactionPrepared
	}
	if t.phase != txnReady {
		return ErrTransactionInProgress
	}
	t.reset()
	t.phase = txnOpen
	return nil
}

// CommitTransaction flushes the transaction's records and commits it. Errors:
// ErrTransactionAbortable (call AbortTransaction), ErrProducerFatal (close the producer),
// or ctx's error or a transport error, after which CommitTransaction may be called again:
// it resumes where it stopped and never commits twice. A transaction without records or
// offsets commits without a coordinator round trip.
func (p *Producer) CommitTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, true)
}

// AbortTransaction drops the records not yet sent (their callbacks get
// ErrTransactionAborted), waits for those in flight, and aborts the transaction. After a
// fatal error it returns that error.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, false)
}

// GroupMetadata identifies a consumer group member for SendOffsetsToTransaction
// (KIP-447): the coordinator rejects the offsets when the member's generation is stale,
// which fences a consumer that lost its partitions in a rebalance.
type GroupMetadata struct {
	GroupID      string
	GenerationID int32  // -1 when unknown (no generation check)
	MemberID     string // "" when unknown
	// GroupInstanceID is the static member id, "" for a dynamic member.
	GroupInstanceID string
}

// SendOffsetsToTransaction commits consumer group offsets (the next offset to consume per
// partition) as part of the current transaction: they become visible if and only if the
// transaction commits. Use Consumer.GroupMetadata for group.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[TopicPartition]int64, group GroupMetadata) error {
	t := p.txn
	if t == nil {
		return ErrNotTransactional
	}
	if group.GroupID == "" {
		return errors.New("client: SendOffsetsToTransaction without a group id")
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	p.mu.Lock()
	if err := t.err(); err != nil {
		p.mu.Unlock()
		return err
	}
	if err := t.notOpenErr(); err != nil {
		p.mu.Unlock()
		return err
	}
	id, v2 := p.ids.cur, t.v2
	p.mu.Unlock()

	if !v2 {
		if err := p.addOffsetsToTxn(ctx, id, group.GroupID); err != nil {
			return p.txnFailed(err)
		}
	}
	p.mu.Lock()
	t.started = true
	p.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	return p.txnFailed(p.txnOffsetCommit(ctx, id, v2, offsets, group))
}

// txnFailed classifies err from a transactional exchange: Kafka errors move the
// transaction to abortable or the producer to fatal; context and transport errors are
// returned as they are (the call may be retried). It returns the error to hand back.
func (p *Producer) txnFailed(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) && !errors.Is(err, ErrProducerFatal) && !errors.Is(err, ErrTransactionAbortable) {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txn.fail(err)
	if e := p.txn.err(); e != nil {
		return e
	}
	return err
}

// ---- InitProducerId ----

// initTxnID gets the producer id and epoch for the transactional id (t.opMu held). With
// bump, it passes the current id and epoch so the coordinator bumps the epoch of the same
// producer id (KIP-360) instead of treating us as a new instance.
func (p *Producer) initTxnID(ctx context.Context, bump bool) error {
	_, err := p.initTxnIDKeep(ctx, bump, false)
	return err
}

// initTxnIDKeep is initTxnID with KIP-939's KeepPreparedTxn (keep): an Ongoing
// transaction of an earlier instance is kept, not aborted, and its producer id and epoch
// are returned (noProducerID when there was none); the producer is then prepared. With
// Enable2PC or keep the request is InitProducerId v6 (txnwire), which the coordinator must
// serve.
func (p *Producer) initTxnIDKeep(ctx context.Context, bump, keep bool) (producerID, error) {
	t := p.txn
	p.mu.Lock()
	cur := p.ids.cur
	p.mu.Unlock()
	var got producerID
	ongoing := noProducerID
	var coordConn *conn
	err := retryCoordinator(ctx, t.coord, func() (bool, error) {
		c, err := t.coord.conn(ctx)
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		base := kmsg.NewInitProducerIDRequest()
		base.TransactionalID = kmsg.StringPtr(t.id)
		base.TransactionTimeoutMillis = int32(t.timeout.Milliseconds())
		base.ProducerID, base.ProducerEpoch = -1, -1
		if bump && cur.id >= 0 {
			base.ProducerID, base.ProducerEpoch = cur.id, cur.epoch
		}
		var req kmsg.Request = &base
		if t.enable2PC || keep {
			if v := c.others[kmsg.InitProducerID.Int16()]; v.MaxVersion < 6 {
				return false, fmt.Errorf("client: %s does not serve two-phase commit (InitProducerId v6, KIP-939): %w", c.addr, kerr.UnsupportedVersion)
			}
			req = &txnwire.InitProducerIDRequest{InitProducerIDRequest: base, Enable2Pc: t.enable2PC, KeepPreparedTxn: keep}
		}
		resp, err := p.cl.doOn(ctx, c, req)
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		var r *kmsg.InitProducerIDResponse
		next := noProducerID
		switch resp := resp.(type) {
		case *txnwire.InitProducerIDResponse:
			r, next = &resp.InitProducerIDResponse, producerID{id: resp.OngoingTxnProducerID, epoch: resp.OngoingTxnProducerEpoch}
		case *kmsg.InitProducerIDResponse:
			r = resp
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if t.enable2PC && errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
				err = fmt.Errorf("client: InitProducerId %q with two-phase commit (is transaction.two.phase.commit.enable set on the broker?): %w", t.id, err)
			} else {
				err = fmt.Errorf("client: InitProducerId %q: %w", t.id, err)
			}
			return retriableCoordinatorErr(err) || errors.Is(err, kerr.ConcurrentTransactions), err
		}
		got, ongoing, coordConn = producerID{id: r.ProducerID, epoch: r.ProducerEpoch}, next, c
		return false, nil
	})
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			p.mu.Lock()
			t.fatal = fatalErr(err)
			err = t.fatal
			p.mu.Unlock()
		}
		return noProducerID, err
	}
	v2 := !t.forceV1 && coordConn.feature("transaction.version") >= 2 &&
		coordConn.version(kmsg.EndTxn.Int16()) >= tv2MinEndTxn &&
		coordConn.version(kmsg.Produce.Int16()) >= tv2MinProduce
	p.mu.Lock()
	p.ids.set(got)
	t.v2 = v2
	t.bump = false
	t.reset()
	if keep && ongoing.id >= 0 {
		// The kept transaction is known to the coordinator: it ends with EndTxn under
		// our new epoch, which resolves what the old epoch wrote.
		t.phase = txnPrepared
		t.started = true
		t.prepared = PreparedTxnState{ProducerID: ongoing.id, Epoch: ongoing.epoch}
		t.hasPrepared = true
	}
	p.mu.Unlock()
	p.poke()
	return ongoing, nil
}

// ---- EndTxn ----

// endTransaction is CommitTransaction (commit) and AbortTransaction (!commit).
func (p *Producer) endTransaction(ctx context.Context, commit bool) error {
	t := p.txn
	if t == nil {
		return ErrNotTransactional
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()

	p.mu.Lock()
	if t.fatal != nil {
		p.mu.Unlock()
		return t.fatal
	}
	switch {
	case commit && (t.phase == txnOpen || t.phase == txnPrepared):
		if t.abortable != nil {
			p.mu.Unlock()
			return t.abortable
		}
		t.phase = txnCommitting
	case commit && t.phase == txnCommitting:
		// Resuming a commit that failed midway.
	case !commit && (t.phase == txnOpen || t.phase == txnAborting || t.phase == txnPrepared):
		t.phase = txnAborting
	case !commit && t.phase == txnCommitting && !t.endSent:
		// The commit failed before EndTxn (flushing): aborting is still possible.
		t.phase = txnAborting
	case !commit && t.phase == txnCommitting:
		p.mu.Unlock()
		return errors.New("client: AbortTransaction after CommitTransaction sent EndTxn: call CommitTransaction again")
	default:
		p.mu.Unlock()
		return ErrNoTransaction
	}
	if !commit {
		p.dropUnsent(ErrTransactionAborted)
	}
	p.mu.Unlock()
	p.poke()

	// Commit: every record must have its outcome. Abort: the records in flight must be
	// answered before EndTxn, or a late write could land after the abort marker.
	if err := p.Flush(ctx); err != nil {
		return err
	}

	p.mu.Lock()
	if commit && t.abortable != nil {
		err := t.abortable
		p.mu.Unlock()
		return err
	}
	if commit && len(t.pending) > 0 {
		// Every record was answered, so every partition was added; pending left over
		// means a partition whose records all expired before being added.
		t.pending = map[TopicPartition]bool{}
	}
	started, id, v2 := t.started, p.ids.cur, t.v2
	t.endSent = t.endSent || started
	p.mu.Unlock()

	if started {
		next, err := p.endTxn(ctx, id, v2, commit)
		if err != nil {
			if !commit && errors.Is(err, kerr.TransactionAbortable) {
				// An abort that is itself abortable would loop (Java makes it fatal).
				err = fatalErr(err)
			}
			var ke *kerr.Error
			if errors.As(err, &ke) || errors.Is(err, ErrProducerFatal) {
				p.mu.Lock()
				if isFatalTxnErr(err) {
					t.fatal = fatalErr(err)
					err = t.fatal
				} else {
					t.phase = txnOpen // abortable: EndTxn(commit) was refused, abort is allowed
					t.endSent = false
					t.fail(err)
					err = t.abortable
				}
				p.mu.Unlock()
			}
			return err
		}
		if next.id >= 0 {
			p.mu.Lock()
			p.ids.set(next) // v2: every EndTxn bumps the epoch; sequences restart at 0
			p.mu.Unlock()
		}
	}

	p.mu.Lock()
	bump := t.bump || p.ids.bumpNeeded
	t.reset()
	p.mu.Unlock()
	if bump && !commit {
		// Sequence numbers may be out of step with the partitions: bump the epoch before
		// the next transaction (KIP-360).
		return p.initTxnID(ctx, true)
	}
	return nil
}

// endTxn sends EndTxn until the coordinator decides. Under v2 it returns the bumped
// producer id and epoch (id -1 otherwise).
func (p *Producer) endTxn(ctx context.Context, id producerID, v2, commit bool) (producerID, error) {
	t := p.txn
	next := noProducerID
	o := reqOpts{maxVersion: tv1MaxEndTxn}
	if v2 {
		o.maxVersion = -1
	}
	err := retryCoordinator(ctx, t.coord, func() (bool, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = t.id
		req.ProducerID, req.ProducerEpoch = id.id, id.epoch
		req.Commit = commit
		resp, err := t.coord.do(ctx, req, o)
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		r := resp.(*kmsg.EndTxnResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			err = fmt.Errorf("client: EndTxn(commit=%v) %q: %w", commit, t.id, err)
			return retriableCoordinatorErr(err) || errors.Is(err, kerr.ConcurrentTransactions), err
		}
		if r.Version >= tv2MinEndTxn && r.ProducerID >= 0 {
			next = producerID{id: r.ProducerID, epoch: r.ProducerEpoch}
		}
		return false, nil
	})
	return next, err
}

// ---- AddPartitionsToTxn (transactions v1) ----

// txnPartitionReady reports whether a batch of tp may be sent now (Producer.mu held).
// Under v1 a partition must be in the transaction first; unknown partitions are queued
// for the next AddPartitionsToTxn.
func (p *Producer) txnPartitionReady(tp TopicPartition) bool {
	t := p.txn
	if t.v2 {
		t.started = true // the broker adds the partition when the batch arrives
		return true
	}
	if t.added[tp] {
		return true
	}
	t.pending[tp] = true
	return false
}

// txnCanSend reports whether the sender may send transactional batches at all
// (Producer.mu held): only inside a transaction that is not being aborted, with an id,
// and not while the epoch must be bumped.
func (p *Producer) txnCanSend() bool {
	t := p.txn
	if t.fatal != nil || p.ids.cur.id < 0 {
		return false
	}
	if p.ids.bumpNeeded {
		// Sequences are out of step: nothing more can be written in this transaction.
		t.fail(fmt.Errorf("client: sequence numbers out of step with the broker: %w", kerr.OutOfOrderSequenceNumber))
		t.bump = true
		return false
	}
	return t.phase == txnOpen || t.phase == txnCommitting || t.phase == txnPrepared
}

// maybeAddPartitions starts one AddPartitionsToTxn for every pending partition unless one
// is in flight (Producer.mu held). Batching per round: partitions that turn up while a
// request is in flight go in the next one.
func (p *Producer) maybeAddPartitions() {
	t := p.txn
	if t.adding || len(t.pending) == 0 || t.fatal != nil || t.abortable != nil {
		return
	}
	tps := make([]TopicPartition, 0, len(t.pending))
	for tp := range t.pending {
		tps = append(tps, tp)
	}
	t.pending = map[TopicPartition]bool{}
	t.adding = true
	id := p.ids.cur
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := p.addPartitionsToTxn(p.ctx, id, tps)
		p.mu.Lock()
		t.adding = false
		if err == nil {
			t.started = true
			for _, tp := range tps {
				t.added[tp] = true
			}
		} else {
			t.fail(err)
			// Batches of these partitions can never be sent in this transaction: fail
			// them now instead of letting them wait for the delivery timeout.
			failed := make(map[TopicPartition]bool, len(tps))
			for _, tp := range tps {
				failed[tp] = true
			}
			p.dropUnsentOf(failed, fmt.Errorf("client: adding partition to transaction: %w", err))
		}
		p.mu.Unlock()
		p.poke()
	}()
}

// addPartitionsToTxn adds tps to the transaction, retrying retriable errors.
func (p *Producer) addPartitionsToTxn(ctx context.Context, id producerID, tps []TopicPartition) error {
	t := p.txn
	sort.Slice(tps, func(i, j int) bool { return tpLess(tps[i], tps[j]) })
	return retryCoordinator(ctx, t.coord, func() (bool, error) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID = t.id
		req.ProducerID, req.ProducerEpoch = id.id, id.epoch
		for _, tp := range tps {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, tp.Partition)
		}
		resp, err := t.coord.do(ctx, req, reqOpts{maxVersion: -1})
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		r := resp.(*kmsg.AddPartitionsToTxnResponse)
		var retry, other []error
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				err := kerr.ErrorForCode(rp.ErrorCode)
				switch {
				case err == nil:
				case errors.Is(err, kerr.OperationNotAttempted):
					// Another partition of the request failed; that one decides.
				case retriableCoordinatorErr(err), errors.Is(err, kerr.ConcurrentTransactions):
					retry = append(retry, fmt.Errorf("%s[%d]: %w", rt.Topic, rp.Partition, err))
				default:
					other = append(other, fmt.Errorf("%s[%d]: %w", rt.Topic, rp.Partition, err))
				}
			}
		}
		if len(other) > 0 {
			return false, fmt.Errorf("client: AddPartitionsToTxn %q: %w", t.id, errors.Join(other...))
		}
		if len(retry) > 0 {
			return true, fmt.Errorf("client: AddPartitionsToTxn %q: %w", t.id, errors.Join(retry...))
		}
		return false, nil
	})
}

// ---- offsets in the transaction ----

// addOffsetsToTxn adds the group's __consumer_offsets partition to the transaction (v1).
func (p *Producer) addOffsetsToTxn(ctx context.Context, id producerID, group string) error {
	t := p.txn
	return retryCoordinator(ctx, t.coord, func() (bool, error) {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID = t.id
		req.ProducerID, req.ProducerEpoch = id.id, id.epoch
		req.Group = group
		resp, err := t.coord.do(ctx, req, reqOpts{maxVersion: -1})
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		r := resp.(*kmsg.AddOffsetsToTxnResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			err = fmt.Errorf("client: AddOffsetsToTxn %q group %q: %w", t.id, group, err)
			return retriableCoordinatorErr(err) || errors.Is(err, kerr.ConcurrentTransactions), err
		}
		return false, nil
	})
}

// txnOffsetCommit writes the offsets to the group coordinator, staged in the transaction.
// Partitions answered with a retriable error are resent alone.
func (p *Producer) txnOffsetCommit(ctx context.Context, id producerID, v2 bool, offsets map[TopicPartition]int64, g GroupMetadata) error {
	t := p.txn
	co := newCoordinator(p.cl, coordinatorGroup, g.GroupID)
	left := make(map[TopicPartition]int64, len(offsets))
	for tp, o := range offsets {
		left[tp] = o
	}
	o := reqOpts{maxVersion: tv1MaxTxnOffsetCommit}
	if v2 {
		o.maxVersion = -1
	}
	return retryCoordinator(ctx, co, func() (bool, error) {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID = t.id
		req.Group = g.GroupID
		req.ProducerID, req.ProducerEpoch = id.id, id.epoch
		req.Generation, req.MemberID = g.GenerationID, g.MemberID
		if g.GroupInstanceID != "" {
			req.InstanceID = kmsg.StringPtr(g.GroupInstanceID)
		}
		for _, tp := range sortedTPs(left) {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewTxnOffsetCommitRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = tp.Partition, left[tp], -1
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp, err := co.do(ctx, req, o)
		if err != nil {
			return retriableCoordinatorErr(err), err
		}
		var retry, other []error
		for _, rt := range resp.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				tp := TopicPartition{rt.Topic, rp.Partition}
				err := kerr.ErrorForCode(rp.ErrorCode)
				switch {
				case err == nil:
					delete(left, tp)
				case retriableCoordinatorErr(err), errors.Is(err, kerr.ConcurrentTransactions):
					retry = append(retry, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
				default:
					other = append(other, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
				}
			}
		}
		if len(other) > 0 {
			// UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID: this consumer
			// lost its partitions, the transaction must abort (KIP-447). Fencing and
			// authorization errors are fatal (txnFailed classifies).
			return false, fmt.Errorf("client: TxnOffsetCommit %q group %q: %w", t.id, g.GroupID, errors.Join(other...))
		}
		if len(retry) > 0 {
			return true, fmt.Errorf("client: TxnOffsetCommit %q group %q: %w", t.id, g.GroupID, errors.Join(retry...))
		}
		return false, nil
	})
}

// ---- dropping records ----

// dropUnsent fails every batch of every partition that is neither in flight nor finished
// (Producer.mu held). A dropped batch that already had a sequence number leaves a gap, so
// the epoch must be bumped after the abort.
func (p *Producer) dropUnsent(err error) {
	p.dropUnsentOf(nil, err)
}

// dropUnsentOf is dropUnsent for the partitions in only (nil: all).
func (p *Producer) dropUnsentOf(only map[TopicPartition]bool, err error) {
	var out []*recBatch
	for tp, pb := range p.parts {
		if only != nil && !only[tp] {
			continue
		}
		pb.seal()
		for _, b := range pb.queue {
			if b.inflight || b.done {
				continue
			}
			if b.seqGen != 0 && b.seqGen == p.ids.gen {
				p.txn.bump = true
			}
			b.finish(-1, err)
		}
		pb.rewind = false
		out = pb.popDone(out)
	}
	p.deliver(out)
}

func tpLess(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}
