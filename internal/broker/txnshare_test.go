package broker_test

import (
	"github.com/prometheus/client_golang/prometheus"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

// shareMember is a share-group member driven with raw requests, so a test controls exactly
// which offsets it holds and when they are acknowledged.
type shareMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	id      string
	epoch   int32
	topicID [16]byte
	session int32
}

func joinShareGroup(t *testing.T, cl *kgo.Client, group, topic, memberID string) *shareMember {
	t.Helper()
	ctx := ctxT(t)
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	m := &shareMember{t: t, cl: cl, group: group, id: memberID, topicID: md.Topics[topic].ID}
	for {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, memberID, m.epoch
		req.SubscribedTopicNames = []string{topic}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("share heartbeat: %v %v", err, resp)
		}
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil && len(resp.Assignment.TopicPartitions) > 0 {
			return m
		}
		if ctx.Err() != nil {
			t.Fatal("no assignment")
		}
	}
}

// fetch acquires records and returns the acquired ranges with their delivery counts.
func (m *shareMember) fetch() []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 1000, 1, 1<<20, 100, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(m.t), m.cl)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("share fetch: %v %+v", err, resp)
	}
	m.session++
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.m().Fatalf("share fetch partition error %v", kerr.ErrorForCode(p.ErrorCode))
			}
			out = append(out, p.AcquiredRecords...)
		}
	}
	return out
}

func (m *shareMember) m() *testing.T { return m.t }

// txnProducer is a transactional producer driven with raw requests (transaction version 2:
// each EndTxn bumps the epoch).
type txnProducer struct {
	t     *testing.T
	addr  string
	cl    *kgo.Client
	id    string
	pid   int64
	epoch int16
}

func initTxnProducer(t *testing.T, addr string, cl *kgo.Client, id string) *txnProducer {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60000
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %+v", err, resp)
	}
	return &txnProducer{t: t, addr: addr, cl: cl, id: id, pid: resp.ProducerID, epoch: resp.ProducerEpoch}
}

// stage sends TxnShareAcknowledge for first..last of partition 0 with one ack type.
func (p *txnProducer) stage(m *shareMember, first, last int64, ackType int8) *wire.TxnShareAcknowledgeResponse {
	p.t.Helper()
	req := &wire.TxnShareAcknowledgeRequest{TransactionalID: &p.id, GroupID: m.group, ProducerID: p.pid, ProducerEpoch: p.epoch,
		MemberID: m.id, MemberEpoch: m.epoch, Topics: []wire.TxnShareAcknowledgeRequestTopic{{TopicID: m.topicID, Partitions: []wire.TxnShareAcknowledgeRequestTopicPartition{
			{PartitionIndex: 0, AcknowledgementBatches: []wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{ackType}}}},
		}}}}
	// kgo sends only keys it knows, so this exactq-only request goes over a bare connection.
	return roundTrip(p.t, p.addr, req).(*wire.TxnShareAcknowledgeResponse)
}

func (p *txnProducer) end(commit bool) {
	p.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.id, p.pid, p.epoch, commit
	resp, err := req.RequestWith(ctxT(p.t), p.cl)
	if err != nil || resp.ErrorCode != 0 {
		p.t.Fatalf("EndTxn: %v %+v", err, resp)
	}
	if req.Version >= 5 {
		p.pid, p.epoch = resp.ProducerID, resp.ProducerEpoch
	}
}

func stageOK(t *testing.T, resp *wire.TxnShareAcknowledgeResponse) {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("TxnShareAcknowledge: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, tr := range resp.Responses {
		for _, pr := range tr.Partitions {
			if pr.ErrorCode != 0 {
				t.Fatalf("TxnShareAcknowledge partition %d: %v", pr.PartitionIndex, kerr.ErrorForCode(pr.ErrorCode))
			}
		}
	}
}

// waitShareStartOffset waits until the share-partition start offset reaches want: EndTxn
// answers once the decision is durable, and the markers that resolve staged
// acknowledgements are written right after, as in Kafka.
func waitShareStartOffset(t *testing.T, cl *kgo.Client, group, topic string, want int64) {
	t.Helper()
	ctx := ctxT(t)
	var got int64 = -2
	for ctx.Err() == nil {
		offs, err := kadm.NewClient(cl).DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if got = offs[group].Offsets[topic][0].StartOffset; got == want {
			return
		}
	}
	t.Fatalf("share start offset stayed at %d, want %d", got, want)
}

// A consume-only transaction (acknowledgements, no records): committed ACCEPTs become
// ACKNOWLEDGED and move the share-partition start offset; aborted ones come back with a
// higher delivery count. Both survive a broker restart.
func TestTxnShareAcknowledgeCommitAndAbort(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	cl := newClient(t, tb.Addr)
	ctx := ctxT(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if code := alterGroupConfig(t, cl, "tsg", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("group config: %v", kerr.ErrorForCode(code))
	}
	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("in")), "in", 10)

	m := joinShareGroup(t, cl, "tsg", "in", "member-0000000000000000000000000001")
	got := m.fetch()
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 9 || got[0].DeliveryCount != 1 {
		t.Fatalf("first fetch acquired %+v, want 0-9 at delivery 1", got)
	}
	p := initTxnProducer(t, tb.Addr, cl, "share-txn")

	// Abort: offsets 0-4 come back.
	stageOK(t, p.stage(m, 0, 4, wire.AckAccept))
	p.end(false)
	// Commit: offsets 5-9 are acknowledged for good.
	stageOK(t, p.stage(m, 5, 9, wire.AckAccept))
	p.end(true)

	again := m.fetch()
	if len(again) != 1 || again[0].FirstOffset != 0 || again[0].LastOffset != 4 || again[0].DeliveryCount != 2 {
		t.Fatalf("after abort and commit the member acquired %+v, want 0-4 at delivery 2", again)
	}
	stageOK(t, p.stage(m, 0, 4, wire.AckReject))
	p.end(true)
	waitShareStartOffset(t, cl, "tsg", "in", 10)

	// The metrics count what happened: 15 records staged (0-4 twice, 5-9 once), 10
	// committed, 5 aborted, none left pending.
	want := map[string]float64{"staged": 15, "committed": 10, "aborted": 5}
	reg := prometheus.NewRegistry()
	reg.MustRegister(tb.Broker.Metrics())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "exactq_txn_share_ack_records_total":
			for _, m := range mf.GetMetric() {
				outcome := m.GetLabel()[0].GetValue()
				if w, ok := want[outcome]; ok && m.GetCounter().GetValue() != w {
					t.Errorf("%s acks: %v, want %v", outcome, m.GetCounter().GetValue(), w)
				}
				delete(want, outcome)
			}
		case "exactq_tx_pending_records":
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 0 {
				t.Errorf("records still TX_PENDING: %v", v)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("metrics missing outcomes %v", want)
	}

	tb.Restart()
	cl = newClient(t, tb.Addr)
	waitShareStartOffset(t, cl, "tsg", "in", 10)
}

// Staging checks the member and the records: a stale member epoch is fenced, offsets the
// member does not hold are refused, and RELEASE cannot be staged.
func TestTxnShareAcknowledgeRejectsBadStaging(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	cl := newClient(t, tb.Addr)
	ctx := ctxT(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if code := alterGroupConfig(t, cl, "bsg", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("in")), "in", 5)
	m := joinShareGroup(t, cl, "bsg", "in", "member-0000000000000000000000000002")
	m.fetch()
	p := initTxnProducer(t, tb.Addr, cl, "bad-staging")

	partCode := func(resp *wire.TxnShareAcknowledgeResponse) int16 {
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Responses[0].Partitions[0].ErrorCode
	}
	stale := *m
	stale.epoch--
	if code := partCode(p.stage(&stale, 0, 4, wire.AckAccept)); code != kerr.FencedMemberEpoch.Code {
		t.Errorf("stale member epoch: %v, want FENCED_MEMBER_EPOCH", kerr.ErrorForCode(code))
	}
	if code := partCode(p.stage(m, 0, 4, 2 /* RELEASE */)); code != kerr.InvalidRequest.Code {
		t.Errorf("staging RELEASE: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if code := partCode(p.stage(m, 3, 7, wire.AckAccept)); code != kerr.InvalidRecordState.Code {
		t.Errorf("offsets beyond what the member holds: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	// Nothing was staged: the records are still the member's to stage.
	stageOK(t, p.stage(m, 0, 4, wire.AckAccept))
	p.end(true)
	waitShareStartOffset(t, cl, "bsg", "in", 5)
}

// The TxnShareAcknowledge key is configurable, may be turned off (then not advertised),
// and may not take a Kafka API key.
func TestTxnShareAckKeyConfig(t *testing.T) {
	off := testbroker.Start(t, func(c *broker.Config) { c.TxnShareAckKey = -1 })
	vs, err := kadm.NewClient(newClient(t, off.Addr)).ApiVersions(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if _, ok := v.KeyMaxVersion(wire.TxnShareAcknowledgeDefaultKey); ok {
			t.Fatal("TxnShareAcknowledge advertised while turned off")
		}
	}
	if _, err := broker.Open(broker.Config{DataDir: t.TempDir(), NodeID: 1, TxnShareAckKey: 1}); err == nil {
		t.Fatal("a broker accepted Fetch's key for TxnShareAcknowledge")
	}
}
