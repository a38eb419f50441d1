package eos_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/eos/eostest"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The runner's overhead: BenchmarkRunner and BenchmarkRawLoop process the same inputs
// with the same trivial function (copy the input to the output topic) and the same commit
// cadence (benchCommitRecords inputs or benchCommitInterval, one worker), the first through
// eos.Runner, the second with a hand-written loop on kgo and kgoext. ns/op is per input.
//
//	go test ./eos -run '^$' -bench 'Runner|RawLoop' -benchtime 20000x -count 5
const (
	benchCommitRecords  = 500
	benchCommitInterval = 100 * time.Millisecond
)

var benchRun atomic.Int64

// benchInputs starts a broker (once per benchmark) and writes n inputs to a new topic
// with a new group, so that every round of the benchmark starts from the same state.
func benchInputs(b *testing.B, tb **testbroker.Broker, n int) (addr, topic, group string) {
	if *tb == nil {
		*tb = eostest.Start(b)
	}
	addr = (*tb).Addr
	run := benchRun.Add(1)
	topic, group = fmt.Sprintf("bench-in-%d", run), fmt.Sprintf("bench-%d", run)
	eostest.CreateTopic(b, addr, topic, 1)
	eostest.CreateTopic(b, addr, topic+"-out", 1)
	eostest.ReadFromEarliest(b, addr, group)
	eostest.Produce(b, addr, topic, 1, eostest.Inputs(n))
	return addr, topic, group
}

func copyTo(out string) func(*kgo.Record) *kgo.Record {
	return func(in *kgo.Record) *kgo.Record {
		return &kgo.Record{Topic: out, Key: in.Key, Value: in.Value}
	}
}

func BenchmarkRunner(b *testing.B) {
	var tb *testbroker.Broker
	b.ReportAllocs()
	addr, topic, group := benchInputs(b, &tb, b.N)
	transform := copyTo(topic + "-out")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var committed atomic.Int64
	r, err := eos.NewRunner(eos.RunnerConfig{
		Brokers: []string{addr}, Group: group, Topics: []string{topic}, TransactionalIDPrefix: group,
		CommitRecords: benchCommitRecords, CommitInterval: benchCommitInterval,
		Process: func(_ context.Context, in *kgo.Record) (eos.Result, error) {
			return eos.Result{Outputs: []*kgo.Record{transform(in)}}, nil
		},
		OnCommit: func(c eos.Commit) {
			if committed.Add(int64(c.Inputs)) >= int64(b.N) {
				b.StopTimer() // the shutdown is not measured (nor is the raw loop's Close)
				stop()
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer() // from here on both benchmarks join the group and initialize transactions
	if err := r.Run(ctx); err != nil {
		b.Fatal(err)
	}
	if committed.Load() != int64(b.N) {
		b.Fatalf("committed %d inputs, want %d", committed.Load(), b.N)
	}
}

// BenchmarkRawLoop is the loop an application would write by hand with kgo and kgoext:
// the acknowledgements of each poll are taken out of the consumer (or the next poll would
// send them outside the transaction) and merged, then staged once per transaction.
func BenchmarkRawLoop(b *testing.B) {
	var tb *testbroker.Broker
	b.ReportAllocs()
	addr, topic, group := benchInputs(b, &tb, b.N)
	transform := copyTo(topic + "-out")
	ctx := context.Background()
	b.ResetTimer()
	transport, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer transport.Close()
	c, err := kgoext.NewShareConsumer(transport, group, kgoext.ShareTopics(topic), kgoext.ExplicitAcks(),
		kgoext.ShareMaxRecords(benchCommitRecords))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	p, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.TransactionalID(group)}, kgoext.TransactionalOpts()...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if _, _, err := p.ProducerID(ctx); err != nil { // InitProducerId, as the runner's workers do first
		b.Fatal(err)
	}
	committed, inTxn, inputs := 0, false, 0
	var began time.Time
	acks := kgoext.TxnAcks{}
	for committed < b.N {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if inTxn {
			pctx, cancel = context.WithDeadline(ctx, began.Add(benchCommitInterval))
		}
		recs, err := c.Poll(pctx)
		cancel()
		if err != nil && pctx.Err() == nil {
			b.Fatal(err)
		}
		if len(recs) > 0 {
			if !inTxn {
				if err := p.BeginTransaction(); err != nil {
					b.Fatal(err)
				}
				inTxn, began = true, time.Now()
			}
			for _, r := range recs {
				p.Produce(ctx, transform(r), nil)
				if err := c.Acknowledge(r, kgoext.AckAccept); err != nil {
					b.Fatal(err)
				}
			}
			polled, err := c.AcknowledgementsForTransaction()
			if err != nil {
				b.Fatal(err)
			}
			for tp, bs := range polled {
				acks[tp] = append(acks[tp], bs...)
			}
			inputs += len(recs)
		}
		if inTxn && (inputs >= benchCommitRecords || time.Since(began) >= benchCommitInterval) {
			for _, bs := range acks {
				slices.SortFunc(bs, func(x, y kgoext.ShareAckBatch) int { return int(x.FirstOffset - y.FirstOffset) })
			}
			if err := kgoext.SendShareAcksToTransaction(ctx, p, acks, c.GroupMetadata()); err != nil {
				b.Fatal(err)
			}
			if err := kgoext.EndTransaction(ctx, p, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
			committed += inputs
			inTxn, inputs, acks = false, 0, kgoext.TxnAcks{}
		}
	}
	b.StopTimer()
}
