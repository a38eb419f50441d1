package group

import (
	"maps"
	"slices"
	"testing"

	"github.com/exactq/exactq/internal/group/consumer"
	"pgregory.net/rapid"
)

// TestConsumerGroupModel runs random histories of consumer-protocol clients against one
// shard: joins with random subscriptions, heartbeats that give up revoked partitions at
// once or hold them, leaves, silent stretches long enough to expire sessions, topics
// growing, and restarts (the shard rebuilt from its log). After every step: no
// partition is held by two members, no two live clients consume one partition, a
// client's epoch never goes back while it stays a member, and a replay of the log
// rebuilds exactly the live groups. At the end, heartbeats settle the group with every
// subscribed partition consumed once.
func TestConsumerGroupModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newCGHarness(t)
		names := []string{"t0", "t1", "t2"}
		for _, n := range names[:2] {
			h.addTopic(n, int32(rapid.IntRange(1, 5).Draw(t, "partitions")))
		}
		clients := map[string]*cgClient{}
		ids := []string{"a", "b", "c", "d"}
		inst := "static-1"
		steps := rapid.IntRange(1, 50).Draw(t, "steps")
		for range steps {
			id := rapid.SampledFrom(ids).Draw(t, "client")
			c := clients[id]
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case c == nil:
				var topics []string
				for _, n := range names {
					if rapid.Bool().Draw(t, "sub") {
						topics = append(topics, n)
					}
				}
				if len(topics) == 0 {
					// A member that subscribes to nothing joins without bumping the group
					// epoch and stays at epoch 0, as in Kafka; a static one is then refused
					// its next heartbeat (UNRELEASED_INSTANCE_ID), an edge no client takes.
					topics = names[2:]
				}
				c = h.client("g", id, topics...)
				if id == "d" {
					c.instanceID = &inst
				}
				clients[id] = c
				c.beat()
			case op == 0:
				epoch := int32(-1)
				if c.instanceID != nil && rapid.Bool().Draw(t, "temporary") {
					epoch = -2
				}
				c.leave(epoch)
				delete(clients, id)
			case op == 1:
				h.advance(int64(rapid.IntRange(1, 50).Draw(t, "seconds")) * 1000)
			case op == 2:
				n := rapid.SampledFrom(names).Draw(t, "grow")
				h.addTopic(n, h.topics[n].parts+1)
			case op == 3:
				h.restartShard()
			default:
				c.hold = rapid.Bool().Draw(t, "hold")
				before := c.epoch
				switch code := c.beat(); code {
				case 0:
					if c.epoch < before {
						t.Fatalf("%s: epoch went from %d to %d", id, before, c.epoch)
					}
				case errUnknownMemberID, errFencedMemberEpoch:
					// The client gives everything up and joins again (Kafka's clients).
					c.owned, c.epoch = consumer.Set{}, 0
				case errUnreleasedInstanceID:
				default:
					t.Fatalf("%s: heartbeat error %d", id, code)
				}
			}
			// A client whose member the coordinator dropped (its session expired) has
			// stopped consuming: it is fenced at its next heartbeat.
			g := h.s.consumers["g"]
			for _, cl := range clients {
				if g == nil || g.members[cl.id] == nil {
					cl.owned, cl.epoch = consumer.Set{}, 0
				}
			}
			checkServerDisjoint(t, h)
			checkDisjoint(t, slices.Collect(maps.Values(clients))...)
			h.checkReplay()
		}
		var live []*cgClient
		for _, id := range slices.Sorted(maps.Keys(clients)) {
			c := clients[id]
			c.hold = false
			live = append(live, c)
		}
		for range 3 { // joins refused for the static id settle on the next rounds
			for _, c := range live {
				if code := c.beat(); code != 0 && code != errUnreleasedInstanceID {
					c.owned, c.epoch = consumer.Set{}, 0
				}
			}
		}
		var members []*cgClient
		g := h.s.consumers["g"]
		for _, c := range live {
			if g != nil && g.members[c.id] != nil {
				members = append(members, c)
			}
		}
		if len(members) == 0 {
			return
		}
		settle(t, members...)
		checkDisjoint(t, members...)
		want := consumer.Set{}
		for _, m := range g.members {
			for _, n := range m.topicNames {
				if tp, ok := h.topics[n]; ok {
					for p := range tp.parts {
						want[consumer.TP{Topic: tp.id, Partition: p}] = struct{}{}
					}
				}
			}
		}
		got := consumer.Set{}
		for _, c := range members {
			maps.Copy(got, c.owned)
		}
		// A static member away at epoch -2 keeps its target without a client until its
		// session ends: nobody else may consume those partitions.
		// What it still holds stays unconsumed; what its target adds waits for it too.
		for id, m := range g.members {
			if m.Epoch == leaveGroupStaticMemberEpoch {
				for _, set := range []consumer.Epochs{m.Assigned, m.PendingRevocation} {
					for tp := range set {
						if _, dup := got[tp]; dup {
							t.Fatalf("%v consumed while held for the absent static member", tp)
						}
						got[tp] = struct{}{}
					}
				}
				maps.Copy(got, g.target[id])
			}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("consumed %v, subscribed %v", got.Sorted(), want.Sorted())
		}
		if st := g.state(); st != "Stable" && !hasAbsentStatic(g) {
			t.Fatalf("group %s after settling", st)
		}
	})
}

func checkServerDisjoint(t *rapid.T, h *cgHarness) {
	for _, g := range h.s.consumers {
		seen := map[consumer.TP]string{}
		for _, id := range sortedKeys(g.members) {
			m := g.members[id]
			for _, set := range []consumer.Epochs{m.Assigned, m.PendingRevocation} {
				for tp := range set {
					if o, dup := seen[tp]; dup {
						t.Fatalf("%v held by members %s and %s", tp, o, id)
					}
					seen[tp] = id
					if g.owner[tp] != id {
						t.Fatalf("%v held by %s, owner map says %q", tp, id, g.owner[tp])
					}
				}
			}
		}
		if len(seen) != len(g.owner) {
			t.Fatalf("owner map has %d partitions, members hold %d", len(g.owner), len(seen))
		}
	}
}

func hasAbsentStatic(g *consumerGroup) bool {
	for _, m := range g.members {
		if m.Epoch == leaveGroupStaticMemberEpoch {
			return true
		}
	}
	return false
}
