package client

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

func tps(s ...any) []TopicPartition {
	var out []TopicPartition
	for i := 0; i < len(s); i += 2 {
		out = append(out, TopicPartition{s[i].(string), int32(s[i+1].(int))})
	}
	return out
}

func TestRangeBalancerJavaExample(t *testing.T) {
	// RangeAssignor's Javadoc example: two consumers, two topics of three partitions.
	members := []groupMember{{id: "C1", topics: []string{"t0", "t1"}}, {id: "C0", topics: []string{"t1", "t0"}}}
	got, err := RangeBalancer().assign(members, map[string]int32{"t0": 3, "t1": 3})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]TopicPartition{
		"C0": tps("t0", 0, "t0", 1, "t1", 0, "t1", 1),
		"C1": tps("t0", 2, "t1", 2),
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Static members sort before dynamic ones, by instance id (MemberInfo.compareTo).
	i0, i1 := "I0", "I1"
	members = []groupMember{
		{id: "a", topics: []string{"t0"}},
		{id: "z", instanceID: &i0, topics: []string{"t0"}},
		{id: "m", instanceID: &i1, topics: []string{"t0"}},
	}
	got, _ = RangeBalancer().assign(members, map[string]int32{"t0": 4, "nosub": 2})
	want = map[string][]TopicPartition{"z": tps("t0", 0, "t0", 1), "m": tps("t0", 2), "a": tps("t0", 3)}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("static: got %v, want %v", got, want)
	}
}

func TestStickyBalancerFreshAndStable(t *testing.T) {
	parts := map[string]int32{"a": 3, "b": 2}
	members := []groupMember{
		{id: "m1", topics: []string{"a", "b"}, generation: -1},
		{id: "m2", topics: []string{"a", "b"}, generation: -1},
	}
	got, err := CooperativeStickyBalancer().assign(members, parts)
	if err != nil {
		t.Fatal(err)
	}
	// Round robin in topic-partition order over members in id order.
	want := map[string][]TopicPartition{"m1": tps("a", 0, "a", 2, "b", 1), "m2": tps("a", 1, "b", 0)}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A third member joins: one partition moves from m1, revoked first (not assigned to
	// m3 in this round), then assigned in the next.
	members = []groupMember{
		{id: "m1", topics: []string{"a", "b"}, owned: want["m1"], generation: 1},
		{id: "m2", topics: []string{"a", "b"}, owned: want["m2"], generation: 1},
		{id: "m3", topics: []string{"a", "b"}, generation: -1},
	}
	got, _ = CooperativeStickyBalancer().assign(members, parts)
	if len(got["m3"]) != 0 || len(got["m1"]) != 2 || len(got["m2"]) != 2 {
		t.Fatalf("first cooperative round: %v", got)
	}
	for i := range members {
		members[i].owned, members[i].generation = got[members[i].id], 2
	}
	got, _ = CooperativeStickyBalancer().assign(members, parts)
	if len(got["m3"]) != 1 || len(got["m1"]) != 2 || len(got["m2"]) != 2 {
		t.Fatalf("second cooperative round: %v", got)
	}
}

func TestConsumerProtocolRoundTrip(t *testing.T) {
	owned := tps("b", 1, "a", 0, "a", 2)
	raw := encodeSubscription(CooperativeStickyBalancer(), []string{"b", "a"}, owned, 7)
	inst := "i"
	m, err := decodeSubscription("m", &inst, raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.generation != 7 || !reflect.DeepEqual(m.topics, []string{"a", "b"}) || !reflect.DeepEqual(m.owned, sortTPs(owned)) {
		t.Fatalf("decoded %+v", m)
	}
	got, err := decodeAssignment(encodeAssignment(owned))
	if err != nil || !reflect.DeepEqual(got, sortTPs(owned)) {
		t.Fatalf("assignment round trip: %v, %v", got, err)
	}
	if got, err := decodeAssignment(nil); err != nil || got != nil {
		t.Fatalf("empty assignment: %v, %v", got, err)
	}
}

func normalize(a map[string][]TopicPartition) map[string][]TopicPartition {
	out := map[string][]TopicPartition{}
	for m, p := range a {
		if len(p) > 0 {
			out[m] = sortTPs(p)
		}
	}
	return out
}

// groupSim is a random group for the property tests: topics with partition counts and
// members with subscriptions, owned partitions and a generation, evolved round by round
// the way consumers apply assignments.
type groupSim struct {
	parts   map[string]int32
	members []groupMember
	gen     int32
}

func drawGroup(t *rapid.T, sameSubs bool) *groupSim {
	g := &groupSim{parts: map[string]int32{}, gen: 0}
	nt := rapid.IntRange(1, 4).Draw(t, "topics")
	var topics []string
	for i := 0; i < nt; i++ {
		name := fmt.Sprintf("t%d", i)
		topics = append(topics, name)
		g.parts[name] = int32(rapid.IntRange(0, 9).Draw(t, "partitions"))
	}
	nm := rapid.IntRange(1, 6).Draw(t, "members")
	for i := 0; i < nm; i++ {
		g.members = append(g.members, g.newMember(t, fmt.Sprintf("m%d", i), topics, sameSubs))
	}
	return g
}

func (g *groupSim) newMember(t *rapid.T, id string, topics []string, sameSubs bool) groupMember {
	m := groupMember{id: id, generation: defaultGeneration}
	if sameSubs {
		m.topics = append([]string(nil), topics...)
		return m
	}
	for _, tp := range topics {
		if rapid.Bool().Draw(t, "subscribes") {
			m.topics = append(m.topics, tp)
		}
	}
	if len(m.topics) == 0 {
		m.topics = topics[:1]
	}
	return m
}

// round runs the balancer and checks what must hold for every single assignment.
func (g *groupSim) round(t *rapid.T, b Balancer) map[string][]TopicPartition {
	got, err := b.assign(append([]groupMember(nil), g.members...), g.parts)
	if err != nil {
		t.Fatalf("assign: %v", err)
	}
	owner := map[TopicPartition]string{}
	for _, m := range g.members {
		for _, tp := range m.owned {
			owner[tp] = m.id
		}
	}
	seen := map[TopicPartition]string{}
	for _, m := range g.members {
		subs := map[string]bool{}
		for _, tp := range m.topics {
			subs[tp] = true
		}
		for _, tp := range got[m.id] {
			if prev, dup := seen[tp]; dup {
				t.Fatalf("%v assigned to %s and %s", tp, prev, m.id)
			}
			seen[tp] = m.id
			if !subs[tp.Topic] || tp.Partition >= g.parts[tp.Topic] {
				t.Fatalf("%v assigned to %s, which does not subscribe to it", tp, m.id)
			}
			if o, ok := owner[tp]; ok && o != m.id && b.cooperative() {
				t.Fatalf("cooperative: %v assigned to %s while %s still owns it", tp, m.id, o)
			}
		}
	}
	return got
}

// apply makes the members own their assignment (revoking the rest) in a new generation.
func (g *groupSim) apply(a map[string][]TopicPartition) {
	g.gen++
	for i := range g.members {
		g.members[i].owned = append([]TopicPartition(nil), a[g.members[i].id]...)
		g.members[i].generation = g.gen
	}
}

// settle runs rounds until the assignment equals what the members own, checking that a
// partition revoked in one round is assigned in the next; it fails after maxRounds.
func (g *groupSim) settle(t *rapid.T, b Balancer, maxRounds int) map[string][]TopicPartition {
	for r := 0; r < maxRounds; r++ {
		got := g.round(t, b)
		stable := true
		var revoked []TopicPartition
		for _, m := range g.members {
			if !reflect.DeepEqual(sortTPs(m.owned), sortTPs(got[m.id])) {
				stable = false
			}
			in := map[TopicPartition]bool{}
			for _, tp := range got[m.id] {
				in[tp] = true
			}
			for _, tp := range m.owned {
				if !in[tp] {
					revoked = append(revoked, tp)
				}
			}
		}
		g.apply(got)
		if stable {
			return got
		}
		if b.cooperative() && len(revoked) > 0 {
			next := g.round(t, b)
			assigned := map[TopicPartition]bool{}
			for _, p := range next {
				for _, tp := range p {
					assigned[tp] = true
				}
			}
			for _, tp := range revoked {
				if !assigned[tp] && g.subscribed(tp.Topic) {
					t.Fatalf("%v revoked in one round but not assigned in the next", tp)
				}
			}
		}
	}
	t.Fatalf("no stable assignment after %d rounds", maxRounds)
	return nil
}

func (g *groupSim) subscribed(topic string) bool {
	for _, m := range g.members {
		for _, tp := range m.topics {
			if tp == topic {
				return true
			}
		}
	}
	return false
}

// checkComplete checks that every partition of a subscribed topic is assigned, and with
// equal subscriptions (or per topic, for range) that counts differ by at most one.
func (g *groupSim) checkComplete(t *rapid.T, b Balancer, a map[string][]TopicPartition, balanced bool) {
	assigned := map[TopicPartition]bool{}
	for _, p := range a {
		for _, tp := range p {
			assigned[tp] = true
		}
	}
	for topic, n := range g.parts {
		if !g.subscribed(topic) {
			continue
		}
		for p := int32(0); p < n; p++ {
			if !assigned[TopicPartition{topic, p}] {
				t.Fatalf("%s[%d] unassigned", topic, p)
			}
		}
	}
	if !balanced {
		return
	}
	counts := func(per func(TopicPartition) bool, among func(groupMember) bool) (lo, hi int) {
		lo = 1 << 30
		for _, m := range g.members {
			if !among(m) {
				continue
			}
			n := 0
			for _, tp := range a[m.id] {
				if per(tp) {
					n++
				}
			}
			lo, hi = min(lo, n), max(hi, n)
		}
		return lo, hi
	}
	if b.Name() == "range" {
		for topic := range g.parts {
			subscribes := func(m groupMember) bool {
				for _, t := range m.topics {
					if t == topic {
						return true
					}
				}
				return false
			}
			if lo, hi := counts(func(tp TopicPartition) bool { return tp.Topic == topic }, subscribes); hi-lo > 1 {
				t.Fatalf("range: topic %s counts %d..%d: %v", topic, lo, hi, a)
			}
		}
		return
	}
	if lo, hi := counts(func(TopicPartition) bool { return true }, func(groupMember) bool { return true }); hi-lo > 1 {
		t.Fatalf("unbalanced: counts %d..%d: %v", lo, hi, a)
	}
}

func testBalancerProperties(t *testing.T, b Balancer, sameSubs bool) {
	rapid.Check(t, func(t *rapid.T) {
		g := drawGroup(t, sameSubs)
		var topics []string
		for tp := range g.parts {
			topics = append(topics, tp)
		}
		sort.Strings(topics)
		for change := 0; change < 4; change++ {
			a := g.settle(t, b, 6)
			g.checkComplete(t, b, a, sameSubs || b.Name() == "range")
			// Stickiness: another rebalance with unchanged membership moves nothing.
			if again := g.round(t, b); !reflect.DeepEqual(normalize(again), normalize(a)) {
				t.Fatalf("a rebalance without changes moved partitions:\n%v\n->\n%v", a, again)
			}
			// Membership changes: a member leaves, or a new one joins.
			if len(g.members) > 1 && rapid.Bool().Draw(t, "leave") {
				i := rapid.IntRange(0, len(g.members)-1).Draw(t, "leaver")
				g.members = append(g.members[:i:i], g.members[i+1:]...)
			} else {
				g.members = append(g.members, g.newMember(t, fmt.Sprintf("n%d", change), topics, sameSubs))
			}
		}
	})
}

func TestRangeBalancerProperties(t *testing.T) {
	t.Run("same subscriptions", func(t *testing.T) { testBalancerProperties(t, RangeBalancer(), true) })
	t.Run("mixed subscriptions", func(t *testing.T) { testBalancerProperties(t, RangeBalancer(), false) })
}

func TestCooperativeStickyBalancerProperties(t *testing.T) {
	t.Run("same subscriptions", func(t *testing.T) { testBalancerProperties(t, CooperativeStickyBalancer(), true) })
	t.Run("mixed subscriptions", func(t *testing.T) { testBalancerProperties(t, CooperativeStickyBalancer(), false) })
}

// TestStickyKeepsOwnersOnJoin checks stickiness across a membership change with equal
// subscriptions: when a member joins, every old member keeps its partitions up to the
// new minimum quota.
func TestStickyKeepsOwnersOnJoin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := drawGroup(t, true)
		b := CooperativeStickyBalancer()
		before := g.settle(t, b, 6)
		var topics []string
		for tp := range g.parts {
			topics = append(topics, tp)
		}
		sort.Strings(topics)
		g.members = append(g.members, g.newMember(t, "new", topics, true))
		after := g.settle(t, b, 6)
		total := 0
		for _, n := range g.parts {
			total += int(n)
		}
		minQuota := total / len(g.members)
		for m, old := range before {
			kept := 0
			in := map[TopicPartition]bool{}
			for _, tp := range after[m] {
				in[tp] = true
			}
			for _, tp := range old {
				if in[tp] {
					kept++
				}
			}
			if kept < min(len(old), minQuota) {
				t.Fatalf("%s kept %d of %d partitions (quota %d)", m, kept, len(old), minQuota)
			}
		}
	})
}
