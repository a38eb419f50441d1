package kgoext_test

import (
	"fmt"
	"testing"

	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestExactlyOncePipeline runs the package doc's loop as a kgo program would: one
// transactional client produces and stages, the share consumer fetches over that same
// client, every third round aborts (a failed transform), and every fifth is consume-only.
// At the end every input has exactly one committed output and the group has nothing left.
func TestExactlyOncePipeline(t *testing.T) {
	const n = 40
	b, cl := shareSetup(t, "in", "g-eos", 2, n)
	txn := newTxnClient(t, b.Addr, "tx-eos")
	c, err := kgoext.NewShareConsumer(txn, "g-eos", kgoext.ShareTopics("in"), kgoext.ExplicitAcks(), kgoext.ShareMaxRecords(5))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	defer c.Close(ctx)
	done := map[string]bool{}    // inputs whose transaction committed
	skipped := map[string]bool{} // inputs committed by a consume-only round (no output)
	for round := 0; len(done) < n; round++ {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d inputs done: %v", len(done), n, ctx.Err())
		}
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		consumeOnly := round%5 == 4
		for _, r := range recs {
			if !consumeOnly {
				txn.Produce(ctx, &kgo.Record{Topic: "out", Value: fmt.Appendf(nil, "out-%s", r.Value)}, nil)
			}
			if err := c.Acknowledge(r, kgoext.AckAccept); err != nil {
				t.Fatal(err)
			}
		}
		md := c.GroupMetadata()
		acks, err := c.AcknowledgementsForTransaction()
		if err == nil {
			err = kgoext.SendShareAcksToTransaction(ctx, txn, acks, md)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		end := kgo.TryCommit
		if round%3 == 2 {
			end = kgo.TryAbort // the inputs come back
		}
		if err := kgoext.EndTransaction(ctx, txn, end); err != nil {
			t.Fatalf("round %d: end: %v", round, err)
		}
		if end == kgo.TryCommit {
			for _, r := range recs {
				v := string(r.Value)
				if done[v] {
					t.Fatalf("%s delivered again after its transaction committed", v)
				}
				done[v], skipped[v] = true, consumeOnly
			}
		}
	}
	got := committedOutputs(t, b.Addr, txn)
	for v := range done {
		want := 1
		if skipped[v] {
			want = 0
		}
		if got["out-"+v] != want {
			t.Fatalf("out-%s committed %d times, want %d (all %v)", v, got["out-"+v], want, got)
		}
	}
	if again := sentinelOnly(t, b.Addr, cl, "g-eos", "in"); len(again) > 0 {
		t.Fatalf("inputs left in the group: %v", valueCounts(again))
	}
}
