package group

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/group/consumer"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

// cgHarness drives one shard's consumer groups synchronously over an in-memory log:
// every write is appended at once and its callback run, so a history is a
// deterministic function of the inputs.
type cgHarness struct {
	t      fataler
	s      *shard
	log    *coordlog.Memory
	nowMs  int64
	tok    uint64
	topics map[string]cgTopic
	cfg    shardConfig
	// done holds every completion by token, for requests that stay parked past the
	// input that sent them (classic joins).
	done map[uint64]any
	ids  int // member ids handed out by deterministicIDs
}

type cgTopic struct {
	id    [16]byte
	parts int32
}

func newCGHarness(t fataler) *cgHarness {
	h := &cgHarness{t: t, log: coordlog.NewMemory(0), nowMs: 1_000_000, topics: map[string]cgTopic{}, done: map[uint64]any{}}
	h.cfg = shardConfig{offsetsRetentionMs: 1 << 40, offsetMetadataMaxBytes: 4096, newMemberJoinTimeoutMs: 300000,
		topicMeta: func(name string) ([16]byte, int32, bool) {
			tp, ok := h.topics[name]
			return tp.id, tp.parts, ok
		},
		topicNames: func() []string { return slices.Sorted(maps.Keys(h.topics)) },
		topicName: func(id [16]byte) (string, bool) {
			for n, tp := range h.topics {
				if tp.id == id {
					return n, true
				}
			}
			return "", false
		},
		topicID: func(name string) ([16]byte, bool) { tp, ok := h.topics[name]; return tp.id, ok },
	}
	h.s = newShard(0, h.cfg, func(p string) string { return p + "-x" })
	return h
}

func (h *cgHarness) addTopic(name string, parts int32) {
	tp, ok := h.topics[name]
	if !ok {
		tp.id = [16]byte{byte(len(h.topics) + 1), 0xee}
	}
	tp.parts = parts
	h.topics[name] = tp
}

// run feeds one input and returns what it completed for its token.
func (h *cgHarness) run(fn func(tok uint64, out *output)) any {
	h.t.Helper()
	h.tok++
	tok := h.tok
	var out output
	fn(tok, &out)
	h.s.expire(h.nowMs, &out)
	var got any
	for len(out.completions) > 0 || len(out.writes) > 0 {
		for _, c := range out.completions {
			if c.token == tok {
				got = c.resp
			}
			h.done[c.token] = c.resp
		}
		out.completions = nil
		ws := out.writes
		out.writes = nil
		for _, w := range ws {
			base, err := h.log.Append(nil, coordlog.Batch{Records: w.records, ProducerID: w.producerID, ProducerEpoch: w.producerEpoch})
			if err != nil {
				h.t.Fatal(err)
			}
			if w.done != nil {
				w.done(base, nil, &out)
			}
		}
	}
	return got
}

func (h *cgHarness) advance(ms int64) {
	h.nowMs += ms
	h.run(func(uint64, *output) {})
}

// hb sends one heartbeat.
func (h *cgHarness) hb(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	r := h.run(func(tok uint64, out *output) {
		h.s.consumerHeartbeat(heartbeatRequest{req: req, clientID: "cli", clientHost: "/127.0.0.1", token: tok}, h.nowMs, out)
	})
	if r == nil {
		h.t.Fatal("heartbeat not answered")
	}
	return r.(*kmsg.ConsumerGroupHeartbeatResponse)
}

// cgClient is a consumer as the Java client runs one: it owns what its last
// assignment said and reports it; it revokes at once unless told to hold.
type cgClient struct {
	h          *cgHarness
	group, id  string
	instanceID *string
	epoch      int32
	topics     []string
	owned      consumer.Set
	hold       bool // do not give up revoked partitions yet
}

func (h *cgHarness) client(group, id string, topics ...string) *cgClient {
	return &cgClient{h: h, group: group, id: id, topics: topics, owned: consumer.Set{}}
}

func (c *cgClient) request() *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.InstanceID = c.group, c.id, c.epoch, c.instanceID
	r.RebalanceTimeoutMillis = 30000
	r.SubscribedTopicNames = c.topics
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	topics, parts := byTopicID(c.owned.Sorted())
	for i, t := range topics {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t, parts[i]
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// beat heartbeats and applies the response; it returns the error code.
func (c *cgClient) beat() int16 {
	resp := c.h.hb(c.request())
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	c.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		next := consumer.Set{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				next[consumer.TP{Topic: t.TopicID, Partition: p}] = struct{}{}
			}
		}
		if c.hold {
			for tp := range c.owned {
				next[tp] = struct{}{}
			}
		}
		c.owned = next
	}
	return 0
}

func (c *cgClient) leave(epoch int32) int16 {
	r := c.request()
	r.MemberEpoch = epoch
	resp := c.h.hb(r)
	if resp.ErrorCode == 0 {
		c.owned, c.epoch = consumer.Set{}, 0
	}
	return resp.ErrorCode
}

// settle heartbeats every client until nothing changes.
func settle(t fataler, clients ...*cgClient) {
	t.Helper()
	for range 20 {
		changed := false
		for _, c := range clients {
			before, epoch := maps.Clone(c.owned), c.epoch
			if code := c.beat(); code != 0 {
				t.Fatalf("%s: heartbeat error %d", c.id, code)
			}
			changed = changed || !maps.Equal(before, c.owned) || epoch != c.epoch
		}
		if !changed {
			return
		}
	}
	t.Fatal("the group never settled")
}

func (h *cgHarness) commit(version int16, group, member string, epoch int32, topic string, partition int32, offset int64) int16 {
	h.t.Helper()
	id, _, _ := h.cfg.topicMeta(topic)
	r := h.run(func(tok uint64, out *output) {
		h.s.commit(commitRequest{version: version, group: group, memberID: member, generation: epoch, retentionMs: -1, token: tok,
			parts: []commitPartition{{topic: topic, topicID: id, partition: partition, offset: offset, leaderEpoch: -1}}}, h.nowMs, out)
	})
	return r.(commitDone).results[0].code
}

// checkReplay rebuilds a shard from the log and compares its consumer groups.
func (h *cgHarness) checkReplay() {
	h.t.Helper()
	s := newShard(0, h.cfg, nil)
	if err := s.replayLog(h.log, h.nowMs); err != nil {
		h.t.Fatal(err)
	}
	if got, want := dumpConsumers(s), dumpConsumers(h.s); got != want {
		h.t.Fatalf("replay differs:\nlive   %s\nreplay %s", want, got)
	}
	if got, want := dumpClassic(s, h.s), dumpClassic(h.s, h.s); got != want {
		h.t.Fatalf("replay differs:\nlive   %s\nreplay %s", want, got)
	}
}

// dumpClassic describes s's classic groups that are Stable or Empty in live, the states
// a replay rebuilds (a rebalance in progress is not in the log).
func dumpClassic(s, live *shard) string {
	out := ""
	for _, id := range sortedKeys(s.groups) {
		g, lg := s.groups[id], live.groups[id]
		if lg == nil || !(lg.is(stateStable) || lg.is(stateEmpty)) {
			continue
		}
		out += fmt.Sprintf("[%s gen=%d %s/%s leader=%s", id, g.generation, g.protocolType, g.protocolName, g.leaderID)
		for _, m := range g.memberList() {
			out += fmt.Sprintf(" {%s session=%d %x}", m.id, m.sessionTimeoutMs, m.assignment)
		}
		out += "]"
	}
	return out
}

func dumpConsumers(s *shard) string {
	out := ""
	for _, id := range sortedKeys(s.consumers) {
		g := s.consumers[id]
		out += fmt.Sprintf("[%s epoch=%d hash=%d target=%d", id, g.epoch, g.metadataHash, g.assignmentEpoch)
		for _, mid := range sortedKeys(g.members) {
			m := g.members[mid]
			out += fmt.Sprintf(" {%s inst=%v names=%v e=%d/%d %s a=%v p=%v t=%v", mid, m.instanceID != nil, m.topicNames,
				m.Epoch, m.PreviousEpoch, m.State, epochsString(m.Assigned), epochsString(m.PendingRevocation), g.target[mid].Sorted())
			if c := m.classic; c != nil {
				out += fmt.Sprintf(" classic=%d", c.sessionTimeoutMs)
				for _, p := range c.protocols {
					out += fmt.Sprintf(" %s:%x", p.name, p.metadata)
				}
			}
			out += "}"
		}
		out += fmt.Sprintf(" owners=%d]", len(g.owner))
	}
	return out
}

func epochsString(e consumer.Epochs) string {
	s := ""
	for _, tp := range e.Sorted() {
		s += fmt.Sprintf("%d:%d@%d ", tp.Topic[0], tp.Partition, e[tp])
	}
	return s
}

// checkDisjoint fails when two clients consume one partition.
func checkDisjoint(t fataler, clients ...*cgClient) {
	t.Helper()
	seen := map[consumer.TP]string{}
	for _, c := range clients {
		for tp := range c.owned {
			if o, dup := seen[tp]; dup {
				t.Fatalf("%v consumed by %s and %s", tp, o, c.id)
			}
			seen[tp] = c.id
		}
	}
}

func TestConsumerGroupThreeMembersShareTheTopic(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("orders", 6)
	a := h.client("g", "a", "orders")
	if code := a.beat(); code != 0 {
		t.Fatal(code)
	}
	if len(a.owned) != 6 || a.epoch != 1 {
		t.Fatalf("first member: %d partitions at epoch %d", len(a.owned), a.epoch)
	}
	b, c := h.client("g", "b", "orders"), h.client("g", "c", "orders")
	b.beat()
	checkDisjoint(t, a, b)
	c.beat()
	checkDisjoint(t, a, b, c)
	settle(t, a, b, c)
	checkDisjoint(t, a, b, c)
	for _, cl := range []*cgClient{a, b, c} {
		if len(cl.owned) != 2 {
			t.Fatalf("%s owns %d partitions, want 2", cl.id, len(cl.owned))
		}
	}
	g := h.s.consumers["g"]
	if g.state() != "Stable" || g.epoch != 3 || g.assignmentEpoch != 3 {
		t.Fatalf("group %s epoch %d/%d", g.state(), g.epoch, g.assignmentEpoch)
	}
	h.checkReplay()

	// c leaves: its partitions go back to a and b.
	if code := c.leave(-1); code != 0 {
		t.Fatal(code)
	}
	settle(t, a, b)
	if len(a.owned)+len(b.owned) != 6 {
		t.Fatalf("after the leave a has %d, b %d", len(a.owned), len(b.owned))
	}
	h.checkReplay()
}

func TestConsumerGroupRevocationWaitsForTheClient(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 4)
	a := h.client("g", "a", "t")
	a.beat()
	a.hold = true // a does not give partitions up until told
	b := h.client("g", "b", "t")
	b.beat()
	a.beat() // a learns what to revoke but keeps consuming it
	b.beat()
	checkDisjoint(t, a, b)
	if len(b.owned) != 0 {
		t.Fatalf("b got %v while a still owns everything", b.owned.Sorted())
	}
	if st := h.s.consumers["g"].members["b"].State; st != consumer.UnreleasedPartitions {
		t.Fatalf("b is %s, want UNRELEASED_PARTITIONS", st)
	}
	a.hold = false
	settle(t, a, b)
	checkDisjoint(t, a, b)
	if len(a.owned) != 2 || len(b.owned) != 2 {
		t.Fatalf("a %d, b %d", len(a.owned), len(b.owned))
	}
}

func TestConsumerGroupRebalanceTimeoutFencesAMemberThatNeverRevokes(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 2)
	a := h.client("g", "a", "t")
	a.beat()
	a.hold = true
	b := h.client("g", "b", "t")
	b.beat()
	a.beat()
	h.advance(30001) // past a's rebalance timeout, within b's session
	if _, ok := h.s.consumers["g"].members["a"]; ok {
		t.Fatal("a is still a member after its rebalance timeout")
	}
	if code := a.beat(); code != errUnknownMemberID {
		t.Fatalf("a's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
	settle(t, b)
	if len(b.owned) != 2 {
		t.Fatalf("b owns %d", len(b.owned))
	}
	h.checkReplay()
}

func TestConsumerGroupSessionTimeout(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 2)
	a, b := h.client("g", "a", "t"), h.client("g", "b", "t")
	a.beat()
	b.beat()
	settle(t, a, b)
	h.advance(40000)
	a.beat()
	h.advance(6000) // b silent for 46 s > 45 s
	if _, ok := h.s.consumers["g"].members["b"]; ok {
		t.Fatal("b outlived its session")
	}
	settle(t, a)
	if len(a.owned) != 2 {
		t.Fatalf("a owns %d", len(a.owned))
	}
	h.checkReplay()
}

func TestConsumerGroupEpochFencing(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 2)
	a := h.client("g", "a", "t")
	a.beat()
	r := a.request()
	r.MemberEpoch = a.epoch + 1
	if resp := h.hb(r); resp.ErrorCode != errFencedMemberEpoch {
		t.Fatalf("epoch ahead: %d", resp.ErrorCode)
	}
	r.MemberID = "nobody"
	r.MemberEpoch = 1
	if resp := h.hb(r); resp.ErrorCode != errUnknownMemberID {
		t.Fatalf("unknown member: %d", resp.ErrorCode)
	}
	r = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch = "missing", "a", 3
	if resp := h.hb(r); resp.ErrorCode != errGroupIDNotFound {
		t.Fatalf("missing group: %d", resp.ErrorCode)
	}
	// The previous epoch is accepted while the member owns no more than its assignment.
	b := h.client("g", "b", "t")
	b.beat()
	settle(t, a, b)
	prev := h.s.consumers["g"].members["a"].PreviousEpoch
	r = a.request()
	r.MemberEpoch = prev
	if resp := h.hb(r); resp.ErrorCode != 0 {
		t.Fatalf("previous epoch: %d", resp.ErrorCode)
	}
}

func TestConsumerGroupOffsetCommitFencing(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 2)
	a := h.client("g", "a", "t")
	a.beat()
	if code := h.commit(9, "g", "a", a.epoch, "t", 0, 10); code != 0 {
		t.Fatalf("commit at the member epoch: %d", code)
	}
	if code := h.commit(9, "g", "a", a.epoch+1, "t", 0, 11); code != errStaleMemberEpoch {
		t.Fatalf("newer epoch: %d, want STALE_MEMBER_EPOCH", code)
	}
	if code := h.commit(9, "g", "zz", a.epoch, "t", 0, 11); code != errUnknownMemberID {
		t.Fatalf("unknown member: %d", code)
	}
	if code := h.commit(8, "g", "a", a.epoch, "t", 0, 11); code != errUnsupportedVersion {
		t.Fatalf("v8 from a consumer-protocol member: %d", code)
	}
	if code := h.commit(9, "g", "", -1, "t", 0, 11); code != errUnknownMemberID {
		t.Fatalf("admin commit to a non-empty group: %d", code)
	}
	// b joins: a keeps partition p at its old assignment epoch, so a commit with a's
	// previous epoch is still accepted for it, and refused for the partition it lost.
	b := h.client("g", "b", "t")
	b.beat()
	settle(t, a, b)
	m := h.s.consumers["g"].members["a"]
	var kept, lost int32 = -1, -1
	for tp := range m.Assigned {
		kept = tp.Partition
	}
	lost = 1 - kept
	if code := h.commit(9, "g", "a", m.PreviousEpoch, "t", kept, 12); code != 0 {
		t.Fatalf("older epoch, still assigned since then: %d", code)
	}
	if code := h.commit(9, "g", "a", m.PreviousEpoch, "t", lost, 12); code != errStaleMemberEpoch {
		t.Fatalf("older epoch, partition moved: %d", code)
	}
	// Everyone leaves: an admin commit (epoch -1) goes through.
	a.leave(-1)
	b.leave(-1)
	if code := h.commit(9, "g", "", -1, "t", 0, 13); code != 0 {
		t.Fatalf("admin commit to the empty group: %d", code)
	}
	h.checkReplay()
}

func TestConsumerGroupStaticMembership(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 4)
	inst := "host-1"
	a := h.client("g", "a1", "t")
	a.instanceID = &inst
	a.beat()
	b := h.client("g", "b", "t")
	b.beat()
	settle(t, a, b)
	mine := maps.Clone(a.owned)
	// A second process with the same instance id is refused while the first is there.
	a2 := h.client("g", "a2", "t")
	a2.instanceID = &inst
	if code := a2.beat(); code != errUnreleasedInstanceID {
		t.Fatalf("second instance: %d, want UNRELEASED_INSTANCE_ID", code)
	}
	// A temporary leave (-2) keeps the partitions for the instance; the group epoch
	// does not move, and the new incarnation gets them back at once.
	epoch := h.s.consumers["g"].epoch
	if code := a.leave(-2); code != 0 {
		t.Fatal(code)
	}
	if h.s.consumers["g"].epoch != epoch {
		t.Fatal("a static member's temporary leave bumped the group epoch")
	}
	if code := a2.beat(); code != 0 {
		t.Fatal(code)
	}
	if !maps.Equal(a2.owned, mine) {
		t.Fatalf("the new incarnation got %v, the old one had %v", a2.owned.Sorted(), mine.Sorted())
	}
	if _, ok := h.s.consumers["g"].members["a1"]; ok {
		t.Fatal("the old incarnation is still a member")
	}
	if code := a.beat(); code != errUnreleasedInstanceID { // it rejoins (epoch 0) while a2 holds the id
		t.Fatalf("old incarnation: %d", code)
	}
	settle(t, a2, b)
	h.checkReplay()
}

func TestConsumerGroupMaxSize(t *testing.T) {
	h := newCGHarness(t)
	h.cfg.consumerMaxSize = 2
	h.s.cfg.consumerMaxSize = 2
	h.addTopic("t", 1)
	h.client("g", "a", "t").beat()
	b := h.client("g", "b", "t")
	b.beat()
	if code := h.client("g", "c", "t").beat(); code != errGroupMaxSizeReached {
		t.Fatalf("third member: %d, want GROUP_MAX_SIZE_REACHED", code)
	}
	if code := b.beat(); code != 0 {
		t.Fatalf("existing member: %d", code)
	}
}

func TestConsumerGroupRegexSubscription(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("orders-eu", 1)
	h.addTopic("orders-us", 1)
	h.addTopic("payments", 1)
	a := h.client("g", "a")
	req := a.request()
	req.SubscribedTopicNames = nil
	re := "orders-.*"
	req.SubscribedTopicRegex = &re
	resp := h.hb(req)
	if resp.ErrorCode != 0 || resp.Assignment == nil || len(resp.Assignment.Topics) != 2 {
		t.Fatalf("regex join: %+v", resp)
	}
	bad := "(orders"
	req = h.client("g", "b").request()
	req.SubscribedTopicNames, req.SubscribedTopicRegex = nil, &bad
	if resp := h.hb(req); resp.ErrorCode != errInvalidRegularExpression {
		t.Fatalf("invalid regex: %d", resp.ErrorCode)
	}
	// A new matching topic is picked up once the resolution is older than 10 s.
	h.addTopic("orders-ap", 1)
	h.advance(regexRefreshIntervalMs)
	req = a.request()
	req.MemberEpoch = resp.MemberEpoch
	req.SubscribedTopicNames, req.SubscribedTopicRegex = nil, nil
	a.epoch = h.s.consumers["g"].members["a"].Epoch
	req.MemberEpoch = a.epoch
	for range 3 {
		resp = h.hb(req)
		req.MemberEpoch = resp.MemberEpoch
	}
	if got := len(h.s.consumers["g"].members["a"].Assigned); got != 3 {
		t.Fatalf("after a matching topic appeared: %d partitions", got)
	}
	h.checkReplay()
}

func TestConsumerGroupReplacesEmptyClassicGroupAndDeletes(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 1)
	// Offsets committed outside group management make an Empty classic group.
	if code := h.commit(9, "g", "", -1, "t", 0, 5); code != 0 {
		t.Fatal(code)
	}
	a := h.client("g", "a", "t")
	if code := a.beat(); code != 0 {
		t.Fatal(code)
	}
	if h.s.groups["g"] != nil || h.s.consumers["g"] == nil {
		t.Fatal("the empty classic group was not replaced")
	}
	if c, ok := h.s.offsets.get("g", "t", 0); !ok || c.offset != 5 {
		t.Fatal("the offsets did not stay with the group")
	}
	list := h.s.list(nil, []string{"consumer"}, nil)
	if len(list) != 1 || list[0].GroupType != "consumer" || list[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", list)
	}
	if got := h.run(func(tok uint64, out *output) { h.s.deleteGroups([]string{"g"}, tok, out) }).([]kmsg.DeleteGroupsResponseGroup); got[0].ErrorCode != errNonEmptyGroup {
		t.Fatalf("delete of a non-empty group: %d", got[0].ErrorCode)
	}
	a.leave(-1)
	if got := h.run(func(tok uint64, out *output) { h.s.deleteGroups([]string{"g"}, tok, out) }).([]kmsg.DeleteGroupsResponseGroup); got[0].ErrorCode != 0 {
		t.Fatalf("delete: %d", got[0].ErrorCode)
	}
	if h.s.consumers["g"] != nil {
		t.Fatal("the group is still there")
	}
	if _, ok := h.s.offsets.get("g", "t", 0); ok {
		t.Fatal("the offsets outlived the group")
	}
	h.checkReplay()
	s := newShard(0, h.cfg, nil)
	if err := s.replayLog(h.log, h.nowMs); err != nil {
		t.Fatal(err)
	}
	if len(s.groups)+len(s.consumers) != 0 {
		t.Fatal("a deleted group came back on replay")
	}
}

func TestConsumerGroupDescribe(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 2)
	a := h.client("g", "a", "t")
	a.beat()
	d := h.s.describeConsumer("g")
	if d.ErrorCode != 0 || d.State != "Stable" || d.AssignorName != "uniform" || len(d.Members) != 1 {
		t.Fatalf("%+v", d)
	}
	m := d.Members[0]
	if m.MemberEpoch != 1 || len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "t" ||
		len(m.TargetAssignment.TopicPartitions[0].Partitions) != 2 || m.ClientHost != "/127.0.0.1" {
		t.Fatalf("member %+v", m)
	}
	if d := h.s.describeConsumer("nope"); d.ErrorCode != errGroupIDNotFound {
		t.Fatalf("missing: %d", d.ErrorCode)
	}
}

func TestConsumerGroupOffsetDelete(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 1)
	h.addTopic("old", 1)
	a := h.client("g", "a", "t")
	a.beat()
	if code := h.commit(9, "g", "a", a.epoch, "t", 0, 3); code != 0 {
		t.Fatal(code)
	}
	// At its current epoch a member may commit any partition (Kafka checks epochs only):
	// here one of a topic nobody subscribes to.
	if code := h.commit(9, "g", "a", a.epoch, "old", 0, 4); code != 0 {
		t.Fatalf("commit at the member epoch: %d", code)
	}
	del := func(topic string) *kmsg.OffsetDeleteResponse {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
		return h.run(func(tok uint64, out *output) {
			h.s.deleteOffsets("g", []kmsg.OffsetDeleteRequestTopic{rt}, tok, out)
		}).(*kmsg.OffsetDeleteResponse)
	}
	if r := del("t"); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != errGroupSubscribedToTopic {
		t.Fatalf("subscribed topic: %+v", r)
	}
	if r := del("old"); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("unsubscribed topic: %+v", r)
	}
	if _, ok := h.s.offsets.get("g", "old", 0); ok {
		t.Fatal("the offset is still there")
	}
}

func TestConsumerGroupFollowsTopicChanges(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("a", 2)
	h.addTopic("b", 2)
	m := h.client("g", "m", "a", "b")
	m.beat()
	settle(t, m)
	if len(m.owned) != 4 {
		t.Fatalf("owns %d", len(m.owned))
	}
	epoch := h.s.consumers["g"].epoch
	// b grows: the group epoch moves and the new partition is assigned.
	h.addTopic("b", 3)
	settle(t, m)
	if len(m.owned) != 5 || h.s.consumers["g"].epoch != epoch+1 {
		t.Fatalf("after growth: owns %d at group epoch %d", len(m.owned), h.s.consumers["g"].epoch)
	}
	// a is deleted: its partitions are revoked and the member keeps b's.
	delete(h.topics, "a")
	settle(t, m)
	if len(m.owned) != 3 {
		t.Fatalf("after deletion: owns %v", m.owned.Sorted())
	}
	// a is created again (a new id): it is assigned again.
	h.topics["a"] = cgTopic{id: [16]byte{9, 0xee}, parts: 1}
	settle(t, m)
	if len(m.owned) != 4 {
		t.Fatalf("after re-creation: owns %v", m.owned.Sorted())
	}
	h.checkReplay()
}

func TestConsumerGroupLeaveGroupRemovesMembers(t *testing.T) {
	h := newCGHarness(t)
	h.addTopic("t", 2)
	inst := "i-1"
	a, b := h.client("g", "a", "t"), h.client("g", "b", "t")
	b.instanceID = &inst
	a.beat()
	b.beat()
	settle(t, a, b)
	epoch := h.s.consumers["g"].epoch
	var code int16
	var resps []kmsg.LeaveGroupResponseMember
	h.run(func(_ uint64, out *output) {
		code, resps = h.s.leave("g", []kmsg.LeaveGroupRequestMember{
			{InstanceID: &inst}, // the admin client's removal by instance id
			{MemberID: "nobody"},
			{MemberID: "other", InstanceID: &inst}, // checked before anyone is fenced, as Kafka
		}, h.nowMs, out)
	})
	if code != 0 || resps[0].ErrorCode != 0 || resps[1].ErrorCode != errUnknownMemberID || resps[2].ErrorCode != errFencedInstanceID {
		t.Fatalf("leave: %d %+v", code, resps)
	}
	g := h.s.consumers["g"]
	if g.members["b"] != nil || g.epoch != epoch+1 {
		t.Fatalf("b still a member, or epoch %d", g.epoch)
	}
	if code := b.beat(); code != errUnknownMemberID && code != 0 {
		t.Fatalf("b after removal: %d", code)
	}
	h.checkReplay()
}
