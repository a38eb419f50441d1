package eos

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Runner runs exactly-once consume-transform-produce from a share group: each worker
// polls inputs, hands them to the ProcessFunc, writes the outputs, and commits outputs and
// acknowledgements together in one transaction (KIP-1289) every CommitRecords inputs or
// CommitInterval. Any failure aborts the transaction and the inputs are delivered again.
type Runner struct {
	cfg     RunnerConfig
	started atomic.Bool
}

// NewRunner validates cfg (errors match ErrInvalidConfig) and fills in its defaults.
// Nothing connects before Run.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg}, nil
}

// Config returns the configuration in use, defaults filled in.
func (r *Runner) Config() RunnerConfig { return r.cfg }

// Run runs the workers until ctx ends, then shuts down gracefully: polling stops, the
// inputs already polled are processed, each worker commits its open transaction, leaves
// the group and closes; it returns nil. It returns early only with an error matching
// ErrPermanent (the other workers shut down the same way first). Failures that a retry
// can fix are reported to OnAbort and do not stop the runner. A Runner runs once.
func (r *Runner) Run(ctx context.Context) error {
	if r.started.Swap(true) {
		return ErrClosed
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, r.cfg.Workers)
	var wg sync.WaitGroup
	for i := range r.cfg.Workers {
		wg.Go(func() {
			w := &worker{index: i, cfg: &r.cfg, txnID: r.cfg.transactionalID(i)}
			if errs[i] = w.run(ctx); errs[i] != nil {
				stop() // one worker cannot go on: the others finish cleanly
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
