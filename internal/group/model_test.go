package group

import (
	"fmt"
	"maps"
	"testing"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// harness drives the pure core synchronously: every write is appended to an in-memory
// log at once and its callback run, so a history is a deterministic function of the
// operations.
type harness struct {
	t       *rapid.T
	s       *shard
	log     *coordlog.Memory
	nowMs   int64
	tok     uint64
	results map[uint64]any
	ids     int
}

var modelCfg = shardConfig{offsetsRetentionMs: 1 << 40, offsetMetadataMaxBytes: 4096, newMemberJoinTimeoutMs: 300000}

func newHarness(t *rapid.T) *harness {
	h := &harness{t: t, log: coordlog.NewMemory(0), nowMs: 1_000_000, results: map[uint64]any{}}
	h.s = newShard(0, modelCfg, h.newID)
	return h
}

func (h *harness) newID(prefix string) string { h.ids++; return fmt.Sprintf("%s-%d", prefix, h.ids) }

func (h *harness) run(fn func(tok uint64, out *output)) any {
	h.tok++
	tok := h.tok
	var out output
	fn(tok, &out)
	h.s.expire(h.nowMs, &out)
	h.drain(&out)
	r := h.results[tok]
	delete(h.results, tok)
	return r
}

func (h *harness) drain(out *output) {
	for len(out.completions) > 0 || len(out.writes) > 0 {
		for _, c := range out.completions {
			h.results[c.token] = c.resp
		}
		out.completions = nil
		ws := out.writes
		out.writes = nil
		for _, w := range ws {
			pid := w.producerID
			base, err := h.log.Append(nil, coordlog.Batch{Records: w.records, ProducerID: pid, ProducerEpoch: w.producerEpoch})
			if err != nil {
				h.t.Fatal(err)
			}
			if w.done != nil {
				w.done(base, nil, out)
			}
		}
	}
}

// replayed builds a fresh shard from the log.
func (h *harness) replayed() *shard {
	s := newShard(0, modelCfg, h.newID)
	if err := s.replayLog(h.log, h.nowMs); err != nil {
		h.t.Fatal(err)
	}
	return s
}

type clientMember struct {
	id  string
	gen int32
}

func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		var clients []clientMember
		committed := map[int32]int64{} // partition → last accepted offset (the model)
		lastGen := int32(0)

		pickClient := func() int { return rapid.IntRange(0, len(clients)-1).Draw(t, "client") }
		join := func(memberID string, version int16) *kmsg.JoinGroupResponse {
			req := joinReq("g", memberID)
			r := h.run(func(tok uint64, out *output) {
				h.s.join(joinRequest{version: version, req: req, clientID: "c", token: tok}, h.nowMs, out)
			})
			jr, _ := r.(*kmsg.JoinGroupResponse)
			return jr
		}
		t.Repeat(map[string]func(*rapid.T){
			"joinNew": func(t *rapid.T) {
				r := join("", int16(rapid.SampledFrom([]int{3, 5}).Draw(t, "version")))
				if r != nil && r.ErrorCode == errMemberIDRequired {
					r = join(r.MemberID, 5)
				}
				if r != nil && r.ErrorCode == 0 {
					clients = append(clients, clientMember{r.MemberID, r.Generation})
				}
			},
			"rejoin": func(t *rapid.T) {
				if len(clients) == 0 {
					t.Skip()
				}
				i := pickClient()
				if r := join(clients[i].id, 5); r != nil && r.ErrorCode == 0 {
					clients[i].gen = r.Generation
				}
			},
			"sync": func(t *rapid.T) {
				if len(clients) == 0 {
					t.Skip()
				}
				c := clients[pickClient()]
				req := kmsg.NewPtrSyncGroupRequest()
				req.Group, req.MemberID, req.Generation = "g", c.id, c.gen
				for _, o := range clients {
					a := kmsg.NewSyncGroupRequestGroupAssignment()
					a.MemberID, a.MemberAssignment = o.id, []byte(o.id)
					req.GroupAssignment = append(req.GroupAssignment, a)
				}
				r := h.run(func(tok uint64, out *output) { h.s.sync(syncRequest{req: req, token: tok}, h.nowMs, out) })
				if sr, ok := r.(*kmsg.SyncGroupResponse); ok && sr.ErrorCode == 0 {
					g := h.s.groups["g"]
					if g.generation != c.gen || !g.is(stateStable) {
						t.Fatalf("sync succeeded for generation %d while the group is %s/%d", c.gen, g.state, g.generation)
					}
				}
			},
			"heartbeat": func(t *rapid.T) {
				if len(clients) == 0 {
					t.Skip()
				}
				c := clients[pickClient()]
				req := kmsg.NewPtrHeartbeatRequest()
				req.Group, req.MemberID, req.Generation = "g", c.id, c.gen
				h.run(func(_ uint64, _ *output) { h.s.heartbeat(req, h.nowMs) })
			},
			"leave": func(t *rapid.T) {
				if len(clients) == 0 {
					t.Skip()
				}
				i := pickClient()
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = clients[i].id
				h.run(func(_ uint64, out *output) { h.s.leave("g", []kmsg.LeaveGroupRequestMember{m}, h.nowMs, out) })
				clients = append(clients[:i], clients[i+1:]...)
			},
			"advance": func(t *rapid.T) {
				h.nowMs += int64(rapid.IntRange(0, 15000).Draw(t, "ms"))
				h.run(func(uint64, *output) {})
			},
			"commit": func(t *rapid.T) {
				member, gen := "", int32(-1)
				if len(clients) > 0 && rapid.Bool().Draw(t, "asMember") {
					c := clients[pickClient()]
					member, gen = c.id, c.gen
				}
				part := int32(rapid.IntRange(0, 2).Draw(t, "partition"))
				off := rapid.Int64Range(0, 1000).Draw(t, "offset")
				g := h.s.groups["g"]
				var curGen int32 = -2
				isMember, empty := false, true
				if g != nil {
					curGen, isMember, empty = g.generation, g.hasMember(member), g.is(stateEmpty)
				}
				cr := commitRequest{version: 8, group: "g", memberID: member, generation: gen, retentionMs: -1,
					parts: []commitPartition{{topic: "t", partition: part, offset: off, leaderEpoch: -1}}}
				r := h.run(func(tok uint64, out *output) { cr.token = tok; h.s.commit(cr, h.nowMs, out) }).(commitDone)
				if r.results[0].code == 0 {
					valid := (gen < 0 && empty) || (isMember && gen == curGen)
					if !valid {
						t.Fatalf("commit accepted from %q gen %d; group generation %d member %v", member, gen, curGen, isMember)
					}
					committed[part] = off
				}
			},
			"restart": func(t *rapid.T) {
				fresh := h.replayed()
				compareShards(t, h.s, fresh)
				var out output
				fresh.loaded(h.nowMs, &out)
				h.s = fresh
				h.drain(&out)
				// A rebalance in flight is not persisted (Kafka writes group metadata after
				// SyncGroup), so the generation restarts from the last persisted one.
				lastGen = 0
				if g := h.s.groups["g"]; g != nil {
					lastGen = g.generation
				}
			},
			"": func(t *rapid.T) {
				// Invariants after every step.
				if g := h.s.groups["g"]; g != nil {
					if g.generation < lastGen {
						t.Fatalf("generation went back from %d to %d", lastGen, g.generation)
					}
					lastGen = g.generation
				}
				for p, want := range committed {
					got, ok := h.s.offsets.get("g", "t", p)
					if !ok || got.offset != want {
						t.Fatalf("partition %d: offset %v (%v), model %d", p, got.offset, ok, want)
					}
				}
			},
		})
	})
}

// compareShards checks that a replayed shard holds what the live one does: offsets, and
// for each group its generation, protocol, leader and (for Stable/Empty groups, which
// are the states Kafka persists) its members and assignments.
func compareShards(t *rapid.T, live, replayed *shard) {
	if !maps.EqualFunc(live.offsets.byGroup, replayed.offsets.byGroup, func(a, b map[tp]committed) bool {
		return maps.EqualFunc(a, b, func(x, y committed) bool { return x.offset == y.offset && x.recordOffset == y.recordOffset })
	}) {
		t.Fatalf("offsets differ: live %v replayed %v", live.offsets.byGroup, replayed.offsets.byGroup)
	}
	for id, g := range live.groups {
		r := replayed.groups[id]
		if !(g.is(stateStable) || g.is(stateEmpty)) {
			continue // in-flight rebalances are not persisted, as in Kafka
		}
		if r == nil {
			t.Fatalf("group %s lost on replay", id)
		}
		if r.generation != g.generation || r.state != g.state || r.protocolName != g.protocolName || r.leaderID != g.leaderID {
			t.Fatalf("group %s: live %s/%d/%s/%s replayed %s/%d/%s/%s", id, g.state, g.generation, g.protocolName, g.leaderID,
				r.state, r.generation, r.protocolName, r.leaderID)
		}
		for mid, m := range g.members {
			rm := r.members[mid]
			if rm == nil || string(rm.assignment) != string(m.assignment) {
				t.Fatalf("group %s member %s differs on replay", id, mid)
			}
		}
		if len(r.members) != len(g.members) {
			t.Fatalf("group %s: %d members live, %d replayed", id, len(g.members), len(r.members))
		}
	}
}
