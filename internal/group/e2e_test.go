package group_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// consumed records what consumers saw, by member.
type consumed struct {
	mu    sync.Mutex
	byKey map[string]int
}

func (c *consumed) add(rs []*kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rs {
		c.byKey[string(r.Value)]++
	}
}

func (c *consumed) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// twice returns a record consumed more than once and its count, or "" and 0.
func (c *consumed) twice() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for v, n := range c.byKey {
		if n != 1 {
			return v, n
		}
	}
	return "", 0
}

// e2eMember is a running group consumer.
type e2eMember struct {
	cl   *kgo.Client
	done chan struct{}
}

// startConsumer runs a group consumer that records what it polls in seen, commits it and
// then lets a rebalance go on (one kgo.BlockRebalanceOnPoll holds meanwhile).
func startConsumer(t *testing.T, ctx context.Context, seen *consumed, opts ...kgo.Opt) *e2eMember {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m := &e2eMember{cl: cl, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			rs := fs.Records()
			seen.add(rs)
			if len(rs) > 0 {
				if err := cl.CommitRecords(ctx, rs...); err != nil && ctx.Err() == nil {
					t.Errorf("commit: %v", err)
				}
			}
			cl.AllowRebalance()
		}
	}()
	return m
}

// TestKgoConsumerProtocolGroup runs franz-go's KIP-848 consumer (kgo.ServerSideBalancer,
// group.protocol=consumer) against a real broker: three members split a six-partition
// topic two partitions each, as ConsumerGroupDescribe shows; they consume and commit
// every record; when one leaves, the other two take its partitions over and the offsets
// it committed are where they resume.
// startKIP848 starts a broker with a 500 ms consumer-protocol heartbeat interval (Kafka's
// floor is 5 s; it keeps the rebalances short) and creates a six-partition topic. It
// returns the broker, a producer that picks partitions by hand and its admin client.
func startKIP848(t *testing.T, ctx context.Context, topic string) (*testbroker.Broker, *kgo.Client, *kadm.Client) {
	t.Helper()
	b := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500"}))
	producer, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	adm := kadm.NewClient(producer)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	return b, producer, adm
}

func TestKgoConsumerProtocolGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, group, perPartition = "kip848", "kip848-group", 50
	b, producer, adm := startKIP848(t, ctx, topic)
	produce := func(round int) {
		var rs []*kgo.Record
		for p := range int32(6) {
			for i := range perPartition {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "r%d-p%d-%d", round, p, i)})
			}
		}
		if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)

	seen := &consumed{byKey: map[string]int{}}
	type member = e2eMember
	startMember := func(balancer kgo.GroupBalancer) *member {
		return startConsumer(t, ctx, seen, kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ServerSideBalancer(), kgo.Balancers(balancer), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	ms := []*member{startMember(kgo.CooperativeStickyBalancer()), startMember(kgo.CooperativeStickyBalancer()),
		startMember(kgo.CooperativeStickyBalancer())}
	defer func() {
		for _, m := range ms {
			m.cl.Close()
		}
	}()

	describe := func() kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, producer)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups[0]
	}
	poll := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition, not waiting for time
		}
	}
	balanced := func(n int) func() bool {
		return func() bool {
			g := describe()
			if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != n {
				return false
			}
			total := 0
			for _, m := range g.Members {
				c := 0
				for _, tp := range m.Assignment.TopicPartitions {
					c += len(tp.Partitions)
				}
				if c < 6/n || c > (6+n-1)/n {
					return false
				}
				total += c
			}
			return total == 6
		}
	}
	poll("three balanced members", balanced(3))
	poll("every record of round 0", func() bool { return seen.distinct() == 6*perPartition })

	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"consumer"}
	lresp, err := lreq.RequestWith(ctx, producer)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].Group != group || lresp.Groups[0].GroupType != "consumer" {
		t.Fatalf("ListGroups with type consumer: %+v", lresp.Groups)
	}

	// One member leaves (its leave heartbeat, epoch -1); the others take over.
	ms[2].cl.Close()
	<-ms[2].done
	ms = ms[:2]
	poll("two balanced members", balanced(2))
	produce(1)
	poll("every record of round 1", func() bool { return seen.distinct() == 2*6*perPartition })
	poll("committed offsets at the end of every partition", func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		for p := range int32(6) {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.At != 2*perPartition {
				return false
			}
		}
		return true
	})
}
