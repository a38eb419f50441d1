package group

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/exactq/exactq/internal/group/consumer"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the online migration between the classic and the consumer protocol
// (KIP-848's group.consumer.migration.policy), as Kafka 4.4's GroupMetadataManager does
// it: a consumer-protocol member joining a non-empty classic group upgrades it to a
// consumer group whose classic members keep using JoinGroup, SyncGroup and Heartbeat,
// served from the server-side assignment; a consumer group left with classic members
// only is downgraded back to a classic group.

// MigrationPolicy is group.consumer.migration.policy. The zero value is Kafka's default,
// bidirectional.
type MigrationPolicy int8

const (
	MigrationBidirectional MigrationPolicy = iota // upgrade and downgrade
	MigrationUpgrade                              // classic to consumer only
	MigrationDowngrade                            // consumer to classic only
	MigrationDisabled                             // neither; no classic member joins a consumer group
)

var migrationNames = map[string]MigrationPolicy{
	"bidirectional": MigrationBidirectional, "upgrade": MigrationUpgrade,
	"downgrade": MigrationDowngrade, "disabled": MigrationDisabled,
}

// ParseMigrationPolicy reads group.consumer.migration.policy, case-insensitively as
// Kafka's validator does.
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	p, ok := migrationNames[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return 0, errors.New("group.consumer.migration.policy must be one of bidirectional, upgrade, downgrade, disabled; got " + s)
	}
	return p, nil
}

func (p MigrationPolicy) String() string {
	for name, v := range migrationNames {
		if v == p {
			return name
		}
	}
	return "unknown"
}

func (p MigrationPolicy) upgrade() bool { return p == MigrationBidirectional || p == MigrationUpgrade }
func (p MigrationPolicy) downgrade() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// consumerProtocolType is ConsumerProtocol.PROTOCOL_TYPE.
const consumerProtocolType = "consumer"

// parseSubscription reads a consumer protocol subscription (any version; newer ones are
// read as the newest kmsg knows, as Kafka reads them).
func parseSubscription(b []byte) (*kmsg.ConsumerMemberMetadata, bool) {
	var sub kmsg.ConsumerMemberMetadata
	if len(b) < 2 || sub.ReadFrom(b) != nil || sub.Version < 0 {
		return nil, false
	}
	return &sub, true
}

// protocolVersion is ConsumerProtocol.deserializeVersion, capped to the versions the
// assignment has (0-3), as serializeAssignment caps it.
func protocolVersion(metadata []byte) int16 {
	if len(metadata) < 2 {
		return 0
	}
	return max(0, min(3, int16(uint16(metadata[0])<<8|uint16(metadata[1]))))
}

// encodeAssignment is ConsumerProtocol.serializeAssignment of a member's partitions (by
// name; a topic deleted meanwhile is left out) in the version of its subscription.
func (s *shard) encodeAssignment(tps []consumer.TP, version int16) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = version
	s.byTopicName(tps, func(_ [16]byte, name string, partitions []int32) {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = name, partitions
		a.Topics = append(a.Topics, at)
	})
	return a.AppendTo(nil)
}

// ownedFromSubscription is the subscription's owned partitions by topic id.
func (s *shard) ownedFromSubscription(sub *kmsg.ConsumerMemberMetadata) consumer.Set {
	out := consumer.Set{}
	for _, t := range sub.OwnedPartitions {
		if id, _, ok := s.cfg.topicMeta(t.Topic); ok {
			for _, p := range t.Partitions {
				out[consumer.TP{Topic: id, Partition: p}] = struct{}{}
			}
		}
	}
	return out
}

func cloneProtocols(ps []protocol) []protocol {
	out := make([]protocol, len(ps))
	for i, p := range ps {
		out[i] = protocol{name: p.name, metadata: slices.Clone(p.metadata)}
	}
	return out
}

// numClassic counts the members that use the classic protocol.
func (g *consumerGroup) numClassic() int {
	n := 0
	for _, m := range g.members {
		if m.usesClassic() {
			n++
		}
	}
	return n
}

// supportsClassicProtocols is ConsumerGroup.supportsClassicProtocols: a classic member
// may join when one of its protocols is supported by every classic member.
func (g *consumerGroup) supportsClassicProtocols(protocolType string, protos []protocol) bool {
	if protocolType != consumerProtocolType {
		return false
	}
	if len(g.members) == 0 {
		return len(protos) > 0
	}
	counts := map[string]int{}
	for _, m := range g.members {
		if m.usesClassic() {
			seen := map[string]bool{}
			for _, p := range m.classic.protocols {
				if !seen[p.name] {
					seen[p.name] = true
					counts[p.name]++
				}
			}
		}
	}
	n := g.numClassic()
	for _, p := range protos {
		if counts[p.name] == n {
			return true
		}
	}
	return false
}

// waitingOnUnreleased is ConsumerGroup.waitingOnUnreleasedPartition: a target partition
// the member does not have yet is still held by another member.
func (g *consumerGroup) waitingOnUnreleased(m *cgMember) bool {
	if m.State != consumer.UnreleasedPartitions {
		return false
	}
	for tp := range g.target[m.id] {
		if _, ok := m.Assigned[tp]; ok {
			continue
		}
		if _, held := g.owner[tp]; held {
			return true
		}
	}
	return false
}

// classicMember is validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol:
// the classic member a SyncGroup or Heartbeat names, or its error code.
func (g *consumerGroup) classicMember(memberID string, instanceID *string) (*cgMember, int16) {
	var m *cgMember
	if instanceID == nil {
		m = g.members[memberID]
	} else {
		m = g.members[g.static[*instanceID]]
		if m != nil && m.id != memberID {
			return nil, errFencedInstanceID
		}
	}
	if m == nil || !m.usesClassic() {
		return nil, errUnknownMemberID
	}
	return m, 0
}

// upgradeCandidate is validateOnlineUpgrade and ConsumerGroup.fromClassicGroup: the
// consumer group a non-empty classic group would become, or GROUP_ID_NOT_FOUND with
// Kafka's reason. It changes nothing.
func (s *shard) upgradeCandidate(cg *classicGroup, nowMs int64) (*consumerGroup, int16, string) {
	prefix := "Cannot upgrade classic group " + cg.id + " to consumer group because "
	switch {
	case !s.cfg.migration.upgrade():
		return nil, errGroupIDNotFound, prefix + "online upgrade is disabled."
	case !cg.usesConsumerProtocol():
		return nil, errGroupIDNotFound, prefix + "the group does not use the consumer embedded protocol."
	case s.cfg.consumerMaxSize > 0 && len(cg.members) > int(s.cfg.consumerMaxSize):
		return nil, errGroupIDNotFound, prefix + "the group size exceeds the consumer group maximum size."
	}
	g, msg := s.consumerGroupFromClassic(cg, nowMs)
	if g == nil {
		return nil, errGroupIDNotFound, prefix + msg
	}
	return g, 0, ""
}

// consumerGroupFromClassic is ConsumerGroup.fromClassicGroup: the group epoch and every
// member's epoch are the classic generation, each member Stable with its last classic
// assignment as both its current and its target assignment. It returns nil and the
// reason when a subscription or an assignment cannot be read.
func (s *shard) consumerGroupFromClassic(cg *classicGroup, nowMs int64) (*consumerGroup, string) {
	gen := cg.generation
	g := newConsumerGroup(cg.id, nowMs)
	g.epoch, g.assignmentEpoch = gen, gen
	for _, cm := range cg.memberList() {
		meta := cm.metadataFor(cg.protocolName)
		if cg.protocolName == "" && len(cm.protocols) > 0 {
			meta = cm.protocols[0].metadata // a group that never completed a rebalance
		}
		sub, ok := parseSubscription(meta)
		if !ok {
			return nil, "the embedded consumer protocol is malformed."
		}
		m := &cgMember{id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			topicNames: slices.Compact(slices.Sorted(slices.Values(sub.Topics))), rebalanceTimeoutMs: cm.rebalanceTimeoutMs,
			classic: &classicMeta{sessionTimeoutMs: cm.sessionTimeoutMs, protocols: cloneProtocols(cm.protocols)},
			Member:  consumer.Member{Epoch: gen, PreviousEpoch: gen, State: consumer.Stable, Assigned: consumer.Epochs{}, PendingRevocation: consumer.Epochs{}}}
		if sub.Rack != nil && *sub.Rack != "" {
			m.rackID = sub.Rack
		}
		target := consumer.Set{}
		if len(cm.assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(cm.assignment) != nil {
				return nil, "the embedded consumer protocol is malformed."
			}
			if len(a.UserData) > 0 {
				return nil, "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade."
			}
			for _, t := range a.Topics {
				id, _, ok := s.cfg.topicMeta(t.Topic)
				if !ok {
					continue
				}
				for _, p := range t.Partitions {
					tp := consumer.TP{Topic: id, Partition: p}
					if _, dup := g.owner[tp]; dup {
						// A client-side assignor gave one partition to two members;
						// exactq refuses rather than make either the owner.
						return nil, "its assignment gives a partition to two members."
					}
					m.Assigned[tp] = gen
					target[tp] = struct{}{}
					g.owner[tp] = m.id
				}
			}
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
		g.target[m.id] = target
	}
	g.metadataHash = s.metadataHash(g, nowMs)
	return g, ""
}

// upgradeToConsumer is convertToConsumerGroup for a classic group upgradeCandidate
// accepted: the classic group's parked requests are answered REBALANCE_IN_PROGRESS, its
// record is tombstoned and the consumer group's records (Kafka's createConsumerGroupRecords)
// are applied. Every member gets a session deadline of its classic session timeout.
func (s *shard) upgradeToConsumer(e *emitter, cg *classicGroup) *consumerGroup {
	up, _, _ := s.upgradeCandidate(cg, e.nowMs)
	var joins, syncs []uint64
	for _, m := range cg.memberList() {
		if m.awaitingJoin() {
			joins = append(joins, m.joinToken)
		}
		if m.awaitingSync() {
			syncs = append(syncs, m.syncToken)
		}
		s.cancel(timerHeartbeat, cg.id, m.id)
	}
	for id := range cg.pendingJoin {
		s.cancel(timerHeartbeat, cg.id, id)
	}
	s.cancel(timerJoin, cg.id, "")
	s.cancel(timerInitialJoin, cg.id, "")
	s.cancel(timerSync, cg.id, "")
	e.after = append(e.after, func(out *output) {
		for _, tok := range joins {
			out.complete(tok, joinError("", errRebalanceInProgress))
		}
		for _, tok := range syncs {
			out.complete(tok, syncError(errRebalanceInProgress))
		}
	})
	e.records = append(e.records, groupTombstone(cg.id))
	delete(s.groups, cg.id)

	ids := make([]string, 0, len(cg.order))
	for _, cm := range cg.memberList() {
		ids = append(ids, cm.id)
	}
	for _, id := range ids {
		e.add(cgMemberRecord(cg.id, up.members[id]))
	}
	e.add(cgEpochRecord(cg.id, up.epoch, up.metadataHash))
	for _, id := range ids {
		e.add(cgTargetMemberRecord(cg.id, id, up.target[id]))
	}
	e.add(cgTargetMetadataRecord(cg.id, up.assignmentEpoch, 0))
	for _, id := range ids {
		e.add(cgCurrentRecord(cg.id, id, up.members[id].Member))
	}
	g := s.consumers[cg.id]
	for _, m := range g.members {
		s.schedule(timerConsumerSession, g.id, m.id, e.nowMs+int64(m.classic.sessionTimeoutMs))
	}
	return g
}

// canDowngradeWithout is validateOnlineDowngradeWithFencedMembers: fencing these members
// leaves only classic members, at least one, no more than group.max.size, and the
// policy allows a downgrade.
func (s *shard) canDowngradeWithout(g *consumerGroup, fenced []string) bool {
	classicLeaving := 0
	for _, id := range fenced {
		if m := g.members[id]; m != nil && m.usesClassic() {
			classicLeaving++
		}
	}
	remaining := len(g.members) - len(fenced)
	switch {
	case g.numClassic()-classicLeaving != remaining, remaining <= 0, !s.cfg.migration.downgrade():
		return false
	case s.cfg.maxGroupSize > 0 && remaining > int(s.cfg.maxGroupSize):
		return false
	}
	return true
}

// canDowngradeReplacing is validateOnlineDowngradeWithReplacedMember: a classic member
// replacing the group's only consumer-protocol member (a static one) downgrades it.
func (s *shard) canDowngradeReplacing(g *consumerGroup, replaced *cgMember) bool {
	switch {
	case replaced.usesClassic() || g.numClassic() != len(g.members)-1, !s.cfg.migration.downgrade():
		return false
	case s.cfg.maxGroupSize > 0 && len(g.members) > int(s.cfg.maxGroupSize):
		return false
	}
	return true
}

// downgradeToClassic is convertToClassicGroup: the consumer group's tombstones, then the
// GroupMetadata record of a Stable classic group at the group epoch holding the members
// that stay (and a classic member that replaced a static one, joining). Then the members
// get classic session deadlines and, when rebalance is set, the group rebalances.
//
// Kafka gives each classic member its target assignment; exactq gives it what it may
// still own (its assigned partitions and those it has not finished revoking) and
// rebalances whenever a member is not reconciled to the target, so no member is ever
// handed a partition another still owns: not by a SyncGroup to the Stable group, not
// after a restart that reloads the group Stable from its record, and not by an upgrade
// that takes the record's assignments as the members' current ones.
func (s *shard) downgradeToClassic(e *emitter, g *consumerGroup, leaving []string, joining *cgMember, rebalance bool) {
	nowMs := e.nowMs
	gone := map[string]bool{}
	for _, id := range leaving {
		gone[id] = true
	}
	cl := newClassicGroup(g.id, nowMs)
	cl.state, cl.previousState = stateStable, stateCompletingRebalance
	cl.generation = g.epoch
	cl.protocolType = consumerProtocolType
	add := func(m *cgMember) {
		cl.add(&member{id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			rebalanceTimeoutMs: m.rebalanceTimeoutMs, sessionTimeoutMs: m.classic.sessionTimeoutMs,
			protocolType: consumerProtocolType, protocols: cloneProtocols(m.classic.protocols)})
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		if gone[id] || (joining != nil && id == joining.id) {
			continue
		}
		add(m)
		if !m.ReconciledTo(g.assignmentEpoch) {
			rebalance = true
		}
	}
	if joining != nil {
		add(joining)
		if !g.members[joining.id].ReconciledTo(g.assignmentEpoch) {
			rebalance = true
		}
	}
	if g.assignmentEpoch < g.epoch {
		rebalance = true
	}
	cl.protocolName = cl.selectProtocol()
	cl.subscribed = cl.computeSubscribed()
	for _, m := range cl.memberList() {
		cm := g.members[m.id]
		holds := maps.Clone(cm.Assigned)
		maps.Copy(holds, cm.PendingRevocation)
		m.assignment = s.encodeAssignment(holds.Sorted(), protocolVersion(m.metadataFor(cl.protocolName)))
	}

	ids := slices.Sorted(maps.Keys(g.members))
	targets := slices.Sorted(maps.Keys(g.target))
	for _, id := range ids {
		e.add(kmsg.Record{Key: cgMemberKey(keyConsumerGroupCurrentAssignment, g.id, id)})
	}
	for _, id := range targets {
		e.add(kmsg.Record{Key: cgMemberKey(keyConsumerGroupTargetMember, g.id, id)})
	}
	e.add(kmsg.Record{Key: cgGroupKey(keyConsumerGroupTargetMetadata, g.id)})
	for _, id := range ids {
		e.add(kmsg.Record{Key: cgMemberKey(keyConsumerGroupMemberMetadata, g.id, id)})
		s.cancelConsumerTimers(g.id, id)
	}
	e.add(kmsg.Record{Key: cgGroupKey(keyConsumerGroupMetadata, g.id)})
	e.records = append(e.records, groupRecord(cl, nil))
	s.groups[g.id] = cl
	for _, m := range cl.memberList() {
		s.rescheduleHeartbeat(cl, m, nowMs)
	}
	if rebalance {
		e.after = append(e.after, func(out *output) {
			if s.groups[cl.id] == cl && cl.canRebalance() {
				s.prepareRebalance(cl, nowMs, out)
			}
		})
	}
}

// classicJoinToConsumerGroup is classicGroupJoinToConsumerGroup: a JoinGroup to a
// non-empty consumer group. The member is a consumer group member with classic metadata;
// its subscription (topics, rack, owned partitions) comes from the consumer protocol
// metadata, its assignment from the server-side assignor, its generation is its member
// epoch, and no member is the leader.
func (s *shard) classicJoinToConsumerGroup(g *consumerGroup, jr joinRequest, nowMs int64, out *output) {
	req := jr.req
	fail := func(code int16) { out.complete(jr.token, joinError(req.MemberID, code)) }
	if s.cfg.migration == MigrationDisabled {
		fail(errInconsistentProtocol) // throwIfClassicMemberCannotJoinConsumerGroup
		return
	}
	memberID, unknown := req.MemberID, req.MemberID == ""
	if unknown {
		memberID = s.newUUID()
	}
	if _, ok := g.members[memberID]; !ok && (req.InstanceID == nil || g.static[*req.InstanceID] == "") {
		if max := s.cfg.consumerMaxSize; max > 0 && len(g.members) >= int(max) {
			fail(errGroupMaxSizeReached)
			return
		}
	}
	protos := toProtocols(req.Protocols)
	if !g.supportsClassicProtocols(req.ProtocolType, protos) {
		fail(errInconsistentProtocol)
		return
	}
	if jr.version >= 4 && unknown && req.InstanceID == nil {
		out.complete(jr.token, joinError(memberID, errMemberIDRequired))
		return
	}
	var replaced *cgMember
	if req.InstanceID != nil {
		prev := g.members[g.static[*req.InstanceID]]
		switch {
		case unknown:
			replaced = prev
		case prev == nil:
			fail(errUnknownMemberID)
			return
		case prev.id != memberID:
			fail(errFencedInstanceID)
			return
		}
	}
	sub, ok := parseSubscription(protos[0].metadata)
	if !ok {
		fail(errInconsistentProtocol)
		return
	}
	e := &emitter{s: s, nowMs: nowMs}
	downgrade := replaced != nil && s.canDowngradeReplacing(g, replaced)
	old := g.members[memberID]
	if replaced != nil {
		old = s.memberFor(e, g, memberID, req.InstanceID, true)
	}
	if old == nil {
		old = newCGMember(memberID)
	}
	upd := *old
	if req.InstanceID != nil {
		upd.instanceID = req.InstanceID
	}
	if sub.Rack != nil && *sub.Rack != "" {
		upd.rackID = sub.Rack
	}
	if req.RebalanceTimeoutMillis != -1 {
		upd.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	upd.topicNames = slices.Compact(slices.Sorted(slices.Values(sub.Topics)))
	noRegex := "" // a classic member has no regex subscription
	upd.regex = &noRegex
	upd.clientID, upd.clientHost = jr.clientID, jr.clientHost
	upd.classic = &classicMeta{sessionTimeoutMs: req.SessionTimeoutMillis, protocols: protos}
	_, existed := g.members[memberID]
	changed := false
	if !existed || !old.metadataEqual(&upd) {
		changed = !slices.Equal(old.topicNames, upd.topicNames) || (!ptrEqual(old.regex, upd.regex) && (old.regexSet() || upd.regexSet()))
		e.add(cgMemberRecord(g.id, &upd))
	}
	m := g.members[memberID]
	s.pruneRegexes(g)
	if hash := s.metadataHash(g, nowMs); hash != g.metadataHash || changed {
		e.add(cgEpochRecord(g.id, g.epoch+1, hash))
	}
	owned := s.ownedFromSubscription(sub)
	var code int16
	reconcile := func() {
		if !changed && m.ReconciledTo(g.assignmentEpoch) {
			return
		}
		next, err := s.reconcile(g, m, changed, owned)
		if err != nil {
			code = errFencedMemberEpoch
			return
		}
		s.applyReconciled(e, g, m, next)
	}
	if downgrade {
		if g.assignmentEpoch == g.epoch {
			reconcile()
		}
	} else {
		if g.assignmentEpoch < g.epoch {
			s.computeTarget(e, g)
		}
		reconcile()
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID, resp.Generation = m.id, m.Epoch
	resp.ProtocolType, resp.Protocol = strp(consumerProtocolType), strp(protos[0].name)
	rebalanceMs, sessionMs := req.RebalanceTimeoutMillis, req.SessionTimeoutMillis
	if downgrade {
		s.downgradeToClassic(e, g, nil, m, g.assignmentEpoch < g.epoch)
	}
	e.finishWith(out, func(err error, out *output) {
		switch {
		case err != nil:
			fail(errCoordinatorNotAvail)
			return
		case code != 0:
			fail(code)
			return
		}
		s.cancel(timerConsumerJoin, g.id, memberID)
		if !downgrade {
			s.schedule(timerConsumerSession, g.id, memberID, nowMs+int64(sessionMs))
			s.schedule(timerConsumerSync, g.id, memberID, nowMs+int64(rebalanceMs))
		}
		out.complete(jr.token, resp)
	})
}

// scheduleConsumerJoinIfAbsent arms a classic member's deadline to rejoin
// (scheduleConsumerGroupJoinTimeoutIfAbsent).
func (s *shard) scheduleConsumerJoinIfAbsent(g *consumerGroup, m *cgMember, nowMs int64) {
	if !s.timers.has(timerKey{timerConsumerJoin, g.id, m.id}) {
		s.schedule(timerConsumerJoin, g.id, m.id, nowMs+int64(m.rebalanceTimeoutMs))
	}
}

// rebalanceDue is the condition under which a classic member of a consumer group is
// told REBALANCE_IN_PROGRESS (classicGroupHeartbeatToConsumerGroup): its epoch is behind
// the target, it must revoke partitions, or partitions it waits for were released.
func (g *consumerGroup) rebalanceDue(m *cgMember) bool {
	return m.Epoch < g.assignmentEpoch || m.State == consumer.UnrevokedPartitions ||
		(m.State == consumer.UnreleasedPartitions && !g.waitingOnUnreleased(m))
}

// classicSyncToConsumerGroup is classicGroupSyncToConsumerGroup: the member's current
// assignment, in its subscription's version of the consumer protocol.
func (s *shard) classicSyncToConsumerGroup(g *consumerGroup, sr syncRequest, nowMs int64, out *output) {
	req := sr.req
	m, code := g.classicMember(req.MemberID, req.InstanceID)
	if code == 0 && req.Generation != m.Epoch {
		code = errIllegalGeneration
	}
	if code == 0 {
		name := m.classic.protocols[0].name
		if (req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType) || (req.Protocol != nil && *req.Protocol != name) {
			code = errInconsistentProtocol
		}
	}
	if code == 0 && g.assignmentEpoch > m.Epoch && m.State != consumer.UnrevokedPartitions {
		s.scheduleConsumerJoinIfAbsent(g, m, nowMs)
		code = errRebalanceInProgress
	}
	if code != 0 {
		out.complete(sr.token, syncError(code))
		return
	}
	// Kafka answers once the log is committed up to now; the member's assignment is
	// already durable here, written before its JoinGroup was answered.
	s.cancel(timerConsumerSync, g.id, m.id)
	s.schedule(timerConsumerSession, g.id, m.id, nowMs+int64(m.classic.sessionTimeoutMs))
	r := kmsg.NewPtrSyncGroupResponse()
	r.ProtocolType, r.Protocol = req.ProtocolType, req.Protocol
	r.MemberAssignment = s.encodeAssignment(m.Assigned.Sorted(), protocolVersion(m.classic.protocols[0].metadata))
	out.complete(sr.token, r)
}

// classicHeartbeatToConsumerGroup is classicGroupHeartbeatToConsumerGroup.
func (s *shard) classicHeartbeatToConsumerGroup(g *consumerGroup, req *kmsg.HeartbeatRequest, nowMs int64) int16 {
	m, code := g.classicMember(req.MemberID, req.InstanceID)
	if code != 0 {
		return code
	}
	if req.Generation != m.Epoch {
		return errIllegalGeneration
	}
	s.schedule(timerConsumerSession, g.id, m.id, nowMs+int64(m.classic.sessionTimeoutMs))
	if g.rebalanceDue(m) {
		s.scheduleConsumerJoinIfAbsent(g, m, nowMs)
		return errRebalanceInProgress
	}
	return 0
}
