package cluster

import (
	"errors"
	"fmt"

	"github.com/exactq/exactq/internal/cluster/controller"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxQueued bounds the requests a controller holds while it cannot decide (a barrier in
// flight, no latest image yet); beyond it a request is answered REQUEST_TIMED_OUT, as the
// Driver's full queue is.
const maxQueued = 1024

// simController is controller.Driver's bookkeeping done synchronously on the
// simulation's goroutine (the Driver runs its own goroutines, which the simulation cannot
// step): the term's Core, the latest image (committed plus the batches decided and not yet
// applied, applied speculatively), the batches in decision order, one proposed at a time
// as the Driver's proposer does, each checked against the image it will follow as
// node.Node.Propose checks it. Requests are answered once their batch is applied; a term
// change or a failed batch answers every waiter NOT_CONTROLLER (or the batch's error).
type simController struct {
	n        *simNode
	term     uint64
	core     *controller.Core
	latest   *metadata.Image
	inflight []*batch // decided, not finished; inflight[0] is the one proposed, if any
	barrier  bool
	gen      uint64 // the speculative chain: a reset bumps it and later batches are skipped
	queue    []*rpc
	// proposing is the answer channel of inflight[0]'s proposal, nil when none is out.
	proposing <-chan quorum.Proposed
	data      []byte // what was proposed for inflight[0]
}

type batch struct {
	gen, term uint64
	records   []wire.MetadataRecord
	barrier   bool
	what      string
	waiters   []waiter
}

type waiter struct {
	r     *rpc
	reply func(index uint64) kmsg.Response
	own   bool
}

func newController(n *simNode) *simController { return &simController{n: n} }

// handle is a request arriving from a broker.
func (c *simController) handle(r *rpc) {
	c.follow()
	if c.term == 0 {
		c.answer(r, controller.ErrorResponse(r.req, kerr.NotController, "not the controller"))
		return
	}
	if len(c.queue) >= maxQueued {
		c.answer(r, controller.ErrorResponse(r.req, kerr.RequestTimedOut, "the controller's queue is full"))
		return
	}
	c.queue = append(c.queue, r)
}

func (c *simController) answer(r *rpc, resp kmsg.Response) {
	r.resp = resp
	c.n.w.tracef("n%d answers %s", c.n.id, r)
	c.n.w.chk.answered(c.n.w, r)
	from := c.n.index
	c.n.w.send(&event{kind: evReply, rpc: r, ln: laneRPC}, from, r.broker, "answer "+r.String())
}

// follow keeps the controller's term the loop's (Driver.follow).
func (c *simController) follow() {
	term, ok := c.n.loop.Serving()
	if c.term != 0 && (!ok || term != c.term) {
		c.reset(kerr.NotController, "the controller's term ended")
		c.term, c.core = 0, nil
		for _, r := range c.queue {
			c.answer(r, controller.ErrorResponse(r.req, kerr.NotController, "the controller's term ended"))
		}
		c.queue = nil
	}
	if c.term == 0 && ok && len(c.inflight) == 0 {
		c.term, c.core = term, controller.New(controller.Config{})
		c.n.w.tracef("n%d controller serves term %d", c.n.id, term)
		c.n.w.chk.serving(c.n.w, c.n, term)
	}
	if c.term != 0 && c.latest == nil && len(c.inflight) == 0 {
		a := c.n.loop.Current()
		c.latest = a.State.(*metadata.Image)
	}
}

func (c *simController) deciding() bool {
	return c.term != 0 && c.latest != nil && !c.barrier
}

func (c *simController) reset(code *kerr.Error, msg string) {
	c.gen++
	for _, b := range c.inflight {
		b.fail(c, code, msg)
	}
	c.latest, c.barrier = nil, false
}

func (b *batch) fail(c *simController, code *kerr.Error, msg string) {
	for _, w := range b.waiters {
		c.answer(w.r, controller.ErrorResponse(w.r.req, code, msg))
	}
	b.waiters = nil
}

// tick is the controller's timer (the Driver ticks every 100 ms, with raft). A new
// cluster's first controller also writes the bootstrap records, as a node's start-up does.
func (c *simController) tick() {
	c.follow()
	if !c.deciding() {
		return
	}
	if c.latest.Cluster.ID == "" {
		c.propose(bootstrapRecords(len(c.n.w.nodes)), "bootstrap")
		return
	}
	r, err := c.core.Tick(c.latest, c.n.now())
	if err != nil {
		c.n.w.failf("n%d: controller tick: %v", c.n.id, err)
		return
	}
	if len(r.Records) > 0 {
		c.send(r, "tick")
	}
}

// propose decides a batch of the world's own (bootstrap) on latest.
func (c *simController) propose(recs []wire.MetadataRecord, what string) {
	next, _, err := metadata.ApplyEntry(c.latest, 0, recs)
	if err != nil {
		c.n.w.failf("n%d: %s records do not apply: %v", c.n.id, what, err)
		return
	}
	c.send(controller.Result{Records: recs, Next: next}, what)
}

func (c *simController) decide(r *rpc) {
	res, err := c.core.Handle(c.latest, c.n.now(), r.req)
	if err != nil {
		c.answer(r, controller.ErrorResponse(r.req, kerr.UnknownServerError, err.Error()))
		return
	}
	switch {
	case res.Immediate:
		c.answer(r, res.Reply(0))
	case len(res.Records) == 0:
		if n := len(c.inflight); n > 0 {
			c.inflight[n-1].waiters = append(c.inflight[n-1].waiters, waiter{r: r, reply: res.Reply})
		} else {
			c.answer(r, res.Reply(0))
		}
	default:
		c.send(res, r.String(), waiter{r: r, reply: res.Reply, own: true})
	}
}

func (c *simController) send(res controller.Result, what string, ws ...waiter) {
	b := &batch{gen: c.gen, term: c.term, records: res.Records, barrier: res.Barrier, what: what, waiters: ws}
	c.inflight = append(c.inflight, b)
	if res.Barrier {
		c.barrier = true
	} else {
		c.latest = res.Next
	}
}

// pump moves the controller as far as it can without new input: finishes the proposed
// batch once answered, proposes the next, decides queued requests. It reports whether
// it queued anything on the loop (then the loop must be polled again).
func (c *simController) pump() bool {
	queued := false
	for {
		moved := false
		if c.proposing != nil {
			select {
			case p := <-c.proposing:
				c.proposing = nil
				c.finish(p.Index, p.Err)
				moved = true
			default:
			}
		}
		if c.proposing == nil && len(c.inflight) > 0 {
			if c.proposeNext() {
				queued = true
			}
			moved = true
		}
		c.follow()
		for c.deciding() && len(c.queue) > 0 {
			r := c.queue[0]
			c.queue = c.queue[1:]
			c.decide(r)
			moved = true
		}
		if !moved {
			return queued
		}
	}
}

// proposeNext proposes inflight[0] (the Driver's proposer), or finishes it at once when
// its chain or term is gone or it would not apply. It reports whether a proposal went to
// the loop.
func (c *simController) proposeNext() bool {
	b := c.inflight[0]
	term, ok := c.n.loop.Serving()
	switch {
	case b.gen != c.gen:
		c.finish(0, errSkipped)
		return false
	case !ok || term != b.term:
		c.finish(0, quorum.ErrNotController)
		return false
	}
	a := c.n.loop.Current()
	if _, _, err := metadata.ApplyEntry(a.State.(*metadata.Image), a.Index+1, b.records); err != nil {
		c.finish(0, err)
		return false
	}
	data, err := metadata.EncodeEntry(c.n.now().UnixMilli(), b.records)
	if err != nil {
		c.finish(0, err)
		return false
	}
	ch, err := c.n.loop.ProposeAsync(data)
	if err != nil {
		c.finish(0, err)
		return false
	}
	c.n.w.tracef("n%d proposes %s (%d records, term %d)", c.n.id, b.what, len(b.records), b.term)
	c.proposing, c.data = ch, data
	return true
}

var errSkipped = errors.New("batch of a reset chain not proposed")

// finish is inflight[0] back from the loop (Driver.finish).
func (c *simController) finish(index uint64, err error) {
	b := c.inflight[0]
	c.inflight = c.inflight[1:]
	if err == nil {
		c.n.w.tracef("n%d applied %s at %d", c.n.id, b.what, index)
		c.n.w.chk.committed(c.n.w, c.n, index, c.data)
	} else if !errors.Is(err, errSkipped) {
		c.n.w.tracef("n%d %s failed: %v", c.n.id, b.what, err)
	}
	c.data = nil
	if b.gen != c.gen {
		return
	}
	if err != nil {
		code := kerr.UnknownServerError
		if errors.Is(err, quorum.ErrNotController) || errors.Is(err, quorum.ErrStopped) {
			code = kerr.NotController
		} else {
			c.n.w.failf("n%d: controller batch %s failed: %v", c.n.id, b.what, err)
		}
		b.fail(c, code, err.Error())
		c.reset(code, "an earlier batch failed: "+err.Error())
		return
	}
	for _, w := range b.waiters {
		if w.own {
			c.answer(w.r, w.reply(index))
		} else {
			c.answer(w.r, w.reply(0))
		}
	}
	if b.barrier {
		c.barrier, c.latest = false, nil
	}
}

// clusterID is the simulated cluster's id.
const clusterID = "sim-cluster"

// bootstrapRecords are a new cluster's first records: its id, metadata.version, and a
// topic per broker of two partitions that broker alone holds (part 1: replication factor
// 1), leaderless until it is unfenced.
func bootstrapRecords(brokers int) []wire.MetadataRecord {
	recs := []wire.MetadataRecord{
		&wire.ClusterRecord{ClusterID: clusterID, CreatedMillis: startClockMs},
		&wire.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: metadataVersion},
	}
	for b := range brokers {
		id := brokerID(b)
		name := fmt.Sprintf("t%d", id)
		var tid metadata.TopicID
		copy(tid[:], name)
		tid[15] = 1
		recs = append(recs, &wire.TopicRecord{Name: name, TopicID: tid})
		for p := range int32(2) {
			recs = append(recs, &wire.PartitionRecord{PartitionID: p, TopicID: tid, Replicas: []int32{id}, ISR: []int32{id}, Leader: -1})
		}
	}
	for _, r := range recs {
		r.SetVersion(r.MaxVersion())
	}
	return recs
}
