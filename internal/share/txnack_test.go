package share

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/wire"
)

// Tests named after kip-1289.md section 9 where the scenario applies to the share side
// of one broker (the Manager over a real share-state store on coordlog.Memory).

const txnID = "tx1"

// consumer is a share consumer's session as the tests drive it.
type consumer struct {
	e      *env
	member string
	epoch  int32
}

func (e *env) consumer(member string) *consumer { return &consumer{e: e, member: member} }

// poll fetches partition 0 of topicA (and any others given) and returns the acquired
// records of topicA-0.
func (c *consumer) poll(parts ...int32) []acquired {
	c.e.t.Helper()
	if len(parts) == 0 {
		parts = []int32{0}
	}
	resp := c.e.fetch(fetchReq{member: c.member, epoch: c.epoch, parts: parts})
	if resp.ErrorCode != 0 {
		c.e.t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	c.epoch = nextEpoch(c.epoch)
	return acq(part(resp, topicA, 0))
}

// txnAck sends TxnShareAcknowledge for topicA's partitions.
type txnAck struct {
	member   string
	pid      int64
	epoch    int16
	parts    map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch
	topic    [16]byte
	register func(context.Context, []int32) int16
}

func tb(first, last int64, types ...int8) wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch {
	return wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: types}
}

func (e *env) txnAck(a txnAck) *wire.TxnShareAcknowledgeResponse {
	e.t.Helper()
	tid := txnID
	req := &wire.TxnShareAcknowledgeRequest{TransactionalID: &tid, GroupID: group, ProducerID: a.pid, ProducerEpoch: a.epoch, MemberID: a.member, MemberEpoch: 1}
	topic := a.topic
	if topic == ([16]byte{}) {
		topic = topicA
	}
	t := wire.TxnShareAcknowledgeRequestTopic{TopicID: topic}
	for p := int32(0); p < 8; p++ {
		if bs, ok := a.parts[p]; ok {
			t.Partitions = append(t.Partitions, wire.TxnShareAcknowledgeRequestTopicPartition{PartitionIndex: p, AcknowledgementBatches: bs})
		}
	}
	req.Topics = append(req.Topics, t)
	reg := a.register
	if reg == nil {
		reg = func(context.Context, []int32) int16 { return 0 }
	}
	return e.m.TxnShareAcknowledge(context.Background(), req, reg)
}

// stageOK stages and requires NONE everywhere.
func (e *env) stageOK(a txnAck) {
	e.t.Helper()
	resp := e.txnAck(a)
	wantCode(e.t, "top level", resp.ErrorCode, nil)
	for _, t := range resp.Responses {
		for _, p := range t.Partitions {
			wantCode(e.t, "partition", p.ErrorCode, nil)
		}
	}
}

func partCode(t *testing.T, resp *wire.TxnShareAcknowledgeResponse, p int32) int16 {
	t.Helper()
	for _, tr := range resp.Responses {
		for _, pr := range tr.Partitions {
			if pr.PartitionIndex == p {
				return pr.ErrorCode
			}
		}
	}
	t.Fatalf("partition %d missing from %+v", p, resp)
	return 0
}

// marker applies a transaction marker on __share_group_state-0 as the broker's
// WriteTxnMarkers handler does.
func (e *env) marker(pid int64, epoch int16, commit bool) {
	e.t.Helper()
	err := e.m.ApplyMarker(context.Background(), 0, pid, epoch, commit, func(context.Context) error {
		e.mem.AppendMarker(pid, epoch, commit, 0)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// stored returns the store's batches of topicA-0.
func (e *env) stored() []sharestate.StateBatch {
	e.t.Helper()
	st, err := e.store.Read(context.Background(), sharestate.Key{GroupID: group, TopicID: topicA, Partition: 0}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Batches
}

// states returns the live window of topicA-0 as (first, last, state, count) ranges.
func (e *env) states() []sharepartition.RecordRange {
	e.t.Helper()
	for _, d := range e.m.Describe(group) {
		if d.TopicID == topicA && d.Partition == 0 {
			var out []sharepartition.RecordRange
			for _, r := range d.Window.Records {
				if n := len(out); n > 0 && out[n-1].LastOffset+1 == r.FirstOffset && out[n-1].State == r.State && out[n-1].DeliveryCount == r.DeliveryCount {
					out[n-1].LastOffset = r.LastOffset
					continue
				}
				out = append(out, sharepartition.RecordRange{FirstOffset: r.FirstOffset, LastOffset: r.LastOffset, State: r.State, DeliveryCount: r.DeliveryCount})
			}
			return out
		}
	}
	return nil
}

func rr(first, last int64, s sharepartition.State, count int16) sharepartition.RecordRange {
	return sharepartition.RecordRange{FirstOffset: first, LastOffset: last, State: s, DeliveryCount: count}
}

func (e *env) wantStates(want ...sharepartition.RecordRange) {
	e.t.Helper()
	if got := e.states(); !reflect.DeepEqual(got, want) {
		e.t.Fatalf("window %+v, want %+v", got, want)
	}
}

func (e *env) wantStats(want TxnStats) {
	e.t.Helper()
	if got := e.m.TxnStats(); got != want {
		e.t.Fatalf("txn stats %+v, want %+v", got, want)
	}
}

// setup: topicA-0 initialized, n records, c holding them all (count 1).
func txnSetup(t *testing.T, n int) (*env, *consumer) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	c := e.consumer("m1")
	c.poll()
	e.logs.produce(topicA, 0, n, 0)
	if got := c.poll(); !reflect.DeepEqual(got, []acquired{{0, int64(n) - 1, 1}}) {
		t.Fatalf("acquired %v", got)
	}
	return e, c
}

const (
	tGap    = wire.AckGap
	tAccept = wire.AckAccept
	tReject = wire.AckReject
)

// 1. CommitAccept; 7. CommitReject; gap → ARCHIVED: after the commit nothing is
// redelivered, the lag is 0 and the store holds the terminal states.
func TestTxnCommitAcceptRejectGap(t *testing.T) {
	e, c := txnSetup(t, 6)
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 5, tAccept, tAccept, tReject, tReject, tGap, tAccept)}}})
	e.wantStates(rr(0, 5, sharepartition.TxPending, 1))
	for _, b := range e.stored() {
		if b.DeliveryState != sharestate.StateTxPending || b.TxnProducerID != 7 {
			t.Fatalf("store after staging: %+v", e.stored())
		}
	}
	e.wantStats(TxnStats{Staged: 6, Pending: 6})
	e.marker(7, 1, true) // TV2: the marker carries the bumped epoch
	e.wantStates()       // all terminal: the SPSO moved past them
	if d := e.m.Describe(group); d[0].StartOffset != 6 || d[0].Lag != 0 {
		t.Fatalf("spso %d lag %d", d[0].StartOffset, d[0].Lag)
	}
	want := []sharestate.StateBatch{
		{FirstOffset: 0, LastOffset: 1, DeliveryState: sharestate.StateAcknowledged, DeliveryCount: 1},
		{FirstOffset: 2, LastOffset: 4, DeliveryState: sharestate.StateArchived, DeliveryCount: 1},
		{FirstOffset: 5, LastOffset: 5, DeliveryState: sharestate.StateAcknowledged, DeliveryCount: 1},
	}
	if got := e.stored(); !reflect.DeepEqual(got, want) {
		t.Fatalf("store %+v, want %+v", got, want)
	}
	if got := c.poll(); got != nil {
		t.Fatalf("redelivered after commit: %v", got)
	}
	e.wantStats(TxnStats{Staged: 6, Committed: 6})
	// A restart agrees: nothing comes back.
	e.restart()
	if got := e.consumer("m2").poll(); got != nil {
		t.Fatalf("redelivered after restart: %v", got)
	}
}

// 5. AbortAccept: the records are AVAILABLE again and redelivered, with a higher count.
func TestTxnAbortAcceptRedelivers(t *testing.T) {
	e, c := txnSetup(t, 3)
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 2, tAccept)}}})
	e.marker(7, 1, false)
	e.wantStates(rr(0, 2, sharepartition.Available, 1))
	if got := c.poll(); !reflect.DeepEqual(got, []acquired{{0, 2, 2}}) {
		t.Fatalf("redelivered %v", got)
	}
	e.wantStats(TxnStats{Staged: 3, Aborted: 3})
}

// 42. Abort when the delivery count is at the limit: ARCHIVED, no poison loop (D5).
func TestTxnAbortAtDeliveryLimitArchives(t *testing.T) {
	e := newEnv(t)
	gc := DefaultGroupConfig()
	gc.DeliveryCountLimit = 2
	e.groups[group] = gc
	e.init(group, topicA, 0)
	c := e.consumer("m1")
	c.poll()
	e.logs.produce(topicA, 0, 2, 0)
	c.poll()
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	e.marker(7, 1, false)
	if got := c.poll(); !reflect.DeepEqual(got, []acquired{{0, 1, 2}}) {
		t.Fatalf("redelivered %v", got)
	}
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 1, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	if b := e.stored(); b[0].TxnAbortState != sharestate.StateArchived {
		t.Fatalf("store staging %+v", b)
	}
	// Raising the limit after staging changes nothing: the target was decided then.
	gc.DeliveryCountLimit = 5
	e.groups[group] = gc
	e.marker(7, 2, false)
	e.wantStates()
	if got := c.poll(); got != nil {
		t.Fatalf("delivered again: %v", got)
	}
	if b := e.stored(); len(b) != 1 || b[0].DeliveryState != sharestate.StateArchived {
		t.Fatalf("store %+v", b)
	}
	e.wantStats(TxnStats{Staged: 4, Aborted: 4, ArchivedOnAbort: 2})
}

// D12 / 11: TX_PENDING records are never delivered (not even after their lock would have
// expired) and hold the SPSO; records of the same partition outside the transaction keep
// their lock (9. CommitSubsetAccept).
func TestTxnStagedRecordsNeverDeliveredAndHoldStartOffset(t *testing.T) {
	e, _ := txnSetup(t, 3)
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 0, tAccept)}}})
	e.advance(sharepartitionLock) // the other two locks expire; the staged one has none
	e.wantStates(rr(0, 0, sharepartition.TxPending, 1), rr(1, 2, sharepartition.Available, 1))
	if got := e.consumer("m2").poll(); !reflect.DeepEqual(got, []acquired{{1, 2, 2}}) {
		t.Fatalf("acquired %v", got)
	}
	if d := e.m.Describe(group); d[0].StartOffset != 0 || d[0].Lag != 3 {
		t.Fatalf("spso %d lag %d", d[0].StartOffset, d[0].Lag)
	}
	e.marker(7, 1, true)
	if d := e.m.Describe(group); d[0].StartOffset != 1 || d[0].Lag != 2 {
		t.Fatalf("after commit: spso %d lag %d", d[0].StartOffset, d[0].Lag)
	}
	if start, lag, err := e.m.Offsets(context.Background(), group, topicA, 0); err != nil || start != 1 || lag != 2 {
		t.Fatalf("offsets %d %d %v", start, lag, err)
	}
}

const sharepartitionLock = 30 * time.Second // the default lock duration

// 18 / 34 (D3): RELEASE and RENEW cannot be staged: INVALID_REQUEST for the partition,
// nothing registered for it, and malformed batches likewise.
func TestTxnReleaseAndRenewAreInvalidRequest(t *testing.T) {
	e, _ := txnSetup(t, 4)
	var registered [][]int32
	reg := func(_ context.Context, ps []int32) int16 { registered = append(registered, ps); return 0 }
	for _, b := range []wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{tb(0, 0, 2), tb(0, 0, 4), tb(1, 0, tAccept), tb(0, 2, tAccept, tAccept), tb(0, 0, 5)} {
		resp := e.txnAck(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {b}}, register: reg})
		wantCode(t, "top level", resp.ErrorCode, nil)
		wantCode(t, "partition", partCode(t, resp, 0), kerr.InvalidRequest)
	}
	resp := e.txnAck(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(2, 3, tAccept), tb(0, 1, tAccept)}}, register: reg})
	wantCode(t, "descending", partCode(t, resp, 0), kerr.InvalidRequest)
	if registered != nil {
		t.Fatalf("registered %v for invalid requests", registered)
	}
	e.wantStates(rr(0, 3, sharepartition.Acquired, 1))
}

// 34. Null transactional id, empty group, bad member id: top-level INVALID_REQUEST.
func TestTxnInvalidRequestTopLevel(t *testing.T) {
	e, _ := txnSetup(t, 1)
	tid := txnID
	long := "0123456789012345678901234567890123456789"
	for _, req := range []*wire.TxnShareAcknowledgeRequest{
		{GroupID: group, MemberID: "m1"},
		{TransactionalID: &tid, GroupID: "", MemberID: "m1"},
		{TransactionalID: &tid, GroupID: group, MemberID: ""},
		{TransactionalID: &tid, GroupID: group, MemberID: long},
	} {
		req.Topics = []wire.TxnShareAcknowledgeRequestTopic{{TopicID: topicA, Partitions: []wire.TxnShareAcknowledgeRequestTopicPartition{{AcknowledgementBatches: []wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{tb(0, 0, tAccept)}}}}}
		resp := e.m.TxnShareAcknowledge(context.Background(), req, nil)
		wantCode(t, "top level", resp.ErrorCode, kerr.InvalidRequest)
	}
	e.wantStates(rr(0, 0, sharepartition.Acquired, 1))
}

// D7: the member check's error is the top-level code; nothing is registered or staged.
func TestTxnMemberCheck(t *testing.T) {
	e, _ := txnSetup(t, 1)
	e.m.cfg.TxnMemberCheck = func(_ context.Context, g, m string, epoch int32) error {
		if g != group || m != "m1" || epoch != 1 {
			t.Fatalf("checked %s %s %d", g, m, epoch)
		}
		return kerr.FencedMemberEpoch
	}
	reg := func(context.Context, []int32) int16 { t.Fatal("registered for a fenced member"); return 0 }
	resp := e.txnAck(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 0, tAccept)}}, register: reg})
	wantCode(t, "top level", resp.ErrorCode, kerr.FencedMemberEpoch)
	e.wantStates(rr(0, 0, sharepartition.Acquired, 1))
}

// 38 / D10: offsets not ACQUIRED by the member (never acquired, held by another member,
// lock expired) are INVALID_RECORD_STATE for that partition only; the other partition
// is staged.
func TestTxnNotAcquiredIsInvalidRecordStateForThatPartitionOnly(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.init(group, topicA, 1)
	c1, c2 := e.consumer("m1"), e.consumer("m2")
	c1.poll(0)
	c2.poll(1)
	e.logs.produce(topicA, 0, 2, 0)
	e.logs.produce(topicA, 1, 2, 0)
	c1.poll(0) // m1 holds topicA-0
	c2.poll(1) // m2 holds topicA-1
	resp := e.txnAck(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}, 1: {tb(0, 1, tAccept)}}})
	wantCode(t, "top level", resp.ErrorCode, nil)
	wantCode(t, "own partition", partCode(t, resp, 0), nil)
	wantCode(t, "other member's partition", partCode(t, resp, 1), kerr.InvalidRecordState)
	e.wantStates(rr(0, 1, sharepartition.TxPending, 1))
	// Beyond what was ever acquired.
	resp = e.txnAck(txnAck{member: "m2", pid: 8, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{1: {tb(0, 5, tAccept)}}})
	wantCode(t, "past the window", partCode(t, resp, 1), kerr.InvalidRecordState)
	// Lock expired before staging.
	e.advance(sharepartitionLock)
	resp = e.txnAck(txnAck{member: "m2", pid: 8, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{1: {tb(0, 1, tAccept)}}})
	wantCode(t, "expired lock", partCode(t, resp, 1), kerr.InvalidRecordState)
	e.wantStats(TxnStats{Staged: 2, Pending: 2})
}

// Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION for that partition.
func TestTxnUnknownTopicOrPartition(t *testing.T) {
	e, _ := txnSetup(t, 1)
	resp := e.txnAck(txnAck{member: "m1", pid: 7, topic: [16]byte{0xee}, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 0, tAccept)}}})
	wantCode(t, "unknown topic", partCode(t, resp, 0), kerr.UnknownTopicOrPartition)
	resp = e.txnAck(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{5: {tb(0, 0, tAccept)}}})
	wantCode(t, "unknown partition", partCode(t, resp, 5), kerr.UnknownTopicOrPartition)
}

// 35 (D8). All mapped state partitions are registered once, deduplicated, before any
// record changes state; a registration failure is the top-level error and nothing is
// staged.
func TestTxnRegistersStatePartitionsBeforeStaging(t *testing.T) {
	e, _ := txnSetup(t, 2)
	var calls [][]int32
	reg := func(_ context.Context, ps []int32) int16 {
		calls = append(calls, ps)
		if got := e.states(); !reflect.DeepEqual(got, []sharepartition.RecordRange{rr(0, 1, sharepartition.Acquired, 1)}) {
			t.Fatalf("state changed before registration: %+v", got)
		}
		return kerr.ConcurrentTransactions.Code
	}
	resp := e.txnAck(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}, 1: {tb(0, 0, tAccept)}}, register: reg})
	wantCode(t, "top level", resp.ErrorCode, kerr.ConcurrentTransactions)
	if !reflect.DeepEqual(calls, [][]int32{{0}}) {
		t.Fatalf("register calls %v", calls)
	}
	e.wantStates(rr(0, 1, sharepartition.Acquired, 1))
	if b := e.stored(); len(b) != 0 {
		t.Fatalf("store %+v", b)
	}
	e.wantStats(TxnStats{})
}

// 14 / 23. A refused staging write is undone: the records are ACQUIRED again by the
// member (and can be staged again); the error is reported.
func TestTxnWriteFailureUnstages(t *testing.T) {
	e, c := txnSetup(t, 2)
	// The transaction already ended (its marker fenced epoch 0): the store refuses.
	e.marker(7, 1, false)
	resp := e.txnAck(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	wantCode(t, "partition", partCode(t, resp, 0), kerr.InvalidProducerEpoch)
	e.wantStates(rr(0, 1, sharepartition.Acquired, 1))
	e.wantStats(TxnStats{})
	// Still the member's: a new transaction stages them.
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 1, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	e.marker(7, 2, true)
	e.wantStates()
	if got := c.poll(); got != nil {
		t.Fatalf("redelivered %v", got)
	}
}

// A staging write whose append failed has an unknown outcome: the partition reloads from
// the store (the truth), where nothing was staged.
func TestTxnWriteOutcomeUnknownReloads(t *testing.T) {
	e, _ := txnSetup(t, 2)
	e.mem.FailAppend = errors.New("disk on fire")
	resp := e.txnAck(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	if partCode(t, resp, 0) == 0 {
		t.Fatal("a staging whose write failed was answered NONE")
	}
	if got := e.consumer("m2").poll(); !reflect.DeepEqual(got, []acquired{{0, 1, 1}}) {
		t.Fatalf("acquired %v", got)
	}
}

// 20 / D6. A marker of another producer id or with a lower epoch resolves nothing; the
// TV2 marker (bumped epoch) resolves, and so does one at the staging epoch.
func TestTxnMarkerForOtherProducerOrLowerEpochResolvesNothing(t *testing.T) {
	e, _ := txnSetup(t, 4)
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 3, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	e.stageOK(txnAck{member: "m1", pid: 9, epoch: 3, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(2, 3, tAccept)}}})
	e.marker(8, 4, true)
	e.marker(7, 2, true)
	e.wantStates(rr(0, 3, sharepartition.TxPending, 1))
	e.wantStats(TxnStats{Staged: 4, Pending: 4})
	e.marker(7, 4, true) // TV2: EndTxn bumped the epoch
	e.wantStates(rr(2, 3, sharepartition.TxPending, 1))
	e.marker(9, 3, false) // the staging epoch itself
	e.wantStates(rr(2, 3, sharepartition.Available, 1))
	e.wantStats(TxnStats{Staged: 4, Committed: 2, Aborted: 2})
}

// 43. Two transactions stage disjoint offsets of one partition; one commits, one aborts.
func TestTxnTwoTransactionsOneCommitsOneAborts(t *testing.T) {
	e, c := txnSetup(t, 4)
	e.stageOK(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	e.stageOK(txnAck{member: "m1", pid: 8, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(2, 3, tAccept)}}})
	e.marker(8, 1, true)
	e.marker(7, 1, false)
	e.wantStates(rr(0, 1, sharepartition.Available, 1), rr(2, 3, sharepartition.Acknowledged, 1))
	if got := c.poll(); !reflect.DeepEqual(got, []acquired{{0, 1, 2}}) {
		t.Fatalf("redelivered %v", got)
	}
}

// 13-16 at this level. A restart between staging and the marker keeps the records
// TX_PENDING (and undeliverable); the marker after the restart resolves them, whether the
// partition was loaded before the marker or only after.
func TestTxnRestartBetweenStagingAndMarker(t *testing.T) {
	for _, loadFirst := range []bool{true, false} {
		for _, commit := range []bool{true, false} {
			e, _ := txnSetup(t, 3)
			e.stageOK(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
			e.restart()
			c := e.consumer("m2")
			if loadFirst {
				if got := c.poll(); !reflect.DeepEqual(got, []acquired{{2, 2, 1}}) { // 2 was acquired, never persisted
					t.Fatalf("acquired %v", got)
				}
				e.wantStates(rr(0, 1, sharepartition.TxPending, 1), rr(2, 2, sharepartition.Acquired, 1))
				e.wantStats(TxnStats{Pending: 2})
			}
			e.marker(7, 1, commit)
			var want []acquired
			switch {
			case loadFirst && !commit:
				want = []acquired{{0, 1, 2}}
			case !loadFirst && commit:
				want = []acquired{{2, 2, 1}}
			case !loadFirst && !commit:
				want = []acquired{{0, 1, 2}, {2, 2, 1}}
			}
			if got := c.poll(); !reflect.DeepEqual(got, want) {
				t.Fatalf("loadFirst=%v commit=%v: acquired %v, want %v", loadFirst, commit, got, want)
			}
			if commit {
				e.wantStats(TxnStats{Committed: 2})
			} else {
				e.wantStats(TxnStats{Aborted: 2})
			}
		}
	}
}

// A marker appended durably, then the process "crashes" before memory is updated (the
// store's and the share partition's): the replay resolves it (store.ApplyMarker's
// contract), and the share partition loads resolved.
func TestTxnMarkerAppendedThenCrashReplays(t *testing.T) {
	e, _ := txnSetup(t, 2)
	e.stageOK(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	crash := errors.New("crashed after the append")
	err := e.m.ApplyMarker(context.Background(), 0, 7, 1, true, func(context.Context) error {
		e.mem.AppendMarker(7, 1, true, 0)
		return crash
	})
	if !errors.Is(err, crash) {
		t.Fatal(err)
	}
	e.wantStates(rr(0, 1, sharepartition.TxPending, 1)) // nothing resolved in memory
	e.restart()
	if got := e.consumer("m2").poll(); got != nil {
		t.Fatalf("delivered %v", got)
	}
	e.wantStates()
	if b := e.stored(); len(b) != 1 || b[0].DeliveryState != sharestate.StateAcknowledged {
		t.Fatalf("store %+v", b)
	}
}

// Memory and store agree after a marker, and a later Update does not overwrite the
// resolution: after an abort the records are re-acquired and acknowledged; the store
// ends with the acknowledgement, and a restart shows the same as memory.
func TestTxnLaterUpdateKeepsResolution(t *testing.T) {
	e, c := txnSetup(t, 4)
	e.stageOK(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	e.marker(7, 1, false)
	// An ordinary acknowledgement on other offsets after the marker.
	ar := e.ack(ackReq{member: "m1", epoch: c.epoch, acks: acks{0: {ackBatch(3, 3, typeReject)}}})
	wantCode(t, "ack", ar.Topics[0].Partitions[0].ErrorCode, nil)
	c.epoch = nextEpoch(c.epoch)
	before := e.states()
	e.restart()
	e.m.Describe(group)
	c2 := e.consumer("m2")
	got := c2.poll()
	// 0-1 AVAILABLE (count 1, aborted), 2 never persisted (gap), 3 ARCHIVED.
	if !reflect.DeepEqual(got, []acquired{{0, 2, 2}}) && !reflect.DeepEqual(got, []acquired{{0, 1, 2}, {2, 2, 1}}) {
		t.Fatalf("after restart acquired %v (before: %+v)", got, before)
	}
	if b := e.stored(); b[len(b)-1].DeliveryState != sharestate.StateArchived {
		t.Fatalf("store %+v", b)
	}
}

// Long polls wake when an abort makes staged records acquirable.
func TestTxnAbortWakesLongPoll(t *testing.T) {
	e, _ := txnSetup(t, 1)
	e.stageOK(txnAck{member: "m1", pid: 7, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 0, tAccept)}}})
	resp, wait := e.m.ShareFetch(context.Background(), 0, 2, fetchReq{member: "m2", epoch: 0, parts: []int32{0}, maxWaitMs: 5000}.build())
	if resp != nil || wait == nil {
		t.Fatal("expected a long poll")
	}
	done := make(chan *kmsg.ShareFetchResponse)
	go func() { done <- sfr(wait()) }()
	for e.logs.watchers(topicA, 0) == 0 {
		yield()
	}
	e.marker(7, 1, false)
	e.wantAcquired(<-done, topicA, 0, acquired{0, 0, 2})
}
