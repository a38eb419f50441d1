package group_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKgoOnlineMigration runs the online migration against a real broker with franz-go
// on both protocols: two classic consumers (cooperative-sticky) share a topic; a KIP-848
// consumer joins and the group becomes a consumer group of two classic members and one
// consumer-protocol member, each with two partitions; the KIP-848 consumer leaves and the
// group is classic again, its partitions back with the classic two. Every consumer
// commits what it polled before it lets a rebalance go on, so each record is consumed
// exactly once across both conversions, and the committed offsets end at the end.
func TestKgoOnlineMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, group, perPartition = "migrate", "migrate-group", 40
	b, producer, adm := startKIP848(t, ctx, topic)
	round := 0
	produce := func() {
		var rs []*kgo.Record
		for p := range int32(6) {
			for i := range perPartition {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "r%d-p%d-%d", round, p, i)})
			}
		}
		round++
		if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	seen := &consumed{byKey: map[string]int{}}
	distinct := seen.distinct
	type member = e2eMember
	start := func(kip848 bool) *member {
		opts := []kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.HeartbeatInterval(300 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
		if kip848 {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		return startConsumer(t, ctx, seen, opts...)
	}
	stop := func(m *member) {
		m.cl.Close()
		<-m.done
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
	describeConsumer := func() kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, producer)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups[0]
	}
	groupType := func() string {
		l, err := adm.ListGroups(ctx)
		if err != nil {
			return ""
		}
		for _, g := range l {
			if g.Group == group {
				return g.GroupType
			}
		}
		return ""
	}

	a, c := start(false), start(false)
	defer stop(a)
	defer stop(c)
	produce()
	poll("round 0 consumed by the classic group", func() bool { return distinct() == 6*perPartition })
	if gt := groupType(); gt != "classic" {
		t.Fatalf("group type %q before the upgrade", gt)
	}

	x := start(true)
	poll("a consumer group of two classic members and one consumer member, two partitions each", func() bool {
		g := describeConsumer()
		if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 3 {
			return false
		}
		types := map[int8]int{}
		for _, m := range g.Members {
			n := 0
			for _, tp := range m.Assignment.TopicPartitions {
				n += len(tp.Partitions)
			}
			if n != 2 {
				return false
			}
			types[m.MemberType]++
		}
		return types[0] == 2 && types[1] == 1
	})
	produce()
	poll("round 1 consumed by the consumer group", func() bool { return distinct() == 2*6*perPartition })

	stop(x)
	poll("the classic group again, stable with two members", func() bool {
		if groupType() != "classic" {
			return false
		}
		d, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return false
		}
		g := d[group]
		return g.State == "Stable" && len(g.Members) == 2
	})
	produce()
	poll("round 2 consumed by the classic group", func() bool { return distinct() == 3*6*perPartition })
	poll("committed offsets at the end of every partition", func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		for p := range int32(6) {
			if o, ok := offs.Lookup(topic, p); !ok || o.At != 3*perPartition {
				return false
			}
		}
		return true
	})
	if v, n := seen.twice(); n != 0 {
		t.Fatalf("record %s consumed %d times", v, n)
	}
}
