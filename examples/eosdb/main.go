// Command eosdb writes the records of a share group into an embedded SQLite database
// exactly once: consume-only, no output topic. Each input becomes one row of table
// inputs, and every -checkpoint-interval (or -batch inputs) it takes a checkpoint:
//
//	PrepareCommit → SnapshotState → one SQL transaction {the rows, the snapshot} → NotifyCheckpointComplete
//
// eos.Checkpointer prepares a broker transaction that holds just the share
// acknowledgements of the inputs (KIP-1289, two-phase commit of KIP-939). The SQL
// transaction writes the inputs' rows and that transaction's snapshot together, so the
// database alone says which broker transaction belongs to the rows it holds. On start the
// program reads the snapshot back and calls Recover with it: the broker transaction is
// committed if its SQL transaction committed, and aborted otherwise (its inputs are
// delivered again, and written again). So every input is in the table exactly once and
// acknowledged exactly once, whenever the program or the broker crashes.
//
//	go run ./examples/eosdb -brokers 127.0.0.1:9092 -group loader -topic events -db events.db -from-earliest
//	sqlite3 events.db 'SELECT topic, part, offs, v FROM inputs ORDER BY offs'
//
// The broker needs transaction.two.phase.commit.enable=true. Keep -txn-id the same across
// restarts of one instance and different between instances that run at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/examples/internal/groupconfig"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := parse(os.Args[1:], os.Stderr)
	if err == nil {
		// -crash-at is a real crash: SIGKILL, nothing closed or rolled back.
		o.crash = func(point string, n int64, _ []row) error {
			if o.crashAt == fmt.Sprintf("%s:%d", point, n) {
				fmt.Fprintf(os.Stderr, "eosdb: crashing %s checkpoint %d\n", point, n)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return nil
		}
		err = run(ctx, o, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eosdb:", err)
		os.Exit(1)
	}
}

// Crash points (-crash-at POINT:N).
const (
	crashBeforeSQLCommit = "before-sql-commit" // rows and snapshot written, SQL transaction not committed
	crashAfterSQLCommit  = "after-sql-commit"  // SQL transaction committed, broker transaction not
)

type options struct {
	brokers            []string
	group, topic       string
	txnID, dbPath      string
	checkpointInterval time.Duration
	batch              int
	fromEarliest       bool
	crashAt            string
	// crash is called at each crash point of checkpoint n (with its rows); an error stops
	// the program there as if it crashed.
	crash func(point string, n int64, rows []row) error
}

func parse(args []string, log io.Writer) (options, error) {
	fs := flag.NewFlagSet("eosdb", flag.ContinueOnError)
	fs.SetOutput(log)
	var o options
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	fs.StringVar(&o.group, "group", "eosdb", "share group")
	fs.StringVar(&o.topic, "topic", "", "topic to read (required; several: comma separated)")
	fs.StringVar(&o.txnID, "txn-id", "eosdb-1", "transactional id: the same across restarts of this instance")
	fs.StringVar(&o.dbPath, "db", "eosdb.db", "SQLite database file")
	fs.DurationVar(&o.checkpointInterval, "checkpoint-interval", time.Second, "longest time between an input and its checkpoint")
	fs.IntVar(&o.batch, "batch", 500, "inputs per checkpoint at most")
	fs.BoolVar(&o.fromEarliest, "from-earliest", false, "first set share.auto.offset.reset=earliest on the group")
	fs.StringVar(&o.crashAt, "crash-at", "", "demo: SIGKILL itself at POINT:N, POINT "+crashBeforeSQLCommit+" (recovery aborts) or "+crashAfterSQLCommit+" (recovery commits), N the checkpoint number")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.brokers = strings.Split(*brokers, ",")
	switch {
	case o.topic == "":
		fs.Usage()
		return o, errors.New("-topic is required")
	case o.batch <= 0 || o.checkpointInterval <= 0:
		return o, errors.New("-batch and -checkpoint-interval must be positive")
	}
	if o.crashAt != "" {
		point, n, _ := strings.Cut(o.crashAt, ":")
		if _, err := strconv.ParseInt(n, 10, 64); err != nil || (point != crashBeforeSQLCommit && point != crashAfterSQLCommit) {
			return o, fmt.Errorf("-crash-at %q: want %s:N or %s:N", o.crashAt, crashBeforeSQLCommit, crashAfterSQLCommit)
		}
	}
	return o, nil
}

// run recovers from the database and loads inputs until ctx ends; the last checkpoint is
// taken on the way out.
func run(ctx context.Context, o options, log io.Writer) error {
	if o.crash == nil {
		o.crash = func(string, int64, []row) error { return nil }
	}
	if o.fromEarliest {
		if err := groupconfig.ReadFromEarliest(ctx, o.brokers, nil, o.group); err != nil {
			return err
		}
	}
	d, err := openDB(ctx, o.dbPath)
	if err != nil {
		return err
	}
	l, err := start(ctx, o, d, log)
	if err != nil {
		d.close()
		return err
	}
	err = l.run(ctx)
	if errors.Is(err, errCrash) {
		return err // abandoned: nothing closed, as in a crash
	}
	return errors.Join(err, l.cp.Close(context.WithoutCancel(ctx)), d.close())
}

// start makes the Checkpointer and settles what an earlier instance left: Recover with
// the snapshot the database holds.
func start(ctx context.Context, o options, d *db, log io.Writer) (*loader, error) {
	n, snap, err := d.lastCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	cp, err := eos.NewCheckpointer(eos.CheckpointerConfig{Brokers: o.brokers, Group: o.group,
		Topics: strings.Split(o.topic, ","), TransactionalID: o.txnID, MaxPollRecords: int32(o.batch)})
	if err != nil {
		return nil, err
	}
	rec, err := cp.Recover(ctx, snap)
	if err != nil {
		cp.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("recover: %w", err)
	}
	fmt.Fprintf(log, "eosdb: database at checkpoint %d; open broker transaction found: %v, committed: %v\n", n, rec.Found, rec.Committed)
	return &loader{o: o, cp: cp, db: d, last: n, log: log, recovery: rec}, nil
}
