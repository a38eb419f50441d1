package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// KIP-939: a transactional producer as a participant in an external two-phase commit. The
// flow, with an external coordinator (a database, a stream processor's checkpoints):
//
//	p, _ := client.NewProducer(client.ProducerConfig{..., TransactionalID: "job-1", Enable2PC: true})
//	p.InitTransactions(ctx)                    // first start only: aborts what is left open
//	p.BeginTransaction(ctx); p.Produce(...); p.SendShareAcksToTransaction(...)
//	st, err := p.PrepareTransaction(ctx)       // phase 1: everything durable, the vote is yes
//	store st.String() with the external decision
//	p.CommitTransaction(ctx)                   // phase 2 (or AbortTransaction)
//
// After a crash between the two phases, a new producer with the same TransactionalID calls
// RecoverPreparedTransaction (never InitTransactions, which aborts) and then
// CompleteTransaction with the state stored with the decision: it commits if the stored
// state is the recovered one, and aborts otherwise.
//
// The broker keeps a two-phase transaction open forever (no transaction timeout); only
// its producer, a recovering producer, or an InitTransactions with the same
// TransactionalID ends it.

// PreparedTxnState identifies a prepared transaction: the producer id and epoch it was
// prepared under. Its String form "producerId:epoch" is the same as Java's
// PreparedTxnState.
type PreparedTxnState struct {
	ProducerID int64
	Epoch      int16
}

var noPreparedTxnState = PreparedTxnState{ProducerID: -1, Epoch: -1}

// String is "producerId:epoch", or "" for the zero state (Java's toString).
func (s PreparedTxnState) String() string {
	if s.IsZero() {
		return ""
	}
	return strconv.FormatInt(s.ProducerID, 10) + ":" + strconv.FormatInt(int64(s.Epoch), 10)
}

// IsZero reports whether s names no transaction: -1/-1 (Java's empty state) or the zero
// value. exactq brokers never hand out producer id 0, so no real state is the zero value.
func (s PreparedTxnState) IsZero() bool {
	return s.ProducerID < 0 || s == PreparedTxnState{}
}

// ParsePreparedTxnState parses String's form. "" is the zero state (-1/-1), as in Java;
// anything else must be "producerId:epoch" with both at least 0.
func ParsePreparedTxnState(s string) (PreparedTxnState, error) {
	if s == "" {
		return noPreparedTxnState, nil
	}
	pid, epoch, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(epoch, ":") {
		return noPreparedTxnState, fmt.Errorf("client: invalid prepared transaction state %q: want producerId:epoch", s)
	}
	id, err1 := strconv.ParseInt(pid, 10, 64)
	ep, err2 := strconv.ParseInt(epoch, 10, 16)
	if err := errors.Join(err1, err2); err != nil {
		return noPreparedTxnState, fmt.Errorf("client: invalid prepared transaction state %q: %w", s, err)
	}
	if id < 0 || ep < 0 {
		return noPreparedTxnState, fmt.Errorf("client: invalid prepared transaction state %q: producer id and epoch must be >= 0", s)
	}
	return PreparedTxnState{ProducerID: id, Epoch: int16(ep)}, nil
}

var (
	// ErrNotPrepared is returned by CompleteTransaction when no transaction is prepared
	// (Java: InvalidTxnStateException).
	ErrNotPrepared = errors.New("client: no prepared transaction")
	// Err2PCDisabled is returned by PrepareTransaction when the producer does not have
	// Enable2PC (Java: InvalidTxnStateException).
	Err2PCDisabled = errors.New("client: two-phase commit is not enabled (ProducerConfig.Enable2PC)")
	// ErrTransactionPrepared is returned by Produce, SendOffsetsToTransaction,
	// SendShareAcksToTransaction, BeginTransaction and PrepareTransaction while a
	// transaction is prepared: only CommitTransaction, AbortTransaction or
	// CompleteTransaction may follow (Java: IllegalStateException).
	ErrTransactionPrepared = errors.New("client: transaction is prepared: only commit, abort or complete it")
)

// PrepareTransaction flushes every record of the current transaction, waits for all of
// them (and for any SendShareAcksToTransaction already returned) to be durable, and marks
// the transaction prepared: until CommitTransaction, AbortTransaction or
// CompleteTransaction, Produce and SendShareAcksToTransaction fail. It returns the state to
// store with the caller's checkpoint.
//
// Errors: Err2PCDisabled, ErrNoTransaction, ErrTransactionAbortable (a record or a staging
// failed: abort), ErrProducerFatal, or ctx's error while flushing (the transaction is then
// still open and PrepareTransaction may be called again). Like Java's prepareTransaction
// it asks the coordinator nothing: a producer fenced meanwhile learns it at the commit.
func (p *Producer) PrepareTransaction(ctx context.Context) (PreparedTxnState, error) {
	t := p.txn
	if t == nil {
		return noPreparedTxnState, ErrNotTransactional
	}
	if !t.enable2PC {
		return noPreparedTxnState, Err2PCDisabled
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	p.mu.Lock()
	if err := t.err(); err != nil {
		p.mu.Unlock()
		return noPreparedTxnState, err
	}
	if err := t.notOpenErr(); err != nil {
		p.mu.Unlock()
		return noPreparedTxnState, err
	}
	// Prepared from here on, so that nothing can be produced while the flush runs.
	t.phase = txnPrepared
	p.mu.Unlock()
	p.poke()

	if err := p.Flush(ctx); err != nil {
		p.mu.Lock()
		if t.phase == txnPrepared {
			t.phase = txnOpen
		}
		p.mu.Unlock()
		return noPreparedTxnState, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := t.err(); err != nil {
		t.phase = txnOpen // AbortTransaction is next
		return noPreparedTxnState, err
	}
	t.pending = map[TopicPartition]bool{} // every record was answered, so every partition was added
	t.prepared = PreparedTxnState{ProducerID: p.ids.cur.id, Epoch: p.ids.cur.epoch}
	t.hasPrepared = true
	return t.prepared, nil
}

// RecoverPreparedTransaction is InitTransactions with KeepPreparedTxn: it fences any
// previous instance of this transactional id without aborting its open transaction. If one
// was open it returns its state and ok=true and the producer is prepared (only
// CompleteTransaction, CommitTransaction or AbortTransaction are allowed next); otherwise
// ok=false and the producer is ready like after InitTransactions.
//
// It must be the producer's first transactional call. It works without Enable2PC too
// (KIP-939 allows KeepPreparedTxn alone): the kept transaction then gets the producer's
// TransactionTimeout, counted from the recovery. The broker must serve InitProducerId v6
// (kerr.UnsupportedVersion otherwise); exactq does, Kafka 4.4 does not implement keeping.
func (p *Producer) RecoverPreparedTransaction(ctx context.Context) (st PreparedTxnState, ok bool, err error) {
	t := p.txn
	if t == nil {
		return noPreparedTxnState, false, ErrNotTransactional
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	p.mu.Lock()
	phase, fatal := t.phase, t.fatal
	p.mu.Unlock()
	if fatal != nil {
		return noPreparedTxnState, false, fatal
	}
	if phase != txnUninitialized {
		return noPreparedTxnState, false, errors.New("client: RecoverPreparedTransaction after InitTransactions: it must be the producer's first transactional call")
	}
	ongoing, err := p.initTxnIDKeep(ctx, false, true)
	if err != nil {
		return noPreparedTxnState, false, err
	}
	if ongoing.id < 0 {
		return noPreparedTxnState, false, nil
	}
	return PreparedTxnState{ProducerID: ongoing.id, Epoch: ongoing.epoch}, true, nil
}

// CompleteTransaction commits the prepared transaction if its state equals want, and
// aborts it otherwise (the Java completeTransaction rule). committed reports which. On an
// error the outcome may not be reached yet: call CompleteTransaction again with the same
// want (it resumes the same commit or abort), unless the error wraps ErrProducerFatal.
func (p *Producer) CompleteTransaction(ctx context.Context, want PreparedTxnState) (committed bool, err error) {
	t := p.txn
	if t == nil {
		return false, ErrNotTransactional
	}
	p.mu.Lock()
	fatal := t.fatal
	ok := t.hasPrepared && (t.phase == txnPrepared || t.phase == txnCommitting || t.phase == txnAborting)
	st := t.prepared
	p.mu.Unlock()
	if fatal != nil {
		return false, fatal
	}
	if !ok {
		return false, ErrNotPrepared
	}
	if want == st {
		return true, p.CommitTransaction(ctx)
	}
	return false, p.AbortTransaction(ctx)
}

// PreparedState returns the prepared transaction's state, ok=false when none is prepared.
func (p *Producer) PreparedState() (PreparedTxnState, bool) {
	t := p.txn
	if t == nil {
		return noPreparedTxnState, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.phase != txnPrepared || !t.hasPrepared {
		return noPreparedTxnState, false
	}
	return t.prepared, true
}
