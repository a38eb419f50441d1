package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

// commitReborn creates topic "reborn" (2 partitions) and commits offsets 5 and 7 for
// group "g" as a simple (generation -1) group, the way an admin or a consumer outside
// group management does.
func commitReborn(t *testing.T, adm *kadm.Client) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "reborn"); err != nil {
		t.Fatal(err)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "reborn", Partition: 0, At: 5, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "reborn", Partition: 1, At: 7, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "g", os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// deleteAndRecreate deletes "reborn" and creates it again with the same partitions.
func deleteAndRecreate(t *testing.T, adm *kadm.Client) {
	t.Helper()
	ctx := ctxT(t)
	dr, err := adm.DeleteTopics(ctx, "reborn")
	if err == nil {
		err = dr.Error()
	}
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "reborn"); err != nil {
		t.Fatalf("re-create: %v", err)
	}
}

// assertNoRebornOffsets checks that group g has no committed offset for "reborn", asked
// both ways clients ask: by topic (what a resuming consumer does) and for all topics.
func assertNoRebornOffsets(t *testing.T, adm *kadm.Client, when string) {
	t.Helper()
	ctx := ctxT(t)
	byTopic, err := adm.FetchOffsetsForTopics(ctx, "g", "reborn")
	if err != nil {
		t.Fatal(err)
	}
	byTopic.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.At != -1 {
			t.Errorf("%s: OffsetFetch answers %s/%d at %d (err %v), want no offset", when, o.Topic, o.Partition, o.At, o.Err)
		}
	})
	all, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	all.Each(func(o kadm.OffsetResponse) {
		if o.Topic == "reborn" {
			t.Errorf("%s: OffsetFetch of all topics answers %s/%d at %d", when, o.Topic, o.Partition, o.At)
		}
	})
}

// consumeRebornFromStart joins group g on the new "reborn" and checks it reads all n
// records from offset 0: with the old topic's offsets it would start at 5 and 7.
func consumeRebornFromStart(t *testing.T, addr string, n int) {
	t.Helper()
	ctx := ctxT(t)
	cl := newClient(t, addr, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("reborn"), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	next := map[int32]int64{}
	got := 0
	for got < n {
		fs := cl.PollRecords(ctx, n-got)
		if ctx.Err() != nil {
			t.Fatalf("group consumed %d of the new topic's %d records", got, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("group resumed partition %d at offset %d, want %d: it skipped records", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
}

// Issue #17 finding 4: OffsetCommit, DeleteTopics, CreateTopics of the same name. The new
// topic has no committed offsets, live and after a restart, and a group resuming on it
// reads it from the start (Kafka deletes the offsets of deleted partitions).
func TestDeletedTopicOffsetsDoNotOutliveTheTopic(t *testing.T) {
	tb := testbroker.Start(t)
	adm := kadm.NewClient(newClient(t, tb.Addr))
	commitReborn(t, adm)
	deleteAndRecreate(t, adm)
	assertNoRebornOffsets(t, adm, "after re-create")
	tb.Restart()
	assertNoRebornOffsets(t, adm, "after restart")
	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("reborn")), "reborn", 40)
	consumeRebornFromStart(t, tb.Addr, 40)
}

// The crash window: the topic's record (the deletion's commit point) is gone but the
// offsets' tombstones never reached the log. The next load tombstones them, whether the
// topic is re-created after the restart (the name is gone at load) or was already
// re-created before it (another topic id at load).
func TestDeletedTopicOffsetsCrashBeforeTombstones(t *testing.T) {
	t.Run("recreated after restart", func(t *testing.T) {
		tb := testbroker.Start(t)
		adm := kadm.NewClient(newClient(t, tb.Addr))
		commitReborn(t, adm)
		broker.SkipOffsetTombstonesForTest(tb.Broker, true)
		dr, err := adm.DeleteTopics(ctxT(t), "reborn")
		if err == nil {
			err = dr.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		tb.Restart()
		if _, err := adm.CreateTopic(ctxT(t), 2, 1, nil, "reborn"); err != nil {
			t.Fatal(err)
		}
		assertNoRebornOffsets(t, adm, "re-created after restart")
		tb.Restart()
		assertNoRebornOffsets(t, adm, "second restart")
	})
	t.Run("recreated before restart", func(t *testing.T) {
		tb := testbroker.Start(t)
		adm := kadm.NewClient(newClient(t, tb.Addr))
		commitReborn(t, adm)
		broker.SkipOffsetTombstonesForTest(tb.Broker, true)
		deleteAndRecreate(t, adm)
		tb.Restart()
		assertNoRebornOffsets(t, adm, "restart after re-create")
		tb.Restart()
		assertNoRebornOffsets(t, adm, "second restart")
	})
}
