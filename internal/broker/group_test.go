package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

// A kgo consumer group reads a topic, commits, and after a broker restart a new member of
// the same group resumes exactly where the group committed.
func TestConsumerGroupCommitsSurviveRestart(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := ctxT(t)
	adm := kadm.NewClient(newClient(t, tb.Addr))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "g-in"); err != nil {
		t.Fatal(err)
	}
	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("g-in")), "g-in", 300)

	consume := func(n int) map[string]bool {
		// A short fetch wait: kgo adds a partition whose offset resolves late only when its
		// in-flight long poll on the other (drained) partitions returns.
		cl := newClient(t, tb.Addr, kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("g-in"), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		seen := map[string]bool{}
		for len(seen) < n {
			fs := cl.PollRecords(ctx, n-len(seen))
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", len(seen), n)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		cl.Close()
		return seen
	}
	first := consume(100)
	tb.Restart()

	offs, err := kadm.NewClient(newClient(t, tb.Addr)).FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 100 {
		t.Fatalf("committed offsets after restart sum to %d, want 100", committed)
	}
	rest := consume(200)
	for v := range rest {
		if first[v] {
			t.Fatalf("record %s consumed twice across the restart", v)
		}
	}
	if len(first)+len(rest) != 300 {
		t.Fatalf("consumed %d distinct records, want 300", len(first)+len(rest))
	}
}
