package group

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AllGroupOperations is every operation Kafka defines on a GROUP resource (READ, DELETE,
// DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) as a bit set of AclOperation codes: what Kafka
// reports as a group's authorized operations when no authorizer is configured
// (AuthHelper.authorizedOperations).
const AllGroupOperations = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

// describe answers one group of DescribeGroups (GroupMetadataManager.describeGroups).
func (s *shard) describe(id string, version int16) kmsg.DescribeGroupsResponseGroup {
	r := kmsg.NewDescribeGroupsResponseGroup()
	r.Group = id
	g := s.groups[id]
	if g == nil || g.is(stateDead) {
		r.State = stateDead.String()
		if version >= 6 {
			r.ErrorCode = errGroupIDNotFound
			r.ErrorMessage = strp("Group " + id + " not found.")
		}
		return r
	}
	r.State = g.state.String()
	r.ProtocolType = g.protocolType
	stable := g.is(stateStable)
	if stable {
		r.Protocol = g.protocolName
	}
	for _, m := range g.memberList() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.MemberAssignment = m.assignment
		if dm.MemberAssignment == nil {
			dm.MemberAssignment = []byte{}
		}
		if stable {
			dm.ProtocolMetadata = m.metadataFor(g.protocolName)
		}
		if dm.ProtocolMetadata == nil {
			dm.ProtocolMetadata = []byte{}
		}
		r.Members = append(r.Members, dm)
	}
	return r
}

// list appends the shard's groups that pass the ListGroups v4/v5 filters
// (GroupMetadataManager.listGroups): states compare case-insensitively with the state's
// name, types with "classic".
func (s *shard) list(states, types []string, dst []kmsg.ListGroupsResponseGroup) []kmsg.ListGroupsResponseGroup {
	matches := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(strings.TrimSpace(f), v) {
				return true
			}
		}
		return false
	}
	var out []kmsg.ListGroupsResponseGroup
	if matches(types, "classic") {
		for id, g := range s.groups {
			if !matches(states, g.state.String()) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = id
			lg.ProtocolType = g.protocolType
			lg.GroupState = g.state.String()
			lg.GroupType = "classic"
			out = append(out, lg)
		}
	}
	if matches(types, "consumer") {
		for id, g := range s.consumers {
			st := g.state()
			if !matches(states, st) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group = id
			lg.ProtocolType = "consumer" // ConsumerProtocol.PROTOCOL_TYPE
			lg.GroupState = st
			lg.GroupType = "consumer"
			out = append(out, lg)
		}
	}
	slices.SortFunc(out, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return append(dst, out...)
}

// deleteGroups handles the groups of a DeleteGroups that live on this shard
// (GroupCoordinatorShard.deleteGroups): each deletable group is removed at once and its
// tombstones (offsets, then the group) are written in one batch; the response, an
// []kmsg.DeleteGroupsResponseGroup, completes token once they are durable.
func (s *shard) deleteGroups(ids []string, token uint64, out *output) {
	results := make([]kmsg.DeleteGroupsResponseGroup, len(ids))
	e := &emitter{s: s}
	var records []kmsg.Record
	type gk struct {
		group string
		k     tp
	}
	var offs []gk
	dropOffsets := func(id string) {
		recs, keys := s.offsetTombstones(id)
		records = append(records, recs...)
		for _, k := range keys {
			offs = append(offs, gk{id, k})
		}
	}
	for i, id := range ids {
		results[i] = kmsg.NewDeleteGroupsResponseGroup()
		results[i].Group = id
		if cg := s.consumers[id]; cg != nil {
			if len(cg.members) > 0 {
				results[i].ErrorCode = errNonEmptyGroup
				continue
			}
			dropOffsets(id)
			records = append(records, s.consumerGroupTombstones(cg, e)...)
			continue
		}
		g := s.groups[id]
		switch {
		case g == nil || g.is(stateDead):
			results[i].ErrorCode = errGroupIDNotFound
			continue
		case !g.is(stateEmpty):
			results[i].ErrorCode = errNonEmptyGroup
			continue
		}
		dropOffsets(id)
		records = append(records, groupTombstone(id))
		delete(s.groups, id)
		g.state = stateDead
	}
	if len(records) == 0 {
		out.complete(token, results)
		return
	}
	out.writes = append(out.writes, write{records: records, producerID: -1, done: func(_ int64, err error, out *output) {
		if err != nil {
			for i := range results {
				if results[i].ErrorCode == 0 {
					results[i].ErrorCode = errCoordinatorNotAvail
				}
			}
			out.complete(token, results)
			return
		}
		for _, o := range offs {
			s.offsets.tombstone(o.group, o.k.topic, o.k.partition)
		}
		out.complete(token, results)
	}})
}
