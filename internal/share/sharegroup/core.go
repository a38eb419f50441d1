package sharegroup

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group states (ShareGroup.ShareGroupState).
const (
	StateEmpty  = "Empty"
	StateStable = "Stable"
	StateDead   = "Dead"
)

// memberStateStable is MemberState.STABLE, the only state a share member is in.
const memberStateStable int8 = 0

// coreConfig is what the pure core needs; the edge fills it from Config.
type coreConfig struct {
	sessionTimeoutMs     int64
	heartbeatIntervalMs  int32
	maxSize              int
	assignmentIntervalMs int64
	initRetryIntervalMs  int64
	topics               func(name string) (id [16]byte, partitions int32, ok bool)
}

type member struct {
	id                   string
	rackID               *string
	clientID, clientHost string
	topics               []string // sorted, unique
	epoch, prevEpoch     int32
	state                int8
	assigned             Assignment
}

func (m *member) clone() *member {
	c := *m
	c.topics = slices.Clone(m.topics)
	c.assigned = m.assigned.clone()
	if m.rackID != nil {
		r := *m.rackID
		c.rackID = &r
	}
	return &c
}

func (m *member) metadataEqual(o *member) bool {
	return ptrEq(m.rackID, o.rackID) && m.clientID == o.clientID && m.clientHost == o.clientHost && slices.Equal(m.topics, o.topics)
}

func (m *member) assignmentEqual(o *member) bool {
	return m.epoch == o.epoch && m.prevEpoch == o.prevEpoch && m.state == o.state && m.assigned.equal(o.assigned)
}

func ptrEq(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// initEntry is one topic of the share-partition state metadata.
type initEntry struct {
	name  string
	parts map[int32]bool
	tsMs  int64 // when it entered this state (replay time for replayed records)
}

func (e *initEntry) sorted() []int32 {
	ps := slices.Collect(maps.Keys(e.parts))
	slices.Sort(ps)
	return ps
}

type group struct {
	id              string
	epoch           int32
	metadataHash    int64
	assignmentEpoch int32
	assignmentTsMs  int64
	members         map[string]*member
	target          map[string]Assignment

	initializing map[[16]byte]*initEntry
	initialized  map[[16]byte]*initEntry
	deleting     map[[16]byte]string
	// stateMeta is set while the group has a ShareGroupStatePartitionMetadata record (Kafka's
	// shareGroupStatePartitionMetadata has an entry for it): DeleteShareGroupOffsets answers
	// nothing per topic without one.
	stateMeta bool

	// deadlines are the members' session deadlines: soft state, never persisted.
	deadlines map[string]int64
}

func newGroup(id string) *group {
	return &group{id: id, members: map[string]*member{}, target: map[string]Assignment{},
		initializing: map[[16]byte]*initEntry{}, initialized: map[[16]byte]*initEntry{}, deleting: map[[16]byte]string{},
		deadlines: map[string]int64{}}
}

func (g *group) state() string {
	if len(g.members) == 0 {
		return StateEmpty
	}
	return StateStable
}

func (g *group) sortedMembers() []string {
	ids := slices.Collect(maps.Keys(g.members))
	slices.Sort(ids)
	return ids
}

// shard is the pure core for the share groups of one __consumer_offsets partition. Its
// methods compute the records a request needs and never mutate persistent state: the
// edge appends the records and then replays them (replay is the only writer of group
// state), so the live state is by construction what a restart rebuilds.
type shard struct {
	cfg    coreConfig
	groups map[string]*group
}

func newShard(cfg coreConfig) *shard { return &shard{cfg: cfg, groups: map[string]*group{}} }

// initJob asks the edge to initialize share-partition state before the partitions become
// assignable (GroupMetadataManager.maybeCreateInitializeShareGroupStateRequest).
type initJob struct {
	groupID     string
	topicID     [16]byte
	topicName   string
	partitions  []int32
	stateEpoch  int32 // the group epoch
	startOffset int64 // -1: a new topic, share.auto.offset.reset applies; 0: new partitions of a known topic
}

type memberRef struct{ groupID, memberID string }

// result is what one core operation asks of the edge, in order: append records
// (durably), replay them, then apply the soft-state effects.
type result struct {
	records []kmsg.Record
	touch   *memberRef  // reset this member's session deadline
	removed []memberRef // members fenced or left: drop deadlines, notify
	inits   []initJob
}

// ---- heartbeat ----

// clientInfo is the request's client id and host ("/" + IP, as Kafka stores it).
type clientInfo struct{ id, host string }

// heartbeat is GroupMetadataManager.shareGroupHeartbeat (and shareGroupLeave for epoch
// -1). The request has passed validate. It returns the response and the work to do; an
// error response has no work.
func (s *shard) heartbeat(nowMs int64, req *kmsg.ShareGroupHeartbeatRequest, cl clientInfo) (*kmsg.ShareGroupHeartbeatResponse, result) {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	fail := func(err *kerr.Error, msg string) (*kmsg.ShareGroupHeartbeatResponse, result) {
		resp.ErrorCode = err.Code
		resp.ErrorMessage = &msg
		return resp, result{}
	}
	g := s.groups[req.GroupID]
	if req.MemberEpoch == -1 {
		if g == nil {
			return fail(kerr.GroupIDNotFound, "Share group "+req.GroupID+" not found.")
		}
		m := g.members[req.MemberID]
		if m == nil {
			return fail(kerr.UnknownMemberID, "Member "+req.MemberID+" is not a member of group "+req.GroupID+".")
		}
		resp.MemberID = &req.MemberID
		resp.MemberEpoch = -1
		return resp, s.fence(g, m.id)
	}
	if g == nil {
		if req.MemberEpoch != 0 {
			return fail(kerr.GroupIDNotFound, "Share group "+req.GroupID+" not found.")
		}
		g = newGroup(req.GroupID)
	}
	old := g.members[req.MemberID]
	if old == nil && len(g.members) >= s.cfg.maxSize {
		return fail(kerr.GroupMaxSizeReached, "The share group has reached its maximum capacity of "+strconv.Itoa(s.cfg.maxSize)+" members.")
	}
	isNew := old == nil
	if isNew {
		if req.MemberEpoch != 0 {
			return fail(kerr.UnknownMemberID, "Member "+req.MemberID+" is not a member of group "+req.GroupID+".")
		}
		old = &member{id: req.MemberID, topics: []string{}, assigned: Assignment{}}
	} else if req.MemberEpoch != 0 {
		// throwIfShareGroupMemberEpochIsInvalid: ahead is fenced; behind is accepted only
		// when it is the previous epoch (the response with the bump may have been lost).
		if req.MemberEpoch > old.epoch || (req.MemberEpoch < old.epoch && req.MemberEpoch != old.prevEpoch) {
			return fail(kerr.FencedMemberEpoch, "The share group member has a different member epoch than the one known by the group coordinator. The member must abandon all its partitions and rejoin.")
		}
	}

	var res result
	upd := old.clone()
	if req.RackID != nil {
		r := *req.RackID
		upd.rackID = &r
	}
	if req.SubscribedTopicNames != nil {
		upd.topics = sortedUnique(req.SubscribedTopicNames)
	}
	upd.clientID, upd.clientHost = cl.id, cl.host

	bump := false
	if isNew || !upd.metadataEqual(old) {
		res.records = append(res.records, memberMetadataRecord(g.id, upd))
		bump = !slices.Equal(upd.topics, old.topics)
	}

	members := g.withMember(upd)
	subs := subscribedCounts(members)
	groupEpoch := g.epoch
	if g.assignmentEpoch >= groupEpoch {
		bump = bump || s.initializedAssignmentPending(g)
	}
	hash := s.metadataHash(subs)
	if hash != g.metadataHash {
		bump = true
	}
	if bump {
		groupEpoch++
		res.records = append(res.records, metadataRecord(g.id, groupEpoch, hash))
	}

	// Target assignment (maybeUpdateTargetAssignment), subject to the assignment interval.
	targetEpoch, memberTarget := g.assignmentEpoch, g.target[upd.id]
	if g.assignmentEpoch < groupEpoch && canComputeAssignment(g.assignmentTsMs, s.cfg.assignmentIntervalMs, nowMs) {
		newTarget := s.computeTarget(g, members, subs)
		for _, id := range sortedIDs(members) {
			if a := newTarget[id]; !a.equal(g.target[id]) || g.target[id] == nil {
				res.records = append(res.records, targetMemberRecord(g.id, id, a))
			}
		}
		for _, id := range slices.Sorted(maps.Keys(g.target)) {
			if members[id] == nil {
				res.records = append(res.records, tombstone(recTargetAssignmentMember, g.id, id))
			}
		}
		res.records = append(res.records, targetMetadataRecord(g.id, groupEpoch, nowMs))
		targetEpoch, memberTarget = groupEpoch, newTarget[upd.id]
	}

	// Reconcile (ShareGroupAssignmentBuilder): no revocation phase, the member moves
	// straight to its target, filtered to its subscribed topics.
	before := upd.clone()
	if targetEpoch != upd.epoch {
		upd.state = memberStateStable
		upd.assigned = s.filterSubscribed(memberTarget, upd.topics)
		upd.prevEpoch, upd.epoch = upd.epoch, targetEpoch
	} else if bump {
		upd.assigned = s.filterSubscribed(memberTarget, upd.topics)
	}
	if isNew || !upd.assignmentEqual(before) {
		res.records = append(res.records, currentAssignmentRecord(g.id, upd))
	}
	res.touch = &memberRef{g.id, upd.id}

	resp.MemberID = &upd.id
	resp.MemberEpoch = upd.epoch
	resp.HeartbeatIntervalMillis = s.cfg.heartbeatIntervalMs
	if req.MemberEpoch == 0 || req.SubscribedTopicNames != nil || !old.assigned.equal(upd.assigned) {
		resp.Assignment = heartbeatAssignment(upd.assigned)
	}

	// Share-partition state initialization for subscribed partitions not yet initialized.
	res.records, res.inits = s.maybeInitialize(nowMs, g, subs, groupEpoch, res.records)
	return resp, res
}

func canComputeAssignment(lastTsMs, intervalMs, nowMs int64) bool {
	return lastTsMs == 0 || intervalMs == 0 || nowMs >= lastTsMs+intervalMs
}

func sortedUnique(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

func sortedIDs(ms map[string]*member) []string { return slices.Sorted(maps.Keys(ms)) }

// withMember is the member map with upd in place of (or added to) its old version.
func (g *group) withMember(upd *member) map[string]*member {
	ms := maps.Clone(g.members)
	if ms == nil {
		ms = map[string]*member{}
	}
	ms[upd.id] = upd
	return ms
}

// subscribedCounts counts members per subscribed topic name.
func subscribedCounts(ms map[string]*member) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		for _, t := range m.topics {
			out[t]++
		}
	}
	return out
}

// metadataHash stands for ModernGroup.computeMetadataHash: it changes when a subscribed
// topic is created, deleted (or recreated with a new id) or gains partitions. Kafka
// hashes with XXH3 (Utils.computeTopicHash); exactq uses FNV-1a over the same inputs,
// so the persisted MetadataHash differs from Kafka's value, which only ever costs one
// extra epoch bump after moving data between the two.
func (s *shard) metadataHash(subs map[string]int) int64 {
	names := slices.Sorted(maps.Keys(subs))
	h := fnv.New64a()
	n := 0
	for _, name := range names {
		id, parts, ok := s.cfg.topics(name)
		if !ok {
			continue
		}
		n++
		h.Write(id[:])
		h.Write([]byte(name))
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(parts)))
	}
	if n == 0 {
		return 0
	}
	return int64(h.Sum64())
}

// assignable is the partitions the assignor may hand out: those of subscribed topics
// that exist, whose share state is initialized for the topic's current id.
func (s *shard) assignable(g *group, subs map[string]int) map[[16]byte][]int32 {
	out := map[[16]byte][]int32{}
	for name := range subs {
		id, parts, ok := s.cfg.topics(name)
		if !ok {
			continue
		}
		e := g.initialized[id]
		if e == nil {
			continue
		}
		var ps []int32
		for _, p := range e.sorted() {
			if p < parts {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			out[id] = ps
		}
	}
	return out
}

// initializedAssignmentPending is GroupMetadataManager.initializedAssignmentPending,
// restricted to partitions that still exist: some initialized partition of a subscribed
// topic is in nobody's target assignment.
func (s *shard) initializedAssignmentPending(g *group) bool {
	if len(g.members) == 0 {
		return false
	}
	assignable := s.assignable(g, subscribedCounts(g.members))
	targeted := map[tp]bool{}
	for _, a := range g.target {
		for t, ps := range a {
			for _, p := range ps {
				targeted[tp{t, p}] = true
			}
		}
	}
	for t, ps := range assignable {
		for _, p := range ps {
			if !targeted[tp{t, p}] {
				return true
			}
		}
	}
	return false
}

func (s *shard) resolve(names []string) map[[16]byte]bool {
	out := map[[16]byte]bool{}
	for _, n := range names {
		if id, _, ok := s.cfg.topics(n); ok {
			out[id] = true
		}
	}
	return out
}

func (s *shard) computeTarget(g *group, members map[string]*member, subs map[string]int) map[string]Assignment {
	homogeneous := true
	for _, c := range subs {
		if c != len(members) {
			homogeneous = false
		}
	}
	ams := make([]assignMember, 0, len(members))
	for _, id := range sortedIDs(members) {
		ams = append(ams, assignMember{id: id, topics: s.resolve(members[id].topics), current: g.target[id]})
	}
	return simpleAssign(ams, homogeneous, s.assignable(g, subs))
}

// filterSubscribed keeps the topics of a that the member subscribes to and that exist.
func (s *shard) filterSubscribed(a Assignment, topics []string) Assignment {
	ids := s.resolve(topics)
	out := Assignment{}
	for t, ps := range a {
		if ids[t] && len(ps) > 0 {
			out[t] = slices.Clone(ps)
		}
	}
	return out
}

func heartbeatAssignment(a Assignment) *kmsg.ShareGroupHeartbeatResponseAssignment {
	a0 := kmsg.NewShareGroupHeartbeatResponseAssignment()
	out := &a0
	out.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
	for _, t := range a.sortedTopics() {
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID = t
		tp.Partitions = slices.Clone(a[t])
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}

// fence is shareGroupFenceMember: the member's current assignment, target assignment and
// subscription are tombstoned and the group epoch bumped (the assignment epoch follows
// when the group becomes empty, with timestamp 0 so the next assignment is immediate).
func (s *shard) fence(g *group, memberID string) result {
	var res result
	res.records = append(res.records,
		tombstone(recCurrentMemberAssignment, g.id, memberID),
		tombstone(recTargetAssignmentMember, g.id, memberID),
		tombstone(recMemberMetadata, g.id, memberID))
	rest := maps.Clone(g.members)
	delete(rest, memberID)
	epoch := g.epoch + 1
	res.records = append(res.records, metadataRecord(g.id, epoch, s.metadataHash(subscribedCounts(rest))))
	if len(g.members) == 1 {
		res.records = append(res.records, targetMetadataRecord(g.id, epoch, 0))
	}
	res.removed = []memberRef{{g.id, memberID}}
	return res
}

// maybeInitialize is maybeCreateInitializeShareGroupStateRequest: subscribed partitions
// neither initialized nor being initialized (or whose initialization is older than the
// retry interval) are recorded as initializing and returned as jobs.
func (s *shard) maybeInitialize(nowMs int64, g *group, subs map[string]int, groupEpoch int32, records []kmsg.Record) ([]kmsg.Record, []initJob) {
	if len(subs) == 0 {
		return records, nil
	}
	known := func(id [16]byte) map[int32]bool {
		out := map[int32]bool{}
		if e := g.initialized[id]; e != nil {
			maps.Copy(out, e.parts)
		}
		if e := g.initializing[id]; e != nil && nowMs-e.tsMs < s.cfg.initRetryIntervalMs {
			maps.Copy(out, e.parts)
		}
		return out
	}
	var jobs []initJob
	change := map[[16]byte]*initEntry{}
	for _, name := range slices.Sorted(maps.Keys(subs)) {
		id, parts, ok := s.cfg.topics(name)
		if !ok || change[id] != nil {
			continue
		}
		already := known(id)
		missing := map[int32]bool{}
		for p := range parts {
			if !already[p] {
				missing[p] = true
			}
		}
		if len(missing) == 0 {
			continue
		}
		e := &initEntry{name: name, parts: missing, tsMs: nowMs}
		change[id] = e
		start := int64(-1)
		if g.initialized[id] != nil || g.initializing[id] != nil {
			start = 0
		}
		jobs = append(jobs, initJob{groupID: g.id, topicID: id, topicName: name, partitions: e.sorted(), stateEpoch: groupEpoch, startOffset: start})
	}
	if len(jobs) == 0 {
		return records, nil
	}
	initializing := combineInit(g.initializing, change)
	deleting := maps.Clone(g.deleting)
	for id := range change {
		delete(deleting, id)
	}
	return append(records, statePartitionRecord(g.id, initializing, g.initialized, deleting)), jobs
}

// combineInit is combineInitMaps: per topic the union of partitions, the name and
// timestamp of the second map winning.
func combineInit(a, b map[[16]byte]*initEntry) map[[16]byte]*initEntry {
	out := map[[16]byte]*initEntry{}
	for id, e := range a {
		out[id] = &initEntry{name: e.name, parts: maps.Clone(e.parts), tsMs: e.tsMs}
	}
	for id, e := range b {
		if o := out[id]; o != nil {
			maps.Copy(o.parts, e.parts)
			o.name, o.tsMs = e.name, e.tsMs
		} else {
			out[id] = &initEntry{name: e.name, parts: maps.Clone(e.parts), tsMs: e.tsMs}
		}
	}
	return out
}

// initialized is initializeShareGroupState: the partitions' share state is durable, so
// they move from initializing to initialized (and become assignable; the next heartbeat
// bumps the group epoch through initializedAssignmentPending).
func (s *shard) initialized(nowMs int64, groupID string, jobs []initJob) result {
	g := s.groups[groupID]
	if g == nil || len(jobs) == 0 {
		return result{}
	}
	done := map[[16]byte]*initEntry{}
	for _, j := range jobs {
		e := done[j.topicID]
		if e == nil {
			e = &initEntry{name: j.topicName, parts: map[int32]bool{}, tsMs: nowMs}
			done[j.topicID] = e
		}
		for _, p := range j.partitions {
			e.parts[p] = true
		}
	}
	initialized := combineInit(g.initialized, done)
	initializing := s.without(g.initializing, done)
	return result{records: []kmsg.Record{statePartitionRecord(g.id, initializing, initialized, g.deleting)}}
}

// uninitialized is uninitializeShareGroupState: initialization failed, so the partitions
// leave the initializing set and the next heartbeat retries them.
func (s *shard) uninitialized(groupID string, jobs []initJob) result {
	g := s.groups[groupID]
	if g == nil || len(g.initializing) == 0 || len(jobs) == 0 {
		return result{}
	}
	failed := map[[16]byte]*initEntry{}
	for _, j := range jobs {
		e := failed[j.topicID]
		if e == nil {
			e = &initEntry{parts: map[int32]bool{}}
			failed[j.topicID] = e
		}
		for _, p := range j.partitions {
			e.parts[p] = true
		}
	}
	return result{records: []kmsg.Record{statePartitionRecord(g.id, s.without(g.initializing, failed), g.initialized, g.deleting)}}
}

func (s *shard) without(a, remove map[[16]byte]*initEntry) map[[16]byte]*initEntry {
	out := map[[16]byte]*initEntry{}
	for id, e := range a {
		ne := &initEntry{name: e.name, parts: maps.Clone(e.parts), tsMs: e.tsMs}
		if r := remove[id]; r != nil {
			for p := range r.parts {
				delete(ne.parts, p)
			}
		}
		if len(ne.parts) > 0 {
			out[id] = ne
		}
	}
	return out
}

// expired lists the members whose session deadline has passed, in a fixed order.
func (s *shard) expired(nowMs int64) []memberRef {
	var out []memberRef
	for _, gid := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[gid]
		for _, mid := range g.sortedMembers() {
			if d, ok := g.deadlines[mid]; ok && d <= nowMs {
				out = append(out, memberRef{gid, mid})
			}
		}
	}
	return out
}

// expire fences one member whose session expired, if it still is due.
func (s *shard) expire(nowMs int64, ref memberRef) result {
	g := s.groups[ref.groupID]
	if g == nil || g.members[ref.memberID] == nil {
		return result{}
	}
	if d, ok := g.deadlines[ref.memberID]; !ok || d > nowMs {
		return result{}
	}
	return s.fence(g, ref.memberID)
}

// loaded schedules every member's session after a load, as GroupMetadataManager.onLoaded
// does for share groups.
func (s *shard) loaded(nowMs int64) {
	for _, g := range s.groups {
		for id := range g.members {
			g.deadlines[id] = nowMs + s.cfg.sessionTimeoutMs
		}
	}
}

// applySoft applies a result's soft-state effects after its records were replayed.
func (s *shard) applySoft(nowMs int64, res result) {
	if r := res.touch; r != nil {
		if g := s.groups[r.groupID]; g != nil && g.members[r.memberID] != nil {
			g.deadlines[r.memberID] = nowMs + s.cfg.sessionTimeoutMs
		}
	}
	for _, r := range res.removed {
		if g := s.groups[r.groupID]; g != nil {
			delete(g.deadlines, r.memberID)
		}
	}
}

// deleteGroup is the share-group part of GroupCoordinatorService.deleteGroups: an empty
// share group's records are all tombstoned (ShareGroup.createGroupTombstoneRecords).
// The returned jobs list the share partitions whose state the edge deletes first.
func (s *shard) deleteGroup(groupID string) (result, []initJob, *kerr.Error) {
	g := s.groups[groupID]
	if g == nil {
		return result{}, nil, kerr.GroupIDNotFound
	}
	if len(g.members) > 0 {
		return result{}, nil, kerr.NonEmptyGroup
	}
	var jobs []initJob
	for _, m := range []map[[16]byte]*initEntry{g.initialized, g.initializing} {
		for _, id := range slices.SortedFunc(maps.Keys(m), compareIDs) {
			jobs = append(jobs, initJob{groupID: groupID, topicID: id, topicName: m[id].name, partitions: m[id].sorted()})
		}
	}
	// Topics an earlier DeleteShareGroupOffsets left deleting (its share-state deletion
	// failed): every partition, as shareGroupBuildPartitionDeleteRequest retries them.
	jobs = append(jobs, s.deletingTargets(g)...)
	var res result
	for _, id := range slices.Sorted(maps.Keys(g.target)) {
		res.records = append(res.records, tombstone(recTargetAssignmentMember, groupID, id))
	}
	res.records = append(res.records,
		tombstone(recTargetAssignmentMetadata, groupID, ""),
		tombstone(recStatePartitionMetadata, groupID, ""),
		tombstone(recMetadata, groupID, ""))
	return res, jobs, nil
}

// topicsDeleted is GroupMetadataManager.maybeCleanupShareGroupState: every group whose
// share-partition state metadata names a deleted topic id (initializing, initialized or
// deleting) gets a record without it. The share state itself is deleted by the share-state
// store (Store.DeleteTopics), as Kafka's share coordinator does it, not through jobs here.
func (s *shard) topicsDeleted(deleted func(topicID [16]byte) bool) result {
	var res result
	ids := slices.Sorted(maps.Keys(s.groups)) // deterministic record order
	for _, id := range ids {
		g := s.groups[id]
		drop := func(m map[[16]byte]*initEntry) (map[[16]byte]*initEntry, bool) {
			out, changed := map[[16]byte]*initEntry{}, false
			for tid, e := range m {
				if deleted(tid) {
					changed = true
					continue
				}
				out[tid] = e
			}
			return out, changed
		}
		initializing, c1 := drop(g.initializing)
		initialized, c2 := drop(g.initialized)
		deleting, c3 := map[[16]byte]string{}, false
		for tid, name := range g.deleting {
			if deleted(tid) {
				c3 = true
				continue
			}
			deleting[tid] = name
		}
		if c1 || c2 || c3 {
			res.records = append(res.records, statePartitionRecord(g.id, initializing, initialized, deleting))
		}
	}
	return res
}
