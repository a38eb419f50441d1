package consumer

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// Assignor names, as ConsumerGroupHeartbeat's ServerAssignor and group.consumer.assignors
// spell them.
const (
	UniformName = "uniform"
	RangeName   = "range"
)

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	ID         string
	InstanceID *string
	// Topics are the ids of the existing topics the member subscribes to.
	Topics map[[16]byte]bool
	// Current is the member's current target assignment (the assignors are sticky).
	Current Set
}

// Assignor computes a target assignment: every partition of a topic some member
// subscribes to goes to exactly one member subscribed to it. partitions maps each
// subscribed topic id to its partition count. The result has an entry for every member.
type Assignor func(members []AssignMember, partitions map[[16]byte]int32) map[string]Set

// ByName returns the assignor called name.
func ByName(name string) (Assignor, bool) {
	switch name {
	case UniformName:
		return Uniform, true
	case RangeName:
		return Range, true
	}
	return nil, false
}

func homogeneous(members []AssignMember) bool {
	for _, m := range members[1:] {
		if !maps.Equal(m.Topics, members[0].Topics) {
			return false
		}
	}
	return true
}

func sortedTopics(ts map[[16]byte]bool) [][16]byte {
	out := slices.Collect(maps.Keys(ts))
	slices.SortFunc(out, func(a, b [16]byte) int { return strings.Compare(string(a[:]), string(b[:])) })
	return out
}

func emptyResult(members []AssignMember) map[string]Set {
	out := make(map[string]Set, len(members))
	for _, m := range members {
		out[m.ID] = Set{}
	}
	return out
}

// Range is Kafka's server-side RangeAssignor: members sorted by instance id (members
// with one first), then member id; each topic's partitions split into contiguous ranges
// over the members subscribed to it, the first (partitions mod members) members taking
// one more. Members with the same subscriptions get co-partitioned ranges.
func Range(members []AssignMember, partitions map[[16]byte]int32) map[string]Set {
	out := emptyResult(members)
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b AssignMember) int {
		switch {
		case a.InstanceID != nil && b.InstanceID != nil:
			return strings.Compare(*a.InstanceID, *b.InstanceID)
		case a.InstanceID != nil:
			return -1
		case b.InstanceID != nil:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	type topicRanges struct{ members, minQuota, extra, next int32 }
	topics := map[[16]byte]*topicRanges{}
	for _, m := range sorted {
		for t := range m.Topics {
			if _, ok := partitions[t]; !ok {
				continue
			}
			if topics[t] == nil {
				topics[t] = &topicRanges{}
			}
			topics[t].members++
		}
	}
	for t, r := range topics {
		r.minQuota, r.extra = partitions[t]/r.members, partitions[t]%r.members
	}
	for _, m := range sorted {
		for _, t := range sortedTopics(m.Topics) {
			r := topics[t]
			if r == nil {
				continue
			}
			quota := r.minQuota
			if r.extra > 0 {
				quota++
				r.extra--
			}
			end := min(r.next+quota, partitions[t])
			for p := r.next; p < end; p++ {
				out[m.ID][TP{t, p}] = struct{}{}
			}
			r.next = end
		}
	}
	return out
}

// Uniform is Kafka's UniformAssignor: a balanced assignment (member counts differ by at
// most one where subscriptions allow) that keeps as much of the current one as it can.
// A homogeneous group (every member with the same subscriptions) follows Kafka's
// UniformHomogeneousAssignmentBuilder with members in id order; a heterogeneous group
// keeps each member's current partitions of its topics, places the rest on the
// least-loaded subscribed member, then moves partitions from the most to the least
// loaded subscribed members until no move evens them further. Kafka's heterogeneous
// builder reaches the same kind of balance by another route, so which member gets
// which partition may differ from Kafka's; the balance and stickiness do not.
func Uniform(members []AssignMember, partitions map[[16]byte]int32) map[string]Set {
	if len(members) == 0 {
		return map[string]Set{}
	}
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b AssignMember) int { return strings.Compare(a.ID, b.ID) })
	if homogeneous(sorted) {
		return uniformHomogeneous(sorted, partitions)
	}
	return uniformHeterogeneous(sorted, partitions)
}

// valid reports whether tp is a partition of a topic m subscribes to that exists.
func valid(m AssignMember, tp TP, partitions map[[16]byte]int32) bool {
	n, ok := partitions[tp.Topic]
	return ok && m.Topics[tp.Topic] && tp.Partition >= 0 && tp.Partition < n
}

func uniformHomogeneous(members []AssignMember, partitions map[[16]byte]int32) map[string]Set {
	out := emptyResult(members)
	topics := sortedTopics(members[0].Topics)
	total := 0
	// A partition claimed by two members (a current assignment cannot hold one, but
	// the assignor does not rely on that) stays with the first.
	taken := Set{}
	current := make([][]TP, len(members))
	for i, m := range members {
		for _, tp := range m.Current.Sorted() {
			if _, dup := taken[tp]; !dup && valid(m, tp, partitions) {
				taken[tp] = struct{}{}
				current[i] = append(current[i], tp)
			}
		}
	}
	var unassigned []TP
	for _, t := range topics {
		n, ok := partitions[t]
		if !ok {
			continue
		}
		total += int(n)
		for p := range n {
			if _, ok := taken[TP{t, p}]; !ok {
				unassigned = append(unassigned, TP{t, p})
			}
		}
	}
	minQuota, extra := total/len(members), total%len(members)
	type unfilled struct {
		id    string
		quota int
	}
	var open []unfilled
	for i, m := range members {
		quota := minQuota
		hasExtra := false
		if extra > 0 {
			quota++
			hasExtra = true
		}
		for _, tp := range current[i] {
			if quota > 0 {
				quota--
				out[m.ID][tp] = struct{}{}
			} else {
				unassigned = append(unassigned, tp)
			}
		}
		if quota > 0 && hasExtra && len(members)-i > extra {
			// Leave the extra partition to a later member unless this is one of the
			// last members that must take one.
			quota--
			hasExtra = false
		}
		if quota > 0 {
			open = append(open, unfilled{m.ID, quota})
		}
		if hasExtra {
			extra--
		}
	}
	next := 0
	for _, u := range open {
		for i := 0; i < u.quota && next < len(unassigned); i++ {
			out[u.id][unassigned[next]] = struct{}{}
			next++
		}
	}
	return out
}

func uniformHeterogeneous(members []AssignMember, partitions map[[16]byte]int32) map[string]Set {
	out := emptyResult(members)
	owner := map[TP]int{}
	subscribers := map[[16]byte][]int{}
	for i, m := range members {
		for t := range m.Topics {
			if _, ok := partitions[t]; ok {
				subscribers[t] = append(subscribers[t], i)
			}
		}
	}
	for i, m := range members {
		for _, tp := range m.Current.Sorted() {
			if _, dup := owner[tp]; dup || !valid(m, tp, partitions) {
				continue
			}
			owner[tp] = i
			out[m.ID][tp] = struct{}{}
		}
	}
	// Topics with fewer subscribers first: they have fewer places to go.
	topics := slices.Collect(maps.Keys(subscribers))
	slices.SortFunc(topics, func(a, b [16]byte) int {
		return cmp.Or(cmp.Compare(len(subscribers[a]), len(subscribers[b])), strings.Compare(string(a[:]), string(b[:])))
	})
	leastLoaded := func(cands []int) int {
		best := cands[0]
		for _, c := range cands[1:] {
			if len(out[members[c].ID]) < len(out[members[best].ID]) {
				best = c
			}
		}
		return best
	}
	for _, t := range topics {
		for p := range partitions[t] {
			tp := TP{t, p}
			if _, ok := owner[tp]; ok {
				continue
			}
			i := leastLoaded(subscribers[t])
			owner[tp] = i
			out[members[i].ID][tp] = struct{}{}
		}
	}
	// Even out: a partition moves only to a subscriber holding at least two fewer, so
	// every move lowers the sum of squared counts and the loop ends.
	total := len(owner)
	for range total*len(members) + 1 {
		moved := false
		for _, tp := range slices.SortedFunc(maps.Keys(owner), TP.Compare) {
			from := owner[tp]
			to := leastLoaded(subscribers[tp.Topic])
			if len(out[members[to].ID])+1 < len(out[members[from].ID]) {
				delete(out[members[from].ID], tp)
				out[members[to].ID][tp] = struct{}{}
				owner[tp] = to
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	return out
}
