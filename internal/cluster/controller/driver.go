package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Quorum is the metadata quorum as the controller drives it; internal/cluster/node's
// Node implements it.
type Quorum interface {
	// Propose appends records as one raft entry and returns its index once it is applied
	// on this node; quorum.ErrNotController if this node is not the serving leader or
	// stops being it first, an error wrapping metadata.ErrRefused if the batch does not
	// apply to the image it would follow.
	Propose(ctx context.Context, records []wire.MetadataRecord) (uint64, error)
	// Image is the newest applied image and its raft index.
	Image() (*metadata.Image, uint64)
	// Serving is the term in which this node is the controller: the raft leader whose
	// term's first entry is applied, so Image holds every entry of earlier terms.
	Serving() (term uint64, ok bool)
}

// Options configure a Driver. Zero values take the defaults.
type Options struct {
	Config
	Quorum Quorum
	// TickInterval is how often the controller's timers run; 0 = 100 ms (the quorum's
	// tick), negative = never by itself (tests call Tick).
	TickInterval time.Duration
	// QueueSize bounds the requests waiting to be decided; 0 = 1,024. A request that
	// finds it full is answered REQUEST_TIMED_OUT at once (retriable).
	QueueSize int
	// MaxInFlight bounds the batches decided and not yet applied; 0 = 256. While it is
	// reached, requests wait in the queue.
	MaxInFlight int
	Now         func() time.Time // nil = time.Now
	Logger      *slog.Logger     // nil = slog.Default()
}

// Driver runs the controller on one goroutine (Run): it owns the term's Core and the
// latest image (the committed image plus the batches it proposed that are not applied
// yet, applied speculatively), hands each batch to a proposer goroutine that proposes
// them in order, and answers each request once its batch is applied. When the term
// changes or a batch fails, every waiting request is answered NOT_CONTROLLER (or the
// batch's error) and latest is reset to the committed image once nothing is in flight.
type Driver struct {
	opts    Options
	calls   chan *call
	ticks   chan struct{}
	batches chan *batch   // to the proposer, in decision order
	results chan *batch   // from the proposer, in the same order
	done    chan struct{} // closed when Run has returned
	// gen is the speculative chain the proposer may propose from: a reset bumps it, and
	// the proposer skips every batch of an older one (they were decided on a latest that
	// is gone).
	gen atomic.Uint64

	// Owned by the Run goroutine.
	term     uint64 // the term served, 0 when not serving
	core     *Core
	latest   *metadata.Image // nil until refreshed from the committed image
	inflight []*batch        // decided, not returned by the proposer yet, in order
	sent     int             // how many of inflight were handed to the proposer
	barrier  bool            // a registration is in flight: decide nothing until it is applied
}

type call struct {
	req      any // a kmsg.Request or one of this package's internal requests
	clientID string
	reply    chan kmsg.Response // buffered 1: the answer is never waited for by Run
}

type batch struct {
	gen, term uint64
	records   []wire.MetadataRecord
	barrier   bool
	waiters   []waiter // answered once the batch is applied (or failed)
	index     uint64   // set by the proposer
	err       error    // set by the proposer
}

type waiter struct {
	c     *call
	reply func(index uint64) kmsg.Response
	own   bool // the batch is this request's own (its index matters), not one it waits behind
}

var errSkipped = errors.New("controller: batch of a reset chain not proposed")

// NewDriver returns a driver over opts.Quorum; Run starts it.
func NewDriver(opts Options) *Driver {
	if opts.TickInterval == 0 {
		opts.TickInterval = 100 * time.Millisecond
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1024
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 256
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Driver{opts: opts, calls: make(chan *call, opts.QueueSize), ticks: make(chan struct{}, 1),
		batches: make(chan *batch, opts.MaxInFlight), results: make(chan *batch, opts.MaxInFlight), done: make(chan struct{})}
}

// Handle answers a controller request: BrokerRegistration, BrokerHeartbeat,
// UnregisterBroker, AllocateProducerIds, CreateTopics, DeleteTopics, CreatePartitions,
// AlterConfigs, IncrementalAlterConfigs, UpdateFeatures, CreateAcls, DeleteAcls,
// AlterUserScramCredentials (the shape of a server handler
// and of peer.Local's). Any other request is an error; so is ctx ending first. A node that
// is not the controller answers NOT_CONTROLLER in the request's response (in every topic
// or resource of an admin request), which clients retry. The client id CreateTopics names
// in one refusal comes from ctx (WithClientID). req is only read.
func (d *Driver) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch req.(type) {
	case *kmsg.BrokerRegistrationRequest, *kmsg.BrokerHeartbeatRequest, *kmsg.UnregisterBrokerRequest, *kmsg.AllocateProducerIDsRequest,
		*kmsg.CreateTopicsRequest, *kmsg.DeleteTopicsRequest, *kmsg.CreatePartitionsRequest, *kmsg.AlterConfigsRequest,
		*kmsg.IncrementalAlterConfigsRequest, *kmsg.UpdateFeaturesRequest,
		*kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.AlterUserSCRAMCredentialsRequest:
	default:
		return nil, fmt.Errorf("controller: %T is not a controller request", req)
	}
	return d.ask(ctx, req)
}

// AutoCreateTopic creates the topic a client named in Metadata, with the defaults
// (AutoCreateTopicRequest), and returns its answer: error NONE and the topic id once it
// exists and that is applied, or the client's error code and the reason. The error is
// ctx's.
func (d *Driver) AutoCreateTopic(ctx context.Context, name string) (kmsg.CreateTopicsResponseTopic, error) {
	return d.askTopic(ctx, &AutoCreateTopicRequest{Name: name})
}

// CreateInternalTopic creates a coordinator's internal topic unless it exists
// (CreateInternalTopicRequest); answered as AutoCreateTopic. req is only read.
func (d *Driver) CreateInternalTopic(ctx context.Context, req CreateInternalTopicRequest) (kmsg.CreateTopicsResponseTopic, error) {
	return d.askTopic(ctx, &req)
}

func (d *Driver) askTopic(ctx context.Context, req any) (kmsg.CreateTopicsResponseTopic, error) {
	resp, err := d.ask(ctx, req)
	if err != nil {
		return kmsg.CreateTopicsResponseTopic{}, err
	}
	return resp.(*kmsg.CreateTopicsResponse).Topics[0], nil
}

type clientIDKey struct{}

// WithClientID is ctx carrying the client id of the request handed to Handle.
func WithClientID(ctx context.Context, clientID string) context.Context {
	return context.WithValue(ctx, clientIDKey{}, clientID)
}

func (d *Driver) ask(ctx context.Context, req any) (kmsg.Response, error) {
	id, _ := ctx.Value(clientIDKey{}).(string)
	c := &call{req: req, clientID: id, reply: make(chan kmsg.Response, 1)}
	select {
	case <-d.done:
		return ErrorResponse(req, kerr.NotController, "the controller stopped"), nil
	default:
	}
	select {
	case d.calls <- c:
	default:
		return ErrorResponse(req, kerr.RequestTimedOut, "the controller's queue is full"), nil
	}
	select {
	case resp := <-c.reply:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.done:
		select {
		case resp := <-c.reply:
			return resp, nil
		default:
			return ErrorResponse(req, kerr.NotController, "the controller stopped"), nil
		}
	}
}

// Tick runs the controller's timers once (when Options.TickInterval is negative).
func (d *Driver) Tick() {
	select {
	case d.ticks <- struct{}{}:
	default: // one is pending already
	}
}

// Run drives the controller until ctx ends; every waiting request is then answered
// NOT_CONTROLLER.
func (d *Driver) Run(ctx context.Context) error {
	proposerDone := make(chan struct{})
	go func() {
		defer close(proposerDone)
		d.propose(ctx)
	}()
	defer func() {
		d.reset(kerr.NotController, "the controller stopped")
		close(d.batches)
		<-proposerDone
		close(d.done)
		for {
			select {
			case c := <-d.calls:
				c.reply <- ErrorResponse(c.req, kerr.NotController, "the controller stopped")
			default:
				return
			}
		}
	}()
	var timer <-chan time.Time
	if d.opts.TickInterval > 0 {
		t := time.NewTicker(d.opts.TickInterval)
		defer t.Stop()
		timer = t.C
	}
	for {
		d.follow()
		var calls <-chan *call
		var ticks <-chan struct{}
		var tickTimer <-chan time.Time
		if d.deciding() {
			calls, ticks, tickTimer = d.calls, d.ticks, timer
		} else if d.term == 0 && len(d.inflight) == 0 {
			calls = d.calls // answered NOT_CONTROLLER; ticks wake follow
			ticks, tickTimer = d.ticks, timer
		} else {
			// Waiting for the proposer (a barrier, a full pipeline, a drain); follow
			// runs again when a batch comes back.
		}
		var out chan<- *batch // the next batch for the proposer, when one waits
		var next *batch
		if d.sent < len(d.inflight) {
			out, next = d.batches, d.inflight[d.sent]
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case out <- next:
			d.sent++
		case c := <-calls:
			d.decide(c)
		case <-ticks:
			d.tick()
		case <-tickTimer:
			d.tick()
		case b := <-d.results:
			d.finish(b)
		}
	}
}

// deciding reports whether a request or tick can be decided now: serving, latest known,
// no registration in flight, room in the pipeline.
func (d *Driver) deciding() bool {
	return d.term != 0 && d.latest != nil && !d.barrier && len(d.inflight) < d.opts.MaxInFlight
}

// follow keeps the driver's term equal to the quorum's: a term that ended fails what
// waits; a new one starts a new Core once nothing of the old one is in flight (a batch
// the proposer is still proposing may commit, and must be in the image latest starts
// from).
func (d *Driver) follow() {
	term, ok := d.opts.Quorum.Serving()
	if d.term != 0 && (!ok || term != d.term) {
		d.reset(kerr.NotController, "the controller's term ended")
		d.term, d.core = 0, nil
	}
	if d.term == 0 && ok && len(d.inflight) == 0 {
		d.term, d.core = term, New(d.opts.Config)
		d.opts.Logger.Info("controller: serving", "term", term)
	}
	if d.term != 0 && d.latest == nil && len(d.inflight) == 0 {
		d.latest, _ = d.opts.Quorum.Image()
	}
}

// reset abandons the speculative chain: every waiting request gets code, batches not yet
// proposed are skipped, latest is refreshed once the in-flight ones are back.
func (d *Driver) reset(code *kerr.Error, msg string) {
	d.gen.Add(1)
	for _, b := range d.inflight {
		b.fail(code, msg)
	}
	d.latest, d.barrier = nil, false
}

func (d *Driver) decide(c *call) {
	if d.term == 0 {
		c.reply <- ErrorResponse(c.req, kerr.NotController, "this node is not the controller")
		return
	}
	r, err := d.core.HandleFrom(d.latest, d.opts.Now(), c.clientID, c.req)
	if err != nil { // Handle checked the request's type
		c.reply <- ErrorResponse(c.req, kerr.UnknownServerError, err.Error())
		return
	}
	switch {
	case r.Immediate:
		c.reply <- r.Reply(0)
	case len(r.Records) == 0:
		// Decided on latest: answered once what it was decided on is applied.
		if n := len(d.inflight); n > 0 {
			d.inflight[n-1].waiters = append(d.inflight[n-1].waiters, waiter{c: c, reply: r.Reply})
		} else {
			c.reply <- r.Reply(0)
		}
	default:
		d.send(r, waiter{c: c, reply: r.Reply, own: true})
	}
}

func (d *Driver) tick() {
	if !d.deciding() {
		return
	}
	r, err := d.core.Tick(d.latest, d.opts.Now())
	if err != nil {
		d.opts.Logger.Error("controller: tick", "err", err)
		return
	}
	if len(r.Records) > 0 {
		d.send(r)
	}
}

// send queues r's batches for the proposer, the waiters on the last (answered once all
// are applied), and moves latest past them. One request's batches are queued together,
// so a request cut into several may take inflight past MaxInFlight; the ones the
// proposer's channel has no room for are handed over by Run's loop.
func (d *Driver) send(r Result, ws ...waiter) {
	bs := r.Batches()
	for i, recs := range bs {
		b := &batch{gen: d.gen.Load(), term: d.term, records: recs, barrier: r.Barrier}
		if i == len(bs)-1 {
			b.waiters = ws
		}
		d.inflight = append(d.inflight, b)
	}
	for d.sent < len(d.inflight) {
		select {
		case d.batches <- d.inflight[d.sent]:
			d.sent++
			continue
		default:
		}
		break
	}
	if r.Barrier {
		d.barrier = true
	} else {
		d.latest = r.Next
	}
}

// finish is a batch back from the proposer (always the oldest in flight).
func (d *Driver) finish(b *batch) {
	d.inflight = d.inflight[1:]
	d.sent--
	if b.gen != d.gen.Load() {
		return // its chain was reset and its waiters answered
	}
	if b.err != nil {
		code := kerr.UnknownServerError
		if errors.Is(b.err, quorum.ErrNotController) || errors.Is(b.err, quorum.ErrStopped) || errors.Is(b.err, context.Canceled) {
			code = kerr.NotController
		} else {
			d.opts.Logger.Error("controller: a batch failed", "records", len(b.records), "err", b.err)
		}
		b.fail(code, b.err.Error())
		d.reset(code, "an earlier batch failed: "+b.err.Error())
		return
	}
	for _, w := range b.waiters {
		if w.own {
			w.c.reply <- w.reply(b.index)
		} else {
			w.c.reply <- w.reply(0)
		}
	}
	if b.barrier {
		// Nothing was decided after it: latest is the image that holds it, with the
		// epoch its index gave.
		d.barrier, d.latest = false, nil
	}
}

func (b *batch) fail(code *kerr.Error, msg string) {
	for _, w := range b.waiters {
		w.c.reply <- ErrorResponse(w.c.req, code, msg)
	}
	b.waiters = nil
}

// propose is the proposer goroutine: batches in the order they were decided, one at a
// time (Quorum.Propose returns once applied), each only if its chain and term are
// current.
func (d *Driver) propose(ctx context.Context) {
	for b := range d.batches {
		switch term, ok := d.opts.Quorum.Serving(); {
		case b.gen != d.gen.Load():
			b.err = errSkipped
		case !ok || term != b.term:
			b.err = quorum.ErrNotController
		default:
			b.index, b.err = d.opts.Quorum.Propose(ctx, b.records)
		}
		select {
		case d.results <- b:
		case <-ctx.Done():
			// Run is returning: it failed every waiter already.
		}
	}
}
