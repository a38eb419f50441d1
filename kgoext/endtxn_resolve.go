package kgoext

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// isDefiniteAnswer reports whether err, returned by kgo's EndTransaction after it wrote
// exactly one EndTxn, is the coordinator's definite answer to that EndTxn. kgo's own rule
// (its failProducerID): a Kafka error that is not retriable, other than
// UNKNOWN_SERVER_ERROR. CONCURRENT_TRANSACTIONS is not one either: kgo resends on it until
// ctx ends, and it means that the transaction is being decided, possibly by this commit.
func isDefiniteAnswer(err error) bool {
	ke, ok := errors.AsType[*kerr.Error](err)
	return ok && !ke.Retriable && ke.Code != kerr.UnknownServerError.Code &&
		ke.Code != kerr.ConcurrentTransactions.Code
}

// commitOutcome is what a resent EndTxn(commit) taught.
type commitOutcome int8

const (
	undecided commitOutcome = iota // no definite answer yet: resend
	committed
	aborted // the coordinator holds no open or committed transaction of this epoch
	fenced  // another instance owns the transactional id now
)

// resolveCommit learns the outcome of a commit whose EndTxn answer was lost, as Kafka's
// producer does: it resends EndTxn(commit) with the same producer id and epoch until the
// coordinator answers definitely. A repeat of a commit the coordinator completed is
// answered with success (TV1: the same epoch; TV2: the epoch one below the bumped one), a
// commit still being completed with CONCURRENT_TRANSACTIONS, and one that never arrived is
// committed now (the transaction is still open, and commit is what was asked). It returns
// nil once committed, ErrTransactionAborted when the coordinator aborted the transaction
// (its timeout), and ErrCommitOutcomeUnknown when another instance fenced this one or no
// definite answer came within the transaction timeout (by then the coordinator has
// aborted a transaction that was still open) or before ctx ended.
func resolveCommit(ctx context.Context, cl *kgo.Client, pid int64, epoch int16, cause error) error {
	id, ok := txnIDOf(cl)
	if !ok {
		return cause
	}
	limit, _ := cl.OptValue(kgo.TransactionTimeout).(time.Duration)
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	co := newCoordinator(cl, coordinatorTxn, id)
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, true
	last := cause
	for {
		outcome, err := resendCommit(rctx, co, req)
		switch outcome {
		case committed:
			return nil
		case aborted:
			return fmt.Errorf("%w: the coordinator aborted %q (producer %d epoch %d): %w", ErrTransactionAborted, id, pid, epoch, err)
		case fenced:
			return fmt.Errorf("%w: %q (producer %d epoch %d) was fenced before its commit was confirmed: %w", ErrCommitOutcomeUnknown, id, pid, epoch, err)
		}
		last = err
		if sleepCtx(rctx, shareAckBackoff) != nil {
			return fmt.Errorf("%w: EndTxn(commit) of %q (producer %d epoch %d) had no definite answer within %v: %w",
				ErrCommitOutcomeUnknown, id, pid, epoch, limit, last)
		}
	}
}

// resendCommit sends req once at the highest version the client and the broker share
// (transactions v2 where the broker has it, as kgo sends) and, if that is refused
// definitely, once at version 4 (transactions v1, as kgo sends without KIP-890 and
// endAcksOnly always): the coordinator judges a repeated EndTxn by the version it comes
// with (TV2 accepts the epoch below its bumped one, TV1 only the same), and kgo does not
// say which version it sent. A resend at the other version never commits anything that a
// commit at the right one would not: it can only commit a transaction still open at this
// epoch. Success at either version is the commit; INVALID_TXN_STATE at one and no
// success means no transaction of this epoch is open or committed.
func resendCommit(ctx context.Context, co *coordinator, req *kmsg.EndTxnRequest) (commitOutcome, error) {
	var refusals []error
	for _, r := range []kmsg.Request{req, endTxnV4{req}} {
		resp, err := co.do(ctx, r)
		if err != nil {
			return undecided, err
		}
		err = kerr.ErrorForCode(resp.(*kmsg.EndTxnResponse).ErrorCode)
		switch {
		case err == nil:
			return committed, nil
		case coordinatorMoved(err):
			co.invalidate()
			return undecided, err
		case kerr.IsRetriable(err), errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.UnknownServerError):
			return undecided, err
		}
		refusals = append(refusals, err)
	}
	err := errors.Join(refusals...)
	if errors.Is(err, kerr.InvalidTxnState) {
		return aborted, err
	}
	return fenced, err
}
