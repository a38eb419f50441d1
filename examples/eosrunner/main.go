// Command eosrunner is a consume-transform-produce service built on eos.Runner: it reads
// lines from a share group, writes them upper-cased to an output topic, and rejects empty
// or non-UTF-8 lines as poison. Outputs and share acknowledgements commit together, so
// every input's output is in the output topic exactly once (for read_committed readers),
// whatever fails and however often the service is restarted.
//
//	go run ./examples/eosrunner -brokers 127.0.0.1:9092 -in lines -out upper -group uppercasers -from-earliest
//
// Run several copies with different -txn-prefix values to share the work; Ctrl-C commits
// what was processed and leaves the group.
package main

import (
	"bytes"
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
	"unicode/utf8"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/examples/internal/groupconfig"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "eosrunner:", err)
		os.Exit(1)
	}
}

// run parses args and runs the service until ctx ends.
func run(ctx context.Context, args []string, log io.Writer) error {
	fs := flag.NewFlagSet("eosrunner", flag.ContinueOnError)
	fs.SetOutput(log)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	group := fs.String("group", "uppercasers", "share group")
	in := fs.String("in", "", "input topics, comma separated (required)")
	out := fs.String("out", "", "output topic (required)")
	prefix := fs.String("txn-prefix", "eosrunner", "transactional id prefix: stable across restarts, unique per running process")
	workers := fs.Int("workers", 2, "share consumers (each with its own transactional producer)")
	commitRecords := fs.Int("commit-records", 500, "commit after this many inputs...")
	commitInterval := fs.Duration("commit-interval", 100*time.Millisecond, "...or after this long, whichever comes first")
	fromEarliest := fs.Bool("from-earliest", false, "first set share.auto.offset.reset=earliest on the group (read records produced before it existed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		fs.Usage()
		return errors.New("-in and -out are required")
	}
	bs := strings.Split(*brokers, ",")
	if *fromEarliest {
		if err := groupconfig.ReadFromEarliest(ctx, bs, nil, *group); err != nil {
			return err
		}
	}
	r, err := eos.NewRunner(eos.RunnerConfig{
		Brokers: bs, Group: *group, Topics: strings.Split(*in, ","), TransactionalIDPrefix: *prefix,
		Workers: *workers, CommitRecords: *commitRecords, CommitInterval: *commitInterval,
		Process: upperCase(*out),
		OnCommit: func(c eos.Commit) {
			fmt.Fprintf(log, "worker %d committed %d inputs (%d rejected) and %d outputs in %v\n", c.Worker, c.Inputs, c.Rejected, c.Outputs, c.Took.Round(time.Millisecond))
		},
		OnAbort: func(e *eos.AbortError) { fmt.Fprintln(log, e) },
	})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// upperCase is the service's processing: one upper-cased output per line, keyed like
// its input; an empty or non-UTF-8 line is poison and is rejected (archived, never
// delivered again, no output).
func upperCase(out string) eos.ProcessFunc {
	return func(_ context.Context, in *kgo.Record) (eos.Result, error) {
		if len(in.Value) == 0 || !utf8.Valid(in.Value) {
			return eos.Result{Reject: true}, nil
		}
		return eos.Result{Outputs: []*kgo.Record{{Topic: out, Key: in.Key, Value: bytes.ToUpper(in.Value)}}}, nil
	}
}
