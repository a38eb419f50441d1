package sharegroup

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"pgregory.net/rapid"
)

// groupSnap is a group's persistent state, for comparing live state with a replay.
type groupSnap struct {
	Epoch, AssignmentEpoch int32
	Hash, AssignmentTsMs   int64
	Members                map[string]member
	Target                 map[string]Assignment
	Initializing           map[[16]byte][]int32
	Initialized            map[[16]byte][]int32
	Deleting               map[[16]byte]string
}

func snapshot(s *shard) map[string]groupSnap {
	out := map[string]groupSnap{}
	for id, g := range s.groups {
		gs := groupSnap{Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, Hash: g.metadataHash, AssignmentTsMs: g.assignmentTsMs,
			Members: map[string]member{}, Target: map[string]Assignment{}, Initializing: map[[16]byte][]int32{},
			Initialized: map[[16]byte][]int32{}, Deleting: maps.Clone(g.deleting)}
		for mid, m := range g.members {
			gs.Members[mid] = *m.clone()
		}
		for mid, a := range g.target {
			gs.Target[mid] = a.clone()
		}
		for tid, e := range g.initializing {
			gs.Initializing[tid] = e.sorted()
		}
		for tid, e := range g.initialized {
			gs.Initialized[tid] = e.sorted()
		}
		out[id] = gs
	}
	return out
}

// replayed loads a fresh shard from the env's log.
func (e *env) replayed() *shard {
	e.t.Helper()
	s := newShard(e.c.parts[0].shard.cfg)
	if err := load(s, e.log, 0); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) checkReplayEqualsLive() {
	e.t.Helper()
	p := e.c.parts[0]
	p.mu.Lock()
	live := snapshot(p.shard)
	p.mu.Unlock()
	if rep := snapshot(e.replayed()); !reflect.DeepEqual(live, rep) {
		e.t.Fatalf("replay differs from live state:\nlive   %+v\nreplay %+v", live, rep)
	}
}

func TestReplayAfterRestartEqualsLive(t *testing.T) {
	e := newEnv(t)
	e.setTopic("a", 1, 3)
	e.setTopic("b", 2, 2)
	e.join("g1", "m1", "a")
	e.join("g1", "m2", "a", "b")
	e.join("g2", "x", "b")
	ep := map[string]int32{"m1": 1, "m2": e.hb("g1", "m2", 0, "a", "b").MemberEpoch}
	e.settle("g1", ep)
	e.hb("g2", "x", -1)
	e.checkReplayEqualsLive()
	before := snapshot(e.c.parts[0].shard)
	e.restart()
	if after := snapshot(e.c.parts[0].shard); !reflect.DeepEqual(before, after) {
		t.Fatalf("state after restart differs:\nbefore %+v\nafter  %+v", before, after)
	}
	// Members carry on with their epochs; sessions restart at load.
	for m, epoch := range ep {
		if r := e.hb("g1", m, epoch); r.ErrorCode != 0 || r.MemberEpoch != epoch {
			t.Fatalf("%s after restart: %+v", m, r)
		}
	}
	e.removed = nil
	e.advance(45 * time.Second)
	e.c.Tick()
	if len(e.removed) != 2 {
		t.Fatalf("sessions after restart not expiring: %v", e.removed)
	}
}

func TestClassicRecordsAreSkipped(t *testing.T) {
	e := newEnv(t)
	// A classic GroupMetadata record and an offset commit in the shared partition.
	classicKey := []byte{0, 2, 0, 1, 'c'}
	offsetKey := []byte{0, 1, 0, 1, 'c', 0, 1, 't', 0, 0, 0, 0}
	if _, err := e.log.Append(nil, coordlog.Batch{ProducerID: -1, Records: kmsgRecords(classicKey, offsetKey)}); err != nil {
		t.Fatal(err)
	}
	e.log.AppendMarker(7, 0, true, 0)
	e.restart()
	if e.c.Exists("c") {
		t.Fatal("a classic group loaded as a share group")
	}
}

// TestModel drives the coordinator with random joins, heartbeats, subscription changes,
// leaves, clock moves, topic changes and restarts, and checks the invariants after each
// step: a member's assignment names only partitions of its subscribed, existing,
// initialized topics; once every member has caught up, every assignable subscribed
// partition is in some member's target; epochs never go backwards; members are exactly those that
// joined and neither left nor went silent for a session timeout; replaying the log
// rebuilds the live state.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(rt)
		topicNames := []string{"a", "b", "c"}
		nextID := byte(10)
		for i, n := range topicNames {
			e.setTopic(n, byte(i+1), int32(rapid.IntRange(1, 4).Draw(rt, "parts")))
		}
		memberIDs := []string{"m0", "m1", "m2", "m3", "m4"}
		type mstate struct {
			epoch  int32
			lastMs int64
		}
		in := map[string]*mstate{} // the model: members in the group
		var groupEpoch, lastGroupEpoch int32
		nowMs := func() int64 { return e.now.UnixMilli() }
		subset := func(label string) []string {
			s := rapid.SliceOfNDistinct(rapid.SampledFrom(topicNames), 1, 3, rapid.ID[string]).Draw(rt, label)
			return s
		}
		checkMember := func(mid string) {
			g := e.c.parts[0].shard.groups["g"]
			m := g.members[mid]
			ids := map[[16]byte]int32{}
			for _, n := range m.topics {
				if id, parts, ok := e.c.cfg.Topics(n); ok {
					ids[id] = parts
				}
			}
			for topic, ps := range m.assigned {
				parts, ok := ids[topic]
				if !ok {
					rt.Fatalf("%s holds topic %v it does not subscribe to (or that is gone): %v", mid, topic[0], m.assigned)
				}
				for _, p := range ps {
					if p >= parts || g.initialized[topic] == nil || !g.initialized[topic].parts[p] {
						rt.Fatalf("%s holds %v/%d: not an existing initialized partition", mid, topic[0], p)
					}
				}
			}
			if m.epoch > g.epoch || g.assignmentEpoch > g.epoch {
				rt.Fatalf("member epoch %d, assignment epoch %d above group epoch %d", m.epoch, g.assignmentEpoch, g.epoch)
			}
		}
		checkGroup := func(settled bool) {
			g := e.c.parts[0].shard.groups["g"]
			if g == nil {
				if len(in) > 0 {
					rt.Fatal("group missing with members")
				}
				return
			}
			if g.epoch < lastGroupEpoch {
				rt.Fatalf("group epoch went back from %d to %d", lastGroupEpoch, g.epoch)
			}
			lastGroupEpoch = g.epoch
			if got, want := g.sortedMembers(), slices.Sorted(maps.Keys(in)); !slices.Equal(got, want) {
				rt.Fatalf("members %v, model %v", got, want)
			}
			if !settled || len(g.members) == 0 {
				return
			}
			// Every member caught up: the target covers every assignable partition.
			assignable := e.c.parts[0].shard.assignable(g, subscribedCounts(g.members))
			for topic, ps := range assignable {
				for _, p := range ps {
					held := false
					for _, a := range g.target {
						held = held || a.has(topic, p)
					}
					if !held {
						rt.Fatalf("assignable %v/%d in no target: %v", topic[0], p, g.target)
					}
				}
			}
		}
		expire := func() {
			for mid, m := range in {
				if nowMs()-m.lastMs >= 45000 {
					delete(in, mid)
				}
			}
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); op {
			case 0, 1: // join or rejoin
				mid := rapid.SampledFrom(memberIDs).Draw(rt, "member")
				r := e.hb("g", mid, 0, subset("topics")...)
				if r.ErrorCode != 0 {
					rt.Fatalf("join %s: %d", mid, r.ErrorCode)
				}
				if m := in[mid]; m != nil && r.MemberEpoch < m.epoch {
					rt.Fatalf("rejoin moved %s's epoch back from %d to %d", mid, m.epoch, r.MemberEpoch)
				}
				in[mid] = &mstate{epoch: r.MemberEpoch, lastMs: nowMs()}
				checkMember(mid)
			case 2, 3, 4: // heartbeat, sometimes with a new subscription
				mid := rapid.SampledFrom(memberIDs).Draw(rt, "member")
				m := in[mid]
				var topics []string
				if rapid.IntRange(0, 3).Draw(rt, "resub") == 0 {
					topics = subset("topics")
				}
				epoch := int32(5)
				if m != nil {
					epoch = m.epoch
				}
				r := e.hb("g", mid, epoch, topics...)
				switch {
				case m == nil:
					if r.ErrorCode != kerr.UnknownMemberID.Code && r.ErrorCode != kerr.GroupIDNotFound.Code {
						rt.Fatalf("heartbeat of absent %s: %d", mid, r.ErrorCode)
					}
				case r.ErrorCode != 0:
					rt.Fatalf("heartbeat %s epoch %d: %d", mid, epoch, r.ErrorCode)
				default:
					if r.MemberEpoch < m.epoch {
						rt.Fatalf("%s epoch went back from %d to %d", mid, m.epoch, r.MemberEpoch)
					}
					m.epoch, m.lastMs = r.MemberEpoch, nowMs()
					checkMember(mid)
				}
			case 5: // a stale or future epoch is fenced
				mid := rapid.SampledFrom(memberIDs).Draw(rt, "member")
				if m := in[mid]; m != nil {
					if r := e.hb("g", mid, m.epoch+1); r.ErrorCode != kerr.FencedMemberEpoch.Code {
						rt.Fatalf("future epoch: %d", r.ErrorCode)
					}
				}
			case 6: // leave
				mid := rapid.SampledFrom(memberIDs).Draw(rt, "member")
				r := e.hb("g", mid, -1)
				if in[mid] != nil {
					if r.ErrorCode != 0 {
						rt.Fatalf("leave %s: %d", mid, r.ErrorCode)
					}
					delete(in, mid)
				} else if r.ErrorCode == 0 {
					rt.Fatalf("absent %s left", mid)
				}
			case 7: // clock
				e.advance(time.Duration(rapid.IntRange(0, 30000).Draw(rt, "ms")) * time.Millisecond)
				e.c.Tick()
				expire()
			case 8: // topic metadata changes
				n := rapid.SampledFrom(topicNames).Draw(rt, "topic")
				e.mu.Lock()
				cur, exists := e.topics[n]
				e.mu.Unlock()
				switch {
				case !exists:
					nextID++
					e.setTopic(n, nextID, int32(rapid.IntRange(1, 4).Draw(rt, "parts")))
				case rapid.Bool().Draw(rt, "delete"):
					e.delTopic(n)
				default:
					e.setTopic(n, cur.id[0], cur.parts+int32(rapid.IntRange(1, 2).Draw(rt, "grow")))
				}
			case 9: // restart: sessions restart at load
				e.restart()
				for _, m := range in {
					m.lastMs = nowMs()
				}
			}
			if g := e.c.parts[0].shard.groups["g"]; g != nil {
				groupEpoch = g.epoch
			}
			checkGroup(false)
			e.checkReplayEqualsLive()
		}
		_ = groupEpoch
		// Let every member settle: then the target is current and covers everything.
		if len(in) > 0 {
			ep := map[string]int32{}
			for mid, m := range in {
				ep[mid] = m.epoch
			}
			e.settle("g", ep)
			g := e.c.parts[0].shard.groups["g"]
			if g.assignmentEpoch != g.epoch {
				rt.Fatalf("settled group: assignment epoch %d, group epoch %d", g.assignmentEpoch, g.epoch)
			}
			checkGroup(true)
			for mid := range in {
				checkMember(mid)
			}
		}
		_ = fmt.Sprint
	})
}
