package conformance

// AlterShareGroupOffsets (key 91), DeleteShareGroupOffsets (key 92) and the group admin
// RPCs that touch share groups (DeleteGroups, ListGroups, DescribeGroups) over the wire,
// checked against what Kafka 4.4 answers (KafkaApis.handleAlterShareGroupOffsetsRequest and
// handleDeleteShareGroupOffsetsRequest, GroupMetadataManager.alterShareGroupOffsets,
// GroupCoordinatorShard.initiateDeleteShareGroupOffsets; kip-932.md 1.11-1.13).

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterOffsets sends AlterShareGroupOffsets v0 setting each listed partition of topic to
// its start offset.
func (c *wireConn) alterOffsets(group, topic string, starts map[int32]int64) *kmsg.AlterShareGroupOffsetsResponse {
	c.t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(len(starts) + 8) {
		if o, ok := starts[p]; ok {
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = p, o
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	req.Topics = append(req.Topics, rt)
	return c.roundTrip(req).(*kmsg.AlterShareGroupOffsetsResponse)
}

// deleteOffsets sends DeleteShareGroupOffsets v0 for topics.
func (c *wireConn) deleteOffsets(group string, topics ...string) *kmsg.DeleteShareGroupOffsetsResponse {
	c.t.Helper()
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	for _, t := range topics {
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	return c.roundTrip(req).(*kmsg.DeleteShareGroupOffsetsResponse)
}

// describeOffsets sends DescribeShareGroupOffsets v1 for every initialized share partition
// of group (null topics) and returns partition -> (start offset, lag).
func (c *wireConn) describeOffsets(group string) (map[int32][2]int64, *kmsg.DescribeShareGroupOffsetsResponseGroup) {
	c.t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version = 1
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	req.Groups = append(req.Groups, rg)
	resp := c.roundTrip(req).(*kmsg.DescribeShareGroupOffsetsResponse)
	g := &resp.Groups[0]
	out := map[int32][2]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = [2]int64{p.StartOffset, p.Lag}
		}
	}
	return out, g
}

// leave sends the member's leave heartbeat (epoch -1): the group becomes empty.
func (f *farEnv) leave(s *session) {
	f.t.Helper()
	if r := f.dial().heartbeat(s.group, s.member, -1, nil); r.ErrorCode != 0 {
		f.t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// joinAndFetch joins a new member to farGroup (assigned all of farTopic) and checks that its
// session's first ShareFetch, on partition 0, acquires exactly want.
func (f *farEnv) joinAndFetch(want ...acq) {
	f.t.Helper()
	member := newMemberID()
	f.dial().joinUntilAssigned(farGroup, member, []string{farTopic}, assignment{f.topicID: {0, 1, 2}})
	s := &session{t: f.t, c: f.dial(), group: farGroup, member: member}
	f.fetchOne(s, fetchReq{parts: f.tips(0)}, 0, want...)
}

// wantTopLevel checks a top-level error and message and that no topics came back.
func wantTopLevel(t testing.TB, what string, code int16, msg *string, topics int, want *kerr.Error, wantMsg string) {
	t.Helper()
	wantCode(t, what, code, want)
	if msg == nil || *msg != wantMsg || topics != 0 {
		t.Fatalf("%s: message %v and %d topics, want %q and none", what, deref(msg), topics, wantMsg)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return fmt.Sprintf("%q", *s)
}

// Alter on an empty group: the start offset moves, in-flight state is dropped, the next
// fetch starts there at delivery count 1, and all of it survives a restart. Unknown topics
// and partitions get UNKNOWN_TOPIC_OR_PARTITION per partition (unknown topics first, with a
// zero topic id, as KafkaApis answers them before the coordinator).
func TestAlterShareGroupOffsetsEmptyGroup(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, nil) // 0-9 acquired by the member on partition 0
	f.ackOK(f.s, 0, ackRange{0, 2, ackAccept})
	c := f.dial()
	// A member is in the group: NON_EMPTY_GROUP, nothing changes.
	r := c.alterOffsets(farGroup, farTopic, map[int32]int64{0: 7})
	wantTopLevel(t, "alter with a member", r.ErrorCode, r.ErrorMessage, len(r.Topics), kerr.NonEmptyGroup, "The group is not empty.")
	f.leave(f.s)

	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = farGroup
	for _, name := range []string{farTopic, "no-such-topic"} {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = name
		for _, p := range []int32{0, 5} {
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = p, 7
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	r = c.roundTrip(req).(*kmsg.AlterShareGroupOffsetsResponse)
	wantCode(t, "alter", r.ErrorCode, nil)
	if len(r.Topics) != 2 || r.Topics[0].Topic != "no-such-topic" || r.Topics[0].TopicID != [16]byte{} ||
		r.Topics[1].Topic != farTopic || r.Topics[1].TopicID != f.topicID {
		t.Fatalf("alter topics: %+v", r.Topics)
	}
	for _, p := range r.Topics[0].Partitions {
		wantCode(t, fmt.Sprintf("unknown topic partition %d", p.Partition), p.ErrorCode, kerr.UnknownTopicOrPartition)
	}
	ps := r.Topics[1].Partitions
	if len(ps) != 2 || ps[0].Partition != 0 || ps[0].ErrorMessage != nil || ps[1].Partition != 5 {
		t.Fatalf("alter partitions: %+v", ps)
	}
	wantCode(t, "partition 0", ps[0].ErrorCode, nil)
	wantCode(t, "partition 5 (the topic has 3)", ps[1].ErrorCode, kerr.UnknownTopicOrPartition)

	offs, g := c.describeOffsets(farGroup)
	wantCode(t, "describe offsets", g.ErrorCode, nil)
	if offs[0] != [2]int64{7, 3} {
		t.Fatalf("partition 0 start offset and lag %v, want [7 3]", offs[0])
	}
	f.tb.Restart()
	c = f.dial()
	if offs, _ := c.describeOffsets(farGroup); offs[0] != [2]int64{7, 3} {
		t.Fatalf("after restart: partition 0 start offset and lag %v, want [7 3]", offs[0])
	}
	// A new member starts at 7: 7-9 on their first delivery.
	f.joinAndFetch(acq{7, 9, 1})
}

// Alter creates a missing share group (empty, as Kafka's getOrMaybeCreateShareGroup does);
// a group id of another type is GROUP_ID_NOT_FOUND; an empty group id INVALID_GROUP_ID.
func TestAlterShareGroupOffsetsGroupErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	e.produce("t", 0, 5)
	c := e.dial()
	r := c.alterOffsets("fresh", "t", map[int32]int64{0: 2})
	wantCode(t, "alter of a new group", r.ErrorCode, nil)
	wantCode(t, "alter of a new group, partition 0", r.Topics[0].Partitions[0].ErrorCode, nil)
	if offs, g := c.describeOffsets("fresh"); g.ErrorCode != 0 || offs[0] != [2]int64{2, 3} {
		t.Fatalf("new group offsets %v (%v)", offs, kerr.ErrorForCode(g.ErrorCode))
	}
	if d := c.describe(false, "fresh").Groups[0]; d.ErrorCode != 0 || d.GroupState != "Empty" {
		t.Fatalf("describe of the new group: %+v", d)
	}

	// A classic group.
	if _, err := e.adm.CommitOffsets(e.ctx(), "classic", kadmOffsets("t", 0, 1)); err != nil {
		t.Fatal(err)
	}
	r = c.alterOffsets("classic", "t", map[int32]int64{0: 2})
	wantTopLevel(t, "alter of a classic group", r.ErrorCode, r.ErrorMessage, len(r.Topics), kerr.GroupIDNotFound, "Group classic is not a share group.")
	d := c.deleteOffsets("classic", "t")
	wantTopLevel(t, "delete of a classic group", d.ErrorCode, d.ErrorMessage, len(d.Topics), kerr.GroupIDNotFound, "Group classic is not a share group.")

	r = c.alterOffsets("", "t", map[int32]int64{0: 2})
	wantTopLevel(t, "alter with an empty group id", r.ErrorCode, r.ErrorMessage, len(r.Topics), kerr.InvalidGroupID, "The group id is invalid.")
	d = c.deleteOffsets("")
	wantTopLevel(t, "delete with an empty group id", d.ErrorCode, d.ErrorMessage, len(d.Topics), kerr.InvalidGroupID, "The group id is invalid.")
	d = c.deleteOffsets("missing", "t")
	wantTopLevel(t, "delete of a missing group", d.ErrorCode, d.ErrorMessage, len(d.Topics), kerr.GroupIDNotFound, "Group missing not found.")
}

// Delete on an empty group: the topic's share state goes, the group no longer lists it,
// and the next member re-initializes it with share.auto.offset.reset (earliest here), so
// records acknowledged before come again; durable across a restart. Per-topic errors:
// UNKNOWN_TOPIC_OR_PARTITION for a missing topic and for one without offsets.
func TestDeleteShareGroupOffsetsEmptyGroup(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, nil)
	f.ackOK(f.s, 0, ackRange{0, 9, ackAccept})
	c := f.dial()
	d := c.deleteOffsets(farGroup, farTopic)
	wantTopLevel(t, "delete with a member", d.ErrorCode, d.ErrorMessage, len(d.Topics), kerr.NonEmptyGroup, "The group is not empty.")
	f.leave(f.s)
	f.createTopic("other", 1)

	d = c.deleteOffsets(farGroup, "no-such-topic", "other", farTopic)
	wantCode(t, "delete", d.ErrorCode, nil)
	if len(d.Topics) != 3 {
		t.Fatalf("delete topics: %+v", d.Topics)
	}
	if tp := d.Topics[0]; tp.Topic != farTopic || tp.TopicID != f.topicID || tp.ErrorCode != 0 || tp.ErrorMessage != nil {
		t.Fatalf("deleted topic: %+v", tp)
	}
	wantCode(t, "missing topic", d.Topics[1].ErrorCode, kerr.UnknownTopicOrPartition)
	if d.Topics[1].Topic != "no-such-topic" || deref(d.Topics[1].ErrorMessage) != `"This server does not host this topic-partition."` {
		t.Fatalf("missing topic: %+v", d.Topics[1])
	}
	wantCode(t, "topic without offsets", d.Topics[2].ErrorCode, kerr.UnknownTopicOrPartition)
	if d.Topics[2].Topic != "other" || deref(d.Topics[2].ErrorMessage) != `"There is no offset information to delete."` {
		t.Fatalf("topic without offsets: %+v", d.Topics[2])
	}
	if offs, g := c.describeOffsets(farGroup); g.ErrorCode != 0 || len(offs) != 0 {
		t.Fatalf("offsets after delete: %v (%v)", offs, kerr.ErrorForCode(g.ErrorCode))
	}
	f.tb.Restart()
	c = f.dial()
	if offs, _ := c.describeOffsets(farGroup); len(offs) != 0 {
		t.Fatalf("offsets after delete and restart: %v", offs)
	}
	d = c.deleteOffsets(farGroup, farTopic)
	if len(d.Topics) != 1 || deref(d.Topics[0].ErrorMessage) != `"There is no offset information to delete."` {
		t.Fatalf("second delete: %+v", d.Topics)
	}
	f.setGroupConfig(farGroup, "share.auto.offset.reset", "earliest")
	f.joinAndFetch(acq{0, 9, 1})
}

// DeleteGroups deletes an empty share group with its share state: a new group under the
// same id starts from share.auto.offset.reset again. ListGroups lists share groups with
// GroupType and ProtocolType "share" (type filter "share" and "classic"); DescribeGroups
// (the classic RPC) answers a share group's id as a missing classic group.
func TestShareGroupDeleteListDescribe(t *testing.T) {
	t.Parallel()
	f := startAcquired(t, nil)
	f.ackOK(f.s, 0, ackRange{0, 9, ackAccept})
	c := f.dial()

	list := func(types ...string) []kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		req.TypesFilter = types
		r := c.roundTrip(req).(*kmsg.ListGroupsResponse)
		wantCode(t, "list groups", r.ErrorCode, nil)
		return r.Groups
	}
	if gs := list("share"); len(gs) != 1 || gs[0].Group != farGroup || gs[0].GroupType != "share" || gs[0].ProtocolType != "share" || gs[0].GroupState != "Stable" {
		t.Fatalf("list share groups: %+v", gs)
	}
	if gs := list("classic"); len(gs) != 0 {
		t.Fatalf("list classic groups: %+v", gs)
	}
	for _, v := range []int16{5, 6} {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = v
		req.Groups = []string{farGroup}
		g := c.roundTrip(req).(*kmsg.DescribeGroupsResponse).Groups[0]
		if g.State != "Dead" {
			t.Fatalf("DescribeGroups v%d of a share group: %+v", v, g)
		}
		if v == 6 {
			wantCode(t, "DescribeGroups v6 of a share group", g.ErrorCode, kerr.GroupIDNotFound)
			if deref(g.ErrorMessage) != fmt.Sprintf("%q", "Group "+farGroup+" is not a classic group.") {
				t.Fatalf("DescribeGroups v6 message %s", deref(g.ErrorMessage))
			}
		} else {
			wantCode(t, "DescribeGroups v5 of a share group", g.ErrorCode, nil)
		}
	}

	del := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = []string{farGroup}
		return c.roundTrip(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}
	wantCode(t, "delete of a share group with a member", del(), kerr.NonEmptyGroup)
	f.leave(f.s)
	wantCode(t, "delete of the empty share group", del(), nil)
	if gs := list("share"); len(gs) != 0 {
		t.Fatalf("share groups after delete: %+v", gs)
	}
	wantCode(t, "delete of a deleted group", del(), kerr.GroupIDNotFound)
	f.tb.Restart()
	c = f.dial()
	if gs := list(); len(gs) != 0 {
		t.Fatalf("groups after delete and restart: %+v", gs)
	}
	// The share state went with the group: a new group under the id starts from
	// share.auto.offset.reset (earliest), not from the old start offset 10.
	f.setGroupConfig(farGroup, "share.auto.offset.reset", "earliest")
	f.joinAndFetch(acq{0, 9, 1})
}

// kadmOffsets is one committed offset, for making a classic group with OffsetCommit.
func kadmOffsets(topic string, partition int32, at int64) kadm.Offsets {
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: topic, Partition: partition, At: at, LeaderEpoch: -1})
	return o
}
