package twopc_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/kgoext/twopc"
)

// committedOffset is group's committed offset of in[0], -1 when none.
func committedOffset(t *testing.T, addr, group string) int64 {
	t.Helper()
	resp, err := kadm.NewClient(newClient(t, addr)).FetchOffsets(testCtx(t), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := resp.Lookup("in", 0)
	if !ok {
		return -1
	}
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	return o.At
}

// TestOffsetsInPreparedTransaction: a kgo consumer group member's offsets sent to a
// prepared transaction (KIP-447) are not committed while it is prepared, also across a
// broker restart; the recovering producer's commit makes them the group's committed
// offsets, its abort leaves the group where it was. Under transactions v2 and v1
// (AddOffsetsToTxn first).
func TestOffsetsInPreparedTransaction(t *testing.T) {
	for _, c := range []struct{ v1, commit bool }{{false, true}, {false, false}, {true, true}, {true, false}} {
		t.Run(fmt.Sprintf("v1=%v,commit=%v", c.v1, c.commit), func(t *testing.T) {
			const group, id, n = "cg", "tx-offsets", 4
			b := startBroker(t, true)
			ctx := testCtx(t)
			createTopics(t, b.Addr, "in", "out")
			for i := range n {
				if err := newClient(t, b.Addr).ProduceSync(ctx, &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cons := newClient(t, b.Addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics("in"), kgo.DisableAutoCommit(),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			for read := 0; read < n; {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("consumed %d of %d", read, n)
				}
				read += fs.NumRecords()
			}
			member, generation := cons.GroupMetadata()
			md := twopc.GroupMetadata{Group: group, MemberID: member, Generation: generation}

			p := newProducer(t, b.Addr, id)
			if c.v1 {
				twopc.ForceTransactionsV1(p)
			}
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			produceOuts(t, p, "out", 2)
			if err := p.SendOffsetsToTransaction(ctx, cons.UncommittedOffsets(), md); err != nil {
				t.Fatal(err)
			}
			st, err := p.PrepareTransaction(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.SendOffsetsToTransaction(ctx, cons.UncommittedOffsets(), md); !errors.Is(err, twopc.ErrTransactionPrepared) {
				t.Fatalf("offsets while prepared: %v", err)
			}
			b.Restart()
			if got := committedOffset(t, b.Addr, group); got >= 0 {
				t.Fatalf("offset %d committed while the transaction is prepared", got)
			}
			want := st
			if !c.commit {
				want = twopc.PreparedTxnState{}
			}
			recoverAndComplete(t, b.Addr, id, st, want)
			wantOffset := int64(-1)
			if c.commit {
				wantOffset = n
			}
			// The markers reach the offsets partition after EndTxn returns.
			waitFor(t, fmt.Sprintf("committed offset %d", wantOffset), func() bool {
				return committedOffset(t, b.Addr, group) == wantOffset
			})
		})
	}
}

// TestStaleGenerationAbortable: offsets of a member generation the group moved past are
// refused (ILLEGAL_GENERATION): the transaction is abortable, the producer goes on.
func TestStaleGenerationAbortable(t *testing.T) {
	const group = "cg-stale"
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopics(t, b.Addr, "in", "out")
	if err := newClient(t, b.Addr).ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, b.Addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics("in"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for read := 0; read < 1; read += cons.PollFetches(ctx).NumRecords() {
		if ctx.Err() != nil {
			t.Fatal("consumed nothing")
		}
	}
	member, generation := cons.GroupMetadata()
	p := newProducer(t, b.Addr, "tx-stale")
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err := p.SendOffsetsToTransaction(ctx, cons.UncommittedOffsets(), twopc.GroupMetadata{Group: group, MemberID: member, Generation: generation + 3})
	if !errors.Is(err, twopc.ErrTransactionAbortable) || !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("offsets of a stale generation: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	commitOne(t, p, "next")
	if got := committedOffset(t, b.Addr, group); got >= 0 {
		t.Fatalf("refused offsets committed: %d", got)
	}
}
