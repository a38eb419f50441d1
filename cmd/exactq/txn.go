package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/exactq/exactq/client"
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
	txns, err := adm.ListTransactions(ctx, client.TransactionFilter{States: splitList(states)})
	tw := newTable(stdout)
	fmt.Fprintln(tw, "TRANSACTIONAL-ID\tCOORDINATOR\tPRODUCER-ID\tSTATE")
	for _, t := range txns {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", t.TransactionalID, t.Coordinator, t.ProducerID, t.State)
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
	for _, d := range descs {
		if d.Err != nil {
			continue // in err
		}
		started, duration := "-", "-"
		if !d.StartTime.IsZero() {
			started = d.StartTime.UTC().Format("2006-01-02T15:04:05.000Z")
			duration = fmt.Sprint(max(now.Sub(d.StartTime).Milliseconds(), 0))
		}
		twoPhase := "no"
		if d.Timeout.Milliseconds() == math.MaxInt32 {
			twoPhase = "yes" // KIP-939: the coordinator stores MaxInt32 for Enable2Pc
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", d.TransactionalID, d.Coordinator, d.State,
			d.ProducerID, d.ProducerEpoch, d.Timeout.Milliseconds(), twoPhase, started, duration, partitionList(d.Partitions))
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}
