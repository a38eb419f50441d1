package twopc

import (
	"context"
	"errors"

	"github.com/exactq/exactq/kgoext"
)

// SendShareAcksToTransaction stages share acknowledgements in the open transaction
// (KIP-1289) with this producer's transactional id, producer id and epoch, through
// kgoext.SendShareAcks over the producer's kgo client (which must also allow
// TxnShareAcknowledge: twopc.Versions() does). When the transaction commits, ACCEPTed
// records become ACKNOWLEDGED and REJECTed ones ARCHIVED; when it aborts they are
// delivered again. In a prepared transaction they stay TX_PENDING, across broker
// restarts, until the transaction is completed. md is the share consumer's
// GroupMetadata, read when the records were acknowledged.
//
// A transaction holding only acknowledgements (consume-only) commits and aborts with
// EndTxn like any other. Errors: kgoext.ErrCommitFailed wrapped in ErrTransactionAbortable
// (abort: nothing may commit), ErrProducerFatal (fenced), ErrNoTransaction or
// ErrTransactionPrepared, or a ctx or transport error (the call may be repeated; offsets
// an earlier attempt staged then fail, so the transaction aborts, which is safe).
func (p *Producer) SendShareAcksToTransaction(ctx context.Context, acks kgoext.TxnAcks, md kgoext.ShareGroupMetadata) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.txn.openErr(); err != nil {
		return err
	}
	if acks.Len() == 0 {
		return nil
	}
	err := kgoext.SendShareAcks(ctx, p.cl, kgoext.ProducerIdentity{TransactionalID: p.txnID, ProducerID: p.id.id, ProducerEpoch: p.id.epoch}, acks, md)
	if err == nil {
		p.txn.started = true
		return nil
	}
	// Some may have been staged, or none: the transaction ends with EndTxn, and an abort
	// the coordinator answers INVALID_TXN_STATE then had nothing open.
	p.txn.maybeStarted = true
	if errors.Is(err, kgoext.ErrCommitFailed) || isFatal(err) {
		return p.txn.fail(err)
	}
	return err
}
