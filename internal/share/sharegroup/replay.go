package sharegroup

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func tombstone(typ int16, groupID, memberID string) kmsg.Record {
	return kmsg.Record{Key: encodeKey(recordKey{Type: typ, GroupID: groupID, MemberID: memberID})}
}

func memberMetadataRecord(groupID string, m *member) kmsg.Record {
	v := memberMetadataValue{RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost, SubscribedTopicNames: m.topics}
	return kmsg.Record{Key: encodeKey(recordKey{Type: recMemberMetadata, GroupID: groupID, MemberID: m.id}), Value: v.encode()}
}

func metadataRecord(groupID string, epoch int32, hash int64) kmsg.Record {
	v := metadataValue{Epoch: epoch, MetadataHash: hash}
	return kmsg.Record{Key: encodeKey(recordKey{Type: recMetadata, GroupID: groupID}), Value: v.encode()}
}

func targetMetadataRecord(groupID string, epoch int32, tsMs int64) kmsg.Record {
	v := targetAssignmentMetadataValue{AssignmentEpoch: epoch, AssignmentTimestampMs: tsMs}
	return kmsg.Record{Key: encodeKey(recordKey{Type: recTargetAssignmentMetadata, GroupID: groupID}), Value: v.encode()}
}

func targetMemberRecord(groupID, memberID string, a Assignment) kmsg.Record {
	v := targetAssignmentMemberValue{TopicPartitions: a.toRecord()}
	return kmsg.Record{Key: encodeKey(recordKey{Type: recTargetAssignmentMember, GroupID: groupID, MemberID: memberID}), Value: v.encode()}
}

func currentAssignmentRecord(groupID string, m *member) kmsg.Record {
	v := currentMemberAssignmentValue{MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: m.state, AssignedPartitions: m.assigned.toRecord()}
	return kmsg.Record{Key: encodeKey(recordKey{Type: recCurrentMemberAssignment, GroupID: groupID, MemberID: m.id}), Value: v.encode()}
}

func initTopics(m map[[16]byte]*initEntry) []initTopic {
	out := []initTopic{}
	for _, id := range slices.SortedFunc(maps.Keys(m), compareIDs) {
		out = append(out, initTopic{TopicID: id, TopicName: m[id].name, Partitions: m[id].sorted()})
	}
	return out
}

func statePartitionRecord(groupID string, initializing, initialized map[[16]byte]*initEntry, deleting map[[16]byte]string) kmsg.Record {
	v := statePartitionMetadataValue{InitializingTopics: initTopics(initializing), InitializedTopics: initTopics(initialized), DeletingTopics: []deletingTopic{}}
	for _, id := range slices.SortedFunc(maps.Keys(deleting), compareIDs) {
		v.DeletingTopics = append(v.DeletingTopics, deletingTopic{TopicID: id, TopicName: deleting[id]})
	}
	return kmsg.Record{Key: encodeKey(recordKey{Type: recStatePartitionMetadata, GroupID: groupID}), Value: v.encode()}
}

// isShareRecord reports whether a __consumer_offsets record is a share-group record.
func isShareRecord(r kmsg.Record) bool {
	_, ok, err := decodeKey(r.Key)
	return ok && err == nil
}

// replay applies one record, live or at load (GroupMetadataManager.replay for the
// ShareGroup* records). Records of other group types are skipped. nowMs timestamps
// initializing topics, as Kafka does on replay.
func (s *shard) replay(r kmsg.Record, nowMs int64) error {
	k, ok, err := decodeKey(r.Key)
	if err != nil {
		if len(r.Key) >= 2 && !isShareRecordType(int16(uint16(r.Key[0])<<8|uint16(r.Key[1]))) {
			return nil // a key of another record type that our decoder need not understand
		}
		return err
	}
	if !ok {
		return nil
	}
	g := s.groups[k.GroupID]
	getGroup := func() *group {
		if g == nil {
			g = newGroup(k.GroupID)
			s.groups[k.GroupID] = g
		}
		return g
	}
	getMember := func() *member {
		m := getGroup().members[k.MemberID]
		if m == nil {
			m = &member{id: k.MemberID, topics: []string{}, assigned: Assignment{}}
			g.members[k.MemberID] = m
		}
		return m
	}
	tomb := r.Value == nil
	switch k.Type {
	case recMemberMetadata:
		if tomb {
			if g != nil {
				delete(g.members, k.MemberID)
				delete(g.deadlines, k.MemberID)
			}
			return nil
		}
		v, err := decodeMemberMetadata(r.Value)
		if err != nil {
			return err
		}
		m := getMember()
		m.rackID, m.clientID, m.clientHost = v.RackID, v.ClientID, v.ClientHost
		m.topics = sortedUnique(v.SubscribedTopicNames)
	case recMetadata:
		if tomb {
			if g != nil {
				if len(g.members) > 0 {
					return fmt.Errorf("sharegroup: tombstone for group %q with %d members", k.GroupID, len(g.members))
				}
				delete(s.groups, k.GroupID)
			}
			return nil
		}
		v, err := decodeMetadata(r.Value)
		if err != nil {
			return err
		}
		getGroup()
		g.epoch, g.metadataHash = v.Epoch, v.MetadataHash
	case recTargetAssignmentMetadata:
		if tomb {
			if g != nil {
				g.assignmentEpoch, g.assignmentTsMs = -1, 0
			}
			return nil
		}
		v, err := decodeTargetAssignmentMetadata(r.Value)
		if err != nil {
			return err
		}
		getGroup()
		g.assignmentEpoch, g.assignmentTsMs = v.AssignmentEpoch, v.AssignmentTimestampMs
	case recTargetAssignmentMember:
		if tomb {
			if g != nil {
				delete(g.target, k.MemberID)
			}
			return nil
		}
		v, err := decodeTargetAssignmentMember(r.Value)
		if err != nil {
			return err
		}
		getGroup().target[k.MemberID] = assignmentFromRecord(v.TopicPartitions)
	case recCurrentMemberAssignment:
		if tomb {
			if g != nil {
				if m := g.members[k.MemberID]; m != nil {
					m.epoch, m.prevEpoch, m.assigned = -1, -1, Assignment{}
				}
			}
			return nil
		}
		v, err := decodeCurrentMemberAssignment(r.Value)
		if err != nil {
			return err
		}
		m := getMember()
		m.epoch, m.prevEpoch, m.state = v.MemberEpoch, v.PreviousMemberEpoch, v.State
		m.assigned = assignmentFromRecord(v.AssignedPartitions)
	case recStatePartitionMetadata:
		if tomb {
			if g != nil {
				g.initializing, g.initialized, g.deleting = map[[16]byte]*initEntry{}, map[[16]byte]*initEntry{}, map[[16]byte]string{}
				g.stateMeta = false
			}
			return nil
		}
		v, err := decodeStatePartitionMetadata(r.Value)
		if err != nil {
			return err
		}
		getGroup()
		g.stateMeta = true
		g.initializing = entriesFrom(v.InitializingTopics, nowMs)
		g.initialized = entriesFrom(v.InitializedTopics, nowMs)
		g.deleting = map[[16]byte]string{}
		for _, t := range v.DeletingTopics {
			g.deleting[t.TopicID] = t.TopicName
		}
	}
	return nil
}

// entriesFrom rebuilds a topic map. Timestamps are not persisted: every topic is stamped
// with the replay time, as GroupMetadataManager.replay does (so an initialization that
// never completed is retried group.share.initialize.retry.interval.ms after a restart).
func entriesFrom(ts []initTopic, nowMs int64) map[[16]byte]*initEntry {
	out := make(map[[16]byte]*initEntry, len(ts))
	for _, t := range ts {
		e := out[t.TopicID]
		if e == nil {
			e = &initEntry{name: t.TopicName, parts: map[int32]bool{}, tsMs: nowMs}
			out[t.TopicID] = e
		}
		for _, p := range t.Partitions {
			e.parts[p] = true
		}
	}
	return out
}
