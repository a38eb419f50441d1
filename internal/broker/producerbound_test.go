package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

const boundPartitions = 20

// produceOnePerPartition sends one request with a one-record batch per partition of
// topic, the batch to partition i from producer pids[i], and returns the error codes.
func produceOnePerPartition(t *testing.T, cl *kgo.Client, topic string, id [16]byte, pids []int64, epoch int16) []int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for i, pid := range pids {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(i), rawBatch(t, pid, epoch, 0, 1)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	codes := make([]int16, len(pids))
	for _, p := range resp.Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	return codes
}

// producerCount is how many producers DescribeProducers lists over topic's partitions.
func producerCount(t *testing.T, adm *kadm.Client, topic string) int {
	t.Helper()
	ps, err := adm.DescribeProducers(ctxT(t), kadm.TopicsSet{topic: {}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ps.EachProducer(func(kadm.DescribedProducer) { n++ })
	return n
}

func boundTopic(t *testing.T, opts ...testbroker.Option) (*testbroker.Broker, *kgo.Client, *kadm.Client, [16]byte) {
	t.Helper()
	tb := testbroker.Start(t, opts...)
	cl := newClient(t, tb.Addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctxT(t), boundPartitions, 1, nil, "flood"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctxT(t), "flood")
	if err != nil {
		t.Fatal(err)
	}
	return tb, cl, adm, md.Topics["flood"].ID
}

// Issue #17 finding 8: Produce with producer ids nobody allocated (no InitProducerId)
// left an entry per id for a day. Ids this broker never handed out are refused with
// INVALID_PRODUCER_ID_MAPPING and leave no state; a kgo idempotent producer beside them,
// and across a restart, is unaffected.
func TestInventedProducerIDsAreRefused(t *testing.T) {
	tb, cl, adm, id := boundTopic(t)
	victim := newClient(t, tb.Addr, kgo.DefaultProduceTopic("flood"))
	produceN(t, victim, "flood", 100)

	const rounds = 50 // 1,000 invented ids
	for r := range rounds {
		pids := make([]int64, boundPartitions)
		for i := range pids {
			pids[i] = 1<<40 + int64(r*boundPartitions+i)
		}
		for i, code := range produceOnePerPartition(t, cl, "flood", id, pids, 0) {
			if code != kerr.InvalidProducerIDMapping.Code {
				t.Fatalf("invented producer id %d: %v, want INVALID_PRODUCER_ID_MAPPING", pids[i], kerr.ErrorForCode(code))
			}
		}
	}
	if n := producerCount(t, adm, "flood"); n > boundPartitions {
		t.Fatalf("%d producer states after %d invented ids, want only the victim's (at most %d)", n, rounds*boundPartitions, boundPartitions)
	}

	produceN(t, victim, "flood", 100)
	tb.Restart()
	produceN(t, victim, "flood", 100) // the same client and producer id after the restart
	got := consumeAll(t, tb.Addr, "flood", 300)
	seen := map[string]int{}
	for _, recs := range got {
		for _, r := range recs {
			seen[string(r.Value)]++
		}
	}
	if len(seen) != 100 {
		t.Fatalf("%d distinct values, want 100 (v0..v99 three times)", len(seen))
	}
	for v, n := range seen {
		if n != 3 {
			t.Fatalf("value %s stored %d times, want 3", v, n)
		}
	}
}

// Producers that were allocated (InitProducerId) but flood a partition are capped by
// producer.id.max.entries.per.partition; the least recently active go first, so an
// idempotent producer writing throughout keeps its state, and a transactional one
// commits.
func TestProducerStatePerPartitionCap(t *testing.T) {
	tb, cl, adm, id := boundTopic(t, testbroker.WithConfig(map[string]string{"producer.id.max.entries.per.partition": "30"}))
	victim := newClient(t, tb.Addr, kgo.DefaultProduceTopic("flood"))
	txn := newClient(t, tb.Addr, kgo.DefaultProduceTopic("flood"), kgo.TransactionalID("bound-tx"))
	ctx := ctxT(t)
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceN(t, txn, "flood", 20)
	floodAllocated(t, cl, id, 100, func(r int) {
		if r%10 == 0 {
			produceN(t, victim, "flood", 40)
		}
	})
	victimID, _, err := victim.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"flood": {}})
	if err != nil {
		t.Fatal(err)
	}
	perPartition, victimKept := map[int32]int{}, 0
	ps.EachProducer(func(p kadm.DescribedProducer) {
		perPartition[p.Partition]++
		if p.ProducerID == victimID {
			victimKept++
		}
	})
	for p, n := range perPartition {
		if n > 30 {
			t.Fatalf("partition %d keeps %d producer states, cap 30", p, n)
		}
	}
	if victimKept == 0 {
		t.Fatal("the idempotent producer writing throughout the flood lost its state")
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit of the transaction open during the flood: %v", err)
	}
	produceN(t, victim, "flood", 40)
	if n := len(consumeAll(t, tb.Addr, "flood", 20+11*40+100*boundPartitions)); n != boundPartitions {
		t.Fatalf("records on %d partitions", n)
	}
}

// floodAllocated allocates rounds x boundPartitions producer ids with InitProducerId and
// writes one batch from each, one id per partition per round; between rounds it calls
// each (may be nil).
func floodAllocated(t *testing.T, cl *kgo.Client, id [16]byte, rounds int, each func(round int)) {
	t.Helper()
	for r := range rounds {
		pids := make([]int64, boundPartitions)
		for i := range pids {
			resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctxT(t), cl)
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("init producer id: %v %v", err, resp)
			}
			pids[i] = resp.ProducerID
		}
		for i, code := range produceOnePerPartition(t, cl, "flood", id, pids, 0) {
			if code != 0 {
				t.Fatalf("allocated producer id %d: %v", pids[i], kerr.ErrorForCode(code))
			}
		}
		if each != nil {
			each(r)
		}
	}
}

// producer.id.max.entries caps the producer states of all partitions together (each
// partition may exceed it by the one entry it cannot evict while it holds none).
func TestProducerStateBrokerCap(t *testing.T) {
	_, cl, adm, id := boundTopic(t, testbroker.WithConfig(map[string]string{"producer.id.max.entries": "100"}))
	floodAllocated(t, cl, id, 50, nil)
	if n := producerCount(t, adm, "flood"); n > 100+boundPartitions {
		t.Fatalf("%d producer states after %d producers, broker cap 100", n, 50*boundPartitions)
	}
}
