// Command eoscheckpoint is a framework-style program that owns its checkpoints and drives
// eos.Checkpointer's lifecycle from its own checkpoint loop, the way a stream processor
// such as Flink drives a two-phase-commit sink.
//
// The operator counts lines per key and writes "key=count" for every input. Its state
// (the counts) and the Checkpointer's snapshot are stored together in one checkpoint file
// (written with fsync and rename). Every -checkpoint-interval:
//
//	PrepareCommit → SnapshotState → store {counts, snapshot} → NotifyCheckpointComplete
//
// On start it loads the last stored checkpoint and calls Recover with its snapshot: a
// transaction whose checkpoint was stored is committed, a later one is aborted, and its
// inputs are delivered again and counted again from the stored counts. So for every key
// the committed outputs are key=1, key=2, ... key=n, each exactly once, however the
// program is stopped or killed.
//
//	go run ./examples/eoscheckpoint -brokers 127.0.0.1:9092 -in lines -out counts -state ./counter.ckpt -from-earliest
//
// The broker needs transaction.two.phase.commit.enable=true.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/examples/internal/groupconfig"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "eoscheckpoint:", err)
		os.Exit(1)
	}
}

// errCrash is returned by a simulated crash (-crash-after): the program stops at once
// without completing or aborting the prepared transaction, as if killed. It does close its
// connections (a closed Checkpointer leaves a prepared transaction prepared), so that it
// leaves the group at once instead of after the session timeout.
var errCrash = errors.New("simulated crash")

type options struct {
	brokers            []string
	group, in, out     string
	txnID, statePath   string
	checkpointInterval time.Duration
	fromEarliest       bool
	// crashAfter > 0 stops the program like a kill at crashPoint of checkpoint
	// crashAfter (counted from this start).
	crashAfter int64
	crashPoint string
}

func parse(args []string, log io.Writer) (options, error) {
	fs := flag.NewFlagSet("eoscheckpoint", flag.ContinueOnError)
	fs.SetOutput(log)
	var o options
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	fs.StringVar(&o.group, "group", "counters", "share group")
	fs.StringVar(&o.in, "in", "", "input topic (required)")
	fs.StringVar(&o.out, "out", "", "output topic (required)")
	fs.StringVar(&o.txnID, "txn-id", "eoscheckpoint-1", "transactional id: the same across restarts of this instance")
	fs.StringVar(&o.statePath, "state", "eoscheckpoint.ckpt", "checkpoint file")
	fs.DurationVar(&o.checkpointInterval, "checkpoint-interval", time.Second, "time between checkpoints")
	fs.BoolVar(&o.fromEarliest, "from-earliest", false, "first set share.auto.offset.reset=earliest on the group")
	fs.Int64Var(&o.crashAfter, "crash-after", 0, "demo: stop like a kill at the N-th checkpoint of this run that has inputs (see -crash-point)")
	fs.StringVar(&o.crashPoint, "crash-point", "stored", "demo: where -crash-after stops: prepared (before the checkpoint is stored: recovery aborts) or stored (before NotifyCheckpointComplete: recovery commits)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.brokers = strings.Split(*brokers, ",")
	switch {
	case o.in == "" || o.out == "":
		fs.Usage()
		return o, errors.New("-in and -out are required")
	case o.crashPoint != "prepared" && o.crashPoint != "stored":
		return o, fmt.Errorf("-crash-point %q: want prepared or stored", o.crashPoint)
	}
	return o, nil
}

// run recovers from the checkpoint file and processes until ctx ends; the last checkpoint
// is taken on the way out.
func run(ctx context.Context, args []string, log io.Writer) error {
	o, err := parse(args, log)
	if err != nil {
		return err
	}
	if o.fromEarliest {
		if err := groupconfig.ReadFromEarliest(ctx, o.brokers, nil, o.group); err != nil {
			return err
		}
	}
	last, err := loadCheckpoint(o.statePath)
	if err != nil {
		return err
	}
	cp, err := eos.NewCheckpointer(eos.CheckpointerConfig{Brokers: o.brokers, Group: o.group, Topics: []string{o.in}, TransactionalID: o.txnID})
	if err != nil {
		return err
	}
	rec, err := cp.Recover(ctx, last.EOS)
	if err != nil {
		cp.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("recover: %w", err)
	}
	fmt.Fprintf(log, "recovered checkpoint %d (open transaction found: %v, committed: %v)\n", last.ID, rec.Found, rec.Committed)
	op := &counter{out: o.out, counts: last.Counts}
	loop := &checkpointLoop{o: o, cp: cp, op: op, id: last.ID, log: log}
	err = loop.run(ctx)
	return errors.Join(err, cp.Close(context.WithoutCancel(ctx)))
}

// counter is the operator: a count per key, and one output per input.
type counter struct {
	out    string
	counts map[string]int64
}

func (c *counter) process(in *kgo.Record) *kgo.Record {
	key := string(in.Key)
	c.counts[key]++
	return &kgo.Record{Topic: c.out, Key: in.Key, Value: fmt.Appendf(nil, "%s=%d", key, c.counts[key])}
}

// snapshot copies the counts into a checkpoint.
func (c *counter) snapshot() map[string]int64 {
	out := make(map[string]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}
