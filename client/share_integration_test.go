package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// Share consumer integration tests against the in-process broker.

// fastShareBrokerConfig shortens share-group heartbeats and assignment pacing (as
// broker/share_test.go's fastShareConfig).
var fastShareBrokerConfig = map[string]string{
	"group.share.heartbeat.interval.ms":       "200",
	"group.share.min.heartbeat.interval.ms":   "200",
	"group.share.assignment.interval.ms":      "0",
	"group.share.min.record.lock.duration.ms": "1000",
}

// shareSetup starts a broker, creates topic with nparts partitions, makes group read from
// the earliest offset and produces n records "v0".."v<n-1>" (round robin over partitions).
func shareSetup(t *testing.T, topic, group string, nparts int32, n int) *testbroker.Broker {
	t.Helper()
	b := testbroker.Start(t, testbroker.WithConfig(fastShareBrokerConfig))
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, topic, nparts)
	setGroupConfig(t, a, group, "share.auto.offset.reset", "earliest")
	produceValues(t, b.Addr, topic, nparts, 0, n)
	return b
}

func setGroupConfig(t *testing.T, a *Admin, group, name, value string) {
	t.Helper()
	res, err := a.IncrementalAlterConfigs(testCtx(t), false, map[ConfigResource][]AlterConfig{
		{Type: GroupResource, Name: group}: {{Name: name, Op: OpSet, Value: value}},
	})
	if err != nil {
		t.Fatalf("set %s=%s on group %s: %v %v", name, value, group, res, err)
	}
}

// produceValues writes "v<from>".."v<to-1>", value i to partition i % nparts, one record
// per batch (a share fetch acquires whole batches: MaxRecords is a soft cap).
func produceValues(t *testing.T, addr, topic string, nparts int32, from, to int) {
	t.Helper()
	p, err := NewProducer(ProducerConfig{Brokers: []string{addr}, Partitioner: ManualPartitioner()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := testCtx(t)
	for i := from; i < to; i++ {
		if err := p.ProduceSync(ctx, &Record{Topic: topic, Partition: int32(i) % nparts, Value: fmt.Appendf(nil, "v%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func newTestShareConsumer(t *testing.T, addr, group, topic string, mod func(*ShareConsumerConfig)) *ShareConsumer {
	t.Helper()
	cfg := ShareConsumerConfig{Brokers: []string{addr}, Group: group, Topics: []string{topic},
		MaxWait: 200 * time.Millisecond, MaxRecords: 10}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewShareConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// pollUntil polls c (acknowledging each record with ack when ack > 0 in explicit mode)
// until stop says so; it returns every record seen.
func pollUntil(t *testing.T, c *ShareConsumer, ack AckType, stop func(seen []*Record) bool) []*Record {
	t.Helper()
	ctx := testCtx(t)
	var seen []*Record
	for !stop(seen) {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", len(seen), err)
		}
		for _, r := range recs {
			if ack > 0 {
				if err := c.Acknowledge(r, ack); err != nil {
					t.Fatal(err)
				}
			}
		}
		seen = append(seen, recs...)
	}
	return seen
}

func hasValue(v string) func([]*Record) bool {
	return func(seen []*Record) bool {
		for _, r := range seen {
			if string(r.Value) == v {
				return true
			}
		}
		return false
	}
}

func countAtLeast(n int) func([]*Record) bool {
	return func(seen []*Record) bool { return len(seen) >= n }
}

func valueCounts(rs []*Record) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[string(r.Value)]++
	}
	return m
}

func TestIntegrationShareConsumerImplicit(t *testing.T) {
	b := shareSetup(t, "si", "sg-imp", 2, 40)
	var mu sync.Mutex
	var acked []AckResult
	c := newTestShareConsumer(t, b.Addr, "sg-imp", "si", func(cfg *ShareConsumerConfig) {
		cfg.OnAcknowledged = func(rs []AckResult) {
			mu.Lock()
			acked = append(acked, rs...)
			mu.Unlock()
		}
	})
	seen := pollUntil(t, c, 0, countAtLeast(40))
	for v, n := range valueCounts(seen) {
		if n != 1 {
			t.Fatalf("%s delivered %d times", v, n)
		}
	}
	for _, r := range seen {
		if r.DeliveryCount != 1 {
			t.Fatalf("%s delivery count %d", r.Value, r.DeliveryCount)
		}
	}
	if md := c.GroupMetadata(); md.GroupID != "sg-imp" || len(md.MemberID) != 36 || md.MemberEpoch <= 0 {
		t.Fatalf("group metadata %+v", md)
	}
	res, err := c.CommitSync(testCtx(t))
	if err != nil {
		t.Fatalf("commit: %v %v", res, err)
	}
	mu.Lock()
	n := 0
	for _, r := range acked {
		if r.Err != nil {
			t.Fatalf("ack result %+v", r)
		}
		n += len(r.Offsets)
	}
	mu.Unlock()
	if n != 40 {
		t.Fatalf("acknowledged %d offsets, want 40", n)
	}

	// Accepted records never come back: a record produced after them is the next one.
	produceValues(t, b.Addr, "si", 2, 40, 42)
	rest := pollUntil(t, c, 0, func(s []*Record) bool { return hasValue("v40")(s) && hasValue("v41")(s) })
	if len(rest) != 2 {
		t.Fatalf("after commit got %v", valueCounts(rest))
	}
	if err := c.Close(testCtx(t)); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := c.Poll(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("poll after close: %v", err)
	}
}

func TestIntegrationShareConsumerExplicit(t *testing.T) {
	b := shareSetup(t, "se", "sg-exp", 1, 10)
	c := newTestShareConsumer(t, b.Addr, "sg-exp", "se", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	ctx := testCtx(t)
	recs := pollUntil(t, c, 0, countAtLeast(1))
	if _, err := c.Poll(ctx); !errors.Is(err, ErrUnacknowledged) {
		t.Fatalf("poll with unacknowledged records: %v", err)
	}
	got := map[string]bool{}
	for _, r := range recs {
		got[string(r.Value)] = true
		ack := AckAccept
		switch string(r.Value) {
		case "v1":
			ack = AckRelease
		case "v2":
			ack = AckReject
		}
		if err := c.Acknowledge(r, ack); err != nil {
			t.Fatal(err)
		}
		if err := c.Acknowledge(r, AckAccept); !errors.Is(err, ErrNotDelivered) {
			t.Fatalf("second ack: %v", err)
		}
	}
	// Take the rest; v1 comes back with delivery count 2.
	more := pollUntil(t, c, AckAccept, func(s []*Record) bool {
		for _, r := range s {
			got[string(r.Value)] = true
		}
		return len(got) == 10 && hasValue("v1")(s)
	})
	for _, r := range more {
		if string(r.Value) == "v1" && r.DeliveryCount != 2 {
			t.Fatalf("released record redelivered with count %d", r.DeliveryCount)
		}
		if string(r.Value) == "v2" {
			t.Fatal("rejected record redelivered")
		}
	}
	// Nothing but the new record follows.
	produceValues(t, b.Addr, "se", 1, 10, 11)
	tail := pollUntil(t, c, AckAccept, hasValue("v10"))
	if len(tail) != 1 {
		t.Fatalf("after the sentinel: %v", valueCounts(tail))
	}
	if _, err := c.CommitSync(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationShareConsumerRenew(t *testing.T) {
	b := shareSetup(t, "sr", "sg-renew", 1, 3)
	c := newTestShareConsumer(t, b.Addr, "sg-renew", "sr", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	ctx := testCtx(t)
	recs := pollUntil(t, c, 0, countAtLeast(1))
	for _, r := range recs {
		if err := c.Acknowledge(r, AckRenew); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.CommitSync(ctx)
	if err != nil {
		t.Fatalf("renew: %v %v", res, err)
	}
	for _, r := range recs {
		if err := c.Acknowledge(r, AckAccept); err != nil {
			t.Fatalf("accept after renew: %v", err)
		}
	}
	if res, err := c.CommitSync(ctx); err != nil {
		t.Fatalf("accept: %v %v", res, err)
	}
}

func TestIntegrationShareConsumersShareAPartition(t *testing.T) {
	b := shareSetup(t, "ss", "sg-many", 1, 60)
	a := newTestShareConsumer(t, b.Addr, "sg-many", "ss", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	bc := newTestShareConsumer(t, b.Addr, "sg-many", "ss", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	// a holds its records (locked to it); b still makes progress on the same partition.
	heldA := pollUntil(t, a, 0, countAtLeast(1))
	heldB := pollUntil(t, bc, 0, countAtLeast(1))
	for v := range valueCounts(heldB) {
		if valueCounts(heldA)[v] > 0 {
			t.Fatalf("%s delivered to both members", v)
		}
	}
	all := append(append([]*Record(nil), heldA...), heldB...)
	for _, r := range heldA {
		_ = a.Acknowledge(r, AckAccept)
	}
	for _, r := range heldB {
		_ = bc.Acknowledge(r, AckAccept)
	}
	// Both drain the rest concurrently; every record is delivered exactly once.
	var mu sync.Mutex
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(all)
	}
	var wg sync.WaitGroup
	for _, c := range []*ShareConsumer{a, bc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := testCtx(t)
			for total() < 60 {
				pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // bounded poll: the other member may take the last records
				recs, err := c.Poll(pctx)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("poll: %v", err)
					return
				}
				for _, r := range recs {
					_ = c.Acknowledge(r, AckAccept)
				}
				mu.Lock()
				all = append(all, recs...)
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	counts := valueCounts(all)
	if len(counts) != 60 {
		t.Fatalf("got %d distinct values, want 60", len(counts))
	}
	for v, n := range counts {
		if n != 1 {
			t.Fatalf("%s delivered %d times", v, n)
		}
	}
}

func TestIntegrationShareConsumerCloseReleases(t *testing.T) {
	b := shareSetup(t, "sc", "sg-close", 1, 5)
	a := newTestShareConsumer(t, b.Addr, "sg-close", "sc", func(cfg *ShareConsumerConfig) { cfg.AckMode = AckExplicit })
	held := pollUntil(t, a, 0, countAtLeast(1))
	if err := a.Close(testCtx(t)); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The lock duration is far longer than this test: only the release on Close lets b
	// have the records a held.
	bc := newTestShareConsumer(t, b.Addr, "sg-close", "sc", nil)
	t0 := time.Now()
	again := pollUntil(t, bc, 0, func(s []*Record) bool {
		for _, r := range held {
			if !hasValue(string(r.Value))(s) {
				return false
			}
		}
		return true
	})
	if d := time.Since(t0); d > 20*time.Second {
		t.Fatalf("records came back after %v: lock expiry (30s), not the release on Close", d)
	}
	for _, r := range again {
		for _, h := range held {
			if string(h.Value) == string(r.Value) && r.DeliveryCount != h.DeliveryCount+1 {
				t.Fatalf("%s: delivery count %d after %d", r.Value, r.DeliveryCount, h.DeliveryCount)
			}
		}
	}
}
