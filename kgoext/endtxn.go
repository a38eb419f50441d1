package kgoext

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrCommitOutcomeUnknown is returned by EndTransaction asked to commit when the
// coordinator may have committed the transaction or not, and resending the commit with
// the same producer id and epoch brought no definite answer: the coordinator stayed
// unreachable for the transaction timeout or ctx ended, or the producer was fenced
// meanwhile (the error then also matches kerr.ProducerFenced or
// kerr.InvalidProducerIDMapping), in which case the instance that fenced it settled the
// transaction: its InitProducerId completed a commit the coordinator had decided and
// aborted one it had not. Neither the commit nor the abort may be assumed: the records and
// acknowledgements of the transaction are visible together or not at all, and a reader
// (read_committed, or the share group's delivery state) tells which.
var ErrCommitOutcomeUnknown = errors.New("kgoext: the outcome of the commit is unknown")

// ErrNoTransactionalHooks is returned by SendShareAcksToTransaction and EndTransaction for
// a client built without TransactionalHooks: without them EndTransaction cannot tell
// whether kgo ended the transaction.
var ErrNoTransactionalHooks = errors.New("kgoext: the transactional client was built without kgoext.TransactionalHooks()")

// ErrTransactionAborted is returned by EndTransaction asked to commit when it aborted
// instead: share acknowledgements of the transaction failed to stage (ErrCommitFailed), a
// record produced in it failed, or records were produced but kgo did not end the
// transaction. Acknowledgements are never committed without the records produced with
// them; the records acknowledged are delivered again.
var ErrTransactionAborted = errors.New("kgoext: the transaction was aborted, not committed")

// TransactionalHooks returns the kgo.WithHooks option that a transactional client used with
// SendShareAcksToTransaction and EndTransaction must be built with. The hooks count what
// EndTransaction needs to know of the current transaction: EndTxn requests kgo wrote, and
// records buffered and finished (with or without error).
func TransactionalHooks() kgo.Opt { return kgo.WithHooks(&txnHooks{}) }

// TransactionalOpts are the options a transactional client needs for KIP-1289:
// TransactionalHooks and kgo.MaxVersions(Versions()). Add them to kgo.TransactionalID and
// the rest; a client that sets its own kgo.MaxVersions must include TxnShareAcknowledge.
func TransactionalOpts() []kgo.Opt {
	return []kgo.Opt{TransactionalHooks(), kgo.MaxVersions(Versions())}
}

// txnHooks observes a transactional client. The counters are per transaction: EndTransaction
// resets them once the transaction is over. Fields under mu.
type txnHooks struct {
	mu sync.Mutex
	txnCounts
}

// txnCounts is what txnHooks knows of the client's current transaction.
type txnCounts struct {
	endTxnWrites int64 // EndTxn requests written by anyone on the client (never reset)
	buffered     int64 // records produced in this transaction
	succeeded    int64 // of those, acknowledged by their leader
	failed       int64 // of those, finished with an error
	acksSent     bool  // a TxnShareAcknowledge of this transaction may have registered share-state partitions
	ackErr       error // a SendShareAcksToTransaction of this transaction failed to stage
}

var (
	_ kgo.HookBrokerWrite             = (*txnHooks)(nil)
	_ kgo.HookProduceRecordBuffered   = (*txnHooks)(nil)
	_ kgo.HookProduceRecordUnbuffered = (*txnHooks)(nil)
)

// OnBrokerWrite counts EndTxn requests (API key 26) written.
func (h *txnHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.EndTxn.Int16() && err == nil {
		h.mu.Lock()
		h.endTxnWrites++
		h.mu.Unlock()
	}
}

// OnProduceRecordBuffered counts records produced.
func (h *txnHooks) OnProduceRecordBuffered(*kgo.Record) {
	h.mu.Lock()
	h.buffered++
	h.mu.Unlock()
}

// OnProduceRecordUnbuffered counts records finished, by outcome. A record produced while
// no transaction is open belongs to none: kgo refuses it before buffering, and it must not
// count against the next transaction.
func (h *txnHooks) OnProduceRecordUnbuffered(_ *kgo.Record, err error) {
	if err != nil && isNotInTransaction(err) {
		return
	}
	h.mu.Lock()
	if err != nil {
		h.failed++
	} else {
		h.succeeded++
	}
	h.mu.Unlock()
}

// kgoNotInTransaction is the text of kgo's error for a record produced outside a
// transaction; kgo does not export the error value, so it is matched by its text.
const kgoNotInTransaction = "cannot produce record transactionally if not in a transaction"

func isNotInTransaction(err error) bool { return strings.Contains(err.Error(), kgoNotInTransaction) }

// resetLocked starts the next transaction's counts.
func (h *txnHooks) resetLocked() {
	h.buffered, h.succeeded, h.failed = 0, 0, 0
	h.acksSent, h.ackErr = false, nil
}

func hooksOf(cl *kgo.Client) *txnHooks {
	hs, _ := cl.OptValue(kgo.WithHooks).([]kgo.Hook)
	for _, h := range hs {
		if th, ok := h.(*txnHooks); ok {
			return th
		}
	}
	return nil
}

// EndTransaction ends the transaction open on cl, a client built with TransactionalHooks,
// as cl.EndTransaction does, and also when the transaction holds only share
// acknowledgements (a consume-only transaction), which kgo would leave open: kgo sends
// EndTxn only when a record or consumer offsets joined the transaction, so the
// acknowledgements would stay staged until the transaction timed out and aborted.
//
// A commit first flushes cl; an abort first drops cl's buffered records
// (AbortBufferedRecords). A commit becomes an abort, reported as ErrTransactionAborted, when
// the acknowledgements failed to stage, when a record of the transaction failed, or when
// records were produced but kgo did not end the transaction (none succeeded): the
// acknowledgements say the records were processed, and must not commit without their output.
//
// When kgo did not send EndTxn and acknowledgements were sent, EndTransaction sends EndTxn
// itself, pinned to version 4 so the coordinator does not bump the producer epoch (see the
// package doc: kgo would not learn a bumped epoch and its next produce would be fenced).
// A commit whose EndTxn reached the wire but whose answer was lost (the connection
// dropped, the request timed out, kgo's retries ran out) is resent with the same producer
// id and epoch, as Kafka's producer does, until the coordinator answers definitely or the
// transaction timeout passes: nil when it committed, ErrTransactionAborted when the
// coordinator aborted it, ErrCommitOutcomeUnknown when no definite answer came or another
// instance fenced this one meanwhile. A committed transaction is never reported aborted,
// nor the reverse.
//
// Errors are kgo's or the coordinator's (kerr values wrapped); on an error retry with
// kgo.TryAbort, as kgo documents for cl.EndTransaction. Every transaction in which
// SendShareAcksToTransaction was called must end here, not with cl.EndTransaction or
// cl.EndAndBeginTransaction.
func EndTransaction(ctx context.Context, cl *kgo.Client, commit kgo.TransactionEndTry) error {
	h := hooksOf(cl)
	if h == nil {
		return ErrNoTransactionalHooks
	}
	if commit {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
	} else if err := cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	h.mu.Lock()
	before := h.txnCounts
	h.mu.Unlock()

	var abortedBecause error
	switch {
	case !bool(commit):
	case before.ackErr != nil:
		abortedBecause = before.ackErr
	case before.failed > 0:
		abortedBecause = fmt.Errorf("kgoext: %d of the transaction's records failed", before.failed)
	case before.buffered > 0 && before.succeeded == 0 && before.acksSent:
		// kgo (under KIP-890) turns this commit into an abort itself, and (before it)
		// sends nothing: either way the acknowledgements must not commit alone.
		abortedBecause = errors.New("kgoext: no record of the transaction was produced")
	}
	if abortedBecause != nil {
		commit = kgo.TryAbort
	}

	// The producer id and epoch kgo's EndTxn carries: what a resend must carry too. A
	// transaction with records or acknowledgements has it loaded already; an empty one
	// sends no EndTxn, and asking would load one.
	var pid int64
	var epoch int16
	idErr := errors.New("kgoext: no producer id read")
	if bool(commit) && (before.buffered > 0 || before.acksSent) {
		pid, epoch, idErr = cl.ProducerID(ctx)
	}
	if err := cl.EndTransaction(ctx, commit); err != nil {
		h.mu.Lock()
		writes := h.endTxnWrites - before.endTxnWrites
		h.mu.Unlock()
		// One EndTxn with a definite answer is that answer. After a resend (kgo resends
		// on a lost connection), a refusal may answer a later instance's state, not
		// this commit: the first send may have committed.
		if !bool(commit) || writes == 0 || idErr != nil || (writes == 1 && isDefiniteAnswer(err)) {
			return err // kgo keeps its transaction state for the TryAbort retry; so do we
		}
		// The commit reached the wire and its answer was lost: learn the outcome.
		if err := resolveCommit(ctx, cl, pid, epoch, err); err != nil {
			return err
		}
		// Committed. kgo still holds the transaction as unconfirmed; its TryAbort retry
		// only reloads the producer id (InitProducerId with this id and epoch, which
		// continues after a completed transaction) and sends no EndTxn.
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		h.mu.Lock()
		h.resetLocked()
		h.mu.Unlock()
		return nil
	}
	h.mu.Lock()
	kgoSent := h.endTxnWrites > before.endTxnWrites
	acksSent := h.acksSent
	h.mu.Unlock()

	if !kgoSent && acksSent {
		if err := endAcksOnly(ctx, cl, bool(commit)); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.resetLocked()
	h.mu.Unlock()
	if abortedBecause != nil {
		return fmt.Errorf("%w: %w", ErrTransactionAborted, abortedBecause)
	}
	return nil
}

// endTxnV4 is EndTxn capped at version 4. kgo asks a request's MaxVersion for the highest
// version it may send, so embedding the request and lowering MaxVersion pins it.
type endTxnV4 struct{ *kmsg.EndTxnRequest }

func (endTxnV4) MaxVersion() int16 { return 4 }

// endTxnRounds bounds the resends of endAcksOnly's EndTxn (busy or moving coordinator).
const endTxnRounds = 100

// endAcksOnly sends EndTxn v4 for cl's transaction, which holds only acknowledgements.
// Version 4 is transaction version 1 for the coordinator (Kafka's
// TransactionVersion.transactionVersionForEndTxn): it ends the transaction with the
// current epoch, without the KIP-890 bump, so the epoch kgo holds stays right.
func endAcksOnly(ctx context.Context, cl *kgo.Client, commit bool) error {
	id, ok := txnIDOf(cl)
	if !ok {
		return errors.New("kgoext: EndTransaction needs a client built with kgo.TransactionalID")
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("kgoext: loading the producer id: %w", err)
	}
	co := newCoordinator(cl, coordinatorTxn, id)
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	var last error
	sent := false // an earlier EndTxn of this loop may have reached the coordinator
	for range endTxnRounds {
		resp, err := co.do(ctx, endTxnV4{req})
		if err == nil {
			r := resp.(*kmsg.EndTxnResponse)
			err = kerr.ErrorForCode(r.ErrorCode)
			if err == nil {
				return nil
			}
			if !commit && errors.Is(err, kerr.InvalidTxnState) {
				// No transaction of this epoch is open at the coordinator: an acknowledgement
				// request that may have registered one did not, so there is nothing to abort.
				return nil
			}
			if coordinatorMoved(err) {
				co.invalidate()
			} else if !errors.Is(err, kerr.ConcurrentTransactions) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
				if commit && sent && !errors.Is(err, kerr.InvalidTxnState) {
					// A refusal after a resend may answer another instance's state: an
					// earlier send may have committed. (A repeat of a completed commit is
					// answered with success; INVALID_TXN_STATE means none is open or done.)
					return fmt.Errorf("%w: EndTxn (commit) of %q: %w", ErrCommitOutcomeUnknown, id, err)
				}
				return fmt.Errorf("kgoext: EndTxn (commit %v) of %q: %w", commit, id, err)
			}
		} else if ctx.Err() != nil {
			return endAcksGaveUp(commit, id, err)
		}
		sent = true
		last = err
		if err := sleepCtx(ctx, shareAckBackoff); err != nil {
			return endAcksGaveUp(commit, id, fmt.Errorf("%w (last error: %w)", err, last))
		}
	}
	return endAcksGaveUp(commit, id, fmt.Errorf("gave up after %d tries: %w", endTxnRounds, last))
}

// endAcksGaveUp is endAcksOnly's error when no definite answer came: for a commit, one of
// the EndTxn sent may have committed.
func endAcksGaveUp(commit bool, id string, err error) error {
	if commit {
		return fmt.Errorf("%w: EndTxn (commit) of %q: %w", ErrCommitOutcomeUnknown, id, err)
	}
	return fmt.Errorf("kgoext: EndTxn (abort) of %q: %w", id, err)
}
