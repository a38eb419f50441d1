// Command share-eos runs the exactly-once share-group pipeline of package sharepipeline:
//
//	go run ./examples/sharepipeline/cmd/share-eos -in orders -out orders-upper -group workers -txn-id worker-1
//	go run ./examples/sharepipeline/cmd/share-eos -in orders -group auditors -txn-id auditor-1   # consume-only
//
// The share group needs share.auto.offset.reset=earliest to read records produced before
// it started, and share.isolation.level=read_committed when its input is written by
// transactions (another such pipeline's output), so that it never processes aborted
// records. Both are group configs (a share group's kgo.FetchIsolationLevel is the second):
// kafka-configs.sh --entity-type groups, or any admin client, sets them on the GROUP
// resource; exactq share consume --from-earliest sets the first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/examples/sharepipeline"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	group := flag.String("group", "share-eos", "share group")
	in := flag.String("in", "", "input topic (required)")
	out := flag.String("out", "", "output topic; empty for a consume-only pipeline")
	txnID := flag.String("txn-id", "share-eos-1", "transactional id (one per running instance)")
	flag.Parse()
	if *in == "" {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	n := 0
	err := sharepipeline.Run(ctx, sharepipeline.Config{
		Brokers: strings.Split(*brokers, ","), Group: *group, Input: *in, Output: *out, TransactionalID: *txnID,
		OnCommit: func(inputs []*kgo.Record) {
			n += len(inputs)
			fmt.Fprintf(os.Stderr, "committed %d records (%d in all)\n", len(inputs), n)
		},
		OnAbort: func(inputs []*kgo.Record, cause error) {
			fmt.Fprintf(os.Stderr, "aborted %d records, delivered again: %v\n", len(inputs), cause)
		},
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "share-eos:", err)
		os.Exit(1)
	}
}
