package twopc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/exactq/exactq/kgoext/twopc"
)

func newShareConsumer(t *testing.T, addr, group string) *kgoext.ShareConsumer {
	t.Helper()
	c, err := kgoext.NewShareConsumer(newClient(t, addr), group, kgoext.ShareTopics("in"), kgoext.ExplicitAcks(),
		kgoext.ShareMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeConsumer(t, c) })
	return c
}

func closeConsumer(t *testing.T, c *kgoext.ShareConsumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// pollAccepting polls c, accepting every record, until stop holds of what it got.
func pollAccepting(t *testing.T, c *kgoext.ShareConsumer, stop func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	var seen []*kgo.Record
	for !stop(seen) {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", len(seen), err)
		}
		for _, r := range recs {
			if err := c.Acknowledge(r, kgoext.AckAccept); err != nil {
				t.Fatal(err)
			}
		}
		seen = append(seen, recs...)
	}
	return seen
}

// untilSentinel produces value to in and has a new member of group poll until it arrives;
// it returns what the member got before it: what the group still had to deliver.
func untilSentinel(t *testing.T, addr, group, value string) []*kgo.Record {
	t.Helper()
	if err := newClient(t, addr).ProduceSync(testCtx(t), &kgo.Record{Topic: "in", Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := newShareConsumer(t, addr, group)
	defer closeConsumer(t, c)
	var other []*kgo.Record
	pollAccepting(t, c, func(seen []*kgo.Record) bool {
		other = other[:0]
		found := false
		for _, r := range seen {
			if string(r.Value) == value {
				found = true
			} else {
				other = append(other, r)
			}
		}
		return found
	})
	return other
}

// window is share partition in[0]'s window of group as the broker holds it.
func window(t *testing.T, b *testbroker.Broker, group string) sharepartition.Description {
	t.Helper()
	for _, s := range b.Broker.DescribeShareGroupState(group) {
		if s.Topic == "in" && s.Partition == 0 {
			return s.State.Window
		}
	}
	t.Fatalf("share partition in[0] of %s not loaded", group)
	return sharepartition.Description{}
}

func setEarliest(t *testing.T, addr, group string) {
	t.Helper()
	if err := testbroker.SetGroupConfigs(testCtx(t), newClient(t, addr), group, "share.auto.offset.reset", "earliest"); err != nil {
		t.Fatalf("share.auto.offset.reset on %s: %v", group, err)
	}
}

// shareSetup is the start of every test here: a broker with topics in and out, n inputs
// "v0".."v<n-1>" that a member of group polled and accepted, their acknowledgements taken
// for a transaction, and a producer (v1: forced to transactions v1) inside a transaction.
type shareSetup struct {
	b    *testbroker.Broker
	cons *kgoext.ShareConsumer
	p    *twopc.Producer
	recs []*kgo.Record
	acks kgoext.TxnAcks
	md   kgoext.ShareGroupMetadata
}

func newShareSetup(t *testing.T, group, id string, n int, v1 bool) shareSetup {
	t.Helper()
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopics(t, b.Addr, "in", "out")
	setEarliest(t, b.Addr, group)
	for i := range n {
		if err := newClient(t, b.Addr).ProduceSync(ctx, &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s := shareSetup{b: b, cons: newShareConsumer(t, b.Addr, group), p: newProducer(t, b.Addr, id)}
	if v1 {
		twopc.ForceTransactionsV1(s.p)
	}
	if err := s.p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	s.recs = pollAccepting(t, s.cons, func(seen []*kgo.Record) bool { return len(seen) >= n })
	var err error
	if s.acks, err = s.cons.AcknowledgementsForTransaction(); err != nil {
		t.Fatal(err)
	}
	s.md = s.cons.GroupMetadata()
	if err := s.p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShareAcksPrepared: share acknowledgements staged in a prepared transaction, with
// outputs or alone (consume-only), stay TX_PENDING across a broker restart and are
// delivered to nobody; a recovering producer completes the transaction: a commit
// acknowledges the inputs (never delivered again) and makes the outputs readable, an
// abort delivers the inputs again (delivery count one more) and hides the outputs. Also
// for a transaction prepared under transactions v1 and completed by a v2 producer.
func TestShareAcksPrepared(t *testing.T) {
	for _, c := range []struct {
		name                string
		outputs, commit, v1 bool // v1: prepared under transactions v1
	}{{"commit", true, true, false}, {"abort", true, false, false}, {"consume-only commit", false, true, false},
		{"consume-only abort", false, false, false}, {"v1 commit", true, true, true}, {"v1 consume-only abort", false, false, true}} {
		t.Run(c.name, func(t *testing.T) {
			const group, id, n = "sg", "tx-share", 5
			s := newShareSetup(t, group, id, n, c.v1)
			b, cons, p, acks, md := s.b, s.cons, s.p, s.acks, s.md
			ctx := testCtx(t)
			counts := map[string]int16{}
			for _, r := range s.recs {
				counts[string(r.Value)] = kgoext.DeliveryCount(r)
			}
			if c.outputs {
				produceOuts(t, p, "out", n)
			}
			if err := p.SendShareAcksToTransaction(ctx, acks, md); err != nil {
				t.Fatal(err)
			}
			st, err := p.PrepareTransaction(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.SendShareAcksToTransaction(ctx, acks, md); !errors.Is(err, twopc.ErrTransactionPrepared) {
				t.Fatalf("staging while prepared: %v", err)
			}
			closeConsumer(t, cons)
			b.Restart()

			// A new member gets only the sentinel: the inputs are TX_PENDING, staged by
			// the prepared transaction's producer id and epoch.
			if other := untilSentinel(t, b.Addr, group, "s1"); len(other) != 0 {
				t.Fatalf("staged inputs delivered after the restart: %v", other)
			}
			w := window(t, b, group)
			if w.TxPendingRecords != n {
				t.Fatalf("%d records TX_PENDING after the restart, want %d: %+v", w.TxPendingRecords, n, w.Records)
			}
			for _, r := range w.Records {
				if r.State == sharepartition.TxPending && (r.StagedProducerID != st.ProducerID || r.StagedProducerEpoch != st.Epoch) {
					t.Fatalf("staged range %+v, want staged by %v", r, st)
				}
			}

			want := st
			if !c.commit {
				want = twopc.PreparedTxnState{}
			}
			q := recoverAndComplete(t, b.Addr, id, st, want)
			commitOne(t, q, "after")
			if w := window(t, b, group); w.TxPendingRecords != 0 {
				t.Fatalf("%d records TX_PENDING after completing", w.TxPendingRecords)
			}
			again := untilSentinel(t, b.Addr, group, "s2")
			out := readCommitted(t, b.Addr, "out")
			if c.commit {
				if len(again) != 0 {
					t.Fatalf("committed inputs delivered again: %v", again)
				}
				if wantOut := 1 + map[bool]int{true: n}[c.outputs]; len(out) != wantOut {
					t.Fatalf("committed outputs %v", out)
				}
				return
			}
			if len(again) != n {
				t.Fatalf("after the abort %d inputs delivered again, want %d", len(again), n)
			}
			for _, r := range again {
				if want := counts[string(r.Value)] + 1; kgoext.DeliveryCount(r) != want {
					t.Fatalf("%s delivered again with count %d, want %d", r.Value, kgoext.DeliveryCount(r), want)
				}
			}
			if len(out) != 1 {
				t.Fatalf("aborted outputs readable: %v", out)
			}
		})
	}
}

// TestConsumeOnlyTransaction: a transaction that holds only share acknowledgements
// commits for real with the same producer (EndTxn is sent though nothing was produced):
// its inputs are never delivered again.
func TestConsumeOnlyTransaction(t *testing.T) {
	const group, n = "sg-only", 3
	s := newShareSetup(t, group, "tx-only", n, false)
	b, cons, p, acks := s.b, s.cons, s.p, s.acks
	ctx := testCtx(t)
	if err := p.SendShareAcksToTransaction(ctx, acks, cons.GroupMetadata()); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	closeConsumer(t, cons)
	if again := untilSentinel(t, b.Addr, group, "s"); len(again) != 0 {
		t.Fatalf("committed inputs delivered again: %d", len(again))
	}
	if w := window(t, b, group); w.TxPendingRecords != 0 {
		t.Fatalf("%d records TX_PENDING after the commit", w.TxPendingRecords)
	}
}

// TestRefusedStagingAborts: acknowledgements the broker refuses (a stale member epoch:
// nothing is staged) make the transaction abortable; the abort succeeds, under v1 too,
// where the coordinator answers INVALID_TXN_STATE for a transaction that never started,
// and the producer goes on; the inputs are still the member's to acknowledge.
func TestRefusedStagingAborts(t *testing.T) {
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			s := newShareSetup(t, "sg-refused", "tx-refused", 1, v1)
			p, acks, md := s.p, s.acks, s.md
			ctx := testCtx(t)
			md.MemberEpoch += 5
			err := p.SendShareAcksToTransaction(ctx, acks, md)
			if !errors.Is(err, twopc.ErrTransactionAbortable) || !errors.Is(err, kgoext.ErrCommitFailed) {
				t.Fatalf("staging with a stale member epoch: %v", err)
			}
			if err := p.CommitTransaction(ctx); !errors.Is(err, twopc.ErrTransactionAbortable) {
				t.Fatalf("commit after a refused staging: %v", err)
			}
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatalf("abort after a refused staging: %v", err)
			}
			commitOne(t, p, "next")
		})
	}
}

// TestInterruptedStagingNotCommitted: a SendShareAcksToTransaction whose ctx ended before
// anything reached a broker leaves a transaction the coordinator never heard of: the
// commit is refused as abortable (the acknowledgements were not staged), not fatal, the
// abort succeeds and the producer goes on.
func TestInterruptedStagingNotCommitted(t *testing.T) {
	s := newShareSetup(t, "sg-interrupted", "tx-interrupted", 1, false)
	p, acks, md := s.p, s.acks, s.md
	ctx := testCtx(t)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.SendShareAcksToTransaction(ended, acks, md); !errors.Is(err, context.Canceled) {
		t.Fatalf("staging with an ended ctx: %v", err)
	}
	err := p.CommitTransaction(ctx)
	if !errors.Is(err, twopc.ErrTransactionAbortable) || errors.Is(err, twopc.ErrProducerFatal) {
		t.Fatalf("commit of acknowledgements never staged: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	commitOne(t, p, "next")
}
