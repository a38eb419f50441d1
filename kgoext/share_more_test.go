package kgoext_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareRenew: RENEW (ShareAcknowledge v2) is sent by CommitSync and leaves the records
// in flight; they still take a terminal acknowledgement afterwards.
func TestShareRenew(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-renew", 1, 3)
	c := newConsumer(t, b.Addr, "g-renew", "in", kgoext.ExplicitAcks())
	ctx := testCtx(t)
	recs := pollUntil(t, c, 0, countAtLeast(1))
	for _, r := range recs {
		if err := c.Acknowledge(r, kgoext.AckRenew); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := c.CommitSync(ctx); err != nil {
		t.Fatalf("renew: %v %v", res, err)
	}
	for _, r := range recs {
		if err := c.Acknowledge(r, kgoext.AckAccept); err != nil {
			t.Fatalf("accept after renew: %v", err)
		}
	}
	if res, err := c.CommitSync(ctx); err != nil {
		t.Fatalf("accept: %v %v", res, err)
	}
	for _, r := range sentinelOnly(t, b.Addr, cl, "g-renew", "in") {
		for _, h := range recs {
			if string(h.Value) == string(r.Value) {
				t.Fatalf("%s renewed then accepted, delivered again", r.Value)
			}
		}
	}
}

// TestShareMembersShareAPartition: two members drain one partition together; every record
// is delivered exactly once.
func TestShareMembersShareAPartition(t *testing.T) {
	const n = 60
	b, _ := shareSetup(t, "in", "g-many", 1, n)
	members := []*kgoext.ShareConsumer{
		newConsumer(t, b.Addr, "g-many", "in", kgoext.ExplicitAcks()),
		newConsumer(t, b.Addr, "g-many", "in", kgoext.ExplicitAcks()),
	}
	var (
		mu  sync.Mutex
		all []*kgo.Record
		wg  sync.WaitGroup
	)
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(all)
	}
	for _, c := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := testCtx(t)
			for total() < n && ctx.Err() == nil {
				// Bounded: the other member may take the last records.
				pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				recs, err := c.Poll(pctx)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("poll: %v", err)
					return
				}
				for _, r := range recs {
					if err := c.Acknowledge(r, kgoext.AckAccept); err != nil {
						t.Errorf("ack: %v", err)
					}
				}
				mu.Lock()
				all = append(all, recs...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	counts := valueCounts(all)
	if len(counts) != n {
		t.Fatalf("got %d distinct values, want %d", len(counts), n)
	}
	for v, k := range counts {
		if k != 1 {
			t.Fatalf("%s delivered %d times", v, k)
		}
	}
}

// TestShareCloseReleases: Close of an explicit-mode member releases what it held, so
// another member gets those records at once (one delivery later), not after the lock.
func TestShareCloseReleases(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-close", 1, 5)
	setGroupConfig(t, cl, "g-close", "share.record.lock.duration.ms", "60000")
	a := newConsumer(t, b.Addr, "g-close", "in", kgoext.ExplicitAcks())
	held := pollUntil(t, a, 0, countAtLeast(1))
	if err := a.Close(testCtx(t)); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Only the release on Close lets the second member have them before the test's 60 s.
	bc := newConsumer(t, b.Addr, "g-close", "in")
	again := pollUntil(t, bc, 0, func(s []*kgo.Record) bool {
		for _, r := range held {
			if !hasValue(string(r.Value))(s) {
				return false
			}
		}
		return true
	})
	for _, r := range again {
		for _, h := range held {
			if string(h.Value) == string(r.Value) && kgoext.DeliveryCount(r) != kgoext.DeliveryCount(h)+1 {
				t.Fatalf("%s: delivery count %d after %d", r.Value, kgoext.DeliveryCount(r), kgoext.DeliveryCount(h))
			}
		}
	}
}

// TestReleaseAcknowledgements: acknowledgements drained for a transaction that is then
// abandoned go back with ReleaseAcknowledgements: the records are delivered again at once,
// one delivery later, long before their locks would expire.
func TestReleaseAcknowledgements(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-rel", 1, 5)
	setGroupConfig(t, cl, "g-rel", "share.record.lock.duration.ms", "60000")
	c := newConsumer(t, b.Addr, "g-rel", "in", kgoext.ExplicitAcks())
	first := pollUntil(t, c, kgoext.AckAccept, countAtLeast(5))
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	if acks.Len() != 5 {
		t.Fatalf("drained %d acknowledgements, want 5", acks.Len())
	}
	if again, err := c.AcknowledgementsForTransaction(); err != nil || again.Len() != 0 {
		t.Fatalf("second drain: %d acknowledgements, %v", again.Len(), err)
	}
	if err := c.ReleaseAcknowledgements(acks); err != nil {
		t.Fatal(err)
	}
	again := pollUntil(t, c, kgoext.AckAccept, countAtLeast(5))
	want := map[string]int16{}
	for _, r := range first {
		want[string(r.Value)] = kgoext.DeliveryCount(r) + 1
	}
	for _, r := range again {
		if w := want[string(r.Value)]; kgoext.DeliveryCount(r) != w {
			t.Fatalf("%s redelivered with count %d, want %d", r.Value, kgoext.DeliveryCount(r), w)
		}
	}
	if _, err := c.CommitSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// TestRenewAndReleaseNotTransactional: RELEASE and RENEW cannot be staged: the drain
// refuses and takes nothing.
func TestRenewAndReleaseNotTransactional(t *testing.T) {
	b, _ := shareSetup(t, "in", "g-nt", 1, 2)
	c := newConsumer(t, b.Addr, "g-nt", "in", kgoext.ExplicitAcks())
	recs := pollUntil(t, c, 0, countAtLeast(1))
	if err := c.Acknowledge(recs[0], kgoext.AckRelease); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcknowledgementsForTransaction(); !errors.Is(err, kgoext.ErrAckNotTransactional) {
		t.Fatalf("drain with a RELEASE: %v", err)
	}
	bad := kgoext.TxnAcks{{Topic: "in", Partition: 0}: {{FirstOffset: 0, LastOffset: 0, Types: []kgoext.AckType{kgoext.AckRenew}}}}
	md := c.GroupMetadata()
	txn := newTxnClient(t, b.Addr, "tx-nt")
	if err := kgoext.SendShareAcksToTransaction(testCtx(t), txn, bad, md); !errors.Is(err, kgoext.ErrAckNotTransactional) {
		t.Fatalf("staging a RENEW: %v", err)
	}
}

// TestLongPollDoesNotDelayProduce: one client serves a share consumer whose fetches wait
// 10 s on an empty topic and a producer: the produce is answered long before the poll
// ends, since kgo sends ShareFetch on the broker's fetch connection, not the produce one.
func TestLongPollDoesNotDelayProduce(t *testing.T) {
	b, _ := shareSetup(t, "in", "g-lp", 1, 0)
	fetches := &keyWrites{key: 78} // ShareFetch
	cl := newClient(t, b.Addr, kgo.WithHooks(fetches))
	c, err := kgoext.NewShareConsumer(cl, "g-lp", kgoext.ShareTopics("in"), kgoext.ShareMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	defer func() {
		// Closing abandons the parked fetch rather than waiting out its 10 s.
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_ = c.Close(cctx)
	}()
	pctx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		_, _ = c.Poll(pctx)
	}()
	defer func() { cancel(); <-polled }()
	// Wait until a fetch was written: it is parked for 10 s on the empty topic.
	if err := await.Until(10*time.Second, 10*time.Millisecond, func() error {
		if fetches.n.Load() == 0 {
			return errors.New("no ShareFetch written yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("3 produces on the consumer's client took %v: they waited behind the 10 s long poll", d)
	}
}

// keyWrites counts requests of one API key written by a client.
type keyWrites struct {
	key int16
	n   atomic.Int64
}

func (w *keyWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == w.key && err == nil {
		w.n.Add(1)
	}
}

// TestShareConsumerSurvivesRestart: the broker restarts under a member (its share session
// and connections die); the member rejoins, and records produced after the restart are
// delivered.
func TestShareConsumerSurvivesRestart(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-rs", 1, 3)
	c := newConsumer(t, b.Addr, "g-rs", "in")
	pollUntil(t, c, 0, countAtLeast(3))
	if _, err := c.CommitSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	produceValues(t, cl, "in", 1, 3, 6)
	ctx := testCtx(t)
	var seen []*kgo.Record
	for !hasValue("v5")(seen) {
		recs, err := c.Poll(ctx)
		if err != nil && ctx.Err() != nil {
			t.Fatalf("no v5 after the restart: %v (seen %v)", err, valueCounts(seen))
		}
		seen = append(seen, recs...) // errors of the restart itself are reported once
	}
}

// TestCommitAsyncReportsOutcomes: CommitAsync sends in the background and calls done with
// every acknowledged partition; OnAcknowledged sees each offset sent, without error.
func TestCommitAsyncReportsOutcomes(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-async", 2, 6)
	var (
		mu     sync.Mutex
		report = map[kgoext.TopicPartition][]int64{}
	)
	c := newConsumer(t, b.Addr, "g-async", "in", kgoext.ExplicitAcks(), kgoext.OnAcknowledged(func(rs []kgoext.AckResult) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			if r.Err != nil {
				t.Errorf("%v: %v", r.Partition, r.Err)
			}
			report[r.Partition] = append(report[r.Partition], r.Offsets...)
		}
	}))
	recs := pollUntil(t, c, kgoext.AckAccept, countAtLeast(6))
	type outcome struct {
		res map[kgoext.TopicPartition]error
		err error
	}
	done := make(chan outcome, 1)
	c.CommitAsync(func(res map[kgoext.TopicPartition]error, err error) { done <- outcome{res, err} })
	var o outcome
	select {
	case o = <-done:
	case <-testCtx(t).Done():
		t.Fatal("CommitAsync never completed")
	}
	// Some acknowledgements may have gone with a fetch before CommitAsync took the rest.
	if o.err != nil {
		t.Fatalf("CommitAsync: %v %v", o.res, o.err)
	}
	mu.Lock()
	sent := 0
	for _, offs := range report {
		sent += len(offs)
	}
	mu.Unlock()
	if sent != len(recs) {
		t.Fatalf("OnAcknowledged saw %d offsets for %d records: %v", sent, len(recs), report)
	}
	if again := sentinelOnly(t, b.Addr, cl, "g-async", "in"); len(again) > 0 {
		t.Fatalf("acknowledged records delivered again: %v", valueCounts(again))
	}
}
