package group

import (
	"context"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/testclock"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const testPartitions = 3

type env struct {
	t     *testing.T
	clock *testclock.Clock
	logs  []*coordlog.Memory
	c     *Coordinator
	cfg   Config
}

func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	e := &env{t: t, clock: testclock.New()}
	for i := range testPartitions {
		e.logs = append(e.logs, coordlog.NewMemory(int32(i)))
	}
	e.cfg = Config{NumPartitions: testPartitions, TickInterval: -1, Now: e.clock.Now,
		MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 1800000}
	if mod != nil {
		mod(&e.cfg)
	}
	e.start()
	return e
}

func (e *env) start() {
	e.t.Helper()
	parts := make([]coordlog.Partition, len(e.logs))
	for i, l := range e.logs {
		parts[i] = l
	}
	c, err := New(e.cfg, parts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
	e.t.Cleanup(c.Close)
}

// restart closes the coordinator and loads a new one from the same logs.
func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	e.start()
}

// advance moves the clock and fires due deadlines.
func (e *env) advance(d time.Duration) {
	e.clock.Advance(d)
	e.c.Tick()
}

// settle waits until every partition's queued writes are applied. The writer goroutines
// run asynchronously; this polls their queues under the lock with a channel handshake,
// not a sleep.
func (e *env) settle() {
	for _, p := range e.c.parts {
		for {
			p.mu.Lock()
			n := p.inflight
			p.mu.Unlock()
			if n == 0 {
				break
			}
			yieldRuntime()
		}
	}
}

// pending is a request parked in the coordinator.
type pending struct {
	resp kmsg.Response
	wait func() kmsg.Response
	done chan kmsg.Response
}

func start(resp kmsg.Response, wait func() kmsg.Response) *pending {
	p := &pending{resp: resp, wait: wait, done: make(chan kmsg.Response, 1)}
	if wait != nil {
		go func() { p.done <- wait() }()
	} else {
		p.done <- resp
	}
	return p
}

// get returns the response, failing the test if it does not arrive within 5s (a
// deadlock guard; tests never rely on the timing).
func (p *pending) get(t *testing.T) kmsg.Response {
	t.Helper()
	select {
	case r := <-p.done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("response never arrived")
		return nil
	}
}

// ready reports whether the response is available without blocking.
func (p *pending) ready() bool {
	return p.wait == nil || len(p.done) > 0
}

func joinReq(group, member string, protos ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group = group
	r.MemberID = member
	r.SessionTimeoutMillis = 10000
	r.RebalanceTimeoutMillis = 30000
	r.ProtocolType = "consumer"
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	for _, p := range protos {
		pr := kmsg.NewJoinGroupRequestProtocol()
		pr.Name = p
		pr.Metadata = subscription("t")
		r.Protocols = append(r.Protocols, pr)
	}
	return r
}

// subscription encodes a consumer-protocol v0 subscription.
func subscription(topics ...string) []byte {
	b := []byte{0, 0}
	n := len(topics)
	b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	for _, t := range topics {
		b = append(b, byte(len(t)>>8), byte(len(t)))
		b = append(b, t...)
	}
	return append(b, 0, 0, 0, 0) // null user data as an empty bytes field
}

func (e *env) join(version int16, req *kmsg.JoinGroupRequest) *pending {
	ctx := WithClient(context.Background(), Client{ID: "cli", Host: "/127.0.0.1"})
	return start(e.c.JoinGroup(ctx, version, req))
}

// joinNew does the KIP-394 two-step join and returns the parked second join.
func (e *env) joinNew(group string, protos ...string) *pending {
	e.t.Helper()
	r := e.join(5, joinReq(group, "", protos...)).get(e.t).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != errMemberIDRequired {
		e.t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", r.ErrorCode)
	}
	return e.join(5, joinReq(group, r.MemberID, protos...))
}

func (e *env) sync(group, member string, gen int32, assign map[string][]byte) *pending {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Group, r.MemberID, r.Generation = group, member, gen
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return start(e.c.SyncGroup(context.Background(), 5, r))
}

func (e *env) heartbeat(group, member string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = group, member, gen
	resp, _ := e.c.Heartbeat(context.Background(), 4, r)
	return resp.(*kmsg.HeartbeatResponse).ErrorCode
}

func (e *env) commit(group, member string, gen int32, topic string, partition int32, offset int64) int16 {
	e.t.Helper()
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Group, r.MemberID, r.Generation = group, member, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = partition, offset, -1
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	resp := start(e.c.OffsetCommit(context.Background(), 8, r)).get(e.t).(*kmsg.OffsetCommitResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (e *env) fetch(group, topic string, partition int32, stable bool) (int64, int16) {
	e.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.RequireStable = stable
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	t := kmsg.NewOffsetFetchRequestGroupTopic()
	t.Topic, t.Partitions = topic, []int32{partition}
	g.Topics = append(g.Topics, t)
	r.Groups = append(r.Groups, g)
	resp, _ := e.c.OffsetFetch(context.Background(), 8, r)
	rg := resp.(*kmsg.OffsetFetchResponse).Groups[0]
	if rg.ErrorCode != 0 {
		return -1, rg.ErrorCode
	}
	p := rg.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}
