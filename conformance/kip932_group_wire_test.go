package conformance

// KIP-932 table 7.1, rows 21-29: ShareGroupHeartbeat and ShareGroupDescribe over the wire,
// ported from Kafka 4.4's ShareGroupHeartbeatRequestTest (SGH) and
// ShareGroupDescribeRequestTest (SGD), with assignment batching off
// (group.share.assignment.interval.ms=0, SGH's WithAssignmentBatchingDisabledTest).
//
// Member epochs are asserted exactly. exactq's group epoch moves exactly as Kafka's does
// (one bump per join, leave, subscription or metadata change, and one when new share
// partitions finish initializing), except that Kafka's first join already answers epoch 2
// where exactq answers 1, so every epoch below is Kafka's minus one (kip-932.md 3.1:
// clients treat epochs as opaque; a Go broker need not reproduce the numbers).

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const sghGroup = "grp"

// wantEpoch fails unless the heartbeat succeeded with member epoch want.
func wantEpoch(t testing.TB, what string, r *kmsg.ShareGroupHeartbeatResponse, want int32) {
	t.Helper()
	wantCode(t, what, r.ErrorCode, nil)
	if r.MemberEpoch != want {
		t.Fatalf("%s: member epoch %d, want %d", what, r.MemberEpoch, want)
	}
}

// wantJoined checks a first join: NONE, the member id echoed, epoch want and an empty
// (not null) assignment.
func wantJoined(t testing.TB, r *kmsg.ShareGroupHeartbeatResponse, member string, want int32) {
	t.Helper()
	wantEpoch(t, "join", r, want)
	if r.MemberID == nil || *r.MemberID != member {
		t.Fatalf("join: member id %v, want %s", r.MemberID, member)
	}
	if r.Assignment == nil || len(r.Assignment.TopicPartitions) != 0 {
		t.Fatalf("join: assignment %+v, want empty", r.Assignment)
	}
}

// sghMember is one member after SGH's usual start (joinThenAssign).
type sghMember struct {
	c     *wireConn
	id    string
	foo   [16]byte // the topic id of foo
	all   assignment
	epoch int32
}

// joinThenAssign is SGH's usual start: a member joins group subscribed to foo, which
// does not exist yet (epoch 1, Kafka 2, empty assignment); foo is created with n
// partitions; the member heartbeats until it holds all of them, at epoch 3 (Kafka 4): one
// bump for foo's metadata, one when its share partitions are initialized.
func joinThenAssign(t testing.TB, e *env, group string, n int32) *sghMember {
	t.Helper()
	m := &sghMember{c: e.dial(), id: newMemberID()}
	wantJoined(t, m.c.join(group, m.id, []string{"foo"}), m.id, 1)
	m.foo = e.createTopic("foo", n)
	m.all = assignment{m.foo: {}}
	for p := range n {
		m.all[m.foo] = append(m.all[m.foo], p)
	}
	r := m.c.heartbeatUntil(group, m.id, 1, fmt.Sprintf("foo's %d partitions assigned", n), func(r *kmsg.ShareGroupHeartbeatResponse) bool {
		return assignmentOf(r).equal(m.all)
	})
	wantEpoch(t, "foo assigned", r, 3)
	m.epoch = r.MemberEpoch
	return m
}

// Row 21: "Join succeeds with an empty assignment; all 3 partitions assigned later; the
// leave response has MemberEpoch -1" for a member that joins subscribed to a missing
// topic, which is then created with 3 partitions (SGH
// testShareGroupHeartbeatIsAccessibleWhenShareGroupIsEnabled).
func TestShareGroupHeartbeatIsAccessibleWhenShareGroupIsEnabled_7_1_21(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	m := joinThenAssign(t, e, sghGroup, 3)
	if r := m.c.heartbeat(sghGroup, m.id, m.epoch, nil); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("HeartbeatIntervalMs %d, want group.share.heartbeat.interval.ms's default 5000", r.HeartbeatIntervalMillis)
	}
	r := m.c.heartbeat(sghGroup, m.id, -1, nil)
	wantEpoch(t, "leave", r, -1)
	if r.MemberID == nil || *r.MemberID != m.id {
		t.Fatalf("leave: member id %v, want %s", r.MemberID, m.id)
	}
}

// Row 22: "Union of assignments = {0,1,2}; the assignment does not change on steady
// heartbeats" for two members and a 3-partition topic (SGH
// testShareGroupHeartbeatWithMultipleMembers). The simple assignor shares nothing while
// there are more partitions than members: the two assignments are disjoint.
func TestShareGroupHeartbeatWithMultipleMembers_7_1_22(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.dial()
	m1, m2 := newMemberID(), newMemberID()
	wantJoined(t, c.join(sghGroup, m1, []string{"foo"}), m1, 1) // Kafka: 2
	wantJoined(t, c.join(sghGroup, m2, []string{"foo"}), m2, 2) // Kafka: 3
	foo := e.createTopic("foo", 3)
	members := []string{m1, m2}
	epochs := map[string]int32{m1: 1, m2: 2}
	assigned := map[string][]int32{}
	eventually(t, "foo 0-2 assigned across both members", func() (bool, string) {
		for _, m := range members {
			r := c.heartbeat(sghGroup, m, epochs[m], nil)
			wantCode(t, "heartbeat", r.ErrorCode, nil)
			epochs[m] = r.MemberEpoch
			if a := assignmentOf(r); a != nil {
				assigned[m] = a.partitions(foo)
			}
		}
		return len(assigned[m1]) > 0 && len(assigned[m2]) > 0 && len(assigned[m1])+len(assigned[m2]) == 3, fmt.Sprint(assigned, epochs)
	})
	union := slices.Sorted(slices.Values(append(slices.Clone(assigned[m1]), assigned[m2]...)))
	if !slices.Equal(union, []int32{0, 1, 2}) {
		t.Fatalf("assignments %v, want a disjoint split of 0-2", assigned)
	}
	for _, m := range members {
		if epochs[m] != 4 { // Kafka: 5
			t.Fatalf("member epochs %v once assigned, want 4 for both", epochs)
		}
	}
	// Steady heartbeats: the same epoch and no assignment (nothing changed).
	for range 3 {
		for _, m := range members {
			r := c.heartbeat(sghGroup, m, epochs[m], nil)
			wantEpoch(t, "steady heartbeat", r, 4)
			if r.Assignment != nil {
				t.Fatalf("steady heartbeat of %s carries assignment %v", m, assignmentOf(r))
			}
		}
	}
	d := c.describe(false, sghGroup)
	for _, dm := range d.Groups[0].Members {
		var got []int32
		for _, tp := range dm.Assignment.TopicPartitions {
			got = append(got, tp.Partitions...)
		}
		if !slices.Equal(got, assigned[dm.MemberID]) {
			t.Fatalf("describe: %s holds %v, heartbeats said %v", dm.MemberID, got, assigned[dm.MemberID])
		}
	}
}

// Row 23: "Rejoin succeeds; same memberId; same assignment" for a member that leaves
// (epoch -1) and rejoins with its member id at epoch 0 (SGH testMemberLeavingAndRejoining).
func TestMemberLeavingAndRejoining_7_1_23(t *testing.T) {
	t.Parallel()
	m := joinThenAssign(t, newEnv(t, nil), sghGroup, 2)
	wantEpoch(t, "leave", m.c.heartbeat(sghGroup, m.id, -1, nil), -1)
	r := m.c.heartbeat(sghGroup, m.id, 0, []string{"foo"})
	wantEpoch(t, "rejoin", r, 5) // the leave and the rejoin bump the group; Kafka: 6
	if r.MemberID == nil || *r.MemberID != m.id {
		t.Fatalf("rejoin: member id %v, want %s", r.MemberID, m.id)
	}
	if got := assignmentOf(r); !got.equal(m.all) {
		t.Fatalf("rejoin: assignment %v, want %v", got, m.all)
	}
}

// Row 24: "The assignment follows; partitions of a deleted topic are filtered out" while
// subscribed topics are created, repartitioned and deleted (SGH
// testPartitionAssignmentWithChangingTopics).
func TestPartitionAssignmentWithChangingTopics_7_1_24(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.dial()
	m := newMemberID()
	wantJoined(t, c.join(sghGroup, m, []string{"foo", "bar", "baz"}), m, 1) // Kafka: 2
	epoch := int32(1)
	// step heartbeats until the assignment is want and checks the epoch it came with.
	step := func(what string, want assignment, wantEpochAfter int32) {
		t.Helper()
		r := c.heartbeatUntil(sghGroup, m, epoch, what, func(r *kmsg.ShareGroupHeartbeatResponse) bool {
			return assignmentOf(r).equal(want)
		})
		wantEpoch(t, what, r, wantEpochAfter)
		epoch = r.MemberEpoch
	}
	foo := e.createTopic("foo", 2)
	bar := e.createTopic("bar", 3)
	step("foo and bar assigned", assignment{foo: {0, 1}, bar: {0, 1, 2}}, 3) // Kafka: 4
	baz := e.createTopic("baz", 4)
	step("baz assigned", assignment{foo: {0, 1}, bar: {0, 1, 2}, baz: {0, 1, 2, 3}}, 5) // Kafka: 6
	if resp, err := e.adm.UpdatePartitions(e.ctx(), 6, "bar"); err != nil || resp["bar"].Err != nil {
		t.Fatalf("grow bar to 6 partitions: %v %v", err, resp["bar"].Err)
	}
	step("bar 3-5 assigned", assignment{foo: {0, 1}, bar: {0, 1, 2, 3, 4, 5}, baz: {0, 1, 2, 3}}, 7) // Kafka: 8
	if resp, err := e.adm.DeleteTopic(e.ctx(), "foo"); err != nil || resp.Err != nil {
		t.Fatalf("delete foo: %v %v", err, resp.Err)
	}
	// Nothing to initialize: one bump for the metadata change.
	step("foo filtered out", assignment{bar: {0, 1, 2, 3, 4, 5}, baz: {0, 1, 2, 3}}, 8) // Kafka: 9
}

// Row 25: "GROUP_MAX_SIZE_REACHED" for a member beyond group.share.max.size=2 (SGH
// testShareGroupMaxSizeConfigExceeded; SC testShareGroupMaxSizeConfigExceeded). Members
// already in the group can still rejoin.
func TestShareGroupMaxSizeConfigExceeded_7_1_25(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"group.share.max.size": "2"})
	c := e.dial()
	m1, m2, m3 := newMemberID(), newMemberID(), newMemberID()
	wantJoined(t, c.join(sghGroup, m1, []string{"foo"}), m1, 1)
	wantJoined(t, c.join(sghGroup, m2, []string{"foo"}), m2, 2)
	wantCode(t, "third member joins", c.heartbeat(sghGroup, m3, 0, []string{"foo"}).ErrorCode, kerr.GroupMaxSizeReached)
	wantEpoch(t, "a member rejoins the full group", c.heartbeat(sghGroup, m1, 0, []string{"foo"}), 2)
}

// Row 26: "Member fenced; rejoin with epoch 0 gets a higher epoch" for a member that stops
// heartbeating past the session timeout (SGH testMemberJoiningAndExpiring, with
// group.share.session.timeout.ms=1000: the member's silence is the thing under test, so
// the test sleeps past it).
func TestMemberJoiningAndExpiring_7_1_26(t *testing.T) {
	t.Parallel()
	const sessionMs = 1000
	e := newEnv(t, map[string]string{
		"group.share.session.timeout.ms":        fmt.Sprint(sessionMs),
		"group.share.min.session.timeout.ms":    fmt.Sprint(sessionMs),
		"group.share.heartbeat.interval.ms":     "200",
		"group.share.min.heartbeat.interval.ms": "200",
	})
	sm := joinThenAssign(t, e, sghGroup, 2)
	c, m := sm.c, sm.id
	// A full heartbeat subscribing to bar too; bar then appears.
	r := c.heartbeat(sghGroup, m, sm.epoch, []string{"foo", "bar"})
	wantCode(t, "subscribe to bar", r.ErrorCode, nil)
	bar := e.createTopic("bar", 1)
	want := assignment{sm.foo: {0, 1}, bar: {0}}
	r = c.heartbeatUntil(sghGroup, m, r.MemberEpoch, "foo and bar assigned", func(r *kmsg.ShareGroupHeartbeatResponse) bool {
		return assignmentOf(r).equal(want)
	})
	// Bumps: the new subscription, bar's metadata, bar's initialization.
	const assignedEpoch = 6 // Kafka: 7
	wantEpoch(t, "foo and bar assigned", r, assignedEpoch)
	wantEpoch(t, "steady heartbeat", c.heartbeat(sghGroup, m, assignedEpoch, nil), assignedEpoch)

	// No heartbeat for the session timeout: the coordinator fences the member, which then
	// leaves the group's description (a describe does not renew the session).
	eventually(t, "the member fenced after its session timeout", func() (bool, string) {
		for _, g := range c.describe(false, sghGroup).Groups {
			for _, mm := range g.Members {
				if mm.MemberID == m {
					return false, "member " + m + " still in the group"
				}
			}
		}
		return true, ""
	})
	wantCode(t, "heartbeat after the session timeout", c.heartbeat(sghGroup, m, assignedEpoch, nil).ErrorCode, kerr.UnknownMemberID)
	r = c.heartbeat(sghGroup, m, 0, []string{"foo", "bar"})
	// Bumps: the fencing, the rejoin.
	wantEpoch(t, "rejoin", r, assignedEpoch+2)
	if !assignmentOf(r).equal(want) {
		t.Fatalf("rejoin: assignment %v, want %v", assignmentOf(r), want)
	}
}

// Row 27: "Success" for a fenced member that rejoins with epoch 0: a heartbeat at an
// epoch the coordinator never gave is FENCED_MEMBER_EPOCH, and the member's epoch-0
// rejoin then answers its current epoch, id and full assignment (SGH
// testFencedMemberCanRejoinWithEpochZero).
func TestFencedMemberCanRejoinWithEpochZero_7_1_27(t *testing.T) {
	t.Parallel()
	const group = "test-fenced-rejoin-grp"
	m := joinThenAssign(t, newEnv(t, nil), group, 3)
	wantCode(t, "heartbeat at a future epoch", m.c.heartbeat(group, m.id, m.epoch+10, nil).ErrorCode, kerr.FencedMemberEpoch)
	r := m.c.heartbeat(group, m.id, 0, []string{"foo"})
	wantEpoch(t, "rejoin", r, m.epoch)
	if r.MemberID == nil || *r.MemberID != m.id || !assignmentOf(r).equal(m.all) {
		t.Fatalf("rejoin: member %v assignment %v, want %s and %v", r.MemberID, assignmentOf(r), m.id, m.all)
	}
}

// Row 28 (adapted): "Members rejoin and assignment is restored" when the group
// coordinator moves (SGH testGroupCoordinatorChange). A single node's coordinator cannot
// move; it reloads the group from __consumer_offsets when the broker restarts, so the
// broker is restarted: the member's next heartbeat at its epoch succeeds with the same
// epoch and no assignment (nothing changed), and ShareGroupDescribe shows the assignment
// restored.
func TestGroupCoordinatorChange_7_1_28(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	m := joinThenAssign(t, e, sghGroup, 2)
	e.tb.Restart()
	c := e.dial()
	var after *kmsg.ShareGroupHeartbeatResponse
	eventually(t, "heartbeat after the restart", func() (bool, string) {
		after = c.heartbeat(sghGroup, m.id, m.epoch, nil)
		return after.ErrorCode == 0, fmt.Sprint(kerr.ErrorForCode(after.ErrorCode))
	})
	wantEpoch(t, "heartbeat after the restart", after, 3)
	if after.Assignment != nil {
		t.Fatalf("heartbeat after the restart carries assignment %v, want none (unchanged)", assignmentOf(after))
	}
	d := c.describe(false, sghGroup).Groups[0]
	if d.ErrorCode != 0 || len(d.Members) != 1 || d.Members[0].MemberEpoch != 3 {
		t.Fatalf("describe after the restart: %+v", d)
	}
	tps := d.Members[0].Assignment.TopicPartitions
	if len(tps) != 1 || tps[0].TopicID != m.foo || tps[0].Topic != "foo" || !slices.Equal(tps[0].Partitions, []int32{0, 1}) {
		t.Fatalf("assignment after the restart: %+v, want foo 0-1", tps)
	}
}

// Row 29: "State, epochs, assignor "simple", member info, assignment with topic names"
// from ShareGroupDescribe (SGD testShareGroupDescribe): a group whose member is
// subscribed to a missing topic, a group whose member holds foo's 3 partitions, and an
// unknown group (GROUP_ID_NOT_FOUND). With IncludeAuthorizedOperations and no authorizer,
// Kafka answers every GROUP operation (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS); without it, INT32_MIN.
func TestShareGroupDescribe_7_1_29(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	foo := e.createTopic("foo", 3)
	c := e.dial()
	m1, m2 := newMemberID(), newMemberID()
	wantJoined(t, c.join("grp-1", m1, []string{"bar"}), m1, 1) // Kafka: 2
	r := c.joinUntilAssigned("grp-2", m2, []string{"foo"}, assignment{foo: {0, 1, 2}})
	wantEpoch(t, "grp-2 assigned", r, 2)

	const allGroupOps = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11
	for _, include := range []bool{true, false} {
		d := c.describe(include, "grp-1", "grp-2", "grp-3")
		if len(d.Groups) != 3 {
			t.Fatalf("describe: %d groups, want 3", len(d.Groups))
		}
		ops := int32(-2147483648)
		if include {
			ops = allGroupOps
		}
		for i, want := range []struct {
			member string
			epoch  int32
			topics []string
			assign []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition
		}{
			{m1, 1, []string{"bar"}, []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}},
			{m2, 2, []string{"foo"}, []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{{TopicID: foo, Topic: "foo", Partitions: []int32{0, 1, 2}}}},
		} {
			g := d.Groups[i]
			wantCode(t, g.GroupID, g.ErrorCode, nil)
			if g.GroupState != "Stable" || g.GroupEpoch != want.epoch || g.AssignmentEpoch != want.epoch || g.Assignor != "simple" || g.AuthorizedOperations != ops {
				t.Fatalf("%s (IncludeAuthorizedOperations %v): state %q epochs %d/%d assignor %q operations %d; want Stable, %d/%d, simple, %d",
					g.GroupID, include, g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor, g.AuthorizedOperations, want.epoch, want.epoch, ops)
			}
			if len(g.Members) != 1 {
				t.Fatalf("%s: %d members, want 1", g.GroupID, len(g.Members))
			}
			dm := g.Members[0]
			if dm.MemberID != want.member || dm.MemberEpoch != want.epoch || dm.RackID != nil || dm.ClientID != "conformance" ||
				dm.ClientHost != "/127.0.0.1" || !slices.Equal(dm.SubscribedTopicNames, want.topics) {
				t.Fatalf("%s member: %+v", g.GroupID, dm)
			}
			if len(dm.Assignment.TopicPartitions) != len(want.assign) {
				t.Fatalf("%s member assignment %+v, want %+v", g.GroupID, dm.Assignment.TopicPartitions, want.assign)
			}
			for j, tp := range dm.Assignment.TopicPartitions {
				w := want.assign[j]
				if tp.TopicID != w.TopicID || tp.Topic != w.Topic || !slices.Equal(tp.Partitions, w.Partitions) {
					t.Fatalf("%s member assignment %+v, want %+v", g.GroupID, dm.Assignment.TopicPartitions, want.assign)
				}
			}
		}
		wantCode(t, "unknown group", d.Groups[2].ErrorCode, kerr.GroupIDNotFound)
	}
}
