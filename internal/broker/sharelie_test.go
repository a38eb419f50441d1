package broker_test

import (
	"encoding/binary"
	"errors"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/alloctest"
	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/testbroker"
)

// plantLyingBatch appends to the stopped broker's partition dir the batch of issue 17
// finding 1 (uncompressed, one record, CRC-valid, lastOffsetDelta span-1), as an old log
// written before produce validation refused it may hold.
func plantLyingBatch(t *testing.T, dir string, span int64) {
	t.Helper()
	l, err := log.Open(dir, log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := kmsg.NewRecord()
	r.Value = []byte("lie")
	b, err := batch.Encode(nil, batch.NoProducer(0, time.Now().UnixMilli()), []kmsg.Record{r}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b[23:27], uint32(span-1))
	batch.UpdateCRC(b)
	if _, _, err := l.Append([][]byte{b}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// The crash over the wire, against a real log: a share consumer acquires the
// lying batch's offsets 0-999,999,999, acknowledges offset 0 alone, and a second member
// fetches in record_limit mode after the lock expired. Each step used to make the broker
// allocate ~40 GB (an entry per offset); now each allocates what a small fetch does.
func TestShareLyingBatchOverTheWire(t *testing.T) {
	const span = 1_000_000_000
	const budgetBytes = 16 << 20
	cfg := maps.Clone(fastShareConfig)
	cfg["group.share.record.lock.duration.ms"] = "1000"
	tb := testbroker.Start(t, testbroker.WithConfig(cfg))
	cl := newClient(t, tb.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 1, 1, nil, "lie"); err != nil {
		t.Fatal(err)
	}
	if code := alterGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("set auto offset reset: %v", kerr.ErrorForCode(code))
	}
	tb.Stop()
	plantLyingBatch(t, filepath.Join(tb.DataDir, "lie-0"), span)
	tb.Restart()
	cl = newClient(t, tb.Addr)

	m1 := joinShareGroup(t, cl, "sg", "lie", "member-1")
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	if n := alloctest.Bytes(func() { got = m1.fetch() }); n > budgetBytes {
		t.Fatalf("acquiring the lying batch allocated %d bytes", n)
	}
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != span-1 {
		t.Fatalf("acquired %+v, want the whole batch 0-%d", got, span-1)
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &m1.group, &m1.id, m1.session
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = m1.topicID
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 0, []int8{1}
	ap.AcknowledgementBatches = append(ap.AcknowledgementBatches, ab)
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	if n := alloctest.Bytes(func() {
		resp, err := ack.RequestWith(ctxT(t), cl)
		if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("acknowledge offset 0: %v %+v", err, resp)
		}
	}); n > budgetBytes {
		t.Fatalf("acknowledging offset 0 allocated %d bytes", n)
	}
	m1.session++

	// The rest of the batch comes back when m1's lock expires; m2 takes 5 of it in
	// record_limit mode.
	m2 := joinShareGroup(t, cl, "sg", "lie", "member-2")
	sf := kmsg.NewPtrShareFetchRequest()
	sf.GroupID, sf.MemberID = &m2.group, &m2.id
	sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords, sf.BatchSize, sf.ShareAcquireMode = 3000, 1<<20, 5, 5, 1
	ft := kmsg.NewShareFetchRequestTopic()
	ft.TopicID = m2.topicID
	ft.Partitions = append(ft.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	sf.Topics = append(sf.Topics, ft)
	// The share fetch waits up to MaxWaitMillis itself, so it is asked again at once.
	var acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	_ = await.Until(20*time.Second, 0, func() error {
		if n := alloctest.Bytes(func() {
			resp, err := sf.RequestWith(ctxT(t), cl)
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("record_limit share fetch: %v %+v", err, resp)
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					acquired = append(acquired, rp.AcquiredRecords...)
				}
			}
		}); n > budgetBytes {
			t.Fatalf("a record_limit share fetch allocated %d bytes", n)
		}
		sf.ShareSessionEpoch++
		if len(acquired) == 0 {
			return errors.New("nothing acquired") // the check below says what was wanted
		}
		return nil
	})
	if len(acquired) != 1 || acquired[0].FirstOffset != 1 || acquired[0].LastOffset != 5 || acquired[0].DeliveryCount != 2 {
		t.Fatalf("record_limit acquired %+v, want 1-5 delivered a second time", acquired)
	}
}
