package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// Integration tests of consumer groups against the broker's group coordinator.

// eosWorker is one consume-transform-produce member: a group consumer and a
// transactional producer, committing its input offsets in the output transaction.
type eosWorker struct {
	assigned  atomic.Int32 // partitions assigned so far (OnAssigned)
	processed int
	c         *Consumer
	p         *Producer
	committed map[TopicPartition]int64 // input positions of the last committed transaction
}

func newEOSWorker(t *testing.T, addr, name string) *eosWorker {
	w := &eosWorker{committed: map[TopicPartition]int64{}}
	c, err := NewConsumer(ConsumerConfig{
		OnAssigned:        func(_ context.Context, tps []TopicPartition) { w.assigned.Add(int32(len(tps))) },
		Brokers:           []string{addr},
		Net:               NetConfig{RetryBackoff: 10 * time.Millisecond},
		Group:             "eos",
		IsolationLevel:    ReadCommitted,
		DisableAutoCommit: true,
		HeartbeatInterval: 50 * time.Millisecond,
		FetchMaxWait:      50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	p := newTestProducer(t, addr, func(cfg *ProducerConfig) {
		cfg.TransactionalID = "eos-" + name
		cfg.Partitioner = nil
		cfg.BatchMaxBytes = 0
	})
	if err := c.Subscribe("in"); err != nil {
		t.Fatal(err)
	}
	w.c, w.p = c, p
	return w
}

// step polls once (briefly) and, if there were records, runs one transaction for them.
// It returns how many inputs were committed.
func (w *eosWorker) step(t *testing.T) int {
	t.Helper()
	ctx := testCtx(t)
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	recs, err := w.c.Poll(pctx)
	cancel()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("poll: %v", err)
	}
	if len(recs) == 0 {
		return 0
	}
	if err := w.p.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		w.p.Produce(ctx, &Record{Topic: "out", Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
	}
	offsets := w.c.UncommittedOffsets()
	err = w.p.SendOffsetsToTransaction(ctx, offsets, w.c.GroupMetadata())
	if err == nil {
		err = w.p.CommitTransaction(ctx)
	}
	if err != nil {
		if !errors.Is(err, ErrTransactionAbortable) {
			t.Fatalf("transaction: %v", err)
		}
		// A rebalance moved the generation on (KIP-447 fencing): abort and rewind the
		// partitions still assigned to the last committed positions.
		if err := w.p.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			tp := TopicPartition{r.Topic, r.Partition}
			start := Earliest
			if o, ok := w.committed[tp]; ok {
				start = Offset(o)
			}
			_ = w.c.Seek(tp, start) // not assigned any more: the new owner starts at the commit
		}
		return 0
	}
	for tp, o := range offsets {
		w.committed[tp] = o
	}
	w.processed += len(recs)
	return len(recs)
}

func TestIntegrationGroupConsumeTransformProduce(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithoutAutoCreate())
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "in", 4)
	createTopic(t, a, "out", 4)
	const n = 400
	src := newTestProducer(t, b.Addr, func(c *ProducerConfig) { c.Partitioner = nil; c.BatchMaxBytes = 0 })
	produceInputs := func(from, to int) {
		for i := from; i < to; i++ {
			src.Produce(testCtx(t), &Record{Topic: "in", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, nil)
		}
		if err := src.Flush(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	produceInputs(0, n/2)

	w1 := newEOSWorker(t, b.Addr, "1")
	done := 0
	for done < n/4 {
		done += w1.step(t)
	}
	// A second member joins mid-stream: a cooperative rebalance moves half the
	// partitions to it while w1 keeps working.
	w2 := newEOSWorker(t, b.Addr, "2")
	for w2.assigned.Load() == 0 {
		done += w1.step(t)
		done += w2.step(t)
	}
	produceInputs(n/2, n)
	for done < n {
		done += w1.step(t)
		done += w2.step(t)
	}
	if w2.processed == 0 || w1.c.GroupMetadata().GenerationID < 2 {
		t.Fatalf("w2 processed %d; w1 in %+v", w2.processed, w1.c.GroupMetadata())
	}
	if done != n {
		t.Fatalf("committed %d inputs, want %d", done, n)
	}

	got := consumeAll(t, b.Addr, "out", 4, n, ConsumerConfig{IsolationLevel: ReadCommitted})
	seen := map[string]int{}
	for _, recs := range got {
		for _, r := range recs {
			seen[string(r.Value)]++
		}
	}
	for i := 0; i < n; i++ {
		if c := seen[fmt.Sprintf("out-%d", i)]; c != 1 {
			t.Fatalf("output of input %d seen %d times", i, c)
		}
	}
	total := int64(0)
	for p := int32(0); p < 4; p++ {
		total += committedOffset(t, w1.p.cl, "eos", TopicPartition{"in", p})
	}
	if total != n {
		t.Fatalf("committed input offsets sum to %d, want %d", total, n)
	}
}

func TestIntegrationGroupCommitAndResume(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithoutAutoCreate())
	createTopic(t, newTestAdmin(t, b.Addr), "g", 2)
	src := newTestProducer(t, b.Addr, func(c *ProducerConfig) { c.Partitioner = nil; c.BatchMaxBytes = 0 })
	for i := 0; i < 20; i++ {
		src.Produce(testCtx(t), &Record{Topic: "g", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := src.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	consume := func(want int) int {
		c, err := NewConsumer(ConsumerConfig{Brokers: []string{b.Addr}, Group: "resume", Balancers: []Balancer{RangeBalancer()}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe("g"); err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < want {
			recs, err := c.Poll(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			got += len(recs)
		}
		c.Close() // auto commit on close
		return got
	}
	if got := consume(20); got != 20 {
		t.Fatalf("first consumer got %d", got)
	}
	for i := 20; i < 25; i++ {
		src.Produce(testCtx(t), &Record{Topic: "g", Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := src.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The second consumer resumes at the committed offsets: it sees only the new five.
	if got := consume(5); got != 5 {
		t.Fatalf("second consumer got %d records, want 5", got)
	}
}
