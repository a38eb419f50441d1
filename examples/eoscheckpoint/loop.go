package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/exactq/exactq/eos"
)

// checkpointLoop is the "framework": it feeds inputs to the operator and takes a
// checkpoint every interval, driving the Checkpointer's lifecycle.
type checkpointLoop struct {
	o   options
	cp  *eos.Checkpointer
	op  *counter
	id  int64 // last completed checkpoint
	log io.Writer
	// inputs counts the inputs since the last checkpoint; busy the checkpoints of this run
	// that had some (what -crash-after counts).
	inputs, busy int64
}

func (l *checkpointLoop) run(ctx context.Context) error {
	for {
		next := time.Now().Add(l.o.checkpointInterval)
		if err := l.process(ctx, next); err != nil {
			return err
		}
		// On the way out (ctx ended) the last checkpoint still runs, under a context
		// that does not end with ctx.
		if err := l.checkpoint(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// process polls and processes inputs until the deadline or ctx ends.
func (l *checkpointLoop) process(ctx context.Context, deadline time.Time) error {
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for pctx.Err() == nil {
		recs, err := l.cp.Poll(pctx)
		if err != nil && pctx.Err() == nil {
			return err
		}
		for _, in := range recs {
			if err := l.cp.Produce(ctx, l.op.process(in)); err != nil {
				return err
			}
			if err := l.cp.Acknowledge(in, false); err != nil {
				return err
			}
			l.inputs++
		}
	}
	return nil
}

// checkpoint runs one checkpoint: prepare, snapshot, store (the checkpoint is complete
// once stored), then commit.
func (l *checkpointLoop) checkpoint(ctx context.Context) error {
	if l.inputs > 0 {
		l.busy++
	}
	l.inputs = 0
	if err := l.cp.PrepareCommit(ctx); err != nil {
		// The counts already include inputs of the failed transaction: a real framework
		// restarts from the last checkpoint here, and so does this program (it exits).
		return fmt.Errorf("prepare checkpoint %d: %w", l.id+1, err)
	}
	snap, err := l.cp.SnapshotState()
	if err != nil {
		return err
	}
	if l.crash("prepared") {
		return errCrash
	}
	c := checkpoint{ID: l.id + 1, Counts: l.op.snapshot(), EOS: snap}
	if err := storeCheckpoint(l.o.statePath, c); err != nil {
		return fmt.Errorf("store checkpoint %d: %w", c.ID, err)
	}
	l.id = c.ID
	if l.crash("stored") {
		return errCrash
	}
	if err := l.cp.NotifyCheckpointComplete(ctx); err != nil {
		// The checkpoint is stored: a restart's Recover commits the transaction.
		return fmt.Errorf("commit checkpoint %d: %w", c.ID, err)
	}
	fmt.Fprintf(l.log, "checkpoint %d complete\n", c.ID)
	return nil
}

func (l *checkpointLoop) crash(point string) bool {
	return l.o.crashAfter > 0 && l.busy == l.o.crashAfter && l.o.crashPoint == point
}
