package sharegroup

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func alterReq(group string, topics map[string]map[int32]int64, order ...string) *kmsg.AlterShareGroupOffsetsRequest {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	for _, name := range order {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = name
		ps := topics[name]
		for _, p := range slices.Sorted(mapKeys(ps)) {
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = p, ps[p]
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func deleteOffsetsReq(group string, topics ...string) *kmsg.DeleteShareGroupOffsetsRequest {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	for _, t := range topics {
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// emptiedGroup makes group g with topic t (id 1, 2 partitions) initialized and assigned to
// member m1, which then leaves: an empty share group with share state.
func emptiedGroup(t *testing.T, e *env) {
	t.Helper()
	e.setTopic("t", 1, 2)
	ep := map[string]int32{"m1": e.join("g", "m1", "t").MemberEpoch}
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); got.count() != 2 {
		t.Fatalf("assignment %v", got)
	}
	if r := e.hb("g", "m1", -1); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	e.inits = nil
}

func TestAlterOffsetsOfEmptyGroup(t *testing.T) {
	e := newEnv(t)
	emptiedGroup(t, e)
	r := e.c.AlterShareGroupOffsets(context.Background(), 0, alterReq("g",
		map[string]map[int32]int64{"t": {0: 42, 7: 1}, "nope": {0: 3}}, "t", "nope"))
	if r.ErrorCode != 0 || len(r.Topics) != 2 {
		t.Fatalf("response %+v", r)
	}
	// KafkaApis answers unknown topics before the coordinator's answer.
	if u := r.Topics[0]; u.Topic != "nope" || u.TopicID != [16]byte{} || len(u.Partitions) != 1 ||
		u.Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || *u.Partitions[0].ErrorMessage != kerr.UnknownTopicOrPartition.Description {
		t.Fatalf("unknown topic: %+v", u)
	}
	k := r.Topics[1]
	if k.Topic != "t" || k.TopicID != tid(1) || len(k.Partitions) != 2 ||
		k.Partitions[0].Partition != 0 || k.Partitions[0].ErrorCode != 0 || k.Partitions[0].ErrorMessage != nil ||
		k.Partitions[1].Partition != 7 || k.Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("known topic: %+v", k)
	}
	epoch := e.describeEpoch("g")
	if want := []string{"g b 0 " + itoa(epoch) + " 42"}; !slices.Equal(e.inits, want) {
		t.Fatalf("resets %v, want %v", e.inits, want)
	}
	e.restart()
	if got := e.c.InitializedPartitions("g"); !got.equal(Assignment{tid(1): {0, 1}}) {
		t.Fatalf("initialized after restart: %v", got)
	}
	// A member joining now is assigned both partitions without another initialization
	// (which would overwrite the altered start offset).
	e.inits = nil
	ep := map[string]int32{"m2": e.join("g", "m2", "t").MemberEpoch}
	e.settle("g", ep)
	if got := e.assigned("g", "m2"); got.count() != 2 || len(e.inits) != 0 {
		t.Fatalf("assignment %v, initializations %v", got, e.inits)
	}
}

func (e *env) describeEpoch(group string) int32 {
	d := e.c.ShareGroupDescribe(context.Background(), 1, describeReq(group))
	return d.Groups[0].GroupEpoch
}

func TestAlterOffsetsCreatesMissingGroup(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	r := e.c.AlterShareGroupOffsets(context.Background(), 0, alterReq("new", map[string]map[int32]int64{"t": {0: 5}}, "t"))
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("response %+v", r)
	}
	if want := []string{"new b 0 0 5"}; !slices.Equal(e.inits, want) {
		t.Fatalf("resets %v", e.inits)
	}
	e.restart()
	d := e.c.ShareGroupDescribe(context.Background(), 1, describeReq("new")).Groups[0]
	if d.ErrorCode != 0 || d.GroupState != StateEmpty {
		t.Fatalf("describe after restart: %+v", d)
	}
	// Only unknown topics: nothing to record, no group.
	r = e.c.AlterShareGroupOffsets(context.Background(), 0, alterReq("ghost", map[string]map[int32]int64{"nope": {0: 5}}, "nope"))
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || e.c.Exists("ghost") {
		t.Fatalf("unknown topic only: %+v, exists %v", r, e.c.Exists("ghost"))
	}
}

func TestAlterOffsetsPreconditions(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	e.other["classic"] = true
	e.join("busy", "m1", "t")
	e.inits = nil
	cases := []struct {
		group string
		err   *kerr.Error
		msg   string
	}{
		{"", kerr.InvalidGroupID, "The group id is invalid."},
		{"classic", kerr.GroupIDNotFound, "Group classic is not a share group."},
		{"busy", kerr.NonEmptyGroup, "The group is not empty."},
	}
	for _, c := range cases {
		r := e.c.AlterShareGroupOffsets(context.Background(), 0, alterReq(c.group, map[string]map[int32]int64{"t": {0: 1}}, "t"))
		if r.ErrorCode != c.err.Code || r.ErrorMessage == nil || *r.ErrorMessage != c.msg || len(r.Topics) != 0 {
			t.Errorf("alter %q: %+v, want %v %q", c.group, r, c.err, c.msg)
		}
		d := e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq(c.group, "t"))
		if d.ErrorCode != c.err.Code || d.ErrorMessage == nil || *d.ErrorMessage != c.msg || len(d.Topics) != 0 {
			t.Errorf("delete %q: %+v, want %v %q", c.group, d, c.err, c.msg)
		}
	}
	if len(e.inits) != 0 || len(e.deleted) != 0 {
		t.Fatalf("state touched: resets %v, deletes %v", e.inits, e.deleted)
	}
	d := e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq("missing", "t"))
	if d.ErrorCode != kerr.GroupIDNotFound.Code || *d.ErrorMessage != "Group missing not found." {
		t.Fatalf("delete of a missing group: %+v", d)
	}
}

func TestAlterOffsetsResetFailure(t *testing.T) {
	e := newEnv(t)
	emptiedGroup(t, e)
	e.c.cfg.ResetShareState = func(_ context.Context, _ string, _ [16]byte, p int32, _ int32, _ int64) error {
		if p == 1 {
			return kerr.FencedStateEpoch
		}
		return nil
	}
	r := e.c.AlterShareGroupOffsets(context.Background(), 0, alterReq("g", map[string]map[int32]int64{"t": {0: 1, 1: 1}}, "t"))
	ps := r.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.FencedStateEpoch.Code || *ps[1].ErrorMessage != kerr.FencedStateEpoch.Description {
		t.Fatalf("partitions %+v", ps)
	}
}

func TestDeleteOffsets(t *testing.T) {
	e := newEnv(t)
	emptiedGroup(t, e)
	e.setTopic("u", 2, 1) // exists, never initialized by the group
	r := e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq("g", "nope", "u", "t"))
	if r.ErrorCode != 0 || len(r.Topics) != 3 {
		t.Fatalf("response %+v", r)
	}
	if d := r.Topics[0]; d.Topic != "t" || d.TopicID != tid(1) || d.ErrorCode != 0 || d.ErrorMessage != nil {
		t.Fatalf("deleted topic first: %+v", d)
	}
	if d := r.Topics[1]; d.Topic != "nope" || d.ErrorCode != kerr.UnknownTopicOrPartition.Code || *d.ErrorMessage != kerr.UnknownTopicOrPartition.Description {
		t.Fatalf("unknown topic: %+v", d)
	}
	if d := r.Topics[2]; d.Topic != "u" || d.ErrorCode != kerr.UnknownTopicOrPartition.Code || *d.ErrorMessage != "There is no offset information to delete." {
		t.Fatalf("topic without offsets: %+v", d)
	}
	if want := []string{"g b 0", "g b 1"}; !slices.Equal(e.deleted, want) {
		t.Fatalf("deleted %v", e.deleted)
	}
	e.restart()
	if got := e.c.InitializedPartitions("g"); len(got) != 0 {
		t.Fatalf("initialized after delete: %v", got)
	}
	// A second delete finds nothing to delete.
	r = e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq("g", "t"))
	if len(r.Topics) != 1 || *r.Topics[0].ErrorMessage != "There is no offset information to delete." {
		t.Fatalf("second delete: %+v", r)
	}
	// The next member initializes the topic again from share.auto.offset.reset (-1).
	e.inits = nil
	e.join("g", "m2", "t")
	if want := []string{"g b 0 " + itoa(e.describeEpoch("g")) + " -1", "g b 1 " + itoa(e.describeEpoch("g")) + " -1"}; !slices.Equal(e.inits, want) {
		t.Fatalf("re-initialization %v, want %v", e.inits, want)
	}
}

func TestDeleteOffsetsFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	emptiedGroup(t, e)
	e.failDel = kerr.CoordinatorNotAvailable
	r := e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq("g", "t"))
	if len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("failed delete: %+v", r)
	}
	e.restart()
	// The topic stays deleting: a retry deletes every partition of it.
	e.failDel = nil
	r = e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq("g", "t"))
	if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || !slices.Equal(e.deleted, []string{"g b 0", "g b 1"}) {
		t.Fatalf("retry: %+v, deleted %v", r, e.deleted)
	}
	// And a group deletion also deletes what a failed offsets deletion left.
	emptiedGroup(t, e)
	e.deleted = nil
	e.failDel = kerr.CoordinatorNotAvailable
	e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq("g", "t"))
	e.failDel = nil
	if err := e.c.DeleteGroup(context.Background(), "g"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.deleted, []string{"g b 0", "g b 1"}) {
		t.Fatalf("group deletion deleted %v", e.deleted)
	}
}

// A group that never had share-partition state answers no topics at all (Kafka: no
// ShareGroupStatePartitionMetadata entry).
func TestDeleteOffsetsWithoutState(t *testing.T) {
	e := newEnv(t)
	if r := e.hb("g", "m1", 0, "absent"); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	e.hb("g", "m1", -1)
	e.setTopic("t", 1, 1)
	r := e.c.DeleteShareGroupOffsets(context.Background(), 0, deleteOffsetsReq("g", "t", "nope"))
	if r.ErrorCode != 0 || len(r.Topics) != 0 {
		t.Fatalf("response %+v", r)
	}
}

func TestListGroupsTrimsStates(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	e.join("g", "m1", "t")
	if ls := e.c.ListGroups([]string{" stable "}, nil); len(ls) != 1 {
		t.Fatalf("trimmed state filter: %+v", ls)
	}
	if ls := e.c.ListGroups(nil, []string{" share"}); len(ls) != 0 {
		t.Fatalf("untrimmed type filter matched: %+v", ls)
	}
}
