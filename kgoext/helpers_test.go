package kgoext_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fastShareBrokerConfig shortens share-group heartbeats and assignment pacing.
var fastShareBrokerConfig = map[string]string{
	"group.share.heartbeat.interval.ms":       "200",
	"group.share.min.heartbeat.interval.ms":   "200",
	"group.share.assignment.interval.ms":      "0",
	"group.share.min.record.lock.duration.ms": "1000",
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a kgo client of addr, closed at cleanup.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newTxnClient is a transactional kgo client set up as the package doc says.
func newTxnClient(t *testing.T, addr, id string) *kgo.Client {
	t.Helper()
	opts := append([]kgo.Opt{kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner())}, kgoext.TransactionalOpts()...)
	return newClient(t, addr, opts...)
}

// shareSetup starts a broker, creates topic with nparts partitions and the "out" topic,
// makes group read from the earliest offset and produces n records "v0".."v<n-1>" (value i
// to partition i % nparts, one record per batch).
func shareSetup(t *testing.T, topic, group string, nparts int32, n int) (*testbroker.Broker, *kgo.Client) {
	t.Helper()
	b := testbroker.Start(t, testbroker.WithConfig(fastShareBrokerConfig))
	cl := newClient(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testCtx(t)
	adm := kadm.NewClient(cl)
	for _, tp := range []struct {
		name  string
		parts int32
	}{{topic, nparts}, {"out", 1}} {
		if _, err := adm.CreateTopic(ctx, tp.parts, 1, nil, tp.name); err != nil {
			t.Fatalf("create %s: %v", tp.name, err)
		}
	}
	setGroupConfig(t, cl, group, "share.auto.offset.reset", "earliest")
	produceValues(t, cl, topic, nparts, 0, n)
	return b, cl
}

func produceValues(t *testing.T, cl *kgo.Client, topic string, nparts int32, from, to int) {
	t.Helper()
	ctx := testCtx(t)
	for i := from; i < to; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % nparts, Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func newConsumer(t *testing.T, addr, group, topic string, opts ...kgoext.ShareOpt) *kgoext.ShareConsumer {
	t.Helper()
	all := append([]kgoext.ShareOpt{kgoext.ShareTopics(topic), kgoext.ShareMaxWait(200 * time.Millisecond), kgoext.ShareMaxRecords(10)}, opts...)
	c, err := kgoext.NewShareConsumer(newClient(t, addr), group, all...)
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

// pollUntil polls c (acknowledging each record with ack when ack > 0, explicit mode)
// until stop says so; it returns every record seen.
func pollUntil(t *testing.T, c *kgoext.ShareConsumer, ack kgoext.AckType, stop func(seen []*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	var seen []*kgo.Record
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

func hasValue(v string) func([]*kgo.Record) bool {
	return func(seen []*kgo.Record) bool {
		for _, r := range seen {
			if string(r.Value) == v {
				return true
			}
		}
		return false
	}
}

func countAtLeast(n int) func([]*kgo.Record) bool {
	return func(seen []*kgo.Record) bool { return len(seen) >= n }
}

func valueCounts(rs []*kgo.Record) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[string(r.Value)]++
	}
	return m
}

// committedOutputs commits an "end" record with txn and reads "out" read_committed up to
// it, returning the count of each value (earlier rounds' "end" records included).
func committedOutputs(t *testing.T, addr string, txn *kgo.Client) map[string]int {
	t.Helper()
	ctx := testCtx(t)
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	mark := fmt.Appendf(nil, "%s-%d", t.Name(), time.Now().UnixNano())
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "out", Key: mark, Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	rd := newClient(t, addr, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]int{}
	for done := false; !done; {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading out: %v (so far %v)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			done = done || string(r.Key) == string(mark)
		})
	}
	return got
}

// sentinelOnly produces "sentinel" to topic and has a fresh member of group poll until it
// arrives: what it got before is what the group still had to deliver.
func sentinelOnly(t *testing.T, addr string, cl *kgo.Client, group, topic string) []*kgo.Record {
	t.Helper()
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, addr, group, topic)
	seen := pollUntil(t, c, 0, hasValue("sentinel"))
	var other []*kgo.Record
	for _, r := range seen {
		if string(r.Value) != "sentinel" {
			other = append(other, r)
		}
	}
	return other
}

// waitTxnState polls DescribeTransactions until id is in state want (Kafka's names:
// CompleteCommit, CompleteAbort, ...), failing on any state but want and its Prepare*.
func waitTxnState(t *testing.T, cl *kgo.Client, id, want string) {
	t.Helper()
	ctx := testCtx(t)
	adm := kadm.NewClient(cl)
	err := await.Until(60*time.Second, 10*time.Millisecond, func() error {
		ds, err := adm.DescribeTransactions(ctx, id)
		d, ok := ds[id]
		switch {
		case err != nil || !ok || d.Err != nil:
			// A connection the broker's restart closed, or a coordinator loading: ask again.
			return fmt.Errorf("describe %s: %+v, %v", id, d, err)
		case d.State == want:
			return nil
		case d.State != "Prepare"+want[len("Complete"):]:
			return await.Stop(fmt.Errorf("transaction %s is %s, want %s", id, d.State, want))
		}
		return fmt.Errorf("transaction %s is %s", id, d.State)
	})
	if err != nil {
		t.Fatalf("transaction %s not %s: %v", id, want, err)
	}
}

// setGroupConfig sets one group config (IncrementalAlterConfigs, SET).
func setGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) {
	t.Helper()
	if err := testbroker.SetGroupConfigs(testCtx(t), cl, group, name, value); err != nil {
		t.Fatalf("%s=%s on group %s: %v", name, value, group, err)
	}
}
