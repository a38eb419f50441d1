package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// A read_committed consumer whose fetch only skips an aborted transaction and control
// batches gets a Poll with no records, its position at the end: reading up to the end
// offsets needs no timeout.
func TestIntegrationPollReturnsAfterSkippedBatches(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithoutAutoCreate())
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "skip", 1)
	ctx := testCtx(t)
	p := newTestProducer(t, b.Addr, func(c *ProducerConfig) { c.TransactionalID = "skip-tx" })
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			p.Produce(ctx, &Record{Topic: "skip", Value: []byte(v)}, nil)
		}
		if err := p.Flush(ctx); err != nil { // AbortTransaction drops unsent records
			t.Fatal(err)
		}
		end := p.AbortTransaction
		if commit {
			end = p.CommitTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
	}
	txn(false, "x1", "x2", "x3") // offsets 0-2 aborted, 3 the abort marker
	tp := TopicPartition{"skip", 0}
	end := func() int64 {
		t.Helper()
		offs, err := a.ListOffsets(ctx, ReadCommitted, map[TopicPartition]int64{tp: int64(Latest)})
		if err != nil {
			t.Fatal(err)
		}
		return offs[tp].Offset
	}
	// EndTxn answers before the markers are written; the LSO moves once they are.
	eventually(t, "the abort marker is written", func() error {
		if e := end(); e != 4 {
			return fmt.Errorf("end offset %d, want 4", e)
		}
		return nil
	})

	c, err := NewConsumer(ConsumerConfig{Brokers: []string{b.Addr}, IsolationLevel: ReadCommitted, FetchMaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Assign(map[TopicPartition]Offset{tp: Earliest})
	// FetchMaxWait is an hour: only a fetch that moved the position can end this Poll
	// before testCtx does.
	recs, err := c.Poll(ctx)
	if err != nil || len(recs) != 0 {
		t.Fatalf("poll over an aborted transaction: %d records, %v", len(recs), err)
	}
	if pos, _ := c.Position(tp); pos != 4 {
		t.Fatalf("position %d after the aborted transaction, want 4", pos)
	}

	// A committed transaction after it: its records, then the position past the marker.
	txn(true, "c1", "c2") // offsets 4-5, marker 6
	eventually(t, "the commit marker is written", func() error {
		if e := end(); e != 7 {
			return fmt.Errorf("end offset %d, want 7", e)
		}
		return nil
	})
	var got []string
	for {
		pos, _ := c.Position(tp)
		if pos >= end() {
			break
		}
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	if pos, _ := c.Position(tp); len(got) != 2 || got[0] != "c1" || got[1] != "c2" || pos != 7 {
		t.Fatalf("committed transaction: %q, position %d; want [c1 c2] at 7", got, pos)
	}
}

// A producer asks the broker to create unknown topics by default (as Java's client and
// kcat do); DisableAutoTopicCreation turns that off.
func TestIntegrationProducerAutoCreatesTopics(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	ctx := testCtx(t)
	p := newTestProducer(t, b.Addr, nil)
	if err := p.ProduceSync(ctx, &Record{Topic: "auto", Value: []byte("v")}); err != nil {
		t.Fatalf("produce to a new topic with the default config: %v", err)
	}
	if names, _ := a.ListTopics(ctx); !contains(names, "auto") {
		t.Fatalf("topics %q lack the auto-created one", names)
	}
	strict := newTestProducer(t, b.Addr, func(c *ProducerConfig) { c.DisableAutoTopicCreation = true; c.UnknownTopicRetries = 1 })
	if err := strict.ProduceSync(ctx, &Record{Topic: "manual", Value: []byte("v")}); err == nil {
		t.Fatal("DisableAutoTopicCreation: produce to an unknown topic succeeded")
	}
	if names, _ := a.ListTopics(ctx); contains(names, "manual") {
		t.Fatal("DisableAutoTopicCreation: the topic was created")
	}
}

// eventually polls cond until it returns nil, failing the test after waitLimit. For
// broker state that changes asynchronously (transaction markers) and has no
// notification to wait on.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	const pollInterval, waitLimit = 10 * time.Millisecond, 30 * time.Second
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: still not true after %v: %v", what, waitLimit, err)
		}
	}
}
