package broker_test

// Conformance tests for KIP-1289 (transactional share acknowledgements), one per
// single-broker scenario of ../shared/spec/kip-1289.md section 9: 9.1 items 1-7, 9 and 10,
// and the recommended extra cases 38-40 and 42-44. Each test is named after its scenario
// and asserts what a user sees: the share-partition start offset and lag
// (DescribeShareGroupOffsets), redelivery and delivery counts (ShareFetch), and the
// read_committed visibility of transactional outputs. Everything goes over the wire to a
// real broker; the share member and the transactional producer are driven with raw
// requests so each test controls exactly which offsets are held, staged and resolved.
//
// Every test starts its own broker and runs in parallel with the others.

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

const (
	cfGroup  = "cf-group"
	cfIn     = "cf-in"
	cfOut    = "cf-out"
	cfMember = "cf-member-A-000000000000000000000001"
	cfOther  = "cf-member-B-000000000000000000000002"
	// cfWait bounds every poll for a condition the broker reaches asynchronously (markers
	// are written after EndTxn answers, lock expiry, the transaction-timeout scan).
	cfWait = 20 * time.Second
)

type cfAcq = kmsg.ShareFetchResponseTopicPartitionAcquiredRecord

// cfEnv is one broker with an input topic, an output topic and a share group that reads
// the input from the earliest offset.
type cfEnv struct {
	t  *testing.T
	tb *testbroker.Broker
	cl *kgo.Client
}

// cfStart starts a broker with fastShareConfig plus brokerCfg, creates cfIn with inParts
// partitions and cfOut with one, sets the group's configs (share.auto.offset.reset=earliest
// plus groupCfg) and produces inputs records to cfIn partition 0 (values in-0, in-1, ...).
func cfStart(t *testing.T, brokerCfg, groupCfg map[string]string, inParts int32, inputs int) *cfEnv {
	t.Helper()
	cfg := map[string]string{}
	for k, v := range fastShareConfig {
		cfg[k] = v
	}
	for k, v := range brokerCfg {
		cfg[k] = v
	}
	tb := testbroker.Start(t, testbroker.WithConfig(cfg))
	e := &cfEnv{t: t, tb: tb, cl: newClient(t, tb.Addr)}
	adm := kadm.NewClient(e.cl)
	ctx := ctxT(t)
	for topic, parts := range map[string]int32{cfIn: inParts, cfOut: 1} {
		if resp, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	gc := map[string]string{"share.auto.offset.reset": "earliest"}
	for k, v := range groupCfg {
		gc[k] = v
	}
	for k, v := range gc {
		if code := alterGroupConfig(t, e.cl, cfGroup, k, v); code != 0 {
			t.Fatalf("group config %s=%s: %v", k, v, kerr.ErrorForCode(code))
		}
	}
	e.produceInputs(0, inputs)
	return e
}

// produceInputs appends n records to partition part of cfIn.
func (e *cfEnv) produceInputs(part int32, n int) {
	e.t.Helper()
	if n == 0 {
		return
	}
	cl := newClient(e.t, e.tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: cfIn, Partition: part, Value: []byte(fmt.Sprintf("in-%d-%d", part, i))})
	}
	if err := cl.ProduceSync(ctxT(e.t), recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce inputs: %v", err)
	}
}

// join adds a member that is assigned every partition of cfIn.
func (e *cfEnv) join(id string) *shareMember {
	e.t.Helper()
	md, err := kadm.NewClient(e.cl).Metadata(ctxT(e.t), cfIn)
	if err != nil {
		e.t.Fatal(err)
	}
	m := &shareMember{t: e.t, cl: e.cl, group: cfGroup, id: id, topicID: md.Topics[cfIn].ID}
	want := len(md.Topics[cfIn].Partitions)
	cfEventually(e.t, "member "+id+" assigned every partition", func() (bool, string) {
		got := cfHeartbeat(m)
		return got == want, fmt.Sprintf("%d of %d partitions assigned", got, want)
	})
	return m
}

// cfHeartbeat sends one share-group heartbeat for m, keeps its new member epoch and returns
// how many partitions it is assigned (-1 when the response carries no assignment).
func cfHeartbeat(m *shareMember) int {
	m.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = m.group, m.id, m.epoch
	req.SubscribedTopicNames = []string{cfIn}
	resp, err := req.RequestWith(ctxT(m.t), m.cl)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("share heartbeat: %v %+v", err, resp)
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment == nil {
		return -1
	}
	n := 0
	for _, tp := range resp.Assignment.TopicPartitions {
		n += len(tp.Partitions)
	}
	return n
}

// cfFetch sends one ShareFetch for the given partitions of cfIn (partition 0 if none),
// waiting at most maxWaitMs for records, and returns the acquired ranges per partition.
func cfFetch(m *shareMember, maxWaitMs int32, parts ...int32) map[int32][]cfAcq {
	m.t.Helper()
	if len(parts) == 0 {
		parts = []int32{0}
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWaitMs, 1, 8<<20, 1000, 1000
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topicID
	for _, p := range parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(m.t), m.cl)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("share fetch: %v %+v", err, resp)
	}
	m.session++
	out := map[int32][]cfAcq{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.t.Fatalf("share fetch partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			if len(p.AcquiredRecords) > 0 {
				out[p.Partition] = append(out[p.Partition], p.AcquiredRecords...)
			}
		}
	}
	return out
}

// cfFetchUntil fetches (accumulating acquisitions) until at least n offsets of partition 0
// are acquired, and returns the acquired ranges.
func cfFetchUntil(m *shareMember, n int) []cfAcq {
	m.t.Helper()
	var got []cfAcq
	cfEventually(m.t, fmt.Sprintf("%s acquires %d offsets", m.id, n), func() (bool, string) {
		got = append(got, cfFetch(m, 500)[0]...)
		return cfCount(got) >= int64(n), fmt.Sprintf("acquired %s", cfFmt(got))
	})
	return got
}

func cfCount(rs []cfAcq) int64 {
	var n int64
	for _, r := range rs {
		n += r.LastOffset - r.FirstOffset + 1
	}
	return n
}

func cfFmt(rs []cfAcq) string {
	if len(rs) == 0 {
		return "nothing"
	}
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("%d-%d@%d", r.FirstOffset, r.LastOffset, r.DeliveryCount))
	}
	return strings.Join(s, " ")
}

// cfWantAcquired checks that exactly first..last was acquired, at delivery count dc.
func cfWantAcquired(t *testing.T, got []cfAcq, first, last int64, dc int16) {
	t.Helper()
	if len(got) != 1 || got[0].FirstOffset != first || got[0].LastOffset != last || got[0].DeliveryCount != dc {
		t.Fatalf("acquired %s, want %d-%d@%d (first-last@delivery count)", cfFmt(got), first, last, dc)
	}
}

// cfNothingDelivered checks that a share fetch waiting 200 ms acquires nothing.
func cfNothingDelivered(t *testing.T, m *shareMember, parts ...int32) {
	t.Helper()
	if got := cfFetch(m, 200, parts...); len(got) != 0 {
		for p, rs := range got {
			t.Errorf("partition %d delivered %s, want nothing", p, cfFmt(rs))
		}
		t.FailNow()
	}
}

// cfEventually polls cond every few milliseconds until it holds, failing after cfWait with
// cond's description of what it saw last.
func cfEventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	err := await.Until(cfWait, 5*time.Millisecond, func() error {
		if ok, saw := cond(); !ok {
			return errors.New(saw)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %v; last saw %s", what, cfWait, err)
	}
}

// cfShareOffsets describes the group's share offsets of cfIn.
func (e *cfEnv) shareOffsets() (map[int32]kadm.ShareOffset, error) {
	offs, err := kadm.NewClient(e.cl).DescribeShareGroupOffsets(ctxT(e.t), cfGroup)
	if err != nil {
		return nil, err
	}
	if err := offs[cfGroup].Err; err != nil {
		return nil, err
	}
	return offs[cfGroup].Offsets[cfIn], nil
}

// waitOffsets waits until partition part of cfIn has the given share-partition start
// offset and lag.
func (e *cfEnv) waitOffsets(part int32, start, lag int64) {
	e.t.Helper()
	cfEventually(e.t, fmt.Sprintf("partition %d at start offset %d, lag %d", part, start, lag), func() (bool, string) {
		offs, err := e.shareOffsets()
		if err != nil {
			return false, err.Error()
		}
		o, ok := offs[part]
		if !ok {
			return false, "partition not described"
		}
		return o.Err == nil && o.StartOffset == start && o.Lag == lag,
			fmt.Sprintf("start offset %d, lag %d, err %v", o.StartOffset, o.Lag, o.Err)
	})
}

// wantOffsetsNow checks the start offset and lag right now (for states reached
// synchronously, such as right after a staging was answered).
func (e *cfEnv) wantOffsetsNow(part int32, start, lag int64) {
	e.t.Helper()
	offs, err := e.shareOffsets()
	if err != nil {
		e.t.Fatal(err)
	}
	if o := offs[part]; o.Err != nil || o.StartOffset != start || o.Lag != lag {
		e.t.Fatalf("partition %d: start offset %d, lag %d, err %v; want start offset %d, lag %d", part, o.StartOffset, o.Lag, o.Err, start, lag)
	}
}

// cfInitProducer is initTxnProducer with a chosen transaction timeout; it retries while
// the coordinator answers CONCURRENT_TRANSACTIONS (it is aborting the transaction of the
// producer this one fences).
func cfInitProducer(e *cfEnv, id string, timeoutMs int32) *txnProducer {
	e.t.Helper()
	var p *txnProducer
	cfEventually(e.t, "InitProducerId "+id, func() (bool, string) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = timeoutMs
		resp, err := req.RequestWith(ctxT(e.t), e.cl)
		if err != nil {
			e.t.Fatalf("init producer id: %v", err)
		}
		switch resp.ErrorCode {
		case 0:
			p = &txnProducer{t: e.t, addr: e.tb.Addr, cl: e.cl, id: id, pid: resp.ProducerID, epoch: resp.ProducerEpoch}
			return true, ""
		case kerr.ConcurrentTransactions.Code:
			return false, "CONCURRENT_TRANSACTIONS"
		}
		e.t.Fatalf("init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
		return false, ""
	})
	return p
}

// cfEnd sends EndTxn and returns its error code; on success the producer continues with
// the id and epoch the response gives (transaction version 2).
func cfEnd(p *txnProducer, commit bool) int16 {
	p.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.id, p.pid, p.epoch, commit
	resp, err := req.RequestWith(ctxT(p.t), p.cl)
	if err != nil {
		p.t.Fatalf("EndTxn: %v", err)
	}
	if resp.ErrorCode == 0 && req.Version >= 5 {
		p.pid, p.epoch = resp.ProducerID, resp.ProducerEpoch
	}
	return resp.ErrorCode
}

// cfProduceOutput writes values to cfOut partition 0 inside p's transaction (a raw
// transactional produce: the broker registers the partition in the transaction).
func cfProduceOutput(e *cfEnv, p *txnProducer, seq int32, values ...string) {
	e.t.Helper()
	md, err := kadm.NewClient(e.cl).Metadata(ctxT(e.t), cfOut)
	if err != nil {
		e.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, &p.id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = cfOut, md.Topics[cfOut].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = txnBatch(e.t, p.pid, p.epoch, seq, values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(e.t), e.cl)
	if err != nil {
		e.t.Fatalf("transactional produce: %v", err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		e.t.Fatalf("transactional produce: %v", kerr.ErrorForCode(code))
	}
}

// cfReadCommitted reads cfOut from the start with read_committed up to a sentinel produced
// just before (outside any transaction), and returns the records before it. The sentinel
// becomes readable only once every transaction before it is decided and marked, so this
// also waits for the output partition's marker.
func cfReadCommitted(e *cfEnv) []*kgo.Record {
	e.t.Helper()
	ctx := ctxT(e.t)
	sentinel := fmt.Sprint("sentinel-", time.Now().UnixNano())
	if err := newClient(e.t, e.tb.Addr).ProduceSync(ctx, &kgo.Record{Topic: cfOut, Value: []byte(sentinel)}).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
	cl := newClient(e.t, e.tb.Addr, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfOut: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("read_committed: sentinel not reached (records so far %d)", len(out))
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			switch v := string(r.Value); {
			case v == sentinel:
				done = true
			case !done && !strings.HasPrefix(v, "sentinel-"):
				out = append(out, r)
			}
		})
		if done {
			return out
		}
	}
}

func cfValues(rs []*kgo.Record) []string {
	var vs []string
	for _, r := range rs {
		vs = append(vs, fmt.Sprintf("%s@%d", r.Value, r.Offset))
	}
	return vs
}

// cfRange is one acknowledgement batch of a staging.
type cfRange struct {
	part        int32
	first, last int64
	ackType     int8
}

// cfStage stages the given batches (any partitions of cfIn, ascending within a partition)
// in p's transaction for member m.
func cfStage(p *txnProducer, m *shareMember, memberEpoch int32, rs ...cfRange) *wire.TxnShareAcknowledgeResponse {
	p.t.Helper()
	byPart := map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{}
	var parts []int32
	for _, r := range rs {
		if _, ok := byPart[r.part]; !ok {
			parts = append(parts, r.part)
		}
		byPart[r.part] = append(byPart[r.part], wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: r.first, LastOffset: r.last, AcknowledgeTypes: []int8{r.ackType}})
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	tp := wire.TxnShareAcknowledgeRequestTopic{TopicID: m.topicID}
	for _, part := range parts {
		tp.Partitions = append(tp.Partitions, wire.TxnShareAcknowledgeRequestTopicPartition{PartitionIndex: part, AcknowledgementBatches: byPart[part]})
	}
	req := &wire.TxnShareAcknowledgeRequest{TransactionalID: &p.id, GroupID: m.group, ProducerID: p.pid, ProducerEpoch: p.epoch,
		MemberID: m.id, MemberEpoch: memberEpoch, Topics: []wire.TxnShareAcknowledgeRequestTopic{tp}}
	return roundTrip(p.t, p.addr, req).(*wire.TxnShareAcknowledgeResponse)
}

// cfCodes returns the top-level error code and the per-partition codes of a response.
func cfCodes(resp *wire.TxnShareAcknowledgeResponse) (int16, map[int32]int16) {
	parts := map[int32]int16{}
	for _, tr := range resp.Responses {
		for _, pr := range tr.Partitions {
			parts[pr.PartitionIndex] = pr.ErrorCode
		}
	}
	return resp.ErrorCode, parts
}

// cfWantFencedStaging checks that a staging by a producer whose transaction the
// coordinator already ended (timeout, fencing) was refused as a whole: registration in
// the transaction fails before any record changes state (D8), with the produce path's
// fencing error.
func cfWantFencedStaging(t *testing.T, resp *wire.TxnShareAcknowledgeResponse) {
	t.Helper()
	top, parts := cfCodes(resp)
	if top != kerr.InvalidProducerEpoch.Code && top != kerr.ProducerFenced.Code {
		t.Fatalf("staging by a fenced producer: top-level %v, partitions %v; want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED",
			kerr.ErrorForCode(top), parts)
	}
}

// cfMetrics gathers the broker's metrics: name (plus {label=value,...}) → value.
func cfMetrics(t *testing.T, tb *testbroker.Broker) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(tb.Broker.Metrics())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			if ls := m.GetLabel(); len(ls) > 0 {
				var kv []string
				for _, l := range ls {
					kv = append(kv, l.GetName()+"="+l.GetValue())
				}
				key += "{" + strings.Join(kv, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

const cfPending = "exactq_tx_pending_records"

func cfAcks(outcome string) string {
	return "exactq_txn_share_ack_records_total{outcome=" + outcome + "}"
}

// ---------------------------------------------------------------------------------------
// Spec 9.1: integration scenarios (ShareConsumerTransactionTest).

// 9.1.1 — one record, explicit ACCEPT staged and committed: lag 0, the next poll is empty,
// and the state was written (it survives a restart).
func TestKIP1289_CommitAccept(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-commit-accept", 60000)
	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))
	e.wantOffsetsNow(0, 0, 1) // TX_PENDING holds the start offset (D12)
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 1, 0)
	cfNothingDelivered(t, m)

	// The resolution was written to __share_group_state: a restarted broker knows it.
	e.tb.Restart()
	e.cl = newClient(t, e.tb.Addr)
	e.waitOffsets(0, 1, 0)
}

// 9.1.2 — an output record and the staged ACCEPT in one transaction: read_committed sees
// the output (at offset 0) only after the commit; lag 0; no redelivery.
func TestKIP1289_CommitWithOutputRecordInSameTransaction(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-commit-output", 60000)
	cfProduceOutput(e, p, 0, "out-0")
	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))

	// While the transaction is open the output is not stable.
	lso, err := kadm.NewClient(e.cl).ListCommittedOffsets(ctxT(t), cfOut)
	if err != nil || lso[cfOut][0].Offset != 0 {
		t.Fatalf("last stable offset of the output with the transaction open: %+v %v, want 0", lso[cfOut][0], err)
	}
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if got := cfReadCommitted(e); len(got) != 1 || string(got[0].Value) != "out-0" || got[0].Offset != 0 {
		t.Fatalf("read_committed output: %v, want [out-0@0]", cfValues(got))
	}
	e.waitOffsets(0, 1, 0)
	cfNothingDelivered(t, m)
}

// 9.1.3 — staging with a member epoch one ahead or two behind is fenced
// (FENCED_MEMBER_EPOCH, the client's CommitFailed), stages nothing, and after the abort the
// record is still unacknowledged (lag 1) and still the member's.
func TestKIP1289_RejectsFencedMemberEpochs(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-fenced-member", 60000)
	for _, delta := range []int32{+1, -2} {
		bad := m.epoch + delta
		if bad == 0 { // 0 means "joining": use the member's previous epoch, also stale
			bad = m.epoch - 1
		}
		top, parts := cfCodes(cfStage(p, m, bad, cfRange{0, 0, 0, wire.AckAccept}))
		if top != kerr.FencedMemberEpoch.Code {
			t.Errorf("member epoch %d (current %d): top-level %v, partitions %v; want FENCED_MEMBER_EPOCH",
				bad, m.epoch, kerr.ErrorForCode(top), parts)
		}
	}
	if code := cfEnd(p, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 0, 1)
	cfNothingDelivered(t, m) // still ACQUIRED by m, not released
	// Nothing was staged: the member can still stage the record with its real epoch.
	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 1, 0)
}

// 9.1.4 — stage offset 0, then a new input arrives, is polled and offset 1 is staged in
// the same transaction; the commit acknowledges both.
func TestKIP1289_CommitAcrossMultiplePolls(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-multi-poll", 60000)
	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))
	e.produceInputs(0, 1)
	cfWantAcquired(t, cfFetchUntil(m, 1), 1, 1, 1) // offset 0 is TX_PENDING, not redelivered
	stageOK(t, p.stage(m, 1, 1, wire.AckAccept))
	e.wantOffsetsNow(0, 0, 2)
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 2, 0)
	cfNothingDelivered(t, m)
}

// 9.1.5 — stage ACCEPT, abort: lag 1 and the same consumer receives offset 0 again.
func TestKIP1289_AbortAccept(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-abort-accept", 60000)
	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))
	if code := cfEnd(p, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	cfWantAcquired(t, cfFetchUntil(m, 1), 0, 0, 2)
	e.waitOffsets(0, 0, 1)
}

// 9.1.6 — output plus staged ACCEPT, aborted: read_committed sees no output (though it was
// written), lag 1, and the input is delivered again.
func TestKIP1289_AbortWithOutputRecordInSameTransaction(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-abort-output", 60000)
	cfProduceOutput(e, p, 0, "out-0")
	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))
	if code := cfEnd(p, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	if got := cfReadCommitted(e); len(got) != 0 {
		t.Fatalf("read_committed output after abort: %v, want none", cfValues(got))
	}
	if got := readValues(t, e.tb.Addr, cfOut, false); len(got) != 1 || got[0] != "out-0" {
		t.Fatalf("read_uncommitted output: %v, want the aborted [out-0]", got)
	}
	e.waitOffsets(0, 0, 1)
	cfWantAcquired(t, cfFetchUntil(m, 1), 0, 0, 2)
}

// 9.1.7 — REJECT staged and committed: the record is archived, lag 0, never delivered
// again.
func TestKIP1289_CommitReject(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-commit-reject", 60000)
	stageOK(t, p.stage(m, 0, 0, wire.AckReject))
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 1, 0)
	cfNothingDelivered(t, m)
}

// 9.1.9 — three records, an acknowledgement built by hand for offset 1 only: after the
// commit the lag is 2 and offsets 0 and 2 are still the member's (not redelivered); a
// second transaction with two batches acknowledges them.
func TestKIP1289_CommitSubsetAccept(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 3)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 2, 1)
	p := cfInitProducer(e, "cf-subset", 60000)
	stageOK(t, cfStage(p, m, m.epoch, cfRange{0, 1, 1, wire.AckAccept}))
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 0, 2)
	cfNothingDelivered(t, m)

	stageOK(t, cfStage(p, m, m.epoch, cfRange{0, 0, 0, wire.AckAccept}, cfRange{0, 2, 2, wire.AckAccept}))
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 3, 0)
}

// 9.1.10 — one transaction acknowledges records of enough source partitions that their
// share-partition keys map to every __share_group_state partition (3, as in the spec's
// test setup); the transaction holds all of them and the commit resolves every one.
func TestKIP1289_CommitAcrossMultipleShareStatePartitions(t *testing.T) {
	t.Parallel()
	const stateParts = 3
	e := cfStart(t, map[string]string{"share.coordinator.state.topic.num.partitions": fmt.Sprint(stateParts)}, nil, 12, 0)
	ctx := ctxT(t)
	adm := kadm.NewClient(e.cl)

	// The topic id is random: add source partitions until every state partition is hit.
	var topicID [16]byte
	var nParts int32
	covered := map[int32]bool{}
	for {
		md, err := adm.Metadata(ctx, cfIn)
		if err != nil {
			t.Fatal(err)
		}
		topicID, nParts = md.Topics[cfIn].ID, int32(len(md.Topics[cfIn].Partitions))
		covered = map[int32]bool{}
		for p := int32(0); p < nParts; p++ {
			covered[sharestate.PartitionFor(sharestate.Key{GroupID: cfGroup, TopicID: topicID, Partition: p}, stateParts)] = true
		}
		if len(covered) == stateParts {
			break
		}
		if nParts >= 48 {
			t.Fatalf("%d source partitions still cover only state partitions %v", nParts, covered)
		}
		if _, err := adm.CreatePartitions(ctx, 4, cfIn); err != nil {
			t.Fatal(err)
		}
	}
	var parts []int32
	for p := int32(0); p < nParts; p++ {
		parts = append(parts, p)
		e.produceInputs(p, 1)
	}

	m := e.join(cfMember)
	acquired := map[int32][]cfAcq{}
	cfEventually(t, "one record acquired on every source partition", func() (bool, string) {
		for p, rs := range cfFetch(m, 500, parts...) {
			acquired[p] = append(acquired[p], rs...)
		}
		return len(acquired) == int(nParts), fmt.Sprintf("%d of %d partitions", len(acquired), nParts)
	})
	var rs []cfRange
	for _, p := range parts {
		cfWantAcquired(t, acquired[p], 0, 0, 1)
		rs = append(rs, cfRange{p, 0, 0, wire.AckAccept})
	}
	p := cfInitProducer(e, "cf-state-partitions", 60000)
	stageOK(t, cfStage(p, m, m.epoch, rs...))

	// The transaction holds every state partition (registered by the staging).
	dt, err := adm.DescribeTransactions(ctx, p.id)
	if err != nil {
		t.Fatal(err)
	}
	held := dt[p.id].Topics["__share_group_state"]
	if len(held) != stateParts {
		t.Fatalf("transaction %s (%s) holds __share_group_state partitions %v, want all %d (topics %v)", p.id, dt[p.id].State, held, stateParts, dt[p.id].Topics)
	}

	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	cfEventually(t, "every source partition at start offset 1, lag 0", func() (bool, string) {
		offs, err := e.shareOffsets()
		if err != nil {
			return false, err.Error()
		}
		var behind []string
		for _, p := range parts {
			if o := offs[p]; o.Err != nil || o.StartOffset != 1 || o.Lag != 0 {
				behind = append(behind, fmt.Sprintf("p%d start %d lag %d err %v", p, o.StartOffset, o.Lag, o.Err))
			}
		}
		return len(behind) == 0, strings.Join(behind, "; ")
	})
	cfNothingDelivered(t, m, parts...)
}

// ---------------------------------------------------------------------------------------
// Spec 9.6: recommended extra cases.

// 38 — the acquisition lock expires before staging and another member gets the record:
// the late staging fails with INVALID_RECORD_STATE, the application aborts, and the output
// appears once (from the member that then holds the record), never twice.
func TestKIP1289_LockExpiryBeforeStaging(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, map[string]string{"share.record.lock.duration.ms": "1000"}, 1, 1)
	a := e.join(cfMember)
	cfWantAcquired(t, cfFetch(a, 1000)[0], 0, 0, 1)
	pa := cfInitProducer(e, "cf-slow", 60000)
	cfProduceOutput(e, pa, 0, "out-from-slow")

	// a's lock runs out; b gets the record.
	b := e.join(cfOther)
	cfWantAcquired(t, cfFetchUntil(b, 1), 0, 0, 2)

	cfHeartbeat(a) // a is still a member, with its current epoch: the record is what fails
	top, parts := cfCodes(pa.stage(a, 0, 0, wire.AckAccept))
	if top != 0 || parts[0] != kerr.InvalidRecordState.Code {
		t.Fatalf("staging after the lock expired: top-level %v, partition %v; want INVALID_RECORD_STATE for the partition",
			kerr.ErrorForCode(top), kerr.ErrorForCode(parts[0]))
	}
	if code := cfEnd(pa, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}

	pb := cfInitProducer(e, "cf-fast", 60000)
	cfProduceOutput(e, pb, 0, "out-from-fast")
	stageOK(t, pb.stage(b, 0, 0, wire.AckAccept))
	if code := cfEnd(pb, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if got := cfReadCommitted(e); len(got) != 1 || string(got[0].Value) != "out-from-fast" {
		t.Fatalf("read_committed output: %v, want exactly [out-from-fast]", cfValues(got))
	}
	e.waitOffsets(0, 1, 0)
}

// 39 — the producer stalls with acknowledgements staged: the coordinator aborts the
// transaction at its timeout, the records become AVAILABLE (redelivered), its output is
// never visible, and the timed-out producer can neither commit nor stage any more.
func TestKIP1289_TransactionTimeoutAbort(t *testing.T) {
	t.Parallel()
	e := cfStart(t, map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"}, nil, 1, 3)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 2, 1)
	p := cfInitProducer(e, "cf-timeout", 800)
	cfProduceOutput(e, p, 0, "out-stalled")
	stageOK(t, p.stage(m, 0, 2, wire.AckAccept))

	// Nothing ends the transaction: the timeout does.
	cfWantAcquired(t, cfFetchUntil(m, 3), 0, 2, 2)
	e.waitOffsets(0, 0, 3)
	if got := cfReadCommitted(e); len(got) != 0 {
		t.Fatalf("read_committed output after the timeout abort: %v, want none", cfValues(got))
	}

	cfWantFencedStaging(t, p.stage(m, 0, 2, wire.AckAccept))
	if code := cfEnd(p, true); code == 0 {
		t.Fatal("the timed-out producer committed")
	}
	// The refused staging changed nothing: the records are still the member's.
	fresh := cfInitProducer(e, "cf-timeout", 60000)
	stageOK(t, fresh.stage(m, 0, 2, wire.AckAccept))
	if code := cfEnd(fresh, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 3, 0)
}

// 40 — a new producer with the same transactional id fences the one with staged
// acknowledgements: its open transaction is aborted (records AVAILABLE, output invisible)
// and the old producer's later staging fails.
func TestKIP1289_ProducerFencedByNewInstance(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 5)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 4, 1)
	old := cfInitProducer(e, "cf-fenced", 60000)
	cfProduceOutput(e, old, 0, "out-zombie")
	stageOK(t, old.stage(m, 0, 4, wire.AckAccept))

	fresh := cfInitProducer(e, "cf-fenced", 60000) // retries CONCURRENT_TRANSACTIONS while the old one is aborted
	if fresh.pid == old.pid && fresh.epoch <= old.epoch {
		t.Fatalf("new instance got pid %d epoch %d, old had epoch %d", fresh.pid, fresh.epoch, old.epoch)
	}
	cfWantAcquired(t, cfFetchUntil(m, 5), 0, 4, 2)
	e.waitOffsets(0, 0, 5)

	cfWantFencedStaging(t, old.stage(m, 0, 4, wire.AckAccept))
	if code := cfEnd(old, true); code == 0 {
		t.Fatal("the fenced producer committed")
	}

	stageOK(t, fresh.stage(m, 0, 4, wire.AckAccept))
	cfProduceOutput(e, fresh, 0, "out-fresh")
	if code := cfEnd(fresh, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if got := cfReadCommitted(e); len(got) != 1 || string(got[0].Value) != "out-fresh" {
		t.Fatalf("read_committed output: %v, want exactly [out-fresh]", cfValues(got))
	}
	e.waitOffsets(0, 5, 0)
}

// 42 — abort at the delivery limit (D5): with share.delivery.count.limit=2 the first abort
// (delivery 1) makes the record AVAILABLE, the second (delivery 2, the limit) archives it:
// no further delivery, lag 0.
func TestKIP1289_AbortAtDeliveryLimitArchives(t *testing.T) {
	t.Parallel()
	e := cfStart(t, map[string]string{"group.share.min.delivery.count.limit": "2"},
		map[string]string{"share.delivery.count.limit": "2"}, 1, 1)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 0, 1)
	p := cfInitProducer(e, "cf-poison", 60000)

	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))
	if code := cfEnd(p, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	cfWantAcquired(t, cfFetchUntil(m, 1), 0, 0, 2)

	stageOK(t, p.stage(m, 0, 0, wire.AckAccept))
	if code := cfEnd(p, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 1, 0)
	cfNothingDelivered(t, m)
	if got := cfMetrics(t, e.tb)[cfAcks("archived_on_abort")]; got != 1 {
		t.Errorf("archived_on_abort acknowledgements: %v, want 1", got)
	}
}

// 43 — two transactions stage disjoint offsets of one partition; one commits, the other
// aborts: only the aborted offsets come back, each transaction's output follows its own
// outcome.
func TestKIP1289_TwoTransactionsDisjointOffsets(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 10)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 9, 1)
	p1 := cfInitProducer(e, "cf-disjoint-1", 60000)
	p2 := cfInitProducer(e, "cf-disjoint-2", 60000)
	// p2 stages the low offsets and aborts; p1 stages the high ones and commits. The
	// committed range alone cannot move the start offset, so the abort must not be lost.
	cfProduceOutput(e, p1, 0, "out-1")
	stageOK(t, p1.stage(m, 5, 9, wire.AckAccept))
	cfProduceOutput(e, p2, 0, "out-2")
	stageOK(t, p2.stage(m, 0, 4, wire.AckAccept))
	e.wantOffsetsNow(0, 0, 10)

	if code := cfEnd(p1, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	e.waitOffsets(0, 0, 5)
	cfNothingDelivered(t, m) // 0-4 still TX_PENDING in p2's transaction
	if code := cfEnd(p2, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	cfWantAcquired(t, cfFetchUntil(m, 5), 0, 4, 2)
	if got := cfReadCommitted(e); len(got) != 1 || string(got[0].Value) != "out-1" {
		t.Fatalf("read_committed output: %v, want exactly [out-1]", cfValues(got))
	}
	e.waitOffsets(0, 0, 5)
}

// 44 — exactq_tx_pending_records rises when acknowledgements are staged and falls when
// their transaction resolves, by commit and by abort; the outcome counters follow.
func TestKIP1289_TxPendingRecordsMetric(t *testing.T) {
	t.Parallel()
	e := cfStart(t, nil, nil, 1, 10)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, 9, 1)
	pending := func() float64 { return cfMetrics(t, e.tb)[cfPending] }
	waitPending := func(want float64) {
		t.Helper()
		cfEventually(t, fmt.Sprintf("%s = %v", cfPending, want), func() (bool, string) {
			got := pending()
			return got == want, fmt.Sprint(got)
		})
	}
	if got := pending(); got != 0 {
		t.Fatalf("%s before staging: %v", cfPending, got)
	}
	p1 := cfInitProducer(e, "cf-metric-1", 60000)
	p2 := cfInitProducer(e, "cf-metric-2", 60000)
	stageOK(t, p1.stage(m, 0, 3, wire.AckAccept))
	if got := pending(); got != 4 {
		t.Fatalf("%s after staging 4: %v", cfPending, got)
	}
	stageOK(t, p2.stage(m, 4, 9, wire.AckReject))
	if got := pending(); got != 10 {
		t.Fatalf("%s after staging 6 more: %v", cfPending, got)
	}
	if code := cfEnd(p1, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	waitPending(6)
	if code := cfEnd(p2, false); code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(code))
	}
	waitPending(0)
	got := cfMetrics(t, e.tb)
	for outcome, want := range map[string]float64{"staged": 10, "committed": 4, "aborted": 6} {
		if got[cfAcks(outcome)] != want {
			t.Errorf("%s: %v, want %v", cfAcks(outcome), got[cfAcks(outcome)], want)
		}
	}
	e.waitOffsets(0, 4, 6)
}
