package hostile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
)

// Finding 1: an uncompressed one-record batch claiming 10^9 records (lastOffsetDelta
// 999,999,999) was
// stored; a share consumer then acquired offsets 0-999,999,999 and acknowledging offset 0
// made the broker allocate ~40 GB and die. Kafka refuses the batch (or at least never lets
// the span of a batch cost memory its records do not).
func TestLyingOffsetDelta(t *testing.T) {
	const topic = "lying"
	runAttack(t, attack{
		name: "#1 batch lying about its offset span", share: true,
		rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), topic, 1, nil)
			// A share member joins first: share groups start at the latest offset.
			m := joinShareGroup(t, dialRaw(t, h.addr()), "lying-share", topic)
			if _, err := m.fetch(10 * time.Second); err != nil {
				t.Fatalf("first share fetch: %v", err)
			}
			c := dialRaw(t, h.addr())
			// One record; the header claims 10^9 with offset deltas to match.
			lie := noProducer(999_999_999, 1_000_000_000, goodRecords(1))
			code, err := produceRaw(t, c, topic, 0, lie.bytes(t))
			t.Logf("lying batch: produce answered code %d, err %v", code, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ends, err := kadm.NewClient(newClient(t, h.addr())).ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if end, _ := ends.Lookup(topic, 0); end.Offset > 1 {
				t.Errorf("one record moved the end offset to %d", end.Offset)
			}
			// The member acquires what is there and acknowledges offset 0 alone.
			// A share fetch waits for records itself (MaxWait), so it is asked again at once;
			// nothing acquired in 5 s is not a failure of this attack (the ack is skipped).
			var acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
			var fetchErr error
			_ = await.Until(5*time.Second, 0, func() error {
				if acquired, fetchErr = m.fetch(10 * time.Second); fetchErr != nil {
					return await.Stop(fetchErr)
				}
				if len(acquired) == 0 {
					return errors.New("nothing acquired")
				}
				return nil
			})
			if fetchErr != nil {
				t.Errorf("share fetch: %v", fetchErr)
				return
			}
			for _, a := range acquired {
				t.Logf("acquired %d-%d", a.FirstOffset, a.LastOffset)
			}
			if len(acquired) > 0 {
				if err := m.ack(0, 0, 1, 20*time.Second); err != nil {
					t.Errorf("ShareAcknowledge of offset 0: %v", err)
				}
			}
		},
	})
}
