package group

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record key versions of __consumer_offsets (the "apiKey" of Kafka's coordinator record
// schemas, written as the key's leading int16).
const (
	keyOffsetCommitLegacy int16 = 0
	keyOffsetCommit       int16 = 1
	keyGroupMetadata      int16 = 2
)

// groupMetadataValueVersion is what Kafka 4.4 writes (GroupCoordinatorRecordHelpers).
const groupMetadataValueVersion int16 = 3

func offsetKeyBytes(group, topic string, partition int32) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version = keyOffsetCommit
	k.Group, k.Topic, k.Partition = group, topic, partition
	return k.AppendTo(nil)
}

func groupKeyBytes(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version = keyGroupMetadata
	k.Group = group
	return k.AppendTo(nil)
}

// offsetRecord is newOffsetCommitRecord: value v4, or v1 when the commit carries an
// explicit expire timestamp (OffsetCommit v2-v4 with a retention time).
func offsetRecord(group, topic string, partition int32, o committed) kmsg.Record {
	v := kmsg.NewOffsetCommitValue()
	v.Version = 4
	if o.expireMs >= 0 {
		v.Version = 1
		v.ExpireTimestamp = o.expireMs
	}
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitMs
	v.TopicID = o.topicID
	return kmsg.Record{Key: offsetKeyBytes(group, topic, partition), Value: v.AppendTo(nil)}
}

func offsetTombstone(group, topic string, partition int32) kmsg.Record {
	return kmsg.Record{Key: offsetKeyBytes(group, topic, partition)}
}

func groupTombstone(group string) kmsg.Record {
	return kmsg.Record{Key: groupKeyBytes(group)}
}

// groupRecord is newGroupMetadataRecord. assignment nil means "the members' current
// assignments".
func groupRecord(g *classicGroup, assignment map[string][]byte) kmsg.Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = nilIfEmpty(g.protocolName)
	v.Leader = nilIfEmpty(g.leaderID)
	v.CurrentStateTimestamp = g.stateTimestampMs
	for _, m := range g.memberList() {
		mm := kmsg.NewGroupMetadataValueMember()
		mm.MemberID = m.id
		mm.InstanceID = m.instanceID
		mm.ClientID = m.clientID
		mm.ClientHost = m.clientHost
		mm.RebalanceTimeoutMillis = m.rebalanceTimeoutMs
		mm.SessionTimeoutMillis = m.sessionTimeoutMs
		mm.Subscription = m.metadataFor(g.protocolName)
		if mm.Subscription == nil {
			mm.Subscription = []byte{}
		}
		a := m.assignment
		if assignment != nil {
			a = assignment[m.id]
		}
		if a == nil {
			a = []byte{}
		}
		mm.Assignment = a
		v.Members = append(v.Members, mm)
	}
	return kmsg.Record{Key: groupKeyBytes(g.id), Value: v.AppendTo(nil)}
}

// emptyGroupRecord is newEmptyGroupMetadataRecord (written when a group is created).
func emptyGroupRecord(g *classicGroup) kmsg.Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.CurrentStateTimestamp = g.stateTimestampMs
	return kmsg.Record{Key: groupKeyBytes(g.id), Value: v.AppendTo(nil)}
}

// replayRecord applies one stored record. offset is its log offset; producerID is -1
// unless the record is part of a transactional batch.
func (s *shard) replayRecord(r kmsg.Record, offset, producerID int64, nowMs int64) error {
	if len(r.Key) < 2 {
		return fmt.Errorf("group: record at offset %d has a %d-byte key", offset, len(r.Key))
	}
	switch int16(binary.BigEndian.Uint16(r.Key)) {
	case keyOffsetCommitLegacy, keyOffsetCommit:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("group: offset commit key at offset %d: %w", offset, err)
		}
		if r.Value == nil {
			s.applyOffsetTombstone(k.Group, k.Topic, k.Partition, offset)
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("group: offset commit value at offset %d: %w", offset, err)
		}
		c := committed{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitMs: v.CommitTimestamp,
			expireMs: -1, recordOffset: offset, topicID: v.TopicID}
		if v.Version >= 3 {
			c.leaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 {
			c.expireMs = v.ExpireTimestamp
		}
		s.simpleGroupIfMissing(k.Group, nowMs)
		if producerID >= 0 {
			s.offsets.addPending(producerID, k.Group, k.Topic, k.Partition, c)
		} else {
			s.offsets.put(k.Group, k.Topic, k.Partition, c)
		}
	case keyGroupMetadata:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("group: group metadata key at offset %d: %w", offset, err)
		}
		if r.Value == nil {
			delete(s.groups, k.Group)
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("group: group metadata value at offset %d: %w", offset, err)
		}
		s.groups[k.Group] = groupFromRecord(k.Group, &v)
	default:
		if t := consumerKeyType(r.Key); isConsumerGroupRecord(t) {
			if err := s.replayConsumerRecord(t, r, nowMs); err != nil {
				return fmt.Errorf("group: record at offset %d: %w", offset, err)
			}
		}
		// Records of other group types (share and streams groups) are not ours to load.
	}
	return nil
}

// groupFromRecord rebuilds a group the way GroupMetadataManager.replay does: Stable with
// its members, or Empty.
func groupFromRecord(id string, v *kmsg.GroupMetadataValue) *classicGroup {
	g := newClassicGroup(id, v.CurrentStateTimestamp)
	g.generation = v.Generation
	g.protocolType = v.ProtocolType
	if v.Protocol != nil {
		g.protocolName = *v.Protocol
	}
	for _, mm := range v.Members {
		rebalance := mm.RebalanceTimeoutMillis
		if rebalance == -1 {
			rebalance = mm.SessionTimeoutMillis
		}
		g.add(&member{
			id: mm.MemberID, instanceID: mm.InstanceID, clientID: mm.ClientID, clientHost: mm.ClientHost,
			rebalanceTimeoutMs: rebalance, sessionTimeoutMs: mm.SessionTimeoutMillis,
			protocolType: v.ProtocolType, protocols: []protocol{{name: g.protocolName, metadata: mm.Subscription}},
			assignment: mm.Assignment,
		})
	}
	g.protocolType = v.ProtocolType // add() sets it from the first member too
	if v.Leader != nil {
		g.leaderID = *v.Leader
	} else {
		g.leaderID = ""
	}
	if len(g.members) > 0 {
		g.state = stateStable
	}
	g.subscribed = g.computeSubscribed()
	return g
}

// replayMarker applies a transaction marker found in the log.
func (s *shard) replayMarker(producerID int64, commit bool) {
	s.offsets.completeTxn(producerID, commit)
}

// loaded finishes a replay, like GroupMetadataManager.onLoaded: every loaded member gets
// a fresh session deadline and an over-capacity group rebalances.
func (s *shard) loaded(nowMs int64, out *output) {
	s.loadedConsumers(nowMs)
	for _, g := range s.groups {
		for _, m := range g.memberList() {
			s.rescheduleHeartbeat(g, m, nowMs)
		}
		if s.cfg.maxGroupSize > 0 && len(g.members) > int(s.cfg.maxGroupSize) {
			s.prepareRebalance(g, nowMs, out)
		}
	}
}

// simpleGroupIfMissing creates the protocol-less Empty group Kafka keeps for a group that
// only stores offsets.
func (s *shard) simpleGroupIfMissing(id string, nowMs int64) *classicGroup {
	if s.consumers[id] != nil {
		return nil // a consumer group keeps its offsets itself
	}
	g := s.groups[id]
	if g == nil {
		g = newClassicGroup(id, nowMs)
		s.groups[id] = g
	}
	return g
}
