package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// grpPeer scripts a single-node cluster with a group coordinator for the consumer's
// join/sync/heartbeat state machine. The client is member "m-1" and always the leader;
// with others set, the coordinator reports fake members whose subscriptions own what the
// leader assigned them in the previous generation. Heartbeat answers are queued with
// fault; every SyncGroup's plan is sent on synced.
type grpPeer struct {
	*seqPeer

	gmu       sync.Mutex
	gen       int32
	others    []string
	plans     map[int32]map[string][]TopicPartition // generation → leader's plan
	joins     []*kmsg.JoinGroupRequest
	hbFaults  []int16
	committed map[TopicPartition]int64
	commits   []*kmsg.OffsetCommitRequest
	leaves    []*kmsg.LeaveGroupRequest
	synced    chan int32
}

func newGrpPeer(t *testing.T, nparts int32) *grpPeer {
	sp := &seqPeer{topic: "t", nparts: nparts, parts: map[int32]*seqPart{}, epochSeen: map[int16]bool{}}
	gp := &grpPeer{seqPeer: sp, plans: map[int32]map[string][]TopicPartition{}, committed: map[TopicPartition]int64{}, synced: make(chan int32, 100)}
	sp.peer = newPeer(t, func(p *peer) { p.handle = gp.handle })
	return gp
}

func (gp *grpPeer) heartbeatFault(code int16) {
	gp.gmu.Lock()
	gp.hbFaults = append(gp.hbFaults, code)
	gp.gmu.Unlock()
}

func (gp *grpPeer) handle(pc *peerConn, req *peerReq) kmsg.Response {
	if r, ok := req.body.(*kmsg.MetadataRequest); ok {
		return gp.metadata(r)
	}
	gp.gmu.Lock()
	defer gp.gmu.Unlock()
	switch r := req.body.(type) {
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		host, port, _ := net.SplitHostPort(gp.addr)
		pn, _ := strconv.Atoi(port)
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = r.CoordinatorKeys[0], 1, host, int32(pn)
		resp.Coordinators = append(resp.Coordinators, c)
		return resp
	case *kmsg.JoinGroupRequest:
		gp.joins = append(gp.joins, r)
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		if r.MemberID == "" {
			resp.ErrorCode, resp.MemberID, resp.Generation = kerr.MemberIDRequired.Code, "m-1", -1
			return resp
		}
		gp.gen++
		resp.Generation, resp.MemberID, resp.LeaderID = gp.gen, r.MemberID, r.MemberID
		resp.Protocol = kmsg.StringPtr(r.Protocols[0].Name)
		resp.ProtocolType = kmsg.StringPtr("consumer")
		me := kmsg.NewJoinGroupResponseMember()
		me.MemberID, me.ProtocolMetadata = r.MemberID, r.Protocols[0].Metadata
		resp.Members = append(resp.Members, me)
		prev := gp.plans[gp.gen-1]
		for _, o := range gp.others {
			m := kmsg.NewJoinGroupResponseMember()
			gen := gp.gen - 1
			if _, ok := prev[o]; !ok {
				gen = -1
			}
			m.MemberID = o
			m.ProtocolMetadata = encodeSubscription(CooperativeStickyBalancer(), []string{"t"}, prev[o], gen)
			resp.Members = append(resp.Members, m)
		}
		return resp
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		plan := map[string][]TopicPartition{}
		for _, a := range r.GroupAssignment {
			tps, err := decodeAssignment(a.MemberAssignment)
			if err != nil {
				gp.t.Errorf("bad assignment: %v", err)
			}
			plan[a.MemberID] = tps
			if a.MemberID == r.MemberID {
				resp.MemberAssignment = a.MemberAssignment
			}
		}
		gp.plans[r.Generation] = plan
		gp.synced <- r.Generation
		return resp
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		if len(gp.hbFaults) > 0 {
			resp.ErrorCode, gp.hbFaults = gp.hbFaults[0], gp.hbFaults[1:]
		}
		return resp
	case *kmsg.OffsetFetchRequest:
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			for _, t := range g.Topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset = p, -1
					if o, ok := gp.committed[TopicPartition{t.Topic, p}]; ok {
						rp.Offset = o
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.OffsetCommitRequest:
		gp.commits = append(gp.commits, r)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				gp.committed[TopicPartition{t.Topic, p.Partition}] = p.Offset
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.LeaveGroupRequest:
		gp.leaves = append(gp.leaves, r)
		return r.ResponseKind()
	}
	gp.t.Errorf("unexpected request %s", kmsg.NameForKey(req.key))
	return nil
}

// events records the rebalance callbacks in order.
type events struct {
	ch chan string
}

func (e *events) config(c *ConsumerConfig) {
	rec := func(kind string) func(context.Context, []TopicPartition) {
		return func(_ context.Context, tps []TopicPartition) { e.ch <- fmt.Sprintf("%s %v", kind, tps) }
	}
	c.OnAssigned, c.OnRevoked, c.OnLost = rec("assigned"), rec("revoked"), rec("lost")
}

func (e *events) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-e.ch:
		if got != want {
			t.Fatalf("callback %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no callback, want %q", want)
	}
}

func newGroupConsumer(t *testing.T, addr string, mod func(*ConsumerConfig)) *Consumer {
	t.Helper()
	cfg := ConsumerConfig{
		Brokers:           []string{addr},
		Net:               NetConfig{RetryBackoff: time.Millisecond},
		Group:             "g",
		HeartbeatInterval: time.Millisecond,
		DisableAutoCommit: true,
	}
	mod(&cfg)
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGroupEagerJoinSyncHeartbeat(t *testing.T) {
	gp := newGrpPeer(t, 3)
	gp.committed[TopicPartition{"t", 0}] = 5
	ev := &events{ch: make(chan string, 16)}
	c := newGroupConsumer(t, gp.addr, func(cfg *ConsumerConfig) {
		cfg.Balancers = []Balancer{RangeBalancer()}
		ev.config(cfg)
	})
	all := "[{t 0} {t 1} {t 2}]"
	if err := c.Subscribe("t"); err != nil {
		t.Fatal(err)
	}
	ev.expect(t, "assigned "+all)
	if pos, _ := c.Position(TopicPartition{"t", 0}); pos != 5 {
		t.Fatalf("position of t[0] = %d, want the committed 5", pos)
	}
	if pos, _ := c.Position(TopicPartition{"t", 1}); pos != -1 {
		t.Fatalf("position of t[1] = %d, want -1 (resolving ResetOffset)", pos)
	}
	if gm := c.GroupMetadata(); gm != (GroupMetadata{GroupID: "g", GenerationID: 1, MemberID: "m-1"}) {
		t.Fatalf("group metadata %+v", gm)
	}

	// REBALANCE_IN_PROGRESS: eager members revoke everything, rejoin, get it back.
	gp.heartbeatFault(kerr.RebalanceInProgress.Code)
	ev.expect(t, "revoked "+all)
	ev.expect(t, "assigned "+all)
	if err := c.CommitOffsets(context.Background(), map[TopicPartition]int64{{"t", 1}: 3}); err != nil {
		t.Fatal(err)
	}

	// ILLEGAL_GENERATION: the partitions are lost, not revoked; the member rejoins.
	gp.heartbeatFault(kerr.IllegalGeneration.Code)
	ev.expect(t, "lost "+all)
	ev.expect(t, "assigned "+all)
	if pos, _ := c.Position(TopicPartition{"t", 1}); pos != 3 {
		t.Fatalf("position of t[1] = %d, want the committed 3", pos)
	}

	// UNKNOWN_MEMBER_ID: lost, and the member joins again without a member id.
	gp.heartbeatFault(kerr.UnknownMemberID.Code)
	ev.expect(t, "lost "+all)
	ev.expect(t, "assigned "+all)

	c.Close()
	ev.expect(t, "revoked "+all)

	gp.gmu.Lock()
	defer gp.gmu.Unlock()
	var members []string
	for _, j := range gp.joins {
		members = append(members, j.MemberID)
	}
	// MEMBER_ID_REQUIRED twice (start and after UNKNOWN_MEMBER_ID), one join per rebalance.
	if want := []string{"", "m-1", "m-1", "m-1", "", "m-1"}; !reflect.DeepEqual(members, want) {
		t.Fatalf("JoinGroup member ids %q, want %q", members, want)
	}
	if j := gp.joins[1]; j.Protocols[0].Name != "range" || j.ProtocolType != "consumer" || j.SessionTimeoutMillis != 45000 {
		t.Fatalf("JoinGroup %+v", j)
	}
	if len(gp.commits) != 1 || gp.commits[0].Generation != 2 || gp.commits[0].MemberID != "m-1" {
		t.Fatalf("commits %+v", gp.commits)
	}
	if len(gp.leaves) != 1 || gp.leaves[0].Members[0].MemberID != "m-1" {
		t.Fatalf("leaves %+v", gp.leaves)
	}
}

func TestGroupCooperativeTwoPhaseRebalance(t *testing.T) {
	gp := newGrpPeer(t, 4)
	ev := &events{ch: make(chan string, 16)}
	c := newGroupConsumer(t, gp.addr, func(cfg *ConsumerConfig) { ev.config(cfg) })
	defer c.Close()
	if err := c.Subscribe("t"); err != nil {
		t.Fatal(err)
	}
	ev.expect(t, "assigned [{t 0} {t 1} {t 2} {t 3}]")
	if gen := <-gp.synced; gen != 1 {
		t.Fatalf("first sync in generation %d", gen)
	}

	// A second member joins.
	gp.gmu.Lock()
	gp.others = []string{"m-2"}
	gp.hbFaults = append(gp.hbFaults, kerr.RebalanceInProgress.Code)
	gp.gmu.Unlock()
	ev.expect(t, "revoked [{t 2} {t 3}]")
	for gen := int32(2); gen <= 3; gen++ {
		if got := <-gp.synced; got != gen {
			t.Fatalf("sync in generation %d, want %d", got, gen)
		}
	}

	gp.gmu.Lock()
	defer gp.gmu.Unlock()
	// Generation 2: the partitions moving to m-2 are revoked by m-1 but not yet assigned.
	if p := gp.plans[2]; len(p["m-2"]) != 0 || len(p["m-1"]) != 2 {
		t.Fatalf("generation 2 plan %v", p)
	}
	// Generation 3 (m-1 rejoined at once after revoking): m-2 gets them.
	if p := gp.plans[3]; !reflect.DeepEqual(p["m-2"], tps("t", 2, "t", 3)) || !reflect.DeepEqual(p["m-1"], tps("t", 0, "t", 1)) {
		t.Fatalf("generation 3 plan %v", p)
	}
	// m-1's second join announced its owned partitions and their generation.
	sub, err := decodeSubscription("m-1", nil, gp.joins[2].Protocols[0].Metadata)
	if err != nil || sub.generation != 1 || len(sub.owned) != 4 {
		t.Fatalf("rejoin subscription %+v, %v", sub, err)
	}
	select {
	case e := <-ev.ch:
		t.Fatalf("unexpected callback %q", e)
	default:
	}
	if gm := c.GroupMetadata(); gm.GenerationID != 3 {
		t.Fatalf("generation %d, want 3", gm.GenerationID)
	}
}

func TestGroupFencedInstanceIsFatal(t *testing.T) {
	gp := newGrpPeer(t, 1)
	ev := &events{ch: make(chan string, 16)}
	c := newGroupConsumer(t, gp.addr, func(cfg *ConsumerConfig) {
		cfg.GroupInstanceID = "static-1"
		ev.config(cfg)
	})
	if err := c.Subscribe("t"); err != nil {
		t.Fatal(err)
	}
	ev.expect(t, "assigned [{t 0}]")
	gp.heartbeatFault(kerr.FencedInstanceID.Code)
	ev.expect(t, "lost [{t 0}]")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Poll(ctx); !errors.Is(err, kerr.FencedInstanceID) {
		t.Fatalf("poll: %v, want FENCED_INSTANCE_ID", err)
	}
	c.Close()
	gp.gmu.Lock()
	defer gp.gmu.Unlock()
	if len(gp.leaves) != 0 {
		t.Fatal("a static member sent LeaveGroup")
	}
	if j := gp.joins[0]; j.InstanceID == nil || *j.InstanceID != "static-1" {
		t.Fatalf("JoinGroup instance id %v", j.InstanceID)
	}
}

func TestGroupRequiresGroupID(t *testing.T) {
	c, err := NewConsumer(ConsumerConfig{Brokers: []string{"x:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe("t"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("Subscribe without a group: %v", err)
	}
	if err := c.CommitOffsets(context.Background(), map[TopicPartition]int64{{"t", 0}: 1}); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("CommitOffsets without a group: %v", err)
	}
}
