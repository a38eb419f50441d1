package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/testbroker"
)

// KIP-939 two-phase commit against the in-process broker, with KIP-1289 share
// acknowledgements in the prepared transaction.

// twoPCMaxTimeout is transaction.max.timeout.ms in these tests: a normal transaction open
// longer than this is aborted within twoPCAbortScan.
const (
	twoPCMaxTimeout = 1500 * time.Millisecond
	twoPCAbortScan  = 100 * time.Millisecond
)

func twoPCBroker(t *testing.T, enabled bool) *testbroker.Broker {
	t.Helper()
	cfg := map[string]string{
		"transaction.max.timeout.ms":                                  fmt.Sprint(twoPCMaxTimeout.Milliseconds()),
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": fmt.Sprint(twoPCAbortScan.Milliseconds()),
		"transaction.two.phase.commit.enable":                         fmt.Sprint(enabled),
	}
	for k, v := range fastShareBrokerConfig {
		cfg[k] = v
	}
	return testbroker.Start(t, testbroker.WithConfig(cfg))
}

func new2PCProducer(t *testing.T, addr, id string) *Producer {
	t.Helper()
	p, err := NewProducer(ProducerConfig{Brokers: []string{addr}, TransactionalID: id, Enable2PC: true,
		TransactionTimeout: twoPCMaxTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// stagedWindow returns the share partition in[0]'s window as the broker holds it.
func stagedWindow(t *testing.T, b *testbroker.Broker, group string) sharepartition.Description {
	t.Helper()
	for _, s := range b.Broker.DescribeShareGroupState(group) {
		if s.Topic == "in" && s.Partition == 0 {
			return s.State.Window
		}
	}
	t.Fatalf("share partition in[0] of %s not loaded", group)
	return sharepartition.Description{}
}

// lastStable is out[0]'s last stable offset (what read_committed readers may read up to).
func lastStable(t *testing.T, a *Admin) int64 {
	t.Helper()
	tp := TopicPartition{"out", 0}
	res, err := a.ListOffsets(testCtx(t), ReadCommitted, map[TopicPartition]int64{tp: -1})
	if err != nil || res[tp].Err != nil {
		t.Fatalf("list offsets: %v %v", err, res[tp].Err)
	}
	return res[tp].Offset
}

// prepareCrashRestart runs the first half of every scenario: n inputs are consumed, their
// outputs produced and their acknowledgements staged in a transaction that is prepared;
// the producer then disappears without ending it and the broker restarts. It checks that
// the transaction outlives transaction.max.timeout.ms, with its inputs TX_PENDING and its
// outputs invisible, and returns the prepared state and the inputs' delivery counts.
func prepareCrashRestart(t *testing.T, b *testbroker.Broker, group, id string, n int) (PreparedTxnState, map[string]int16) {
	t.Helper()
	ctx := testCtx(t)
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "in", 1)
	createTopic(t, a, "out", 1)
	setGroupConfig(t, a, group, "share.auto.offset.reset", "earliest")
	produceValues(t, b.Addr, "in", 1, 0, n)

	c := newTestShareConsumer(t, b.Addr, group, "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	p := new2PCProducer(t, b.Addr, id)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	recs := pollUntil(t, c, AckAccept, countAtLeast(n))
	counts := map[string]int16{}
	for _, r := range recs {
		counts[string(r.Value)] = r.DeliveryCount
	}
	md := c.GroupMetadata()
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		p.Produce(ctx, &Record{Topic: "out", Value: fmt.Appendf(nil, "out-%s", r.Value)}, nil)
	}
	if err := p.SendShareAcksToTransaction(ctx, acks, md); err != nil {
		t.Fatal(err)
	}
	st, err := p.PrepareTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := p.PreparedState(); !ok || got != st || st.IsZero() {
		t.Fatalf("prepared %v, PreparedState %v %v", st, got, ok)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "out", Value: []byte("late")}); !errors.Is(err, ErrTransactionPrepared) {
		t.Fatalf("produce while prepared: %v", err)
	}
	if err := p.SendShareAcksToTransaction(ctx, acks, md); !errors.Is(err, ErrTransactionPrepared) {
		t.Fatalf("stage while prepared: %v", err)
	}
	round, err := ParsePreparedTxnState(st.String())
	if err != nil || round != st {
		t.Fatalf("state %q parses to %v %v", st, round, err)
	}
	// The producer is gone without EndTxn (its Close at test end sends none either); the
	// consumer leaves; the broker restarts.
	c.Close(ctx)
	b.Restart()

	time.Sleep(twoPCMaxTimeout + 5*twoPCAbortScan)
	ds, err := a.DescribeTransactions(ctx, id)
	if err != nil || len(ds) != 1 || ds[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, ds)
	}
	if d := ds[0]; d.State != "Ongoing" || d.Timeout != time.Duration(math.MaxInt32)*time.Millisecond || d.ProducerID != st.ProducerID || d.ProducerEpoch != st.Epoch {
		t.Fatalf("after restart and %v: %+v", twoPCMaxTimeout, d)
	}
	if lso := lastStable(t, a); lso != 0 {
		t.Fatalf("read_committed may read out[0] up to %d: the prepared outputs are visible", lso)
	}
	// A new member gets nothing: the inputs are TX_PENDING (its poll loads the partition).
	c2 := newTestShareConsumer(t, b.Addr, group, "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		recs, err := c2.Poll(pctx)
		if len(recs) != 0 {
			t.Fatalf("staged inputs delivered: %v", valueCounts(recs))
		}
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
	}
	w := stagedWindow(t, b, group)
	if w.TxPendingRecords != int64(n) {
		t.Fatalf("%d records TX_PENDING, want %d: %+v", w.TxPendingRecords, n, w.Records)
	}
	for _, r := range w.Records {
		if r.State != sharepartition.TxPending || r.StagedProducerID != st.ProducerID || r.StagedProducerEpoch != st.Epoch {
			t.Fatalf("staged range %+v, want TX_PENDING by %v", r, st)
		}
	}
	c2.Close(ctx) // or it would fetch (acquire) the inputs once the transaction aborts
	return st, counts
}

// recoverAndComplete recovers the prepared transaction with a new producer and completes it
// against want.
func recoverAndComplete(t *testing.T, addr, id string, st, want PreparedTxnState) *Producer {
	t.Helper()
	ctx := testCtx(t)
	p := new2PCProducer(t, addr, id)
	got, ok, err := p.RecoverPreparedTransaction(ctx)
	if err != nil || !ok || got != st {
		t.Fatalf("recover: %v %v %v, want %v", got, ok, err, st)
	}
	if ps, ok := p.PreparedState(); !ok || ps != st {
		t.Fatalf("PreparedState after recover: %v %v", ps, ok)
	}
	if err := p.BeginTransaction(ctx); !errors.Is(err, ErrTransactionPrepared) {
		t.Fatalf("begin while recovered: %v", err)
	}
	committed, err := p.CompleteTransaction(ctx, want)
	if err != nil || committed != (want == st) {
		t.Fatalf("complete(%v) of %v: committed %v, %v", want, st, committed, err)
	}
	if _, ok := p.PreparedState(); ok {
		t.Fatal("still prepared after CompleteTransaction")
	}
	if _, err := p.CompleteTransaction(ctx, want); !errors.Is(err, ErrNotPrepared) {
		t.Fatalf("second complete: %v", err)
	}
	return p
}

// TestIntegrationTwoPCRecoverCommit: a prepared transaction survives the loss of its
// producer, a broker restart and more than transaction.max.timeout.ms; a new instance
// recovers it and commits it: outputs visible exactly once, inputs ACKNOWLEDGED.
func TestIntegrationTwoPCRecoverCommit(t *testing.T) {
	const group, id, n = "sg-2pc-c", "tx-2pc-c", 6
	b := twoPCBroker(t, true)
	st, _ := prepareCrashRestart(t, b, group, id, n)
	p := recoverAndComplete(t, b.Addr, id, st, st)

	out := committedOutputs(t, b.Addr, p) // also shows p can run a normal transaction now
	if len(out) != n {
		t.Fatalf("committed outputs %v", out)
	}
	for v, c := range out {
		if c != 1 {
			t.Fatalf("output %s visible %d times", v, c)
		}
	}
	// Inputs are ACKNOWLEDGED: the share-partition start offset is past them and the next
	// input is the only one delivered.
	c := newTestShareConsumer(t, b.Addr, group, "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	produceValues(t, b.Addr, "in", 1, n, n+1)
	if rest := pollUntil(t, c, AckAccept, hasValue(fmt.Sprintf("v%d", n))); len(rest) != 1 {
		t.Fatalf("after commit: %v", valueCounts(rest))
	}
	if w := stagedWindow(t, b, group); w.TxPendingRecords != 0 || w.StartOffset < n {
		t.Fatalf("window after commit: %+v", w)
	}
}

// TestIntegrationTwoPCRecoverAbort: the same, completed with a state that is not the
// prepared one: aborted, outputs invisible, inputs delivered again with their delivery
// count kept (one more on the new delivery).
func TestIntegrationTwoPCRecoverAbort(t *testing.T) {
	const group, id, n = "sg-2pc-a", "tx-2pc-a", 6
	b := twoPCBroker(t, true)
	st, counts := prepareCrashRestart(t, b, group, id, n)
	want := PreparedTxnState{ProducerID: st.ProducerID, Epoch: st.Epoch + 1}
	p := recoverAndComplete(t, b.Addr, id, st, want)

	c := newTestShareConsumer(t, b.Addr, group, "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	again := pollUntil(t, c, AckAccept, countAtLeast(n))
	for _, r := range again {
		if want := counts[string(r.Value)] + 1; r.DeliveryCount != want {
			t.Fatalf("%s redelivered with count %d, want %d", r.Value, r.DeliveryCount, want)
		}
	}
	if len(valueCounts(again)) != n {
		t.Fatalf("redelivered %v", valueCounts(again))
	}
	if out := committedOutputs(t, b.Addr, p); len(out) != 0 {
		t.Fatalf("aborted outputs visible: %v", out)
	}
}

// TestIntegrationTwoPCZombieFenced: once a new instance recovered the transaction, the old
// instance is fenced on every path: its produce, its share staging and its commit.
func TestIntegrationTwoPCZombieFenced(t *testing.T) {
	const group, id = "sg-2pc-z", "tx-2pc-z"
	b := twoPCBroker(t, true)
	ctx := testCtx(t)
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "in", 1)
	createTopic(t, a, "out", 1)
	setGroupConfig(t, a, group, "share.auto.offset.reset", "earliest")
	produceValues(t, b.Addr, "in", 1, 0, 4)
	c := newTestShareConsumer(t, b.Addr, group, "in", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })

	old := new2PCProducer(t, b.Addr, id)
	if err := old.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &Record{Topic: "out", Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	recs := pollUntil(t, c, AckAccept, countAtLeast(1))

	p := new2PCProducer(t, b.Addr, id)
	st, ok, err := p.RecoverPreparedTransaction(ctx)
	if err != nil || !ok {
		t.Fatalf("recover: %v %v %v", st, ok, err)
	}
	// Produce to the partition the transaction already holds: fenced by the coordinator.
	if err := old.ProduceSync(ctx, &Record{Topic: "out", Value: []byte("zombie")}); !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie produce: %v", err)
	}
	md := c.GroupMetadata()
	acks := ShareAcknowledgementsFromRecords(recs, AckAccept)
	if err := old.SendShareAcksToTransaction(ctx, acks, md); !errors.Is(err, ErrProducerFatal) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie staging: %v", err)
	}
	if err := old.CommitTransaction(ctx); !errors.Is(err, ErrProducerFatal) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie commit: %v", err)
	}
	// The recovered transaction holds only "first"; the new instance commits it.
	if committed, err := p.CompleteTransaction(ctx, st); err != nil || !committed {
		t.Fatalf("complete: %v %v", committed, err)
	}
	out := committedOutputs(t, b.Addr, p)
	if len(out) != 1 || out["first"] != 1 {
		t.Fatalf("committed outputs %v", out)
	}
	// A producer recovering when nothing is open is simply ready.
	p2 := new2PCProducer(t, b.Addr, id)
	if st, ok, err := p2.RecoverPreparedTransaction(ctx); err != nil || ok || !st.IsZero() {
		t.Fatalf("recover with nothing open: %v %v %v", st, ok, err)
	}
	if _, err := p2.CompleteTransaction(ctx, st); !errors.Is(err, ErrNotPrepared) {
		t.Fatalf("complete with nothing prepared: %v", err)
	}
	if err := p2.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationTwoPCDisabledOnBroker: an Enable2PC producer against a broker without
// transaction.two.phase.commit.enable fails InitTransactions with a typed, fatal error;
// a producer without Enable2PC cannot prepare.
func TestIntegrationTwoPCDisabledOnBroker(t *testing.T) {
	b := twoPCBroker(t, false)
	ctx := testCtx(t)
	p := new2PCProducer(t, b.Addr, "tx-2pc-off")
	err := p.InitTransactions(ctx)
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || !errors.Is(err, ErrProducerFatal) {
		t.Fatalf("InitTransactions: %v", err)
	}
	plain, err := NewProducer(ProducerConfig{Brokers: []string{b.Addr}, TransactionalID: "tx-plain", TransactionTimeout: twoPCMaxTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.PrepareTransaction(ctx); !errors.Is(err, Err2PCDisabled) {
		t.Fatalf("prepare without Enable2PC: %v", err)
	}
}
