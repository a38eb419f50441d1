package sharegroup

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
