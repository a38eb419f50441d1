package eos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/exactq/exactq/eos/eostest"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// abortEnv is a broker with 20 inputs on one partition, and record locks of a minute: a
// record that is not ACQUIRED any more right after an abort was given back, not expired.
func abortEnv(t *testing.T) *testbroker.Broker {
	b := eostest.Start(t)
	eostest.CreateTopic(t, b.Addr, "in", 1)
	eostest.CreateTopicWithConfig(t, b.Addr, "small", 1, map[string]string{"max.message.bytes": "1024"})
	in := eostest.Inputs(20)
	for i := 0; i < len(in); i += 5 {
		eostest.Produce(t, b.Addr, "in", 1, in[i:i+5]) // a batch each: a poll gets 5 of them
	}
	return b
}

func testMember(t *testing.T, b *testbroker.Broker, group string) *member {
	t.Helper()
	eostest.ReadFromEarliest(t, b.Addr, group)
	eostest.SetGroupConfig(t, b.Addr, group, "share.record.lock.duration.ms", "60000")
	m, err := newMember(memberConfig{
		consumer: consumerConfig{brokers: []string{b.Addr}, group: group, topics: []string{"in"}, maxRecords: 5},
		newProducer: func() (txnProducer, error) {
			return newKgoProducer([]string{b.Addr}, group, time.Minute, nil)
		},
		replaceable: true,
		backoff:     20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.close(context.Background()) })
	if err := m.startTransactions(eostest.Context(t)); err != nil {
		t.Fatal(err)
	}
	return m
}

// pollSome polls until it gets records; it opens the transaction first.
func pollSome(t *testing.T, m *member) []*kgo.Record {
	t.Helper()
	ctx := eostest.Context(t)
	if err := m.begin(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		recs, err := m.poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			return recs
		}
	}
}

func acceptAll(t *testing.T, m *member, recs []*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		if err := m.acknowledge(r, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.collect(); err != nil {
		t.Fatal(err)
	}
}

// redelivered polls again and checks that what comes back was delivered before.
func redelivered(t *testing.T, m *member) {
	t.Helper()
	recs := pollSome(t, m)
	for _, r := range recs {
		if n := kgoext.DeliveryCount(r); n < 2 {
			t.Fatalf("offset %d delivered %d times after the abort, want a redelivery", r.Offset, n)
		}
	}
}

// Whatever step a transaction failed at, abort leaves no record ACQUIRED or TX_PENDING:
// the inputs are available again at once (not after their one-minute lock).
func TestAbortGivesEveryInputBack(t *testing.T) {
	b := abortEnv(t)

	t.Run("collected, staged and unacknowledged inputs", func(t *testing.T) {
		m := testMember(t, b, "g-mixed")
		ctx := eostest.Context(t)
		acceptAll(t, m, pollSome(t, m))
		if err := m.stage(ctx); err != nil { // staged: TX_PENDING
			t.Fatal(err)
		}
		acceptAll(t, m, pollSome(t, m)) // collected, not staged
		second := pollSome(t, m)        // half acknowledged, half not
		for _, r := range second[:len(second)/2] {
			if err := m.acknowledge(r, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.abort(ctx); err != nil {
			t.Fatal(err)
		}
		eostest.WaitNoneHeld(t, b, "g-mixed")
		redelivered(t, m)
	})

	t.Run("transaction doomed by a refused output", func(t *testing.T) {
		m := testMember(t, b, "g-doomed")
		ctx := eostest.Context(t)
		recs := pollSome(t, m)
		m.produce(ctx, &kgo.Record{Topic: "small", Value: make([]byte, 4096)})
		if err := m.producer.flush(ctx); err != nil { // the refusal is known before staging
			t.Fatal(err)
		}
		acceptAll(t, m, recs)
		err := m.commit(ctx)
		if !errors.Is(err, ErrProduce) {
			t.Fatalf("commit: %v, want ErrProduce", err)
		}
		if m.unstaged.len() == 0 {
			t.Fatal("a doomed transaction staged the acknowledgements")
		}
		if err := m.abort(ctx); err != nil {
			t.Fatal(err)
		}
		eostest.WaitNoneHeld(t, b, "g-doomed")
		redelivered(t, m)
	})

	t.Run("consumer replaced", func(t *testing.T) {
		m := testMember(t, b, "g-replaced")
		acceptAll(t, m, pollSome(t, m))
		if err := m.replaceConsumer(eostest.Context(t)); err != nil {
			t.Fatal(err)
		}
		eostest.WaitNoneHeld(t, b, "g-replaced")
	})
}

// A Checkpointer's producer never starts the plain way (InitProducerId without
// keepPreparedTxn), which would abort the prepared transaction of a checkpoint that may
// be durable: the member refuses to start or replace it, the transaction stays prepared,
// and the next instance's Recover with the checkpoint's snapshot finds and commits it,
// every output once.
func TestCheckpointerProducerStartsOnlyInRecover(t *testing.T) {
	b := eostest.Start(t, eostest.TwoPhaseCommit())
	eostest.CreateTopic(t, b.Addr, "in", 1)
	eostest.CreateTopic(t, b.Addr, "out", 1)
	eostest.ReadFromEarliest(t, b.Addr, "ckpt")
	inputs := eostest.Inputs(10)
	eostest.Produce(t, b.Addr, "in", 1, inputs)
	cfg := CheckpointerConfig{Brokers: []string{b.Addr}, Group: "ckpt", Topics: []string{"in"},
		TransactionalID: "ckpt-start", RetryBackoff: 20 * time.Millisecond}
	open := func() *Checkpointer {
		c, err := NewCheckpointer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	ctx := eostest.Context(t)
	c := open()
	if _, err := c.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < len(inputs); {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range recs {
			if err := c.Produce(ctx, &kgo.Record{Topic: "out", Value: append([]byte("out-"), in.Value...)}); err != nil {
				t.Fatal(err)
			}
			if err := c.Acknowledge(in, false); err != nil {
				t.Fatal(err)
			}
		}
		seen += len(recs)
	}
	if err := c.PrepareCommit(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := c.SnapshotState()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.m.startTransactions(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("startTransactions of a Checkpointer's producer: %v, want ErrFenced", err)
	}
	if err := c.m.replaceProducer(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("replaceProducer of a Checkpointer's producer: %v, want ErrFenced", err)
	}

	rec, err := open().Recover(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Found || !rec.Committed {
		t.Fatalf("Recover with the checkpoint's snapshot: %+v, want the prepared transaction found and committed", rec)
	}
	want := make([]string, len(inputs))
	for i, v := range inputs {
		want[i] = "out-" + v
	}
	eostest.ExactlyOnce(t, eostest.Committed(t, b.Addr, "out", 1), want)
}
