package twopc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext/twopc"
)

// maxTimeout is transaction.max.timeout.ms in these tests: a normal transaction open
// longer than this is aborted within abortScan.
const (
	maxTimeout = 1500 * time.Millisecond
	abortScan  = 100 * time.Millisecond
)

func startBroker(t *testing.T, twoPC bool) *testbroker.Broker {
	t.Helper()
	return testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"transaction.max.timeout.ms":                                  fmt.Sprint(maxTimeout.Milliseconds()),
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": fmt.Sprint(abortScan.Milliseconds()),
		"transaction.two.phase.commit.enable":                         fmt.Sprint(twoPC),
		"group.share.heartbeat.interval.ms":                           "200",
		"group.share.min.heartbeat.interval.ms":                       "200",
		"group.share.assignment.interval.ms":                          "0",
		"group.share.min.record.lock.duration.ms":                     "1000",
	}))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient is the kgo client a two-phase-commit program builds: kgo's defaults plus
// InitProducerId v6.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MaxVersions(twopc.Versions()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newProducer(t *testing.T, addr, id string) *twopc.Producer {
	t.Helper()
	p, err := twopc.NewProducer(newClient(t, addr), id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func createTopics(t *testing.T, addr string, topics ...string) {
	t.Helper()
	createTopicsN(t, addr, 1, topics...)
}

func createTopicsN(t *testing.T, addr string, partitions int32, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	resp, err := adm.CreateTopics(testCtx(t), partitions, 1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// describe is the coordinator's view of transactional id id.
func describe(t *testing.T, addr, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := kadm.NewClient(newClient(t, addr)).DescribeTransactions(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %+v", id, ds)
	}
	return d
}

// lastStable is topic[0]'s last stable offset: how far read_committed readers may read.
func lastStable(t *testing.T, addr, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), newClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets %s: code %d", topic, p.ErrorCode)
	}
	return p.Offset
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readCommitted is what a read_committed kgo consumer reads of topic from the start:
// every value with the offset it was read at. It writes a non-transactional end marker
// first and reads until it: the marker is readable only once every transaction before it
// is decided.
func readCommitted(t *testing.T, addr, topic string) map[string][]int64 {
	t.Helper()
	ctx := testCtx(t)
	marker := fmt.Sprintf("end-%d", time.Now().UnixNano())
	if err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(marker)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := map[string][]int64{}
	for {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (read %v)", topic, err, out)
		}
		seen := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == marker {
				seen = true
			} else if len(r.Value) < 4 || string(r.Value[:4]) != "end-" {
				out[string(r.Value)] = append(out[string(r.Value)], r.Offset)
			}
		})
		if seen {
			return out
		}
	}
}
