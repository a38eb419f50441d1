package eos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactq/exactq/kgoext/twopc"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Checkpointer is exactly-once share-group processing for frameworks that own their
// checkpoints (the Flink pattern): the framework polls inputs, produces outputs and
// acknowledges inputs through it, and at each checkpoint drives the lifecycle
//
//	PrepareCommit → SnapshotState → (the framework makes its checkpoint durable) → NotifyCheckpointComplete
//
// The transaction is a KIP-939 two-phase-commit transaction (package kgoext/twopc: a kgo
// transactional client cannot take part, its InitProducerId aborts what is prepared):
// once prepared it survives a crash of this process and of the broker, without a timeout,
// until someone completes it.
// After a crash, a new Checkpointer with the same TransactionalID calls Recover with the
// snapshot of the last checkpoint that completed: the transaction of that checkpoint, if
// still open, is committed; any later one is aborted and its inputs are delivered again.
//
// Every Checkpointer starts with Recover (nil on the very first start). Between
// PrepareCommit and NotifyCheckpointComplete (or Abort) no input is polled: one producer
// has one transaction. All state needed to recover is in the snapshot bytes, so recovery
// is deterministic and can run in another process.
//
// A Checkpointer is used from one goroutine. After an error matching ErrFenced it is
// unusable: Close it, and recover with a new one.
type Checkpointer struct {
	cfg      CheckpointerConfig
	m        *member
	phase    lifecyclePhase
	prepared Snapshot // valid in phasePrepared
}

// lifecyclePhase is where a Checkpointer is in the checkpoint lifecycle.
type lifecyclePhase uint8

const (
	phaseUnrecovered lifecyclePhase = iota // Recover not called yet
	phaseOpen                              // polling, producing, acknowledging
	phasePrepared                          // PrepareCommit done: SnapshotState, NotifyCheckpointComplete or Abort
	phaseFenced                            // the producer is fenced: only Close
	phaseClosed
)

func (p lifecyclePhase) String() string {
	return [...]string{"not recovered", "open", "prepared", "fenced", "closed"}[p]
}

// CheckpointerConfig configures a Checkpointer. Brokers, Group, Topics and
// TransactionalID are required.
type CheckpointerConfig struct {
	// Brokers are the seed brokers of the Checkpointer's clients.
	Brokers []string
	// ClientOpts are applied to both kgo clients the Checkpointer makes (the share
	// consumer's and the two-phase-commit producer's), after its own: TLS, SASL,
	// kgo.Dialer, kgo.ClientID, kgo.ConnIdleTimeout (raise it when checkpoints are further
	// apart than 30s: the broker releases a share session's records when its connection
	// closes), a kgo.RecordPartitioner for the outputs. kgo.TransactionalID,
	// kgo.TransactionTimeout, kgo.MaxVersions and kgo's consumer and group options are
	// refused with ErrInvalidConfig.
	ClientOpts []kgo.Opt
	Group      string
	Topics     []string
	// TransactionalID must be the same after a restart (recovery finds the prepared
	// transaction by it) and owned by one running instance at a time.
	TransactionalID string
	// MaxPollRecords caps one poll. Default 500.
	MaxPollRecords int32
	// RetryBackoff is the pause before retrying while giving inputs back. Default 250ms.
	RetryBackoff time.Duration
}

func (cfg CheckpointerConfig) withDefaults() (CheckpointerConfig, error) {
	bad := func(what string) (CheckpointerConfig, error) {
		return cfg, fmt.Errorf("%w: %s", ErrInvalidConfig, what)
	}
	if err := checkSource(cfg.Brokers, cfg.Group, cfg.Topics); err != nil {
		return cfg, err
	}
	if err := checkClientOpts(cfg.Brokers, cfg.ClientOpts); err != nil {
		return cfg, err
	}
	switch {
	case cfg.TransactionalID == "":
		return bad("TransactionalID is empty")
	case cfg.MaxPollRecords < 0 || cfg.RetryBackoff < 0:
		return bad("MaxPollRecords or RetryBackoff is negative")
	}
	cfg.MaxPollRecords = orDefault(cfg.MaxPollRecords, defaultMaxPoll)
	cfg.RetryBackoff = orDefault(cfg.RetryBackoff, defaultBackoff)
	return cfg, nil
}

// NewCheckpointer validates cfg and creates the share consumer (which starts joining the
// group) and the two-phase-commit producer. Call Recover next.
func NewCheckpointer(cfg CheckpointerConfig) (*Checkpointer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMember(memberConfig{
		consumer: consumerConfig{
			brokers: cfg.Brokers, clientOpts: cfg.ClientOpts, group: cfg.Group, topics: cfg.Topics,
			maxRecords: cfg.MaxPollRecords,
		},
		newProducer: func() (txnProducer, error) {
			return newTwopcProducer(cfg.Brokers, cfg.TransactionalID, cfg.ClientOpts)
		},
		backoff: cfg.RetryBackoff,
		// Not replaceable: a fenced producer means another instance owns the
		// transactional id; fencing it back would break its checkpoints.
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Checkpointer{cfg: cfg, m: m}, nil
}

// Recovery is what Recover found and did.
type Recovery struct {
	// Found is true when a transaction of an earlier instance was still open.
	Found bool
	// Committed is true when that transaction was the snapshot's and is now committed;
	// false when it was aborted (its inputs are delivered again).
	Committed bool
	// ProducerID and Epoch identify the transaction found (-1 when none).
	ProducerID int64
	Epoch      int16
}

// Recover settles what an earlier instance with this TransactionalID left open, given the
// snapshot of the last checkpoint that COMPLETED (nil if none ever did): it fences that
// instance, keeps its open transaction (RecoverPreparedTransaction), and commits it if it
// is the one the snapshot names, or aborts it otherwise (CompleteTransaction). It must be
// the first call on a Checkpointer; when it fails it may be called again.
func (c *Checkpointer) Recover(ctx context.Context, snapshot []byte) (Recovery, error) {
	if err := c.expect(phaseUnrecovered); err != nil {
		return Recovery{}, err
	}
	var want twopc.PreparedTxnState // zero: matches no transaction, so it aborts
	if len(snapshot) > 0 {
		s, err := DecodeSnapshot(snapshot)
		if err != nil {
			return Recovery{}, err
		}
		if s.TransactionalID != c.cfg.TransactionalID {
			return Recovery{}, fmt.Errorf("%w: it belongs to transactional id %q, not %q", ErrSnapshot, s.TransactionalID, c.cfg.TransactionalID)
		}
		if s.Prepared {
			want = twopc.PreparedTxnState{ProducerID: s.ProducerID, Epoch: s.Epoch}
		}
	}
	rec := Recovery{ProducerID: -1, Epoch: -1}
	found, ok, err := c.twopc().RecoverPreparedTransaction(ctx)
	if err == nil && ok {
		rec.Found, rec.ProducerID, rec.Epoch = true, found.ProducerID, found.Epoch
		rec.Committed, err = c.twopc().CompleteTransaction(ctx, want)
	}
	if err != nil {
		// Start over with a fresh producer instance if Recover is called again.
		c.m.producer.close()
		if p, perr := c.m.cfg.newProducer(); perr == nil {
			c.m.producer = p
		}
		return Recovery{}, stepErr(ErrCommit, err)
	}
	c.phase = phaseOpen
	return rec, nil
}

// Poll returns the next inputs. Every input of the previous poll must have been
// acknowledged (Acknowledge). The first inputs after a checkpoint open its transaction.
func (c *Checkpointer) Poll(ctx context.Context) ([]*kgo.Record, error) {
	if err := c.expect(phaseOpen); err != nil {
		return nil, err
	}
	if err := c.collect(); err != nil {
		return nil, err
	}
	recs, err := c.m.poll(ctx)
	if len(recs) > 0 {
		if berr := c.m.begin(ctx); berr != nil {
			return recs, c.fatal(stepErr(ErrCommit, berr))
		}
	}
	return recs, err
}

// Produce writes an output in the checkpoint's transaction: visible to read_committed
// readers once the checkpoint completes. Its failure is reported by PrepareCommit.
func (c *Checkpointer) Produce(ctx context.Context, r *kgo.Record) error {
	if err := c.expect(phaseOpen); err != nil {
		return err
	}
	if err := c.m.begin(ctx); err != nil {
		return c.fatal(stepErr(ErrCommit, err))
	}
	c.m.produce(ctx, r)
	return nil
}

// Flush writes the outputs produced so far and waits for them: they are in the log, in
// the checkpoint's transaction, invisible to read_committed readers until the checkpoint
// completes. PrepareCommit flushes too; the producer otherwise sends outputs only when a
// partition's batch is full (kgo.ProducerBatchMaxBytes), so a framework calls Flush to
// spread the writes of a long checkpoint, or to learn of a refused output (ErrProduce:
// the checkpoint must be aborted) before PrepareCommit.
func (c *Checkpointer) Flush(ctx context.Context) error {
	if err := c.expect(phaseOpen); err != nil {
		return err
	}
	if !c.m.inTxn {
		return nil
	}
	if err := c.m.producer.flush(ctx); err != nil {
		return c.fatal(c.m.blame(ErrProduce, c.m.note(err)))
	}
	return nil
}

// Acknowledge settles an input of the last poll: accepted, or rejected as poison
// (archived when the checkpoint completes, never delivered again).
func (c *Checkpointer) Acknowledge(in *kgo.Record, reject bool) error {
	if err := c.expect(phaseOpen); err != nil {
		return err
	}
	return c.m.acknowledge(in, reject)
}

// PrepareCommit flushes the outputs, stages the acknowledgements in the transaction, and
// prepares it: from then on it can only be completed, by NotifyCheckpointComplete, Abort
// or a Recover, and it survives crashes meanwhile. Every polled input must have been
// acknowledged. A checkpoint without inputs or outputs prepares nothing. On error the
// transaction is still open: call Abort.
func (c *Checkpointer) PrepareCommit(ctx context.Context) error {
	if err := c.expect(phaseOpen); err != nil {
		return err
	}
	if err := c.collect(); err != nil {
		return err
	}
	c.prepared = Snapshot{TransactionalID: c.cfg.TransactionalID, ProducerID: -1, Epoch: -1}
	if c.m.inTxn {
		if err := c.m.stage(ctx); err != nil {
			return c.fatal(c.m.blame(ErrStage, err))
		}
		st, err := c.twopc().PrepareTransaction(ctx)
		if err != nil {
			return c.fatal(c.m.blame(ErrCommit, c.m.note(err)))
		}
		c.prepared.Prepared, c.prepared.ProducerID, c.prepared.Epoch = true, st.ProducerID, st.Epoch
	}
	c.phase = phasePrepared
	return nil
}

// SnapshotState returns the bytes to store in the checkpoint: the transactional id and
// the prepared transaction's producer id and epoch (format: Snapshot). Call it after
// PrepareCommit; it may be called several times.
func (c *Checkpointer) SnapshotState() ([]byte, error) {
	if err := c.expect(phasePrepared); err != nil {
		return nil, err
	}
	return c.prepared.MarshalBinary()
}

// NotifyCheckpointComplete commits the prepared transaction: the checkpoint holding its
// snapshot is durable. If it fails without ErrFenced it may be called again; a crash
// meanwhile is settled by Recover with this checkpoint's snapshot, which commits.
func (c *Checkpointer) NotifyCheckpointComplete(ctx context.Context) error {
	if err := c.expect(phasePrepared); err != nil {
		return err
	}
	if c.prepared.Prepared {
		want := twopc.PreparedTxnState{ProducerID: c.prepared.ProducerID, Epoch: c.prepared.Epoch}
		committed, err := c.twopc().CompleteTransaction(ctx, want)
		if err != nil {
			return c.fatal(stepErr(ErrCommit, c.m.note(err)))
		}
		if !committed {
			// Only possible if the transaction is no longer this instance's.
			return c.fatal(stepErr(ErrCommit, fmt.Errorf("%w: transaction %d:%d was aborted", ErrFenced, want.ProducerID, want.Epoch)))
		}
	}
	c.m.inTxn, c.m.inputs = false, 0
	c.phase = phaseOpen
	return nil
}

// Abort abandons the current checkpoint's transaction, prepared or not: its outputs are
// discarded and its inputs are delivered again (archived at the delivery limit).
func (c *Checkpointer) Abort(ctx context.Context) error {
	switch c.phase {
	case phaseOpen:
		return c.fatal(c.m.abort(ctx))
	case phasePrepared:
		if c.prepared.Prepared {
			// A zero want never matches: CompleteTransaction aborts.
			if _, err := c.twopc().CompleteTransaction(ctx, twopc.PreparedTxnState{}); err != nil {
				return c.fatal(stepErr(ErrCommit, c.m.note(err)))
			}
		}
		c.m.inTxn, c.m.inputs = false, 0
		c.phase = phaseOpen
		return nil
	}
	return c.expect(phaseOpen)
}

// Close leaves the group and closes the clients. A prepared transaction stays prepared (a
// later Recover settles it); an open one is aborted.
func (c *Checkpointer) Close(ctx context.Context) error {
	if c.phase == phaseClosed {
		return nil
	}
	var err error
	if c.phase == phaseOpen || c.phase == phaseUnrecovered {
		err = c.m.abort(ctx)
	}
	c.phase = phaseClosed
	err = errors.Join(err, c.m.consumer.close(ctx))
	c.m.producer.close()
	return err
}

// twopc is the member's two-phase-commit producer (a Checkpointer's member has no other).
func (c *Checkpointer) twopc() *twopc.Producer { return c.m.producer.(*twopcProducer).p }

// collect takes the last poll's acknowledgements out of the consumer, refusing while an
// input is not acknowledged.
func (c *Checkpointer) collect() error {
	if n := c.m.unacknowledged(); n > 0 {
		return fmt.Errorf("%w: %d inputs of the last poll are not acknowledged", ErrPhase, n)
	}
	return c.m.collect()
}

// expect returns an ErrPhase error unless the Checkpointer is in phase want.
func (c *Checkpointer) expect(want lifecyclePhase) error {
	switch {
	case c.phase == want:
		return nil
	case c.phase == phaseFenced:
		return fmt.Errorf("%w: the Checkpointer was fenced; close it and recover with a new one", ErrFenced)
	case c.phase == phaseClosed:
		return ErrClosed
	}
	return fmt.Errorf("%w: the checkpoint is %s, this step needs it %s", ErrPhase, c.phase, want)
}

// fatal moves to phaseFenced when err says the producer is fenced, and returns err.
func (c *Checkpointer) fatal(err error) error {
	if errors.Is(err, ErrFenced) || c.m.broken {
		c.phase = phaseFenced
	}
	return err
}
