package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Integration tests of the transactional producer against the broker's transaction
// coordinator (transaction.version 2 finalized; v1 forced on the client side as well).

func TestIntegrationTransactions(t *testing.T) {
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("forceV1=%v", v1), func(t *testing.T) {
			b := testbroker.Start(t, testbroker.WithoutAutoCreate())
			a := newTestAdmin(t, b.Addr)
			createTopic(t, a, "out", 2)
			createTopic(t, a, "in", 1)
			ctx := testCtx(t)
			p := newTestProducer(t, b.Addr, func(c *ProducerConfig) {
				c.TransactionalID = "itx"
				c.Partitioner = nil
				c.BatchMaxBytes = 0
			})
			p.txn.forceV1 = v1
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if got := p.txn.v2; got == v1 {
				t.Fatalf("transactions v2 = %v", got)
			}
			produceN := func(prefix string, n int) {
				t.Helper()
				for i := 0; i < n; i++ {
					p.Produce(ctx, &Record{Topic: "out", Key: []byte{byte(i)}, Value: []byte(fmt.Sprintf("%s%d", prefix, i))}, nil)
				}
			}
			run := func(commit bool, body func()) {
				t.Helper()
				if err := p.BeginTransaction(ctx); err != nil {
					t.Fatal(err)
				}
				body()
				end := p.AbortTransaction
				if commit {
					end = p.CommitTransaction
				}
				if err := end(ctx); err != nil {
					t.Fatalf("end (commit=%v): %v", commit, err)
				}
			}
			run(true, func() { produceN("a", 10) })
			run(false, func() { produceN("x", 5) })
			run(true, func() {}) // empty
			run(false, func() {})
			run(true, func() { // offsets only
				if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]int64{{"in", 0}: 17}, GroupMetadata{GroupID: "g", GenerationID: -1}); err != nil {
					t.Fatal(err)
				}
			})
			run(false, func() { // aborted offsets are not visible
				if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]int64{{"in", 0}: 99}, GroupMetadata{GroupID: "g", GenerationID: -1}); err != nil {
					t.Fatal(err)
				}
			})
			run(true, func() { produceN("b", 10) })

			got := consumeAll(t, b.Addr, "out", 2, 20, ConsumerConfig{IsolationLevel: ReadCommitted})
			var values []string
			for _, recs := range got {
				for _, r := range recs {
					values = append(values, string(r.Value))
				}
			}
			if len(values) != 20 {
				t.Fatalf("read_committed saw %d records: %q", len(values), values)
			}
			for _, v := range values {
				if v[0] == 'x' {
					t.Fatalf("read_committed saw aborted record %q", v)
				}
			}
			if off := committedOffset(t, p.cl, "g", TopicPartition{"in", 0}); off != 17 {
				t.Fatalf("committed offset %d, want 17", off)
			}
		})
	}
}

// committedOffset reads a group's committed offset with OffsetFetch (RequireStable).
func committedOffset(t *testing.T, cl *cluster, group string, tp TopicPartition) int64 {
	t.Helper()
	co := newCoordinator(cl, coordinatorGroup, group)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: tp.Topic, Partitions: []int32{tp.Partition}}}
	for {
		resp, err := co.do(testCtx(t), req, reqOpts{maxVersion: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range resp.(*kmsg.OffsetFetchResponse).Groups {
			for _, rt := range g.Topics {
				for _, p := range rt.Partitions {
					switch err := kerr.ErrorForCode(p.ErrorCode); {
					case err == nil:
						return p.Offset
					case errors.Is(err, kerr.UnstableOffsetCommit):
						// The commit markers are still being written: ask again.
					default:
						t.Fatalf("OffsetFetch: %v", err)
					}
				}
			}
		}
		if err := sleepCtx(testCtx(t), 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIntegrationTransactionZombieFenced(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, newTestAdmin(t, b.Addr), "z", 1)
	ctx := testCtx(t)
	mk := func() *Producer {
		return newTestProducer(t, b.Addr, func(c *ProducerConfig) { c.TransactionalID = "zombie"; c.Partitioner = nil; c.BatchMaxBytes = 0 })
	}
	old := mk()
	if err := old.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &Record{Topic: "z", Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	fresh := mk()
	if err := fresh.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	err := old.CommitTransaction(ctx)
	if !errors.Is(err, ErrProducerFatal) || !(errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)) {
		t.Fatalf("zombie commit: %v, want fenced", err)
	}
	if err := fresh.BeginTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctx, &Record{Topic: "z", Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if err := fresh.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, b.Addr, "z", 1, 1, ConsumerConfig{IsolationLevel: ReadCommitted})
	if len(got[0]) != 1 || string(got[0][0].Value) != "new" {
		t.Fatalf("read_committed: %v", got)
	}
}
