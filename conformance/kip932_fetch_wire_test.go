package conformance

// KIP-932 table 7.1, rows 1-20: ShareFetch and ShareAcknowledge over the wire, ported from
// Kafka 4.4's ShareFetchAcknowledgeRequestTest (FAR). As there, the member joins the share
// group (heartbeats until it is assigned the topic's partitions, which initializes the
// share partitions), sends a first ShareFetch at epoch 0 to open its share session, and
// only then are records produced: the default share.auto.offset.reset=latest would skip
// earlier ones. Each test starts its own broker and runs in parallel with the others.

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/wire"
)

const (
	farTopic = "topic"
	farGroup = "group"
	// defaultLockMs is group.share.record.lock.duration.ms's default, the
	// AcquisitionLockTimeoutMs of every successful response.
	defaultLockMs = 30000
)

// farEnv is FAR's setup: a broker, a 3-partition topic and one member of the share group
// with an open share session on its own connection.
type farEnv struct {
	*env
	topicID [16]byte
	lockMs  int32
	s       *session
}

// session is one member's share session on one connection: fetch and ack send at the
// session's epoch and advance it when the broker accepted the request.
type session struct {
	t             testing.TB
	c             *wireConn
	group, member string
	epoch         int32
}

// fetch sends r as this session's next ShareFetch.
func (s *session) fetch(r fetchReq) *kmsg.ShareFetchResponse {
	s.t.Helper()
	r.group, r.member, r.epoch = s.group, s.member, s.epoch
	resp := s.c.shareFetch(r)
	if resp.ErrorCode == 0 {
		s.epoch = next(s.epoch)
	}
	return resp
}

// ack sends this session's next ShareAcknowledge.
func (s *session) ack(acks map[tip][]ackRange) *kmsg.ShareAcknowledgeResponse {
	s.t.Helper()
	resp := s.c.shareAck(s.group, s.member, s.epoch, acks)
	if resp.ErrorCode == 0 {
		s.epoch = next(s.epoch)
	}
	return resp
}

// next is ShareRequestMetadata.nextEpoch for the epochs these tests reach.
func next(epoch int32) int32 {
	if epoch < 0 {
		return -1
	}
	return epoch + 1
}

// startFAR starts a broker with cfg, creates farTopic with 3 partitions, joins a member
// to farGroup until it is assigned all of them, and opens its share session on parts
// (FAR's shareHeartbeat and sendFirstShareFetchRequest).
func startFAR(t *testing.T, cfg map[string]string, parts ...int32) *farEnv {
	t.Helper()
	e := newEnv(t, cfg)
	f := &farEnv{env: e, lockMs: defaultLockMs}
	if v, ok := cfg["group.share.record.lock.duration.ms"]; ok {
		ms, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		f.lockMs = int32(ms)
	}
	f.topicID = e.createTopic(farTopic, 3)
	f.s = f.joinAndOpen(farGroup, newMemberID(), parts...)
	return f
}

// joinAndOpen joins member to group (assigned all partitions of farTopic) and opens its
// share session on parts on a new connection.
func (f *farEnv) joinAndOpen(group, member string, parts ...int32) *session {
	f.t.Helper()
	f.dial().joinUntilAssigned(group, member, []string{farTopic}, assignment{f.topicID: {0, 1, 2}})
	s := &session{t: f.t, c: f.dial(), group: group, member: member}
	f.open(s, parts...)
	return s
}

// open sends the session's first ShareFetch (epoch 0): NONE, the lock timeout, and an
// entry for every partition of the session with nothing acquired.
func (f *farEnv) open(s *session, parts ...int32) {
	f.t.Helper()
	s.epoch = 0
	r := s.fetch(fetchReq{parts: f.tips(parts...), maxWaitMs: -1})
	wantFetchOK(f.t, r, f.lockMs)
	for _, p := range parts {
		rp := fetchPart(r, f.tip(p))
		if rp == nil || rp.ErrorCode != 0 || len(rp.AcquiredRecords) != 0 {
			f.t.Fatalf("initial share fetch, partition %d: %+v", p, rp)
		}
	}
}

// startAcquired is startFAR with a session on partition 0 that has produced 10 records
// and acquired them: [{0,9,1}].
func startAcquired(t *testing.T, cfg map[string]string) *farEnv {
	t.Helper()
	f := startFAR(t, cfg, 0)
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 1})
	return f
}

// piggybackFinal follows startAcquired: 10 more records, then a ShareFetch carrying an
// acknowledgement of 0-9 that ends their delivery (ACCEPT or REJECT) acquires [{10,19,1}]
// with AcknowledgeErrorCode NONE; after 10 more, the next fetch acquires [{20,29,1}] only.
func (f *farEnv) piggybackFinal(typ int8) {
	f.t.Helper()
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0), acks: acks1(f.tip(0), ackRange{0, 9, typ})}, 0, acq{10, 19, 1})
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{20, 29, 1})
}

// fetchEach fetches (the session's next epochs) until each of parts acquired something,
// and checks that each acquired exactly [{0,9,1}]: as in FAR, several partitions may come
// back in more than one response.
func (f *farEnv) fetchEach(parts ...int32) {
	f.t.Helper()
	got := map[int32][]acq{}
	eventually(f.t, fmt.Sprintf("partitions %v acquired", parts), func() (bool, string) {
		r := f.s.fetch(fetchReq{parts: f.tips(parts...)})
		wantFetchOK(f.t, r, f.lockMs)
		for _, p := range parts {
			if rp := fetchPart(r, f.tip(p)); rp != nil && len(rp.AcquiredRecords) > 0 {
				wantCode(f.t, fmt.Sprintf("partition %d", p), rp.ErrorCode, nil)
				got[p] = append(got[p], acquiredOf(rp)...)
			}
		}
		return len(got) == len(parts), fmt.Sprint(got)
	})
	for _, p := range parts {
		if !reflect.DeepEqual(got[p], []acq{{0, 9, 1}}) {
			f.t.Fatalf("partition %d acquired %v, want [{0 9 1}]", p, got[p])
		}
	}
}

func (f *farEnv) tip(p int32) tip { return tip{f.topicID, p} }

func (f *farEnv) tips(ps ...int32) []tip {
	out := make([]tip, len(ps))
	for i, p := range ps {
		out[i] = f.tip(p)
	}
	return out
}

// produce appends n single-record batches to partition p of farTopic.
func (f *farEnv) produce(p int32, n int) { f.env.produce(farTopic, p, n) }

// fetchOne sends the session's next ShareFetch and checks it acquired exactly want on
// partition p, the response's only entry.
func (f *farEnv) fetchOne(s *session, r fetchReq, p int32, want ...acq) *kmsg.ShareFetchResponse {
	f.t.Helper()
	resp := s.fetch(r)
	wantFetchOK(f.t, resp, f.lockMs)
	if n := countParts(resp); n != 1 {
		f.t.Fatalf("share fetch response has %d partition entries, want 1", n)
	}
	wantAcquired(f.t, resp, f.tip(p), want...)
	return resp
}

// ackOK sends a ShareAcknowledge and checks NONE at the top and for the one partition,
// and the v2 lock timeout.
func (f *farEnv) ackOK(s *session, p int32, ranges ...ackRange) {
	f.t.Helper()
	r := s.ack(map[tip][]ackRange{f.tip(p): ranges})
	wantCode(f.t, "share acknowledge", r.ErrorCode, nil)
	if r.AcquisitionLockTimeoutMillis != f.lockMs {
		f.t.Fatalf("ShareAcknowledge AcquisitionLockTimeoutMs = %d, want %d", r.AcquisitionLockTimeoutMillis, f.lockMs)
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		f.t.Fatalf("share acknowledge response: %+v, want one partition entry", r.Topics)
	}
	wantCode(f.t, fmt.Sprintf("acknowledge partition %d", p), ackPart(r, f.tip(p)).ErrorCode, nil)
}

func acks1(t tip, ranges ...ackRange) map[tip][]ackRange { return map[tip][]ackRange{t: ranges} }

// Row 1: "Body ErrorCode = UNSUPPORTED_VERSION" for ShareGroupHeartbeat, ShareFetch,
// ShareAcknowledge and ShareGroupDescribe when share.version=0 (FAR
// testShareFetchRequestIsInAccessibleWhenConfigsDisabled,
// testShareAcknowledgeRequestIsInAccessibleWhenConfigsDisabled; SGH
// testShareGroupHeartbeatIsInAccessibleWhenConfigsDisabled; SGD
// testShareGroupDescribeIsInAccessibleWhenConfigsDisabled).
//
// Enabled (the default), ApiVersions finalizes share.version at level 1 and advertises the
// share RPCs at the versions Kafka 4.4 accepts. share.version is then lowered to 0 with
// UpdateFeatures (as kafka-features.sh downgrade does): the RPCs stay advertised, and
// UNSUPPORTED_VERSION comes where KafkaApis puts it: top level for ShareGroupHeartbeat,
// ShareFetch, ShareAcknowledge (AcquisitionLockTimeoutMs 0, no topics),
// AlterShareGroupOffsets and DeleteShareGroupOffsets (with Errors' message), per group for
// ShareGroupDescribe and DescribeShareGroupOffsets. Raised back to 1, the group works again.
func TestShareFetchRequestIsInAccessibleWhenConfigsDisabled_7_1_1(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "conformance", "1.0"
	r := e.dial().roundTrip(req).(*kmsg.ApiVersionsResponse)
	wantCode(t, "ApiVersions", r.ErrorCode, nil)
	level := int16(-1)
	for _, f := range r.FinalizedFeatures {
		if f.Name == "share.version" {
			level = f.MaxVersionLevel
		}
	}
	if level != 1 {
		t.Fatalf("finalized share.version = %d, want 1", level)
	}
	want := map[int16][2]int16{76: {1, 1}, 77: {1, 1}, 78: {1, 2}, 79: {1, 2}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0}}
	for _, k := range r.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Fatalf("API key %d advertised at v%d-v%d, want v%d-v%d", k.ApiKey, k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Fatalf("share APIs not advertised: %v", want)
	}
	t.Run("share.version=0", func(t *testing.T) {
		topicID := e.createTopic(farTopic, 1)
		member := newMemberID()
		c := e.dial()
		c.joinUntilAssigned(farGroup, member, []string{farTopic}, assignment{topicID: {0}})
		c.setShareVersion(0)

		hb := c.heartbeat(farGroup, member, 0, []string{farTopic})
		wantCode(t, "ShareGroupHeartbeat", hb.ErrorCode, kerr.UnsupportedVersion)
		if hb.MemberID != nil || hb.Assignment != nil || hb.ErrorMessage != nil {
			t.Fatalf("ShareGroupHeartbeat: %+v, want only the error", hb)
		}
		f := c.shareFetch(fetchReq{group: farGroup, member: member, parts: []tip{{topicID, 0}}, maxWaitMs: -1})
		wantRejected(t, "ShareFetch", f.ErrorCode, f.AcquisitionLockTimeoutMillis, len(f.Topics), kerr.UnsupportedVersion)
		a := c.shareAck(farGroup, member, 1, acks1(tip{topicID, 0}, ackRange{0, 0, ackAccept}))
		wantRejected(t, "ShareAcknowledge", a.ErrorCode, a.AcquisitionLockTimeoutMillis, len(a.Topics), kerr.UnsupportedVersion)
		d := c.describe(true, farGroup, "other")
		if len(d.Groups) != 2 {
			t.Fatalf("ShareGroupDescribe: %d groups, want 2", len(d.Groups))
		}
		for _, g := range d.Groups {
			wantCode(t, "ShareGroupDescribe "+g.GroupID, g.ErrorCode, kerr.UnsupportedVersion)
		}
		if _, g := c.describeOffsets(farGroup); g.ErrorCode != kerr.UnsupportedVersion.Code || g.GroupID != farGroup {
			t.Fatalf("DescribeShareGroupOffsets: %+v", g)
		}
		ar := c.alterOffsets(farGroup, farTopic, map[int32]int64{0: 0})
		wantTopLevel(t, "AlterShareGroupOffsets", ar.ErrorCode, ar.ErrorMessage, len(ar.Topics), kerr.UnsupportedVersion, "The version of API is not supported.")
		dr := c.deleteOffsets(farGroup, farTopic)
		wantTopLevel(t, "DeleteShareGroupOffsets", dr.ErrorCode, dr.ErrorMessage, len(dr.Topics), kerr.UnsupportedVersion, "The version of API is not supported.")
		// exactq's TxnShareAcknowledge (KIP-1289) answers as ShareAcknowledge does.
		tx := "tx"
		tr := c.roundTrip(&wire.TxnShareAcknowledgeRequest{TransactionalID: &tx, ProducerID: 1, GroupID: farGroup, MemberID: member, MemberEpoch: 1}).(*wire.TxnShareAcknowledgeResponse)
		wantCode(t, "TxnShareAcknowledge", tr.ErrorCode, kerr.UnsupportedVersion)

		// Enabled again: the member rejoins and consumes.
		c.setShareVersion(1)
		c.joinUntilAssigned(farGroup, member, []string{farTopic}, assignment{topicID: {0}})
		if d := c.describe(false, farGroup).Groups[0]; d.ErrorCode != 0 || len(d.Members) != 1 {
			t.Fatalf("ShareGroupDescribe after re-enabling: %+v", d)
		}
		s := &session{t: t, c: e.dial(), group: farGroup, member: member}
		wantFetchOK(t, s.fetch(fetchReq{parts: []tip{{topicID, 0}}, maxWaitMs: -1}), defaultLockMs)
		e.produce(farTopic, 0, 3)
		r := s.fetch(fetchReq{parts: []tip{{topicID, 0}}})
		wantAcquired(t, r, tip{topicID, 0}, acq{0, 2, 1})
	})
}

// Row 2 (adapted): "Partition ErrorCode NOT_LEADER_OR_FOLLOWER" for a ShareFetch sent to
// a non-leader replica (FAR testShareFetchRequestToNonLeaderReplica). A single node leads
// every partition there is, so this checks the partition-level errors Kafka gives a
// ShareFetch for partitions this broker cannot serve: UNKNOWN_TOPIC_ID for a topic id it
// does not know, UNKNOWN_TOPIC_OR_PARTITION for a partition the topic does not have;
// top-level NONE, AcquisitionLockTimeoutMs 30000, CurrentLeader unknown (-1, -1).
func TestShareFetchRequestToNonLeaderReplica_7_1_2(t *testing.T) {
	t.Parallel()
	f := startFAR(t, nil, 0)
	unknown := tip{[16]byte{0xde, 0xad, 0xbe, 0xef}, 0}
	missing := f.tip(7)
	s := &session{t: t, c: f.dial(), group: farGroup, member: newMemberID()}
	r := s.fetch(fetchReq{parts: []tip{unknown, missing}})
	wantFetchOK(t, r, defaultLockMs)
	for _, c := range []struct {
		name string
		t    tip
		want *kerr.Error
	}{{"unknown topic id", unknown, kerr.UnknownTopicID}, {"partition 7 of a 3-partition topic", missing, kerr.UnknownTopicOrPartition}} {
		rp := fetchPart(r, c.t)
		if rp == nil {
			t.Fatalf("%s: no entry in the response", c.name)
		}
		wantCode(t, c.name, rp.ErrorCode, c.want)
		if len(rp.AcquiredRecords) != 0 || rp.CurrentLeader.LeaderID != -1 || rp.CurrentLeader.LeaderEpoch != -1 {
			t.Fatalf("%s: acquired %v, current leader %+v", c.name, acquiredOf(rp), rp.CurrentLeader)
		}
	}
}

// Row 3: "AcquiredRecords = [{0,9,deliveryCount 1}]; AcquisitionLockTimeoutMs = 30000"
// after 10 single-record batches (FAR testShareFetchRequestSuccess).
func TestShareFetchRequestSuccess_7_1_3(t *testing.T) {
	t.Parallel()
	f := startFAR(t, nil, 0)
	f.produce(0, 10)
	r := f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 1})
	if len(r.Topics) != 1 || r.Topics[0].TopicID != f.topicID {
		t.Fatalf("response topics %+v, want the one topic fetched", r.Topics)
	}
}

// Row 4: "Each partition returns [{0,9,1}] from its own leader" (FAR
// testShareFetchRequestSuccessMultiplePartitions; the MultipleBrokers variant is adapted:
// one node, so Metadata must name this broker as the leader of every partition).
func TestShareFetchRequestSuccessMultiplePartitions_7_1_4(t *testing.T) {
	t.Parallel()
	f := startFAR(t, nil, 0, 1, 2)
	md, err := f.adm.Metadata(f.ctx(), farTopic)
	if err != nil {
		t.Fatal(err)
	}
	for p, pd := range md.Topics[farTopic].Partitions {
		if pd.Leader != 1 || len(md.Brokers) != 1 || md.Brokers[0].NodeID != 1 {
			t.Fatalf("partition %d led by %d, brokers %v; want this broker (node 1)", p, pd.Leader, md.Brokers)
		}
	}
	for p := range int32(3) {
		f.produce(p, 10)
	}
	// As in FAR, the partitions may come back in more than one response.
	f.fetchEach(0, 1, 2)
}

// Row 5: "Ack partition error NONE; next acquisition [{10,19,1}]" after ShareAcknowledge
// ACCEPT [0-9] and 10 more records (FAR testShareAcknowledgeRequestSuccessAccept).
func TestShareAcknowledgeRequestSuccessAccept_7_1_5(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, nil)
	f.ackOK(f.s, 0, ackRange{0, 9, ackAccept})
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{10, 19, 1})
}

// Row 6: "AcknowledgeErrorCode NONE; next fetch [{10,19,1}], then [{20,29,1}]" with the
// ACCEPT piggybacked on ShareFetch; as in FAR, group.share.record.lock.duration.ms=15000
// makes AcquisitionLockTimeoutMs 15000 (FAR testShareFetchRequestPiggybackedAccept).
func TestShareFetchRequestPiggybackedAccept_7_1_6(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, map[string]string{"group.share.record.lock.duration.ms": "15000"})
	f.piggybackFinal(ackAccept)
}

// Row 7: "Next fetch re-acquires [{0,9,2}]" after RELEASE [0-9], sent separately (FAR
// testShareAcknowledgeRequestSuccessRelease) or piggybacked on the next ShareFetch
// together with 10 new records, which then acquire [{0,9,2},{10,19,1}] (FAR
// testShareFetchRequestPiggybackedRelease).
func TestShareAcknowledgeRequestSuccessRelease_7_1_7(t *testing.T) {
	t.Parallel()
	t.Run("ShareAcknowledge", func(t *testing.T) {
		t.Parallel()
		f := startAcquired(t, nil)
		f.ackOK(f.s, 0, ackRange{0, 9, ackRelease})
		f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 2})
	})
	t.Run("piggybacked", func(t *testing.T) { // TestShareFetchRequestPiggybackedRelease
		t.Parallel()
		f := startAcquired(t, nil)
		f.produce(0, 10)
		var got []acq
		release := acks1(f.tip(0), ackRange{0, 9, ackRelease})
		eventually(t, "offsets 0-19 acquired", func() (bool, string) {
			r := f.s.fetch(fetchReq{parts: f.tips(0), acks: release})
			release = nil
			wantFetchOK(t, r, defaultLockMs)
			if rp := fetchPart(r, f.tip(0)); rp != nil {
				wantCode(t, "partition 0", rp.ErrorCode, nil)
				wantCode(t, "partition 0 acknowledge", rp.AcknowledgeErrorCode, nil)
				got = append(got, acquiredOf(rp)...)
			}
			return len(got) >= 2, fmt.Sprint(got)
		})
		slices.SortFunc(got, func(a, b acq) int { return int(a.first - b.first) })
		if want := []acq{{0, 9, 2}, {10, 19, 1}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("acquired %v, want %v", got, want)
		}
	})
}

// Row 8: "Never re-delivered; the next fetch returns only new offsets" after REJECT
// [0-9], sent separately (FAR testShareAcknowledgeRequestSuccessReject) or piggybacked
// (FAR testShareFetchRequestPiggybackedReject).
func TestShareAcknowledgeRequestSuccessReject_7_1_8(t *testing.T) {
	t.Parallel()
	t.Run("ShareAcknowledge", func(t *testing.T) {
		t.Parallel()
		f := startAcquired(t, nil)
		f.ackOK(f.s, 0, ackRange{0, 9, ackReject})
		f.produce(0, 10)
		f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{10, 19, 1})
	})
	t.Run("piggybacked", func(t *testing.T) { // TestShareFetchRequestPiggybackedReject
		t.Parallel()
		f := startAcquired(t, nil)
		f.piggybackFinal(ackReject)
	})
}

// Row 9: "Offsets 0-9 are archived; the fetch returns [{10,19,1}]" with
// group.share.delivery.count.limit=2 after fetch, RELEASE, fetch (count 2), RELEASE and
// 10 more records (FAR testShareAcknowledgeRequestMaxDeliveryAttemptExhausted). The share
// partition's start offset (DescribeShareGroupOffsets) moves past the archived records.
func TestShareAcknowledgeRequestMaxDeliveryAttemptExhausted_7_1_9(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, map[string]string{"group.share.delivery.count.limit": "2"})
	f.ackOK(f.s, 0, ackRange{0, 9, ackRelease})
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 2})
	f.ackOK(f.s, 0, ackRange{0, 9, ackRelease})
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{10, 19, 1})

	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = farGroup
	g.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: farTopic, Partitions: []int32{0}}}
	req.Groups = append(req.Groups, g)
	d := f.dial().roundTrip(req).(*kmsg.DescribeShareGroupOffsetsResponse)
	if len(d.Groups) != 1 || len(d.Groups[0].Topics) != 1 || len(d.Groups[0].Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeShareGroupOffsets: %+v", d)
	}
	if p := d.Groups[0].Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != 10 {
		t.Fatalf("share partition start offset %d (error %v), want 10", p.StartOffset, kerr.ErrorForCode(p.ErrorCode))
	}
}

// Row 10: "Disjoint acquisitions whose union covers all records" for members of one
// group fetching the same partition: three members, one record produced before each
// one's fetch, get [{0,0}], [{1,1}] and [{2,2}] (FAR
// testShareFetchRequestSuccessfulSharingBetweenMultipleConsumers). The topic has one
// partition, which the simple assignor gives to all three.
func TestShareFetchRequestSuccessfulSharingBetweenMultipleConsumers_7_1_10(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.createTopic(farTopic, 1)
	f := &farEnv{env: e, topicID: id, lockMs: defaultLockMs}
	members := []string{newMemberID(), newMemberID(), newMemberID()}
	hb := e.dial()
	for _, m := range members {
		hb.joinUntilAssigned(farGroup, m, []string{farTopic}, assignment{id: {0}})
	}
	first := &session{t: t, c: e.dial(), group: farGroup, member: members[0]}
	f.open(first, 0)
	for i, m := range members {
		f.produce(0, 1)
		s := &session{t: t, c: e.dial(), group: farGroup, member: m}
		o := int64(i)
		f.fetchOne(s, fetchReq{parts: f.tips(0)}, 0, acq{o, o, 1})
	}
}

// Row 11: "Each group receives all records independently" for members of different
// groups (FAR testShareFetchRequestNoSharingBetweenMultipleConsumersFromDifferentGroups).
func TestShareFetchRequestNoSharingBetweenMultipleConsumersFromDifferentGroups_7_1_11(t *testing.T) {
	t.Parallel()
	f := startFAR(t, nil, 0)
	other := f.joinAndOpen("group2", newMemberID(), 0)
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 1})
	f.fetchOne(other, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 1})
}

// Row 12: "Acks applied; unacked records released and re-deliverable to another member"
// when the session is closed with epoch -1 on ShareFetch (FAR
// testShareSessionCloseWithShareFetch) or ShareAcknowledge (FAR
// testShareSessionCloseWithShareAcknowledge); the closed session is then
// SHARE_SESSION_NOT_FOUND.
func TestShareSessionCloseWithShareFetch_7_1_12(t *testing.T) {
	t.Parallel()
	// closeWith closes f.s at epoch -1, accepting 10-14 of the held 10-19.
	run := func(t *testing.T, closeWith func(f *farEnv)) {
		f := startAcquired(t, nil)
		f.produce(0, 10)
		f.fetchOne(f.s, fetchReq{parts: f.tips(0), acks: acks1(f.tip(0), ackRange{0, 9, ackAccept})}, 0, acq{10, 19, 1})
		closed := f.s.epoch
		f.s.epoch = -1
		closeWith(f)
		// Offsets 10-14 were accepted; 15-19 are released and go to another member.
		other := &session{t: t, c: f.dial(), group: farGroup, member: newMemberID()}
		f.fetchOne(other, fetchReq{parts: f.tips(0)}, 0, acq{15, 19, 2})
		wantCode(t, "fetch on the closed session", f.s.c.shareFetch(fetchReq{group: farGroup, member: f.s.member, epoch: closed, parts: f.tips(0)}).ErrorCode, kerr.ShareSessionNotFound)
		wantCode(t, "acknowledge on the closed session", f.s.c.shareAck(farGroup, f.s.member, closed, nil).ErrorCode, kerr.ShareSessionNotFound)
	}
	t.Run("ShareFetch", func(t *testing.T) {
		t.Parallel()
		run(t, func(f *farEnv) {
			r := f.s.fetch(fetchReq{acks: acks1(f.tip(0), ackRange{10, 14, ackAccept})})
			wantFetchOK(t, r, defaultLockMs)
			rp := fetchPart(r, f.tip(0))
			if countParts(r) != 1 || rp == nil {
				t.Fatalf("closing fetch: %d entries, want the acknowledged partition only", countParts(r))
			}
			wantCode(t, "closing fetch, partition 0", rp.ErrorCode, nil)
			wantCode(t, "closing fetch, acknowledgement", rp.AcknowledgeErrorCode, nil)
			if len(rp.AcquiredRecords) != 0 {
				t.Fatalf("a closing fetch acquired %v", acquiredOf(rp))
			}
		})
	})
	t.Run("ShareAcknowledge", func(t *testing.T) { // TestShareSessionCloseWithShareAcknowledge
		t.Parallel()
		run(t, func(f *farEnv) {
			r := f.s.ack(acks1(f.tip(0), ackRange{10, 14, ackAccept}))
			wantCode(t, "closing acknowledge", r.ErrorCode, nil)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				t.Fatalf("closing acknowledge: %+v, want one partition entry", r.Topics)
			}
			wantCode(t, "closing acknowledge, partition 0", ackPart(r, f.tip(0)).ErrorCode, nil)
		})
	})
}

// Row 13: "Top-level INVALID_REQUEST; AcquisitionLockTimeoutMs = 0" for a ShareFetch at
// epoch 0 carrying acknowledgements (FAR testShareFetchInitialEpochWithAcknowledgements).
func TestShareFetchInitialEpochWithAcknowledgements_7_1_13(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.createTopic(farTopic, 3)
	e.produce(farTopic, 0, 10)
	r := e.dial().shareFetch(fetchReq{group: farGroup, member: newMemberID(), epoch: 0,
		acks: acks1(tip{id, 0}, ackRange{0, 9, ackAccept})})
	wantRejected(t, "share fetch", r.ErrorCode, r.AcquisitionLockTimeoutMillis, len(r.Topics), kerr.InvalidRequest)
}

// Row 14: "Top-level INVALID_SHARE_SESSION_EPOCH; lock timeout 0" for ShareAcknowledge at
// epoch 0 (FAR testShareAcknowledgeInitialRequestError).
func TestShareAcknowledgeInitialRequestError_7_1_14(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.createTopic(farTopic, 3)
	r := e.dial().shareAck(farGroup, newMemberID(), 0, acks1(tip{id, 0}, ackRange{0, 9, ackAccept}))
	wantRejected(t, "share acknowledge", r.ErrorCode, r.AcquisitionLockTimeoutMillis, len(r.Topics), kerr.InvalidShareSessionEpoch)
}

// Row 15: "INVALID_SHARE_SESSION_EPOCH" for a wrong epoch on ShareFetch (FAR
// testShareFetchRequestInvalidShareSessionEpoch) or ShareAcknowledge (FAR
// testShareAcknowledgeRequestInvalidShareSessionEpoch); the session is unharmed and its
// right epoch still works.
func TestShareFetchRequestInvalidShareSessionEpoch_7_1_15(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, nil)
	skip := next(f.s.epoch) // one ahead of the session's epoch
	r := f.s.c.shareFetch(fetchReq{group: farGroup, member: f.s.member, epoch: skip, parts: f.tips(0)})
	wantRejected(t, "share fetch at a skipped epoch", r.ErrorCode, r.AcquisitionLockTimeoutMillis, len(r.Topics), kerr.InvalidShareSessionEpoch)
	// TestShareAcknowledgeRequestInvalidShareSessionEpoch
	a := f.s.c.shareAck(farGroup, f.s.member, skip, acks1(f.tip(0), ackRange{0, 9, ackAccept}))
	wantRejected(t, "share acknowledge at a skipped epoch", a.ErrorCode, a.AcquisitionLockTimeoutMillis, len(a.Topics), kerr.InvalidShareSessionEpoch)
	// Neither advanced the epoch nor applied the acknowledgement.
	f.ackOK(f.s, 0, ackRange{0, 9, ackRelease})
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 2})
}

// Row 16: "SHARE_SESSION_NOT_FOUND" for epoch > 0 or -1 with no session, on ShareFetch
// (FAR testShareFetchRequestShareSessionNotFound: another member id than the session's)
// and ShareAcknowledge (FAR testShareAcknowledgeRequestShareSessionNotFound).
func TestShareFetchRequestShareSessionNotFound_7_1_16(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, nil)
	wrong := newMemberID()
	for _, epoch := range []int32{f.s.epoch, -1} {
		r := f.s.c.shareFetch(fetchReq{group: farGroup, member: wrong, epoch: epoch, parts: f.tips(0)})
		wantRejected(t, fmt.Sprintf("share fetch without a session, epoch %d", epoch), r.ErrorCode, r.AcquisitionLockTimeoutMillis, len(r.Topics), kerr.ShareSessionNotFound)
		a := f.s.c.shareAck(farGroup, wrong, epoch, acks1(f.tip(0), ackRange{0, 9, ackAccept}))
		wantRejected(t, fmt.Sprintf("share acknowledge without a session, epoch %d", epoch), a.ErrorCode, a.AcquisitionLockTimeoutMillis, len(a.Topics), kerr.ShareSessionNotFound)
	}
	// The real session's records are untouched: the accept of the wrong member was not
	// applied, so a release by the owner redelivers them.
	f.ackOK(f.s, 0, ackRange{0, 9, ackRelease})
	f.fetchOne(f.s, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 2})
}

// Row 17: "Session evicted and records released; the next non-zero epoch gets
// SHARE_SESSION_NOT_FOUND" when the TCP connection that owns the session drops (FAR
// testShareSessionEvictedOnConnectionDrop, with group.share.max.share.sessions=2: a third
// session is SHARE_SESSION_LIMIT_REACHED until the first two connections close).
func TestShareSessionEvictedOnConnectionDrop_7_1_17(t *testing.T) {
	t.Parallel()
	t.Run("records released", func(t *testing.T) {
		t.Parallel()
		f := startAcquired(t, nil)
		f.s.c.close()
		// The other member's fetch waits (long poll) until the drop released the records.
		other := &session{t: t, c: f.dial(), group: farGroup, member: newMemberID()}
		f.fetchOne(other, fetchReq{parts: f.tips(0)}, 0, acq{0, 9, 2})
		r := f.dial().shareFetch(fetchReq{group: farGroup, member: f.s.member, epoch: f.s.epoch, parts: f.tips(0)})
		wantCode(t, "share fetch on the dropped connection's session", r.ErrorCode, kerr.ShareSessionNotFound)
	})
	t.Run("session limit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, map[string]string{"group.share.max.share.sessions": "2", "group.share.max.size": "2"})
		id := e.createTopic(farTopic, 3)
		parts := []tip{{id, 0}}
		m1, m2, m3 := newMemberID(), newMemberID(), newMemberID()
		c1, c2, c3 := e.dial(), e.dial(), e.dial()
		for _, x := range []struct {
			c *wireConn
			m string
		}{{c1, m1}, {c2, m2}} {
			wantCode(t, "share session of "+x.m, x.c.shareFetch(fetchReq{group: farGroup, member: x.m, parts: parts, maxWaitMs: -1}).ErrorCode, nil)
		}
		third := fetchReq{group: farGroup, member: m3, parts: parts, maxWaitMs: 100}
		wantCode(t, "a third share session", c3.shareFetch(third).ErrorCode, kerr.ShareSessionLimitReached)
		c1.close()
		c2.close()
		c3.close()
		c4 := e.dial()
		eventually(t, "a share session after the connections closed", func() (bool, string) {
			code := c4.shareFetch(third).ErrorCode
			return code == 0, fmt.Sprint(kerr.ErrorForCode(code))
		})
	})
}

// Row 18: "Later fetches no longer return those partitions" after ForgottenTopicsData
// removes them; records already acquired there can still be acknowledged, once (FAR
// testShareFetchRequestForgetTopicPartitions).
func TestShareFetchRequestForgetTopicPartitions_7_1_18(t *testing.T) {
	t.Parallel()
	f := startFAR(t, nil, 0, 1)
	f.produce(0, 10)
	f.produce(1, 10)
	f.fetchEach(0, 1)
	f.produce(0, 10)
	f.produce(1, 10)
	forget := f.tips(0)
	f.fetchOne(f.s, fetchReq{forget: forget}, 1, acq{10, 19, 1})
	// Forgetting again is harmless, and partition 1 has nothing new.
	r := f.s.fetch(fetchReq{forget: forget, maxWaitMs: 500})
	wantFetchOK(t, r, defaultLockMs)
	if len(r.Topics) != 0 {
		t.Fatalf("fetch after forgetting partition 0 returned %d topics, want none", len(r.Topics))
	}
	f.ackOK(f.s, 0, ackRange{5, 9, ackAccept})
	a := f.s.ack(acks1(f.tip(0), ackRange{0, 5, ackAccept}))
	wantCode(t, "second acknowledge", a.ErrorCode, nil)
	if p := ackPart(a, f.tip(0)); p == nil || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 1 {
		t.Fatalf("second acknowledge: %+v, want one partition entry", a.Topics)
	} else {
		wantCode(t, "acknowledging offset 5 twice", p.ErrorCode, kerr.InvalidRecordState)
	}
}

// Row 19: "AcquiredRecords [{0,0,1}]" with MaxRecords=1, BatchSize=1 over 10
// single-record batches (FAR testShareFetchRequestWithMaxRecordsAndBatchSize).
func TestShareFetchRequestWithMaxRecordsAndBatchSize_7_1_19(t *testing.T) {
	t.Parallel()
	f := startFAR(t, nil, 0)
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0), maxRecords: 1, batchSize: 1}, 0, acq{0, 0, 1})
}

// Row 20: "Five ranges {0,0}...{4,4}" with MaxRecords=5, BatchSize=1 (FAR
// testShareFetchRequestMultipleBatchesWithMaxRecordsAndBatchSize).
func TestShareFetchRequestMultipleBatchesWithMaxRecordsAndBatchSize_7_1_20(t *testing.T) {
	t.Parallel()
	f := startFAR(t, nil, 0)
	f.produce(0, 10)
	f.fetchOne(f.s, fetchReq{parts: f.tips(0), maxRecords: 5, batchSize: 1}, 0,
		acq{0, 0, 1}, acq{1, 1, 1}, acq{2, 2, 1}, acq{3, 3, 1}, acq{4, 4, 1})
}
