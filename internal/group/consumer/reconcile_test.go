package consumer

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// sim is a group as package group keeps one, reduced to what reconciliation needs: the
// members' assignment states, the group epoch, the target assignment and its epoch.
type sim struct {
	members    map[string]*simMember
	partitions map[[16]byte]int32
	groupEpoch int32
	targetEp   int32
	target     map[string]Set
	assignor   Assignor
}

type simMember struct {
	Member
	topics map[[16]byte]bool
	// owned is what the client believes it owns (what it reports in heartbeats).
	owned Set
	// lastEpoch is the highest epoch the client was given, for the monotonic check.
	lastEpoch int32
}

func topicID(i int) [16]byte { return [16]byte{byte(i + 1)} }

func (s *sim) ownedBy(tp TP) bool {
	for _, m := range s.members {
		if _, ok := m.Assigned[tp]; ok {
			return true
		}
		if _, ok := m.PendingRevocation[tp]; ok {
			return true
		}
	}
	return false
}

func (s *sim) assign() {
	if s.targetEp >= s.groupEpoch {
		return
	}
	var ms []AssignMember
	for _, id := range slices.Sorted(maps.Keys(s.members)) {
		m := s.members[id]
		topics := map[[16]byte]bool{}
		for t := range m.topics {
			if _, ok := s.partitions[t]; ok {
				topics[t] = true
			}
		}
		ms = append(ms, AssignMember{ID: id, Topics: topics, Current: s.target[id]})
	}
	s.target = s.assignor(ms, s.partitions)
	s.targetEp = s.groupEpoch
}

// heartbeat reconciles member id; revoke says whether the client gives up what it was
// asked to revoke before this heartbeat.
func (s *sim) heartbeat(t *rapid.T, id string, revoke bool) {
	m := s.members[id]
	if revoke {
		for tp := range m.owned {
			if _, keep := m.Assigned[tp]; !keep {
				delete(m.owned, tp)
			}
		}
	}
	s.assign()
	next, err := Reconcile(m.Member, Input{
		TargetEpoch: s.targetEp, Target: s.target[id],
		Subscribed: func(t [16]byte) bool { return m.topics[t] },
		OwnedBy:    s.ownedBy, Owned: maps.Clone(m.owned),
	})
	if err != nil {
		t.Fatalf("reconcile %s: %v", id, err)
	}
	if next.Epoch < m.Epoch {
		t.Fatalf("member %s epoch went back from %d to %d", id, m.Epoch, next.Epoch)
	}
	m.Member = next
	if m.Epoch < m.lastEpoch {
		t.Fatalf("member %s was given epoch %d after %d", id, m.Epoch, m.lastEpoch)
	}
	m.lastEpoch = m.Epoch
	// The client takes what the response assigns.
	for tp := range m.Assigned {
		m.owned[tp] = struct{}{}
	}
}

func (s *sim) check(t *rapid.T) {
	seen := map[TP]string{}
	for _, id := range slices.Sorted(maps.Keys(s.members)) {
		m := s.members[id]
		for _, set := range []Epochs{m.Assigned, m.PendingRevocation} {
			for tp := range set {
				if other, dup := seen[tp]; dup {
					t.Fatalf("partition %v held by %s and %s", tp, other, id)
				}
				seen[tp] = id
			}
		}
		for tp, e := range m.Assigned {
			if e > m.Epoch {
				t.Fatalf("member %s at epoch %d holds %v assigned at epoch %d", id, m.Epoch, tp, e)
			}
		}
	}
	// What clients think they own never overlaps either: a partition goes to a new
	// owner only once the old one stopped reporting it.
	owners := map[TP]string{}
	for _, id := range slices.Sorted(maps.Keys(s.members)) {
		for tp := range s.members[id].owned {
			if other, dup := owners[tp]; dup {
				t.Fatalf("clients %s and %s both consume %v", other, id, tp)
			}
			owners[tp] = id
		}
	}
}

func TestReconciliationModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &sim{members: map[string]*simMember{}, partitions: map[[16]byte]int32{}, target: map[string]Set{}}
		s.assignor = Uniform
		if rapid.Bool().Draw(t, "range") {
			s.assignor = Range
		}
		nTopics := rapid.IntRange(1, 3).Draw(t, "topics")
		for i := range nTopics {
			s.partitions[topicID(i)] = int32(rapid.IntRange(1, 6).Draw(t, "partitions"))
		}
		drawTopics := func() map[[16]byte]bool {
			ts := map[[16]byte]bool{}
			for i := range nTopics + 1 { // topic nTopics does not exist yet
				if rapid.Bool().Draw(t, "sub") {
					ts[topicID(i)] = true
				}
			}
			return ts
		}
		ids := []string{"a", "b", "c", "d"}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			id := rapid.SampledFrom(ids).Draw(t, "member")
			m := s.members[id]
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case m == nil && op < 8: // join
				s.members[id] = &simMember{Member: Member{Assigned: Epochs{}, PendingRevocation: Epochs{}},
					topics: drawTopics(), owned: Set{}}
				s.groupEpoch++
				s.heartbeat(t, id, false)
			case m == nil:
			case op == 0: // leave: its partitions are free at once
				delete(s.members, id)
				s.groupEpoch++
			case op == 1: // new subscription
				m.topics = drawTopics()
				s.groupEpoch++
				s.assign()
				next, err := Reconcile(m.Member, Input{TargetEpoch: s.targetEp, Target: s.target[id],
					Subscribed: func(t [16]byte) bool { return m.topics[t] }, SubscriptionChanged: true,
					OwnedBy: s.ownedBy, Owned: maps.Clone(m.owned)})
				if err != nil {
					t.Fatal(err)
				}
				m.Member = next
				for tp := range m.Assigned {
					m.owned[tp] = struct{}{}
				}
			case op == 2: // a topic grows or the missing topic appears
				i := rapid.IntRange(0, nTopics).Draw(t, "grow")
				s.partitions[topicID(i)]++
				s.groupEpoch++
			default:
				s.heartbeat(t, id, rapid.Bool().Draw(t, "revoke"))
			}
			s.check(t)
		}
		// Quiesce: every member heartbeats and revokes until nothing changes; then all
		// are stable at the target epoch and every subscribed partition is owned.
		for round := 0; ; round++ {
			if round > 10 {
				t.Fatalf("no convergence after %d rounds", round)
			}
			changed := false
			for _, id := range slices.Sorted(maps.Keys(s.members)) {
				before := s.members[id].Member
				s.heartbeat(t, id, true)
				changed = changed || !before.Equal(s.members[id].Member)
				s.check(t)
			}
			if !changed {
				break
			}
		}
		want := Set{}
		for _, m := range s.members {
			for tp := range m.topics {
				for p := range s.partitions[tp] {
					want[TP{tp, p}] = struct{}{}
				}
			}
		}
		got := Set{}
		for id, m := range s.members {
			if !m.ReconciledTo(s.targetEp) {
				t.Fatalf("member %s not reconciled: %s at %d, target epoch %d", id, m.State, m.Epoch, s.targetEp)
			}
			for tp := range m.Assigned {
				got[tp] = struct{}{}
			}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("assigned %v, subscribed %v", got.Sorted(), want.Sorted())
		}
	})
}

func TestRevocationBeforeReassignment(t *testing.T) {
	// a owns p0 and p1; b joins: the target moves p1 to b. b must not get p1 until a
	// reports it no longer owns it.
	tp0, tp1 := TP{topicID(0), 0}, TP{topicID(0), 1}
	sub := func([16]byte) bool { return true }
	a := Member{Epoch: 1, Assigned: Epochs{tp0: 1, tp1: 1}, PendingRevocation: Epochs{}}
	target := map[string]Set{"a": {tp0: {}}, "b": {tp1: {}}}
	a2, _ := Reconcile(a, Input{TargetEpoch: 2, Target: target["a"], Subscribed: sub, Owned: Set{tp0: {}, tp1: {}},
		OwnedBy: func(TP) bool { return true }})
	if a2.State != UnrevokedPartitions || a2.Epoch != 1 || len(a2.PendingRevocation) != 1 {
		t.Fatalf("a: %+v", a2)
	}
	ownedByA := func(tp TP) bool { _, ok := a2.Assigned[tp]; _, ok2 := a2.PendingRevocation[tp]; return ok || ok2 }
	b, _ := Reconcile(Member{Assigned: Epochs{}, PendingRevocation: Epochs{}}, Input{TargetEpoch: 2, Target: target["b"],
		Subscribed: sub, Owned: Set{}, OwnedBy: ownedByA})
	if b.State != UnreleasedPartitions || b.Epoch != 2 || len(b.Assigned) != 0 {
		t.Fatalf("b before release: %+v", b)
	}
	a3, _ := Reconcile(a2, Input{TargetEpoch: 2, Target: target["a"], Subscribed: sub, Owned: Set{tp0: {}}, OwnedBy: ownedByA})
	if a3.State != Stable || a3.Epoch != 2 || a3.PreviousEpoch != 1 {
		t.Fatalf("a after revoking: %+v", a3)
	}
	ownedByA = func(tp TP) bool { _, ok := a3.Assigned[tp]; return ok }
	b2, _ := Reconcile(b, Input{TargetEpoch: 2, Target: target["b"], Subscribed: sub, Owned: Set{}, OwnedBy: ownedByA})
	if b2.State != Stable || b2.Assigned[tp1] != 2 {
		t.Fatalf("b after release: %+v", b2)
	}
}

func TestUnknownStateFences(t *testing.T) {
	m := Member{Epoch: 3, State: Unknown, Assigned: Epochs{{topicID(0), 0}: 3}}
	in := Input{TargetEpoch: 4, Target: Set{}, Subscribed: func([16]byte) bool { return true }, OwnedBy: func(TP) bool { return false }}
	in.Owned = Set{{topicID(0), 0}: {}}
	if _, err := Reconcile(m, in); err == nil {
		t.Fatal("a member in an unknown state that owns partitions must be fenced")
	}
	in.Owned = Set{}
	got, err := Reconcile(m, in)
	if err != nil || got.State != Stable || got.Epoch != 4 {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func ExampleRange() {
	t := topicID(0)
	got := Range([]AssignMember{
		{ID: "m2", Topics: map[[16]byte]bool{t: true}},
		{ID: "m1", Topics: map[[16]byte]bool{t: true}},
	}, map[[16]byte]int32{t: 5})
	for _, id := range []string{"m1", "m2"} {
		var ps []int32
		for _, tp := range got[id].Sorted() {
			ps = append(ps, tp.Partition)
		}
		fmt.Println(id, ps)
	}
	// Output:
	// m1 [0 1 2]
	// m2 [3 4]
}
