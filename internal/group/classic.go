package group

import (
	"bytes"
	"sort"

	"github.com/exactq/exactq/internal/coordlog"
)

// state is a classic group's state (ClassicGroupState in Kafka).
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String is the name Kafka puts on the wire (DescribeGroups, ListGroups).
func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// validPrevious is Kafka's transition table (ClassicGroupState's static block).
func (s state) validPrevious(from state) bool {
	switch s {
	case stateEmpty:
		return from == statePreparingRebalance
	case statePreparingRebalance:
		return from == stateStable || from == stateCompletingRebalance || from == stateEmpty
	case stateCompletingRebalance:
		return from == statePreparingRebalance
	case stateStable:
		return from == stateCompletingRebalance
	default:
		return true
	}
}

// protocol is one (name, metadata) pair a member supports, in preference order.
type protocol struct {
	name     string
	metadata []byte
}

// member is a classic group member (ClassicGroupMember).
type member struct {
	id                 string
	instanceID         *string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	protocols          []protocol
	assignment         []byte

	// joinToken/syncToken identify the parked JoinGroup/SyncGroup request of this member
	// (0 = none). The edge maps a token to the waiting request.
	joinToken uint64
	syncToken uint64
	// joinVersion is the JoinGroup version of the parked join (for SkipAssignment).
	joinVersion int16
	// isNew is set for a member added by a join that has not completed yet; such a member
	// is expired by its (new-member) join timeout even while awaiting join.
	isNew bool
}

func (m *member) awaitingJoin() bool { return m.joinToken != 0 }
func (m *member) awaitingSync() bool { return m.syncToken != 0 }

// satisfiedHeartbeat is ClassicGroupMember.hasSatisfiedHeartbeat.
func (m *member) satisfiedHeartbeat() bool {
	if m.isNew {
		return false
	}
	return m.awaitingJoin() || m.awaitingSync()
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches reports whether protos equal the member's protocols (names, metadata, order).
func (m *member) matches(protos []protocol) bool {
	if len(protos) != len(m.protocols) {
		return false
	}
	for i := range protos {
		if protos[i].name != m.protocols[i].name || !bytes.Equal(protos[i].metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// vote returns the member's most preferred protocol among candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.name] {
			return p.name
		}
	}
	return ""
}

// classicGroup is one classic group (ClassicGroup). Members are kept in insertion order
// (Kafka uses a HashMap; the order only decides which member becomes leader when the
// leader leaves, and any member is valid there).
type classicGroup struct {
	id            string
	state         state
	previousState state
	// stateTimestampMs is when the group last changed state (-1 unknown), persisted as
	// GroupMetadataValue.CurrentStateTimestamp and used by offset expiration.
	stateTimestampMs int64
	generation       int32
	protocolType     string // "" = none (a simple group that only stores offsets)
	protocolName     string // "" = none
	leaderID         string // "" = none

	members       map[string]*member
	order         []string          // member ids in insertion order
	staticMembers map[string]string // instance id → member id
	pendingJoin   map[string]bool   // KIP-394 ids handed out, not joined yet
	pendingSync   map[string]bool
	numAwaiting   int            // members awaiting a join response
	supported     map[string]int // protocol name → number of members supporting it
	// subscribed is the union of the members' subscribed topics, parsed from the
	// consumer protocol; nil when unknown.
	subscribed     map[string]bool
	newMemberAdded bool
}

func newClassicGroup(id string, nowMs int64) *classicGroup {
	return &classicGroup{
		id: id, state: stateEmpty, previousState: stateDead, stateTimestampMs: nowMs,
		members: map[string]*member{}, staticMembers: map[string]string{},
		pendingJoin: map[string]bool{}, pendingSync: map[string]bool{}, supported: map[string]int{},
	}
}

func (g *classicGroup) is(s state) bool { return g.state == s }

func (g *classicGroup) transition(to state, nowMs int64) {
	if !to.validPrevious(g.state) {
		panic("group: invalid transition " + g.state.String() + " → " + to.String() + " for " + g.id)
	}
	g.previousState = g.state
	g.state = to
	g.stateTimestampMs = nowMs
}

func (g *classicGroup) canRebalance() bool { return statePreparingRebalance.validPrevious(g.state) }

func (g *classicGroup) hasMember(id string) bool { _, ok := g.members[id]; return ok }

func (g *classicGroup) isLeader(id string) bool { return g.leaderID != "" && g.leaderID == id }

func (g *classicGroup) memberList() []*member {
	out := make([]*member, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.members[id])
	}
	return out
}

func (g *classicGroup) add(m *member) {
	if m.instanceID != nil {
		g.staticMembers[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leaderID == "" {
		g.leaderID = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	g.incSupported(m)
	if m.awaitingJoin() {
		g.numAwaiting++
	}
	delete(g.pendingJoin, m.id)
}

func (g *classicGroup) remove(id string) {
	if m, ok := g.members[id]; ok {
		delete(g.members, id)
		for i, oid := range g.order {
			if oid == id {
				g.order = append(g.order[:i], g.order[i+1:]...)
				break
			}
		}
		g.decSupported(m)
		if m.awaitingJoin() {
			g.numAwaiting--
		}
		if m.instanceID != nil {
			delete(g.staticMembers, *m.instanceID)
		}
	}
	if g.isLeader(id) {
		g.leaderID = ""
		if len(g.order) > 0 {
			g.leaderID = g.order[0]
		}
	}
	delete(g.pendingJoin, id)
	delete(g.pendingSync, id)
}

func (g *classicGroup) incSupported(m *member) {
	for _, p := range m.protocols {
		g.supported[p.name]++
	}
}

func (g *classicGroup) decSupported(m *member) {
	for _, p := range m.protocols {
		g.supported[p.name]--
		if g.supported[p.name] <= 0 {
			delete(g.supported, p.name)
		}
	}
}

// setAwaitingJoin parks (token != 0) or clears (token == 0) a member's join.
func (g *classicGroup) setAwaitingJoin(m *member, token uint64) {
	if token != 0 && !m.awaitingJoin() {
		g.numAwaiting++
	} else if token == 0 && m.awaitingJoin() {
		g.numAwaiting--
	}
	m.joinToken = token
}

// updateMember is ClassicGroup.updateMember.
func (g *classicGroup) updateMember(m *member, protos []protocol, rebalanceMs, sessionMs int32, token uint64, version int16) {
	g.decSupported(m)
	m.protocols = protos
	g.incSupported(m)
	m.rebalanceTimeoutMs = rebalanceMs
	m.sessionTimeoutMs = sessionMs
	m.joinVersion = version
	g.setAwaitingJoin(m, token)
}

// supportsProtocols is ClassicGroup.supportsProtocols.
func (g *classicGroup) supportsProtocols(protocolType string, protos []protocol) bool {
	if g.is(stateEmpty) {
		return protocolType != "" && len(protos) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range protos {
		if g.supported[p.name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol is ClassicGroup.selectProtocol: among the protocols every member
// supports, each member votes for its most preferred one and the most voted wins. Kafka
// breaks ties by HashMap iteration order; we reproduce that order (bucket of the spread
// Java hash in a 16-slot table, then first vote) so a tie picks what Kafka picks.
func (g *classicGroup) selectProtocol() string {
	candidates := map[string]bool{}
	for name, n := range g.supported {
		if n == len(g.members) {
			candidates[name] = true
		}
	}
	votes := map[string]int{}
	var seen []string
	for _, m := range g.memberList() {
		v := m.vote(candidates)
		if _, ok := votes[v]; !ok {
			seen = append(seen, v)
		}
		votes[v]++
	}
	bucket := func(s string) int32 {
		h := coordlog.JavaStringHash(s)
		h ^= int32(uint32(h) >> 16)
		return h & 15
	}
	sort.SliceStable(seen, func(i, j int) bool { return bucket(seen[i]) < bucket(seen[j]) })
	best, bestVotes := "", -1
	for _, name := range seen {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

func (g *classicGroup) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaiting && len(g.pendingJoin) == 0
}

// rebalanceTimeoutMs is the largest rebalance timeout of the members.
func (g *classicGroup) rebalanceTimeoutMs() int32 {
	var mx int32
	for _, m := range g.members {
		mx = max(mx, m.rebalanceTimeoutMs)
	}
	return mx
}

// maybeElectNewJoinedLeader is ClassicGroup.maybeElectNewJoinedLeader.
func (g *classicGroup) maybeElectNewJoinedLeader() bool {
	if g.leaderID == "" {
		return false
	}
	if l := g.members[g.leaderID]; l != nil && l.awaitingJoin() {
		return true
	}
	for _, m := range g.memberList() {
		if m.awaitingJoin() {
			g.leaderID = m.id
			return true
		}
	}
	return false
}

// validateMember is ClassicGroup.validateMember: returns 0, UNKNOWN_MEMBER_ID or
// FENCED_INSTANCE_ID.
func (g *classicGroup) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.staticMembers[*instanceID]
		if !ok {
			return errUnknownMemberID
		}
		if existing != memberID {
			return errFencedInstanceID
		}
	}
	if !g.hasMember(memberID) {
		return errUnknownMemberID
	}
	return 0
}

// isSubscribedToTopic is ClassicGroup.isSubscribedToTopic.
func (g *classicGroup) isSubscribedToTopic(topic string) bool {
	if g.subscribed != nil {
		return g.subscribed[topic]
	}
	return g.usesConsumerProtocol()
}

func (g *classicGroup) usesConsumerProtocol() bool {
	return g.protocolType == "consumer"
}

// computeSubscribed is ClassicGroup.computeSubscribedTopics.
func (g *classicGroup) computeSubscribed() map[string]bool {
	if g.protocolType != "consumer" {
		return nil
	}
	if len(g.members) == 0 {
		return map[string]bool{}
	}
	if g.protocolName == "" {
		return nil
	}
	all := map[string]bool{}
	for _, m := range g.members {
		topics, ok := parseSubscriptionTopics(m.metadataFor(g.protocolName))
		if !ok {
			return nil
		}
		for _, t := range topics {
			all[t] = true
		}
	}
	return all
}

// parseSubscriptionTopics reads the topics of a consumer-protocol subscription, whose
// version-0 prefix (int16 version, [string] topics) every later version keeps.
func parseSubscriptionTopics(b []byte) ([]string, bool) {
	if len(b) < 6 {
		return nil, false
	}
	b = b[2:]
	n := int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	b = b[4:]
	if n < 0 || int64(n)*2 > int64(len(b)) {
		return nil, false
	}
	topics := make([]string, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, false
		}
		l := int(int16(uint16(b[0])<<8 | uint16(b[1])))
		b = b[2:]
		if l < 0 || l > len(b) {
			return nil, false
		}
		topics = append(topics, string(b[:l]))
		b = b[l:]
	}
	return topics, true
}

// initNextGeneration is ClassicGroup.initNextGeneration.
func (g *classicGroup) initNextGeneration(nowMs int64) {
	g.generation++
	if len(g.members) > 0 {
		g.protocolName = g.selectProtocol()
		g.subscribed = g.computeSubscribed()
		g.transition(stateCompletingRebalance, nowMs)
	} else {
		g.protocolName = ""
		g.subscribed = g.computeSubscribed()
		g.transition(stateEmpty, nowMs)
	}
	clear(g.pendingSync)
}
