package hostile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
)

// Finding 4: committed offsets outlived their topic, so a group resuming on a topic of the
// same name silently skipped that many records. Kafka deletes a deleted partition's
// offsets (durably: also after a restart).
func TestOffsetsDeletedWithTopic(t *testing.T) {
	const topic, group = "recreated", "resuming-group"
	runAttack(t, attack{
		name: "#4 offsets outlive their topic", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm := kadm.NewClient(newClient(t, h.addr()))
			createTopic(t, h.addr(), topic, 1, nil)
			produceValues(t, h.addr(), topic, 20)
			var offs kadm.Offsets
			offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 15, LeaderEpoch: -1})
			if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if _, err := adm.DeleteTopic(ctx, topic); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if err := await.Until(10*time.Second, 10*time.Millisecond, func() error {
				_, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
				return err
			}); err != nil {
				t.Fatalf("the deleted topic could not be created again: %v", err)
			}
			checkNoOffset(t, adm, topic, group, "after DeleteTopics and CreateTopics")
		},
		after: func(t *testing.T, h *harness) {
			adm := kadm.NewClient(newClient(t, h.addr()))
			checkNoOffset(t, adm, topic, group, "after a restart")
			// The group resumes on the new topic and must read everything written to it.
			// More records than the old offset, so a stale offset skips some (rather than being
			// out of range and reset).
			const n = 30
			produceValues(t, h.addr(), topic, n)
			cl := newClient(t, h.addr(), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []int64
			for len(got) < n && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
			}
			if len(got) < n || got[0] != 0 {
				t.Errorf("the group resuming on the recreated topic read offsets %v of 0-%d", got, n-1)
			}
		},
	})
}

// checkNoOffset fails the test when group has a committed offset for topic.
func checkNoOffset(t *testing.T, adm *kadm.Client, topic, group, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets %s: %v", when, err)
	}
	if o, ok := fetched.Lookup(topic, 0); ok && o.At >= 0 {
		t.Errorf("OffsetFetch %s answers the deleted topic's offset %d", when, o.At)
	}
}

// produceValues writes n records to topic partition 0 (acks=all) and waits for them.
func produceValues(t *testing.T, addr, topic string, n int) {
	t.Helper()
	produceValuesWith(t, newClient(t, addr), topic, n)
}

// produceValuesWith writes n records to topic partition 0 with cl.
func produceValuesWith(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "good-%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}
