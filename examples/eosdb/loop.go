package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/kgoext"
)

// errCrash is returned when a crash point stops the program (tests): the loader is
// abandoned, nothing closed.
var errCrash = errors.New("simulated crash")

// loader polls inputs and takes a checkpoint every batch inputs or checkpointInterval.
type loader struct {
	o        options
	cp       *eos.Checkpointer
	db       *db
	last     int64 // the last committed checkpoint
	log      io.Writer
	recovery eos.Recovery
}

func (l *loader) run(ctx context.Context) error {
	for {
		rows, err := l.collect(ctx)
		if err != nil {
			return err
		}
		// On the way out (ctx ended) the last checkpoint still runs, under a context that
		// does not end with ctx.
		if err := l.checkpoint(context.WithoutCancel(ctx), rows); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// collect polls until it has batch inputs, checkpointInterval passed since the first one,
// or ctx ends. Each input is acknowledged (ACCEPT) and kept as a row.
func (l *loader) collect(ctx context.Context) ([]row, error) {
	var rows []row
	var first time.Time
	for len(rows) < l.o.batch && ctx.Err() == nil {
		wait := l.o.checkpointInterval
		if len(rows) > 0 {
			wait -= time.Since(first)
		}
		if wait <= 0 {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		recs, err := l.cp.Poll(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		for _, in := range recs {
			if len(rows) == 0 {
				first = time.Now()
			}
			if err := l.cp.Acknowledge(in, false); err != nil {
				return nil, err
			}
			rows = append(rows, row{topic: in.Topic, partition: in.Partition, offset: in.Offset,
				key: in.Key, value: in.Value, deliveryCount: kgoext.DeliveryCount(in)})
		}
		if err != nil && !timedOut {
			if errors.Is(err, eos.ErrFenced) || errors.Is(err, eos.ErrClosed) {
				return nil, err
			}
			fmt.Fprintln(l.log, "eosdb: poll:", err) // transient (a broker restart): poll again
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				break
			}
		}
	}
	return rows, nil
}

// checkpoint commits rows: prepare the broker transaction (it holds the inputs'
// acknowledgements), write the rows and its snapshot in one SQL transaction, commit the
// broker transaction. A checkpoint without inputs does nothing.
func (l *loader) checkpoint(ctx context.Context, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	n := l.last + 1
	if err := l.cp.PrepareCommit(ctx); err != nil {
		// Not prepared (a broker restart took the inputs back, ...): give everything
		// back; the inputs are delivered again and written by a later checkpoint.
		fmt.Fprintf(l.log, "eosdb: checkpoint %d not prepared, aborting: %v\n", n, err)
		return l.cp.Abort(ctx)
	}
	snap, err := l.cp.SnapshotState()
	if err != nil {
		return err
	}
	tx, err := l.db.begin(ctx, n, rows, snap)
	if err != nil {
		// Nothing in the database: the prepared transaction must not commit.
		return errors.Join(fmt.Errorf("checkpoint %d: %w", n, err), l.cp.Abort(ctx))
	}
	if err := l.o.crash(crashBeforeSQLCommit, n, rows); err != nil {
		// In a real crash the uncommitted SQL transaction is rolled back when the database
		// is opened again; here the process goes on, so roll it back and let go of the file.
		return errors.Join(err, tx.rollback(), l.db.close())
	}
	if err := tx.commit(); err != nil {
		// The outcome of a failed COMMIT is not known here: stop, and let the next start
		// settle the broker transaction from what the database holds.
		return fmt.Errorf("commit checkpoint %d to the database: %w", n, err)
	}
	l.last = n
	if err := l.o.crash(crashAfterSQLCommit, n, rows); err != nil {
		return errors.Join(err, l.db.close())
	}
	for {
		err := l.cp.NotifyCheckpointComplete(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, eos.ErrFenced) || errors.Is(err, eos.ErrClosed) {
			// The rows are committed: a restart's Recover commits the broker transaction.
			return fmt.Errorf("checkpoint %d: %w", n, err)
		}
		fmt.Fprintf(l.log, "eosdb: checkpoint %d committed to the database, broker commit failed, again: %v\n", n, err)
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
