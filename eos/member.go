package eos

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
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
	consumer *shareConsumer
	producer txnProducer
	// broken is set when the producer reported an error it cannot recover from (fatal):
	// it can only be replaced.
	broken bool

	inTxn    bool
	polled   []*kgo.Record
	acked    int // inputs of polled acknowledged
	unstaged ackSet
	txn      *txnCounts
	// inputs counts the records polled since the last commit or abort.
	inputs int
}

// memberConfig is what a member needs to build (and rebuild) its two clients.
type memberConfig struct {
	consumer    consumerConfig
	newProducer func() (txnProducer, error)
	// replaceable says a fenced producer is replaced by a new instance, whose init
	// (InitProducerId) fences the previous one and aborts its open transaction. False
	// means the member's owner must recover instead (Checkpointer).
	replaceable bool
	backoff     time.Duration
}

// txnCounts describes the open transaction. produceErr is written by producer callbacks
// on the producer's goroutine; a fresh txnCounts per transaction keeps a late callback of
// an aborted transaction from blaming the next one.
type txnCounts struct {
	rejected, outputs int
	produceErr        atomic.Pointer[error]
	// produced is the callback of every output of the transaction (made once: a method
	// value per Produce would allocate per record).
	produced func(*kgo.Record, error)
}

func newTxnCounts() *txnCounts {
	t := &txnCounts{}
	t.produced = func(_ *kgo.Record, err error) {
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
	c, err := newShareConsumer(cfg.consumer)
	if err != nil {
		return nil, err
	}
	p, err := cfg.newProducer()
	if err != nil {
		c.close(context.Background())
		return nil, err
	}
	return &member{cfg: cfg, consumer: c, producer: p, txn: newTxnCounts()}, nil
}

// held reports whether the member holds inputs that are not staged.
func (m *member) held() bool { return len(m.polled) > 0 || m.unstaged.len() > 0 }

// poll returns the next inputs. The previous poll's inputs must have been collected.
func (m *member) poll(ctx context.Context) ([]*kgo.Record, error) {
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
	if err := m.note(m.producer.begin()); err != nil {
		return err
	}
	m.inTxn, m.txn = true, newTxnCounts()
	return nil
}

// produce writes an output in the open transaction; its outcome is known at commit.
func (m *member) produce(ctx context.Context, r *kgo.Record) {
	m.txn.outputs++
	m.producer.produce(ctx, r, m.txn.produced)
}

// acknowledge settles one polled input: accepted, or rejected (archived on commit).
func (m *member) acknowledge(r *kgo.Record, reject bool) error {
	t := kgoext.AckAccept
	if reject {
		t = kgoext.AckReject
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
// current epoch (the broker checks it at staging time, not at acknowledgement time). A
// transaction that an output already doomed stages nothing: it can only abort, and the
// inputs go back sooner released than staged and aborted.
func (m *member) stage(ctx context.Context) error {
	if m.unstaged.len() == 0 {
		return nil
	}
	if perr := m.txn.firstProduceErr(); perr != nil {
		return fmt.Errorf("%w: %w", errDoomed, perr)
	}
	err := m.producer.stage(ctx, m.unstaged.txnAcks(), m.consumer.GroupMetadata())
	if err != nil {
		return m.note(err)
	}
	m.unstaged.clear()
	return nil
}

// commit stages what is left and commits. A commit whose answer was lost is resent by
// kgoext.EndTransaction until the coordinator answers definitely, so an error here is a
// transaction that did not commit, or one whose outcome stayed unknown (ErrCommitUnknown:
// the abort that follows settles it, since the new producer id or epoch fences the
// transaction, and a commit the coordinator already decided stays committed). On error
// the caller must abort.
func (m *member) commit(ctx context.Context) error {
	if err := m.stage(ctx); err != nil {
		return m.blame(ErrStage, err)
	}
	if err := m.producer.commit(ctx); err != nil {
		if errors.Is(err, kgoext.ErrCommitOutcomeUnknown) {
			err = fmt.Errorf("%w: %w", ErrCommitUnknown, err)
		}
		return m.blame(ErrCommit, m.note(err))
	}
	m.inTxn, m.inputs = false, 0
	return nil
}

// blame wraps err in the step's sentinel, or in ErrProduce when an output of the
// transaction failed (that dooms the transaction, and later steps only echo it).
func (m *member) blame(step, err error) error {
	if perr := m.txn.firstProduceErr(); perr != nil && (isAbortable(err) || errors.Is(err, errDoomed)) {
		return stepErr(ErrProduce, errors.Join(perr, err))
	}
	return stepErr(step, err)
}

// note records a fatal producer error (the producer must be replaced) and returns err.
func (m *member) note(err error) error {
	if isFatal(err) {
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
//     abort is replaced, and the new instance's InitProducerId aborts it;
//  4. inputs still unstaged are RELEASEd (ShareConsumer.ReleaseAcknowledgements, sent at
//     once with CommitSync);
//  5. if that fails, the consumer and its kgo client are closed and recreated: closing
//     its share sessions (or, failing that, their connections) releases every record it
//     holds that is not TX_PENDING.
func (m *member) abort(ctx context.Context) error {
	m.inputs = 0
	for _, r := range m.polled {
		_ = m.consumer.Acknowledge(r, kgoext.AckAccept) // ErrNotDelivered: already acknowledged
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
		err := m.note(m.producer.abort(ctx))
		if err == nil {
			return nil
		}
		if !isResumable(err) || sleep(ctx, m.cfg.backoff) != nil {
			break
		}
	}
	// Fenced, or the coordinator unreachable: a new instance settles the transaction (its
	// InitProducerId aborts it, or waits for a commit the coordinator already decided).
	return m.replaceProducer(ctx)
}

// replaceProducer closes the producer and starts a new instance with the same
// transactional id.
func (m *member) replaceProducer(ctx context.Context) error {
	if !m.cfg.replaceable {
		return stepErr(ErrFenced, errors.New("eos: the producer cannot be replaced here; recover"))
	}
	m.producer.close()
	m.inTxn = false
	p, err := m.cfg.newProducer()
	if err != nil {
		return err
	}
	m.producer = p
	return m.startTransactions(ctx)
}

// startTransactions runs the producer's init until it succeeds, retrying until ctx ends
// unless the error is permanent. Each retry is a new producer: a kgo client keeps a failed
// producer id load as its state, and a fresh client starts clean. Only a fencingProducer
// starts here; a Checkpointer's starts in Recover.
func (m *member) startTransactions(ctx context.Context) error {
	for {
		p, ok := m.producer.(fencingProducer)
		if !ok {
			return stepErr(ErrFenced, errors.New("eos: this producer starts only in Recover, which keeps its prepared transaction"))
		}
		err := p.init(ctx)
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
		m.producer.close()
		next, err := m.cfg.newProducer()
		if err != nil {
			return err
		}
		m.producer = next
	}
}

// replaceConsumer closes the consumer and its client, which releases every record it still
// holds that is not TX_PENDING, and joins the group again as a new member.
func (m *member) replaceConsumer(ctx context.Context) error {
	_ = m.consumer.close(ctx) // its errors are acknowledgements that were not applied: released anyway
	m.polled = nil
	m.unstaged.clear()
	c, err := newShareConsumer(m.cfg.consumer)
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
	err = errors.Join(err, m.consumer.close(ctx))
	m.producer.close()
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
