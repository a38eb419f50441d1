package sharegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinInitializesThenAssigns(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 3)
	r := e.join("g", "m1", "t")
	if r.MemberEpoch != 1 || r.Assignment == nil || len(r.Assignment.TopicPartitions) != 0 {
		t.Fatalf("first join: epoch %d assignment %+v, want epoch 1 and an empty assignment", r.MemberEpoch, r.Assignment)
	}
	if r.HeartbeatIntervalMillis != 5000 || r.MemberID == nil || *r.MemberID != "m1" {
		t.Fatalf("first join: %+v", r)
	}
	if len(e.inits) != 3 || e.inits[0] != "g b 0 1 -1" {
		t.Fatalf("initializations %v, want partitions 0-2 of a new topic at state epoch 1, start -1", e.inits)
	}
	r = e.hb("g", "m1", 1)
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || r.Assignment == nil {
		t.Fatalf("second heartbeat: %+v, want epoch 2 with the assignment", r)
	}
	if got := e.assigned("g", "m1"); !got.equal(Assignment{tid(1): {0, 1, 2}}) {
		t.Fatalf("assignment %v", got)
	}
	r = e.hb("g", "m1", 2)
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || r.Assignment != nil {
		t.Fatalf("steady heartbeat: %+v, want epoch 2 and no assignment", r)
	}
}

func TestLeaveWithEpochMinusOne(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 2)
	e.join("g", "m1", "t")
	r := e.hb("g", "m1", -1)
	if r.ErrorCode != 0 || r.MemberEpoch != -1 || *r.MemberID != "m1" {
		t.Fatalf("leave: %+v", r)
	}
	if len(e.removed) != 1 || e.removed[0] != (memberRef{"g", "m1"}) {
		t.Fatalf("removed callbacks %v", e.removed)
	}
	if r := e.hb("g", "m1", 1); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after leave: error %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
	}
	if !e.c.Exists("g") {
		t.Fatal("an empty share group still exists")
	}
	d := e.c.ShareGroupDescribe(nil, 1, describeReq("g"))
	if d.Groups[0].GroupState != StateEmpty {
		t.Fatalf("state %q", d.Groups[0].GroupState)
	}
}

func TestSessionExpiryOnFakeClock(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 2)
	e.join("g", "m1", "t")
	e.advance(44 * time.Second)
	e.c.Tick()
	if len(e.removed) != 0 {
		t.Fatal("member expired before its session timeout")
	}
	e.hb("g", "m1", 1) // renews the session
	e.advance(44 * time.Second)
	e.c.Tick()
	if len(e.removed) != 0 {
		t.Fatal("heartbeat did not renew the session")
	}
	e.advance(time.Second)
	e.c.Tick()
	if len(e.removed) != 1 {
		t.Fatalf("member not fenced after 45s without heartbeat: %v", e.removed)
	}
	if r := e.hb("g", "m1", 2); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after expiry: %d", r.ErrorCode)
	}
}

func TestFencedMemberEpochs(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 2)
	e.join("g", "m1", "t") // epoch 1
	if r := e.hb("g", "m1", 1); r.MemberEpoch != 2 {
		t.Fatalf("epoch %d, want 2", r.MemberEpoch)
	}
	// Ahead of the coordinator: fenced.
	if r := e.hb("g", "m1", 3); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch 3: error %d, want FENCED_MEMBER_EPOCH", r.ErrorCode)
	}
	// The previous epoch is accepted (the bump's response may have been lost).
	if r := e.hb("g", "m1", 1); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch: %+v", r)
	}
	e.join("g", "m2", "t") // bumps the group, m1 moves to a new epoch
	r := e.hb("g", "m1", 2)
	if r.ErrorCode != 0 || r.MemberEpoch <= 2 {
		t.Fatalf("m1 after m2 joined: %+v", r)
	}
	// Older than the previous epoch: fenced.
	if r := e.hb("g", "m1", 1); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch: error %d", r.ErrorCode)
	}
	// Epoch 0 is never fenced: the member rejoins and keeps its id.
	if r := e.hb("g", "m1", 0, "t"); r.ErrorCode != 0 || r.Assignment == nil {
		t.Fatalf("rejoin: %+v", r)
	}
}

func TestUnknownMemberAndGroup(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	if r := e.hb("nope", "m1", 3); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", r.ErrorCode)
	}
	e.join("g", "m1", "t")
	if r := e.hb("g", "m2", 1); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", r.ErrorCode)
	}
	if r := e.hb("g", "m2", -1); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member leaving: %d", r.ErrorCode)
	}
	if r := e.hb("nope", "m2", -1); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("leave of unknown group: %d", r.ErrorCode)
	}
}

func TestInvalidRequests(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	empty := ""
	for name, req := range map[string]func() *kmsg.ShareGroupHeartbeatRequest{
		"empty member id":     func() *kmsg.ShareGroupHeartbeatRequest { return hbReq("g", "", 0, "t") },
		"long member id":      func() *kmsg.ShareGroupHeartbeatRequest { return hbReq("g", strings.Repeat("x", 37), 0, "t") },
		"empty group id":      func() *kmsg.ShareGroupHeartbeatRequest { return hbReq("", "m", 0, "t") },
		"join without topics": func() *kmsg.ShareGroupHeartbeatRequest { return hbReq("g", "m", 0) },
		"epoch below -1":      func() *kmsg.ShareGroupHeartbeatRequest { return hbReq("g", "m", -2, "t") },
		"empty rack": func() *kmsg.ShareGroupHeartbeatRequest {
			r := hbReq("g", "m", 0, "t")
			r.RackID = &empty
			return r
		},
	} {
		if r := e.c.ShareGroupHeartbeat(context.Background(), 1, req()); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("%s: error %d, want INVALID_REQUEST", name, r.ErrorCode)
		}
	}
	if r := e.c.ShareGroupHeartbeat(context.Background(), 0, hbReq("g", "m", 0, "t")); r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("v0: error %d, want UNSUPPORTED_VERSION", r.ErrorCode)
	}
	if e.c.Exists("g") {
		t.Fatal("a rejected request created the group")
	}
}

func TestOtherGroupTypeIsNotFound(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	e.other["classic"] = true
	if r := e.hb("classic", "m1", 0, "t"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat to a classic group: %d", r.ErrorCode)
	}
	d := e.c.ShareGroupDescribe(context.Background(), 1, describeReq("classic", "missing", ""))
	for i, want := range []int16{kerr.GroupIDNotFound.Code, kerr.GroupIDNotFound.Code, kerr.InvalidGroupID.Code} {
		if d.Groups[i].ErrorCode != want {
			t.Fatalf("describe %q: error %d, want %d", d.Groups[i].GroupID, d.Groups[i].ErrorCode, want)
		}
	}
}

func TestGroupMaxSize(t *testing.T) {
	e := newEnv(t)
	e.c.Close()
	cfg := e.cfg()
	cfg.MaxSize = 2
	c, err := New(cfg, []coordlog.Partition{e.log})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	e.setTopic("t", 1, 4)
	e.join("g", "m1", "t")
	e.join("g", "m2", "t")
	if r := e.hb("g", "m3", 0, "t"); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member: %d, want GROUP_MAX_SIZE_REACHED", r.ErrorCode)
	}
	// A member already in the group may rejoin.
	if r := e.hb("g", "m2", 0, "t"); r.ErrorCode != 0 {
		t.Fatalf("rejoin at max size: %d", r.ErrorCode)
	}
	e.hb("g", "m1", -1)
	if r := e.hb("g", "m3", 0, "t"); r.ErrorCode != 0 {
		t.Fatalf("join after a leave: %d", r.ErrorCode)
	}
}

func TestSubscriptionChangeRecomputesTarget(t *testing.T) {
	e := newEnv(t)
	e.setTopic("a", 1, 2)
	e.setTopic("b", 2, 2)
	e.join("g", "m1", "a")
	ep := map[string]int32{"m1": 1}
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); !got.equal(Assignment{tid(1): {0, 1}}) {
		t.Fatalf("assignment %v", got)
	}
	r := e.hb("g", "m1", ep["m1"], "b")
	if r.Assignment == nil || r.MemberEpoch <= ep["m1"] {
		t.Fatalf("subscription change: %+v", r)
	}
	if got := e.assigned("g", "m1"); got.count() != 0 {
		t.Fatalf("after switching to an uninitialized topic: %v", got)
	}
	ep["m1"] = r.MemberEpoch
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); !got.equal(Assignment{tid(2): {0, 1}}) {
		t.Fatalf("after initialization of b: %v", got)
	}
}

func TestTwoMembersSplitThenShare(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	e.join("g", "m1", "t")
	e.join("g", "m2", "t")
	ep := map[string]int32{"m1": 1, "m2": 0}
	ep["m2"] = e.hb("g", "m2", 0, "t").MemberEpoch
	e.settle("g", ep)
	// One partition, two members: both hold it (desired sharing 2).
	for _, m := range []string{"m1", "m2"} {
		if !e.c.Owns("g", m, tid(1), 0) {
			t.Fatalf("%s does not own t-0: %v", m, e.assigned("g", m))
		}
	}
}

func TestTopicPartitionIncrease(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 2)
	e.join("g", "m1", "t")
	ep := map[string]int32{"m1": 1}
	e.settle("g", ep)
	e.inits = nil
	e.setTopic("t", 1, 4)
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); !got.equal(Assignment{tid(1): {0, 1, 2, 3}}) {
		t.Fatalf("after growing to 4 partitions: %v", got)
	}
	// New partitions of a known topic start at offset 0 so nothing produced meanwhile
	// is skipped.
	if len(e.inits) != 2 || !strings.HasSuffix(e.inits[0], " 0") {
		t.Fatalf("initializations %v, want partitions 2 and 3 from offset 0", e.inits)
	}
}

func TestTopicDeletion(t *testing.T) {
	e := newEnv(t)
	e.setTopic("a", 1, 2)
	e.setTopic("b", 2, 1)
	e.join("g", "m1", "a", "b")
	ep := map[string]int32{"m1": 1}
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); got.count() != 3 {
		t.Fatalf("assignment %v", got)
	}
	before := ep["m1"]
	e.delTopic("b")
	r := e.hb("g", "m1", ep["m1"])
	if r.MemberEpoch <= before || r.Assignment == nil {
		t.Fatalf("topic deletion did not bump: %+v", r)
	}
	if got := e.assigned("g", "m1"); !got.equal(Assignment{tid(1): {0, 1}}) {
		t.Fatalf("after deleting b: %v", got)
	}
	// Recreated under the same name with a new id: initialized afresh, then assigned.
	e.setTopic("b", 3, 1)
	ep["m1"] = r.MemberEpoch
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); !got.equal(Assignment{tid(1): {0, 1}, tid(3): {0}}) {
		t.Fatalf("after recreating b: %v", got)
	}
}

func TestInitializationFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	e.failInit = true
	e.join("g", "m1", "t")
	ep := map[string]int32{"m1": 1}
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); got.count() != 0 {
		t.Fatalf("assigned an uninitialized partition: %v", got)
	}
	e.failInit = false
	e.settle("g", ep)
	if got := e.assigned("g", "m1"); got.count() != 1 {
		t.Fatalf("not assigned after the retry: %v", got)
	}
}

func TestDescribeAndList(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 2)
	rack := "r1"
	req := hbReq("g", "m1", 0, "t")
	req.RackID = &rack
	e.c.ShareGroupHeartbeat(WithClient(context.Background(), "client-1", "/10.0.0.1"), 1, req)
	ep := map[string]int32{"m1": 1}
	e.settle("g", ep)
	d := e.c.ShareGroupDescribe(context.Background(), 1, describeReq("g"))
	g := d.Groups[0]
	if g.ErrorCode != 0 || g.GroupState != StateStable || g.Assignor != "simple" || g.GroupEpoch != ep["m1"] || g.AssignmentEpoch != ep["m1"] {
		t.Fatalf("describe: %+v", g)
	}
	m := g.Members[0]
	if m.MemberID != "m1" || *m.RackID != "r1" || m.ClientID != "cl" || m.MemberEpoch != ep["m1"] ||
		len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "t" {
		t.Fatalf("member: %+v", m)
	}
	if g.AuthorizedOperations != -2147483648 {
		t.Fatalf("authorized operations %d", g.AuthorizedOperations)
	}
	ls := e.c.ListGroups(nil, nil)
	if len(ls) != 1 || ls[0].Group != "g" || ls[0].GroupType != "share" || ls[0].ProtocolType != "share" || ls[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", ls)
	}
	if ls := e.c.ListGroups([]string{"empty"}, nil); len(ls) != 0 {
		t.Fatalf("state filter: %+v", ls)
	}
	if ls := e.c.ListGroups(nil, []string{"classic"}); len(ls) != 0 {
		t.Fatalf("type filter: %+v", ls)
	}
	if ls := e.c.ListGroups([]string{"STABLE"}, []string{"Share"}); len(ls) != 1 {
		t.Fatalf("case-insensitive filters: %+v", ls)
	}
}

func TestDeleteGroup(t *testing.T) {
	e := newEnv(t)
	var deleted []string
	e.c.Close()
	cfg := e.cfg()
	cfg.DeleteShareState = func(_ context.Context, g string, id [16]byte, p int32) error {
		deleted = append(deleted, g+" "+itoa(int32(id[0]))+" "+itoa(p))
		return nil
	}
	c, err := New(cfg, []coordlog.Partition{e.log})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	e.setTopic("t", 1, 2)
	if err := e.c.DeleteGroup(context.Background(), "g"); err != kerr.GroupIDNotFound {
		t.Fatalf("missing group: %v", err)
	}
	e.join("g", "m1", "t")
	if err := e.c.DeleteGroup(context.Background(), "g"); err != kerr.NonEmptyGroup {
		t.Fatalf("non-empty group: %v", err)
	}
	e.hb("g", "m1", -1)
	if err := e.c.DeleteGroup(context.Background(), "g"); err != nil {
		t.Fatal(err)
	}
	if e.c.Exists("g") || len(deleted) != 2 {
		t.Fatalf("exists %v, deleted share state %v", e.c.Exists("g"), deleted)
	}
	e.restart()
	if e.c.Exists("g") {
		t.Fatal("deleted group back after restart")
	}
	// The id is free for a new group.
	if r := e.hb("g", "m9", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("new group under the old id: %+v", r)
	}
}

func TestAppendFailureStopsServing(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	e.log.FailAppend = context.DeadlineExceeded
	if r := e.hb("g", "m1", 0, "t"); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("failed append: error %d", r.ErrorCode)
	}
	if e.c.Exists("g") {
		t.Fatal("memory holds a group the log lacks")
	}
	if r := e.hb("g", "m1", 0, "t"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("after a failed append: error %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	e.restart()
	if r := e.hb("g", "m1", 0, "t"); r.ErrorCode != 0 {
		t.Fatalf("after reload: error %d", r.ErrorCode)
	}
}

func TestWrongPartitionIsNotCoordinator(t *testing.T) {
	e := newEnv(t)
	e.c.Close()
	cfg := e.cfg()
	cfg.NumPartitions = 50
	c, err := New(cfg, []coordlog.Partition{e.log}) // owns partition 0 only
	if err != nil {
		t.Fatal(err)
	}
	g := "group-a"
	for c.PartitionFor(g) == 0 {
		g += "x"
	}
	if r := c.ShareGroupHeartbeat(context.Background(), 1, hbReq(g, "m", 0, "t")); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("error %d", r.ErrorCode)
	}
	if c.PartitionFor("share-group") != javaMod("share-group", 50) {
		t.Fatal("partition choice differs from Java's")
	}
}

// javaMod is Utils.abs(s.hashCode()) % n written out again, for the test.
func javaMod(s string, n int32) int32 {
	var h int32
	for _, r := range s {
		h = 31*h + int32(r)
	}
	if h < 0 {
		h = -h
	}
	return h % n
}

func hbReq(groupID, memberID string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = groupID, memberID, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return req
}

// KIP-1289 staging checks the member with its exact epoch (decision D7).
func TestCheckMemberForTransactionalAcks(t *testing.T) {
	e := newEnv(t)
	e.setTopic("t", 1, 1)
	e.join("g", "m1", "t")
	r := e.hb("g", "m1", 1)
	cases := []struct {
		member string
		epoch  int32
		want   int16
	}{
		{"m1", r.MemberEpoch, 0},
		{"m1", r.MemberEpoch - 1, kerr.FencedMemberEpoch.Code},
		{"m1", r.MemberEpoch + 1, kerr.FencedMemberEpoch.Code},
		{"nobody", 1, kerr.UnknownMemberID.Code},
	}
	for _, c := range cases {
		if got := e.c.CheckMember("g", c.member, c.epoch); got != c.want {
			t.Errorf("CheckMember(%s, %d) = %d, want %d", c.member, c.epoch, got, c.want)
		}
	}
	if got := e.c.CheckMember("no-group", "m1", 1); got != kerr.UnknownMemberID.Code {
		t.Errorf("unknown group: %d", got)
	}
}
