package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the classic rebalance protocol of the core: JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup and the timer expiries that drive them. It follows Kafka 4.4's
// GroupMetadataManager (classicGroupJoinToClassicGroup and what it calls); each function
// names its Kafka counterpart.

func strp(s string) *string { return &s }

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toProtocols(ps []kmsg.JoinGroupRequestProtocol) []protocol {
	out := make([]protocol, len(ps))
	for i, p := range ps {
		out[i] = protocol{name: p.Name, metadata: p.Metadata}
	}
	return out
}

func joinError(memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.MemberID = memberID
	r.ErrorCode = code
	r.Generation = -1
	return r
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}

// joinRequest is what the core needs of a JoinGroup request.
type joinRequest struct {
	version    int16
	req        *kmsg.JoinGroupRequest
	clientID   string
	clientHost string
	token      uint64
}

// join handles a JoinGroup (classicGroupJoinToClassicGroup). The response is always
// delivered as a completion for jr.token, immediately or when the join phase ends.
func (s *shard) join(jr joinRequest, nowMs int64, out *output) {
	req := jr.req
	if cg := s.consumers[req.Group]; cg != nil {
		if len(cg.members) > 0 {
			s.classicJoinToConsumerGroup(cg, jr, nowMs, out)
			return
		}
		// An empty consumer group gives way to a classic one (maybeDeleteEmptyConsumerGroup).
		e := &emitter{s: s, nowMs: nowMs}
		s.consumerGroupTombstones(cg, e)
		e.finishWith(out, func(error, *output) {})
	}
	g := s.groups[req.Group]
	isNewGroup := g == nil
	if g == nil {
		if req.MemberID != "" {
			out.complete(jr.token, joinError(req.MemberID, errUnknownMemberID))
			return
		}
		g = newClassicGroup(req.Group, nowMs)
		s.groups[req.Group] = g
	}
	nWrites := len(out.writes)
	switch {
	case !s.acceptJoiningMember(g, req.MemberID):
		g.remove(req.MemberID)
		out.complete(jr.token, joinError("", errGroupMaxSizeReached))
	case req.MemberID == "":
		s.joinNewMember(g, jr, nowMs, out)
	default:
		s.joinExistingMember(g, jr, nowMs, out)
	}
	if isNewGroup && len(out.writes) == nWrites {
		// Kafka writes an empty GroupMetadata record for a new group so that it exists in
		// the log; nothing waits for it.
		out.writes = append(out.writes, write{producerID: -1, records: []kmsg.Record{emptyGroupRecord(g)}})
	}
}

// acceptJoiningMember is GroupMetadataManager.acceptJoiningMember.
func (s *shard) acceptJoiningMember(g *classicGroup, memberID string) bool {
	maxSize := int(s.cfg.maxGroupSize)
	if maxSize <= 0 {
		return true
	}
	switch g.state {
	case statePreparingRebalance:
		if m := g.members[memberID]; m != nil && m.awaitingJoin() {
			return true
		}
		return g.numAwaiting < maxSize
	case stateCompletingRebalance, stateStable:
		return g.hasMember(memberID) || len(g.members) < maxSize
	default:
		return true
	}
}

func (s *shard) joinNewMember(g *classicGroup, jr joinRequest, nowMs int64, out *output) {
	req := jr.req
	protos := toProtocols(req.Protocols)
	if g.is(stateDead) {
		out.complete(jr.token, joinError("", errCoordinatorNotAvail))
		return
	}
	if !g.supportsProtocols(req.ProtocolType, protos) {
		out.complete(jr.token, joinError("", errInconsistentProtocol))
		return
	}
	if req.InstanceID != nil {
		newID := s.newID(*req.InstanceID)
		if existing, ok := g.staticMembers[*req.InstanceID]; ok {
			s.updateStaticMember(g, jr, existing, newID, nowMs, out)
			return
		}
		s.addMember(g, jr, newID, nowMs, out)
		return
	}
	newID := s.newID(jr.clientID)
	if jr.version >= 4 { // KIP-394: hand out the id and have the member join again with it
		g.pendingJoin[newID] = true
		s.schedule(timerHeartbeat, g.id, newID, nowMs+int64(req.SessionTimeoutMillis))
		out.complete(jr.token, joinError(newID, errMemberIDRequired))
		return
	}
	s.addMember(g, jr, newID, nowMs, out)
}

func (s *shard) joinExistingMember(g *classicGroup, jr joinRequest, nowMs int64, out *output) {
	req := jr.req
	memberID := req.MemberID
	protos := toProtocols(req.Protocols)
	if g.is(stateDead) {
		out.complete(jr.token, joinError(memberID, errCoordinatorNotAvail))
		return
	}
	if !g.supportsProtocols(req.ProtocolType, protos) {
		out.complete(jr.token, joinError(memberID, errInconsistentProtocol))
		return
	}
	if g.pendingJoin[memberID] {
		if req.InstanceID != nil { // a pending member is never static
			out.complete(jr.token, joinError(memberID, errUnknownServer))
			return
		}
		s.addMember(g, jr, memberID, nowMs, out)
		return
	}
	if code := g.validateMember(memberID, req.InstanceID); code != 0 {
		out.complete(jr.token, joinError(memberID, code))
		return
	}
	m := g.members[memberID]
	switch g.state {
	case statePreparingRebalance:
		s.updateMemberThenRebalance(g, m, jr, nowMs, out)
	case stateCompletingRebalance:
		if m.matches(protos) {
			// The member lost the first response: answer with the current generation.
			s.supersedeJoin(m, out)
			var members []kmsg.JoinGroupResponseMember
			if g.isLeader(memberID) {
				members = g.responseMembers()
			}
			out.complete(jr.token, g.joinResponse(memberID, members, false))
		} else {
			s.updateMemberThenRebalance(g, m, jr, nowMs, out)
		}
	case stateStable:
		if g.isLeader(memberID) || !m.matches(protos) {
			// A leader's JoinGroup forces a rebalance (it may have seen metadata change).
			s.updateMemberThenRebalance(g, m, jr, nowMs, out)
		} else {
			out.complete(jr.token, g.joinResponse(memberID, nil, false))
		}
	default:
		out.complete(jr.token, joinError(memberID, errUnknownMemberID))
	}
}

// supersedeJoin answers a member's earlier parked JoinGroup that a newer one replaces.
// Kafka leaves it unanswered until the client gives up; we answer it so a connection
// never stays blocked behind it.
func (s *shard) supersedeJoin(m *member, out *output) {
	if m.awaitingJoin() {
		out.complete(m.joinToken, joinError(m.id, errRebalanceInProgress))
	}
}

func (s *shard) supersedeSync(m *member, out *output) {
	if m.awaitingSync() {
		out.complete(m.syncToken, syncError(errRebalanceInProgress))
		m.syncToken = 0
	}
}

func (g *classicGroup) responseMembers() []kmsg.JoinGroupResponseMember {
	ms := g.memberList()
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID = m.id
		rm.InstanceID = m.instanceID
		rm.ProtocolMetadata = m.metadataFor(g.protocolName)
		out = append(out, rm)
	}
	return out
}

func (g *classicGroup) joinResponse(memberID string, members []kmsg.JoinGroupResponseMember, skip bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.MemberID = memberID
	r.Generation = g.generation
	r.Protocol = nilIfEmpty(g.protocolName)
	r.ProtocolType = nilIfEmpty(g.protocolType)
	r.LeaderID = g.leaderID
	r.Members = members
	r.SkipAssignment = skip
	return r
}

// completeJoinFuture answers a member's parked join, if any.
func (g *classicGroup) completeJoinFuture(m *member, resp *kmsg.JoinGroupResponse, out *output) bool {
	if !m.awaitingJoin() {
		return false
	}
	out.complete(m.joinToken, resp)
	g.setAwaitingJoin(m, 0)
	return true
}

func (s *shard) updateMemberThenRebalance(g *classicGroup, m *member, jr joinRequest, nowMs int64, out *output) {
	s.supersedeJoin(m, out)
	g.updateMember(m, toProtocols(jr.req.Protocols), jr.req.RebalanceTimeoutMillis, jr.req.SessionTimeoutMillis, jr.token, jr.version)
	s.maybePrepareRebalanceOrCompleteJoin(g, nowMs, out)
}

// addMember is addMemberThenRebalanceOrCompleteJoin.
func (s *shard) addMember(g *classicGroup, jr joinRequest, memberID string, nowMs int64, out *output) {
	req := jr.req
	m := &member{
		id: memberID, instanceID: req.InstanceID, clientID: jr.clientID, clientHost: jr.clientHost,
		rebalanceTimeoutMs: req.RebalanceTimeoutMillis, sessionTimeoutMs: req.SessionTimeoutMillis,
		protocolType: req.ProtocolType, protocols: toProtocols(req.Protocols),
		joinToken: jr.token, joinVersion: jr.version, isNew: true,
	}
	if g.is(statePreparingRebalance) && g.previousState == stateEmpty {
		g.newMemberAdded = true
	}
	g.add(m)
	// A new member cannot heartbeat yet; its parked join is timed out instead, so that
	// clients that retry after a disconnect do not pile up defunct members.
	s.schedule(timerHeartbeat, g.id, m.id, nowMs+int64(s.cfg.newMemberJoinTimeoutMs))
	s.maybePrepareRebalanceOrCompleteJoin(g, nowMs, out)
}

// updateStaticMember is updateStaticMemberThenRebalanceOrCompleteJoin: a static member
// rejoined without its member id (a restart). The old id is fenced.
func (s *shard) updateStaticMember(g *classicGroup, jr joinRequest, oldID, newID string, nowMs int64, out *output) {
	req := jr.req
	currentLeader := g.leaderID
	m := g.replaceStaticMember(*req.InstanceID, oldID, newID, out)
	s.cancel(timerHeartbeat, g.id, oldID)
	s.rescheduleHeartbeat(g, m, nowMs)
	oldProtocols, oldRebalance, oldSession := m.protocols, m.rebalanceTimeoutMs, m.sessionTimeoutMs
	g.updateMember(m, toProtocols(req.Protocols), req.RebalanceTimeoutMillis, req.SessionTimeoutMillis, jr.token, jr.version)

	switch g.state {
	case stateStable:
		if g.protocolName == g.selectProtocol() {
			// Nothing the assignment depends on changed: persist the new member id and
			// answer without a rebalance (KIP-345).
			instanceID := *req.InstanceID
			gen := g.generation
			rec := groupRecord(g, nil)
			out.writes = append(out.writes, write{producerID: -1, records: []kmsg.Record{rec}, done: func(_ int64, err error, out *output) {
				cur := g.members[newID]
				if cur == nil || s.groups[g.id] != g {
					return
				}
				if err != nil {
					g.updateMember(cur, oldProtocols, oldRebalance, oldSession, cur.joinToken, cur.joinVersion)
					token := cur.joinToken
					g.setAwaitingJoin(cur, 0)
					back := g.replaceStaticMember(instanceID, newID, oldID, out)
					s.cancel(timerHeartbeat, g.id, newID)
					s.rescheduleHeartbeat(g, back, nowMs)
					r := joinError("", errCoordinatorNotAvail)
					r.Generation = gen
					r.Protocol, r.ProtocolType, r.LeaderID = nilIfEmpty(g.protocolName), nilIfEmpty(g.protocolType), currentLeader
					out.complete(token, r)
					return
				}
				if cur.joinVersion >= 9 {
					leader := g.isLeader(newID)
					var members []kmsg.JoinGroupResponseMember
					if leader {
						members = g.responseMembers()
					}
					g.completeJoinFuture(cur, g.joinResponse(newID, members, leader), out)
				} else {
					r := g.joinResponse(newID, nil, false)
					r.LeaderID = currentLeader
					g.completeJoinFuture(cur, r, out)
				}
			}})
			return
		}
		s.maybePrepareRebalanceOrCompleteJoin(g, nowMs, out)
		return
	case stateCompletingRebalance:
		// The leader may already be assigning with the old id: rebalance.
		s.prepareRebalance(g, nowMs, out)
		return
	}
	s.maybeCompleteJoinPhase(g, nowMs, out)
}

// replaceStaticMember is ClassicGroup.replaceStaticMember: the old id's parked requests
// are answered FENCED_INSTANCE_ID and a member with the new id takes its place.
func (g *classicGroup) replaceStaticMember(instanceID, oldID, newID string, out *output) *member {
	old := g.members[oldID]
	fenced := kmsg.NewPtrJoinGroupResponse()
	fenced.MemberID = oldID
	fenced.ErrorCode = errFencedInstanceID
	fenced.Generation = -1
	g.completeJoinFuture(old, fenced, out)
	if old.awaitingSync() {
		out.complete(old.syncToken, syncError(errFencedInstanceID))
		old.syncToken = 0
	}
	nm := &member{
		id: newID, instanceID: old.instanceID, clientID: old.clientID, clientHost: old.clientHost,
		rebalanceTimeoutMs: old.rebalanceTimeoutMs, sessionTimeoutMs: old.sessionTimeoutMs,
		protocolType: old.protocolType, protocols: old.protocols, assignment: old.assignment,
	}
	delete(g.members, oldID)
	g.members[newID] = nm
	for i, id := range g.order {
		if id == oldID {
			g.order[i] = newID
		}
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	if g.isLeader(oldID) {
		g.leaderID = newID
	}
	g.staticMembers[instanceID] = newID
	return nm
}

func (s *shard) maybePrepareRebalanceOrCompleteJoin(g *classicGroup, nowMs int64, out *output) {
	if g.canRebalance() {
		s.prepareRebalance(g, nowMs, out)
	} else {
		s.maybeCompleteJoinPhase(g, nowMs, out)
	}
}

// maybeCompleteJoinPhase is GroupMetadataManager.maybeCompleteJoinPhase.
func (s *shard) maybeCompleteJoinPhase(g *classicGroup, nowMs int64, out *output) {
	if !g.is(statePreparingRebalance) || g.previousState == stateEmpty || !g.hasAllMembersJoined() {
		return
	}
	s.completeJoin(g, nowMs, out)
}

// prepareRebalance is GroupMetadataManager.prepareRebalance.
func (s *shard) prepareRebalance(g *classicGroup, nowMs int64, out *output) {
	if g.is(stateCompletingRebalance) {
		s.resetAndPropagateAssignment(g, errRebalanceInProgress, nowMs, out)
	}
	clear(g.pendingSync)
	s.cancel(timerSync, g.id, "")
	initial := g.is(stateEmpty)
	if initial {
		delay := s.cfg.initialRebalanceDelayMs
		e := s.schedule(timerInitialJoin, g.id, "", nowMs+int64(delay))
		e.delayMs = delay
		e.remainingMs = max(g.rebalanceTimeoutMs()-delay, 0)
	}
	g.transition(statePreparingRebalance, nowMs)
	if initial {
		return
	}
	if g.hasAllMembersJoined() {
		s.completeJoin(g, nowMs, out)
	} else {
		s.schedule(timerJoin, g.id, "", nowMs+int64(g.rebalanceTimeoutMs()))
	}
}

// tryCompleteInitialRebalance is tryCompleteInitialRebalanceElseSchedule: while new
// members keep arriving, the first rebalance of an empty group waits up to the rebalance
// timeout in steps of group.initial.rebalance.delay.ms.
func (s *shard) tryCompleteInitialRebalance(groupID string, delayMs, remainingMs int32, nowMs int64, out *output) {
	g := s.groups[groupID]
	if g == nil {
		return
	}
	if g.newMemberAdded && remainingMs != 0 {
		g.newMemberAdded = false
		newDelay := min(s.cfg.initialRebalanceDelayMs, remainingMs)
		e := s.schedule(timerInitialJoin, g.id, "", nowMs+int64(newDelay))
		e.delayMs = newDelay
		e.remainingMs = max(remainingMs-delayMs, 0)
		return
	}
	s.completeJoin(g, nowMs, out)
}

// completeJoin is completeClassicGroupJoin: members that did not rejoin are dropped (static
// ones are kept), the next generation starts and every parked join is answered.
func (s *shard) completeJoin(g *classicGroup, nowMs int64, out *output) {
	s.cancel(timerJoin, g.id, "")
	s.cancel(timerInitialJoin, g.id, "")
	for _, m := range g.memberList() {
		if !m.awaitingJoin() && m.instanceID == nil {
			s.dropMember(g, m, out)
			s.cancel(timerHeartbeat, g.id, m.id)
		}
	}
	if g.is(stateDead) {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Nobody rejoined: try again after another rebalance timeout, while session
		// timeouts remove the silent members.
		s.schedule(timerJoin, g.id, "", nowMs+int64(g.rebalanceTimeoutMs()))
		return
	}
	g.initNextGeneration(nowMs)
	if g.is(stateEmpty) {
		out.writes = append(out.writes, write{producerID: -1, records: []kmsg.Record{groupRecord(g, nil)}})
		return
	}
	for _, m := range g.memberList() {
		var members []kmsg.JoinGroupResponseMember
		if g.isLeader(m.id) {
			members = g.responseMembers()
		}
		g.completeJoinFuture(m, g.joinResponse(m.id, members, false), out)
		s.rescheduleHeartbeat(g, m, nowMs)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	e := s.schedule(timerSync, g.id, "", nowMs+int64(g.rebalanceTimeoutMs()))
	e.generation = g.generation
}

// dropMember removes a member whose parked SyncGroup, if any, is answered
// UNKNOWN_MEMBER_ID (Kafka leaves it to time out on the client).
func (s *shard) dropMember(g *classicGroup, m *member, out *output) {
	if m.awaitingSync() {
		out.complete(m.syncToken, syncError(errUnknownMemberID))
		m.syncToken = 0
	}
	g.remove(m.id)
}

func (s *shard) rescheduleHeartbeat(g *classicGroup, m *member, nowMs int64) {
	s.schedule(timerHeartbeat, g.id, m.id, nowMs+int64(m.sessionTimeoutMs))
}

// expireHeartbeat is expireClassicGroupMemberHeartbeat.
func (s *shard) expireHeartbeat(groupID, memberID string, nowMs int64, out *output) {
	g := s.groups[groupID]
	if g == nil || g.is(stateDead) {
		return
	}
	if g.pendingJoin[memberID] {
		g.remove(memberID)
		if g.is(statePreparingRebalance) && g.hasAllMembersJoined() {
			s.completeJoin(g, nowMs, out)
		}
		return
	}
	m := g.members[memberID]
	if m == nil || m.satisfiedHeartbeat() {
		return
	}
	s.removeMemberAndUpdate(g, m, nowMs, out)
}

// removeMemberAndUpdate is removeMemberAndUpdateClassicGroup.
func (s *shard) removeMemberAndUpdate(g *classicGroup, m *member, nowMs int64, out *output) {
	g.completeJoinFuture(m, joinError("", errUnknownMemberID), out)
	s.dropMember(g, m, out)
	switch {
	case g.is(stateStable) || g.is(stateCompletingRebalance):
		s.maybePrepareRebalanceOrCompleteJoin(g, nowMs, out)
	case g.is(statePreparingRebalance) && g.hasAllMembersJoined():
		s.completeJoin(g, nowMs, out)
	}
}

// expirePendingSync removes the members that did not send SyncGroup within the
// rebalance timeout and rebalances.
func (s *shard) expirePendingSync(groupID string, generation int32, nowMs int64, out *output) {
	g := s.groups[groupID]
	if g == nil || g.generation != generation {
		return
	}
	if !(g.is(stateCompletingRebalance) || g.is(stateStable)) || len(g.pendingSync) == 0 {
		return
	}
	for _, m := range g.memberList() {
		if g.pendingSync[m.id] {
			s.dropMember(g, m, out)
			s.cancel(timerHeartbeat, g.id, m.id)
		}
	}
	s.prepareRebalance(g, nowMs, out)
}

// resetAndPropagateAssignment clears every assignment and answers parked syncs with code.
func (s *shard) resetAndPropagateAssignment(g *classicGroup, code int16, nowMs int64, out *output) {
	for _, m := range g.members {
		m.assignment = nil
	}
	s.propagateAssignment(g, code, nowMs, out)
}

func (s *shard) propagateAssignment(g *classicGroup, code int16, nowMs int64, out *output) {
	for _, m := range g.memberList() {
		if !m.awaitingSync() {
			continue
		}
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = code
		if code == 0 {
			r.Protocol = nilIfEmpty(g.protocolName)
			r.ProtocolType = nilIfEmpty(g.protocolType)
		}
		r.MemberAssignment = m.assignment
		if r.MemberAssignment == nil {
			r.MemberAssignment = []byte{}
		}
		out.complete(m.syncToken, r)
		m.syncToken = 0
		// Restart the session clock: an expiry while the member waited was ignored.
		s.rescheduleHeartbeat(g, m, nowMs)
	}
}

// syncRequest is what the core needs of a SyncGroup request.
type syncRequest struct {
	req   *kmsg.SyncGroupRequest
	token uint64
}

// sync handles SyncGroup (classicGroupSyncToClassicGroup); the response is a completion
// for sr.token.
func (s *shard) sync(sr syncRequest, nowMs int64, out *output) {
	req := sr.req
	if cg := s.consumers[req.Group]; cg != nil && len(cg.members) > 0 {
		s.classicSyncToConsumerGroup(cg, sr, nowMs, out)
		return
	}
	g := s.groups[req.Group]
	if g == nil || g.is(stateEmpty) {
		out.complete(sr.token, syncError(errUnknownMemberID))
		return
	}
	if code := s.validateSync(g, req); code != 0 {
		out.complete(sr.token, syncError(code))
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		out.complete(sr.token, syncError(errRebalanceInProgress))
	case stateCompletingRebalance:
		s.supersedeSync(m, out)
		m.syncToken = sr.token
		s.removePendingSync(g, m.id)
		if !g.isLeader(m.id) {
			return
		}
		assignment := make(map[string][]byte, len(g.members))
		for _, a := range req.GroupAssignment {
			assignment[a.MemberID] = a.MemberAssignment
		}
		for id := range g.members {
			if _, ok := assignment[id]; !ok {
				assignment[id] = []byte{}
			}
		}
		gen := req.Generation
		rec := groupRecord(g, assignment)
		out.writes = append(out.writes, write{producerID: -1, records: []kmsg.Record{rec}, done: func(_ int64, err error, out *output) {
			// The group may have moved on while the write was in flight.
			if s.groups[g.id] != g || !g.is(stateCompletingRebalance) || g.generation != gen {
				return
			}
			if err != nil {
				s.resetAndPropagateAssignment(g, errCoordinatorNotAvail, nowMs, out)
				s.maybePrepareRebalanceOrCompleteJoin(g, nowMs, out)
				return
			}
			for id, m := range g.members {
				m.assignment = assignment[id]
			}
			s.propagateAssignment(g, 0, nowMs, out)
			g.transition(stateStable, nowMs)
		}})
	case stateStable:
		s.removePendingSync(g, m.id)
		r := kmsg.NewPtrSyncGroupResponse()
		r.Protocol = nilIfEmpty(g.protocolName)
		r.ProtocolType = nilIfEmpty(g.protocolType)
		r.MemberAssignment = m.assignment
		if r.MemberAssignment == nil {
			r.MemberAssignment = []byte{}
		}
		out.complete(sr.token, r)
	default:
		out.complete(sr.token, syncError(errCoordinatorNotAvail))
	}
}

func (s *shard) validateSync(g *classicGroup, req *kmsg.SyncGroupRequest) int16 {
	if g.is(stateDead) {
		return errCoordinatorNotAvail
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return errIllegalGeneration
	}
	inconsistent := func(reqValue *string, groupValue string) bool {
		return reqValue != nil && groupValue != "" && *reqValue != groupValue
	}
	if inconsistent(req.ProtocolType, g.protocolType) || inconsistent(req.Protocol, g.protocolName) {
		return errInconsistentProtocol
	}
	return 0
}

func (s *shard) removePendingSync(g *classicGroup, memberID string) {
	delete(g.pendingSync, memberID)
	switch g.state {
	case stateCompletingRebalance, stateStable:
		if len(g.pendingSync) == 0 {
			s.cancel(timerSync, g.id, "")
		}
	default:
		s.cancel(timerSync, g.id, "")
	}
}

// heartbeat handles Heartbeat (classicGroupHeartbeatToClassicGroup) and returns the
// error code of the response.
func (s *shard) heartbeat(req *kmsg.HeartbeatRequest, nowMs int64) int16 {
	if cg := s.consumers[req.Group]; cg != nil {
		return s.classicHeartbeatToConsumerGroup(cg, req, nowMs)
	}
	g := s.groups[req.Group]
	if g == nil {
		return errUnknownMemberID
	}
	if g.is(stateDead) {
		return errCoordinatorNotAvail
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return errIllegalGeneration
	}
	switch g.state {
	case stateEmpty:
		return errUnknownMemberID
	case statePreparingRebalance:
		s.rescheduleHeartbeat(g, g.members[req.MemberID], nowMs)
		return errRebalanceInProgress
	default: // CompletingRebalance (clients heartbeat after their JoinGroup response) or Stable
		s.rescheduleHeartbeat(g, g.members[req.MemberID], nowMs)
		return 0
	}
}

// leave handles LeaveGroup (classicGroupLeaveToClassicGroup) for the v3+ member list;
// it returns the top-level error code and one response per member.
func (s *shard) leave(groupID string, members []kmsg.LeaveGroupRequestMember, nowMs int64, out *output) (int16, []kmsg.LeaveGroupResponseMember) {
	resps := make([]kmsg.LeaveGroupResponseMember, len(members))
	for i, lm := range members {
		resps[i] = kmsg.NewLeaveGroupResponseMember()
		resps[i].MemberID = lm.MemberID
		resps[i].InstanceID = lm.InstanceID
	}
	if cg := s.consumers[groupID]; cg != nil {
		s.leaveConsumerGroup(cg, members, resps, nowMs, out)
		return 0, resps
	}
	g := s.groups[groupID]
	if g == nil {
		for i := range resps {
			resps[i].ErrorCode = errUnknownMemberID
		}
		return 0, resps
	}
	if g.is(stateDead) {
		return errCoordinatorNotAvail, nil
	}
	valid := 0
	for i, lm := range members {
		switch {
		case lm.MemberID == "":
			// Administrative removal of a static member by instance id.
			if lm.InstanceID != nil && g.staticMembers[*lm.InstanceID] != "" {
				s.removeCurrentMember(g, g.staticMembers[*lm.InstanceID], out)
				valid++
			} else {
				resps[i].ErrorCode = errUnknownMemberID
			}
		case g.pendingJoin[lm.MemberID]:
			g.remove(lm.MemberID)
			s.cancel(timerHeartbeat, g.id, lm.MemberID)
			valid++
		default:
			if code := g.validateMember(lm.MemberID, lm.InstanceID); code != 0 {
				resps[i].ErrorCode = code
				continue
			}
			s.removeCurrentMember(g, lm.MemberID, out)
			valid++
		}
	}
	if valid > 0 {
		switch g.state {
		case stateStable, stateCompletingRebalance:
			s.maybePrepareRebalanceOrCompleteJoin(g, nowMs, out)
		case statePreparingRebalance:
			s.maybeCompleteJoinPhase(g, nowMs, out)
		}
	}
	return 0, resps
}

func (s *shard) removeCurrentMember(g *classicGroup, memberID string, out *output) {
	m := g.members[memberID]
	s.cancel(timerHeartbeat, g.id, memberID)
	g.completeJoinFuture(m, joinError("", errUnknownMemberID), out)
	s.dropMember(g, m, out)
}
