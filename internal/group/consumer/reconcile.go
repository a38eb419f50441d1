// Package consumer is the pure part of exactq's KIP-848 consumer groups (the
// "consumer" group protocol, ConsumerGroupHeartbeat): the reconciliation of one
// member's assignment towards its target (Kafka 4.4's CurrentAssignmentBuilder), the
// server-side assignors (uniform and range) and the topic regular expressions. It holds
// no group state and does no I/O; package group owns the groups, their records and
// their timers and calls these functions.
package consumer

import (
	"maps"
	"slices"
)

// TP is a topic partition by topic id.
type TP struct {
	Topic     [16]byte
	Partition int32
}

// Compare orders partitions by topic id, then partition.
func (a TP) Compare(b TP) int {
	for i := range a.Topic {
		if a.Topic[i] != b.Topic[i] {
			return int(a.Topic[i]) - int(b.Topic[i])
		}
	}
	return int(a.Partition) - int(b.Partition)
}

// Epochs is a set of partitions, each with the member epoch at which it was assigned
// (KIP-1251's assignment epochs: an offset commit with an older member epoch is still
// accepted for a partition assigned at or before that epoch).
type Epochs map[TP]int32

// Set is a set of partitions.
type Set map[TP]struct{}

// Sorted returns the partitions in TP order.
func (s Set) Sorted() []TP { return slices.SortedFunc(maps.Keys(s), TP.Compare) }

// Sorted returns the partitions in TP order.
func (e Epochs) Sorted() []TP { return slices.SortedFunc(maps.Keys(e), TP.Compare) }

// State is a member's reconciliation state, Kafka's MemberState with its record values.
type State int8

const (
	// Stable: the member owns its whole target at the target's epoch.
	Stable State = 0
	// UnrevokedPartitions: the member must first give up PendingRevocation; it stays at
	// its epoch until a heartbeat no longer lists them as owned.
	UnrevokedPartitions State = 1
	// UnreleasedPartitions: the member is at the target epoch but some target
	// partitions are still owned by other members; they are added once released.
	UnreleasedPartitions State = 2
	// Unknown is a state a newer coordinator may have written; the member is fenced.
	Unknown State = 127
)

func (s State) String() string {
	switch s {
	case Stable:
		return "STABLE"
	case UnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case UnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// Member is the assignment side of a member: what it owns, what it must revoke, its
// epochs and state (ConsumerGroupCurrentMemberAssignmentValue).
type Member struct {
	Epoch, PreviousEpoch int32
	State                State
	Assigned             Epochs
	PendingRevocation    Epochs
}

// ReconciledTo reports whether the member is Stable at epoch (ModernGroupMember.isReconciledTo).
func (m Member) ReconciledTo(epoch int32) bool { return m.State == Stable && m.Epoch == epoch }

// Equal reports whether two members have the same assignment state.
func (m Member) Equal(o Member) bool {
	return m.Epoch == o.Epoch && m.PreviousEpoch == o.PreviousEpoch && m.State == o.State &&
		maps.Equal(m.Assigned, o.Assigned) && maps.Equal(m.PendingRevocation, o.PendingRevocation)
}

// withEpoch is ConsumerGroupMember.Builder.updateMemberEpoch: the old epoch becomes the
// previous one.
func (m Member) withEpoch(epoch int32) Member {
	m.PreviousEpoch, m.Epoch = m.Epoch, epoch
	return m
}

// Input is what one reconciliation step looks at besides the member.
type Input struct {
	TargetEpoch int32
	Target      Set
	// Subscribed reports whether the member is subscribed to a topic id now (its topic
	// names and its resolved regex, by the current metadata).
	Subscribed func(topic [16]byte) bool
	// SubscriptionChanged forces the assignment to follow the subscription at once.
	SubscriptionChanged bool
	// OwnedBy reports whether a partition is owned (assigned or pending revocation) by
	// any member of the group: ConsumerGroup.currentPartitionEpoch != -1.
	OwnedBy func(tp TP) bool
	// Owned is what the heartbeat said the member owns; nil when it did not say.
	Owned Set
}

// ErrFenced is returned for a member in the Unknown state that still owns partitions.
type ErrFenced struct{}

func (ErrFenced) Error() string {
	return "the consumer group member is in an unknown state; it must abandon all its partitions and rejoin"
}

// Reconcile is one step of CurrentAssignmentBuilder.build: it moves m towards the
// target. Revocation comes first: while the member still reports owning a partition it
// must revoke, it keeps its epoch and gets nothing new; then it takes the target epoch
// and the target partitions not owned by anyone else.
func Reconcile(m Member, in Input) (Member, error) {
	switch m.State {
	case Stable:
		if m.Epoch != in.TargetEpoch {
			return next(m, m.Epoch, in), nil
		}
		if in.SubscriptionChanged {
			return followSubscription(m, in), nil
		}
		return m, nil
	case UnrevokedPartitions:
		if ownsAny(in.Owned, m.PendingRevocation) {
			if in.SubscriptionChanged {
				return followSubscription(m, in), nil
			}
			return m, nil
		}
		return next(m, m.Epoch, in), nil
	case UnreleasedPartitions:
		return next(m, m.Epoch, in), nil
	default:
		if in.Owned == nil || len(in.Owned) > 0 {
			return m, ErrFenced{}
		}
		return next(m, in.TargetEpoch, in), nil
	}
}

// ownsAny reports whether owned (nil: unknown, taken as "yes") holds any of revoke.
func ownsAny(owned Set, revoke Epochs) bool {
	if owned == nil {
		return true
	}
	for tp := range owned {
		if _, ok := revoke[tp]; ok {
			return true
		}
	}
	return false
}

// followSubscription is updateCurrentAssignment: the partitions of topics the member
// no longer subscribes to move to pending revocation.
func followSubscription(m Member, in Input) Member {
	var assigned, pending Epochs
	for tp, e := range m.Assigned {
		if in.Subscribed(tp.Topic) {
			continue
		}
		if assigned == nil {
			assigned, pending = maps.Clone(m.Assigned), maps.Clone(m.PendingRevocation)
			if pending == nil {
				pending = Epochs{}
			}
		}
		delete(assigned, tp)
		pending[tp] = e
	}
	if assigned == nil {
		return m // nothing left the subscription
	}
	out := m.withEpoch(m.Epoch)
	out.Assigned = assigned
	if ownsAny(in.Owned, pending) {
		out.State = UnrevokedPartitions
		out.PendingRevocation = pending
	}
	// Otherwise the member already gave those partitions up: they are dropped, and its
	// state and earlier pending revocations stay as they were.
	return out
}

// next is computeNextAssignment.
func next(m Member, epoch int32, in Input) Member {
	assigned := Epochs{}
	pending := Epochs{}
	for tp, e := range m.Assigned {
		if _, ok := in.Target[tp]; ok && in.Subscribed(tp.Topic) {
			assigned[tp] = e
		} else {
			pending[tp] = e
		}
	}
	unreleased := false
	var toAssign []TP
	for tp := range in.Target {
		if !in.Subscribed(tp.Topic) {
			continue
		}
		if _, ok := assigned[tp]; ok {
			continue
		}
		if _, mine := m.PendingRevocation[tp]; !mine && in.OwnedBy(tp) {
			unreleased = true
			continue
		}
		toAssign = append(toAssign, tp)
	}
	switch {
	case len(pending) > 0 && ownsAny(in.Owned, pending):
		out := m.withEpoch(epoch)
		out.State = UnrevokedPartitions
		out.Assigned, out.PendingRevocation = assigned, pending
		return out
	default:
		for _, tp := range toAssign {
			assigned[tp] = in.TargetEpoch
		}
		out := m.withEpoch(in.TargetEpoch)
		out.State = Stable
		if unreleased {
			out.State = UnreleasedPartitions
		}
		out.Assigned, out.PendingRevocation = assigned, Epochs{}
		return out
	}
}
