package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const txnUsage = `Usage:
  exactq txn list [--state STATE ...]
  exactq txn describe ID...

Flags (every subcommand):
  -b, --brokers host:port[,...]   bootstrap brokers (default 127.0.0.1:9092)
`

// txnCommands are the subcommands of "exactq txn".
var txnCommands = []subcommand{
	{"list", quiet(txnList)}, {"describe", quiet(txnDescribe)},
}

// runTxn runs "exactq txn SUBCOMMAND ...".
func runTxn(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	return dispatch(ctx, "txn", txnUsage, txnCommands, args, stdout, stderr)
}

// txnStates are the transaction states of Kafka's coordinator (TransactionState.name).
// ListTransactions answers a filter naming any other with UnknownStateFilters, which kadm
// drops, so the CLI checks them itself.
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Dead"}

func txnList(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("txn list", `Usage: exactq txn list [flags]

Prints every transactional id the brokers know, sorted, with its coordinator, producer id
and state.

      --state STATE         only ids in STATE: Empty, Ongoing, PrepareCommit,
                            PrepareAbort, CompleteCommit, CompleteAbort or
                            PrepareEpochFence (repeatable or comma-separated)
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	var states listFlag
	f.Var(&states, "state", "")
	_, adm, err := f.parseAdmin(args, 0, 0)
	if err != nil {
		return err
	}
	defer adm.Close()
	filter := splitList(states)
	for _, st := range filter {
		if !slices.Contains(txnStates, st) {
			return usagef("--state %q: want one of %s", st, strings.Join(txnStates, ", "))
		}
	}
	txns, err := adm.ListTransactions(ctx, nil, filter)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tCOORDINATOR\tPRODUCER-ID\tSTATE")
	for _, t := range txns.Sorted() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", t.TxnID, t.Coordinator, t.ProducerID, t.State)
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func txnDescribe(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("txn describe", `Usage: exactq txn describe ID... [flags]

Describes transactional ids as kafka-transactions.sh describe does: coordinator, state,
producer id and epoch, transaction timeout, when the open transaction started (UTC) and
how long it has run, and the partitions in it. TWO-PHASE is "yes" for a KIP-939
two-phase-commit participant (timeout 2147483647 ms: the broker never aborts its
transaction on timeout).

  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	ids, adm, err := f.parseAdmin(args, 1, -1)
	if err != nil {
		return err
	}
	defer adm.Close()
	descs, err := adm.DescribeTransactions(ctx, ids...)
	now := time.Now()
	tw := newTable(stdout)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tCOORDINATOR\tSTATE\tPRODUCER-ID\tEPOCH\tTIMEOUT-MS\tTWO-PHASE\tSTARTED\tDURATION-MS\tPARTITIONS")
	err = eachAnswer(ids, descs, err, func(d kadm.DescribedTransaction) error { return d.Err }, func(_ string, d kadm.DescribedTransaction) error {
		started, duration := "-", "-"
		if d.StartTimestamp >= 0 {
			start := time.UnixMilli(d.StartTimestamp)
			started = start.UTC().Format("2006-01-02T15:04:05.000Z")
			duration = fmt.Sprint(max(now.Sub(start).Milliseconds(), 0))
		}
		twoPhase := "no"
		if d.TimeoutMillis == math.MaxInt32 {
			twoPhase = "yes" // KIP-939: the coordinator stores MaxInt32 for Enable2Pc
		}
		_, err := fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", d.TxnID, d.Coordinator, d.State,
			d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, twoPhase, started, duration, partitionList(d.Topics))
		return err
	})
	return errors.Join(err, tw.Flush())
}
