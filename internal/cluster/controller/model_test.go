package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

const modelBrokers = 4

// TestCoreModel drives the Core with random requests, ticks, clock moves and term
// changes, its batches applied to a real metadata log (some left in flight on latest,
// some lost with their term), and checks after every step:
//
//   - every batch the Core emits applies (ApplyEntry) to latest, and the log replays
//     what latest predicted;
//   - a broker's epoch only grows, across re-registration and unregistration;
//   - a fenced or unregistered broker leads nothing, and an unfenced broker leads every
//     partition whose only replica it is;
//   - producer-id blocks never overlap;
//   - a tick fences only a broker silent for longer than the session timeout (counted
//     from its last heartbeat or its session's start in this term), and a tick that
//     fences nobody leaves no such broker unfenced;
//   - a new incarnation is refused (DUPLICATE_BROKER_REGISTRATION) exactly when the
//     registered one heartbeated to this term's controller within two intervals;
//   - a fenced broker is unfenced exactly by a caught-up heartbeat that wants neither
//     fencing nor shutdown;
//   - admin requests (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
//     auto-created and internal topics, some cut into several batches, some held in
//     flight): a topic id is never drawn twice, a topic's partition count only grows, an
//     answered creation is in the image with the answered id, and new partitions go to
//     unfenced brokers (or to this node, modelNode, while there is none).
func TestCoreModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var m *model
		fresh := byte(100)
		cfg := Config{NodeID: modelNode, maxBatchBytes: rapid.SampledFrom([]int{300, 2000, 0}).Draw(rt, "batch bytes"),
			PlacementStart: func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "start") },
			// A small space, so drawn ids collide with live (or in-flight) topics and with
			// each other; an id a batch used before and that is gone now is never drawn, so
			// a topic id seen twice is the Core's reuse.
			NewTopicID: func() metadata.TopicID {
				id := metadata.TopicID{0: 0xfe, 15: rapid.ByteRange(1, 16).Draw(rt, "id")}
				if _, used := m.topicIDs[id]; used && m.l.latest.TopicsByID[id] == nil {
					fresh++
					id = metadata.TopicID{0: 0xfe, 14: 1, 15: fresh}
				}
				return id
			},
		}.withDefaults()
		var setup []wire.MetadataRecord
		setup = append(setup, topic("a", []int32{0}, []int32{1}, []int32{2}, []int32{3})...)
		setup = append(setup, topic("b", []int32{1}, []int32{1, 2}, []int32{0})...)
		l := newLog(rt, setup...)
		m = &model{t: rt, cfg: cfg, l: l, core: New(cfg), now: t0, maxEpoch: map[int32]int64{},
			topicIDs: map[metadata.TopicID]string{}, partitions: map[metadata.TopicID]int{}}
		m.newTerm()
		rt.Repeat(map[string]func(*rapid.T){
			"register": func(t *rapid.T) {
				b := rapid.Int32Range(0, modelBrokers-1).Draw(t, "broker")
				req := registration(b, rapid.ByteRange(0, 2).Draw(t, "incarnation"))
				req.Listeners[0].Port += uint16(rapid.IntRange(0, 1).Draw(t, "port"))
				req.LogDirs[0] = dir(b, rapid.ByteRange(0, 1).Draw(t, "disk"))
				m.register(req)
			},
			"join": func(t *rapid.T) { // a registration and its first caught-up heartbeat
				b := rapid.Int32Range(0, modelBrokers-1).Draw(t, "broker")
				m.register(registration(b, rapid.ByteRange(0, 2).Draw(t, "incarnation")))
				if br := m.l.latest.Brokers[b]; br != nil {
					m.heartbeat(heartbeat(b, br.Epoch, m.l.index), false)
				}
			},
			"heartbeat": func(t *rapid.T) {
				b := rapid.Int32Range(0, modelBrokers-1).Draw(t, "broker")
				stale := rapid.IntRange(0, 5).Draw(t, "stale") == 0
				behind := rapid.Bool().Draw(t, "behind")
				hb := heartbeat(b, 0, m.l.index)
				if br := m.l.latest.Brokers[b]; br != nil {
					hb.BrokerEpoch = br.Epoch
				}
				if stale {
					hb.BrokerEpoch--
				}
				if behind && hb.BrokerEpoch > 0 {
					hb.CurrentMetadataOffset = hb.BrokerEpoch - 1
				}
				hb.WantFence = rapid.IntRange(0, 5).Draw(t, "wantFence") == 0
				hb.WantShutdown = rapid.IntRange(0, 7).Draw(t, "wantShutdown") == 0
				m.heartbeat(hb, rapid.Bool().Draw(t, "hold"))
			},
			"allocate": func(t *rapid.T) {
				b := rapid.Int32Range(0, modelBrokers-1).Draw(t, "broker")
				req := kmsg.NewPtrAllocateProducerIDsRequest()
				req.BrokerID = b
				if br := m.l.latest.Brokers[b]; br != nil && rapid.IntRange(0, 5).Draw(t, "stale") != 0 {
					req.BrokerEpoch = br.Epoch
				}
				m.allocate(req, rapid.Bool().Draw(t, "hold"))
			},
			"unregister": func(t *rapid.T) {
				if rapid.IntRange(0, 3).Draw(t, "rarely") != 0 {
					return
				}
				req := kmsg.NewPtrUnregisterBrokerRequest()
				req.BrokerID = rapid.Int32Range(0, modelBrokers-1).Draw(t, "broker")
				m.unregister(req)
			},
			"tick": func(t *rapid.T) { m.tick() },
			"advance": func(t *rapid.T) {
				m.now = m.now.Add(time.Duration(rapid.Int64Range(1, 6000).Draw(t, "ms")) * time.Millisecond)
			},
			"flush":        func(t *rapid.T) { m.l.flush(); m.check() },
			"createTopics": func(t *rapid.T) { m.createTopics(t) },
			"deleteTopics": func(t *rapid.T) { m.deleteTopics(t) },
			"grow":         func(t *rapid.T) { m.grow(t) },
			"alterConfigs": func(t *rapid.T) { m.alterConfigs(t) },
			"autoCreate": func(t *rapid.T) {
				m.internal(t, &AutoCreateTopicRequest{Name: rapid.SampledFrom(modelTopics).Draw(t, "topic")})
			},
			"internalTopic": func(t *rapid.T) {
				m.internal(t, &CreateInternalTopicRequest{Name: "__consumer_offsets", Partitions: int32(rapid.IntRange(1, 3).Draw(t, "partitions"))})
			},
			"newTerm": func(t *rapid.T) {
				if rapid.Bool().Draw(t, "lose in-flight") {
					m.l.drop()
				} else {
					m.l.flush()
				}
				m.newTerm()
			},
		})
		m.l.flush()
		m.check()
	})
}

// model is what the test knows independently of the Core: when each broker last
// heartbeated in this term and when its session started.
type model struct {
	t        *rapid.T
	cfg      Config
	l        *log
	core     *Core
	now      time.Time
	ticked   bool
	contact  map[int32]time.Time // per broker, for its current epoch: last heartbeat or session start
	heard    map[int32]time.Time // per broker, for its current epoch: last heartbeat in this term
	epochOf  map[int32]int64     // the epoch contact and heard are for
	blocks   [][2]int64
	maxEpoch map[int32]int64
	// topicIDs are every topic id a batch has created, with its name; partitions the
	// highest partition count seen for each.
	topicIDs   map[metadata.TopicID]string
	partitions map[metadata.TopicID]int
}

func (m *model) newTerm() {
	m.core = New(m.cfg)
	m.ticked = false
	m.contact, m.heard, m.epochOf = map[int32]time.Time{}, map[int32]time.Time{}, map[int32]int64{}
}

// forget drops what the model knows of b when its epoch changed.
func (m *model) sync(b int32) {
	br := m.l.latest.Brokers[b]
	if br == nil || br.Epoch != m.epochOf[b] {
		delete(m.contact, b)
		delete(m.heard, b)
		if br != nil {
			m.epochOf[b] = br.Epoch
		}
	}
}

func (m *model) handle(req kmsg.Request, hold bool) kmsg.Response {
	r, err := m.core.Handle(m.l.latest, m.now, req)
	if err != nil {
		m.t.Fatal(err)
	}
	var resp kmsg.Response
	m.l.run(r, hold, func(x kmsg.Response) { resp = x })
	if resp == nil {
		// Held in flight: the answer comes with the flush.
		return nil
	}
	return resp
}

func (m *model) register(req *kmsg.BrokerRegistrationRequest) {
	b := req.BrokerID
	old := m.l.latest.Brokers[b]
	m.sync(b)
	h, heard := m.heard[b]
	live := old != nil && old.IncarnationID != req.IncarnationID && heard && m.now.Sub(h) <= 2*m.cfg.HeartbeatInterval
	resp := m.handle(req, false).(*kmsg.BrokerRegistrationResponse)
	switch {
	case live:
		wantCodeRapid(m.t, "registration over a live incarnation", resp, kerr.DuplicateBrokerRegistration)
	default:
		wantCodeRapid(m.t, "registration", resp, nil)
		br := m.l.committed.Brokers[b]
		if br == nil || br.Epoch != resp.BrokerEpoch || br.IncarnationID != req.IncarnationID {
			m.t.Fatalf("registered broker %d: %+v, answered epoch %d", b, br, resp.BrokerEpoch)
		}
		if old == nil || old.IncarnationID != req.IncarnationID {
			if !br.Fenced {
				m.t.Fatalf("a new incarnation of %d registered unfenced", b)
			}
		}
	}
	m.sync(b)
	m.check()
}

func (m *model) heartbeat(req *kmsg.BrokerHeartbeatRequest, hold bool) {
	br := m.l.latest.Brokers[req.BrokerID]
	m.sync(req.BrokerID)
	wasFenced := br != nil && br.Fenced
	r, err := m.core.Handle(m.l.latest, m.now, req)
	if err != nil {
		m.t.Fatal(err)
	}
	valid := br != nil && br.Epoch == req.BrokerEpoch
	if !valid {
		if !r.Immediate {
			m.t.Fatalf("heartbeat of broker %d at epoch %d accepted (registered %+v)", req.BrokerID, req.BrokerEpoch, br)
		}
		wantCodeRapid(m.t, "stale heartbeat", r.Reply(0), kerr.StaleBrokerEpoch)
		return
	}
	m.heard[req.BrokerID], m.contact[req.BrokerID] = m.now, m.now
	caughtUp := req.CurrentMetadataOffset >= br.Epoch
	wantUnfence := wasFenced && !req.WantFence && !req.WantShutdown && caughtUp
	wantFence := !wasFenced && (req.WantFence || req.WantShutdown)
	m.l.run(r, hold, func(x kmsg.Response) {
		resp := x.(*kmsg.BrokerHeartbeatResponse)
		wantCodeRapid(m.t, "heartbeat", resp, nil)
		if resp.IsCaughtUp != caughtUp {
			m.t.Fatalf("heartbeat at %d for epoch %d: caught up %v", req.CurrentMetadataOffset, br.Epoch, resp.IsCaughtUp)
		}
		fenced := wasFenced && !wantUnfence || wantFence
		if resp.IsFenced != fenced || resp.ShouldShutdown != req.WantShutdown {
			m.t.Fatalf("heartbeat %+v on fenced=%v: answered %+v", req, wasFenced, resp)
		}
	})
	if after := m.l.latest.Brokers[req.BrokerID]; after.Fenced != (wasFenced && !wantUnfence || wantFence) {
		m.t.Fatalf("heartbeat %+v on fenced=%v left fenced=%v", req, wasFenced, after.Fenced)
	}
	m.check()
}

func (m *model) allocate(req *kmsg.AllocateProducerIDsRequest, hold bool) {
	br := m.l.latest.Brokers[req.BrokerID]
	r, err := m.core.Handle(m.l.latest, m.now, req)
	if err != nil {
		m.t.Fatal(err)
	}
	if br == nil || br.Epoch != req.BrokerEpoch {
		wantCodeRapid(m.t, "stale allocation", r.Reply(0), kerr.StaleBrokerEpoch)
		return
	}
	m.l.run(r, hold, func(x kmsg.Response) {
		resp := x.(*kmsg.AllocateProducerIDsResponse)
		wantCodeRapid(m.t, "allocation", resp, nil)
		blk := [2]int64{resp.ProducerIDStart, resp.ProducerIDStart + int64(resp.ProducerIDLen)}
		for _, o := range m.blocks {
			if blk[0] < o[1] && o[0] < blk[1] {
				m.t.Fatalf("block %v overlaps %v", blk, o)
			}
		}
		if blk[0] < 0 || resp.ProducerIDLen != ProducerIDBlockSize || m.l.committed.ProducerIDs.Next < blk[1] {
			m.t.Fatalf("block %v, next id %d", blk, m.l.committed.ProducerIDs.Next)
		}
		m.blocks = append(m.blocks, blk)
	})
	m.check()
}

func (m *model) unregister(req *kmsg.UnregisterBrokerRequest) {
	br := m.l.latest.Brokers[req.BrokerID]
	resp := m.handle(req, false)
	if br == nil {
		wantCodeRapid(m.t, "unregister unknown", resp, kerr.BrokerIDNotRegistered)
		return
	}
	wantCodeRapid(m.t, "unregister", resp, nil)
	if m.l.committed.Brokers[req.BrokerID] != nil {
		m.t.Fatalf("broker %d still registered", req.BrokerID)
	}
	m.sync(req.BrokerID)
	m.check()
}

func (m *model) tick() {
	for b := range int32(modelBrokers) {
		m.sync(b)
		if br := m.l.latest.Brokers[b]; br != nil && !br.Fenced {
			if _, ok := m.contact[b]; !ok {
				m.contact[b] = m.now // the session starts at this tick
			}
		}
	}
	expired := func(im *metadata.Image) []int32 {
		var out []int32
		for b := range int32(modelBrokers) {
			if br := im.Brokers[b]; br != nil && !br.Fenced && m.now.Sub(m.contact[b]) > m.cfg.SessionTimeout {
				out = append(out, b)
			}
		}
		return out
	}
	before := m.l.latest
	r := m.l.tick(m.core, m.now)
	m.l.run(r, false, nil)
	after := m.l.latest
	for b := range int32(modelBrokers) {
		if was, is := before.Brokers[b], after.Brokers[b]; was != nil && is != nil && !was.Fenced && is.Fenced {
			if !slices.Contains(expired(before), b) {
				m.t.Fatalf("broker %d fenced at %v, last contact %v", b, m.now, m.contact[b])
			}
		}
	}
	if len(r.Records) == 0 && len(expired(after)) > 0 {
		m.t.Fatalf("brokers %v silent past the session and not fenced", expired(after))
	}
	m.check()
}

// check is the invariants over latest and committed.
func (m *model) check() {
	for _, im := range []*metadata.Image{m.l.latest, m.l.committed} {
		for _, t := range im.TopicsByID {
			for i, p := range t.Partitions {
				if p.Leader >= 0 && p.Leader != modelNode {
					if br := im.Brokers[p.Leader]; br == nil || br.Fenced {
						m.t.Fatalf("%s-%d led by %d, which is %+v", t.Name, i, p.Leader, br)
					}
				}
				if len(p.Replicas) == 1 && p.Leader == -1 && p.Replicas[0] != modelNode {
					if br := im.Brokers[p.Replicas[0]]; br != nil && !br.Fenced {
						m.t.Fatalf("%s-%d leaderless while its replica %d is unfenced", t.Name, i, br.ID)
					}
				}
			}
		}
	}
	for id, t := range m.l.committed.TopicsByID {
		if n := len(t.Partitions); n < m.partitions[id] {
			m.t.Fatalf("%s went from %d partitions to %d", t.Name, m.partitions[id], n)
		}
		m.partitions[id] = len(t.Partitions)
	}
	for id, br := range m.l.committed.Brokers {
		if br.Epoch < m.maxEpoch[id] {
			m.t.Fatalf("broker %d epoch went back from %d to %d", id, m.maxEpoch[id], br.Epoch)
		}
		m.maxEpoch[id] = br.Epoch
	}
}

func wantCodeRapid(t *rapid.T, what string, resp kmsg.Response, want *kerr.Error) {
	got := errCode(resp)
	if (want == nil && got != 0) || (want != nil && got != want.Code) {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}
