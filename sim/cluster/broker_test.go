package cluster

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The brokers' side of the controller protocol (docs/architecture.md, "Registration,
// heartbeats, fencing").
const (
	metadataVersion   = 27
	heartbeatInterval = 2 * time.Second // broker.heartbeat.interval.ms
	brokerPoll        = 100 * time.Millisecond
	requestTimeout    = 1500 * time.Millisecond
	retryBackoff      = 200 * time.Millisecond
)

func brokerID(index int) int32 { return int32(index + 1) }

// rpc is one controller request and, once answered, its response.
type rpc struct {
	id     uint64 // unique in the world
	broker int    // the sending broker's index (= its node's)
	to     int    // the node it was sent to
	bgen   int    // the broker process that sent it
	inc    [16]byte
	req    kmsg.Request
	resp   kmsg.Response
}

func (r *rpc) String() string {
	s := fmt.Sprintf("b%d#%d ", brokerID(r.broker), r.id)
	switch q := r.req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		s += fmt.Sprintf("Register(inc %x)", q.IncarnationID[:2])
	case *kmsg.BrokerHeartbeatRequest:
		s += fmt.Sprintf("Heartbeat(epoch %d offset %d shutdown %v)", q.BrokerEpoch, q.CurrentMetadataOffset, q.WantShutdown)
	case *kmsg.AllocateProducerIDsRequest:
		s += fmt.Sprintf("AllocateProducerIds(epoch %d)", q.BrokerEpoch)
	case *kmsg.UnregisterBrokerRequest:
		s += "UnregisterBroker"
	}
	switch p := r.resp.(type) {
	case nil:
	case *kmsg.BrokerRegistrationResponse:
		s += fmt.Sprintf(" -> %s epoch %d", codeName(p.ErrorCode), p.BrokerEpoch)
	case *kmsg.BrokerHeartbeatResponse:
		s += fmt.Sprintf(" -> %s fenced %v caughtUp %v shutdown %v", codeName(p.ErrorCode), p.IsFenced, p.IsCaughtUp, p.ShouldShutdown)
	case *kmsg.AllocateProducerIDsResponse:
		s += fmt.Sprintf(" -> %s [%d,+%d)", codeName(p.ErrorCode), p.ProducerIDStart, p.ProducerIDLen)
	case *kmsg.UnregisterBrokerResponse:
		s += " -> " + codeName(p.ErrorCode)
	}
	return s
}

func codeName(code int16) string {
	if code == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

// simBroker is the broker process of one combined node: it dies with its node and, after
// a controlled shutdown, restarts on its own. Each process start is a new incarnation
// with the node's directory id.
type simBroker struct {
	w       *world
	n       *simNode
	index   int
	id      int32
	alive   bool
	gen     int
	inc     [16]byte
	dir     [16]byte
	epoch   int64 // 0: not registered
	fenced  bool
	target  int
	out     *rpc
	outAt   time.Duration
	nextAt  time.Duration // the next request may go then (heartbeat or retry)
	closing bool          // a controlled shutdown is under way
	// stickUntil: after a failed request the broker tries a random node for a while
	// rather than the leader its own node believes in (which may be cut off).
	stickUntil time.Duration
}

func newBroker(w *world, n *simNode) *simBroker {
	b := &simBroker{w: w, n: n, index: n.index, id: n.id, target: w.rng.IntN(len(w.cut))}
	b.dir = w.randomID(0xd1)
	return b
}

// randomID is a seeded 16-byte id (incarnations, directories), never a reserved one.
func (w *world) randomID(tag byte) [16]byte {
	var id [16]byte
	for i := range id {
		id[i] = byte(w.rng.IntN(256))
	}
	id[0] = tag
	return id
}

func (b *simBroker) start() {
	b.gen++
	b.alive, b.inc, b.epoch, b.fenced, b.out, b.closing = true, b.w.randomID(0x1c), 0, true, nil, false
	b.nextAt = b.w.now
	b.w.tracef("b%d starts, incarnation %x", b.id, b.inc[:2])
	b.schedule(time.Duration(b.w.rng.Int64N(int64(brokerPoll))))
}

func (b *simBroker) die() {
	b.alive = false
	b.gen++
}

func (b *simBroker) schedule(after time.Duration) {
	b.w.schedule(&event{at: b.w.now + after, kind: evBroker, node: b.index, gen: b.gen})
}

func (b *simBroker) timer(gen int) {
	if gen != b.gen {
		return
	}
	if !b.alive {
		// A broker that shut down starts again (its node is still up).
		if b.n.up {
			b.start()
		}
		return
	}
	b.schedule(brokerPoll)
	if b.n.paused() {
		return
	}
	if b.out != nil {
		if b.w.now-b.outAt < requestTimeout {
			return
		}
		b.w.tracef("b%d: %s timed out", b.id, b.out)
		b.out = nil
		b.retarget(true)
	}
	switch {
	case b.epoch == 0:
		if b.w.now < b.nextAt {
			return
		}
		r := kmsg.NewPtrBrokerRegistrationRequest()
		r.Version = r.MaxVersion()
		r.BrokerID, r.ClusterID, r.IncarnationID = b.id, clusterID, b.inc
		r.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: fmt.Sprintf("node%d", b.id), Port: 9092}}
		r.Features = []kmsg.BrokerRegistrationRequestFeature{{Name: "metadata.version", MinSupportedVersion: 7, MaxSupportedVersion: metadataVersion}}
		r.LogDirs = [][16]byte{b.dir}
		b.call(r)
	case b.w.now >= b.nextAt:
		// Every interval; a fenced broker sooner, to be unfenced once caught up.
		r := kmsg.NewPtrBrokerHeartbeatRequest()
		r.Version = r.MaxVersion()
		r.BrokerID, r.BrokerEpoch = b.id, b.epoch
		r.CurrentMetadataOffset = int64(b.n.loop.Current().Index)
		r.WantShutdown = b.closing
		b.call(r)
	case !b.fenced && !b.closing && b.w.rng.IntN(100) < 4:
		r := kmsg.NewPtrAllocateProducerIDsRequest()
		r.Version = r.MaxVersion()
		r.BrokerID, r.BrokerEpoch = b.id, b.epoch
		b.call(r)
	case !b.closing && b.w.now < b.w.chaosUntil && b.w.rng.IntN(1000) < 3:
		b.w.tracef("b%d begins a controlled shutdown", b.id)
		b.closing, b.nextAt = true, b.w.now
	case !b.closing && b.w.now < b.w.chaosUntil && b.w.rng.IntN(2000) < 1:
		// An operator removes the broker (kafka-cluster unregister) while it runs: its
		// next heartbeat is STALE_BROKER_EPOCH and it registers again.
		r := kmsg.NewPtrUnregisterBrokerRequest()
		r.Version = r.MaxVersion()
		r.BrokerID = b.id
		b.call(r)
	}
}

func (b *simBroker) call(req kmsg.Request) {
	b.retarget(false)
	b.w.seq++
	r := &rpc{id: b.w.seq, broker: b.index, to: b.target, bgen: b.gen, inc: b.inc, req: req}
	b.out, b.outAt = r, b.w.now
	b.w.tracef("b%d -> n%d %s", b.id, b.target+1, r)
	b.w.send(&event{kind: evRequest, rpc: r, ln: laneRPC}, b.index, b.target, r.String())
}

// retarget picks the controller to send to: the raft leader its own node knows of,
// unless that just failed; after a timeout (the leader may be cut off from this broker)
// a random node for a while.
func (b *simBroker) retarget(timedOut bool) {
	lead := int(b.n.loop.RaftStatus().Lead) - 2
	switch {
	case timedOut:
		b.target, b.stickUntil = b.w.rng.IntN(len(b.w.nodes)), b.w.now+2*time.Second
	case lead >= 0 && b.w.now >= b.stickUntil:
		b.target = lead
	}
}

// answer is a controller's response arriving.
func (b *simBroker) answer(r *rpc) {
	if !b.alive || r.bgen != b.gen || b.out == nil || b.out.id != r.id {
		return // for a process that is gone, or a request given up on
	}
	b.out = nil
	b.w.tracef("b%d <- %s", b.id, r)
	var code int16
	switch p := r.resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		if code = p.ErrorCode; code == 0 {
			b.epoch, b.fenced = p.BrokerEpoch, true
			b.nextAt = b.w.now
			return
		}
	case *kmsg.BrokerHeartbeatResponse:
		if code = p.ErrorCode; code == 0 {
			b.fenced = p.IsFenced
			if p.ShouldShutdown {
				b.w.tracef("b%d shuts down", b.id)
				b.die()
				b.schedule(time.Duration(500+b.w.rng.IntN(3000)) * time.Millisecond)
				return
			}
			b.nextAt = b.w.now + heartbeatInterval
			if p.IsFenced {
				b.nextAt = b.w.now + brokerPoll
			}
			return
		}
	case *kmsg.AllocateProducerIDsResponse:
		if code = p.ErrorCode; code == 0 {
			return
		}
	case *kmsg.UnregisterBrokerResponse:
		if code = p.ErrorCode; code == 0 {
			b.w.stats["unregistered"]++
			return
		}
	}
	b.w.stats["answer."+codeName(code)]++
	switch code {
	case kerr.StaleBrokerEpoch.Code:
		b.epoch = 0 // register again
	case kerr.NotController.Code, kerr.RequestTimedOut.Code:
		b.stickUntil = 0
		if lead := int(b.n.loop.RaftStatus().Lead) - 2; lead < 0 || lead == r.to {
			b.target = b.w.rng.IntN(len(b.w.nodes))
		}
	case kerr.UnknownServerError.Code:
		b.w.failf("b%d: %s", b.id, r)
	}
	// DUPLICATE_BROKER_REGISTRATION (the old incarnation's session is live) and
	// INCONSISTENT_CLUSTER_ID (the bootstrap records are not applied yet) clear up with time.
	b.nextAt = b.w.now + retryBackoff
}
