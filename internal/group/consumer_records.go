package group

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/exactq/exactq/internal/group/consumer"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record types of KIP-848 consumer groups in __consumer_offsets (the apiKey of Kafka
// 4.4's ConsumerGroup*Key.json), written as the key's leading int16.
const (
	keyConsumerGroupMetadata          int16 = 3
	keyConsumerGroupPartitionMetadata int16 = 4 // replaced by the metadata hash in 4.1; skipped
	keyConsumerGroupMemberMetadata    int16 = 5
	keyConsumerGroupTargetMetadata    int16 = 6
	keyConsumerGroupTargetMember      int16 = 7
	keyConsumerGroupCurrentAssignment int16 = 8
	keyConsumerGroupRegex             int16 = 16 // resolved regexes: exactq resolves them live; skipped
)

func cgGroupKey(t int16, group string) []byte {
	switch t {
	case keyConsumerGroupMetadata:
		k := wire.ConsumerGroupMetadataKey{Version: t, Group: group}
		return k.AppendTo(nil)
	default:
		k := wire.ConsumerGroupTargetAssignmentMetadataKey{Version: t, Group: group}
		return k.AppendTo(nil)
	}
}

func cgMemberKey(t int16, group, member string) []byte {
	// The three member keys share one layout: type, group, member.
	k := wire.ConsumerGroupMemberMetadataKey{Version: t, Group: group, MemberID: member}
	return k.AppendTo(nil)
}

// cgEpochRecord is newConsumerGroupEpochRecord.
func cgEpochRecord(group string, epoch int32, hash int64) kmsg.Record {
	v := wire.ConsumerGroupMetadataValue{Epoch: epoch, MetadataHash: hash}
	return kmsg.Record{Key: cgGroupKey(keyConsumerGroupMetadata, group), Value: v.AppendTo(nil)}
}

// cgMemberRecord is newConsumerGroupMemberSubscriptionRecord.
func cgMemberRecord(group string, m *cgMember) kmsg.Record {
	v := wire.ConsumerGroupMemberMetadataValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		SubscribedTopicNames: m.topicNames, SubscribedTopicRegex: m.regex,
		RebalanceTimeoutMillis: m.rebalanceTimeoutMs, ServerAssignor: m.serverAssignor,
	}
	if v.SubscribedTopicNames == nil {
		v.SubscribedTopicNames = []string{}
	}
	if c := m.classic; c != nil {
		cm := wire.NewConsumerGroupMemberMetadataValueClassicMemberMetadata()
		cm.SessionTimeoutMillis = c.sessionTimeoutMs
		cm.SupportedProtocols = []wire.ConsumerGroupMemberMetadataValueClassicMemberMetadataSupportedProtocol{}
		for _, p := range c.protocols {
			sp := wire.NewConsumerGroupMemberMetadataValueClassicMemberMetadataSupportedProtocol()
			sp.Name, sp.Metadata = p.name, p.metadata
			if sp.Metadata == nil {
				sp.Metadata = []byte{}
			}
			cm.SupportedProtocols = append(cm.SupportedProtocols, sp)
		}
		v.ClassicMemberMetadata = &cm
	}
	return kmsg.Record{Key: cgMemberKey(keyConsumerGroupMemberMetadata, group, m.id), Value: v.AppendTo(nil)}
}

// cgTargetMetadataRecord is newConsumerGroupTargetAssignmentMetadataRecord.
func cgTargetMetadataRecord(group string, epoch int32, timestampMs int64) kmsg.Record {
	v := wire.ConsumerGroupTargetAssignmentMetadataValue{AssignmentEpoch: epoch, AssignmentTimestamp: timestampMs}
	return kmsg.Record{Key: cgGroupKey(keyConsumerGroupTargetMetadata, group), Value: v.AppendTo(nil)}
}

// byTopicID groups partitions by topic, topics and partitions in order.
func byTopicID(tps []consumer.TP) (topics [][16]byte, parts [][]int32) {
	for _, tp := range tps {
		if n := len(topics); n == 0 || topics[n-1] != tp.Topic {
			topics = append(topics, tp.Topic)
			parts = append(parts, nil)
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], tp.Partition)
	}
	return topics, parts
}

// cgTargetMemberRecord is newConsumerGroupTargetAssignmentRecord.
func cgTargetMemberRecord(group, member string, target consumer.Set) kmsg.Record {
	v := wire.ConsumerGroupTargetAssignmentMemberValue{Topics: []wire.ConsumerGroupTargetAssignmentMemberValueTopic{}}
	topics, parts := byTopicID(target.Sorted())
	for i, t := range topics {
		v.Topics = append(v.Topics, wire.ConsumerGroupTargetAssignmentMemberValueTopic{TopicID: t, Partitions: parts[i]})
	}
	return kmsg.Record{Key: cgMemberKey(keyConsumerGroupTargetMember, group, member), Value: v.AppendTo(nil)}
}

// cgCurrentRecord is newConsumerGroupCurrentAssignmentRecord.
func cgCurrentRecord(group, member string, m consumer.Member) kmsg.Record {
	v := wire.ConsumerGroupCurrentMemberAssignmentValue{
		MemberEpoch: m.Epoch, PreviousMemberEpoch: m.PreviousEpoch, State: int8(m.State),
		AssignedPartitions:          []wire.ConsumerGroupCurrentMemberAssignmentValueAssignedPartition{},
		PartitionsPendingRevocation: []wire.ConsumerGroupCurrentMemberAssignmentValuePartitionsPendingRevocation{},
	}
	epochsOf := func(e consumer.Epochs, t [16]byte, ps []int32) []int32 {
		out := make([]int32, len(ps))
		for i, p := range ps {
			out[i] = e[consumer.TP{Topic: t, Partition: p}]
		}
		return out
	}
	topics, parts := byTopicID(m.Assigned.Sorted())
	for i, t := range topics {
		v.AssignedPartitions = append(v.AssignedPartitions, wire.ConsumerGroupCurrentMemberAssignmentValueAssignedPartition{
			TopicID: t, Partitions: parts[i], AssignmentEpochs: epochsOf(m.Assigned, t, parts[i])})
	}
	topics, parts = byTopicID(m.PendingRevocation.Sorted())
	for i, t := range topics {
		v.PartitionsPendingRevocation = append(v.PartitionsPendingRevocation, wire.ConsumerGroupCurrentMemberAssignmentValuePartitionsPendingRevocation{
			TopicID: t, Partitions: parts[i], Epochs: epochsOf(m.PendingRevocation, t, parts[i])})
	}
	return kmsg.Record{Key: cgMemberKey(keyConsumerGroupCurrentAssignment, group, member), Value: v.AppendTo(nil)}
}

// isConsumerGroupRecord reports whether a __consumer_offsets key type is a consumer
// group's.
func isConsumerGroupRecord(t int16) bool {
	return (t >= keyConsumerGroupMetadata && t <= keyConsumerGroupCurrentAssignment) || t == keyConsumerGroupRegex
}

// replayConsumerRecord applies one consumer group record, live (the heartbeat path
// applies every record it emits through here, so memory is what a replay rebuilds) or at
// load (GroupMetadataManager.replay for these types).
func (s *shard) replayConsumerRecord(t int16, r kmsg.Record, nowMs int64) error {
	switch t {
	case keyConsumerGroupPartitionMetadata, keyConsumerGroupRegex:
		return nil
	case keyConsumerGroupMetadata, keyConsumerGroupTargetMetadata:
		var k wire.ConsumerGroupMetadataKey // both group keys have this layout
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("consumer group key: %w", err)
		}
		if r.Value == nil {
			if t == keyConsumerGroupMetadata {
				// The last record of a deleted group (createGroupTombstoneRecords).
				delete(s.consumers, k.Group)
			}
			return nil
		}
		g := s.consumerGroupForReplay(k.Group, nowMs)
		if t == keyConsumerGroupMetadata {
			var v wire.ConsumerGroupMetadataValue
			if err := v.ReadFrom(r.Value); err != nil {
				return fmt.Errorf("consumer group metadata value: %w", err)
			}
			g.epoch, g.metadataHash = v.Epoch, v.MetadataHash
			return nil
		}
		var v wire.ConsumerGroupTargetAssignmentMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("consumer group target metadata value: %w", err)
		}
		g.assignmentEpoch, g.assignmentTimestampMs = v.AssignmentEpoch, v.AssignmentTimestamp
		return nil
	}
	var k wire.ConsumerGroupMemberMetadataKey
	if err := k.ReadFrom(r.Key); err != nil {
		return fmt.Errorf("consumer group member key: %w", err)
	}
	if r.Value == nil {
		g := s.consumers[k.Group]
		if g == nil {
			return nil
		}
		switch t {
		case keyConsumerGroupMemberMetadata:
			g.removeMember(k.MemberID)
		case keyConsumerGroupTargetMember:
			delete(g.target, k.MemberID)
		case keyConsumerGroupCurrentAssignment:
			if m := g.members[k.MemberID]; m != nil {
				g.setAssignment(m, consumer.Member{Epoch: -1, PreviousEpoch: -1, Assigned: consumer.Epochs{}, PendingRevocation: consumer.Epochs{}})
			}
		}
		return nil
	}
	g := s.consumerGroupForReplay(k.Group, nowMs)
	switch t {
	case keyConsumerGroupMemberMetadata:
		var v wire.ConsumerGroupMemberMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("consumer group member value: %w", err)
		}
		m := g.memberForReplay(k.MemberID)
		if m.instanceID != nil && (v.InstanceID == nil || *v.InstanceID != *m.instanceID) {
			delete(g.static, *m.instanceID)
		}
		m.instanceID, m.rackID, m.clientID, m.clientHost = v.InstanceID, v.RackID, v.ClientID, v.ClientHost
		m.topicNames, m.regex = slices.Clone(v.SubscribedTopicNames), v.SubscribedTopicRegex
		m.rebalanceTimeoutMs, m.serverAssignor = v.RebalanceTimeoutMillis, v.ServerAssignor
		m.classic = nil
		if c := v.ClassicMemberMetadata; c != nil && len(c.SupportedProtocols) > 0 {
			m.classic = &classicMeta{sessionTimeoutMs: c.SessionTimeoutMillis}
			for _, p := range c.SupportedProtocols {
				m.classic.protocols = append(m.classic.protocols, protocol{name: p.Name, metadata: p.Metadata})
			}
		}
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
	case keyConsumerGroupTargetMember:
		var v wire.ConsumerGroupTargetAssignmentMemberValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("consumer group target member value: %w", err)
		}
		set := consumer.Set{}
		for _, tp := range v.Topics {
			for _, p := range tp.Partitions {
				set[consumer.TP{Topic: tp.TopicID, Partition: p}] = struct{}{}
			}
		}
		g.target[k.MemberID] = set
	case keyConsumerGroupCurrentAssignment:
		var v wire.ConsumerGroupCurrentMemberAssignmentValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("consumer group current assignment value: %w", err)
		}
		a := consumer.Member{Epoch: v.MemberEpoch, PreviousEpoch: v.PreviousMemberEpoch, State: consumer.State(v.State),
			Assigned: consumer.Epochs{}, PendingRevocation: consumer.Epochs{}}
		switch a.State {
		case consumer.Stable, consumer.UnrevokedPartitions, consumer.UnreleasedPartitions:
		default:
			a.State = consumer.Unknown
		}
		for _, tp := range v.AssignedPartitions {
			for i, p := range tp.Partitions {
				a.Assigned[consumer.TP{Topic: tp.TopicID, Partition: p}] = epochAt(tp.AssignmentEpochs, i, v.MemberEpoch)
			}
		}
		for _, tp := range v.PartitionsPendingRevocation {
			for i, p := range tp.Partitions {
				a.PendingRevocation[consumer.TP{Topic: tp.TopicID, Partition: p}] = epochAt(tp.Epochs, i, v.MemberEpoch)
			}
		}
		g.setAssignment(g.memberForReplay(k.MemberID), a)
	}
	return nil
}

// epochAt is the assignment epoch of the i-th partition; a record written before 4.4
// has none, and Kafka then takes the member epoch.
func epochAt(epochs []int32, i int, memberEpoch int32) int32 {
	if i < len(epochs) {
		return epochs[i]
	}
	return memberEpoch
}

// consumerGroupForReplay returns the consumer group id, creating it. An Empty classic
// group of the same id (one that only held offsets) gives way to it, as Kafka's
// getOrMaybeCreatePersistedConsumerGroup does.
func (s *shard) consumerGroupForReplay(id string, nowMs int64) *consumerGroup {
	if g := s.consumers[id]; g != nil {
		return g
	}
	if cg := s.groups[id]; cg != nil && cg.is(stateEmpty) {
		delete(s.groups, id)
	}
	g := newConsumerGroup(id, nowMs)
	s.consumers[id] = g
	return g
}

// consumerKeyType reads the record type of a __consumer_offsets key.
func consumerKeyType(key []byte) int16 { return int16(binary.BigEndian.Uint16(key)) }
