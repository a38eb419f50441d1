package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func jr(t *testing.T, p *pending) *kmsg.JoinGroupResponse {
	t.Helper()
	return p.get(t).(*kmsg.JoinGroupResponse)
}

func sr(t *testing.T, p *pending) *kmsg.SyncGroupResponse {
	t.Helper()
	return p.get(t).(*kmsg.SyncGroupResponse)
}

func (e *env) state(group string) string {
	d, _ := e.c.DescribeGroups(e.t.Context(), 5, &kmsg.DescribeGroupsRequest{Groups: []string{group}})
	return d.(*kmsg.DescribeGroupsResponse).Groups[0].State
}

// stableOne brings a one-member group to Stable and returns the member id.
func (e *env) stableOne(group string) string {
	e.t.Helper()
	j := jr(e.t, e.joinNew(group))
	if s := sr(e.t, e.sync(group, j.MemberID, j.Generation, map[string][]byte{j.MemberID: []byte("a")})); s.ErrorCode != 0 {
		e.t.Fatalf("sync: %d", s.ErrorCode)
	}
	return j.MemberID
}

// Empty → PreparingRebalance → CompletingRebalance → Stable, then a second member makes
// the group rebalance: the first member learns it from its heartbeat and rejoins.
func TestSecondMemberTriggersRebalance(t *testing.T) {
	e := newEnv(t, nil)
	m1 := e.stableOne("g")
	if st := e.state("g"); st != "Stable" {
		t.Fatalf("state %s", st)
	}
	p2 := e.joinNew("g")
	if p2.ready() {
		t.Fatal("second join answered before the first member rejoined")
	}
	if st := e.state("g"); st != "PreparingRebalance" {
		t.Fatalf("state %s", st)
	}
	if code := e.heartbeat("g", m1, 1); code != errRebalanceInProgress {
		t.Fatalf("heartbeat during rebalance: %d", code)
	}
	j1 := jr(t, e.join(5, joinReq("g", m1)))
	j2 := jr(t, p2)
	if j1.Generation != 2 || j2.Generation != 2 || j1.LeaderID != m1 || len(j1.Members) != 2 || len(j2.Members) != 0 {
		t.Fatalf("joins: %+v / %+v", j1, j2)
	}
	if st := e.state("g"); st != "CompletingRebalance" {
		t.Fatalf("state %s", st)
	}
	// Heartbeats are accepted while CompletingRebalance.
	if code := e.heartbeat("g", j2.MemberID, 2); code != 0 {
		t.Fatalf("heartbeat in CompletingRebalance: %d", code)
	}
	// A follower's SyncGroup waits for the leader's.
	f := e.sync("g", j2.MemberID, 2, nil)
	if f.ready() {
		t.Fatal("follower sync answered before the leader's")
	}
	l := sr(t, e.sync("g", m1, 2, map[string][]byte{m1: []byte("x"), j2.MemberID: []byte("y")}))
	if l.ErrorCode != 0 || string(l.MemberAssignment) != "x" || string(sr(t, f).MemberAssignment) != "y" {
		t.Fatalf("assignments: %+v", l)
	}
	if st := e.state("g"); st != "Stable" {
		t.Fatalf("state %s", st)
	}
	// Old generation is fenced.
	if code := e.heartbeat("g", m1, 1); code != errIllegalGeneration {
		t.Fatalf("stale heartbeat: %d", code)
	}
}

func TestMemberLeaves(t *testing.T) {
	e := newEnv(t, nil)
	m := e.stableOne("g")
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m
	unknown := kmsg.NewLeaveGroupRequestMember()
	unknown.MemberID = "nobody"
	lr.Members = []kmsg.LeaveGroupRequestMember{lm, unknown}
	resp, _ := e.c.LeaveGroup(t.Context(), 4, lr)
	r := resp.(*kmsg.LeaveGroupResponse)
	if r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != errUnknownMemberID {
		t.Fatalf("leave: %+v", r)
	}
	if st := e.state("g"); st != "Empty" {
		t.Fatalf("state %s", st)
	}
	// v0-v2 form: one member, error at top level.
	old := kmsg.NewPtrLeaveGroupRequest()
	old.Group, old.MemberID = "g", m
	resp, _ = e.c.LeaveGroup(t.Context(), 1, old)
	if code := resp.(*kmsg.LeaveGroupResponse).ErrorCode; code != errUnknownMemberID {
		t.Fatalf("v1 leave of a gone member: %d", code)
	}
}

func TestSessionTimeoutRemovesMember(t *testing.T) {
	e := newEnv(t, nil)
	m := e.stableOne("g")
	e.advance(9 * time.Second)
	if code := e.heartbeat("g", m, 1); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	e.advance(9 * time.Second) // 9s after the heartbeat: still inside the 10s session
	if st := e.state("g"); st != "Stable" {
		t.Fatalf("state %s", st)
	}
	e.advance(2 * time.Second)
	if st := e.state("g"); st != "Empty" {
		t.Fatalf("state after session timeout: %s", st)
	}
	if code := e.heartbeat("g", m, 1); code != errUnknownMemberID {
		t.Fatalf("heartbeat after expiry: %d", code)
	}
}

func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	e := newEnv(t, nil)
	m1 := e.stableOne("g")
	p2 := e.joinNew("g")
	// m1 keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins.
	for range 3 {
		e.advance(9 * time.Second)
		if code := e.heartbeat("g", m1, 1); code != errRebalanceInProgress {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	e.advance(4 * time.Second) // 31s > the 30s rebalance timeout
	j2 := jr(t, p2)
	if j2.ErrorCode != 0 || j2.Generation != 2 || j2.LeaderID != j2.MemberID || len(j2.Members) != 1 {
		t.Fatalf("join after rebalance timeout: %+v", j2)
	}
	if code := e.heartbeat("g", m1, 1); code != errUnknownMemberID {
		t.Fatalf("removed member heartbeat: %d", code)
	}
}

func TestSyncTimeoutRemovesMembersThatDoNotSync(t *testing.T) {
	e := newEnv(t, nil)
	j := jr(t, e.joinNew("g"))
	for range 3 { // heartbeats keep the session, but SyncGroup never comes
		e.advance(9 * time.Second)
		if code := e.heartbeat("g", j.MemberID, 1); code != 0 {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	e.advance(4 * time.Second)
	if st := e.state("g"); st != "Empty" {
		t.Fatalf("state after missing SyncGroup: %s", st)
	}
}

func TestStaticMemberRestartWithoutRebalance(t *testing.T) {
	e := newEnv(t, nil)
	static := func(member string) *kmsg.JoinGroupRequest {
		r := joinReq("g", member)
		r.InstanceID = strp("i1")
		return r
	}
	j := jr(t, e.join(5, static("")))
	if j.ErrorCode != 0 || j.Generation != 1 {
		t.Fatalf("static join: %+v", j)
	}
	sr(t, e.sync("g", j.MemberID, 1, map[string][]byte{j.MemberID: []byte("a")}))
	// Restart: same instance id, no member id, same metadata.
	j2 := jr(t, e.join(5, static("")))
	if j2.ErrorCode != 0 || j2.Generation != 1 || j2.MemberID == j.MemberID {
		t.Fatalf("static rejoin: %+v", j2)
	}
	if st := e.state("g"); st != "Stable" {
		t.Fatalf("state %s", st)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", j.MemberID, 1, strp("i1")
	resp, _ := e.c.Heartbeat(t.Context(), 4, hb)
	if code := resp.(*kmsg.HeartbeatResponse).ErrorCode; code != errFencedInstanceID {
		t.Fatalf("old static member id: %d, want FENCED_INSTANCE_ID", code)
	}
	s := sr(t, e.sync("g", j2.MemberID, 1, nil))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "a" {
		t.Fatalf("assignment kept: %+v", s)
	}
	// Replay keeps the new id.
	e.settle()
	e.restart()
	if code := e.heartbeat("g", j2.MemberID, 1); code != 0 {
		t.Fatalf("heartbeat after restart: %d", code)
	}
}

func TestLeaderRejoinForcesRebalance(t *testing.T) {
	e := newEnv(t, nil)
	m := e.stableOne("g")
	j := jr(t, e.join(5, joinReq("g", m)))
	if j.Generation != 2 || j.LeaderID != m {
		t.Fatalf("leader rejoin: %+v", j)
	}
	if st := e.state("g"); st != "CompletingRebalance" {
		t.Fatalf("state %s", st)
	}
}

func TestProtocolMismatch(t *testing.T) {
	e := newEnv(t, nil)
	e.stableOne("g") // protocols [range]
	r := jr(t, e.join(5, joinReq("g", "", "roundrobin")))
	if r.ErrorCode != errInconsistentProtocol {
		t.Fatalf("no common protocol: %d", r.ErrorCode)
	}
	other := joinReq("g", "")
	other.ProtocolType = "connect"
	if r := jr(t, e.join(5, other)); r.ErrorCode != errInconsistentProtocol {
		t.Fatalf("other protocol type: %d", r.ErrorCode)
	}
	empty := joinReq("h", "")
	empty.Protocols = nil
	if r := jr(t, e.join(5, empty)); r.ErrorCode != errInconsistentProtocol {
		t.Fatalf("no protocols: %d", r.ErrorCode)
	}
}

func TestProtocolSelectionByVotes(t *testing.T) {
	e := newEnv(t, nil)
	m1 := e.stableOne("g") // [range]
	p2 := e.joinNew("g", "roundrobin", "range")
	j1 := jr(t, e.join(5, joinReq("g", m1, "range")))
	jr(t, p2)
	if *j1.Protocol != "range" {
		t.Fatalf("selected %s", *j1.Protocol)
	}
}

func TestJoinValidation(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxGroupSize = 1 })
	bad := joinReq("g", "")
	bad.SessionTimeoutMillis = 10
	if r := jr(t, e.join(5, bad)); r.ErrorCode != errInvalidSessionTimeout {
		t.Fatalf("session timeout: %d", r.ErrorCode)
	}
	if r := jr(t, e.join(5, joinReq("", ""))); r.ErrorCode != errInvalidGroupID {
		t.Fatalf("empty group: %d", r.ErrorCode)
	}
	if r := jr(t, e.join(5, joinReq("nogroup", "someone"))); r.ErrorCode != errUnknownMemberID {
		t.Fatalf("unknown member of missing group: %d", r.ErrorCode)
	}
	e.stableOne("g")
	if r := jr(t, e.join(5, joinReq("g", ""))); r.ErrorCode != errGroupMaxSizeReached {
		t.Fatalf("max size: %d", r.ErrorCode)
	}
	if s := sr(t, e.sync("g", "nobody", 1, nil)); s.ErrorCode != errUnknownMemberID {
		t.Fatalf("sync unknown member: %d", s.ErrorCode)
	}
}

func TestJoinV3WithoutMemberIDJoinsAtOnce(t *testing.T) {
	e := newEnv(t, nil)
	j := jr(t, e.join(3, joinReq("g", "")))
	if j.ErrorCode != 0 || j.Generation != 1 || j.MemberID == "" {
		t.Fatalf("v3 join: %+v", j)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InitialRebalanceDelayMs = 3000 })
	p1 := e.joinNew("g")
	e.advance(2 * time.Second)
	p2 := e.joinNew("g") // extends the delay
	e.advance(1500 * time.Millisecond)
	if p1.ready() || p2.ready() {
		t.Fatal("join completed before the extended initial delay")
	}
	e.advance(3 * time.Second)
	j1, j2 := jr(t, p1), jr(t, p2)
	if j1.Generation != 1 || j2.Generation != 1 {
		t.Fatalf("generations %d %d", j1.Generation, j2.Generation)
	}
}
