package share_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// Issue 16, through a real broker: confluent-kafka's ShareConsumer closes by sending the
// leave heartbeat (epoch -1) and then ShareAcknowledge with session epoch -1 carrying its
// last acknowledgements. The session outlives the leave, as in Kafka 4.4, so those
// acknowledgements apply: the records are ACKNOWLEDGED (the start offset passes them) and
// another member never gets them. Before, the leave closed the session, the close got
// SHARE_SESSION_NOT_FOUND and every record was delivered again.
func TestLeaveThenCloseSessionAppliesAcks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb := testbroker.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr), kgo.DefaultProduceTopic("leave-close"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const group, topic = "leave-close-group", "leave-close"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if err := testbroker.SetGroupConfigs(ctx, cl, group, "share.auto.offset.reset", "earliest"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('0' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := md.Topics[topic].ID

	m1 := join(t, ctx, cl, group, topic, "member-1")
	var got int64 // the first fetch opens the session, and acquires too
	for got < 10 && ctx.Err() == nil {
		for _, r := range m1.fetch(t, ctx, topicID) {
			got += r.LastOffset - r.FirstOffset + 1
		}
	}
	if got != 10 {
		t.Fatalf("member-1 acquired %d records, want 10", got)
	}

	m1.leave(t, ctx)
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &m1.group, &m1.id, -1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = topicID
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 9, []int8{1} // ACCEPT
	ap.AcknowledgementBatches = append(ap.AcknowledgementBatches, ab)
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	ar, err := ack.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if ar.ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge epoch -1 after the leave: %v", kerr.ErrorForCode(ar.ErrorCode))
	}
	if c := ar.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("ShareAcknowledge epoch -1 after the leave, partition: %v", kerr.ErrorForCode(c))
	}

	states := tb.Broker.DescribeShareGroupState(group)
	if len(states) != 1 || states[0].State.StartOffset != 10 {
		t.Fatalf("share partition state after the close %+v, want start offset 10 (0-9 ACKNOWLEDGED)", states)
	}
	m2 := join(t, ctx, cl, group, topic, "member-2")
	for range 2 {
		if rs := m2.fetch(t, ctx, topicID); len(rs) != 0 {
			t.Fatalf("member-2 was delivered %+v, acknowledged by member-1's close", rs)
		}
	}
}

type member struct {
	cl        *kgo.Client
	group, id string
	epoch     int32
	session   int32
}

func join(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic, id string) *member {
	t.Helper()
	m := &member{cl: cl, group: group, id: id}
	for ctx.Err() == nil {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, id, m.epoch
		req.SubscribedTopicNames = []string{topic}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("share heartbeat: %v %+v", err, resp)
		}
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil && len(resp.Assignment.TopicPartitions) > 0 {
			return m
		}
	}
	t.Fatal("no assignment")
	return nil
}

func (m *member) leave(t *testing.T, ctx context.Context) {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = m.group, m.id, -1
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("leave heartbeat: %v %+v", err, resp)
	}
}

// fetch sends a ShareFetch for partition 0 on the member's session (the first opens it)
// and returns the acquired ranges.
func (m *member) fetch(t *testing.T, ctx context.Context, topicID [16]byte) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 200, 1, 1<<20, 100, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v %+v", err, resp)
	}
	m.session++
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, tr := range resp.Topics {
		for _, p := range tr.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("share fetch partition: %v", kerr.ErrorForCode(p.ErrorCode))
			}
			out = append(out, p.AcquiredRecords...)
		}
	}
	return out
}
