package share

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startSession opens m's session on topicA partition 0 after initializing it, produces n
// single-record batches and returns the next session epoch.
func (e *env) startSession(member string, n int) int32 {
	e.t.Helper()
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: member, epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, n, 0)
	return 1
}

func TestLockExpiryRedeliversWithHigherDeliveryCount(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep}), topicA, 0, acquired{0, 9, 1})
	e.advance(29 * time.Second)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep + 1}), topicA, 0) // still locked
	e.advance(time.Second)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep + 2}), topicA, 0, acquired{0, 9, 2})
}

func TestAckAfterLockExpiryIsInvalidRecordState(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.advance(30 * time.Second)
	ar := e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "late ack", ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRecordState)
}

func TestLockExpiryAtDeliveryLimitArchives(t *testing.T) {
	e := newEnv(t)
	gc := DefaultGroupConfig()
	gc.DeliveryCountLimit = 2
	gc.RecordLockDurationMs = 1000
	e.groups[group] = gc
	ep := e.startSession("m1", 3)
	resp := e.fetch(fetchReq{member: "m1", epoch: ep})
	if resp.AcquisitionLockTimeoutMillis != 1000 {
		t.Fatalf("lock timeout %d, want the group's 1000", resp.AcquisitionLockTimeoutMillis)
	}
	e.advance(time.Second)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep + 1}), topicA, 0, acquired{0, 2, 2})
	e.advance(time.Second)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep + 2}), topicA, 0)
	if d := e.m.Describe(group); d[0].StartOffset != 3 || d[0].Window.Counters.LockExpired != 6 {
		t.Fatalf("after archiving: spso %d, counters %+v", d[0].StartOffset, d[0].Window.Counters)
	}
	// The archiving is durable: a restart does not bring the records back.
	e.restart()
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 1, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{3, 3, 1})
}

func TestRenewKeepsTheLock(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 2)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.advance(20 * time.Second)
	ar := e.ack(ackReq{member: "m1", epoch: ep + 1, renew: true, acks: acks{0: {ackBatch(0, 1, typeRenew)}}})
	wantCode(t, "renew", ar.Topics[0].Partitions[0].ErrorCode, nil)
	if ar.AcquisitionLockTimeoutMillis != 30000 {
		t.Fatalf("renew lock timeout %d", ar.AcquisitionLockTimeoutMillis)
	}
	e.advance(20 * time.Second) // 40s after the acquisition, 20s after the renewal
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0)
	ar = e.ack(ackReq{member: "m1", epoch: ep + 2, acks: acks{0: {ackBatch(0, 1, typeAccept)}}})
	wantCode(t, "accept after renew", ar.Topics[0].Partitions[0].ErrorCode, nil)
}

func TestRenewPiggybackedOnShareFetchDoesNotFetch(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 2)
	e.fetch(fetchReq{member: "m1", epoch: ep, maxRecords: 1, batchSize: 1})
	resp := e.fetch(fetchReq{member: "m1", epoch: ep + 1, renew: true, acks: acks{0: {ackBatch(0, 0, typeRenew)}}})
	rp := part(resp, topicA, 0)
	wantCode(t, "renew", rp.AcknowledgeErrorCode, nil)
	if len(rp.AcquiredRecords) != 0 {
		t.Fatalf("a renewing fetch acquired %v", acq(rp))
	}
	// KIP-1222: the fetch parameters must all be 0.
	req := fetchReq{member: "m1", epoch: ep + 2, acks: acks{0: {ackBatch(0, 0, typeRenew)}}}.build()
	req.IsRenewAck, req.MaxWaitMillis = true, 100
	r, _ := e.m.ShareFetch(context.Background(), 0, 2, req)
	wantCode(t, "renew with MaxWaitMs", sfr(r).ErrorCode, kerr.InvalidRequest)
}

func TestRenewRules(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 2)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	// Type 4 without IsRenewAck, or on v1: the partition's INVALID_REQUEST.
	ar := e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 1, typeRenew)}}})
	wantCode(t, "renew without IsRenewAck", ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)
	ar = e.ack(ackReq{member: "m1", epoch: ep + 2, version: 1, renew: true, acks: acks{0: {ackBatch(0, 1, typeRenew)}}})
	wantCode(t, "renew on v1", ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)
	// share.renew.acknowledge.enable=false: INVALID_RECORD_STATE.
	gc := DefaultGroupConfig()
	gc.RenewAcknowledgeEnable = false
	e.groups[group] = gc
	e.fetch(fetchReq{member: "m1", epoch: ep + 3}) // a fetch applies the new group config
	ar = e.ack(ackReq{member: "m1", epoch: ep + 4, renew: true, acks: acks{0: {ackBatch(0, 1, typeRenew)}}})
	wantCode(t, "renew disabled", ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRecordState)
}

// A member that leaves keeps its share session, as in Kafka 4.4 (issue 16):
// confluent-kafka's ShareConsumer sends the leave heartbeat first and then closes the
// session with its last acknowledgements (ShareAcknowledge epoch -1). Its records stay
// ACQUIRED until then, a positive-epoch request on the session is still served, and the
// close applies its acknowledgements before it releases the rest.
func TestMemberRemovedKeepsSession(t *testing.T) {
	for _, closeBy := range []string{"ShareAcknowledge", "ShareFetch"} {
		t.Run(closeBy, func(t *testing.T) {
			e := newEnv(t)
			ep := e.startSession("m1", 10)
			e.fetch(fetchReq{member: "m1", epoch: ep})
			e.m.MemberRemoved(group, "m1")
			e.settle()
			// Nothing was released: another member gets nothing.
			e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0)
			ar := e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 1, typeAccept)}}})
			wantCode(t, "ack on the session after the leave", ar.Topics[0].Partitions[0].ErrorCode, nil)
			if closeBy == "ShareAcknowledge" {
				ar = e.ack(ackReq{member: "m1", epoch: -1, acks: acks{0: {ackBatch(2, 6, typeAccept)}}})
				wantCode(t, "close", ar.ErrorCode, nil)
				wantCode(t, "close ack", ar.Topics[0].Partitions[0].ErrorCode, nil)
			} else {
				resp := e.fetch(fetchReq{member: "m1", epoch: -1, acks: acks{0: {ackBatch(2, 6, typeAccept)}}})
				wantCode(t, "close", resp.ErrorCode, nil)
				wantCode(t, "close ack", part(resp, topicA, 0).AcknowledgeErrorCode, nil)
			}
			// 0-6 are ACKNOWLEDGED; the close released 7-9.
			e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 1}), topicA, 0, acquired{7, 9, 2})
			wantCode(t, "session after the close", e.fetch(fetchReq{member: "m1", epoch: ep + 2}).ErrorCode, kerr.ShareSessionNotFound)
		})
	}
}

// A member that leaves while it has no session here can no longer acknowledge its
// records, so they come back at once rather than at the lock expiry.
func TestMemberRemovedWithoutSessionReleasesRecords(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.m.mu.Lock()
	e.m.sessions.remove(sessionKey{group, "m1"}) // as a full cache refusing its epoch-0 fetch leaves it
	e.m.mu.Unlock()
	e.m.MemberRemoved(group, "m1")
	e.settle()
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{0, 9, 2})
}

// An epoch-0 fetch drops the old session without releasing: the member still owns and
// can acknowledge its records (gotcha G5).
func TestReopenedSessionKeepsLocks(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}}), topicA, 0)
	ar := e.ack(ackReq{member: "m1", epoch: 1, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "ack after reopen", ar.Topics[0].Partitions[0].ErrorCode, nil)
}

// Restart: acknowledged and archived records are never delivered again, in-flight ones
// come back AVAILABLE (with the delivery count of their last persisted state), released
// ones come back with theirs, nothing is lost.
func TestRestartRecoversState(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 20)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep}), topicA, 0, acquired{0, 19, 1})
	ar := e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {
		ackBatch(0, 4, typeAccept), ackBatch(5, 6, typeReject), ackBatch(7, 9, typeRelease),
	}}})
	wantCode(t, "acks", ar.Topics[0].Partitions[0].ErrorCode, nil)
	// 10-19 stay ACQUIRED (in flight) when the broker dies.
	e.restart()
	resp := e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}})
	e.wantAcquired(resp, topicA, 0, acquired{7, 9, 2}, acquired{10, 19, 1})
	e.ack(ackReq{member: "m2", epoch: 1, acks: acks{0: {ackBatch(7, 19, typeAccept)}}})
	e.restart()
	e.logs.produce(topicA, 0, 1, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m3", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{20, 20, 1})
}

func TestAcknowledgeErrors(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}})
	// Another member's records.
	ar := e.ack(ackReq{member: "m2", epoch: 1, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "not the owner", ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRecordState)
	// Malformed: first > last, descending batches, wrong type count, unknown type.
	for name, bs := range map[string][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
		"first > last": {ackBatch(5, 4, typeAccept)},
		"descending":   {ackBatch(5, 6, typeAccept), ackBatch(0, 1, typeAccept)},
		"type count":   {ackBatch(0, 2, typeAccept, typeAccept)},
		"unknown type": {ackBatch(0, 0, 9)},
		"no types":     {ackBatch(0, 0)},
	} {
		ar = e.ack(ackReq{member: "m2", epoch: 2, acks: acks{0: bs}})
		wantCode(t, name, ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)
		e.m.mu.Lock() // back to epoch 2 for the next case
		e.m.sessions.sessions[sessionKey{group, "m2"}].epoch = 2
		e.m.mu.Unlock()
	}
	// Unknown topic id.
	ar = e.ack(ackReq{member: "m2", epoch: 2, topic: [16]byte{0xff}, acks: acks{0: {ackBatch(0, 0, typeAccept)}}})
	wantCode(t, "unknown topic", ar.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicID)
	// The owner's acks are all-or-nothing per partition: a bad offset rolls back the rest.
	ar = e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 4, typeAccept), ackBatch(50, 50, typeAccept)}}})
	if ar.Topics[0].Partitions[0].ErrorCode == 0 {
		t.Fatal("ack beyond the window succeeded")
	}
	ar = e.ack(ackReq{member: "m1", epoch: ep + 2, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "owner ack after rollback", ar.Topics[0].Partitions[0].ErrorCode, nil)
}

func TestFetchPartitionErrors(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 0, topic: [16]byte{0xff}, parts: []int32{0}})
	wantCode(t, "unknown topic id", part(resp, [16]byte{0xff}, 0).ErrorCode, kerr.UnknownTopicID)
	resp = e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{7}})
	wantCode(t, "unknown partition", part(resp, topicA, 7).ErrorCode, kerr.UnknownTopicOrPartition)
	// Not initialized by the group coordinator: the store answers INVALID_REQUEST, which
	// SharePartition.fetchPersisterError reports as UNKNOWN_SERVER_ERROR.
	resp = e.fetch(fetchReq{member: "m3", epoch: 0, parts: []int32{1}})
	wantCode(t, "uninitialized", part(resp, topicA, 1).ErrorCode, kerr.UnknownServerError)
	if rp := part(resp, topicA, 1); rp.Records == nil {
		t.Fatal("Records is null on an error partition (gotcha G1)")
	}
	// Bad requests.
	req := fetchReq{member: "m1", epoch: 0, parts: []int32{0}}.build()
	req.GroupID = nil
	r, _ := e.m.ShareFetch(context.Background(), 0, 2, req)
	wantCode(t, "null group", sfr(r).ErrorCode, kerr.InvalidRequest)
	req = fetchReq{member: "", epoch: 0, parts: []int32{0}}.build()
	r, _ = e.m.ShareFetch(context.Background(), 0, 2, req)
	wantCode(t, "empty member", sfr(r).ErrorCode, kerr.InvalidRequest)
	req = fetchReq{member: "0123456789012345678901234567890123456", epoch: 0, parts: []int32{0}}.build()
	r, _ = e.m.ShareFetch(context.Background(), 0, 2, req)
	wantCode(t, "37-char member", sfr(r).ErrorCode, kerr.InvalidRequest)
}

// Subsequent responses carry only partitions with records, errors or pending updates
// (gotcha G6); the initial one carries every partition.
func TestIncrementalResponses(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.init(group, topicA, 1)
	resp := e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0, 1}})
	if part(resp, topicA, 0) == nil || part(resp, topicA, 1) == nil {
		t.Fatal("initial response lacks a partition")
	}
	e.logs.produce(topicA, 1, 3, 0)
	resp = e.fetch(fetchReq{member: "m1", epoch: 1})
	if part(resp, topicA, 0) != nil {
		t.Fatal("an unchanged partition is in an incremental response")
	}
	e.wantAcquired(resp, topicA, 1, acquired{0, 2, 1})
	// A partition added later appears once even without records.
	e.init(group, topicB, 0)
	resp = e.fetch(fetchReq{member: "m1", epoch: 2, topic: topicB, parts: []int32{0}})
	if part(resp, topicB, 0) == nil {
		t.Fatal("a newly added partition is missing")
	}
	resp = e.fetch(fetchReq{member: "m1", epoch: 3})
	if len(resp.Topics) != 0 {
		t.Fatalf("nothing changed but the response has %d topics", len(resp.Topics))
	}
}

// Only the batches overlapping the acquired ranges are sent, as stored.
func TestRecordsAreSlicedToAcquiredBatches(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produceBatch(topicA, 0, 5, 0)
	e.logs.produceBatch(topicA, 0, 5, 0)
	e.logs.produceBatch(topicA, 0, 5, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 1, maxRecords: 5, batchSize: 5})
	e.wantAcquired(resp, topicA, 0, acquired{0, 4, 1})
	if got, want := part(resp, topicA, 0).Records, e.logs.topics[topicA].parts[0].batches[0].data; string(got) != string(want) {
		t.Fatalf("records are %d bytes, want the first batch as stored (%d bytes)", len(got), len(want))
	}
	resp = e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}})
	e.wantAcquired(resp, topicA, 0, acquired{5, 14, 1})
	bs := e.logs.topics[topicA].parts[0].batches
	if n := len(part(resp, topicA, 0).Records); n != len(bs[1].data)+len(bs[2].data) {
		t.Fatalf("records are %d bytes, want batches 2 and 3", n)
	}
}

func TestRecordLimitMode(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produceBatch(topicA, 0, 10, 0)
	// batch_optimized: the whole log batch despite MaxRecords 3.
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1, maxRecords: 3, batchSize: 3}), topicA, 0, acquired{0, 9, 1})
	e.logs.produceBatch(topicA, 0, 10, 0)
	// record_limit (v2): exactly MaxRecords.
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 2, maxRecords: 3, mode: 1}), topicA, 0, acquired{10, 12, 1})
	// v1 ignores the mode.
	e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}, maxRecords: 1, version: 1})
}

func TestMaxRecordsIsRequestWide(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.init(group, topicA, 1)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0, 1}})
	e.logs.produce(topicA, 0, 10, 0)
	e.logs.produce(topicA, 1, 10, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 1, maxRecords: 4, batchSize: 4})
	total := 0
	for _, p := range []int32{0, 1} {
		for _, a := range acq(part(resp, topicA, p)) {
			total += int(a.last - a.first + 1)
		}
	}
	if total != 4 {
		t.Fatalf("acquired %d records with MaxRecords 4 over two partitions", total)
	}
}

func TestAutoOffsetReset(t *testing.T) {
	for _, tc := range []struct {
		reset string
		want  acquired
	}{
		{"latest", acquired{10, 10, 1}},
		{"earliest", acquired{0, 10, 1}},
		{"by_duration:PT1H", acquired{5, 10, 1}},
	} {
		t.Run(tc.reset, func(t *testing.T) {
			e := newEnv(t)
			gc := DefaultGroupConfig()
			gc.AutoOffsetReset = tc.reset
			e.groups[group] = gc
			old := e.clk.Now().Add(-2 * time.Hour).UnixMilli()
			e.logs.produce(topicA, 0, 5, old)
			e.logs.produce(topicA, 0, 5, e.clk.Now().Add(-time.Minute).UnixMilli())
			e.init(group, topicA, 0)
			e.logs.produce(topicA, 0, 1, e.clk.Now().UnixMilli())
			e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}}), topicA, 0, tc.want)
		})
	}
}

// A start offset stored as -1 (initialized by another path) is resolved at load.
func TestUninitializedStartOffsetResolvedAtLoad(t *testing.T) {
	e := newEnv(t)
	e.logs.produce(topicA, 0, 5, 0)
	k := keyFor(group, topicA, 0)
	if err := e.store.Initialize(context.Background(), k, 0, -1); err != nil {
		t.Fatal(err)
	}
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}}), topicA, 0)
	e.logs.produce(topicA, 0, 2, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{5, 6, 1})
}

func TestReadCommittedIsolation(t *testing.T) {
	e := newEnv(t)
	gc := DefaultGroupConfig()
	gc.IsolationLevel = "read_committed"
	e.groups[group] = gc
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produceTxn(topicA, 0, 7, 3)                                   // 0-2, open
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0) // beyond the LSO
	e.logs.endTxn(topicA, 0, 7, false)                                   // abort marker at 3
	e.logs.produceTxn(topicA, 0, 8, 2)                                   // 4-5
	e.logs.endTxn(topicA, 0, 8, true)                                    // commit marker at 6
	e.logs.produce(topicA, 0, 1, 0)                                      // 7
	resp := e.fetch(fetchReq{member: "m1", epoch: 2})
	// Aborted records are archived, never delivered; markers are acquired and acked as gaps.
	got := acq(part(resp, topicA, 0))
	for _, a := range got {
		if a.first <= 2 {
			t.Fatalf("aborted records delivered: %v", got)
		}
	}
	covered := map[int64]bool{}
	for _, a := range got {
		for o := a.first; o <= a.last; o++ {
			covered[o] = true
		}
	}
	for _, o := range []int64{4, 5, 7} {
		if !covered[o] {
			t.Fatalf("committed offset %d not delivered: %v", o, got)
		}
	}
}

func TestReadUncommittedDeliversEverything(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produceTxn(topicA, 0, 7, 3)
	e.logs.endTxn(topicA, 0, 7, false)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 3, 1})
}

func TestLongPollWakesOnProduce(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	resp, wait := e.m.ShareFetch(context.Background(), 0, 2, fetchReq{member: "m1", epoch: 1, maxWaitMs: 5000, minBytes: 1}.build())
	if resp != nil || wait == nil {
		t.Fatal("an empty fetch with MaxWaitMs did not wait")
	}
	done := make(chan *kmsg.ShareFetchResponse)
	go func() { done <- sfr(wait()) }()
	// Produce once the poll watches the partition (it may also have started after).
	for e.logs.watchers(topicA, 0) == 0 {
		select {
		case r := <-done:
			t.Fatalf("long poll returned early: %+v", r)
		default:
		}
		yield()
	}
	e.logs.produce(topicA, 0, 3, 0)
	e.wantAcquired(<-done, topicA, 0, acquired{0, 2, 1})
	if n := e.logs.watchers(topicA, 0); n != 0 {
		t.Fatalf("%d watchers left after the poll", n)
	}
}

func TestLongPollWakesOnRelease(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 3)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}})
	_, wait := e.m.ShareFetch(context.Background(), 0, 2, fetchReq{member: "m2", epoch: 1, maxWaitMs: 5000}.build())
	done := make(chan *kmsg.ShareFetchResponse)
	go func() { done <- sfr(wait()) }()
	for !e.hasWaiter(topicA, 0) {
		yield()
	}
	e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 2, typeRelease)}}})
	e.wantAcquired(<-done, topicA, 0, acquired{0, 2, 2})
}

func TestLongPollTimesOutEmpty(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	_, wait := e.m.ShareFetch(context.Background(), 0, 2, fetchReq{member: "m1", epoch: 1, maxWaitMs: 500}.build())
	done := make(chan *kmsg.ShareFetchResponse)
	go func() { done <- sfr(wait()) }()
	ft := e.waitTimer(500 * time.Millisecond)
	ft.c <- e.clk.Now()
	resp := <-done
	wantCode(t, "timeout", resp.ErrorCode, nil)
	e.wantAcquired(resp, topicA, 0)
}

func TestLongPollEndsWithContext(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	ctx, cancel := context.WithCancel(context.Background())
	_, wait := e.m.ShareFetch(ctx, 0, 2, fetchReq{member: "m1", epoch: 1, maxWaitMs: 5000}.build())
	cancel()
	if resp := sfr(wait()); resp.ErrorCode != 0 {
		t.Fatalf("cancelled poll: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// MinBytes > 1: nothing is acquired until enough bytes are readable.
func TestMinBytes(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 1, 0)
	one := len(e.logs.topics[topicA].parts[0].batches[0].data)
	_, wait := e.m.ShareFetch(context.Background(), 0, 2, fetchReq{member: "m1", epoch: 1, maxWaitMs: 5000, minBytes: int32(3 * one)}.build())
	if wait == nil {
		t.Fatal("MinBytes not met but answered at once")
	}
	if d := e.m.Describe(group); d[0].Window.InFlightRecords != 0 {
		t.Fatalf("records acquired while waiting for MinBytes: %+v", d[0].Window)
	}
	done := make(chan *kmsg.ShareFetchResponse)
	go func() { done <- sfr(wait()) }()
	e.logs.produce(topicA, 0, 2, 0)
	e.wantAcquired(<-done, topicA, 0, acquired{0, 2, 1})
}

func TestShareSessionLimitReached(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	e.maxSes = 1
	e.start()
	e.init(group, topicA, 0)
	wantCode(t, "first session", e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}}).ErrorCode, nil)
	resp, wait := e.m.ShareFetch(context.Background(), 0, 2, fetchReq{member: "m2", epoch: 0, parts: []int32{0}, maxWaitMs: 700}.build())
	if resp != nil || wait == nil {
		t.Fatal("SHARE_SESSION_LIMIT_REACHED was not delayed")
	}
	done := make(chan *kmsg.ShareFetchResponse)
	go func() { done <- sfr(wait()) }()
	e.waitTimer(700 * time.Millisecond).c <- e.clk.Now()
	wantCode(t, "second session", (<-done).ErrorCode, kerr.ShareSessionLimitReached)
	// Reopening the same member's session does not count twice.
	wantCode(t, "reopen", e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}}).ErrorCode, nil)
}

// A failed store write answers the acknowledgement with the mapped error and drops the
// share partition, which reloads from the store: the store is the truth.
func TestWriteFailureReloadsFromStore(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 4)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.mem.FailAppend = errors.New("disk on fire")
	ar := e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 1, typeAccept)}}})
	if ar.Topics[0].Partitions[0].ErrorCode == 0 {
		t.Fatal("an ack whose write failed was answered NONE")
	}
	// Reloaded from the store: the acks never became durable, nothing was persisted as
	// acquired, so everything is AVAILABLE again.
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{0, 3, 1})
}

// The log start moving past the SPSO (retention, DeleteRecords) moves the SPSO.
func TestLogStartMovesPastStartOffset(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.logs.deleteRecords(topicA, 0, 6)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep}), topicA, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: ep + 1}), topicA, 0, acquired{6, 9, 1})
}

// The one timer goroutine expires locks on its own.
func TestTimerGoroutineExpiresLocks(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	created := make(chan *fakeTimer, 16)
	e.start()
	e.m.Close()
	st := e.store
	e.m = NewManager(Config{
		Now: e.clk.Now,
		NewTimer: func(d time.Duration) Timer {
			ft := &fakeTimer{c: make(chan time.Time, 1), d: d}
			created <- ft
			return ft
		},
	}, e.logs, st)
	ep := e.startSession("m1", 2)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	var ft *fakeTimer
	for ft = <-created; ft.d != 30*time.Second; ft = <-created {
	}
	e.clk.Advance(30 * time.Second)
	ft.c <- e.clk.Now()
	// The loop arms its idle timer only once no lock is pending, that is after the Tick
	// expired them. A timer armed in between (a kick raced with the firing) is fired too.
	for t := <-created; t.d != time.Hour; t = <-created {
		t.c <- e.clk.Now()
	}
	e.settle()
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{0, 1, 2})
}

func TestOffsetsAndLag(t *testing.T) {
	e := newEnv(t)
	ep := e.startSession("m1", 10)
	e.fetch(fetchReq{member: "m1", epoch: ep})
	e.ack(ackReq{member: "m1", epoch: ep + 1, acks: acks{0: {ackBatch(0, 2, typeAccept), ackBatch(5, 6, typeAccept)}}})
	spso, lag, err := e.m.Offsets(context.Background(), group, topicA, 0)
	if err != nil || spso != 3 || lag != 10-3-2 {
		t.Fatalf("live offsets: spso %d lag %d err %v", spso, lag, err)
	}
	e.restart()
	spso, lag, err = e.m.Offsets(context.Background(), group, topicA, 0)
	if err != nil || spso != 3 || lag != 10-3-2 {
		t.Fatalf("stored offsets: spso %d lag %d err %v", spso, lag, err)
	}
	spso, lag, err = e.m.Offsets(context.Background(), group, topicA, 2)
	if err != nil || spso != -1 || lag != -1 {
		t.Fatalf("uninitialized offsets: spso %d lag %d err %v", spso, lag, err)
	}
}

// helpers

func keyFor(g string, topic [16]byte, p int32) (k sharestateKey) {
	return sharestateKey{GroupID: g, TopicID: topic, Partition: p}
}

func (e *env) hasWaiter(topic [16]byte, p int32) bool {
	e.m.mu.Lock()
	pp := e.m.parts[keyFor(group, topic, p)]
	e.m.mu.Unlock()
	if pp == nil {
		return false
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return len(pp.waiters) > 0
}

// waitTimer returns the first timer of duration d the manager creates.
func (e *env) waitTimer(d time.Duration) *fakeTimer {
	e.t.Helper()
	for {
		e.timersMu.Lock()
		for _, ft := range e.timers {
			if ft.d == d {
				e.timersMu.Unlock()
				return ft
			}
		}
		e.timersMu.Unlock()
		yield()
	}
}
