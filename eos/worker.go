package eos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// worker is one of a Runner's share consumers with its transactional producer, on its own
// goroutine.
type worker struct {
	index int
	cfg   *RunnerConfig
	txnID string
	m     *member
	// began is when the open transaction got its first input: CommitInterval counts
	// from there.
	began time.Time
}

// run opens the member, loops until ctx ends or a permanent error, commits what was
// processed, and closes. Everything after ctx ends runs under the shutdown grace.
func (w *worker) run(ctx context.Context) error {
	grace, stop := graceContext(ctx, w.cfg.ShutdownTimeout)
	defer stop()
	if err := w.open(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	err := w.loop(ctx, grace)
	if err == nil && w.m.inTxn {
		if cerr := w.commit(grace); cerr != nil {
			err = w.fail(grace, cerr)
		}
	}
	_ = w.m.close(grace) // close errors are acknowledgements of released records: nothing to keep
	return err
}

func (w *worker) open(ctx context.Context) error {
	cfg := w.cfg
	m, err := newMember(memberConfig{
		consumer: consumerConfig{
			brokers: cfg.Brokers, clientOpts: cfg.ClientOpts, group: cfg.Group, topics: cfg.Topics,
			maxRecords: cfg.MaxPollRecords,
		},
		newProducer: func() (txnProducer, error) {
			return newKgoProducer(cfg.Brokers, w.txnID, cfg.TransactionTimeout, cfg.ClientOpts)
		},
		replaceable: true,
		backoff:     cfg.RetryBackoff,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	w.m = m
	// InitProducerId fences a crashed predecessor with this transactional id and aborts
	// the transaction it left open, which makes its staged inputs available again.
	if err := m.startTransactions(ctx); err != nil {
		m.close(context.WithoutCancel(ctx))
		return fmt.Errorf("%w: worker %d: %w", ErrPermanent, w.index, err)
	}
	return nil
}

// loop polls, processes and commits until ctx ends (nil) or a permanent error.
func (w *worker) loop(ctx, grace context.Context) error {
	for ctx.Err() == nil {
		recs, err := w.poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isPermanent(err) {
				return fmt.Errorf("%w: worker %d: %w", ErrPermanent, w.index, err)
			}
			// The group coordinator or a leader is in trouble; the open transaction
			// stays open (its deadline still applies) and polling resumes.
			_ = sleep(ctx, w.cfg.RetryBackoff)
			continue
		}
		// Inputs already polled are processed and committed even when ctx ended
		// meanwhile: that is the graceful part of a shutdown.
		if len(recs) > 0 {
			if err := w.process(grace, recs); err != nil {
				if err := w.fail(grace, err); err != nil {
					return err
				}
				continue
			}
		}
		if w.due() {
			if err := w.commit(grace); err != nil {
				if err := w.fail(grace, err); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// poll waits for inputs, but while a transaction is open only until its commit deadline
// (then it returns no records and no error).
func (w *worker) poll(ctx context.Context) ([]*kgo.Record, error) {
	if !w.m.inTxn {
		return w.m.poll(ctx)
	}
	pctx, cancel := context.WithDeadline(ctx, w.began.Add(w.cfg.CommitInterval))
	defer cancel()
	recs, err := w.m.poll(pctx)
	if err != nil && pctx.Err() != nil && ctx.Err() == nil {
		return nil, nil // commit time; records of fetches still in flight come with the next poll
	}
	return recs, err
}

// process runs the ProcessFunc on each input, writes its outputs and acknowledges it.
func (w *worker) process(ctx context.Context, recs []*kgo.Record) error {
	if !w.m.inTxn {
		w.began = time.Now()
		if err := w.m.begin(ctx); err != nil {
			return stepErr(ErrCommit, err)
		}
	}
	for _, in := range recs {
		res, err := w.cfg.Process(ctx, in)
		if err != nil {
			return stepErr(ErrProcess, err)
		}
		for _, out := range res.Outputs {
			w.m.produce(ctx, out)
		}
		if err := w.m.acknowledge(in, res.Reject); err != nil {
			return stepErr(ErrStage, err)
		}
	}
	if err := w.m.collect(); err != nil {
		return stepErr(ErrStage, err)
	}
	return nil
}

// due reports whether the open transaction has reached CommitRecords or CommitInterval.
func (w *worker) due() bool {
	return w.m.inTxn && (w.m.inputs >= w.cfg.CommitRecords || time.Since(w.began) >= w.cfg.CommitInterval)
}

func (w *worker) commit(ctx context.Context) error {
	inputs, txn := w.m.inputs, w.m.txn
	if err := w.m.commit(ctx); err != nil {
		return err
	}
	if w.cfg.OnCommit != nil {
		w.cfg.OnCommit(Commit{
			Worker: w.index, TransactionalID: w.txnID, Inputs: inputs, Rejected: txn.rejected,
			Outputs: txn.outputs, Took: time.Since(w.began),
		})
	}
	return nil
}

// fail aborts the open transaction, giving its inputs back, and reports cause. It returns
// an error only when the worker cannot go on.
func (w *worker) fail(ctx context.Context, cause error) error {
	inputs := w.m.inputs
	abortErr := w.m.abort(ctx)
	if w.cfg.OnAbort != nil {
		w.cfg.OnAbort(&AbortError{Worker: w.index, TransactionalID: w.txnID, Inputs: inputs, Err: cause})
	}
	for _, err := range []error{cause, abortErr} {
		if err != nil && isPermanent(err) {
			return fmt.Errorf("%w: worker %d: %w", ErrPermanent, w.index, err)
		}
	}
	if !errors.Is(cause, ErrProcess) || abortErr != nil {
		// Broker-side trouble: do not spin on it.
		_ = sleep(ctx, w.cfg.RetryBackoff)
	}
	return nil
}
