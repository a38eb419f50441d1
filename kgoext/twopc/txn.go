package twopc

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/exactq/exactq/wire"
)

// Transaction protocol versions around "transactions v2" (KIP-890): Produce v12 and
// EndTxn v5 tell the coordinator the producer lets the partition leaders add partitions
// to the transaction and expects every EndTxn to bump its epoch; below them the producer
// adds partitions itself (AddPartitionsToTxn, whose v4 and up are the brokers' batched
// form) and keeps its epoch.
const (
	tv1MaxProduce            = 11
	tv2MaxProduce            = 12 // v13 names topics by id
	tv1MaxEndTxn             = 4
	tv2MinEndTxn             = 5
	clientMaxAddPartitions   = 3
	initProducerID2PCVersion = 6
	// unusedTimeoutMillis is InitProducerId's transaction timeout. A two-phase-commit
	// producer's transactions never time out (the coordinator ignores the field), so
	// there is nothing to configure; this is Kafka's default transaction.timeout.ms.
	unusedTimeoutMillis = 60_000
)

type txnPhase uint8

const (
	txnUninitialized txnPhase = iota // neither InitTransactions nor RecoverPreparedTransaction yet
	txnReady                         // between transactions
	txnOpen                          // BeginTransaction called: Produce and share acks allowed
	txnPrepared                      // prepared or recovered: only commit, abort or complete
	txnCommitting                    // CommitTransaction running, or failed midway: call it again
	txnAborting                      // AbortTransaction running, or failed midway: call it again
)

// txnState is the transactional state of a Producer, guarded by Producer.mu.
type txnState struct {
	phase txnPhase
	// v2 is decided at InitProducerId: the coordinator finalized transaction.version 2
	// and serves EndTxn v5 and Produce v12.
	v2 bool
	// forceV1 makes the producer use transactions v1 whatever the broker finalized
	// (tests of the v1 path; set before InitProducerId).
	forceV1 bool
	// started is true once the coordinator knows the transaction (a partition added, a
	// record sent under v2, share acknowledgements staged): it must end with EndTxn. A
	// transaction that never started ends without one, as Java's TransactionManager does
	// (the coordinator would answer INVALID_TXN_STATE).
	started bool
	// maybeStarted is set when share acknowledgements may or may not have been staged
	// (the call failed): the transaction ends with EndTxn, and an EndTxn answered
	// INVALID_TXN_STATE then found no transaction (an abort is done, a commit refused).
	maybeStarted bool
	// endSent is true once EndTxn went out: the outcome is the coordinator's, only the
	// same EndTxn may be retried.
	endSent bool
	// added are the partitions the coordinator has in this transaction (v1).
	added map[topicPartition]bool
	// bump is set when sequence numbers may be out of step with a partition (a batch's
	// outcome is unknown or it failed): after the abort the epoch is bumped with
	// InitProducerId (KIP-360). Under v2 every EndTxn bumps it anyway.
	bump bool
	// abortable is the first error that doomed the transaction; fatal the error that
	// made the producer unusable.
	abortable, fatal error
	// prepared is the state PrepareTransaction prepared or RecoverPreparedTransaction
	// recovered; hasPrepared stays set until that transaction ends, so
	// CompleteTransaction can be repeated after a failure midway.
	prepared    PreparedTxnState
	hasPrepared bool
}

// reset starts the next transaction's state after a commit or an abort.
func (t *txnState) reset() {
	t.phase = txnReady
	t.prepared, t.hasPrepared = noPreparedTxnState, false
	t.started, t.maybeStarted, t.endSent = false, false, false
	t.added = map[topicPartition]bool{}
	t.abortable = nil
}

// fail records err as the outcome of the transaction and returns the error to hand back:
// fatal errors make the producer unusable, others doom the open transaction.
func (t *txnState) fail(err error) error {
	if t.fatal != nil {
		return t.fatal
	}
	if isFatal(err) {
		t.fatal = fatalErr(err)
		return t.fatal
	}
	if t.abortable == nil {
		t.abortable = fmt.Errorf("%w: %w", ErrTransactionAbortable, err)
	}
	return t.abortable
}

// err is the error a transactional operation returns in the current state, or nil.
func (t *txnState) err() error {
	if t.fatal != nil {
		return t.fatal
	}
	return t.abortable
}

// openErr is the error of adding to the transaction (Produce, share acknowledgements) in
// the current state; nil inside an open transaction that may still commit.
func (t *txnState) openErr() error {
	if err := t.err(); err != nil {
		return err
	}
	switch t.phase {
	case txnOpen:
		return nil
	case txnPrepared:
		return ErrTransactionPrepared
	}
	return ErrNoTransaction
}

// sendErr is the error of sending buffered records now: none while the transaction is
// open, being prepared or being committed.
func (t *txnState) sendErr() error {
	if err := t.err(); err != nil {
		return err
	}
	switch t.phase {
	case txnOpen, txnPrepared, txnCommitting:
		return nil
	}
	return ErrNoTransaction
}

// InitTransactions registers the transactional id with its coordinator (InitProducerId
// v6 with Enable2Pc): it fences every earlier producer with the same id and ABORTS the
// transaction such a producer left open, prepared or not, whatever an external
// coordinator decided. A participant restarting inside a two-phase-commit protocol calls
// RecoverPreparedTransaction instead. One of the two must come before BeginTransaction.
//
// A broker without transaction.two.phase.commit.enable answers
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; one without InitProducerId v6 cannot take part
// (kerr.UnsupportedVersion). Both errors wrap ErrProducerFatal.
func (p *Producer) InitTransactions(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.txn.fatal != nil {
		return p.txn.fatal
	}
	if p.txn.phase != txnUninitialized {
		return nil
	}
	_, err := p.initID(ctx, false, false)
	return err
}

// RecoverPreparedTransaction is InitTransactions with KeepPreparedTxn: it fences every
// earlier producer with the same id without aborting the transaction it left open. If
// one was open it returns its state and ok=true, and this producer holds it prepared:
// only CompleteTransaction, CommitTransaction or AbortTransaction may follow. Otherwise
// ok=false and the producer is ready, as after InitTransactions. It must be the
// producer's first transactional call.
func (p *Producer) RecoverPreparedTransaction(ctx context.Context) (st PreparedTxnState, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.txn.fatal != nil {
		return noPreparedTxnState, false, p.txn.fatal
	}
	if p.txn.phase != txnUninitialized {
		return noPreparedTxnState, false, errors.New("twopc: RecoverPreparedTransaction after InitTransactions: it must be the producer's first transactional call")
	}
	ongoing, err := p.initID(ctx, true, false)
	if err != nil || ongoing.id < 0 {
		return noPreparedTxnState, false, err
	}
	return PreparedTxnState{ProducerID: ongoing.id, Epoch: ongoing.epoch}, true, nil
}

// initID sends InitProducerId v6 (p.mu held). keep asks the coordinator to keep the
// ongoing transaction, whose producer id and epoch it returns (noProducerID when none).
// bump passes the current id and epoch, so the coordinator bumps this producer's epoch
// (KIP-360) instead of treating it as a new instance.
func (p *Producer) initID(ctx context.Context, keep, bump bool) (producerID, error) {
	req := wire.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr(p.txnID)
	req.TransactionTimeoutMillis = unusedTimeoutMillis
	req.Enable2Pc, req.KeepPreparedTxn = true, keep
	if bump && p.id.id >= 0 {
		req.ProducerID, req.ProducerEpoch = p.id.id, p.id.epoch
	}
	var served *kmsg.ApiVersionsResponse
	resp, err := p.coord.requestChecked(ctx, req, func(ctx context.Context, node int32) error {
		v, err := p.coord.apiVersions(ctx, node)
		if err != nil {
			return err
		}
		if maxVersion(v, kmsg.InitProducerID.Int16()) < initProducerID2PCVersion {
			// kgo would send the highest version the broker serves, which cannot carry
			// Enable2Pc and KeepPreparedTxn: it would abort the prepared transaction.
			return fmt.Errorf("twopc: broker %d does not serve two-phase commit (InitProducerId v6, KIP-939): %w", node, kerr.UnsupportedVersion)
		}
		served = v
		return nil
	}, func(r kmsg.Response) int16 { return r.(*wire.InitProducerIDResponse).ErrorCode })
	if err != nil {
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			err = fmt.Errorf("twopc: InitProducerId %q with two-phase commit (is transaction.two.phase.commit.enable set on the broker?): %w", p.txnID, err)
		} else {
			err = fmt.Errorf("twopc: InitProducerId %q: %w", p.txnID, err)
		}
		if isKafkaErr(err) {
			p.txn.fatal = fatalErr(err)
			return noProducerID, p.txn.fatal
		}
		return noProducerID, err
	}
	r := resp.(*wire.InitProducerIDResponse)
	p.setID(producerID{id: r.ProducerID, epoch: r.ProducerEpoch})
	// Transactions v2 needs the versions that say so from the broker and from the kgo
	// client, whose kgo.MaxVersions caps every version it sends.
	p.txn.v2 = !p.txn.forceV1 && feature(served, "transaction.version") >= 2 &&
		maxVersion(served, kmsg.EndTxn.Int16()) >= tv2MinEndTxn && p.clientSends(kmsg.EndTxn.Int16(), tv2MinEndTxn) &&
		maxVersion(served, kmsg.Produce.Int16()) >= tv2MaxProduce && p.clientSends(kmsg.Produce.Int16(), tv2MaxProduce) &&
		p.clientSends(kmsg.TxnOffsetCommit.Int16(), tv2MaxTxnOffsetCommit)
	p.txn.bump = false
	if bump {
		return noProducerID, nil // between transactions: only the epoch changed
	}
	p.txn.reset()
	ongoing := producerID{id: r.OngoingTxnProducerID, epoch: r.OngoingTxnProducerEpoch}
	if !keep || ongoing.id < 0 {
		return noProducerID, nil
	}
	// The kept transaction is the coordinator's: it ends with EndTxn under the new
	// epoch, which resolves what the old epoch wrote and staged.
	p.txn.phase = txnPrepared
	p.txn.started = true
	p.txn.prepared = PreparedTxnState{ProducerID: ongoing.id, Epoch: ongoing.epoch}
	p.txn.hasPrepared = true
	return ongoing, nil
}

// clientSends reports whether the kgo client's kgo.MaxVersions let it send key at version
// v.
func (p *Producer) clientSends(key, v int16) bool {
	vs, _ := p.cl.OptValue(kgo.MaxVersions).(*kversion.Versions)
	if vs == nil {
		return true
	}
	max, ok := vs.LookupMaxKeyVersion(key)
	return ok && max >= v
}

// BeginTransaction starts a transaction: what is produced and staged until
// CommitTransaction or AbortTransaction belongs to it. InitTransactions or
// RecoverPreparedTransaction must have run (a two-phase-commit participant must choose
// between aborting and keeping what an earlier instance left).
func (p *Producer) BeginTransaction() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.txn.fatal != nil {
		return p.txn.fatal
	}
	switch p.txn.phase {
	case txnUninitialized:
		return errors.New("twopc: BeginTransaction before InitTransactions or RecoverPreparedTransaction")
	case txnPrepared:
		return ErrTransactionPrepared
	case txnReady:
		p.txn.reset()
		p.txn.phase = txnOpen
		return nil
	}
	return ErrTransactionInProgress
}

// PrepareTransaction sends every buffered record, waits for all of them to be written,
// and marks the transaction prepared (phase one: the vote is yes). From then on Produce
// and SendShareAcksToTransaction fail until CommitTransaction, AbortTransaction or
// CompleteTransaction. It returns the state to store with the external decision.
//
// Errors: ErrNoTransaction, ErrTransactionAbortable (a record failed: abort),
// ErrProducerFatal, or ctx's error while sending (the transaction is then still open and
// PrepareTransaction may be called again). Like Java's prepareTransaction it asks the
// coordinator nothing: a producer fenced meanwhile learns it when it commits.
func (p *Producer) PrepareTransaction(ctx context.Context) (PreparedTxnState, error) {
	p.mu.Lock()
	if err := p.txn.openErr(); err != nil {
		p.mu.Unlock()
		return noPreparedTxnState, err
	}
	p.txn.phase = txnPrepared
	done, err := p.flush(ctx)
	if err == nil {
		p.txn.prepared = PreparedTxnState{ProducerID: p.id.id, Epoch: p.id.epoch}
		p.txn.hasPrepared = true
	} else {
		p.txn.phase = txnOpen // abort (or retry, after a ctx error) is next
	}
	st := p.txn.prepared
	p.mu.Unlock()
	runCompletions(done)
	if err != nil {
		return noPreparedTxnState, err
	}
	return st, nil
}

// PreparedState returns the prepared transaction's state, ok=false when none is prepared.
func (p *Producer) PreparedState() (PreparedTxnState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.txn.phase != txnPrepared || !p.txn.hasPrepared {
		return noPreparedTxnState, false
	}
	return p.txn.prepared, true
}

// CompleteTransaction commits the prepared transaction if its state equals want and
// aborts it otherwise (Java's completeTransaction rule); committed reports which. After an
// error that does not wrap ErrProducerFatal the outcome may not be reached yet: call it
// again with the same want, which resumes the same commit or abort.
func (p *Producer) CompleteTransaction(ctx context.Context, want PreparedTxnState) (committed bool, err error) {
	p.mu.Lock()
	t := &p.txn
	fatal := t.fatal
	ok := t.hasPrepared && (t.phase == txnPrepared || t.phase == txnCommitting || t.phase == txnAborting)
	st := t.prepared
	p.mu.Unlock()
	switch {
	case fatal != nil:
		return false, fatal
	case !ok:
		return false, ErrNotPrepared
	case want == st:
		return true, p.CommitTransaction(ctx)
	}
	return false, p.AbortTransaction(ctx)
}

// CommitTransaction sends the buffered records and commits the transaction, prepared or
// not. Errors: ErrTransactionAbortable (call AbortTransaction), ErrProducerFatal, or a ctx
// or transport error after which CommitTransaction may be called again: it resumes where
// it stopped and never commits twice. A transaction the coordinator never heard of
// commits without a round trip.
func (p *Producer) CommitTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, true)
}

// AbortTransaction drops the buffered records (their promises get ErrTransactionAborted)
// and aborts the transaction, prepared or not: its records are never visible to
// read_committed readers and its share acknowledgements are undone.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, false)
}

func (p *Producer) endTransaction(ctx context.Context, commit bool) error {
	p.mu.Lock()
	done, err := p.endTransactionLocked(ctx, commit)
	p.mu.Unlock()
	runCompletions(done)
	return err
}

func (p *Producer) endTransactionLocked(ctx context.Context, commit bool) ([]completion, error) {
	t := &p.txn
	if t.fatal != nil {
		return nil, t.fatal
	}
	switch {
	case commit && (t.phase == txnOpen || t.phase == txnPrepared):
		if t.abortable != nil {
			return nil, t.abortable
		}
		t.phase = txnCommitting
	case commit && t.phase == txnCommitting:
		// Resuming a commit that failed midway.
	case !commit && (t.phase == txnOpen || t.phase == txnAborting || t.phase == txnPrepared):
		t.phase = txnAborting
	case !commit && t.phase == txnCommitting && !t.endSent:
		t.phase = txnAborting // the commit failed before EndTxn: aborting is still possible
	case !commit && t.phase == txnCommitting:
		return nil, errors.New("twopc: AbortTransaction after CommitTransaction sent EndTxn: call CommitTransaction again")
	default:
		return nil, ErrNoTransaction
	}
	var done []completion
	if commit {
		var err error
		if done, err = p.flush(ctx); err != nil {
			return done, err
		}
	} else {
		done = p.failBuffered(ErrTransactionAborted)
	}
	if t.started || t.maybeStarted {
		t.endSent = true
		next, err := p.endTxn(ctx, commit)
		if err != nil && !t.started && errors.Is(err, kerr.InvalidTxnState) {
			// The failed staging registered nothing: there is no transaction. An abort
			// is then done; a commit cannot commit acknowledgements that were never
			// staged, so the transaction is only abortable, not the producer fatal.
			if !commit {
				err = nil
			} else {
				t.phase, t.endSent = txnOpen, false
				if t.abortable == nil {
					t.abortable = fmt.Errorf("%w: the share acknowledgements were not staged: %w", ErrTransactionAbortable, err)
				}
				return done, t.abortable
			}
		}
		if err != nil {
			if !commit && errors.Is(err, kerr.TransactionAbortable) {
				err = fatalErr(err) // an abort that is itself abortable would loop (Java makes it fatal)
			}
			if isKafkaErr(err) {
				if isFatal(err) {
					t.fatal = fatalErr(err)
					return done, t.fatal
				}
				// EndTxn(commit) refused: the transaction can only abort now.
				t.phase, t.endSent = txnOpen, false
				return done, t.fail(err)
			}
			return done, err
		}
		if next.id >= 0 {
			p.setID(next) // v2: every EndTxn bumps the epoch; sequences restart at 0
		}
	}
	t.reset()
	if t.v2 {
		t.bump = false // EndTxn bumped the epoch: sequences start again at 0
	}
	if err := p.bumpEpoch(ctx); err != nil && t.fatal != nil {
		return done, t.fatal
	}
	// A bump that failed otherwise is tried again before the next records are sent; the
	// transaction itself ended.
	return done, nil
}

// bumpEpoch bumps the epoch with InitProducerId (KIP-360) when sequence numbers may be out
// of step with a partition (t.bump), between transactions of transactions v1: a
// transactional producer cannot bump locally (p.mu held).
func (p *Producer) bumpEpoch(ctx context.Context) error {
	t := &p.txn
	if !t.bump || t.v2 || t.started || t.maybeStarted {
		return nil
	}
	_, err := p.initID(ctx, false, true)
	return err
}

// endTxn sends EndTxn until the coordinator decides. Under v2 it returns the bumped
// producer id and epoch (noProducerID otherwise).
func (p *Producer) endTxn(ctx context.Context, commit bool) (producerID, error) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = p.txnID
	req.ProducerID, req.ProducerEpoch = p.id.id, p.id.epoch
	req.Commit = commit
	max := int16(tv1MaxEndTxn)
	if p.txn.v2 {
		max = tv2MinEndTxn
	}
	resp, err := p.coord.request(ctx, &capped{Request: req, max: max}, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode })
	if err != nil {
		return noProducerID, fmt.Errorf("twopc: EndTxn(commit=%v) %q: %w", commit, p.txnID, err)
	}
	r := resp.(*kmsg.EndTxnResponse)
	if r.Version >= tv2MinEndTxn && r.ProducerID >= 0 {
		return producerID{id: r.ProducerID, epoch: r.ProducerEpoch}, nil
	}
	return noProducerID, nil
}

// addPartitions makes every partition with buffered records part of the transaction
// (p.mu held). Under v2 the leaders add them when the records arrive; under v1 the
// partitions the coordinator does not have yet go in one AddPartitionsToTxn.
func (p *Producer) addPartitions(ctx context.Context) error {
	if len(p.buf) == 0 {
		return nil
	}
	if p.txn.v2 {
		p.txn.started = true
		return nil
	}
	var tps []topicPartition
	for tp := range p.buf {
		if !p.txn.added[tp] {
			tps = append(tps, tp)
		}
	}
	if len(tps) == 0 {
		return nil
	}
	sortPartitions(tps)
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = p.txnID
	req.ProducerID, req.ProducerEpoch = p.id.id, p.id.epoch
	for _, tp := range tps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.topic {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic = tp.topic
			req.Topics = append(req.Topics, rt)
		}
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, tp.partition)
	}
	// A partition answered with a coordinator error makes the whole request go again
	// (adding a partition twice is harmless); the others are judged one by one below.
	resp, err := p.coord.request(ctx, &capped{Request: req, max: clientMaxAddPartitions}, func(r kmsg.Response) int16 {
		for _, rt := range r.(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, rp := range rt.Partitions {
				if retriableCoordinatorErr(kerr.ErrorForCode(rp.ErrorCode)) && rp.ErrorCode != 0 || rp.ErrorCode == kerr.ConcurrentTransactions.Code {
					return rp.ErrorCode
				}
			}
		}
		return 0
	})
	// Whatever the answer, the coordinator may have the transaction now.
	p.txn.started = true
	if err != nil {
		return fmt.Errorf("twopc: AddPartitionsToTxn %q: %w", p.txnID, err)
	}
	var errs []error
	for _, rt := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, rp := range rt.Partitions {
			switch err := kerr.ErrorForCode(rp.ErrorCode); {
			case err == nil:
				p.txn.added[topicPartition{rt.Topic, rp.Partition}] = true
			case errors.Is(err, kerr.OperationNotAttempted):
				// Another partition of the request failed; that one decides.
			default:
				errs = append(errs, fmt.Errorf("%s[%d]: %w", rt.Topic, rp.Partition, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("twopc: AddPartitionsToTxn %q: %w", p.txnID, errors.Join(errs...))
	}
	return nil
}
