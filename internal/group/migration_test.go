package group

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/exactq/exactq/internal/group/consumer"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// clClient is a classic consumer as Kafka's and franz-go's run one: JoinGroup with a
// consumer protocol subscription (v1: topics and owned partitions), SyncGroup (the
// leader assigns), Heartbeat, rejoining on REBALANCE_IN_PROGRESS. A cooperative client
// keeps its partitions across a rejoin and reports them; an eager one gives all of them
// up before it rejoins. The leader's assignor is sticky and never moves an owned
// partition, so classic rebalances are safe by construction and what the tests check is
// the coordinator.
type clClient struct {
	h          *cgHarness
	group, id  string
	instanceID *string
	topics     []string
	eager      bool
	gen        int32
	owned      consumer.Set
	joinTok    uint64 // a parked JoinGroup
	syncTok    uint64 // a parked SyncGroup
	protocol   string
	needJoin   bool
	lastErr    int16
}

func (h *cgHarness) classic(group string, topics ...string) *clClient {
	return &clClient{h: h, group: group, topics: topics, owned: consumer.Set{}, needJoin: true, gen: -1}
}

func (c *clClient) name(tp consumer.TP) string {
	for n, t := range c.h.topics {
		if t.id == tp.Topic {
			return n
		}
	}
	return ""
}

func (c *clClient) subscription() []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 1
	m.Topics = slices.Clone(c.topics)
	if !c.eager {
		byName := map[string][]int32{}
		for _, tp := range c.owned.Sorted() {
			byName[c.name(tp)] = append(byName[c.name(tp)], tp.Partition)
		}
		for _, n := range slices.Sorted(maps.Keys(byName)) {
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic, op.Partitions = n, byName[n]
			m.OwnedPartitions = append(m.OwnedPartitions, op)
		}
	}
	return m.AppendTo(nil)
}

// send runs one request and keeps its token.
func (c *clClient) send(fn func(tok uint64, out *output)) uint64 {
	var tok uint64
	c.h.run(func(t uint64, out *output) { tok = t; fn(t, out) })
	return tok
}

func (c *clClient) join() {
	if c.eager {
		c.owned = consumer.Set{}
	}
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group, r.MemberID, r.InstanceID = c.group, c.id, c.instanceID
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 30000
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "cooperative-sticky", c.subscription()
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	c.needJoin = false
	c.joinTok = c.send(func(tok uint64, out *output) {
		c.h.s.join(joinRequest{version: 9, req: r, clientID: "classic", clientHost: "/127.0.0.1", token: tok}, c.h.nowMs, out)
	})
}

// reset is what a client does on UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID: it gives up
// its partitions and joins as a new member.
func (c *clClient) reset() {
	c.id, c.gen, c.owned, c.needJoin = "", -1, consumer.Set{}, true
}

// step moves the client one request forward: it reads a parked response or sends its
// next request. It returns the error code of what it read or sent.
func (c *clClient) step() int16 {
	switch {
	case c.joinTok != 0:
		resp, ok := c.h.done[c.joinTok]
		if !ok {
			return 0 // still parked
		}
		c.joinTok = 0
		return c.onJoin(resp.(*kmsg.JoinGroupResponse))
	case c.syncTok != 0:
		resp, ok := c.h.done[c.syncTok]
		if !ok {
			return 0
		}
		c.syncTok = 0
		return c.onSync(resp.(*kmsg.SyncGroupResponse))
	case c.needJoin:
		c.join()
		return 0
	}
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation, r.InstanceID = c.group, c.id, c.gen, c.instanceID
	var code int16
	c.h.run(func(uint64, *output) { code = c.h.s.heartbeat(r, c.h.nowMs) })
	c.handleErr(code)
	return code
}

func (c *clClient) handleErr(code int16) {
	switch code {
	case 0:
	case errUnknownMemberID, errFencedInstanceID:
		c.reset()
	default: // REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, ...
		c.needJoin = true
	}
	c.lastErr = code
}

func (c *clClient) onJoin(r *kmsg.JoinGroupResponse) int16 {
	if r.ErrorCode == errMemberIDRequired {
		c.id = r.MemberID
		c.join()
		return 0
	}
	if r.ErrorCode != 0 {
		c.handleErr(r.ErrorCode)
		return r.ErrorCode
	}
	c.id, c.gen = r.MemberID, r.Generation
	if r.Protocol != nil {
		c.protocol = *r.Protocol
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.MemberID, sr.Generation, sr.InstanceID = c.group, c.id, c.gen, c.instanceID
	sr.ProtocolType, sr.Protocol = strp("consumer"), strp(c.protocol)
	if r.LeaderID == c.id {
		for id, a := range c.h.leaderAssign(r.Members) {
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = id, a
			sr.GroupAssignment = append(sr.GroupAssignment, ga)
		}
	}
	c.syncTok = c.send(func(tok uint64, out *output) {
		c.h.s.sync(syncRequest{req: sr, token: tok}, c.h.nowMs, out)
	})
	if resp, ok := c.h.done[c.syncTok]; ok {
		c.syncTok = 0
		return c.onSync(resp.(*kmsg.SyncGroupResponse))
	}
	return 0
}

func (c *clClient) onSync(r *kmsg.SyncGroupResponse) int16 {
	if r.ErrorCode != 0 {
		c.handleErr(r.ErrorCode)
		return r.ErrorCode
	}
	var a kmsg.ConsumerMemberAssignment
	next := consumer.Set{}
	if len(r.MemberAssignment) > 0 {
		if err := a.ReadFrom(r.MemberAssignment); err != nil {
			c.h.t.Fatalf("%s: assignment: %v", c.id, err)
		}
	}
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			next[consumer.TP{Topic: c.h.topics[t.Topic].id, Partition: p}] = struct{}{}
		}
	}
	for tp := range c.owned {
		if _, kept := next[tp]; !kept {
			c.needJoin = true // cooperative: a revocation is followed by a rejoin
		}
	}
	c.owned = next
	return 0
}

// leaderAssign is the leader's sticky assignor: a partition stays with the one member
// that says it owns it (and subscribes to its topic), the others go to the least loaded
// subscriber.
func (h *cgHarness) leaderAssign(members []kmsg.JoinGroupResponseMember) map[string][]byte {
	subs := map[string]*kmsg.ConsumerMemberMetadata{}
	claims := map[consumer.TP][]string{}
	var ids []string
	for _, m := range members {
		sub, ok := parseSubscription(m.ProtocolMetadata)
		if !ok {
			h.t.Fatalf("member %s: bad subscription", m.MemberID)
		}
		subs[m.MemberID] = sub
		ids = append(ids, m.MemberID)
		for _, op := range sub.OwnedPartitions {
			for _, p := range op.Partitions {
				tp := consumer.TP{Topic: h.topics[op.Topic].id, Partition: p}
				claims[tp] = append(claims[tp], m.MemberID)
			}
		}
	}
	slices.Sort(ids)
	given := map[string]map[string][]int32{}
	load := map[string]int{}
	for _, id := range ids {
		given[id] = map[string][]int32{}
	}
	subscribes := func(id, topic string) bool { return slices.Contains(subs[id].Topics, topic) }
	for _, topic := range slices.Sorted(maps.Keys(h.topics)) {
		for p := range h.topics[topic].parts {
			tp := consumer.TP{Topic: h.topics[topic].id, Partition: p}
			if cl := claims[tp]; len(cl) > 0 {
				if len(cl) == 1 && subscribes(cl[0], topic) {
					given[cl[0]][topic] = append(given[cl[0]][topic], p)
					load[cl[0]]++
				}
				continue // claimed by several, or by a member that no longer wants it: nobody, this round
			}
			best := ""
			for _, id := range ids {
				if subscribes(id, topic) && (best == "" || load[id] < load[best]) {
					best = id
				}
			}
			if best != "" {
				given[best][topic] = append(given[best][topic], p)
				load[best]++
			}
		}
	}
	out := map[string][]byte{}
	for _, id := range ids {
		a := kmsg.NewConsumerMemberAssignment()
		a.Version = 1
		for _, topic := range slices.Sorted(maps.Keys(given[id])) {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = topic, given[id][topic]
			a.Topics = append(a.Topics, at)
		}
		out[id] = a.AppendTo(nil)
	}
	return out
}

// groupType is "classic", "consumer" or "" for the group's id.
func (h *cgHarness) groupType(id string) string {
	if h.s.consumers[id] != nil {
		return "consumer"
	}
	if g := h.s.groups[id]; g != nil && !g.is(stateDead) {
		return "classic"
	}
	return ""
}

// isMember reports whether id is a member of the group, whatever its type.
func (h *cgHarness) isMember(group, id string) bool {
	if g := h.s.consumers[group]; g != nil {
		return g.members[id] != nil
	}
	if g := h.s.groups[group]; g != nil {
		return g.members[id] != nil
	}
	return false
}

// deterministicIDs gives the harness's shard member ids from a counter, so a history
// is a function of its inputs.
func (h *cgHarness) deterministicIDs(s *shard) {
	s.newID = func(prefix string) string { h.ids++; return fmt.Sprintf("%s-%d", prefix, h.ids) }
	s.newUUID = func() string { h.ids++; return fmt.Sprintf("uuid-%d", h.ids) }
}

// classicStable runs classic clients until each is a synced member with no request
// pending.
func classicStable(t fataler, clients ...*clClient) {
	t.Helper()
	for range 40 {
		busy := false
		for _, c := range clients {
			c.step()
			busy = busy || c.joinTok != 0 || c.syncTok != 0 || c.needJoin
		}
		if !busy {
			return
		}
	}
	t.Fatal("the classic clients never settled")
}

func newMigrationHarness(t fataler) *cgHarness {
	h := newCGHarness(t)
	h.deterministicIDs(h.s)
	h.addTopic("t", 6)
	return h
}

func ownedCount(sets ...consumer.Set) int {
	n := 0
	for _, s := range sets {
		n += len(s)
	}
	return n
}

func checkAllDisjoint(t fataler, cls []*clClient, cgs []*cgClient) {
	t.Helper()
	seen := map[consumer.TP]string{}
	claim := func(who string, set consumer.Set) {
		for tp := range set {
			if o, dup := seen[tp]; dup {
				t.Fatalf("%v consumed by %s and %s", tp, o, who)
			}
			seen[tp] = who
		}
	}
	for _, c := range cls {
		claim("classic "+c.id, c.owned)
	}
	for _, c := range cgs {
		claim("consumer "+c.id, c.owned)
	}
}

// TestOnlineUpgradeAndDowngrade walks one group through both conversions: two classic
// members split a topic; a consumer-protocol member joins and the group becomes a
// consumer group whose classic members are told to rejoin, give up what moves and
// receive the server-side assignment; the consumer member leaves and the group is
// classic again, rebalancing. No partition is ever consumed twice, and a restart at
// each point rebuilds the same group from the log.
func TestOnlineUpgradeAndDowngrade(t *testing.T) {
	h := newMigrationHarness(t)
	a, b := h.classic("g", "t"), h.classic("g", "t")
	b.eager = true
	classicStable(t, a, b)
	if h.groupType("g") != "classic" || ownedCount(a.owned, b.owned) != 6 {
		t.Fatalf("classic group: %s, owned %v %v", h.groupType("g"), a.owned, b.owned)
	}
	gen := h.s.groups["g"].generation
	committedP := a.owned.Sorted()[0].Partition
	if code := h.commit(8, "g", a.id, a.gen, "t", committedP, 5); code != 0 {
		t.Fatalf("classic commit: %d", code)
	}

	x := h.client("g", "x", "t")
	if code := x.beat(); code != 0 {
		t.Fatalf("consumer join: %d", code)
	}
	g := h.s.consumers["g"]
	if g == nil || h.s.groups["g"] != nil {
		t.Fatalf("not upgraded: %s", h.groupType("g"))
	}
	if g.members[a.id] == nil || !g.members[a.id].usesClassic() || g.members[a.id].classic.sessionTimeoutMs != 10000 {
		t.Fatalf("classic member after upgrade: %+v", g.members[a.id])
	}
	if g.epoch != gen+1 || g.assignmentEpoch != gen+1 {
		t.Fatalf("epochs %d/%d, want %d after the classic generation %d", g.epoch, g.assignmentEpoch, gen+1, gen)
	}
	// The new member gets nothing until the classic members released something.
	checkAllDisjoint(t, []*clClient{a, b}, []*cgClient{x})
	h.checkReplay()
	// The classic members' commits still go through with their generation.
	if code := h.commit(8, "g", a.id, a.gen, "t", committedP, 6); code != 0 {
		t.Fatalf("classic member's commit after upgrade: %d", code)
	}

	for range 10 {
		a.step()
		b.step()
		x.beat()
		checkAllDisjoint(t, []*clClient{a, b}, []*cgClient{x})
		h.checkReplay()
	}
	if len(a.owned) != 2 || len(b.owned) != 2 || len(x.owned) != 2 {
		t.Fatalf("not balanced: a %d b %d x %d", len(a.owned), len(b.owned), len(x.owned))
	}
	if st := g.state(); st != "Stable" {
		t.Fatalf("group %s", st)
	}
	d := h.s.describeConsumer("g")
	types := map[int8]int{}
	for _, m := range d.Members {
		types[m.MemberType]++
	}
	if types[0] != 2 || types[1] != 1 {
		t.Fatalf("member types %v", types)
	}
	// A classic generation behind the member epoch is fenced.
	if code := h.commit(8, "g", a.id, a.gen+5, "t", a.owned.Sorted()[0].Partition, 7); code != errIllegalGeneration {
		t.Fatalf("commit with a newer generation: %d", code)
	}

	if code := x.leave(-1); code != 0 {
		t.Fatalf("leave: %d", code)
	}
	cl := h.s.groups["g"]
	if cl == nil || h.s.consumers["g"] != nil || !cl.is(statePreparingRebalance) || len(cl.members) != 2 {
		t.Fatalf("not downgraded: %s %+v", h.groupType("g"), cl)
	}
	for _, m := range cl.members {
		if m.sessionTimeoutMs != 10000 || m.protocolType != "consumer" || len(m.protocols) != 1 {
			t.Fatalf("downgraded member %+v", m)
		}
	}
	classicStable(t, a, b)
	checkAllDisjoint(t, []*clClient{a, b}, nil)
	if ownedCount(a.owned, b.owned) != 6 || !cl.is(stateStable) {
		t.Fatalf("classic again: %s, owned %d", cl.state, ownedCount(a.owned, b.owned))
	}
	// Offsets survived both conversions.
	if o, ok := h.s.offsets.get("g", "t", committedP); !ok || o.offset != 6 {
		t.Fatalf("offset %+v %v", o, ok)
	}
	h.checkReplay()
}

func TestOnlineMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy               MigrationPolicy
		upgrade, classicJoin bool
	}{
		{MigrationBidirectional, true, true},
		{MigrationUpgrade, true, true},
		{MigrationDowngrade, false, true},
		{MigrationDisabled, false, false},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			h := newMigrationHarness(t)
			h.s.cfg.migration = tc.policy
			a := h.classic("g", "t")
			classicStable(t, a)
			x := h.client("g", "x", "t")
			code := x.beat()
			if tc.upgrade != (code == 0) || (!tc.upgrade && code != errGroupIDNotFound) {
				t.Fatalf("consumer join to a classic group: %d", code)
			}
			// A consumer group of its own, then a classic member tries it.
			y := h.client("h", "y", "t")
			if code := y.beat(); code != 0 {
				t.Fatalf("consumer join: %d", code)
			}
			c := h.classic("h", "t")
			c.step()
			c.step()
			if got := c.lastErr; tc.classicJoin != (got == 0) || (!tc.classicJoin && got != errInconsistentProtocol) {
				t.Fatalf("classic join to a consumer group: %d", got)
			}
			if !tc.classicJoin {
				return
			}
			classicStable(t, c)
			y.leave(-1)
			wantType := "consumer"
			if tc.policy.downgrade() {
				wantType = "classic"
			}
			if got := h.groupType("h"); got != wantType {
				t.Fatalf("after the consumer member left: %s, want %s", got, wantType)
			}
		})
	}
}

func TestOnlineUpgradeRefusals(t *testing.T) {
	h := newMigrationHarness(t)
	h.s.cfg.consumerMaxSize = 2
	a, b := h.classic("g", "t"), h.classic("g", "t")
	classicStable(t, a, b)
	// The converted group would be full: the joining member is refused, nothing changes.
	x := h.client("g", "x", "t")
	if code := x.beat(); code != errGroupMaxSizeReached {
		t.Fatalf("join to a full upgrade: %d", code)
	}
	if h.groupType("g") != "classic" || !h.s.groups["g"].is(stateStable) {
		t.Fatalf("group changed: %s", h.groupType("g"))
	}
	// A client-side assignor's user data cannot be carried over.
	h.s.cfg.consumerMaxSize = 0
	for _, m := range h.s.groups["g"].members {
		var asg kmsg.ConsumerMemberAssignment
		_ = asg.ReadFrom(m.assignment)
		asg.UserData = []byte{1}
		m.assignment = asg.AppendTo(nil)
	}
	resp := h.hb(x.request())
	if resp.ErrorCode != errGroupIDNotFound || resp.ErrorMessage == nil {
		t.Fatalf("upgrade of a group with user data: %+v", resp)
	}
	// A group of another protocol type is not upgraded.
	h2 := newMigrationHarness(t)
	r := joinReq("c", "")
	r.ProtocolType = "connect"
	h2.run(func(tok uint64, out *output) {
		h2.s.join(joinRequest{version: 3, req: r, clientID: "c", token: tok}, h2.nowMs, out)
	})
	if resp := h2.hb(h2.client("c", "x", "t").request()); resp.ErrorCode != errGroupIDNotFound {
		t.Fatalf("upgrade of a connect group: %+v", resp)
	}
}

func (c *clClient) leave() {
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = c.id, c.instanceID
	c.h.run(func(_ uint64, out *output) { c.h.s.leave(c.group, []kmsg.LeaveGroupRequestMember{lm}, c.h.nowMs, out) })
}

// restartShard rebuilds the harness's shard from its log; requests parked in the old
// one are lost (their clients see an error and retry).
func (h *cgHarness) restartShard() {
	h.t.Helper()
	s := newShard(0, h.cfg, nil)
	h.deterministicIDs(s)
	if err := s.replayLog(h.log, h.nowMs); err != nil {
		h.t.Fatal(err)
	}
	var out output
	s.loaded(h.nowMs, &out)
	h.s = s
}

// TestMixedProtocolGroupModel runs random histories of classic clients (cooperative and
// eager) and consumer-protocol clients in one group id, so the group is upgraded to a
// consumer group and downgraded back as members come and go: joins, heartbeats,
// revocations held back, leaves, silences long enough for sessions and rebalance
// deadlines to pass, topics growing and restarts. After every step: the coordinator
// never records a partition as held by two members, no two clients consume one
// partition, a commit is accepted only from the partition's owner (a consumer group) or
// a member of the current generation (a classic group), a client the coordinator
// dropped is refused its commit, and a replay of the log rebuilds the live groups. At
// the end the clients settle with every subscribed partition consumed once.
var debugModel = false

func TestMixedProtocolGroupModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newCGHarness(t)
		h.deterministicIDs(h.s)
		names := []string{"t0", "t1"}
		for _, n := range names {
			h.addTopic(n, int32(rapid.IntRange(1, 4).Draw(t, "partitions")))
		}
		classics := map[string]*clClient{}
		consumers := map[string]*cgClient{}
		subscribe := func() []string {
			var topics []string
			for _, n := range names {
				if rapid.Bool().Draw(t, "sub") {
					topics = append(topics, n)
				}
			}
			if len(topics) == 0 {
				topics = names[:1]
			}
			return topics
		}
		all := func() ([]*clClient, []*cgClient) {
			var cls []*clClient
			for _, k := range slices.Sorted(maps.Keys(classics)) {
				cls = append(cls, classics[k])
			}
			var cgs []*cgClient
			for _, k := range slices.Sorted(maps.Keys(consumers)) {
				cgs = append(cgs, consumers[k])
			}
			return cls, cgs
		}
		// commitFenced checks one commit of a partition the client consumes.
		commitClassic := func(c *clClient) {
			if len(c.owned) == 0 || c.id == "" {
				return
			}
			tp := rapid.SampledFrom(c.owned.Sorted()).Draw(t, "commit")
			code := h.commit(8, "g", c.id, c.gen, c.name(tp), tp.Partition, 1)
			if code != 0 {
				return
			}
			switch h.groupType("g") {
			case "consumer":
				if o := h.s.consumers["g"].owner[tp]; o != c.id {
					t.Fatalf("classic %s committed %v owned by %q", c.id, tp, o)
				}
			case "classic":
				if g := h.s.groups["g"]; g.members[c.id] == nil || g.generation != c.gen {
					t.Fatalf("classic %s committed at generation %d, group at %d", c.id, c.gen, g.generation)
				}
			}
		}
		commitConsumer := func(c *cgClient) {
			if len(c.owned) == 0 || c.epoch <= 0 {
				return
			}
			tp := rapid.SampledFrom(c.owned.Sorted()).Draw(t, "commit")
			name := ""
			for n, x := range h.topics {
				if x.id == tp.Topic {
					name = n
				}
			}
			if code := h.commit(9, "g", c.id, c.epoch, name, tp.Partition, 1); code == 0 {
				if g := h.s.consumers["g"]; g == nil || g.owner[tp] != c.id {
					t.Fatalf("consumer %s committed %v it does not hold", c.id, tp)
				}
			}
		}
		// dropZombies delivers SyncGroup responses as they arrive (a client consumes from
		// then on), and stops every client the coordinator dropped: first it tries to
		// commit with what it had, and must be refused.
		dropZombies := func() {
			for _, c := range classics {
				if resp, ok := h.done[c.syncTok]; ok && c.syncTok != 0 {
					c.syncTok = 0
					c.onSync(resp.(*kmsg.SyncGroupResponse))
				}
			}
			// A client the coordinator dropped stops consuming; first it tries to commit
			// with what it had, and must be refused.
			for _, c := range classics {
				if len(c.owned) > 0 && !h.isMember("g", c.id) {
					tp := c.owned.Sorted()[0]
					if code := h.commit(8, "g", c.id, c.gen, c.name(tp), tp.Partition, 2); code == 0 {
						t.Fatalf("dropped classic %s committed %v", c.id, tp)
					}
					c.reset()
					c.joinTok, c.syncTok = 0, 0
				}
			}
			for _, c := range consumers {
				if !h.isMember("g", c.id) || h.groupType("g") != "consumer" {
					c.owned, c.epoch = consumer.Set{}, 0
				}
			}
		}
		ids := []string{"a", "b", "c", "x", "y"}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			id := rapid.SampledFrom(ids).Draw(t, "client")
			op := rapid.IntRange(0, 11).Draw(t, "op")
			classic := id < "x"
			switch {
			case classic && classics[id] == nil:
				c := h.classic("g", subscribe()...)
				c.eager = rapid.Bool().Draw(t, "eager")
				classics[id] = c
				c.step()
			case !classic && consumers[id] == nil:
				c := h.client("g", id, subscribe()...)
				consumers[id] = c
				c.beat()
			case op == 0:
				if classic {
					classics[id].leave()
					delete(classics, id)
				} else {
					consumers[id].leave(-1)
					delete(consumers, id)
				}
			case op == 1:
				h.advance(int64(rapid.IntRange(1, 40).Draw(t, "seconds")) * 1000)
			case op == 2:
				n := rapid.SampledFrom(names).Draw(t, "grow")
				h.addTopic(n, h.topics[n].parts+1)
				// Classic clients see the metadata change and rejoin (the leader's
				// rejoin rebalances a classic group).
				for _, c := range classics {
					if c.joinTok == 0 && c.syncTok == 0 {
						c.needJoin = true
					}
				}
			case op == 3:
				h.restartShard()
				for _, c := range classics {
					if c.joinTok != 0 || c.syncTok != 0 {
						c.joinTok, c.syncTok, c.needJoin = 0, 0, true
					}
				}
			case op == 4:
				if classic {
					commitClassic(classics[id])
				} else {
					commitConsumer(consumers[id])
				}
			case classic:
				c := classics[id]
				switch code := c.step(); code {
				case 0, errRebalanceInProgress, errIllegalGeneration, errUnknownMemberID, errFencedInstanceID:
				default:
					t.Fatalf("classic %s: error %d", c.id, code)
				}
			default:
				c := consumers[id]
				c.hold = rapid.Bool().Draw(t, "hold")
				switch code := c.beat(); code {
				case 0:
				case errUnknownMemberID, errFencedMemberEpoch, errGroupIDNotFound:
					c.owned, c.epoch = consumer.Set{}, 0
				default:
					t.Fatalf("consumer %s: heartbeat error %d", id, code)
				}
			}
			dropZombies()
			cls, cgs := all()
			if debugModel {
				st := fmt.Sprintf("after %s op %d: %s |", id, op, h.groupType("g"))
				for _, c := range cls {
					st += fmt.Sprintf(" cl %s gen=%d eager=%v owned=%v j=%d s=%d nj=%v;", c.id, c.gen, c.eager, c.owned.Sorted(), c.joinTok, c.syncTok, c.needJoin)
				}
				for _, c := range cgs {
					st += fmt.Sprintf(" cg %s e=%d owned=%v;", c.id, c.epoch, c.owned.Sorted())
				}
				t.Logf("%s\n   %s", st, dumpConsumers(h.s))
			}
			checkServerDisjoint(t, h)
			checkAllDisjoint(t, cls, cgs)
			h.checkReplay()
		}

		// Settle: every client runs until nothing changes.
		cls, cgs := all()
		for _, c := range cgs {
			c.hold = false
		}
		for range 60 {
			// Time passes too: a member id handed out to a join that never came back
			// holds the join phase until its session ends (as in Kafka).
			h.advance(3000)
			dropZombies()
			for _, c := range cls {
				c.step()
			}
			for _, c := range cgs {
				if code := c.beat(); code != 0 {
					c.owned, c.epoch = consumer.Set{}, 0
				}
			}
			dropZombies()
			checkAllDisjoint(t, cls, cgs)
		}
		checkServerDisjoint(t, h)
		h.checkReplay()
		if len(cls)+len(cgs) == 0 {
			return
		}
		want := consumer.Set{}
		subscribed := map[string]bool{}
		for _, c := range cls {
			for _, n := range c.topics {
				subscribed[n] = true
			}
		}
		for _, c := range cgs {
			for _, n := range c.topics {
				subscribed[n] = true
			}
		}
		for n := range subscribed {
			for p := range h.topics[n].parts {
				want[consumer.TP{Topic: h.topics[n].id, Partition: p}] = struct{}{}
			}
		}
		got := consumer.Set{}
		for _, c := range cls {
			maps.Copy(got, c.owned)
		}
		for _, c := range cgs {
			maps.Copy(got, c.owned)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s group: consumed %v, subscribed %v\n%s", h.groupType("g"), got.Sorted(), want.Sorted(), dumpConsumers(h.s))
		}
		if len(cgs) == 0 && h.groupType("g") != "classic" {
			t.Fatalf("no consumer-protocol client left, group is %s", h.groupType("g"))
		}
		if len(cgs) > 0 && h.groupType("g") != "consumer" {
			t.Fatalf("consumer-protocol clients left, group is %s", h.groupType("g"))
		}
	})
}

// TestStaticClassicMemberReplacesLastConsumerMember: a static consumer-protocol member
// restarts as a classic consumer with the same instance id (a rollback of the client);
// it takes over the member's partitions without a leave, and the group, classic members
// only now, is downgraded.
func TestStaticClassicMemberReplacesLastConsumerMember(t *testing.T) {
	h := newMigrationHarness(t)
	a := h.classic("g", "t")
	classicStable(t, a)
	inst := "i1"
	x := h.client("g", "x", "t")
	x.instanceID = &inst
	x.beat()
	for range 6 {
		a.step()
		x.beat()
	}
	if len(a.owned) != 3 || len(x.owned) != 3 || h.s.consumers["g"].state() != "Stable" {
		t.Fatalf("before: a %v x %v %s", a.owned, x.owned, h.s.consumers["g"].state())
	}
	// x's process is replaced by a classic one; it never sent a leave.
	b := h.classic("g", "t")
	b.instanceID = &inst
	b.step() // JoinGroup
	b.step() // its response, then SyncGroup
	if code := b.lastErr; code != 0 || b.id == "" {
		t.Fatalf("static classic join: %d", code)
	}
	cl := h.s.groups["g"]
	if cl == nil || h.s.consumers["g"] != nil || len(cl.members) != 2 || cl.staticMembers[inst] != b.id {
		t.Fatalf("not downgraded: %s %+v", h.groupType("g"), cl)
	}
	// It took x's partitions over: its classic assignment is what x held.
	var asg kmsg.ConsumerMemberAssignment
	if err := asg.ReadFrom(cl.members[b.id].assignment); err != nil || len(asg.Topics) != 1 || len(asg.Topics[0].Partitions) != 3 {
		t.Fatalf("assignment of the replacement: %+v %v", asg, err)
	}
	h.checkReplay()
	x.owned = consumer.Set{} // the old process is gone
	classicStable(t, a, b)
	checkAllDisjoint(t, []*clClient{a, b}, nil)
	if ownedCount(a.owned, b.owned) != 6 {
		t.Fatalf("after: a %v b %v", a.owned, b.owned)
	}
}

// TestClassicMemberDeadlinesAndFetchFencing: a classic member of a consumer group that is
// told to rejoin and never does is fenced when its rebalance timeout passes (the join
// deadline), and one that joined but never synced is fenced at its sync deadline; a
// consumer-protocol static member takes a classic static member's instance id over
// without a leave; an OffsetFetch naming a classic member with a stale generation is
// ILLEGAL_GENERATION.
func TestClassicMemberDeadlinesAndFetchFencing(t *testing.T) {
	h := newMigrationHarness(t)
	a, b := h.classic("g", "t"), h.classic("g", "t")
	classicStable(t, a, b)
	x := h.client("g", "x", "t")
	x.beat() // upgrade: the classic members must rejoin
	g := h.s.consumers["g"]
	if code := a.step(); code != errRebalanceInProgress {
		t.Fatalf("classic heartbeat after the upgrade: %d", code)
	}
	if fetch := g.validateOffsetFetch(&a.id, a.gen+1); fetch != errIllegalGeneration {
		t.Fatalf("OffsetFetch with another generation: %d", fetch)
	}
	// heartbeat keeps a classic member's session alive without rejoining or syncing.
	heartbeat := func(c *clClient) int16 {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.Generation = c.group, c.id, c.gen
		var code int16
		h.run(func(uint64, *output) { code = h.s.heartbeat(r, h.nowMs) })
		return code
	}
	// a keeps heartbeating (its session, 10 s, never ends) but never rejoins: its join
	// deadline, its rebalance timeout (30 s) after it was told to rejoin, fences it.
	for i := range 8 {
		h.advance(5000)
		if g.members[a.id] != nil && heartbeat(a) != errRebalanceInProgress {
			t.Fatalf("heartbeat %d of a member told to rejoin", i)
		}
		b.step()
		x.beat()
	}
	if g.members[a.id] != nil {
		t.Fatalf("a classic member that never rejoined is still a member")
	}
	// b joins and heartbeats but never sends its SyncGroup: fenced at its sync deadline,
	// its rebalance timeout after the join.
	b.needJoin = true
	b.join()
	resp, ok := h.done[b.joinTok].(*kmsg.JoinGroupResponse)
	if !ok || resp.ErrorCode != 0 || g.members[b.id] == nil {
		t.Fatalf("join: %+v", resp)
	}
	b.gen = resp.Generation
	for range 8 {
		h.advance(5000)
		if g.members[b.id] != nil {
			heartbeat(b)
		}
		x.beat()
	}
	if h.s.consumers["g"] == nil || h.s.consumers["g"].members[b.id] != nil {
		t.Fatalf("a classic member that never synced is still a member (%s)", h.groupType("g"))
	}

	// A consumer-protocol static member replaces a classic static member at once.
	h2 := newMigrationHarness(t)
	inst := "i1"
	c := h2.classic("g", "t")
	c.instanceID = &inst
	classicStable(t, c)
	y := h2.client("g", "y-new", "t")
	y.instanceID = &inst
	if code := y.beat(); code != 0 {
		t.Fatalf("static consumer-protocol member replacing a classic one: %d", code)
	}
	g2 := h2.s.consumers["g"]
	if g2 == nil || g2.static[inst] != "y-new" || g2.members[c.id] != nil || g2.members["y-new"].usesClassic() {
		t.Fatalf("replacement: %s %+v", h2.groupType("g"), g2)
	}
	h2.checkReplay()
}

func TestParseMigrationPolicy(t *testing.T) {
	for in, want := range map[string]MigrationPolicy{"bidirectional": MigrationBidirectional, "UPGRADE": MigrationUpgrade,
		" Downgrade ": MigrationDowngrade, "disabled": MigrationDisabled} {
		if got, err := ParseMigrationPolicy(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "both", "enabled"} {
		if _, err := ParseMigrationPolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if MigrationPolicy(0).String() != "bidirectional" {
		t.Errorf("the zero value is %s, want Kafka's default bidirectional", MigrationPolicy(0))
	}
}
