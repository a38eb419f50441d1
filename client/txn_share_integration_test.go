package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	ebroker "github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/txnshare"
	"github.com/twmb/franz-go/pkg/kerr"
)

// KIP-1289 end to end against the in-process broker: share acknowledgements in producer
// transactions. The in-process broker serves TxnShareAcknowledge by default, so a broker
// that does not advertise it fails the suite rather than skipping it.

func requireTxnShareAck(t *testing.T, addr string) {
	t.Helper()
	if !advertisesTxnShareAck(t, addr) {
		t.Fatalf("the test broker does not advertise TxnShareAcknowledge (key %d), which it serves by default", txnshare.DefaultAPIKey)
	}
}

// advertisesTxnShareAck reports whether ApiVersions from addr lists TxnShareAcknowledge.
func advertisesTxnShareAck(t *testing.T, addr string) bool {
	t.Helper()
	nc, err := newNetConfig([]string{addr}, NetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := dialConn(testCtx(t), nc, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(nil)
	_, ok := c.others[txnshare.DefaultAPIKey]
	return ok
}

// TestTxnShareAckGate: the gate sees the API on a default broker and its absence on one
// with the feature turned off (where requireTxnShareAck fails the test; it used to skip).
func TestTxnShareAckGate(t *testing.T) {
	if !advertisesTxnShareAck(t, testbroker.Start(t).Addr) {
		t.Fatal("a default test broker does not advertise TxnShareAcknowledge")
	}
	off := testbroker.Start(t, func(c *ebroker.Config) { c.TxnShareAckKey = -1 })
	if advertisesTxnShareAck(t, off.Addr) {
		t.Fatal("a broker with TxnShareAckKey -1 advertises TxnShareAcknowledge")
	}
}

func newTestTxnProducer(t *testing.T, addr, id string) *Producer {
	t.Helper()
	p, err := NewProducer(ProducerConfig{Brokers: []string{addr}, TransactionalID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.InitTransactions(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return p
}

// transformRound polls inputs, accepts them, and in one transaction writes "out-<value>"
// for each and stages the acknowledgements; commit or abort ends it. It returns the inputs.
func transformRound(t *testing.T, c *ShareConsumer, p *Producer, commit bool) []*Record {
	t.Helper()
	ctx := testCtx(t)
	recs := pollUntil(t, c, AckAccept, countAtLeast(1))
	md := c.GroupMetadata()
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	if acks.Len() < len(recs) {
		t.Fatalf("%d acks for %d records", acks.Len(), len(recs))
	}
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		p.Produce(ctx, &Record{Topic: "out", Value: fmt.Appendf(nil, "out-%s", r.Value)}, nil)
	}
	if err := p.SendShareAcksToTransaction(ctx, acks, md); err != nil {
		t.Fatalf("stage: %v", err)
	}
	if commit {
		err = p.CommitTransaction(ctx)
	} else {
		err = p.AbortTransaction(ctx)
	}
	if err != nil {
		t.Fatalf("end (commit=%v): %v", commit, err)
	}
	return recs
}

// committedOutputs commits an "end" record and reads "out" read_committed up to it.
func committedOutputs(t *testing.T, addr string, p *Producer) map[string]int {
	t.Helper()
	ctx := testCtx(t)
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	p.Produce(ctx, &Record{Topic: "out", Value: []byte("end")}, nil)
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := NewConsumer(ConsumerConfig{Brokers: []string{addr}, IsolationLevel: ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Assign(map[TopicPartition]Offset{{"out", 0}: Earliest})
	got := map[string]int{}
	for got["end"] == 0 {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got[string(r.Value)]++
		}
	}
	delete(got, "end")
	return got
}

func txnShareSetup(t *testing.T, group string, n int) *testbroker.Broker {
	t.Helper()
	b := shareSetup(t, "in", group, 1, n)
	requireTxnShareAck(t, b.Addr)
	createTopic(t, newTestAdmin(t, b.Addr), "out", 1)
	return b
}

func TestIntegrationTxnShareCommit(t *testing.T) {
	b := txnShareSetup(t, "sg-tc", 10)
	c := newTestShareConsumer(t, b.Addr, "sg-tc", "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	p := newTestTxnProducer(t, b.Addr, "tx-tc")
	seen := map[string]int{}
	for len(seen) < 10 {
		for _, r := range transformRound(t, c, p, true) {
			seen[string(r.Value)]++
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("input %s processed %d times", v, n)
		}
	}
	// Inputs are ACKNOWLEDGED: the next input is the only one delivered.
	produceValues(t, b.Addr, "in", 1, 10, 11)
	if rest := pollUntil(t, c, AckAccept, hasValue("v10")); len(rest) != 1 {
		t.Fatalf("after commit: %v", valueCounts(rest))
	}
	out := committedOutputs(t, b.Addr, p)
	if len(out) != 10 {
		t.Fatalf("committed outputs %v", out)
	}
	for v, n := range out {
		if n != 1 {
			t.Fatalf("output %s %d times", v, n)
		}
	}
}

func TestIntegrationTxnShareAbort(t *testing.T) {
	b := txnShareSetup(t, "sg-ta", 5)
	c := newTestShareConsumer(t, b.Addr, "sg-ta", "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	p := newTestTxnProducer(t, b.Addr, "tx-ta")
	aborted := transformRound(t, c, p, false)
	// The same consumer gets the aborted inputs again, one delivery later.
	want := map[string]int16{}
	for _, r := range aborted {
		want[string(r.Value)] = r.DeliveryCount + 1
	}
	again := map[string]int16{}
	for len(again) < len(want) {
		for _, r := range transformRound(t, c, p, true) {
			if _, ok := want[string(r.Value)]; ok {
				again[string(r.Value)] = r.DeliveryCount
			}
		}
	}
	for v, dc := range want {
		if again[v] != dc {
			t.Fatalf("%s redelivered with count %d, want %d", v, again[v], dc)
		}
	}
	// Only the committed round's outputs are visible.
	for v, n := range committedOutputs(t, b.Addr, p) {
		if n != 1 {
			t.Fatalf("output %s visible %d times (aborted outputs leaked?)", v, n)
		}
	}
}

func TestIntegrationTxnShareConsumeOnly(t *testing.T) {
	b := txnShareSetup(t, "sg-co", 6)
	c := newTestShareConsumer(t, b.Addr, "sg-co", "in", nil) // implicit: delivered records are accepted into the transaction
	p := newTestTxnProducer(t, b.Addr, "tx-co")
	ctx := testCtx(t)
	seen := 0
	for seen < 6 {
		recs := pollUntil(t, c, 0, countAtLeast(1))
		seen += len(recs)
		md := c.GroupMetadata()
		acks, err := c.AcknowledgementsForTransaction()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.SendShareAcksToTransaction(ctx, acks, md); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produceValues(t, b.Addr, "in", 1, 6, 7)
	if rest := pollUntil(t, c, 0, hasValue("v6")); len(rest) != 1 {
		t.Fatalf("after consume-only commits: %v", valueCounts(rest))
	}
	if _, err := c.CommitSync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationTxnShareFencedAndStale(t *testing.T) {
	b := txnShareSetup(t, "sg-tf", 4)
	c := newTestShareConsumer(t, b.Addr, "sg-tf", "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	p := newTestTxnProducer(t, b.Addr, "tx-tf")
	ctx := testCtx(t)
	recs := pollUntil(t, c, 0, countAtLeast(1))
	md := c.GroupMetadata()
	acks := ShareAcknowledgementsFromRecords(recs, AckAccept)

	// A member epoch the group does not have: nothing staged, the transaction must abort.
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	stale := md
	stale.MemberEpoch++
	err := p.SendShareAcksToTransaction(ctx, acks, stale)
	if !errors.Is(err, ErrCommitFailed) || !errors.Is(err, kerr.FencedMemberEpoch) {
		t.Fatalf("future member epoch: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}

	// Offsets this member does not hold (beyond what was delivered): INVALID_RECORD_STATE.
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	notHeld := TxnAcks{{last.Topic, last.Partition}: {{FirstOffset: last.Offset + 100, LastOffset: last.Offset + 100, Types: []AckType{AckAccept}}}}
	if err := p.SendShareAcksToTransaction(ctx, notHeld, md); !errors.Is(err, ErrCommitFailed) {
		t.Fatalf("offsets not held: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}

	// The records are still this member's: the right epoch stages and commits them.
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.SendShareAcksToTransaction(ctx, acks, md); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	// Acknowledge locally too (explicit mode), without sending: they were committed.
	for _, r := range recs {
		_ = c.Acknowledge(r, AckAccept)
	}
	if _, err := c.AcknowledgementsForTransaction(); err != nil {
		t.Fatal(err)
	}
}

// Acknowledgements drained for a transaction that is then abandoned go back with
// ReleaseAcknowledgements: the records are delivered again at once (one delivery later),
// long before their acquisition locks would expire.
func TestIntegrationReleaseAcknowledgements(t *testing.T) {
	b := shareSetup(t, "in", "sg-rel", 1, 5)
	a := newTestAdmin(t, b.Addr)
	setGroupConfig(t, a, "sg-rel", "share.record.lock.duration.ms", "60000")
	c := newTestShareConsumer(t, b.Addr, "sg-rel", "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	first := pollUntil(t, c, AckAccept, countAtLeast(5))
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	if acks.Len() != 5 {
		t.Fatalf("drained %d acknowledgements, want 5", acks.Len())
	}
	if err := c.ReleaseAcknowledgements(acks); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	again := pollUntil(t, c, AckAccept, countAtLeast(5))
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("redelivered after %v: released records waited for their locks", took)
	}
	counts := map[string]int16{}
	for _, r := range first {
		counts[string(r.Value)] = r.DeliveryCount + 1
	}
	for _, r := range again {
		if want := counts[string(r.Value)]; r.DeliveryCount != want {
			t.Fatalf("%s redelivered with count %d, want %d", r.Value, r.DeliveryCount, want)
		}
	}
	if _, err := c.CommitSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}
