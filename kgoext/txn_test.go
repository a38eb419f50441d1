package kgoext_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pollAndBegin polls c until stop (acknowledging each record with ack), drains the
// acknowledgements for a transaction and begins one on txn.
func pollAndBegin(t *testing.T, c *kgoext.ShareConsumer, txn *kgo.Client, ack kgoext.AckType, stop func([]*kgo.Record) bool) ([]*kgo.Record, kgoext.TxnAcks, kgoext.ShareGroupMetadata) {
	t.Helper()
	recs := pollUntil(t, c, ack, stop)
	md := c.GroupMetadata()
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	return recs, acks, md
}

// transformRound polls inputs (explicit mode, each ACCEPTed), and in one transaction on txn
// writes "out-<value>" for each (unless consumeOnly) and stages the acknowledgements;
// commit or abort ends it with kgoext.EndTransaction. It returns the inputs.
func transformRound(t *testing.T, c *kgoext.ShareConsumer, txn *kgo.Client, consumeOnly bool, commit kgo.TransactionEndTry) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	recs, acks, md := pollAndBegin(t, c, txn, kgoext.AckAccept, countAtLeast(1))
	if acks.Len() < len(recs) {
		t.Fatalf("%d acks for %d records", acks.Len(), len(recs))
	}
	if !consumeOnly {
		for _, r := range recs {
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: fmt.Appendf(nil, "out-%s", r.Value)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md); err != nil {
		t.Fatalf("stage: %v", err)
	}
	if err := kgoext.EndTransaction(ctx, txn, commit); err != nil {
		t.Fatalf("end (commit=%v): %v", commit, err)
	}
	return recs
}

// redeliveredAll polls c until every value of recs came back with delivery count 2.
func redeliveredAll(t *testing.T, c *kgoext.ShareConsumer, recs []*kgo.Record) {
	t.Helper()
	want := map[string]bool{}
	for _, r := range recs {
		want[string(r.Value)] = true
	}
	pollUntil(t, c, kgoext.AckAccept, func(seen []*kgo.Record) bool {
		n := 0
		for _, r := range seen {
			if want[string(r.Value)] && kgoext.DeliveryCount(r) == 2 {
				n++
			}
		}
		return n >= len(want)
	})
}

// TestTxnCommitProduces: records and acknowledgements commit together: the outputs are
// visible read_committed and the inputs are never delivered again.
func TestTxnCommitProduces(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-tc", 1, 5)
	c := newConsumer(t, b.Addr, "g-tc", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, b.Addr, "tx-tc")
	recs := transformRound(t, c, txn, false, kgo.TryCommit)
	got := committedOutputs(t, b.Addr, txn)
	for _, r := range recs {
		if got["out-"+string(r.Value)] != 1 {
			t.Fatalf("output of %s committed %d times (all: %v)", r.Value, got["out-"+string(r.Value)], got)
		}
	}
	if again := sentinelOnly(t, b.Addr, cl, "g-tc", "in"); len(again) > 0 {
		t.Fatalf("committed inputs delivered again: %v", valueCounts(again))
	}
}

// TestTxnAbortProduces: an aborted transaction's outputs are invisible and its inputs are
// delivered again (delivery count 2).
func TestTxnAbortProduces(t *testing.T) {
	b, _ := shareSetup(t, "in", "g-ta", 1, 5)
	c := newConsumer(t, b.Addr, "g-ta", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, b.Addr, "tx-ta")
	recs := transformRound(t, c, txn, false, kgo.TryAbort)
	redeliveredAll(t, c, recs)
	got := committedOutputs(t, b.Addr, txn)
	if len(got) != 1 {
		t.Fatalf("aborted outputs visible: %v", got)
	}
}

// TestConsumeOnlyCommit: a transaction holding only acknowledgements commits for real (kgo
// alone would send no EndTxn), and kgo's epoch is still right afterwards: the next
// transaction produces and commits, and a KIP-890 commit of kgo's own still bumps it.
func TestConsumeOnlyCommit(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-cc", 1, 5)
	c := newConsumer(t, b.Addr, "g-cc", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, b.Addr, "tx-cc")
	ctx := testCtx(t)
	_, epoch0, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	transformRound(t, c, txn, true, kgo.TryCommit)
	waitTxnState(t, cl, "tx-cc", "CompleteCommit")
	if _, e, _ := txn.ProducerID(ctx); e != epoch0 {
		t.Fatalf("consume-only commit moved kgo's epoch %d → %d", epoch0, e)
	}
	if again := sentinelOnly(t, b.Addr, cl, "g-cc", "in"); len(again) > 0 {
		t.Fatalf("inputs of the committed consume-only transaction delivered again: %v", valueCounts(again))
	}
	// The following transaction produces with kgo's epoch: fenced if it were stale.
	got := committedOutputs(t, b.Addr, txn)
	if got["end"] != 1 {
		t.Fatalf("the transaction after a consume-only commit: %v", got)
	}
	if _, e, _ := txn.ProducerID(ctx); e != epoch0+1 {
		t.Fatalf("kgo's own commit (transaction version 2) left epoch %d, want %d bumped", e, epoch0+1)
	}
	// And a consume-only commit after a bumped epoch: acknowledgements carry the new one.
	produceValues(t, cl, "in", 1, 10, 12)
	recs := transformRound(t, c, txn, true, kgo.TryCommit)
	if len(recs) == 0 {
		t.Fatal("no records in the second round")
	}
	if got := committedOutputs(t, b.Addr, txn); got["end"] != 2 {
		t.Fatalf("the transaction after the second consume-only commit: %v", got)
	}
}

// TestConsumeOnlyAbort: a consume-only abort really aborts (the inputs come back at once,
// not at the transaction timeout), and the next transaction still produces.
func TestConsumeOnlyAbort(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-ca", 1, 5)
	c := newConsumer(t, b.Addr, "g-ca", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, b.Addr, "tx-ca")
	recs := transformRound(t, c, txn, true, kgo.TryAbort)
	waitTxnState(t, cl, "tx-ca", "CompleteAbort")
	redeliveredAll(t, c, recs)
	if got := committedOutputs(t, b.Addr, txn); got["end"] != 1 {
		t.Fatalf("the transaction after a consume-only abort: %v", got)
	}
}

// TestFailedRecordsAbortAcks: a commit with a failed record does not commit the
// acknowledgements: it aborts, says so, the inputs come back and no output is visible.
// With every record failed kgo would not end the transaction (the acknowledgements would
// commit alone); with one good record kgo would commit it.
func TestFailedRecordsAbortAcks(t *testing.T) {
	for _, withGood := range []bool{false, true} {
		t.Run(fmt.Sprintf("good record %v", withGood), func(t *testing.T) {
			b, cl := shareSetup(t, "in", "g-fa", 1, 3)
			c := newConsumer(t, b.Addr, "g-fa", "in", kgoext.ExplicitAcks())
			txn := newTxnClient(t, b.Addr, "tx-fa")
			ctx := testCtx(t)
			recs, acks, md := pollAndBegin(t, c, txn, kgoext.AckAccept, countAtLeast(1))
			if withGood {
				if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("good")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			huge := make([]byte, 2<<20) // over kgo's ProducerBatchMaxBytes: the record fails
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: huge}).FirstErr(); err == nil {
				t.Fatal("a 2 MiB record was produced")
			}
			if err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md); err != nil {
				t.Fatal(err)
			}
			if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); !errors.Is(err, kgoext.ErrTransactionAborted) {
				t.Fatalf("commit with a failed record: %v, want ErrTransactionAborted", err)
			}
			waitTxnState(t, cl, "tx-fa", "CompleteAbort")
			redeliveredAll(t, c, recs)
			if got := committedOutputs(t, b.Addr, txn); got["good"] != 0 || got["end"] != 1 {
				t.Fatalf("outputs after the aborted transaction: %v", got)
			}
		})
	}
}

// TestSendShareAcksNeedsHooks: a transactional client without TransactionalHooks is
// refused before anything is staged (EndTransaction could not end it).
func TestSendShareAcksNeedsHooks(t *testing.T) {
	b, _ := shareSetup(t, "in", "g-nh", 1, 1)
	txn := newClient(t, b.Addr, kgo.TransactionalID("tx-nh"))
	acks := kgoext.TxnAcks{{Topic: "in", Partition: 0}: {{FirstOffset: 0, LastOffset: 0, Types: []kgoext.AckType{kgoext.AckAccept}}}}
	md := kgoext.ShareGroupMetadata{GroupID: "g-nh", MemberID: "m", MemberEpoch: 1}
	if err := kgoext.SendShareAcksToTransaction(testCtx(t), txn, acks, md); !errors.Is(err, kgoext.ErrNoTransactionalHooks) {
		t.Fatalf("without hooks: %v", err)
	}
	if err := kgoext.EndTransaction(testCtx(t), txn, kgo.TryCommit); !errors.Is(err, kgoext.ErrNoTransactionalHooks) {
		t.Fatalf("EndTransaction without hooks: %v", err)
	}
	// Hooks but kgo's default MaxVersions, which lack TxnShareAcknowledge: kgo would refuse
	// the key; SendShareAcks says how to build the client.
	noKey := newClient(t, b.Addr, kgo.TransactionalID("tx-nk"), kgoext.TransactionalHooks())
	if err := kgoext.SendShareAcksToTransaction(testCtx(t), noKey, acks, md); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("without the key in MaxVersions: %v", err)
	}
}

// TestStageRefusals: a member epoch the group does not have, and offsets the member does
// not hold, are ErrCommitFailed (wrapping the kerr error), and EndTransaction then refuses
// to commit; the records stay the member's and a correct staging commits them.
func TestStageRefusals(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-sr", 1, 4)
	c := newConsumer(t, b.Addr, "g-sr", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, b.Addr, "tx-sr")
	ctx := testCtx(t)
	recs := pollUntil(t, c, 0, countAtLeast(1))
	md := c.GroupMetadata()
	acks := kgoext.ShareAcknowledgementsFromRecords(recs, kgoext.AckAccept)

	stale := md
	stale.MemberEpoch++
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, stale)
	if !errors.Is(err, kgoext.ErrCommitFailed) || !errors.Is(err, kerr.FencedMemberEpoch) {
		t.Fatalf("future member epoch: %v", err)
	}
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); !errors.Is(err, kgoext.ErrTransactionAborted) {
		t.Fatalf("commit after a refused staging: %v, want ErrTransactionAborted", err)
	}

	last := recs[len(recs)-1]
	notHeld := kgoext.TxnAcks{{Topic: last.Topic, Partition: last.Partition}: {{FirstOffset: last.Offset + 100, LastOffset: last.Offset + 100, Types: []kgoext.AckType{kgoext.AckAccept}}}}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := kgoext.SendShareAcksToTransaction(ctx, txn, notHeld, md); !errors.Is(err, kgoext.ErrCommitFailed) || !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("offsets not held: %v", err)
	}
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md); err != nil {
		t.Fatal(err)
	}
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, cl, "tx-sr", "CompleteCommit")
	for _, r := range recs {
		_ = c.Acknowledge(r, kgoext.AckAccept) // committed already; drained without sending
	}
	if _, err := c.AcknowledgementsForTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, r := range sentinelOnly(t, b.Addr, cl, "g-sr", "in") {
		for _, h := range recs {
			if string(h.Value) == string(r.Value) {
				t.Fatalf("%s committed, delivered again", r.Value)
			}
		}
	}
}

// TestGapsStagedWithRecords: an input topic written transactionally holds control records;
// the share consumer reports their offsets as gaps, AcknowledgementsForTransaction carries
// them (type 0), and the commit leaves nothing of the input to deliver.
func TestGapsStagedWithRecords(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-gap", 1, 0)
	writer := newTxnClient(t, b.Addr, "tx-writer")
	ctx := testCtx(t)
	for i := range 3 {
		if err := writer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := writer.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := kgoext.EndTransaction(ctx, writer, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	c := newConsumer(t, b.Addr, "g-gap", "in")
	txn := newTxnClient(t, b.Addr, "tx-gap")
	pollUntil(t, c, 0, hasValue("v2"))
	md := c.GroupMetadata()
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	gaps := 0
	for _, bs := range acks {
		for _, bt := range bs {
			for off := bt.FirstOffset; off <= bt.LastOffset; off++ {
				if len(bt.Types) == 1 && bt.Types[0] == kgoext.AckGap || len(bt.Types) > 1 && bt.Types[off-bt.FirstOffset] == kgoext.AckGap {
					gaps++
				}
			}
		}
	}
	if gaps < 2 {
		t.Fatalf("%d gap acknowledgements for 3 transactions' markers (acks %+v)", gaps, acks)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md); err != nil {
		t.Fatal(err)
	}
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, cl, "tx-gap", "CompleteCommit")
	if again := sentinelOnly(t, b.Addr, cl, "g-gap", "in"); len(again) > 0 {
		t.Fatalf("committed inputs delivered again: %v", valueCounts(again))
	}
}

// TestRecordOutsideTransactionDoesNotCount: a record produced while no transaction is open
// fails (kgo refuses it) and does not make the next transaction abort.
func TestRecordOutsideTransactionDoesNotCount(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-out", 1, 2)
	c := newConsumer(t, b.Addr, "g-out", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, b.Addr, "tx-out")
	if err := txn.ProduceSync(testCtx(t), &kgo.Record{Topic: "out", Value: []byte("stray")}).FirstErr(); err == nil {
		t.Fatal("a record outside a transaction was produced")
	}
	transformRound(t, c, txn, false, kgo.TryCommit)
	waitTxnState(t, cl, "tx-out", "CompleteCommit")
}

// TestConsumeOnlyCommitAcrossRestart: the broker (coordinator and share-state store)
// restarts between staging and the end of a consume-only transaction; EndTransaction's own
// EndTxn retries until the coordinator is back, the commit lands, and the staged records,
// durable across the restart, are never delivered again.
func TestConsumeOnlyCommitAcrossRestart(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-cr", 1, 4)
	c := newConsumer(t, b.Addr, "g-cr", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, b.Addr, "tx-cr")
	ctx := testCtx(t)
	recs, acks, md := pollAndBegin(t, c, txn, kgoext.AckAccept, countAtLeast(4))
	if err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); err != nil {
		t.Fatalf("consume-only commit across a restart: %v", err)
	}
	waitTxnState(t, cl, "tx-cr", "CompleteCommit")
	for _, r := range sentinelOnly(t, b.Addr, cl, "g-cr", "in") {
		for _, h := range recs {
			if string(h.Value) == string(r.Value) {
				t.Fatalf("%s committed across the restart, delivered again", r.Value)
			}
		}
	}
	if got := committedOutputs(t, b.Addr, txn); got["end"] != 1 {
		t.Fatalf("the transaction after: %v", got)
	}
}
