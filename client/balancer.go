package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Balancer is a consumer group partition assignor (Kafka's ConsumerPartitionAssignor):
// the group leader runs the one the coordinator chose among those every member offered.
// Use RangeBalancer or CooperativeStickyBalancer.
type Balancer interface {
	// Name is the protocol name sent in JoinGroup: "range" or "cooperative-sticky".
	Name() string

	// cooperative reports whether the balancer supports the cooperative rebalance
	// protocol (KIP-429): partitions that move are revoked in one rebalance and assigned
	// in the next.
	cooperative() bool
	// userData is the balancer's subscription user data for the member's generation.
	userData(generation int32) []byte
	// assign maps member id → partitions. partitions holds the partition count of every
	// subscribed topic that exists.
	assign(members []groupMember, partitions map[string]int32) (map[string][]TopicPartition, error)
}

// RangeBalancer is Kafka's RangeAssignor ("range"): per topic, partitions in order are cut
// into contiguous ranges over the topic's subscribers sorted by group instance id (static
// members first) then member id; the first members get one extra partition when the
// division is not even. Eager protocol only.
func RangeBalancer() Balancer { return rangeBalancer{} }

// CooperativeStickyBalancer is Kafka's CooperativeStickyAssignor ("cooperative-sticky"):
// a balanced assignment (within one partition when all members subscribe to the same
// topics) that keeps partitions with their current owners, under the cooperative
// protocol. Rack awareness is not implemented (members send no rack).
func CooperativeStickyBalancer() Balancer { return stickyBalancer{} }

// groupMember is one member's subscription as the leader sees it.
type groupMember struct {
	id         string
	instanceID *string
	topics     []string
	owned      []TopicPartition
	// generation is the generation the owned partitions belong to, -1 when unknown.
	generation int32
}

// Consumer protocol versions we write: subscription v3 carries owned partitions (v1),
// generation (v2) and rack (v3); assignment v3 is the same layout as v0 for our fields.
const (
	consumerProtocolSubscriptionVersion = 3
	consumerProtocolAssignmentVersion   = 3
	consumerProtocolType                = "consumer"
	defaultGeneration                   = -1
)

// encodeSubscription is the JoinGroup protocol metadata of a member.
func encodeSubscription(b Balancer, topics []string, owned []TopicPartition, generation int32) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = consumerProtocolSubscriptionVersion
	m.Topics = append([]string(nil), topics...)
	sort.Strings(m.Topics)
	m.UserData = b.userData(generation)
	m.Generation = generation
	for _, tp := range sortTPs(owned) {
		if n := len(m.OwnedPartitions); n == 0 || m.OwnedPartitions[n-1].Topic != tp.Topic {
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic = tp.Topic
			m.OwnedPartitions = append(m.OwnedPartitions, op)
		}
		op := &m.OwnedPartitions[len(m.OwnedPartitions)-1]
		op.Partitions = append(op.Partitions, tp.Partition)
	}
	return m.AppendTo(nil)
}

// decodeSubscription reads a member's JoinGroup protocol metadata. A subscription before
// v2 has no generation field; the cooperative-sticky user data (one int32) then carries
// it, as in Java's CooperativeStickyAssignor.memberData.
func decodeSubscription(id string, instanceID *string, raw []byte) (groupMember, error) {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(raw); err != nil {
		return groupMember{}, fmt.Errorf("client: member %s subscription: %w", id, err)
	}
	gm := groupMember{id: id, instanceID: instanceID, topics: m.Topics, generation: defaultGeneration}
	for _, op := range m.OwnedPartitions {
		for _, p := range op.Partitions {
			gm.owned = append(gm.owned, TopicPartition{op.Topic, p})
		}
	}
	switch {
	case m.Version >= 2:
		gm.generation = m.Generation
	case len(m.UserData) == 4:
		gm.generation = int32(binary.BigEndian.Uint32(m.UserData))
	}
	return gm, nil
}

// encodeAssignment is a member's SyncGroup assignment.
func encodeAssignment(parts []TopicPartition) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = consumerProtocolAssignmentVersion
	for _, tp := range sortTPs(parts) {
		if n := len(a.Topics); n == 0 || a.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = tp.Topic
			a.Topics = append(a.Topics, t)
		}
		t := &a.Topics[len(a.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	return a.AppendTo(nil)
}

// decodeAssignment reads a SyncGroup assignment; empty bytes are an empty assignment.
func decodeAssignment(raw []byte) ([]TopicPartition, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(raw); err != nil {
		return nil, fmt.Errorf("client: group assignment: %w", err)
	}
	var out []TopicPartition
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out = append(out, TopicPartition{t.Topic, p})
		}
	}
	return out, nil
}

func sortTPs(tps []TopicPartition) []TopicPartition {
	out := append([]TopicPartition(nil), tps...)
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i], out[j]) })
	return out
}

// ---- range ----

type rangeBalancer struct{}

func (rangeBalancer) Name() string              { return "range" }
func (rangeBalancer) cooperative() bool         { return false }
func (rangeBalancer) userData(gen int32) []byte { return nil }

// memberLess is Java's AbstractPartitionAssignor.MemberInfo order: members with a group
// instance id first, by instance id; then the others by member id.
func memberLess(a, b *groupMember) bool {
	switch {
	case a.instanceID != nil && b.instanceID != nil:
		if *a.instanceID != *b.instanceID {
			return *a.instanceID < *b.instanceID
		}
		return a.id < b.id
	case a.instanceID != nil:
		return true
	case b.instanceID != nil:
		return false
	}
	return a.id < b.id
}

func (rangeBalancer) assign(members []groupMember, partitions map[string]int32) (map[string][]TopicPartition, error) {
	partitions = subscribedPartitions(members, partitions)
	out := make(map[string][]TopicPartition, len(members))
	byTopic := map[string][]*groupMember{}
	for i := range members {
		m := &members[i]
		out[m.id] = nil
		for _, t := range dedupe(m.topics) {
			byTopic[t] = append(byTopic[t], m)
		}
	}
	for _, topic := range sortedKeys(byTopic) {
		n, ok := partitions[topic]
		subs := byTopic[topic]
		if !ok || n <= 0 {
			continue
		}
		sort.Slice(subs, func(i, j int) bool { return memberLess(subs[i], subs[j]) })
		per, extra := int(n)/len(subs), int(n)%len(subs)
		for i, m := range subs {
			start := per*i + min(i, extra)
			length := per
			if i < extra {
				length++
			}
			for p := start; p < start+length; p++ {
				out[m.id] = append(out[m.id], TopicPartition{topic, int32(p)})
			}
		}
	}
	return out, nil
}

// subscribedPartitions keeps the topics some member subscribes to that have partitions
// (AbstractPartitionAssignor.assign skips topics without metadata).
func subscribedPartitions(members []groupMember, partitions map[string]int32) map[string]int32 {
	out := map[string]int32{}
	for _, m := range members {
		for _, t := range m.topics {
			if n := partitions[t]; n > 0 {
				out[t] = n
			}
		}
	}
	return out
}

func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// ---- cooperative-sticky ----

type stickyBalancer struct{}

func (stickyBalancer) Name() string      { return "cooperative-sticky" }
func (stickyBalancer) cooperative() bool { return true }

// userData is Java's COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0: the generation as an
// int32, kept for leaders that read subscriptions older than v2.
func (stickyBalancer) userData(gen int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(gen))
}

// errAssignorState is returned when the sticky algorithm's own invariants break (Java
// throws IllegalStateException at the same points).
var errAssignorState = errors.New("client: cooperative-sticky assignor reached an invalid state")

// assign is AbstractStickyAssignor.assignPartitions followed by
// CooperativeStickyAssignor's adjustment: a partition moving to a new owner is left out
// of this round's assignment (the owner revokes it, rejoins, and the next round assigns
// it). Java iterates members in HashMap order; here members are visited in member id
// order, so the result is deterministic.
func (stickyBalancer) assign(members []groupMember, partitions map[string]int32) (map[string][]TopicPartition, error) {
	members = append([]groupMember(nil), members...)
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	partitions = subscribedPartitions(members, partitions)

	owned, multi, maxGen, equal := ownedPartitions(members, partitions)
	var (
		assignment   map[string][]TopicPartition
		transferring map[TopicPartition]string
		err          error
	)
	if equal {
		assignment, transferring, err = constrainedAssign(members, partitions, owned, multi)
	} else {
		assignment, err = generalAssign(members, partitions, owned, maxGen)
		if err == nil {
			transferring = computeTransferring(members, assignment)
		}
	}
	if err != nil {
		return nil, err
	}
	for tp, m := range transferring {
		assignment[m] = removeTP(assignment[m], tp)
	}
	return assignment, nil
}

// ownedPartitions is allSubscriptionsEqual: it reports whether every member subscribes
// to the same topics and returns each member's still-valid owned partitions. Two
// members of the same generation claiming one partition both lose it (multi); between
// generations, the newer claim wins.
func ownedPartitions(members []groupMember, partitions map[string]int32) (owned map[string][]TopicPartition, multi map[TopicPartition]bool, maxGen int32, equal bool) {
	owned = make(map[string][]TopicPartition, len(members))
	multi = map[TopicPartition]bool{}
	maxGen = defaultGeneration
	equal = true
	var first map[string]bool
	ownerOf := map[TopicPartition]*groupMember{}
	for i := range members {
		m := &members[i]
		topics := map[string]bool{}
		for _, t := range m.topics {
			topics[t] = true
		}
		if first == nil {
			first = topics
		} else if equal && !sameSet(first, topics) {
			equal = false
		}
		maxGen = max(maxGen, m.generation)
		owned[m.id] = []TopicPartition{}
		for _, tp := range m.owned {
			n, ok := partitions[tp.Topic]
			if !ok || tp.Partition < 0 || tp.Partition >= n {
				continue
			}
			other := ownerOf[tp]
			switch {
			case other == nil:
				owned[m.id] = append(owned[m.id], tp)
				ownerOf[tp] = m
			case m.generation == other.generation:
				multi[tp] = true
				owned[other.id] = removeTP(owned[other.id], tp)
				ownerOf[tp] = m
			case m.generation > other.generation:
				owned[m.id] = append(owned[m.id], tp)
				owned[other.id] = removeTP(owned[other.id], tp)
				ownerOf[tp] = m
			}
		}
	}
	return owned, multi, maxGen, equal
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func removeTP(s []TopicPartition, tp TopicPartition) []TopicPartition {
	for i, v := range s {
		if v == tp {
			return append(s[:i:i], s[i+1:]...)
		}
	}
	return s
}

// allPartitionsSorted lists the partitions of the topics in order.
func allPartitionsSorted(topics []string, partitions map[string]int32) []TopicPartition {
	var out []TopicPartition
	for _, t := range topics {
		for p := int32(0); p < partitions[t]; p++ {
			out = append(out, TopicPartition{t, p})
		}
	}
	return out
}

// constrainedAssign is Java's ConstrainedAssignmentBuilder (all subscriptions equal):
// every member keeps up to its quota of owned partitions, then the rest are dealt round
// robin to members under quota. It also returns the partitions changing owner.
func constrainedAssign(members []groupMember, partitions map[string]int32, owned map[string][]TopicPartition, multi map[TopicPartition]bool) (map[string][]TopicPartition, map[TopicPartition]string, error) {
	total := 0
	for _, n := range partitions {
		total += int(n)
	}
	numMembers := len(members)
	minQuota, maxQuota := total/numMembers, (total+numMembers-1)/numMembers
	expectedOver := total % numMembers
	currentOver := 0

	assignment := make(map[string][]TopicPartition, numMembers)
	transferring := map[TopicPartition]string{}
	maybeRevoked := map[TopicPartition]string{}
	assigned := map[TopicPartition]bool{}
	var under, exactlyMin []string

	for _, m := range members {
		ownedParts := append([]TopicPartition(nil), owned[m.id]...)
		sort.SliceStable(ownedParts, func(i, j int) bool {
			if ownedParts[i].Partition != ownedParts[j].Partition {
				return ownedParts[i].Partition < ownedParts[j].Partition
			}
			return ownedParts[i].Topic < ownedParts[j].Topic
		})
		kept := ownedParts[:0:0]
		for _, tp := range ownedParts {
			if !multi[tp] {
				kept = append(kept, tp)
			}
		}
		ownedParts = kept
		keep := func(n int) {
			assignment[m.id] = append(assignment[m.id], ownedParts[:n]...)
			for _, tp := range ownedParts[:n] {
				assigned[tp] = true
			}
			for _, tp := range ownedParts[n:] {
				maybeRevoked[tp] = m.id
			}
		}
		switch {
		case len(ownedParts) < minQuota:
			keep(len(ownedParts))
			under = append(under, m.id)
		case len(ownedParts) >= maxQuota && currentOver < expectedOver:
			currentOver++
			if currentOver == expectedOver {
				exactlyMin = nil
			}
			keep(maxQuota)
		default:
			keep(minQuota)
			if currentOver < expectedOver {
				exactlyMin = append(exactlyMin, m.id)
			}
		}
		if assignment[m.id] == nil {
			assignment[m.id] = []TopicPartition{}
		}
	}

	var unassigned []TopicPartition
	for _, tp := range allPartitionsSorted(sortedKeys(partitions), partitions) {
		if !assigned[tp] {
			unassigned = append(unassigned, tp)
		}
	}
	sort.Strings(under)
	sort.Strings(exactlyMin)

	assignNew := func(tp TopicPartition, m string) int {
		assignment[m] = append(assignment[m], tp)
		if prev, ok := maybeRevoked[tp]; (ok && prev != m) || multi[tp] {
			transferring[tp] = m
		}
		return len(assignment[m])
	}
	// Round robin over the members under quota (Java's iterator over a linked list with
	// removal: i is the iterator's position).
	i := 0
	for _, tp := range unassigned {
		var m string
		fromUnder := true
		switch {
		case i < len(under):
			m = under[i]
			i++
		case len(under) == 0 && len(exactlyMin) == 0:
			return nil, nil, fmt.Errorf("%w: no member left for %s[%d]", errAssignorState, tp.Topic, tp.Partition)
		case len(under) == 0:
			m, exactlyMin = exactlyMin[0], exactlyMin[1:]
			fromUnder = false
		default:
			i = 0
			m = under[i]
			i++
		}
		n := assignNew(tp, m)
		switch {
		case n == minQuota && fromUnder:
			i--
			under = append(under[:i:i], under[i+1:]...)
			exactlyMin = append(exactlyMin, m)
		case n == maxQuota:
			currentOver++
		}
	}
	if len(under) > 0 {
		if currentOver != expectedOver {
			return nil, nil, fmt.Errorf("%w: %d members over quota, want %d", errAssignorState, currentOver, expectedOver)
		}
		for _, m := range under {
			if len(assignment[m]) != minQuota {
				return nil, nil, fmt.Errorf("%w: member %s below quota", errAssignorState, m)
			}
		}
	}
	return assignment, transferring, nil
}

// computeTransferring is CooperativeStickyAssignor.computePartitionsTransferringOwnership:
// partitions assigned to a member that did not own them, which another member owned.
func computeTransferring(members []groupMember, assignment map[string][]TopicPartition) map[TopicPartition]string {
	added := map[TopicPartition]string{}
	revoked := map[TopicPartition]bool{}
	for _, m := range members {
		ownedSet := map[TopicPartition]bool{}
		for _, tp := range m.owned {
			ownedSet[tp] = true
		}
		assignedSet := map[TopicPartition]bool{}
		for _, tp := range assignment[m.id] {
			assignedSet[tp] = true
			if !ownedSet[tp] {
				added[tp] = m.id
			}
		}
		for _, tp := range m.owned {
			if !assignedSet[tp] {
				revoked[tp] = true
			}
		}
	}
	for tp := range added {
		if !revoked[tp] {
			delete(added, tp)
		}
	}
	return added
}
