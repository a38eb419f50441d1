package share

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The raw-RPC black-box scenarios of kip-932.md 7.1 (Kafka's
// ShareFetchAcknowledgeRequestTest, "FAR"), against the Manager. As in the FAR tests, the
// share partition is initialized (heartbeat + first fetch) before records are produced,
// because the default share.auto.offset.reset is latest. Scenarios 1, 2 and 21-29 are the
// broker's (feature gating, leadership) and the share-group coordinator's.

type acks = map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch

const (
	typeGap     int8 = 0
	typeAccept  int8 = 1
	typeRelease int8 = 2
	typeReject  int8 = 3
	typeRenew   int8 = 4
)

// Scenario 3: 10 single-record batches, then a fetch: [{0,9,1}], lock timeout 30000.
func TestShareFetchRequestSuccess(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 1, parts: []int32{0}})
	if resp.AcquisitionLockTimeoutMillis != 30000 {
		t.Fatalf("AcquisitionLockTimeoutMs = %d", resp.AcquisitionLockTimeoutMillis)
	}
	e.wantAcquired(resp, topicA, 0, acquired{0, 9, 1})
}

// Scenario 4: several partitions each return [{0,9,1}].
func TestShareFetchRequestSuccessMultiplePartitions(t *testing.T) {
	e := newEnv(t)
	for p := range int32(3) {
		e.init(group, topicA, p)
	}
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0, 1, 2}})
	for p := range int32(3) {
		e.logs.produce(topicA, p, 10, 0)
	}
	resp := e.fetch(fetchReq{member: "m1", epoch: 1})
	for p := range int32(3) {
		e.wantAcquired(resp, topicA, p, acquired{0, 9, 1})
	}
}

// Scenario 5: ShareAcknowledge Accept [0-9], produce 10 more: the next fetch gets [{10,19,1}].
func TestShareAcknowledgeRequestSuccessAccept(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	ar := e.ack(ackReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "ack", ar.ErrorCode, nil)
	wantCode(t, "ack partition", ar.Topics[0].Partitions[0].ErrorCode, nil)
	if ar.AcquisitionLockTimeoutMillis != 30000 {
		t.Fatalf("v2 AcquisitionLockTimeoutMs = %d", ar.AcquisitionLockTimeoutMillis)
	}
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 3}), topicA, 0, acquired{10, 19, 1})
}

// Scenario 6: the Accept piggybacked on ShareFetch.
func TestShareFetchRequestPiggybackedAccept(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	e.logs.produce(topicA, 0, 10, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "piggybacked ack", part(resp, topicA, 0).AcknowledgeErrorCode, nil)
	e.wantAcquired(resp, topicA, 0, acquired{10, 19, 1})
	e.logs.produce(topicA, 0, 10, 0)
	resp = e.fetch(fetchReq{member: "m1", epoch: 3, acks: acks{0: {ackBatch(10, 19, typeAccept)}}})
	e.wantAcquired(resp, topicA, 0, acquired{20, 29, 1})
}

// Scenario 7: Release [0-9], separately or piggybacked: redelivered with count 2.
func TestShareAcknowledgeRequestSuccessRelease(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	ar := e.ack(ackReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 9, typeRelease)}}})
	wantCode(t, "release", ar.Topics[0].Partitions[0].ErrorCode, nil)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 3}), topicA, 0, acquired{0, 9, 2})
}

func TestShareFetchRequestPiggybackedRelease(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	resp := e.fetch(fetchReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 9, typeRelease)}}})
	wantCode(t, "piggybacked release", part(resp, topicA, 0).AcknowledgeErrorCode, nil)
	// The release is applied before the fetch, so this very fetch redelivers.
	e.wantAcquired(resp, topicA, 0, acquired{0, 9, 2})
}

// Scenario 8: Reject [0-9]: never redelivered.
func TestShareAcknowledgeRequestSuccessReject(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	e.ack(ackReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 9, typeReject)}}})
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 3}), topicA, 0)
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 4}), topicA, 0, acquired{10, 19, 1})
}

func TestShareFetchRequestPiggybackedReject(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.fetch(fetchReq{member: "m1", epoch: 1})
	e.logs.produce(topicA, 0, 10, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 9, typeReject)}}})
	e.wantAcquired(resp, topicA, 0, acquired{10, 19, 1})
}

// Scenario 9: delivery limit 2: fetch, Release, fetch (count 2), Release, produce, fetch:
// 0-9 archived, the fetch returns [{10,19,1}].
func TestShareAcknowledgeRequestMaxDeliveryAttemptExhausted(t *testing.T) {
	e := newEnv(t)
	gc := DefaultGroupConfig()
	gc.DeliveryCountLimit = 2
	e.groups[group] = gc
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	e.ack(ackReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 9, typeRelease)}}})
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 3}), topicA, 0, acquired{0, 9, 2})
	e.ack(ackReq{member: "m1", epoch: 4, acks: acks{0: {ackBatch(0, 9, typeRelease)}}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 5}), topicA, 0, acquired{10, 19, 1})
	d := e.m.Describe(group)
	if len(d) != 1 || d[0].StartOffset != 10 {
		t.Fatalf("describe after archiving: %+v", d)
	}
}

// Scenario 10: two members of one group: disjoint acquisitions covering everything.
func TestShareFetchRequestSuccessfulSharingBetweenMultipleConsumers(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	r1 := e.fetch(fetchReq{member: "m1", epoch: 1, maxRecords: 4, batchSize: 4})
	r2 := e.fetch(fetchReq{member: "m2", epoch: 1})
	seen := map[int64]string{}
	for who, r := range map[string]*kmsg.ShareFetchResponse{"m1": r1, "m2": r2} {
		for _, a := range acq(part(r, topicA, 0)) {
			for o := a.first; o <= a.last; o++ {
				if prev, dup := seen[o]; dup {
					t.Fatalf("offset %d acquired by %s and %s", o, prev, who)
				}
				seen[o] = who
			}
		}
	}
	if len(seen) != 10 {
		t.Fatalf("union of acquisitions covers %d offsets, want 10: %v", len(seen), seen)
	}
}

// Scenario 11: members of different groups each receive everything.
func TestShareFetchRequestNoSharingBetweenMultipleConsumersFromDifferentGroups(t *testing.T) {
	e := newEnv(t)
	e.init("g1", topicA, 0)
	e.init("g2", topicA, 0)
	e.fetch(fetchReq{group: "g1", member: "m1", epoch: 0, parts: []int32{0}})
	e.fetch(fetchReq{group: "g2", member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{group: "g1", member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	e.wantAcquired(e.fetch(fetchReq{group: "g2", member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
}

// Scenario 12: closing the session (epoch -1) with acks applies them and releases the
// rest, which another member can then acquire.
func TestShareSessionCloseWithShareFetch(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1}), topicA, 0, acquired{0, 9, 1})
	resp := e.fetch(fetchReq{member: "m1", epoch: -1, acks: acks{0: {ackBatch(0, 4, typeAccept)}}})
	wantCode(t, "close", resp.ErrorCode, nil)
	rp := part(resp, topicA, 0)
	wantCode(t, "close ack", rp.AcknowledgeErrorCode, nil)
	if len(rp.AcquiredRecords) != 0 {
		t.Fatalf("a closing fetch acquired %v", acq(rp))
	}
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{5, 9, 2})
	// The session is gone.
	wantCode(t, "after close", e.fetch(fetchReq{member: "m1", epoch: 2}).ErrorCode, kerr.ShareSessionNotFound)
}

func TestShareSessionCloseWithShareAcknowledge(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.fetch(fetchReq{member: "m1", epoch: 1})
	ar := e.ack(ackReq{member: "m1", epoch: -1, acks: acks{0: {ackBatch(0, 4, typeAccept)}}})
	wantCode(t, "close ack", ar.Topics[0].Partitions[0].ErrorCode, nil)
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}}), topicA, 0, acquired{5, 9, 2})
	wantCode(t, "ack after close", e.ack(ackReq{member: "m1", epoch: 2}).ErrorCode, kerr.ShareSessionNotFound)
}

// Scenario 13: epoch 0 carrying acks: top-level INVALID_REQUEST, lock timeout 0.
func TestShareFetchInitialEpochWithAcknowledgements(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "fetch", resp.ErrorCode, kerr.InvalidRequest)
	if resp.AcquisitionLockTimeoutMillis != 0 || len(resp.Topics) != 0 {
		t.Fatalf("error response carries lock timeout %d and %d topics", resp.AcquisitionLockTimeoutMillis, len(resp.Topics))
	}
}

// Scenario 14: ShareAcknowledge with epoch 0: INVALID_SHARE_SESSION_EPOCH, lock timeout 0.
func TestShareAcknowledgeInitialRequestError(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	ar := e.ack(ackReq{member: "m1", epoch: 0, acks: acks{0: {ackBatch(0, 9, typeAccept)}}})
	wantCode(t, "ack", ar.ErrorCode, kerr.InvalidShareSessionEpoch)
	if ar.AcquisitionLockTimeoutMillis != 0 {
		t.Fatalf("lock timeout %d on an error response", ar.AcquisitionLockTimeoutMillis)
	}
}

// Scenario 15: wrong epochs.
func TestShareFetchRequestInvalidShareSessionEpoch(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	wantCode(t, "epoch 2 instead of 1", e.fetch(fetchReq{member: "m1", epoch: 2}).ErrorCode, kerr.InvalidShareSessionEpoch)
	wantCode(t, "epoch 1", e.fetch(fetchReq{member: "m1", epoch: 1}).ErrorCode, nil)
	wantCode(t, "epoch 1 again", e.fetch(fetchReq{member: "m1", epoch: 1}).ErrorCode, kerr.InvalidShareSessionEpoch)
}

func TestShareAcknowledgeRequestInvalidShareSessionEpoch(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	wantCode(t, "ack epoch 3", e.ack(ackReq{member: "m1", epoch: 3}).ErrorCode, kerr.InvalidShareSessionEpoch)
	wantCode(t, "ack epoch 1", e.ack(ackReq{member: "m1", epoch: 1}).ErrorCode, nil)
	// The acknowledge advanced the epoch (gotcha G4).
	wantCode(t, "fetch epoch 1", e.fetch(fetchReq{member: "m1", epoch: 1}).ErrorCode, kerr.InvalidShareSessionEpoch)
	wantCode(t, "fetch epoch 2", e.fetch(fetchReq{member: "m1", epoch: 2}).ErrorCode, nil)
}

// Scenario 16: epoch > 0 or -1 with no session.
func TestShareFetchRequestShareSessionNotFound(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	wantCode(t, "fetch epoch 1", e.fetch(fetchReq{member: "m1", epoch: 1, parts: []int32{0}}).ErrorCode, kerr.ShareSessionNotFound)
	wantCode(t, "fetch epoch -1", e.fetch(fetchReq{member: "m1", epoch: -1, parts: []int32{0}}).ErrorCode, kerr.ShareSessionNotFound)
}

func TestShareAcknowledgeRequestShareSessionNotFound(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	wantCode(t, "ack epoch 1", e.ack(ackReq{member: "m1", epoch: 1}).ErrorCode, kerr.ShareSessionNotFound)
	wantCode(t, "ack epoch -1", e.ack(ackReq{member: "m1", epoch: -1}).ErrorCode, kerr.ShareSessionNotFound)
}

// Scenario 17: the connection that owns the session closes: the session is evicted and
// its records released.
func TestShareSessionEvictedOnConnectionDrop(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}, conn: 7})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1, conn: 7}), topicA, 0, acquired{0, 9, 1})
	e.m.ConnClosed(7)
	e.settle()
	wantCode(t, "after drop", e.fetch(fetchReq{member: "m1", epoch: 2, conn: 8}).ErrorCode, kerr.ShareSessionNotFound)
	e.wantAcquired(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}, conn: 9}), topicA, 0, acquired{0, 9, 2})
}

// Scenario 18: forgotten partitions are no longer fetched.
func TestShareFetchRequestForgetTopicPartitions(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.init(group, topicA, 1)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0, 1}})
	e.logs.produce(topicA, 0, 10, 0)
	e.logs.produce(topicA, 1, 10, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 1})
	e.wantAcquired(resp, topicA, 0, acquired{0, 9, 1})
	e.wantAcquired(resp, topicA, 1, acquired{0, 9, 1})
	e.logs.produce(topicA, 0, 10, 0)
	e.logs.produce(topicA, 1, 10, 0)
	resp = e.fetch(fetchReq{member: "m1", epoch: 2, forget: []int32{1}})
	e.wantAcquired(resp, topicA, 0, acquired{10, 19, 1})
	if rp := part(resp, topicA, 1); rp != nil {
		t.Fatalf("forgotten partition in the response: %+v", rp)
	}
}

// Scenario 19: MaxRecords=1, BatchSize=1 over 10 single-record batches: [{0,0,1}].
func TestShareFetchRequestWithMaxRecordsAndBatchSize(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	e.wantAcquired(e.fetch(fetchReq{member: "m1", epoch: 1, maxRecords: 1, batchSize: 1}), topicA, 0, acquired{0, 0, 1})
}

// Scenario 20: MaxRecords=5, BatchSize=1: five ranges.
func TestShareFetchRequestMultipleBatchesWithMaxRecordsAndBatchSize(t *testing.T) {
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.logs.produce(topicA, 0, 10, 0)
	resp := e.fetch(fetchReq{member: "m1", epoch: 1, maxRecords: 5, batchSize: 1})
	e.wantAcquired(resp, topicA, 0, acquired{0, 0, 1}, acquired{1, 1, 1}, acquired{2, 2, 1}, acquired{3, 3, 1}, acquired{4, 4, 1})
}
