package kgoext_test

import (
	"context"

	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exactly-once consume-transform-produce on a share group, as in the package doc (compiled,
// not run: it needs a broker).
func Example() {
	ctx := context.Background()
	brokers := []string{"localhost:9092"}
	transform := func(r *kgo.Record) ([]byte, bool) { return r.Value, len(r.Value) > 0 }

	txn, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.TransactionalID("orders-1"),
	}, kgoext.TransactionalOpts()...)...)
	if err != nil {
		panic(err)
	}
	defer txn.Close()
	transport, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		panic(err)
	}
	defer transport.Close()
	c, err := kgoext.NewShareConsumer(transport, "orders", kgoext.ShareTopics("in"), kgoext.ExplicitAcks())
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	for {
		recs, err := c.Poll(ctx)
		if err != nil {
			return
		}
		if err := txn.BeginTransaction(); err != nil {
			return
		}
		for _, r := range recs {
			if out, ok := transform(r); ok {
				txn.Produce(ctx, &kgo.Record{Topic: "out", Value: out}, nil)
				_ = c.Acknowledge(r, kgoext.AckAccept)
			} else {
				_ = c.Acknowledge(r, kgoext.AckReject) // archived on commit, no output
			}
		}
		md := c.GroupMetadata()
		acks, err := c.AcknowledgementsForTransaction()
		if err == nil {
			err = kgoext.SendShareAcksToTransaction(ctx, txn, acks, md)
		}
		end := kgo.TryCommit
		if err != nil {
			end = kgo.TryAbort // the inputs come back
		}
		if err := kgoext.EndTransaction(ctx, txn, end); err != nil {
			_ = kgoext.EndTransaction(ctx, txn, kgo.TryAbort)
		}
	}
}
