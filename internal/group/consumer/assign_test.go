package consumer

import (
	"fmt"
	"maps"
	"testing"

	"pgregory.net/rapid"
)

// TestAssignorsProperties checks both assignors on random groups: every partition of a
// subscribed topic goes to exactly one member subscribed to it; uniform on a
// homogeneous group balances counts within one and keeps every current partition a
// member may keep under its quota; assigning again from the result changes nothing.
func TestAssignorsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nTopics := rapid.IntRange(1, 4).Draw(t, "topics")
		parts := map[[16]byte]int32{}
		for i := range nTopics {
			parts[topicID(i)] = int32(rapid.IntRange(1, 8).Draw(t, "partitions"))
		}
		same := rapid.Bool().Draw(t, "homogeneous")
		var shared map[[16]byte]bool
		n := rapid.IntRange(1, 6).Draw(t, "members")
		var members []AssignMember
		for i := range n {
			ts := map[[16]byte]bool{}
			if same && shared != nil {
				ts = shared
			} else {
				for j := range nTopics {
					if rapid.Bool().Draw(t, "sub") {
						ts[topicID(j)] = true
					}
				}
				shared = ts
			}
			cur := Set{}
			for j := range nTopics {
				for p := range parts[topicID(j)] {
					if rapid.IntRange(0, 3).Draw(t, "cur") == 0 {
						cur[TP{topicID(j), p}] = struct{}{}
					}
				}
			}
			members = append(members, AssignMember{ID: fmt.Sprintf("m%d", i), Topics: ts, Current: cur})
		}
		for name, assign := range map[string]Assignor{"uniform": Uniform, "range": Range} {
			got := assign(members, parts)
			checkComplete(t, name, members, parts, got)
			if name == "uniform" && same {
				lo, hi := 1<<30, -1
				for _, s := range got {
					lo, hi = min(lo, len(s)), max(hi, len(s))
				}
				if hi-lo > 1 {
					t.Fatalf("uniform unbalanced: %d..%d", lo, hi)
				}
			}
			again := make([]AssignMember, len(members))
			for i, m := range members {
				m.Current = got[m.ID]
				again[i] = m
			}
			got2 := assign(again, parts)
			for id := range got {
				if !maps.Equal(got[id], got2[id]) {
					t.Fatalf("%s not stable: %s had %v, then %v", name, id, got[id].Sorted(), got2[id].Sorted())
				}
			}
		}
	})
}

func checkComplete(t *rapid.T, name string, members []AssignMember, parts map[[16]byte]int32, got map[string]Set) {
	owner := map[TP]string{}
	byID := map[string]AssignMember{}
	for _, m := range members {
		byID[m.ID] = m
		if _, ok := got[m.ID]; !ok {
			t.Fatalf("%s: no entry for %s", name, m.ID)
		}
	}
	for id, s := range got {
		for tp := range s {
			if o, dup := owner[tp]; dup {
				t.Fatalf("%s: %v to %s and %s", name, tp, o, id)
			}
			owner[tp] = id
			if !byID[id].Topics[tp.Topic] {
				t.Fatalf("%s: %v to %s, not subscribed", name, tp, id)
			}
		}
	}
	for _, m := range members {
		for tpc := range m.Topics {
			for p := range parts[tpc] {
				if _, ok := owner[TP{tpc, p}]; !ok {
					t.Fatalf("%s: %v unassigned", name, TP{tpc, p})
				}
			}
		}
	}
}

func TestUniformSticky(t *testing.T) {
	// Two members hold three partitions each; a third joins: it takes two, one from
	// each, and nothing else moves.
	tpc := topicID(0)
	all := map[[16]byte]bool{tpc: true}
	a := Set{{tpc, 0}: {}, {tpc, 1}: {}, {tpc, 2}: {}}
	b := Set{{tpc, 3}: {}, {tpc, 4}: {}, {tpc, 5}: {}}
	got := Uniform([]AssignMember{{ID: "a", Topics: all, Current: a}, {ID: "b", Topics: all, Current: b},
		{ID: "c", Topics: all, Current: Set{}}}, map[[16]byte]int32{tpc: 6})
	for _, id := range []string{"a", "b", "c"} {
		if len(got[id]) != 2 {
			t.Fatalf("%s got %v", id, got[id].Sorted())
		}
	}
	for tp := range got["a"] {
		if _, ok := a[tp]; !ok {
			t.Fatalf("a got %v it did not hold", tp)
		}
	}
	for tp := range got["b"] {
		if _, ok := b[tp]; !ok {
			t.Fatalf("b got %v it did not hold", tp)
		}
	}
}

func TestCompileRegexMatchesWholeNames(t *testing.T) {
	re, err := CompileRegex("orders|pay.*")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"orders": true, "payments": true, "orders-eu": false, "xpay": false} {
		if re.MatchString(name) != want {
			t.Errorf("%q: match %v", name, !want)
		}
	}
	if _, err := CompileRegex("(unclosed"); err == nil {
		t.Error("an invalid pattern compiled")
	}
}
