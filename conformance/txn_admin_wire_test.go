package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeOpenThenCommittedTransaction: what the transaction admin RPCs say about a
// kgo transaction while it is open and after it committed. Open: ListTransactions lists it
// Ongoing; DescribeTransactions gives its producer id, timeout, start time and both
// partitions written (an unknown transactional id is TRANSACTIONAL_ID_NOT_FOUND beside
// it); DescribeProducers shows the producer on each partition with the transaction's first
// offset and its last sequence (for a partition the topic lacks the broker answers
// UNKNOWN_TOPIC_OR_PARTITION).
// Committed: the state is CompleteCommit, no transaction is Ongoing, and the producers have
// no open transaction (start offset -1), at the epoch the v2 commit bumped to.
func TestDescribeOpenThenCommittedTransaction(t *testing.T) {
	e := newEnv(t, nil)
	const topic, txnID = "txa", "txa-tx"
	e.createTopic(topic, 2)
	p, err := kgo.NewClient(kgo.SeedBrokers(e.tb.Addr), kgo.TransactionalID(txnID), kgo.TransactionTimeout(90*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	before := time.Now().Add(-time.Second)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 4 { // partition 0: offsets 0, 1; partition 1: offsets 0, 1
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte{byte(i)}})
	}
	if err := p.ProduceSync(e.ctx(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	listed, err := e.adm.ListTransactions(e.ctx(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := listed[txnID]
	if len(listed) != 1 || !ok || l.State != "Ongoing" || l.ProducerID != rs[0].ProducerID {
		t.Fatalf("ListTransactions: %+v; want %s Ongoing with producer id %d", listed, txnID, rs[0].ProducerID)
	}
	ds, err := e.adm.DescribeTransactions(e.ctx(), txnID, "ghost")
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := ds.On("ghost", nil); !errors.Is(g.Err, kerr.TransactionalIDNotFound) {
		t.Fatalf("describe ghost: %v, want TRANSACTIONAL_ID_NOT_FOUND", g.Err)
	}
	d, _ := ds.On(txnID, nil)
	started := time.UnixMilli(d.StartTimestamp)
	if d.Err != nil || d.State != "Ongoing" || d.ProducerID != rs[0].ProducerID || d.TimeoutMillis != 90000 ||
		started.Before(before) || started.After(time.Now()) || len(d.Topics[topic]) != 2 {
		t.Fatalf("describe %s: %+v; want Ongoing, producer id %d, timeout 90000 ms, started after %v, partitions 0 and 1", txnID, d, rs[0].ProducerID, before)
	}

	producers := func() kadm.DescribedProducersTopics {
		t.Helper()
		ps, err := e.adm.DescribeProducers(e.ctx(), kadm.TopicsSet{topic: {0: {}, 1: {}}})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	wantProducer := func(what string, ps kadm.DescribedProducersTopics, epoch int16, lastSeq int32, txnStart int64) {
		t.Helper()
		for part := range int32(2) {
			pp := ps[topic].Partitions[part]
			a, ok := pp.ActiveProducers[rs[0].ProducerID]
			if pp.Err != nil || len(pp.ActiveProducers) != 1 || !ok || a.ProducerEpoch != epoch || a.LastSequence != lastSeq || a.CurrentTxnStartOffset != txnStart {
				t.Fatalf("%s: partition %d producers %+v (%v); want producer %d, epoch %d, last sequence %d, transaction start %d",
					what, part, pp.ActiveProducers, pp.Err, rs[0].ProducerID, epoch, lastSeq, txnStart)
			}
		}
	}
	epoch := rs[0].ProducerEpoch
	wantProducer("open transaction", producers(), epoch, 1, 0)
	// kadm (and kgo) route DescribeProducers by partition leader, so a partition missing from
	// the metadata never reaches the broker through them; ask the broker directly.
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{9}
	req.Topics = append(req.Topics, rt)
	r := e.dial().roundTrip(req).(*kmsg.DescribeProducersResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || !errors.Is(kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode), kerr.UnknownTopicOrPartition) {
		t.Fatalf("DescribeProducers of partition 9: %+v, want UNKNOWN_TOPIC_OR_PARTITION", r.Topics)
	}

	if err := p.EndTransaction(e.ctx(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, e, txnID, "CompleteCommit")
	if ongoing, err := e.adm.ListTransactions(e.ctx(), nil, []string{"Ongoing"}); err != nil || len(ongoing) != 0 {
		t.Fatalf("ListTransactions Ongoing after the commit: %+v %v", ongoing, err)
	}
	// Under transactions v2 the commit marker carries the bumped epoch, and a new epoch
	// clears the producer's sequence state (Kafka's ProducerStateEntry.
	// maybeUpdateProducerEpoch): last sequence -1.
	wantProducer("committed", producers(), epoch+1, -1, -1)
}
