package eos

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/client"
)

// member is one share-group member paired with its own transactional producer: what a
// runner worker and a Checkpointer are built from. It knows where every input it holds
// is, in one of three places:
//
//   - polled: returned by the last Poll, not acknowledged yet (the consumer tracks them);
//   - unstaged: acknowledged and taken out of the consumer, not yet staged;
//   - staged: in the open transaction, TX_PENDING on the broker.
//
// That is what lets abort give every input back after a failure at any step: staged
// inputs come back with the transaction's abort; the others are staged first, so that the
// abort returns them too. Only when staging is impossible does it fall back to closing the
// consumer, whose share sessions end and release what it still holds. Records taken out
// of the consumer cannot be released any other way: the consumer no longer knows them.
//
// A member is used from one goroutine.
type member struct {
	cfg      memberConfig
	consumer *client.ShareConsumer
	producer *client.Producer
	// broken is set when the producer reported ErrProducerFatal: it can only be replaced.
	broken bool

	inTxn    bool
	polled   []*client.Record
	acked    int // inputs of polled acknowledged
	unstaged ackSet
	txn      *txnCounts
	// inputs counts the records polled since the last commit or abort.
	inputs int
}

// memberConfig is what a member needs to build (and rebuild) its two clients.
type memberConfig struct {
	consumer    client.ShareConsumerConfig
	newProducer func() (*client.Producer, error)
	// initProducer prepares a new producer for transactions (InitTransactions, which
	// fences the previous instance and aborts its open transaction). Nil means a fenced
	// producer is not replaced: the member's owner must recover (Checkpointer).
	initProducer func(context.Context, *client.Producer) error
	backoff      time.Duration
}

// txnCounts describes the open transaction. produceErr is written by producer callbacks
// on the producer's goroutine; a fresh txnCounts per transaction keeps a late callback of
// an aborted transaction from blaming the next one.
type txnCounts struct {
	rejected, outputs int
	produceErr        atomic.Pointer[error]
	// produced is the callback of every output of the transaction (made once: a method
	// value per Produce would allocate per record).
	produced func(*client.Record, error)
}

func newTxnCounts() *txnCounts {
	t := &txnCounts{}
	t.produced = func(_ *client.Record, err error) {
		if err != nil {
			t.produceErr.CompareAndSwap(nil, &err)
		}
	}
	return t
}

func (t *txnCounts) firstProduceErr() error {
	if p := t.produceErr.Load(); p != nil {
		return *p
	}
	return nil
}

// newMember builds the consumer and the producer; neither talks to a broker yet.
func newMember(cfg memberConfig) (*member, error) {
	c, err := client.NewShareConsumer(cfg.consumer)
	if err != nil {
		return nil, err
	}
	p, err := cfg.newProducer()
	if err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return &member{cfg: cfg, consumer: c, producer: p, txn: newTxnCounts()}, nil
}

// held reports whether the member holds inputs that are not staged.
func (m *member) held() bool { return len(m.polled) > 0 || m.unstaged.len() > 0 }

// poll returns the next inputs. The previous poll's inputs must have been collected.
func (m *member) poll(ctx context.Context) ([]*client.Record, error) {
	recs, err := m.consumer.Poll(ctx)
	m.polled, m.acked = recs, 0
	m.inputs += len(recs)
	return recs, err
}

// begin opens a transaction unless one is open, replacing a fenced producer first.
func (m *member) begin(ctx context.Context) error {
	if m.inTxn {
		return nil
	}
	if m.broken {
		if err := m.replaceProducer(ctx); err != nil {
			return err
		}
	}
	if err := m.note(m.producer.BeginTransaction(ctx)); err != nil {
		return err
	}
	m.inTxn, m.txn = true, newTxnCounts()
	return nil
}

// produce writes an output in the open transaction; its outcome is known at commit.
func (m *member) produce(ctx context.Context, r *client.Record) {
	m.txn.outputs++
	m.producer.Produce(ctx, r, m.txn.produced)
}

// acknowledge settles one polled input: accepted, or rejected (archived on commit).
func (m *member) acknowledge(r *client.Record, reject bool) error {
	t := client.AckAccept
	if reject {
		t = client.AckReject
	}
	if err := m.consumer.Acknowledge(r, t); err != nil {
		return err
	}
	m.acked++
	if reject {
		m.txn.rejected++
	}
	return nil
}

// unacknowledged is the number of inputs of the last poll not acknowledged yet.
func (m *member) unacknowledged() int { return len(m.polled) - m.acked }

// collect takes the acknowledgements of the last poll out of the consumer, so that the
// next poll does not send them outside the transaction. Every polled input must have been
// acknowledged.
func (m *member) collect() error {
	acks, err := m.consumer.AcknowledgementsForTransaction()
	if err != nil {
		return err
	}
	m.unstaged.add(acks)
	m.polled, m.acked = nil, 0
	return nil
}

// stage puts the collected acknowledgements into the open transaction, with the member's
// current epoch (the broker checks it at staging time, not at acknowledgement time).
func (m *member) stage(ctx context.Context) error {
	if m.unstaged.len() == 0 {
		return nil
	}
	err := m.producer.SendShareAcksToTransaction(ctx, m.unstaged.txnAcks(), m.consumer.GroupMetadata())
	if err != nil {
		return m.note(err)
	}
	m.unstaged.clear()
	return nil
}

// commit stages what is left and commits. A commit that failed on the way (transport, not
// an answer) is resumed a few times: the client never commits twice. On error the
// transaction is still open and the caller must abort.
func (m *member) commit(ctx context.Context) error {
	if err := m.stage(ctx); err != nil {
		return m.blame(ErrStage, err)
	}
	err := m.producer.CommitTransaction(ctx)
	for try := 1; err != nil && resumable(err) && try < 3 && ctx.Err() == nil; try++ {
		if sleep(ctx, m.cfg.backoff) != nil {
			break
		}
		err = m.producer.CommitTransaction(ctx)
	}
	if err != nil {
		return m.blame(ErrCommit, m.note(err))
	}
	m.inTxn, m.inputs = false, 0
	return nil
}

// resumable reports a commit error that was not the coordinator's answer.
func resumable(err error) bool {
	return !errors.Is(err, client.ErrTransactionAbortable) && !errors.Is(err, client.ErrProducerFatal) && !isPermanent(err)
}

// blame wraps err in the step's sentinel, or in ErrProduce when an output of the
// transaction failed (that dooms the transaction, and later steps only echo it).
func (m *member) blame(step, err error) error {
	if perr := m.txn.firstProduceErr(); perr != nil && errors.Is(err, client.ErrTransactionAbortable) {
		return stepErr(ErrProduce, errors.Join(perr, err))
	}
	return stepErr(step, err)
}

// note records a fatal producer error (the producer must be replaced) and returns err.
func (m *member) note(err error) error {
	if errors.Is(err, client.ErrProducerFatal) {
		m.broken = true
	}
	return err
}

// abort ends the open transaction without committing and gives every input the member
// holds back to the group (AVAILABLE again, or ARCHIVED at the delivery limit):
//
//  1. inputs of the last poll not acknowledged yet are acknowledged and collected (the
//     type does not matter: the transaction will not commit);
//  2. collected inputs are staged into the doomed transaction if the producer still
//     can (a doomed transaction refuses without a round trip);
//  3. the transaction aborts, which returns everything staged; a producer that cannot
//     abort is replaced, and the new instance's InitTransactions aborts it;
//  4. inputs still unstaged are RELEASEd (ShareConsumer.ReleaseAcknowledgements, sent at
//     once with CommitSync);
//  5. if that fails, the consumer is closed and recreated: closing its share sessions
//     releases every record it holds that is not TX_PENDING.
func (m *member) abort(ctx context.Context) error {
	m.inputs = 0
	for _, r := range m.polled {
		_ = m.consumer.Acknowledge(r, client.AckAccept) // ErrNotDelivered: already acknowledged
	}
	if err := m.collect(); err != nil {
		return m.replaceConsumer(ctx)
	}
	if m.inTxn && !m.broken {
		_ = m.stage(ctx)
	}
	if err := m.abortTxn(ctx); err != nil {
		return err
	}
	if m.unstaged.len() > 0 && m.releaseUnstaged(ctx) != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return m.replaceConsumer(ctx)
	}
	return nil
}

// releaseUnstaged gives back the inputs whose acknowledgements were taken out of the
// consumer but not staged: RELEASE, sent at once, makes them available again.
func (m *member) releaseUnstaged(ctx context.Context) error {
	if err := m.consumer.ReleaseAcknowledgements(m.unstaged.txnAcks()); err != nil {
		return err
	}
	perPart, err := m.consumer.CommitSync(ctx)
	for _, e := range perPart {
		err = errors.Join(err, e)
	}
	if err == nil {
		m.unstaged.clear()
	}
	return err
}

// abortTxn aborts the open transaction, replacing the producer when it cannot.
func (m *member) abortTxn(ctx context.Context) error {
	if !m.inTxn {
		return nil
	}
	m.inTxn = false
	for try := 0; !m.broken && try < 3; try++ {
		err := m.note(m.producer.AbortTransaction(ctx))
		if err == nil {
			return nil
		}
		if !resumable(err) || sleep(ctx, m.cfg.backoff) != nil {
			break
		}
	}
	// Fenced, the coordinator unreachable, or EndTxn(commit) already sent: a new
	// instance settles the transaction (its InitTransactions aborts it, or waits for the
	// commit the coordinator already decided).
	return m.replaceProducer(ctx)
}

// replaceProducer closes the producer and starts a new instance with the same
// transactional id.
func (m *member) replaceProducer(ctx context.Context) error {
	if m.cfg.initProducer == nil {
		return stepErr(ErrFenced, errors.New("eos: the producer cannot be replaced here; recover"))
	}
	m.producer.Close()
	m.inTxn = false
	p, err := m.cfg.newProducer()
	if err != nil {
		return err
	}
	m.producer = p
	return m.startTransactions(ctx)
}

// startTransactions runs initProducer on the producer until it succeeds, replacing a
// producer that became unusable, and retrying transient errors until ctx ends.
func (m *member) startTransactions(ctx context.Context) error {
	for {
		err := m.cfg.initProducer(ctx, m.producer)
		if err == nil {
			m.broken = false
			return nil
		}
		if isPermanent(err) || ctx.Err() != nil {
			return err
		}
		if err := sleep(ctx, m.cfg.backoff); err != nil {
			return err
		}
		if errors.Is(err, client.ErrProducerFatal) {
			m.producer.Close()
			p, err := m.cfg.newProducer()
			if err != nil {
				return err
			}
			m.producer = p
		}
	}
}

// replaceConsumer closes the consumer, which releases every record it still holds that is
// not TX_PENDING, and joins the group again as a new member.
func (m *member) replaceConsumer(ctx context.Context) error {
	_ = m.consumer.Close(ctx) // its errors are acknowledgements that were not applied: released anyway
	m.polled = nil
	m.unstaged.clear()
	c, err := client.NewShareConsumer(m.cfg.consumer)
	if err != nil {
		return err
	}
	m.consumer = c
	return nil
}

// close gives back whatever is held (the caller commits first if it wants to keep
// anything), leaves the group and closes both clients.
func (m *member) close(ctx context.Context) error {
	var err error
	if m.inTxn || m.held() {
		err = m.abort(ctx)
	}
	err = errors.Join(err, m.consumer.Close(ctx))
	m.producer.Close()
	return err
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
