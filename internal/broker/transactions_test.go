package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	h := batch.NoProducer(0, time.Now().UnixMilli())
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, epoch, seq
	h.Attributes = batch.AttrTransactional
	var recs []kmsg.Record
	for i, v := range values {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = []byte(v)
		recs = append(recs, r)
	}
	b, err := batch.Encode(nil, h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceTxn(t *testing.T, cl *kgo.Client, topic string, records []byte) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	id := "txn-test"
	req.TransactionID = &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	md, err := kadm.NewClient(cl).Metadata(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt.TopicID = md.Topics[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("transactional produce: %v %+v", err, resp)
	}
}

// readValues reads partition 0 from the start with the given isolation up to a sentinel
// record produced (outside any transaction) just before: everything before the sentinel
// has then been seen, with no waiting on a clock.
func readValues(t *testing.T, addr, topic string, committed bool) []string {
	t.Helper()
	ctx := ctxT(t)
	sentinel := fmt.Sprint("sentinel-", time.Now().UnixNano())
	if err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(sentinel)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := newClient(t, addr, kgo.FetchIsolationLevel(iso),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var vals []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("sentinel not reached (values so far %v)", vals)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			switch v := string(r.Value); {
			case v == sentinel:
				done = true
			case !strings.HasPrefix(v, "sentinel-"):
				vals = append(vals, v)
			}
		})
		if done {
			return vals
		}
	}
}

func TestReadCommittedSkipsAbortedAndStopsAtOpenTransactions(t *testing.T) {
	tb := testbroker.Start(t)
	broker.AcceptAllTransactionsForTest(tb.Broker)
	cl := newClient(t, tb.Addr)
	ctx := ctxT(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	init := func() (int64, int16) {
		r, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("init: %v %v", err, r)
		}
		return r.ProducerID, r.ProducerEpoch
	}
	a, aEpoch := init()
	c, cEpoch := init()
	tp := []broker.TopicPartition{{Topic: "tx", Partition: 0}}

	produceTxn(t, cl, "tx", txnBatch(t, a, aEpoch, 0, "a1", "a2")) // offsets 0-1, aborted below
	produceTxn(t, cl, "tx", txnBatch(t, c, cEpoch, 0, "c1"))       // offset 2, committed below
	if errs := tb.Broker.WriteMarkers(ctx, a, aEpoch, false, 0, tp); len(errs) != 0 {
		t.Fatal(errs)
	}
	// c is still open: read_committed must stop at offset 2.
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, "tx")
	if err != nil || lso["tx"][0].Offset != 2 {
		t.Fatalf("last stable offset with c open: %+v %v, want 2", lso["tx"][0], err)
	}
	if errs := tb.Broker.WriteMarkers(ctx, c, cEpoch, true, 0, tp); len(errs) != 0 {
		t.Fatal(errs)
	}
	check := func() {
		t.Helper()
		if got := readValues(t, tb.Addr, "tx", true); len(got) != 1 || got[0] != "c1" {
			t.Fatalf("read_committed: %v, want [c1]", got)
		}
		if got := readValues(t, tb.Addr, "tx", false); len(got) != 3 {
			t.Fatalf("read_uncommitted: %v, want a1 a2 c1", got)
		}
	}
	check()
	tb.Restart() // clean: the aborted index comes from the snapshot
	broker.AcceptAllTransactionsForTest(tb.Broker)
	check()
	tb.Stop()
	os.Remove(filepath.Join(tb.DataDir, "tx-0", "producer-state.snapshot"))
	tb.Restart() // as after a crash: the index is rebuilt from the log
	check()
}
