package sharegroup

import (
	"fmt"
	"testing"
)

// Scenarios from Kafka 4.4's SimpleAssignorTest, in our words.

var (
	topic1, topic2, topic3, topic4 = tid(1), tid(2), tid(3), tid(4)
)

func subs(ids ...[16]byte) map[[16]byte]bool {
	m := map[[16]byte]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func parts(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// assertEveryPartitionAssigned is assertEveryPartitionGetsAssignment: every assignable
// partition is held by at least one member.
func assertEveryPartitionAssigned(t *testing.T, assignable map[[16]byte][]int32, got map[string]Assignment) {
	t.Helper()
	for topic, ps := range assignable {
		for _, p := range ps {
			held := false
			for _, a := range got {
				held = held || a.has(topic, p)
			}
			if !held {
				t.Fatalf("partition %v/%d not assigned: %v", topic[0], p, got)
			}
		}
	}
}

func assertOnlyAssignable(t *testing.T, members []assignMember, assignable map[[16]byte][]int32, got map[string]Assignment) {
	t.Helper()
	for _, m := range members {
		for topic, ps := range got[m.id] {
			if !m.topics[topic] {
				t.Fatalf("member %s holds unsubscribed topic %v", m.id, topic[0])
			}
			for _, p := range ps {
				if !Assignment(assignable).has(topic, p) {
					t.Fatalf("member %s holds non-assignable %v/%d", m.id, topic[0], p)
				}
			}
		}
	}
}

func TestAssignWithEmptyMembers(t *testing.T) {
	if got := simpleAssign(nil, true, map[[16]byte][]int32{topic1: parts(3)}); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestAssignWithNoSubscribedTopic(t *testing.T) {
	got := simpleAssign([]assignMember{{id: "A", topics: subs()}}, true, map[[16]byte][]int32{})
	if got["A"].count() != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestAssignWithSubscribedToNonExistentTopic(t *testing.T) {
	// Kafka throws; exactq never passes a topic that does not resolve, so a member
	// subscribed only to a missing topic simply gets nothing.
	got := simpleAssign([]assignMember{{id: "A", topics: subs(topic2)}}, true, map[[16]byte][]int32{topic1: parts(3)})
	if got["A"].count() != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestAssignTwoMembersTwoTopicsHomogeneous(t *testing.T) {
	for _, tc := range []struct {
		name       string
		assignable map[[16]byte][]int32
		want       int
	}{
		{"all assignable", map[[16]byte][]int32{topic1: parts(3), topic3: parts(2)}, 5},
		{"some partitions not initialized", map[[16]byte][]int32{topic1: parts(3), topic3: {0, 1}}, 5},
		{"one topic not initialized", map[[16]byte][]int32{topic1: parts(3)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := []assignMember{{id: "A", topics: subs(topic1, topic3)}, {id: "B", topics: subs(topic1, topic3)}}
			got := simpleAssign(ms, true, tc.assignable)
			assertEveryPartitionAssigned(t, tc.assignable, got)
			assertOnlyAssignable(t, ms, tc.assignable, got)
			if n := got["A"].count() + got["B"].count(); n != tc.want {
				t.Fatalf("%d assignments, want %d: %v", n, tc.want, got)
			}
			if d := got["A"].count() - got["B"].count(); d < -1 || d > 1 {
				t.Fatalf("unbalanced: %v", got)
			}
		})
	}
}

func TestAssignThreeMembersThreeTopicsHeterogeneous(t *testing.T) {
	ms := []assignMember{
		{id: "A", topics: subs(topic1, topic2)},
		{id: "B", topics: subs(topic3)},
		{id: "C", topics: subs(topic2, topic3)},
	}
	for _, assignable := range []map[[16]byte][]int32{
		{topic1: parts(3), topic2: parts(3), topic3: parts(2)},
		{topic1: {0, 1}, topic2: {0, 2}, topic3: {1}},
	} {
		got := simpleAssign(ms, false, assignable)
		assertEveryPartitionAssigned(t, assignable, got)
		assertOnlyAssignable(t, ms, assignable, got)
	}
}

func TestAssignThreeMembersHeterogeneousWithNonAssignableTopic(t *testing.T) {
	// Kafka asserts this exact result: A gets all of T1 and T2 {0,2}, B nothing (its only
	// topic is not initialized), C gets T2 {1}.
	ms := []assignMember{
		{id: "A", topics: subs(topic1, topic2)},
		{id: "B", topics: subs(topic3)},
		{id: "C", topics: subs(topic2, topic3)},
	}
	got := simpleAssign(ms, false, map[[16]byte][]int32{topic1: parts(3), topic2: parts(3)})
	want := map[string]Assignment{
		"A": {topic1: {0, 1, 2}, topic2: {0, 2}},
		"B": {},
		"C": {topic2: {1}},
	}
	for id, a := range want {
		if !got[id].equal(a) {
			t.Fatalf("member %s: got %v, want %v", id, got[id], a)
		}
	}
}

func TestAssignOneMemberNoTopicHeterogeneous(t *testing.T) {
	ms := []assignMember{{id: "A", topics: subs(topic1, topic2)}, {id: "B", topics: subs()}}
	got := simpleAssign(ms, false, map[[16]byte][]int32{topic1: parts(3), topic2: parts(2)})
	if !got["A"].equal(Assignment{topic1: {0, 1, 2}, topic2: {0, 1}}) || got["B"].count() != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestAssignMoreMembersThanPartitionsShares(t *testing.T) {
	// 5 members, 2 partitions: desired sharing ceil(5/2) = 3, so 6 assignments and every
	// member holds at least one partition.
	var ms []assignMember
	for i := range 5 {
		ms = append(ms, assignMember{id: fmt.Sprintf("M%d", i), topics: subs(topic1)})
	}
	got := simpleAssign(ms, true, map[[16]byte][]int32{topic1: parts(2)})
	total := 0
	for _, m := range ms {
		if got[m.id].count() == 0 {
			t.Fatalf("member %s idle: %v", m.id, got)
		}
		total += got[m.id].count()
	}
	if total != 6 {
		t.Fatalf("%d assignments, want 6: %v", total, got)
	}
}

// incremental runs the SimpleAssignorTest incremental scenarios: members added (or
// removed) one at a time, each round fed the previous round's result, checking coverage
// and, for stickiness, that a member keeps what it can.
func incremental(t *testing.T, homogeneous bool, topicsOf func(i int) map[[16]byte]bool, assignable map[[16]byte][]int32, grow bool) {
	const numMembers = 101
	current := map[string]Assignment{}
	var ms []assignMember
	build := func(n int) []assignMember {
		ms = ms[:0]
		for i := range n {
			id := fmt.Sprintf("M%03d", i)
			ms = append(ms, assignMember{id: id, topics: topicsOf(i), current: current[id]})
		}
		return ms
	}
	step := func(n int) {
		got := simpleAssign(build(n), homogeneous, assignable)
		assertEveryPartitionAssigned(t, assignable, got)
		assertOnlyAssignable(t, ms, assignable, got)
		current = got
	}
	if grow {
		for n := 1; n <= numMembers; n++ {
			step(n)
		}
		return
	}
	step(numMembers)
	for n := numMembers - 1; n > 0; n-- {
		step(n)
	}
}

func TestIncrementalAssignmentHomogeneous(t *testing.T) {
	all := func(int) map[[16]byte]bool { return subs(topic1) }
	assignable := map[[16]byte][]int32{topic1: parts(24)}
	incremental(t, true, all, assignable, true)
	incremental(t, true, all, assignable, false)
}

func TestIncrementalAssignmentHeterogeneous(t *testing.T) {
	subscriptions := []map[[16]byte]bool{subs(topic1, topic2, topic3), subs(topic2), subs(topic3), subs(topic1, topic2)}
	of := func(i int) map[[16]byte]bool { return subscriptions[i%4] }
	assignable := map[[16]byte][]int32{topic1: parts(12), topic2: parts(8), topic3: parts(4)}
	incremental(t, false, of, assignable, true)
	incremental(t, false, of, assignable, false)
}

func TestAssignWithCurrentAssignmentHeterogeneous(t *testing.T) {
	ms := []assignMember{
		{id: "A", topics: subs(topic1, topic2)},
		{id: "B", topics: subs(topic3)},
		{id: "C", topics: subs(topic2, topic3)},
	}
	first := map[[16]byte][]int32{topic1: parts(3), topic2: parts(3), topic3: parts(2)}
	got := simpleAssign(ms, false, first)
	assertEveryPartitionAssigned(t, first, got)
	// Then A subscribes to T1-T3, B to T3 and T4, C leaves.
	ms = []assignMember{
		{id: "A", topics: subs(topic1, topic2, topic3), current: Assignment{topic1: {0, 1, 2}, topic2: {0, 2}}},
		{id: "B", topics: subs(topic3, topic4), current: Assignment{topic3: {0, 1}}},
	}
	second := map[[16]byte][]int32{topic1: parts(3), topic2: parts(3), topic3: parts(2), topic4: parts(1)}
	got = simpleAssign(ms, false, second)
	assertEveryPartitionAssigned(t, second, got)
	assertOnlyAssignable(t, ms, second, got)
}

func TestAssignIsSticky(t *testing.T) {
	// Adding a third member to two that split 6 partitions moves only what balance needs.
	ms := []assignMember{
		{id: "A", topics: subs(topic1), current: Assignment{topic1: {0, 1, 2}}},
		{id: "B", topics: subs(topic1), current: Assignment{topic1: {3, 4, 5}}},
		{id: "C", topics: subs(topic1)},
	}
	got := simpleAssign(ms, true, map[[16]byte][]int32{topic1: parts(6)})
	for _, id := range []string{"A", "B", "C"} {
		if got[id].count() != 2 {
			t.Fatalf("unbalanced: %v", got)
		}
	}
	for _, p := range got["A"][topic1] {
		if p > 2 {
			t.Fatalf("A took a partition from B: %v", got)
		}
	}
	for _, p := range got["B"][topic1] {
		if p < 3 {
			t.Fatalf("B took a partition from A: %v", got)
		}
	}
}

func TestAssignIsDeterministic(t *testing.T) {
	ms := []assignMember{{id: "A", topics: subs(topic1, topic2)}, {id: "B", topics: subs(topic1)}, {id: "C", topics: subs(topic2)}}
	assignable := map[[16]byte][]int32{topic1: parts(5), topic2: parts(3)}
	first := simpleAssign(ms, false, assignable)
	for range 20 {
		again := simpleAssign(ms, false, assignable)
		for id, a := range first {
			if !again[id].equal(a) {
				t.Fatalf("run differs: %v vs %v", first, again)
			}
		}
	}
}

func TestDesiredCounts(t *testing.T) {
	for _, tc := range []struct {
		members, partitions, sharing int
		counts                       []int
	}{
		{3, 6, 1, []int{2, 2, 2}},
		{3, 7, 1, []int{3, 2, 2}},
		{5, 2, 3, []int{2, 1, 1, 1, 1}},
		{4, 4, 1, []int{1, 1, 1, 1}},
		{2, 0, 0, []int{0, 0}},
	} {
		s, c := desiredCounts(tc.members, tc.partitions)
		if s != tc.sharing || fmt.Sprint(c) != fmt.Sprint(tc.counts) {
			t.Fatalf("%d members %d partitions: sharing %d counts %v, want %d %v", tc.members, tc.partitions, s, c, tc.sharing, tc.counts)
		}
	}
}
