package group

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/exactq/exactq/internal/group/consumer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member epochs with a meaning of their own (ConsumerGroupHeartbeatRequest).
const (
	leaveGroupMemberEpoch       int32 = -1
	leaveGroupStaticMemberEpoch int32 = -2
)

// regexRefreshIntervalMs is how long a resolved regex is reused before it is matched
// against the topics again (Kafka refreshes a group's regexes at most every 10 s, or
// when topics change; exactq re-resolves on the first heartbeat after 10 s).
const regexRefreshIntervalMs = 10_000

// cgMember is a consumer-protocol member (ConsumerGroupMember): its subscription and
// client (the member metadata record) and its assignment state (the current assignment
// record).
type cgMember struct {
	id                   string
	instanceID, rackID   *string
	clientID, clientHost string
	topicNames           []string
	regex                *string
	rebalanceTimeoutMs   int32
	serverAssignor       *string
	// classic is set for a member that uses the classic protocol (JoinGroup, SyncGroup,
	// Heartbeat) inside a consumer group: ClassicMemberMetadata of its record.
	classic *classicMeta
	consumer.Member
}

// classicMeta is what a classic member's JoinGroup told: its session timeout and its
// protocols, in preference order (ConsumerGroupMemberMetadataValue.ClassicMemberMetadata).
type classicMeta struct {
	sessionTimeoutMs int32
	protocols        []protocol
}

func (c *classicMeta) equal(o *classicMeta) bool {
	if c == nil || o == nil {
		return c == o
	}
	if c.sessionTimeoutMs != o.sessionTimeoutMs || len(c.protocols) != len(o.protocols) {
		return false
	}
	for i := range c.protocols {
		if c.protocols[i].name != o.protocols[i].name || !bytes.Equal(c.protocols[i].metadata, o.protocols[i].metadata) {
			return false
		}
	}
	return true
}

func (m *cgMember) regexSet() bool { return m.regex != nil && *m.regex != "" }

// usesClassic is ConsumerGroupMember.useClassicProtocol.
func (m *cgMember) usesClassic() bool { return m.classic != nil }

// metadataEqual compares what the member metadata record holds.
func (m *cgMember) metadataEqual(o *cgMember) bool {
	return ptrEqual(m.instanceID, o.instanceID) && ptrEqual(m.rackID, o.rackID) && m.clientID == o.clientID &&
		m.clientHost == o.clientHost && slices.Equal(m.topicNames, o.topicNames) && ptrEqual(m.regex, o.regex) &&
		m.rebalanceTimeoutMs == o.rebalanceTimeoutMs && ptrEqual(m.serverAssignor, o.serverAssignor) &&
		m.classic.equal(o.classic)
}

func ptrEqual(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// resolvedRegex is a regex matched against the topics at a time.
type resolvedRegex struct {
	re         *regexp.Regexp
	topics     []string
	resolvedMs int64
}

// consumerGroup is a KIP-848 consumer group (ConsumerGroup). Only replay writes the
// persisted fields (every one is in a record); regexes is a cache.
type consumerGroup struct {
	id                    string
	createdMs             int64
	epoch                 int32
	metadataHash          int64
	assignmentEpoch       int32
	assignmentTimestampMs int64
	members               map[string]*cgMember
	static                map[string]string // instance id -> member id
	target                map[string]consumer.Set
	// owner is the member that holds each partition, assigned or pending revocation
	// (Kafka's currentPartitionEpoch): a partition goes to a new member only once the
	// old one released it.
	owner   map[consumer.TP]string
	regexes map[string]*resolvedRegex
}

func newConsumerGroup(id string, nowMs int64) *consumerGroup {
	return &consumerGroup{id: id, createdMs: nowMs, members: map[string]*cgMember{}, static: map[string]string{},
		target: map[string]consumer.Set{}, owner: map[consumer.TP]string{}, regexes: map[string]*resolvedRegex{}}
}

// state is ConsumerGroup.maybeUpdateGroupState.
func (g *consumerGroup) state() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if !m.ReconciledTo(g.assignmentEpoch) {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (g *consumerGroup) memberForReplay(id string) *cgMember {
	m := g.members[id]
	if m == nil {
		m = newCGMember(id)
		g.members[id] = m
	}
	return m
}

// newCGMember is a member before its first record: no rebalance timeout, nothing owned.
func newCGMember(id string) *cgMember {
	return &cgMember{id: id, rebalanceTimeoutMs: -1,
		Member: consumer.Member{Assigned: consumer.Epochs{}, PendingRevocation: consumer.Epochs{}}}
}

func (g *consumerGroup) removeMember(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	g.setAssignment(m, consumer.Member{Assigned: consumer.Epochs{}, PendingRevocation: consumer.Epochs{}})
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	delete(g.members, id)
}

// setAssignment replaces m's assignment state and the partition owners with it.
func (g *consumerGroup) setAssignment(m *cgMember, a consumer.Member) {
	for _, set := range []consumer.Epochs{m.Assigned, m.PendingRevocation} {
		for tp := range set {
			if g.owner[tp] == m.id {
				delete(g.owner, tp)
			}
		}
	}
	m.Member = a
	for _, set := range []consumer.Epochs{a.Assigned, a.PendingRevocation} {
		for tp := range set {
			g.owner[tp] = m.id
		}
	}
}

// heartbeatRequest is what the core needs of a ConsumerGroupHeartbeat, already
// validated by the edge.
type heartbeatRequest struct {
	req                  *kmsg.ConsumerGroupHeartbeatRequest
	clientID, clientHost string
	token                uint64
}

func heartbeatError(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	r.ErrorCode = code
	if msg != "" {
		r.ErrorMessage = &msg
	}
	return r
}

// emit applies records to memory (through replay, so memory is what a restart rebuilds)
// and collects them to be written.
type emitter struct {
	s       *shard
	nowMs   int64
	records []kmsg.Record
	// after runs once the records are queued, in order: what a conversion to a classic
	// group starts (a rebalance) comes after the records that create the group.
	after []func(out *output)
}

func (e *emitter) add(r kmsg.Record) {
	if err := e.s.replayConsumerRecord(consumerKeyType(r.Key), r, e.nowMs); err != nil {
		panic("group: a consumer group record the coordinator wrote does not replay: " + err.Error())
	}
	e.records = append(e.records, r)
}

// finish writes the records and answers token with resp once they are durable.
func (e *emitter) finish(token uint64, resp *kmsg.ConsumerGroupHeartbeatResponse, out *output) {
	e.finishWith(out, func(err error, out *output) {
		if err != nil {
			out.complete(token, heartbeatError(errCoordinatorNotAvail, ""))
			return
		}
		out.complete(token, resp)
	})
}

// finishWith writes the records and runs done once they are durable (at once, with a nil
// error, when there are none).
func (e *emitter) finishWith(out *output, done func(err error, out *output)) {
	if len(e.records) == 0 {
		done(nil, out)
	} else {
		out.writes = append(out.writes, write{records: e.records, producerID: -1, done: func(_ int64, err error, out *output) {
			done(err, out)
		}})
	}
	for _, f := range e.after {
		f(out)
	}
}

// consumerHeartbeat is GroupMetadataManager.consumerGroupHeartbeat for a request the
// edge validated (throwIfConsumerGroupHeartbeatRequestIsInvalid). It completes hr.token
// with a *kmsg.ConsumerGroupHeartbeatResponse once its records are durable.
func (s *shard) consumerHeartbeat(hr heartbeatRequest, nowMs int64, out *output) {
	req := hr.req
	e := &emitter{s: s, nowMs: nowMs}
	if req.MemberEpoch == leaveGroupMemberEpoch || req.MemberEpoch == leaveGroupStaticMemberEpoch {
		resp, code, msg := s.consumerLeave(e, req)
		if code != 0 {
			out.complete(hr.token, heartbeatError(code, msg))
			return
		}
		e.finish(hr.token, resp, out)
		return
	}
	resp, code, msg := s.consumerJoinOrHeartbeat(e, hr)
	if code != 0 {
		// Every check comes before the first record but one: a member in an unknown
		// state is fenced after its subscription was recorded; what was applied is
		// written before the error is answered.
		resp = heartbeatError(code, msg)
	}
	e.finish(hr.token, resp, out)
}

// consumerGroupFor is getOrMaybeCreateConsumerGroup: a join (epoch 0) creates the group,
// replacing an Empty classic group (one that only holds offsets) of the same id.
func (s *shard) consumerGroupFor(e *emitter, id string, create bool) (*consumerGroup, int16, string) {
	if g := s.consumers[id]; g != nil {
		return g, 0, ""
	}
	if cg := s.groups[id]; cg != nil && !cg.is(stateDead) {
		if !create {
			return nil, errGroupIDNotFound, "Group " + id + " is not a consumer group."
		}
		if !cg.is(stateEmpty) {
			// The online upgrade (group.consumer.migration.policy), checked by the caller.
			return s.upgradeToConsumer(e, cg), 0, ""
		}
		e.records = append(e.records, groupTombstone(id))
		delete(s.groups, id)
	}
	if !create {
		return nil, errGroupIDNotFound, "Consumer group " + id + " not found."
	}
	g := newConsumerGroup(id, e.nowMs)
	s.consumers[id] = g
	return g, 0, ""
}

func (s *shard) consumerJoinOrHeartbeat(e *emitter, hr heartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, int16, string) {
	req := hr.req
	nowMs := e.nowMs
	joining := req.MemberEpoch == 0
	// Checks first, so an error leaves no trace.
	if g := s.consumers[req.Group]; g != nil {
		if code, msg := s.consumerMemberCheck(g, req); code != 0 {
			return nil, code, msg
		}
	} else if !joining {
		if cg := s.groups[req.Group]; cg != nil && !cg.is(stateDead) {
			return nil, errGroupIDNotFound, "Group " + req.Group + " is not a consumer group."
		}
		return nil, errGroupIDNotFound, "Consumer group " + req.Group + " not found."
	} else if cg := s.groups[req.Group]; cg != nil && !cg.is(stateDead) && !cg.is(stateEmpty) {
		// An online upgrade: the checks run against the group the conversion would make.
		up, code, msg := s.upgradeCandidate(cg, nowMs)
		if code != 0 {
			return nil, code, msg
		}
		if code, msg := s.consumerMemberCheck(up, req); code != 0 {
			return nil, code, msg
		}
	}
	var re *regexp.Regexp
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if re, err = consumer.CompileRegex(*req.SubscribedTopicRegex); err != nil {
			return nil, kerr.InvalidRegularExpression.Code, err.Error()
		}
	}
	g, code, msg := s.consumerGroupFor(e, req.Group, joining)
	if code != 0 {
		return nil, code, msg
	}
	memberID := req.MemberID
	if memberID == "" {
		memberID = s.newUUID()
	}
	old := s.memberFor(e, g, memberID, req.InstanceID, joining)
	if old == nil {
		old = newCGMember(memberID)
	}

	// 1. The member's subscription and client.
	upd := *old
	if req.InstanceID != nil {
		upd.instanceID = req.InstanceID
	}
	if req.RackID != nil {
		upd.rackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		upd.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		upd.serverAssignor = req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		upd.topicNames = slices.Sorted(slices.Values(req.SubscribedTopicNames))
		upd.topicNames = slices.Compact(upd.topicNames)
	}
	if req.SubscribedTopicRegex != nil {
		upd.regex = req.SubscribedTopicRegex
	}
	upd.clientID, upd.clientHost = hr.clientID, hr.clientHost
	upd.classic = nil // a ConsumerGroupHeartbeat makes the member a consumer-protocol one
	_, existed := g.members[memberID]
	namesChanged, regexChanged := false, false
	oldPreferred := s.preferredAssignor(g)
	if !existed || !old.metadataEqual(&upd) {
		namesChanged = !slices.Equal(old.topicNames, upd.topicNames)
		regexChanged = !ptrEqual(old.regex, upd.regex) && (old.regexSet() || upd.regexSet())
		e.add(cgMemberRecord(g.id, &upd))
	}
	m := g.members[memberID]
	if re != nil {
		if r := g.regexes[*m.regex]; r == nil || nowMs-r.resolvedMs >= regexRefreshIntervalMs {
			g.regexes[*m.regex] = &resolvedRegex{re: re, topics: s.resolveRegex(re), resolvedMs: nowMs}
		}
	}
	s.pruneRegexes(g)
	subscriptionChanged := namesChanged || regexChanged

	// 2. The group epoch: bumped when a subscription or the preferred assignor changed,
	// or the subscribed topics' metadata did (KIP-1101's metadata hash).
	bump := subscriptionChanged || s.preferredAssignor(g) != oldPreferred
	if hash := s.metadataHash(g, nowMs); hash != g.metadataHash || bump {
		e.add(cgEpochRecord(g.id, g.epoch+1, hash))
	}

	// 3. The target assignment, when the group epoch is ahead of it.
	if g.assignmentEpoch < g.epoch {
		s.computeTarget(e, g)
	}

	// 4. Reconcile the member towards its target.
	before := m.Member
	if subscriptionChanged || !m.ReconciledTo(g.assignmentEpoch) {
		var owned consumer.Set
		if req.Topics != nil {
			owned = consumer.Set{}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					owned[consumer.TP{Topic: t.TopicID, Partition: p}] = struct{}{}
				}
			}
		}
		next, err := s.reconcile(g, m, subscriptionChanged, owned)
		if err != nil {
			// Only a member in an unknown state still owning partitions: nothing was
			// changed that the member's rejoin does not redo.
			return nil, kerr.FencedMemberEpoch.Code, err.Error()
		}
		s.applyReconciled(e, g, m, next)
	}
	s.schedule(timerConsumerSession, g.id, m.id, nowMs+int64(s.consumerSessionTimeoutMs(g.id)))

	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberID = &m.id
	resp.MemberEpoch = m.Epoch
	resp.HeartbeatIntervalMillis = s.consumerHeartbeatIntervalMs(g.id)
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if joining || full || !maps.Equal(before.Assigned, m.Assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		topics, parts := byTopicID(m.Assigned.Sorted())
		for i, t := range topics {
			rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			rt.TopicID, rt.Partitions = t, parts[i]
			a.Topics = append(a.Topics, rt)
		}
		resp.Assignment = &a
	}
	return resp, 0, ""
}

// reconcile is one step of m towards its target (maybeReconcile's CurrentAssignmentBuilder).
func (s *shard) reconcile(g *consumerGroup, m *cgMember, subscriptionChanged bool, owned consumer.Set) (consumer.Member, error) {
	subscribed := s.subscribedTopicIDs(g, m)
	return consumer.Reconcile(m.Member, consumer.Input{
		TargetEpoch: g.assignmentEpoch, Target: g.target[m.id],
		Subscribed:          func(t [16]byte) bool { return subscribed[t] },
		SubscriptionChanged: subscriptionChanged,
		OwnedBy:             func(tp consumer.TP) bool { _, ok := g.owner[tp]; return ok },
		Owned:               owned,
	})
}

// applyReconciled records a member's new assignment state, if it changed, and arms or
// cancels its rebalance deadline (consumer-protocol members only: a classic member has
// its join and sync deadlines instead).
func (s *shard) applyReconciled(e *emitter, g *consumerGroup, m *cgMember, next consumer.Member) {
	if next.Equal(m.Member) {
		return
	}
	e.add(cgCurrentRecord(g.id, m.id, next))
	if m.usesClassic() {
		return
	}
	if next.State == consumer.UnrevokedPartitions {
		s.scheduleConsumerRebalance(g.id, m.id, next.Epoch, e.nowMs+int64(m.rebalanceTimeoutMs))
	} else {
		s.cancel(timerConsumerRebalance, g.id, m.id)
	}
}

// consumerMemberCheck is the part of getOrMaybeSubscribe*ConsumerGroupMember that can
// refuse the request, run before anything changes.
func (s *shard) consumerMemberCheck(g *consumerGroup, req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	joining := req.MemberEpoch == 0
	// throwIfConsumerGroupIsFull: an existing static member's instance id or an
	// existing member never counts against the size.
	if _, ok := g.members[req.MemberID]; !ok && (req.InstanceID == nil || g.static[*req.InstanceID] == "") {
		if max := s.cfg.consumerMaxSize; max > 0 && len(g.members) >= int(max) {
			return errGroupMaxSizeReached, "The consumer group has reached its maximum capacity."
		}
	}
	if req.InstanceID == nil {
		m := g.members[req.MemberID]
		if m == nil {
			if joining {
				return 0, ""
			}
			return errUnknownMemberID, "Member " + req.MemberID + " is not a member of group " + g.id + "."
		}
		return memberEpochCheck(m, req)
	}
	prevID := g.static[*req.InstanceID]
	if joining {
		// A classic member's instance id is taken over without a leave (Kafka checks the
		// release only between two consumer-protocol members).
		if prev := g.members[prevID]; prev != nil && !prev.usesClassic() && prev.Epoch != leaveGroupStaticMemberEpoch {
			return kerr.UnreleasedInstanceID.Code, "Static member " + req.MemberID + " with instance id " +
				*req.InstanceID + " cannot join the group because the instance id is owned by " + prevID + " member."
		}
		return 0, ""
	}
	prev := g.members[prevID]
	if prev == nil {
		return errUnknownMemberID, "Instance id " + *req.InstanceID + " is unknown."
	}
	if prevID != req.MemberID {
		return errFencedInstanceID, "Static member " + req.MemberID + " with instance id " + *req.InstanceID +
			" was fenced by member " + prevID + "."
	}
	return memberEpochCheck(prev, req)
}

// memberEpochCheck is throwIfConsumerGroupMemberEpochIsInvalid: a member may come with
// its epoch, or with the previous one when the response that bumped it was lost and it
// owns no more than its current assignment.
func memberEpochCheck(m *cgMember, req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	if req.MemberEpoch == 0 || req.MemberEpoch == m.Epoch {
		return 0, ""
	}
	if req.MemberEpoch < m.Epoch && req.MemberEpoch == m.PreviousEpoch && ownedSubset(req.Topics, m.Assigned) {
		return 0, ""
	}
	return kerr.FencedMemberEpoch.Code, "The consumer group member has a member epoch (" + strconv.Itoa(int(req.MemberEpoch)) +
		") other than the one known by the group coordinator (" + strconv.Itoa(int(m.Epoch)) + "). The member must abandon all its partitions and rejoin."
}

func ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, assigned consumer.Epochs) bool {
	if owned == nil {
		return false
	}
	for _, t := range owned {
		for _, p := range t.Partitions {
			if _, ok := assigned[consumer.TP{Topic: t.TopicID, Partition: p}]; !ok {
				return false
			}
		}
	}
	return true
}

// memberFor returns the member a checked request heartbeats as, or nil for a new one.
// A static member rejoining under a new member id replaces its old incarnation
// (replaceMember): the new id takes over the old one's target and assignment, at epoch 0.
func (s *shard) memberFor(e *emitter, g *consumerGroup, memberID string, instanceID *string, joining bool) *cgMember {
	if instanceID == nil {
		return g.members[memberID]
	}
	prevID := g.static[*instanceID]
	prev := g.members[prevID]
	if prev == nil {
		return nil
	}
	if !joining {
		return prev
	}
	// A rejoin (checked: the old incarnation left with epoch -2) keeps the old one's
	// partitions at epoch 0, even under the same member id.
	next := *prev
	next.id = memberID
	next.Member = consumer.Member{State: prev.State, Assigned: maps.Clone(prev.Assigned), PendingRevocation: maps.Clone(prev.PendingRevocation)}
	target := g.target[prevID]
	s.removeConsumerMember(e, g.id, prevID)
	s.cancelConsumerTimers(g.id, prevID)
	e.add(cgMemberRecord(g.id, &next))
	e.add(cgTargetMemberRecord(g.id, memberID, target))
	e.add(cgCurrentRecord(g.id, memberID, next.Member))
	return g.members[memberID]
}

// removeConsumerMember writes removeMember's three tombstones.
func (s *shard) removeConsumerMember(e *emitter, groupID, memberID string) {
	e.add(kmsg.Record{Key: cgMemberKey(keyConsumerGroupCurrentAssignment, groupID, memberID)})
	e.add(kmsg.Record{Key: cgMemberKey(keyConsumerGroupTargetMember, groupID, memberID)})
	e.add(kmsg.Record{Key: cgMemberKey(keyConsumerGroupMemberMetadata, groupID, memberID)})
}

func (s *shard) cancelConsumerTimers(groupID, memberID string) {
	s.cancel(timerConsumerSession, groupID, memberID)
	s.cancel(timerConsumerRebalance, groupID, memberID)
	s.cancel(timerConsumerJoin, groupID, memberID)
	s.cancel(timerConsumerSync, groupID, memberID)
}

// consumerLeave is consumerGroupLeave: epoch -1 removes the member; -2 (a static
// member's temporary leave) keeps it, at epoch -2, so the same instance can come back
// within the session timeout and take its partitions again.
func (s *shard) consumerLeave(e *emitter, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, int16, string) {
	g := s.consumers[req.Group]
	if g == nil {
		return nil, errGroupIDNotFound, "Consumer group " + req.Group + " not found."
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = req.MemberEpoch
	var m *cgMember
	if req.InstanceID == nil {
		if m = g.members[req.MemberID]; m == nil {
			return nil, errUnknownMemberID, "Member " + req.MemberID + " is not a member of group " + g.id + "."
		}
	} else {
		id := g.static[*req.InstanceID]
		if m = g.members[id]; m == nil {
			return nil, errUnknownMemberID, "Instance id " + *req.InstanceID + " is unknown."
		}
		if id != req.MemberID {
			return nil, errFencedInstanceID, "Static member " + req.MemberID + " with instance id " + *req.InstanceID +
				" was fenced by member " + id + "."
		}
		if req.MemberEpoch == leaveGroupStaticMemberEpoch {
			a := consumer.Member{Epoch: leaveGroupStaticMemberEpoch, PreviousEpoch: m.PreviousEpoch, State: m.State,
				Assigned: consumer.Epochs{}, PendingRevocation: consumer.Epochs{}}
			for tp := range m.Assigned {
				a.Assigned[tp] = 0 // the next incarnation holds them from epoch 0
			}
			// updateMemberEpoch is not used here: the previous epoch stays.
			e.add(cgCurrentRecord(g.id, m.id, a))
			return resp, 0, ""
		}
	}
	s.fenceConsumerMember(e, g, m.id)
	return resp, 0, ""
}

// fenceConsumerMember is consumerGroupFenceMembers for one member.
func (s *shard) fenceConsumerMember(e *emitter, g *consumerGroup, memberID string) {
	s.fenceConsumerMembers(e, g, []string{memberID})
}

// fenceConsumerMembers is consumerGroupFenceMembers: the members' records go, the group
// epoch is bumped once, and a group left empty gets its assignment epoch caught up.
func (s *shard) fenceConsumerMembers(e *emitter, g *consumerGroup, memberIDs []string) {
	if len(memberIDs) == 0 {
		return
	}
	if s.canDowngradeWithout(g, memberIDs) {
		s.downgradeToClassic(e, g, memberIDs, nil, true)
		return
	}
	for _, id := range memberIDs {
		s.removeConsumerMember(e, g.id, id)
		s.cancelConsumerTimers(g.id, id)
	}
	s.pruneRegexes(g)
	epoch := g.epoch + 1
	e.add(cgEpochRecord(g.id, epoch, s.metadataHash(g, e.nowMs)))
	if len(g.members) == 0 {
		e.add(cgTargetMetadataRecord(g.id, epoch, 0))
	}
}

// leaveConsumerGroup is classicGroupLeaveToConsumerGroup: a LeaveGroup naming members of
// a consumer group (the admin client's removal of members, by member id or, for static
// members, by instance id alone) fences them, each answered in resps. Like a classic
// leave it is answered at once; the records follow in the partition's write order.
func (s *shard) leaveConsumerGroup(g *consumerGroup, members []kmsg.LeaveGroupRequestMember, resps []kmsg.LeaveGroupResponseMember, nowMs int64, out *output) {
	var fenced []string
	seen := map[string]bool{}
	for i, lm := range members {
		var id string
		if lm.InstanceID == nil {
			if g.members[lm.MemberID] == nil {
				resps[i].ErrorCode = errUnknownMemberID
				continue
			}
			id = lm.MemberID
		} else {
			id = g.static[*lm.InstanceID]
			switch {
			case g.members[id] == nil:
				resps[i].ErrorCode = errUnknownMemberID
				continue
			case lm.MemberID != "" && lm.MemberID != id:
				resps[i].ErrorCode = errFencedInstanceID
				continue
			}
		}
		if !seen[id] {
			seen[id] = true
			fenced = append(fenced, id)
		}
	}
	e := &emitter{s: s, nowMs: nowMs}
	s.fenceConsumerMembers(e, g, fenced)
	e.finish(0, nil, out)
}

// expireConsumerMember fences a member whose session or rebalance timeout passed.
func (s *shard) expireConsumerMember(groupID, memberID string, rebalanceEpoch int32, rebalance bool, nowMs int64, out *output) {
	g := s.consumers[groupID]
	if g == nil {
		return
	}
	m := g.members[memberID]
	if m == nil || (rebalance && m.Epoch != rebalanceEpoch) {
		return
	}
	e := &emitter{s: s, nowMs: nowMs}
	s.fenceConsumerMember(e, g, memberID)
	e.finish(0, nil, out)
}

func (s *shard) scheduleConsumerRebalance(groupID, memberID string, epoch int32, deadlineMs int64) {
	t := s.schedule(timerConsumerRebalance, groupID, memberID, deadlineMs)
	t.generation = epoch
}

// subscribedTopicIDs is the member's subscription as topic ids of existing topics:
// its names and what its regex matched.
func (s *shard) subscribedTopicIDs(g *consumerGroup, m *cgMember) map[[16]byte]bool {
	out := map[[16]byte]bool{}
	add := func(name string) {
		if id, _, ok := s.cfg.topicMeta(name); ok {
			out[id] = true
		}
	}
	for _, n := range m.topicNames {
		add(n)
	}
	if m.regexSet() {
		if r := g.regexes[*m.regex]; r != nil {
			for _, n := range r.topics {
				add(n)
			}
		}
	}
	return out
}

// subscribedTopicNames is every topic name some member subscribes to.
func (s *shard) subscribedTopicNames(g *consumerGroup) []string {
	set := map[string]bool{}
	for _, m := range g.members {
		for _, n := range m.topicNames {
			set[n] = true
		}
		if m.regexSet() {
			if r := g.regexes[*m.regex]; r != nil {
				for _, n := range r.topics {
					set[n] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// resolveRegex matches re against every topic (internal ones too, as Kafka).
func (s *shard) resolveRegex(re *regexp.Regexp) []string {
	var out []string
	if s.cfg.topicNames == nil {
		return nil
	}
	for _, n := range s.cfg.topicNames() {
		if re.MatchString(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// pruneRegexes drops the resolutions of regexes no member subscribes to any more, and
// resolves those of members loaded from the log.
func (s *shard) pruneRegexes(g *consumerGroup) {
	used := map[string]bool{}
	for _, m := range g.members {
		if m.regexSet() {
			used[*m.regex] = true
		}
	}
	for re := range g.regexes {
		if !used[re] {
			delete(g.regexes, re)
		}
	}
}

// refreshRegexes resolves every regex of g not resolved in the last 10 s.
func (s *shard) refreshRegexes(g *consumerGroup, nowMs int64) {
	for _, m := range g.members {
		if !m.regexSet() {
			continue
		}
		if r := g.regexes[*m.regex]; r != nil && nowMs-r.resolvedMs < regexRefreshIntervalMs {
			continue
		}
		re, err := consumer.CompileRegex(*m.regex)
		if err != nil {
			continue // validated when it was accepted; a newer Go could refuse it
		}
		g.regexes[*m.regex] = &resolvedRegex{re: re, topics: s.resolveRegex(re), resolvedMs: nowMs}
	}
}

// metadataHash hashes the subscribed topics' ids and partition counts (the role of
// KIP-1101's hash: it changes when a subscribed topic is created, deleted, re-created
// or grows). Kafka's hash is Murmur3 over its topic images and cannot be reproduced;
// only this coordinator compares the hashes it wrote.
func (s *shard) metadataHash(g *consumerGroup, nowMs int64) int64 {
	s.refreshRegexes(g, nowMs)
	names := s.subscribedTopicNames(g)
	if len(names) == 0 {
		return 0
	}
	h := fnv.New64a()
	for _, n := range names {
		id, parts, ok := s.cfg.topicMeta(n)
		if !ok {
			continue
		}
		h.Write([]byte(n))
		h.Write(id[:])
		h.Write([]byte{byte(parts >> 24), byte(parts >> 16), byte(parts >> 8), byte(parts)})
	}
	return int64(h.Sum64())
}

// preferredAssignor is computePreferredServerAssignor: the assignor most members ask
// for (ties to the lower name, where Kafka takes any), else the default.
func (s *shard) preferredAssignor(g *consumerGroup) string {
	counts := map[string]int{}
	for _, m := range g.members {
		if m.serverAssignor != nil {
			counts[*m.serverAssignor]++
		}
	}
	best, n := "", 0
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if counts[name] > n {
			best, n = name, counts[name]
		}
	}
	if best == "" {
		return s.cfg.consumerAssignors[0]
	}
	return best
}

// computeTarget is maybeUpdateTargetAssignment: a new target for every member at the
// group epoch; the records are the members whose target changed, then the epoch.
func (s *shard) computeTarget(e *emitter, g *consumerGroup) {
	assign, ok := consumer.ByName(s.preferredAssignor(g))
	if !ok {
		assign = consumer.Uniform
	}
	partitions := map[[16]byte]int32{}
	var members []consumer.AssignMember
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		topics := s.subscribedTopicIDs(g, m)
		for _, n := range m.topicNames {
			if tid, parts, ok := s.cfg.topicMeta(n); ok {
				partitions[tid] = parts
			}
		}
		if m.regexSet() {
			if r := g.regexes[*m.regex]; r != nil {
				for _, n := range r.topics {
					if tid, parts, ok := s.cfg.topicMeta(n); ok {
						partitions[tid] = parts
					}
				}
			}
		}
		members = append(members, consumer.AssignMember{ID: id, InstanceID: m.instanceID, Topics: topics, Current: g.target[id]})
	}
	result := assign(members, partitions)
	for _, m := range members {
		if !maps.Equal(result[m.ID], g.target[m.ID]) || g.target[m.ID] == nil {
			e.add(cgTargetMemberRecord(g.id, m.ID, result[m.ID]))
		}
	}
	e.add(cgTargetMetadataRecord(g.id, g.epoch, e.nowMs))
}

func (s *shard) consumerSessionTimeoutMs(groupID string) int32 {
	if s.cfg.consumerTimeouts != nil {
		ms, _ := s.cfg.consumerTimeouts(groupID)
		return ms
	}
	return 45000
}

func (s *shard) consumerHeartbeatIntervalMs(groupID string) int32 {
	if s.cfg.consumerTimeouts != nil {
		_, ms := s.cfg.consumerTimeouts(groupID)
		return ms
	}
	return 5000
}

// randomUUID is Kafka's Uuid.randomUuid().toString(): 16 random bytes, URL-safe base64
// without padding.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// validateOffsetCommit is ConsumerGroup.validateOffsetCommit: 0 when the commit may
// go on; a partition the member may not commit for gets its own code in cr.parts.
func (g *consumerGroup) validateOffsetCommit(cr *commitRequest) int16 {
	// An admin client or a consumer outside group management commits to an empty group.
	if cr.generation < 0 && len(g.members) == 0 {
		return 0
	}
	// TxnOffsetCommit need not name the member at all.
	if cr.txn && cr.generation == -1 && cr.memberID == "" && cr.instanceID == nil {
		return 0
	}
	m := g.members[cr.memberID]
	if m == nil {
		return errUnknownMemberID
	}
	if !cr.txn && !m.usesClassic() && cr.version < 9 {
		return kerr.UnsupportedVersion.Code // OffsetCommit v9+ carries the member epoch
	}
	// A classic member's generation is its member epoch; its mismatches are
	// ILLEGAL_GENERATION rather than STALE_MEMBER_EPOCH.
	stale := kerr.StaleMemberEpoch.Code
	if m.usesClassic() {
		stale = errIllegalGeneration
	}
	switch {
	case cr.generation == m.Epoch:
		return 0
	case cr.generation > m.Epoch:
		return stale
	}
	// An older epoch may still commit the partitions it was assigned at or before
	// (KIP-1251's assignment epochs), including those it is revoking.
	for i := range cr.parts {
		p := &cr.parts[i]
		tp := consumer.TP{Topic: p.topicID, Partition: p.partition}
		e, ok := m.Assigned[tp]
		if !ok {
			e, ok = m.PendingRevocation[tp]
		}
		if !ok || cr.generation < e {
			p.code = stale
		}
	}
	return 0
}

// validateOffsetFetch is ConsumerGroup.validateOffsetFetch: a consumer that names itself
// must be a member at its current epoch.
func (g *consumerGroup) validateOffsetFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	id := ""
	if memberID != nil {
		id = *memberID
	}
	m := g.members[id]
	switch {
	case m == nil:
		return errUnknownMemberID
	case epoch != m.Epoch && m.usesClassic():
		return errIllegalGeneration
	case epoch != m.Epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// consumerGroupTombstones removes an empty consumer group (createGroupTombstoneRecords)
// and returns its tombstones; the caller writes them.
func (s *shard) consumerGroupTombstones(g *consumerGroup, e *emitter) []kmsg.Record {
	start := len(e.records)
	for _, id := range slices.Sorted(maps.Keys(g.target)) {
		e.add(kmsg.Record{Key: cgMemberKey(keyConsumerGroupTargetMember, g.id, id)})
	}
	e.add(kmsg.Record{Key: cgGroupKey(keyConsumerGroupTargetMetadata, g.id)})
	e.add(kmsg.Record{Key: cgGroupKey(keyConsumerGroupMetadata, g.id)})
	return e.records[start:]
}

// describeConsumer answers one group of ConsumerGroupDescribe
// (ConsumerGroup.asDescribedGroup).
func (s *shard) describeConsumer(id string) kmsg.ConsumerGroupDescribeResponseGroup {
	r := kmsg.NewConsumerGroupDescribeResponseGroup()
	r.Group = id
	g := s.consumers[id]
	if g == nil {
		r.ErrorCode = errGroupIDNotFound
		msg := "Group " + id + " is not a consumer group."
		if s.groups[id] == nil || s.groups[id].is(stateDead) {
			msg = "Group " + id + " not found."
		}
		r.ErrorMessage = &msg
		return r
	}
	r.State = g.state()
	r.Epoch = g.epoch
	r.AssignmentEpoch = g.assignmentEpoch
	r.AssignorName = s.preferredAssignor(g)
	for _, mid := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID, dm.RackID = m.instanceID, m.rackID
		dm.MemberEpoch = m.Epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = slices.Clone(m.topicNames)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = m.regex
		dm.Assignment = s.describeAssignment(m.Assigned.Sorted())
		dm.TargetAssignment = s.describeAssignment(g.target[m.id].Sorted())
		dm.MemberType = 1 // consumer protocol (KIP-1099: 0 classic, -1 unknown)
		if m.usesClassic() {
			dm.MemberType = 0
		}
		r.Members = append(r.Members, dm)
	}
	if r.Members == nil {
		r.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
	}
	return r
}

// describeAssignment lists partitions by topic with names; a topic deleted meanwhile is
// left out (Kafka skips topics missing from its image).
func (s *shard) describeAssignment(tps []consumer.TP) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	s.byTopicName(tps, func(id [16]byte, name string, partitions []int32) {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = id, name, partitions
		a.TopicPartitions = append(a.TopicPartitions, tp)
	})
	return a
}

// byTopicName calls fn for each topic of tps with its name and partitions, in order; a
// topic deleted meanwhile is left out.
func (s *shard) byTopicName(tps []consumer.TP, fn func(id [16]byte, name string, partitions []int32)) {
	topics, parts := byTopicID(tps)
	for i, t := range topics {
		if name, ok := s.cfg.topicName(t); ok {
			fn(t, name, parts[i])
		}
	}
}

// loadedConsumers is onLoaded for consumer groups: every member gets a fresh session,
// and one revoking partitions a fresh rebalance deadline.
func (s *shard) loadedConsumers(nowMs int64) {
	for _, g := range s.consumers {
		for _, m := range g.members {
			session := s.consumerSessionTimeoutMs(g.id)
			if m.usesClassic() {
				session = m.classic.sessionTimeoutMs
			}
			s.schedule(timerConsumerSession, g.id, m.id, nowMs+int64(session))
			if m.State == consumer.UnrevokedPartitions {
				s.scheduleConsumerRebalance(g.id, m.id, m.Epoch, nowMs+int64(m.rebalanceTimeoutMs))
			}
		}
	}
}
