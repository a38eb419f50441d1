package sharegroup

import (
	"context"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// env is a coordinator over one in-memory __consumer_offsets partition with a fake
// clock and a fake topic catalogue.
// tb is what both *testing.T and *rapid.T provide.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type env struct {
	t        tb
	mu       sync.Mutex
	now      time.Time
	topics   map[string]topicMeta
	log      *coordlog.Memory
	c        *Coordinator
	inits    []string // "group topic partition epoch start"
	failInit bool
	deleted  []string // "group topic partition" of DeleteShareState calls
	failDel  error
	removed  []memberRef
	other    map[string]bool
}

type topicMeta struct {
	id    [16]byte
	parts int32
}

func tid(b byte) [16]byte { return [16]byte{b} }

func newEnv(t tb) *env {
	e := &env{t: t, now: time.UnixMilli(1_000_000), topics: map[string]topicMeta{}, log: coordlog.NewMemory(0), other: map[string]bool{}}
	e.open()
	return e
}

func (e *env) cfg() Config {
	return Config{
		NumPartitions:        1,
		AssignmentIntervalMs: -1,
		TickInterval:         -1,
		Topics: func(name string) ([16]byte, int32, bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			m, ok := e.topics[name]
			return m.id, m.parts, ok
		},
		IsOtherGroupType: func(g string) bool { return e.other[g] },
		InitializeShareState: func(_ context.Context, g string, id [16]byte, p int32, epoch int32, start int64) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.failInit {
				return context.DeadlineExceeded
			}
			e.inits = append(e.inits, g+" "+string(rune('a'+id[0]))+" "+itoa(p)+" "+itoa(epoch)+" "+itoa(int32(start)))
			return nil
		},
		DeleteShareState: func(_ context.Context, g string, id [16]byte, p int32) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.failDel != nil {
				return e.failDel
			}
			e.deleted = append(e.deleted, g+" "+string(rune('a'+id[0]))+" "+itoa(p))
			return nil
		},
		Now: func() time.Time {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.now
		},
	}
}

func itoa(x int32) string {
	if x < 0 {
		return "-" + itoa(-x)
	}
	if x < 10 {
		return string(rune('0' + x))
	}
	return itoa(x/10) + string(rune('0'+x%10))
}

func (e *env) open() {
	c, err := New(e.cfg(), []coordlog.Partition{e.log})
	if err != nil {
		e.t.Fatal(err)
	}
	c.OnMemberRemoved(func(g, m string) { e.removed = append(e.removed, memberRef{g, m}) })
	e.c = c
}

// restart builds a new coordinator from the same log.
func (e *env) restart() {
	e.c.Close()
	e.open()
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

func (e *env) setTopic(name string, id byte, parts int32) {
	e.mu.Lock()
	e.topics[name] = topicMeta{tid(id), parts}
	e.mu.Unlock()
}

func (e *env) delTopic(name string) {
	e.mu.Lock()
	delete(e.topics, name)
	e.mu.Unlock()
}

func (e *env) hb(groupID, memberID string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = groupID, memberID, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return e.c.ShareGroupHeartbeat(WithClient(context.Background(), "cl", "/127.0.0.1"), 1, req)
}

// join joins and heartbeats until the member's assignment is settled, returning the
// last response and the member's epoch.
func (e *env) join(groupID, memberID string, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	e.t.Helper()
	r := e.hb(groupID, memberID, 0, topics...)
	if r.ErrorCode != 0 {
		e.t.Fatalf("join %s/%s: error %d", groupID, memberID, r.ErrorCode)
	}
	return r
}

// settle heartbeats every member of the group until no epoch moves for two rounds (a
// round may finish share-state initialization, which the next round assigns).
func (e *env) settle(groupID string, epochs map[string]int32) {
	e.t.Helper()
	still := 0
	for range 20 {
		moved := false
		for _, m := range sortedKeysStr(epochs) {
			r := e.hb(groupID, m, epochs[m])
			if r.ErrorCode != 0 {
				e.t.Fatalf("heartbeat %s/%s epoch %d: error %d", groupID, m, epochs[m], r.ErrorCode)
			}
			if r.MemberEpoch != epochs[m] {
				moved = true
				epochs[m] = r.MemberEpoch
			}
		}
		if moved {
			still = 0
		} else if still++; still == 2 {
			return
		}
	}
	e.t.Fatalf("group %s does not settle", groupID)
}

func sortedKeysStr(m map[string]int32) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// assigned is a member's live assignment.
func (e *env) assigned(groupID, memberID string) Assignment {
	p := e.c.partFor(groupID)
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.shard.groups[groupID]
	if g == nil || g.members[memberID] == nil {
		return nil
	}
	return g.members[memberID].assigned.clone()
}

func describeReq(ids ...string) *kmsg.ShareGroupDescribeRequest {
	r := kmsg.NewPtrShareGroupDescribeRequest()
	r.GroupIDs = ids
	return r
}

func kmsgRecords(keys ...[]byte) []kmsg.Record {
	var out []kmsg.Record
	for _, k := range keys {
		out = append(out, kmsg.Record{Key: k, Value: []byte{0, 0}})
	}
	return out
}
