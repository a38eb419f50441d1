package sharegroup

import (
	"math"
	"slices"
)

// AssignorName is the name ShareGroupDescribe reports (SimpleAssignor.name()).
const AssignorName = "simple"

// assignMember is one member as the assignor sees it.
type assignMember struct {
	id      string
	topics  map[[16]byte]bool // subscribed topics that exist (resolved to ids)
	current Assignment        // the member's current target assignment
}

type tp struct {
	topic [16]byte
	p     int32
}

func compareTP(a, b tp) int {
	if c := compareIDs(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.p - b.p)
}

// simpleAssign is Kafka 4.4's SimpleAssignor (assignor/SimpleAssignor.java with
// SimpleHomogeneousAssignmentBuilder and SimpleHeterogeneousAssignmentBuilder): balance
// first, then stickiness; when members outnumber partitions a partition is shared by
// ceil(M/P) members.
//
// members must be sorted by id; assignable maps each subscribed topic to its assignable
// (existing and share-state-initialized) partitions, sorted. The result has an entry,
// possibly empty, for every member.
//
// Java iterates HashMaps and HashSets; exactq uses a fixed order instead (members by id,
// topics by id bytes, partitions ascending), so the result is deterministic and follows
// the same rules, though ties may be broken differently from a Java broker. One further
// difference: partitions of a member's current assignment that are no longer assignable
// (the topic was deleted or is not subscribed by that member) are dropped before the
// algorithm runs, where Kafka drops them later or, for a topic nobody subscribes to any
// more, leaves them to reconciliation to filter out. The counts and the outcome for
// assignable partitions are the same.
func simpleAssign(members []assignMember, homogeneous bool, assignable map[[16]byte][]int32) map[string]Assignment {
	out := make(map[string]Assignment, len(members))
	if len(members) == 0 {
		return out
	}
	// Each member's working assignment starts as its current one restricted to what it
	// may still hold.
	work := make([]map[tp]bool, len(members))
	for i, m := range members {
		w := map[tp]bool{}
		for t, ps := range m.current {
			if !m.topics[t] {
				continue
			}
			for _, p := range ps {
				if _, ok := slices.BinarySearch(assignable[t], p); ok {
					w[tp{t, p}] = true
				}
			}
		}
		work[i] = w
	}
	if homogeneous {
		var topics [][16]byte
		for t := range members[0].topics {
			if _, ok := assignable[t]; ok {
				topics = append(topics, t)
			}
		}
		slices.SortFunc(topics, compareIDs)
		var targets []tp
		for _, t := range topics {
			for _, p := range assignable[t] {
				targets = append(targets, tp{t, p})
			}
		}
		all := make([]int, len(members))
		for i := range all {
			all[i] = i
		}
		buildHomogeneous(work, all, targets)
	} else {
		var topics [][16]byte
		for t := range assignable {
			topics = append(topics, t)
		}
		slices.SortFunc(topics, compareIDs)
		for _, t := range topics {
			var subs []int
			for i, m := range members {
				if m.topics[t] {
					subs = append(subs, i)
				}
			}
			if len(subs) == 0 {
				continue
			}
			targets := make([]tp, 0, len(assignable[t]))
			for _, p := range assignable[t] {
				targets = append(targets, tp{t, p})
			}
			buildHeterogeneousTopic(work, subs, targets)
		}
	}
	for i, m := range members {
		a := Assignment{}
		for x := range work[i] {
			a[x.topic] = append(a[x.topic], x.p)
		}
		for t := range a {
			slices.Sort(a[t])
		}
		out[m.id] = a
	}
	return out
}

// desiredCounts is the builders' desiredAssignmentCount: member k of n gets
// ceil(precise*(k+1)) - ceil(precise*k) partitions, precise = sharing*P/n in doubles.
func desiredCounts(n, numTargets int) (sharing int, counts []int) {
	counts = make([]int, n)
	if numTargets == 0 {
		return 0, counts
	}
	sharing = (n + numTargets - 1) / numTargets
	precise := float64(sharing*numTargets) / float64(n)
	for k := range n {
		counts[k] = int(math.Ceil(precise*float64(k+1))) - int(math.Ceil(precise*float64(k)))
	}
	return sharing, counts
}

// orderedSet is a small set of member indices iterated in ascending order, with an
// iterator that tolerates removing the element it last returned (Java's
// Iterator.remove over a HashSet of small Integers, which iterates ascending).
type orderedSet struct {
	xs  []int
	pos int
}

func (s *orderedSet) add(x int) {
	i, ok := slices.BinarySearch(s.xs, x)
	if !ok {
		s.xs = slices.Insert(s.xs, i, x)
		if i < s.pos {
			s.pos++
		}
	}
}
func (s *orderedSet) hasNext() bool { return s.pos < len(s.xs) }
func (s *orderedSet) next() int     { s.pos++; return s.xs[s.pos-1] }
func (s *orderedSet) removeLast()   { s.pos--; s.xs = slices.Delete(s.xs, s.pos, s.pos+1) }
func (s *orderedSet) restart()      { s.pos = 0 }

// sortedKeys lists a member's partitions in order.
func sortedKeys(m map[tp]bool) []tp {
	ks := make([]tp, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, compareTP)
	return ks
}

// buildHomogeneous is SimpleHomogeneousAssignmentBuilder.build over members (indices into
// work, all subscribed to the same topics) and the target partitions.
func buildHomogeneous(work []map[tp]bool, members []int, targets []tp) {
	buildTopicSet(work, members, targets, true)
}

// buildHeterogeneousTopic is SimpleHeterogeneousAssignmentBuilder's
// TopicAssignmentPartialBuilder for one topic: subs are the members subscribed to it.
func buildHeterogeneousTopic(work []map[tp]bool, subs []int, targets []tp) {
	buildTopicSet(work, subs, targets, false)
}

// buildTopicSet runs the four steps shared by both builders over the partitions in
// targets and the members in subs. Only partitions of targets are considered; each
// member's other partitions are left untouched (the heterogeneous builder runs once per
// topic). homogeneous selects the homogeneous builder's one difference: a member that
// loses an over-shared partition becomes "unfilled" whatever its count, where the
// heterogeneous builder recomputes unfilled members from their counts.
func buildTopicSet(work []map[tp]bool, subs []int, targets []tp, homogeneous bool) {
	n := len(subs)
	sharing, counts := desiredCounts(n, len(targets))
	desired := make(map[int]int, n)
	for k, m := range subs {
		desired[m] = counts[k]
	}
	inTargets := make(map[tp]bool, len(targets))
	for _, x := range targets {
		inTargets[x] = true
	}

	// Step 1 (revokeUnassignablePartitions): the current assignment of these partitions.
	byPartition := make(map[tp][]int, len(targets)) // members per partition, ascending
	byMember := make(map[int]map[tp]bool, n)
	for _, m := range subs {
		byMember[m] = map[tp]bool{}
		for _, x := range sortedKeys(work[m]) {
			if inTargets[x] {
				byMember[m][x] = true
				byPartition[x] = append(byPartition[x], m)
			}
		}
	}
	unfilled := &orderedSet{}
	if homogeneous {
		for _, m := range subs {
			if len(byMember[m]) < desired[m] {
				unfilled.add(m)
			}
		}
	}

	// Step 2 (revokeOverfilledMembers).
	for _, m := range subs {
		if len(byMember[m]) <= desired[m] {
			continue
		}
		for _, x := range sortedKeys(byMember[m]) {
			delete(work[m], x)
			delete(byMember[m], x)
			byPartition[x] = slices.DeleteFunc(byPartition[x], func(y int) bool { return y == m })
			if len(byMember[m]) <= desired[m] {
				break
			}
		}
	}

	// Step 3 (revokeOversharedPartitions).
	for _, x := range targets {
		ms := byPartition[x]
		if len(ms) <= sharing {
			continue
		}
		keep := ms[:0:0]
		for i, m := range ms {
			if len(ms)-i+len(keep) <= sharing {
				keep = append(keep, ms[i:]...)
				break
			}
			delete(work[m], x)
			delete(byMember[m], x)
			if homogeneous {
				unfilled.add(m)
			}
		}
		byPartition[x] = keep
	}

	// Step 4 (assignRemainingPartitions).
	if !homogeneous {
		for _, m := range subs {
			if len(byMember[m]) < desired[m] {
				unfilled.add(m)
			}
		}
	}
	if len(unfilled.xs) == 0 {
		return
	}
	unfilled.restart()
	assignedThisPass := false
	for _, x := range targets {
		ms := byPartition[x]
		for toMake := sharing - len(ms); toMake > 0; {
			if !unfilled.hasNext() {
				if !assignedThisPass || len(unfilled.xs) == 0 {
					break
				}
				unfilled.restart()
				assignedThisPass = false
			}
			m := unfilled.next()
			if slices.Contains(ms, m) {
				continue
			}
			work[m][x] = true
			byMember[m][x] = true
			ms = append(ms, m)
			toMake--
			assignedThisPass = true
			if len(byMember[m]) >= desired[m] {
				unfilled.removeLast()
			}
		}
		byPartition[x] = ms
		if len(unfilled.xs) == 0 {
			break
		}
	}
}
