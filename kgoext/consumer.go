package kgoext

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AckResult is the broker's answer to the acknowledgement of Offsets of Partition: Err is
// nil when every one was applied, otherwise none of them was.
type AckResult struct {
	Partition TopicPartition
	Offsets   []int64
	Err       error
}

// Share consumer errors.
var (
	// ErrUnacknowledged is returned by Poll in explicit mode while a record the previous
	// Poll returned has no acknowledgement.
	ErrUnacknowledged = errors.New("kgoext: every record must be acknowledged in explicit acknowledgement mode")
	// ErrImplicitMode is returned by Acknowledge of a consumer in implicit mode.
	ErrImplicitMode = errors.New("kgoext: Acknowledge needs ExplicitAcks")
	// ErrNotDelivered is returned by Acknowledge for a record that this consumer did not
	// deliver or that already has a terminal acknowledgement.
	ErrNotDelivered = errors.New("kgoext: record not delivered or already acknowledged")
	// ErrShareSessionLost completes acknowledgements that could not be sent because the
	// share session they belonged to ended with its connection (the broker released the
	// records then).
	ErrShareSessionLost = errors.New("kgoext: share session lost with its connection")
	// ErrClosed is returned by a closed ShareConsumer.
	ErrClosed = errors.New("kgoext: share consumer closed")
)

// ShareConsumer is a share group member (KIP-932) over a *kgo.Client used as transport:
// partitions are shared with the other members, and each record is locked to the member it
// was delivered to until it is acknowledged or its lock expires. Unlike kgo's share consumer
// (kgo.ShareGroup), it never acknowledges a record the caller did not acknowledge, so its
// acknowledgements can go to a transaction instead (AcknowledgementsForTransaction). Poll is
// meant to be called from one goroutine; the other methods may be called from any.
//
// Membership: a heartbeat goroutine runs ShareGroupHeartbeat with a client-generated
// member id, joining with epoch 0, at the interval the coordinator answers, and leaves
// with epoch -1 on Close. Fetching: one share session per partition leader (epoch 0 opens
// it, every request advances it, -1 closes it), one request in flight per session;
// acknowledgements ride on the next ShareFetch to the leader that holds the records'
// locks, or go in a ShareAcknowledge (CommitSync, CommitAsync, RENEW, partitions no longer
// fetched from that leader, Close). A NOT_LEADER_OR_FOLLOWER (or any retriable partition
// error) refreshes the metadata, and the partition is fetched from its new leader.
//
// kgo sends ShareFetch and ShareAcknowledge on each broker's fetch connection, not the one
// Produce uses, so the long polls delay none of the client's produce requests.
type ShareConsumer struct {
	cfg      shareCfg
	group    string
	cl       *kgo.Client
	meta     *metaCache
	coord    *coordinator
	memberID string

	ctx     context.Context // cancelled at the end of Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // every goroutine but the heartbeat loop
	fetchWG sync.WaitGroup // fetches in flight
	hbStop  context.CancelFunc
	hbDone  chan struct{}
	hbKick  chan struct{}
	cbMu    sync.Mutex

	results chan *shareFetchResult

	mu          sync.Mutex
	memberEpoch int32
	joined      bool // the member joined at least once (Close sends the leave)
	assigned    map[TopicPartition]bool
	unresolved  map[[16]byte][]int32 // assigned topic ids without a name yet
	assignWake  chan struct{}        // closed and replaced when assigned changes
	sessions    map[int32]*shareSession
	inflight    map[int32]bool
	delivered   map[TopicPartition]map[int64]*heldRec
	pending     map[int32]map[TopicPartition]map[int64]AckType // leader → acks not sent yet
	needMeta    bool
	backoff     map[int32]time.Time
	ackVersion  map[int32]int16 // leader → highest ShareAcknowledge version (for RENEW)
	pollErr     error
	closed      bool
}

// heldRec is a delivered record without a terminal acknowledgement.
type heldRec struct {
	leader  int32 // the broker holding its lock: acknowledgements go there
	renewed bool  // RENEW sent or pending: Poll does not insist on an acknowledgement
}

// shareSession is the share session with one broker. sem (capacity 1) is held by the one
// request using the session; epoch and parts are read and written only while holding it.
type shareSession struct {
	sem   chan struct{}
	epoch int32
	parts map[TopicPartition]bool
}

type shareFetchResult struct {
	leader int32
	recs   []*kgo.Record
	gaps   map[TopicPartition][]int64
	err    error
}

// NewShareConsumer joins group as a new member that fetches over cl. cl is the caller's:
// it may serve other requests too (not kgo's own consumers: a kgo.ShareGroup or
// kgo.ConsumeTopics client would share the fetch connections), and Close does not close
// it. ShareTopics is required.
//
// The broker ties a share session to its connection and releases the member's records when
// the connection closes. kgo closes a connection idle for kgo.ConnIdleTimeout (30 s by
// default, the same as the default share.record.lock.duration.ms), so with a longer lock
// duration, and gaps between polls as long, raise ConnIdleTimeout on cl to match.
func NewShareConsumer(cl *kgo.Client, group string, opts ...ShareOpt) (*ShareConsumer, error) {
	if cl == nil {
		return nil, errors.New("kgoext: NewShareConsumer needs a client")
	}
	if group == "" {
		return nil, errors.New("kgoext: NewShareConsumer needs a group")
	}
	cfg := defaultShareCfg()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	hbCtx, hbStop := context.WithCancel(ctx)
	c := &ShareConsumer{
		cfg:        cfg,
		group:      group,
		cl:         cl,
		meta:       newMetaCache(cl),
		coord:      newCoordinator(cl, coordinatorGroup, group),
		memberID:   newMemberID(),
		ctx:        ctx,
		cancel:     cancel,
		hbStop:     hbStop,
		hbDone:     make(chan struct{}),
		hbKick:     make(chan struct{}, 1),
		results:    make(chan *shareFetchResult, 64),
		assigned:   map[TopicPartition]bool{},
		unresolved: map[[16]byte][]int32{},
		assignWake: make(chan struct{}),
		sessions:   map[int32]*shareSession{},
		inflight:   map[int32]bool{},
		delivered:  map[TopicPartition]map[int64]*heldRec{},
		pending:    map[int32]map[TopicPartition]map[int64]AckType{},
		backoff:    map[int32]time.Time{},
		ackVersion: map[int32]int16{},
	}
	go c.heartbeatLoop(hbCtx)
	return c, nil
}

// newMemberID is a random (version 4) UUID string: 36 characters, as the broker requires.
func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// GroupMetadata is the member's current identity, for SendShareAcksToTransaction. The
// epoch is 0 until the member joined.
func (c *ShareConsumer) GroupMetadata() ShareGroupMetadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ShareGroupMetadata{GroupID: c.group, MemberID: c.memberID, MemberEpoch: c.memberEpoch}
}

// Assignment returns the partitions currently assigned to this member.
func (c *ShareConsumer) Assignment() []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicPartition, 0, len(c.assigned))
	for tp := range c.assigned {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i], out[j]) })
	return out
}

// ---- membership ----

func (c *ShareConsumer) heartbeatLoop(ctx context.Context) {
	defer close(c.hbDone)
	for {
		wait := c.heartbeat(ctx)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.hbKick:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// heartbeat sends one ShareGroupHeartbeat and returns the time until the next.
func (c *ShareConsumer) heartbeat(ctx context.Context) time.Duration {
	backoff := c.cfg.retryBackoff
	c.mu.Lock()
	epoch := c.memberEpoch
	c.mu.Unlock()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = c.group, c.memberID, epoch
	if epoch == 0 {
		req.SubscribedTopicNames = c.cfg.topics
		if c.cfg.rack != "" {
			req.RackID = kmsg.StringPtr(c.cfg.rack)
		}
	}
	resp, err := c.coord.do(ctx, req)
	if err != nil {
		return backoff
	}
	r := resp.(*kmsg.ShareGroupHeartbeatResponse)
	if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		switch {
		case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedMemberEpoch):
			// Fenced: rejoin at once with the same member id. The records this member
			// holds stay its own (locks are by member id), so their acks still go out.
			c.setAssignment(nil, true)
			c.mu.Lock()
			c.memberEpoch = 0
			c.mu.Unlock()
			if epoch == 0 {
				return backoff
			}
			return 0
		case coordinatorMoved(err):
			c.coord.invalidate()
			return backoff
		case kerr.IsRetriable(err):
			return backoff
		default:
			c.mu.Lock()
			c.pollErr = fmt.Errorf("kgoext: ShareGroupHeartbeat %q: %w", c.group, err)
			c.mu.Unlock()
			return max(backoff, time.Second)
		}
	}
	c.mu.Lock()
	c.memberEpoch = r.MemberEpoch
	c.joined = true
	c.mu.Unlock()
	if r.Assignment != nil {
		byID := map[[16]byte][]int32{}
		for _, t := range r.Assignment.TopicPartitions {
			byID[t.TopicID] = append(byID[t.TopicID], t.Partitions...)
		}
		c.setAssignment(byID, false)
	}
	if c.resolveAssignment(ctx) {
		return backoff // names still unknown: look again soon
	}
	if r.HeartbeatIntervalMillis > 0 {
		return time.Duration(r.HeartbeatIntervalMillis) * time.Millisecond
	}
	return 3 * time.Second
}

// setAssignment replaces the assignment with byID (clear: with nothing).
func (c *ShareConsumer) setAssignment(byID map[[16]byte][]int32, clear bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if clear {
		byID = nil
	}
	c.assigned = map[TopicPartition]bool{}
	c.unresolved = map[[16]byte][]int32{}
	for id, ps := range byID {
		c.unresolved[id] = ps
	}
	c.resolveLocked()
	c.wakeAssign()
}

// resolveLocked moves assigned topic ids with known names into assigned.
func (c *ShareConsumer) resolveLocked() {
	for id, ps := range c.unresolved {
		name, ok := c.meta.name(id)
		if !ok {
			continue
		}
		for _, p := range ps {
			c.assigned[TopicPartition{name, p}] = true
		}
		delete(c.unresolved, id)
	}
}

func (c *ShareConsumer) wakeAssign() {
	close(c.assignWake)
	c.assignWake = make(chan struct{})
}

// resolveAssignment refreshes metadata when assigned topic ids have no name yet; it reports
// whether some are still unknown.
func (c *ShareConsumer) resolveAssignment(ctx context.Context) bool {
	c.mu.Lock()
	n := len(c.unresolved)
	c.mu.Unlock()
	if n == 0 {
		return false
	}
	c.refreshMeta(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	before := len(c.assigned)
	c.resolveLocked()
	if len(c.assigned) != before {
		c.wakeAssign()
	}
	return len(c.unresolved) > 0
}

// refreshMeta reloads the subscribed topics' metadata (leaders, topic ids) from the
// cluster, past kgo's cache: it runs when a leader or a topic id is not known or a
// request failed, which is when the cached answer is suspect.
func (c *ShareConsumer) refreshMeta(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	_ = c.meta.refresh(rctx, c.cfg.topics, true) // on failure the next poll asks again
}

// ---- polling ----

// Poll returns the next records delivered to this member, with their DeliveryCount. It
// first completes the previous Poll's records: in implicit mode they are accepted; in
// explicit mode each must have been acknowledged (else ErrUnacknowledged). It waits until
// a fetch returns records, or ctx is done (ctx's error; fetches in flight go on and their
// records come with the next Poll).
func (c *ShareConsumer) Poll(ctx context.Context) ([]*kgo.Record, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if err := c.pollErr; err != nil {
		c.pollErr = nil
		c.mu.Unlock()
		return nil, err
	}
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	} else {
		for tp, m := range c.delivered {
			for off, h := range m {
				if !h.renewed {
					c.mu.Unlock()
					return nil, fmt.Errorf("%w (%s[%d] offset %d)", ErrUnacknowledged, tp.Topic, tp.Partition, off)
				}
			}
		}
	}
	c.mu.Unlock()

	if err := c.sendSideAcks(ctx); err != nil {
		return nil, err
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if err := c.pollErr; err != nil {
			c.pollErr = nil
			c.mu.Unlock()
			return nil, err
		}
		needMeta := c.needMeta
		c.needMeta = false
		c.mu.Unlock()
		if needMeta {
			c.refreshMeta(ctx)
		}
		wake, timer := c.startFetches()
		select {
		case res := <-c.results:
			if timer != nil {
				timer.Stop()
			}
			if recs := c.handleResult(res, true); len(recs) > 0 {
				return recs, nil
			}
		case <-wake:
		case <-timerC(timer):
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil, ctx.Err()
		}
	}
}

func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// startFetches starts a ShareFetch to every leader of assigned partitions without one in
// flight. It returns the channel that signals an assignment change and, when some leader
// is unknown or backing off, a timer for the retry.
func (c *ShareConsumer) startFetches() (<-chan struct{}, *time.Timer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	var retry time.Duration
	leaders := map[int32]bool{}
	for tp := range c.assigned {
		l := c.meta.leader(tp)
		if l < 0 {
			c.needMeta = true
			retry = c.cfg.retryBackoff
			continue
		}
		leaders[l] = true
	}
	for l := range leaders {
		if c.inflight[l] {
			continue
		}
		if until := c.backoff[l]; now.Before(until) {
			if d := until.Sub(now); retry == 0 || d < retry {
				retry = d
			}
			continue
		}
		c.inflight[l] = true
		c.wg.Add(1)
		c.fetchWG.Add(1)
		go c.fetch(l)
	}
	var t *time.Timer
	if retry > 0 {
		t = time.NewTimer(retry)
	}
	return c.assignWake, t
}

// session returns the share session with leader (c.mu held).
func (c *ShareConsumer) sessionLocked(leader int32) *shareSession {
	s := c.sessions[leader]
	if s == nil {
		s = &shareSession{sem: make(chan struct{}, 1), parts: map[TopicPartition]bool{}}
		c.sessions[leader] = s
	}
	return s
}

func (c *ShareConsumer) acquire(ctx context.Context, leader int32) (*shareSession, error) {
	c.mu.Lock()
	s := c.sessionLocked(leader)
	c.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *shareSession) release() { <-s.sem }

// advance moves the session epoch after a successful request.
func (s *shareSession) advance() {
	if s.epoch == 1<<31-1 {
		s.epoch = 1
		return
	}
	s.epoch++
}

func (s *shareSession) reset() {
	s.epoch = 0
	s.parts = map[TopicPartition]bool{}
}

// fetch runs one ShareFetch to leader and queues its result.
func (c *ShareConsumer) fetch(leader int32) {
	defer c.wg.Done()
	defer c.fetchWG.Done() // after the result is queued: Close drains it
	res := &shareFetchResult{leader: leader}
	defer func() {
		c.mu.Lock()
		delete(c.inflight, leader)
		c.mu.Unlock()
		select {
		case c.results <- res:
		case <-c.ctx.Done():
		}
	}()
	s, err := c.acquire(c.ctx, leader)
	if err != nil {
		res.err = err
		return
	}
	defer s.release()

	c.mu.Lock()
	want := map[TopicPartition]bool{}
	for tp := range c.assigned {
		if c.meta.leader(tp) == leader {
			want[tp] = true
		}
	}
	// Piggyback the acks of partitions fetched here, unless a RENEW is among them (RENEW
	// needs a request that does not fetch) or the session is new (epoch 0 carries no acks).
	var acks map[TopicPartition]map[int64]AckType
	if s.epoch > 0 {
		acks = c.takeLocked(leader, func(tp TopicPartition, m map[int64]AckType) bool {
			return want[tp] && !hasType(m, AckRenew)
		})
	}
	ids := c.topicIDsLocked()
	c.mu.Unlock()

	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.memberID)
	req.ShareSessionEpoch = s.epoch
	req.MaxWaitMillis = int32(c.cfg.maxWait.Milliseconds())
	req.MinBytes, req.MaxBytes = c.cfg.minBytes, c.cfg.maxBytes
	req.MaxRecords, req.BatchSize = c.cfg.maxRecords, c.cfg.maxRecords
	list := map[TopicPartition]bool{}
	for tp := range want {
		if s.epoch == 0 || !s.parts[tp] {
			list[tp] = true
		}
	}
	for tp := range acks {
		list[tp] = true
	}
	var forget []TopicPartition
	if s.epoch > 0 {
		for tp := range s.parts {
			if !want[tp] {
				forget = append(forget, tp)
			}
		}
	}
	for _, tp := range sortedSet(list) {
		id, ok := ids[tp.Topic]
		if !ok {
			continue
		}
		rt := shareFetchTopic(req, id)
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = tp.Partition
		for _, b := range ackBatches(acks[tp]) {
			kb := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			kb.FirstOffset, kb.LastOffset, kb.AcknowledgeTypes = b.FirstOffset, b.LastOffset, wireTypes(b.Types)
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kb)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	for _, tp := range forget {
		id, ok := ids[tp.Topic]
		if !ok {
			continue
		}
		var ft *kmsg.ShareFetchRequestForgottenTopicsData
		for i := range req.ForgottenTopicsData {
			if req.ForgottenTopicsData[i].TopicID == id {
				ft = &req.ForgottenTopicsData[i]
			}
		}
		if ft == nil {
			req.ForgottenTopicsData = append(req.ForgottenTopicsData, kmsg.NewShareFetchRequestForgottenTopicsData())
			ft = &req.ForgottenTopicsData[len(req.ForgottenTopicsData)-1]
			ft.TopicID = id
		}
		ft.Partitions = append(ft.Partitions, tp.Partition)
	}

	resp, err := c.cl.Broker(int(leader)).Request(c.ctx, req)
	if err != nil {
		// The connection is gone, and with it the session and its locks.
		s.reset()
		c.ackDone(leader, acks, nil, fmt.Errorf("%w: %w", ErrShareSessionLost, err))
		c.failLeader(leader, err)
		res.err = err
		return
	}
	r := resp.(*kmsg.ShareFetchResponse)
	if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		s.reset()
		c.requeue(leader, acks) // nothing of the request was applied
		if !errors.Is(err, kerr.ShareSessionNotFound) && !errors.Is(err, kerr.InvalidShareSessionEpoch) {
			c.failLeader(leader, err)
			if !kerr.IsRetriable(err) {
				c.mu.Lock()
				c.pollErr = fmt.Errorf("kgoext: ShareFetch from broker %d: %w", leader, err)
				c.mu.Unlock()
			}
		}
		res.err = err
		return
	}
	if s.epoch == 0 {
		s.parts = map[TopicPartition]bool{}
	}
	for tp := range list {
		s.parts[tp] = true
	}
	for _, tp := range forget {
		delete(s.parts, tp)
	}
	s.advance()

	names := c.namesSnapshot()
	ackErrs := map[TopicPartition]error{}
	for _, t := range r.Topics {
		name, ok := names[t.TopicID]
		if !ok {
			continue
		}
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			tp := TopicPartition{name, rp.Partition}
			if _, acked := acks[tp]; acked {
				ackErrs[tp] = kerrWithMessage(rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage)
			}
			if err := kerrWithMessage(rp.ErrorCode, rp.ErrorMessage); err != nil {
				c.mu.Lock()
				if kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicID) {
					c.needMeta = true
				} else {
					c.pollErr = errors.Join(c.pollErr, fmt.Errorf("kgoext: ShareFetch %s[%d]: %w", tp.Topic, tp.Partition, err))
				}
				c.mu.Unlock()
			}
			recs, gaps, err := decodeShare(tp, rp.Records, rp.AcquiredRecords)
			if err != nil {
				c.mu.Lock()
				c.pollErr = errors.Join(c.pollErr, err)
				c.mu.Unlock()
			}
			res.recs = append(res.recs, recs...)
			if len(gaps) > 0 {
				if res.gaps == nil {
					res.gaps = map[TopicPartition][]int64{}
				}
				res.gaps[tp] = gaps
			}
		}
	}
	c.ackDone(leader, acks, ackErrs, nil)
}

func shareFetchTopic(req *kmsg.ShareFetchRequest, id [16]byte) *kmsg.ShareFetchRequestTopic {
	for i := range req.Topics {
		if req.Topics[i].TopicID == id {
			return &req.Topics[i]
		}
	}
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = id
	req.Topics = append(req.Topics, t)
	return &req.Topics[len(req.Topics)-1]
}

// failLeader backs off from a broker after a failed request and refreshes metadata.
func (c *ShareConsumer) failLeader(leader int32, _ error) {
	c.mu.Lock()
	c.backoff[leader] = time.Now().Add(c.cfg.retryBackoff)
	c.needMeta = true
	c.mu.Unlock()
}

// handleResult turns a fetch result into delivered records (deliver) or, on Close, into
// RELEASE acknowledgements (!deliver). Gaps become gap acknowledgements either way.
func (c *ShareConsumer) handleResult(res *shareFetchResult, deliver bool) []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, offs := range res.gaps {
		for _, o := range offs {
			c.addPendingLocked(res.leader, tp, o, AckGap)
		}
	}
	for _, r := range res.recs {
		tp := TopicPartition{r.Topic, r.Partition}
		if !deliver {
			c.addPendingLocked(res.leader, tp, r.Offset, AckRelease)
			continue
		}
		m := c.delivered[tp]
		if m == nil {
			m = map[int64]*heldRec{}
			c.delivered[tp] = m
		}
		m[r.Offset] = &heldRec{leader: res.leader}
	}
	if !deliver {
		return nil
	}
	return res.recs
}

type deliveryCountKey struct{}

// withDeliveryCount is the Context of a record delivered dc times.
func withDeliveryCount(dc int16) context.Context {
	return context.WithValue(context.Background(), deliveryCountKey{}, dc)
}

// DeliveryCount is how many times the share group delivered r (1 the first time), for a
// record a ShareConsumer returned; 0 for any other. (kgo's Record.DeliveryCount answers for
// kgo's own share consumer only.)
func DeliveryCount(r *kgo.Record) int16 {
	if r == nil || r.Context == nil {
		return 0
	}
	dc, _ := r.Context.Value(deliveryCountKey{}).(int16)
	return dc
}

// decodeShare returns the records of raw that lie in the acquired ranges, each with its
// delivery count, and the acquired offsets with no data record (gaps).
func decodeShare(tp TopicPartition, raw []byte, acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) ([]*kgo.Record, []int64, error) {
	if len(acquired) == 0 {
		return nil, nil, nil
	}
	count := func(off int64) (int16, bool) {
		for _, a := range acquired {
			if off >= a.FirstOffset && off <= a.LastOffset {
				return a.DeliveryCount, true
			}
		}
		return 0, false
	}
	var out []*kgo.Record
	seen := map[int64]bool{}
	var decodeErr error
	for len(raw) > 0 {
		n, err := batch.Size(raw)
		if err != nil || n > len(raw) {
			break
		}
		b := raw[:n]
		raw = raw[n:]
		h, err := batch.Parse(b)
		if err != nil {
			decodeErr = fmt.Errorf("kgoext: %s[%d] batch at offset %d: %w", tp.Topic, tp.Partition, batch.BaseOffset(b), err)
			break
		}
		if h.Attributes&batch.AttrControl != 0 {
			continue
		}
		recs, err := batch.DecodeRecords(&h, batch.DefaultMaxDecompressedBytes)
		if err != nil {
			decodeErr = fmt.Errorf("kgoext: %s[%d] batch at offset %d: %w", tp.Topic, tp.Partition, h.FirstOffset, err)
			break
		}
		logAppend := h.Attributes&batch.AttrTimestampType != 0
		for i := range recs {
			kr := &recs[i]
			off := h.FirstOffset + int64(kr.OffsetDelta)
			dc, ok := count(off)
			if !ok || seen[off] {
				continue
			}
			seen[off] = true
			ts := h.FirstTimestamp + kr.TimestampDelta64
			if logAppend {
				ts = h.MaxTimestamp
			}
			r := &kgo.Record{
				Topic: tp.Topic, Partition: tp.Partition, Key: kr.Key, Value: kr.Value,
				Timestamp: time.UnixMilli(ts), Offset: off, LeaderEpoch: h.PartitionLeaderEpoch,
				ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
				Context: withDeliveryCount(dc),
			}
			if len(kr.Headers) > 0 {
				r.Headers = make([]kgo.RecordHeader, len(kr.Headers))
				for j, hd := range kr.Headers {
					r.Headers[j] = kgo.RecordHeader{Key: hd.Key, Value: hd.Value}
				}
			}
			out = append(out, r)
		}
	}
	if decodeErr != nil {
		// Records that could not be decoded are left to their lock: no gap for them.
		return out, nil, decodeErr
	}
	var gaps []int64
	for _, a := range acquired {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			if !seen[o] {
				gaps = append(gaps, o)
			}
		}
	}
	return out, gaps, nil
}

// ---- acknowledging ----

// Acknowledge records the outcome of a record this consumer delivered (explicit mode). The
// acknowledgement is sent with the next Poll, CommitSync, CommitAsync or Close, or taken by
// AcknowledgementsForTransaction. AckRenew extends the record's lock; it still needs a
// terminal type later. A terminal type is final: acknowledging the record again returns
// ErrNotDelivered.
func (c *ShareConsumer) Acknowledge(r *kgo.Record, t AckType) error {
	if t < AckAccept || t > AckRenew {
		return fmt.Errorf("kgoext: cannot acknowledge with %s", t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if !c.cfg.explicit {
		return ErrImplicitMode
	}
	tp := TopicPartition{r.Topic, r.Partition}
	h := c.delivered[tp][r.Offset]
	if h == nil {
		return fmt.Errorf("%w: %s[%d] offset %d", ErrNotDelivered, tp.Topic, tp.Partition, r.Offset)
	}
	if t == AckRenew {
		h.renewed = true
	} else {
		delete(c.delivered[tp], r.Offset)
		if len(c.delivered[tp]) == 0 {
			delete(c.delivered, tp)
		}
	}
	c.addPendingLocked(h.leader, tp, r.Offset, t)
	return nil
}

// ackDeliveredLocked acknowledges every delivered record with t (RENEWed ones included).
func (c *ShareConsumer) ackDeliveredLocked(t AckType) {
	for tp, m := range c.delivered {
		for off, h := range m {
			c.addPendingLocked(h.leader, tp, off, t)
		}
	}
	c.delivered = map[TopicPartition]map[int64]*heldRec{}
}

func (c *ShareConsumer) addPendingLocked(leader int32, tp TopicPartition, off int64, t AckType) {
	byTP := c.pending[leader]
	if byTP == nil {
		byTP = map[TopicPartition]map[int64]AckType{}
		c.pending[leader] = byTP
	}
	m := byTP[tp]
	if m == nil {
		m = map[int64]AckType{}
		byTP[tp] = m
	}
	m[off] = t
}

// takeLocked removes and returns leader's pending acks of the partitions keep accepts.
func (c *ShareConsumer) takeLocked(leader int32, keep func(TopicPartition, map[int64]AckType) bool) map[TopicPartition]map[int64]AckType {
	byTP := c.pending[leader]
	var out map[TopicPartition]map[int64]AckType
	for tp, m := range byTP {
		if keep != nil && !keep(tp, m) {
			continue
		}
		if out == nil {
			out = map[TopicPartition]map[int64]AckType{}
		}
		out[tp] = m
		delete(byTP, tp)
	}
	if len(byTP) == 0 {
		delete(c.pending, leader)
	}
	return out
}

// requeue puts acks that were not applied back, unless newer ones for the same offsets
// were recorded meanwhile.
func (c *ShareConsumer) requeue(leader int32, acks map[TopicPartition]map[int64]AckType) {
	if len(acks) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, m := range acks {
		for off, t := range m {
			if _, newer := c.pending[leader][tp][off]; !newer {
				c.addPendingLocked(leader, tp, off, t)
			}
		}
	}
}

func hasType(m map[int64]AckType, t AckType) bool {
	for _, x := range m {
		if x == t {
			return true
		}
	}
	return false
}

// ackDone reports the outcome of sent acks to OnAcknowledged: per partition the error in
// errs, or all (when not nil). It returns the per-partition results.
func (c *ShareConsumer) ackDone(_ int32, acks map[TopicPartition]map[int64]AckType, errs map[TopicPartition]error, all error) map[TopicPartition]error {
	if len(acks) == 0 {
		return nil
	}
	out := make(map[TopicPartition]error, len(acks))
	results := make([]AckResult, 0, len(acks))
	for _, tp := range sortedSet(acks) {
		err := all
		if err == nil {
			err = errs[tp]
		}
		out[tp] = err
		offs := make([]int64, 0, len(acks[tp]))
		for o := range acks[tp] {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		results = append(results, AckResult{Partition: tp, Offsets: offs, Err: err})
	}
	if cb := c.cfg.onAcknowledged; cb != nil {
		c.cbMu.Lock()
		cb(results)
		c.cbMu.Unlock()
	}
	return out
}

// sendSideAcks sends, as ShareAcknowledge, the pending acks a fetch cannot carry: those
// with RENEW, and those of partitions this member no longer fetches from that leader.
func (c *ShareConsumer) sendSideAcks(ctx context.Context) error {
	c.mu.Lock()
	var leaders []int32
	for l, byTP := range c.pending {
		for tp, m := range byTP {
			if hasType(m, AckRenew) || !c.assigned[tp] || c.meta.leader(tp) != l {
				leaders = append(leaders, l)
				break
			}
		}
	}
	c.mu.Unlock()
	for _, l := range leaders {
		if _, err := c.acknowledge(ctx, l, false); err != nil {
			return err
		}
	}
	return nil
}

// acknowledge sends every pending ack of leader in one ShareAcknowledge (closing: with
// epoch -1, which ends the session and releases whatever the member still holds there).
// It returns the per-partition outcome; the error is for ctx and session acquisition only.
func (c *ShareConsumer) acknowledge(ctx context.Context, leader int32, closing bool) (map[TopicPartition]error, error) {
	s, err := c.acquire(ctx, leader)
	if err != nil {
		return nil, err
	}
	defer s.release()
	c.mu.Lock()
	acks := c.takeLocked(leader, nil)
	c.mu.Unlock()
	return c.acknowledgeHeld(ctx, s, leader, acks, closing)
}

// acknowledgeHeld sends acks on s (held), opening the session first when it has none.
func (c *ShareConsumer) acknowledgeHeld(ctx context.Context, s *shareSession, leader int32, acks map[TopicPartition]map[int64]AckType, closing bool) (map[TopicPartition]error, error) {
	if len(acks) == 0 && (!closing || s.epoch == 0) {
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		if s.epoch == 0 {
			if err := c.openSession(ctx, s, leader); err != nil {
				if ctx.Err() != nil {
					c.requeue(leader, acks)
					return nil, ctx.Err()
				}
				return c.ackDone(leader, acks, nil, err), nil
			}
		}
		c.mu.Lock()
		ids := c.topicIDsLocked()
		c.mu.Unlock()
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.memberID)
		req.ShareSessionEpoch = s.epoch
		if closing {
			req.ShareSessionEpoch = -1
		}
		for _, tp := range sortedSet(acks) {
			id, ok := ids[tp.Topic]
			if !ok {
				continue
			}
			var rt *kmsg.ShareAcknowledgeRequestTopic
			for i := range req.Topics {
				if req.Topics[i].TopicID == id {
					rt = &req.Topics[i]
				}
			}
			if rt == nil {
				req.Topics = append(req.Topics, kmsg.NewShareAcknowledgeRequestTopic())
				rt = &req.Topics[len(req.Topics)-1]
				rt.TopicID = id
			}
			rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
			rp.Partition = tp.Partition
			for _, b := range ackBatches(acks[tp]) {
				kb := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
				kb.FirstOffset, kb.LastOffset, kb.AcknowledgeTypes = b.FirstOffset, b.LastOffset, wireTypes(b.Types)
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kb)
			}
			rt.Partitions = append(rt.Partitions, rp)
			if hasType(acks[tp], AckRenew) {
				req.IsRenewAck = true
			}
		}
		if req.IsRenewAck {
			if v, err := c.shareAckVersion(ctx, leader); err == nil && v < 2 {
				return c.ackDone(leader, acks, nil, fmt.Errorf("kgoext: RENEW needs ShareAcknowledge v2: %w", kerr.UnsupportedVersion)), nil
			}
		}
		resp, err := c.cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			s.reset()
			if ctx.Err() != nil {
				return c.ackDone(leader, acks, nil, err), ctx.Err()
			}
			return c.ackDone(leader, acks, nil, fmt.Errorf("%w: %w", ErrShareSessionLost, err)), nil
		}
		r := resp.(*kmsg.ShareAcknowledgeResponse)
		if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
			if (errors.Is(err, kerr.ShareSessionNotFound) || errors.Is(err, kerr.InvalidShareSessionEpoch)) && attempt == 0 && !closing {
				s.reset() // nothing was applied: open a new session and send again
				continue
			}
			s.reset()
			return c.ackDone(leader, acks, nil, fmt.Errorf("kgoext: ShareAcknowledge to broker %d: %w", leader, err)), nil
		}
		if closing {
			s.reset()
		} else {
			s.advance()
		}
		names := c.namesSnapshot()
		errs := map[TopicPartition]error{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				errs[TopicPartition{names[t.TopicID], p.Partition}] = kerrWithMessage(p.ErrorCode, p.ErrorMessage)
			}
		}
		return c.ackDone(leader, acks, errs, nil), nil
	}
}

// shareAckVersion is the highest ShareAcknowledge version leader serves, asked once per
// broker with ApiVersions: kgo would send RENEW to a broker below v2 as v1, which has no
// IsRenewAck field, and the renewal would silently become nothing.
func (c *ShareConsumer) shareAckVersion(ctx context.Context, leader int32) (int16, error) {
	c.mu.Lock()
	v, ok := c.ackVersion[leader]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	// v3+ needs a software name and version (INVALID_REQUEST otherwise).
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kgoext", "1"
	resp, err := c.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return 0, fmt.Errorf("kgoext: ApiVersions from broker %d: %w", leader, err)
	}
	v = -1
	for _, k := range r.ApiKeys {
		if k.ApiKey == kmsg.ShareAcknowledge.Int16() {
			v = k.MaxVersion
		}
	}
	c.mu.Lock()
	c.ackVersion[leader] = v
	c.mu.Unlock()
	return v, nil
}

// openSession opens an empty share session on leader (s held): acks need epoch > 0.
func (c *ShareConsumer) openSession(ctx context.Context, s *shareSession, leader int32) error {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.memberID)
	req.ShareSessionEpoch = 0
	resp, err := c.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrShareSessionLost, err)
	}
	r := resp.(*kmsg.ShareFetchResponse)
	if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("kgoext: opening a share session on broker %d: %w", leader, err)
	}
	s.parts = map[TopicPartition]bool{}
	s.epoch = 1
	return nil
}

// CommitSync sends every acknowledgement not sent yet (in implicit mode, first accepting
// every delivered record) in ShareAcknowledge requests, one per leader, and waits for the
// answers. It returns the outcome per partition acknowledged, and an error joining the
// failed ones (nil when all succeeded).
func (c *ShareConsumer) CommitSync(ctx context.Context) (map[TopicPartition]error, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	}
	taken := map[int32]map[TopicPartition]map[int64]AckType{}
	for l := range c.pending {
		taken[l] = c.takeLocked(l, nil)
	}
	c.mu.Unlock()
	return c.commit(ctx, taken)
}

// CommitAsync is CommitSync in the background: the acknowledgements are taken now and
// sent by another goroutine; done (may be nil) gets CommitSync's results. OnAcknowledged
// is called as well.
func (c *ShareConsumer) CommitAsync(done func(map[TopicPartition]error, error)) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if done != nil {
			done(nil, ErrClosed)
		}
		return
	}
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	}
	taken := map[int32]map[TopicPartition]map[int64]AckType{}
	for l := range c.pending {
		taken[l] = c.takeLocked(l, nil)
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		res, err := c.commit(c.ctx, taken)
		if done != nil {
			done(res, err)
		}
	}()
}

func (c *ShareConsumer) commit(ctx context.Context, taken map[int32]map[TopicPartition]map[int64]AckType) (map[TopicPartition]error, error) {
	var mu sync.Mutex
	out := map[TopicPartition]error{}
	var ctxErr error
	var wg sync.WaitGroup
	for l, acks := range taken {
		if len(acks) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.acquire(ctx, l)
			var res map[TopicPartition]error
			if err == nil {
				res, err = c.acknowledgeHeld(ctx, s, l, acks, false)
				s.release()
			} else {
				c.requeue(l, acks)
			}
			mu.Lock()
			defer mu.Unlock()
			for tp, e := range res {
				out[tp] = e
			}
			if err != nil {
				ctxErr = err
			}
		}()
	}
	wg.Wait()
	if ctxErr != nil {
		return out, ctxErr
	}
	var errs []error
	for _, tp := range sortedSet(out) {
		if out[tp] != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, out[tp]))
		}
	}
	return out, errors.Join(errs...)
}

// ReleaseAcknowledgements gives back records whose acknowledgements
// AcknowledgementsForTransaction drained but that will not be staged (the caller abandons
// the transaction before SendShareAcksToTransaction): every offset in acks is queued as
// RELEASE and sent like any other acknowledgement (piggybacked on the next poll, or by
// CommitSync or Close), so the records are delivered again at once rather than when their
// acquisition locks expire. Gap offsets (type 0) hold no record and are skipped. Records
// whose acknowledgements were staged must not be released: abort the transaction instead.
func (c *ShareConsumer) ReleaseAcknowledgements(acks TxnAcks) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	for tp, bs := range acks {
		leader := c.meta.leader(tp)
		if leader < 0 {
			return fmt.Errorf("kgoext: no leader known for %s[%d]: its records are released when their locks expire", tp.Topic, tp.Partition)
		}
		for _, b := range bs {
			for off := b.FirstOffset; off <= b.LastOffset; off++ {
				if b.typeAt(off) != AckGap {
					c.addPendingLocked(leader, tp, off, AckRelease)
				}
			}
		}
	}
	return nil
}

// AcknowledgementsForTransaction takes every acknowledgement not sent yet (in implicit
// mode, first accepting every delivered record) out of the normal path, for
// SendShareAcksToTransaction: they will not be sent by Poll, CommitSync or Close.
// Gaps come along as AckGap. When a RELEASE or RENEW is among them it returns
// ErrAckNotTransactional and takes nothing. Unacknowledged records stay in flight; a
// second call right after returns no acknowledgements.
func (c *ShareConsumer) AcknowledgementsForTransaction() (TxnAcks, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	}
	merged := map[TopicPartition]map[int64]AckType{}
	for _, byTP := range c.pending {
		for tp, m := range byTP {
			for off, t := range m {
				if t == AckRelease || t == AckRenew {
					return nil, fmt.Errorf("%w: %s at %s[%d] offset %d", ErrAckNotTransactional, t, tp.Topic, tp.Partition, off)
				}
				if merged[tp] == nil {
					merged[tp] = map[int64]AckType{}
				}
				merged[tp][off] = t
			}
		}
	}
	c.pending = map[int32]map[TopicPartition]map[int64]AckType{}
	out := make(TxnAcks, len(merged))
	for tp, m := range merged {
		out[tp] = ackBatches(m)
	}
	return out, nil
}

// ---- closing ----

// Close ends the member: in implicit mode delivered records are accepted; in explicit mode
// the unacknowledged ones are released, as are records fetched but never returned by Poll.
// Every share session is closed with those acknowledgements (ShareAcknowledge epoch -1,
// which also releases anything else the member holds there), then the member leaves the
// group (heartbeat epoch -1). The kgo client stays open: it is the caller's. It waits for
// fetches in flight (at most ShareMaxWait) unless ctx ends first. It returns the
// acknowledgement failures.
func (c *ShareConsumer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	} else {
		for tp, m := range c.delivered {
			for off, h := range m {
				c.addPendingLocked(h.leader, tp, off, AckRelease)
			}
		}
		c.delivered = map[TopicPartition]map[int64]*heldRec{}
	}
	c.mu.Unlock()
	c.hbStop()
	<-c.hbDone

	// Fetches in flight finish; their records were never returned: release them. A
	// fetch that outlives ctx is abandoned (its connection closes, which releases).
	fetched := make(chan struct{})
	go func() {
		c.fetchWG.Wait()
		close(fetched)
	}()
	for waiting := true; waiting; {
		select {
		case res := <-c.results:
			c.handleResult(res, false)
		case <-fetched:
			waiting = false
		case <-ctx.Done():
			c.cancel()
			<-fetched
			waiting = false
		}
	}
	for drained := false; !drained; {
		select {
		case res := <-c.results:
			c.handleResult(res, false)
		default:
			drained = true
		}
	}

	c.mu.Lock()
	leaders := map[int32]bool{}
	for l := range c.pending {
		leaders[l] = true
	}
	for l := range c.sessions {
		leaders[l] = true
	}
	joined := c.joined
	epoch := c.memberEpoch
	c.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for l := range leaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.acknowledge(ctx, l, true)
			emu.Lock()
			defer emu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			for tp, e := range res {
				if e != nil {
					errs = append(errs, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, e))
				}
			}
		}()
	}
	wg.Wait()

	if joined || epoch != 0 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = c.group, c.memberID, -1
		if _, err := c.coord.do(ctx, req); err != nil && ctx.Err() != nil {
			errs = append(errs, err)
		}
	}
	c.cancel()
	c.wg.Wait()
	return errors.Join(errs...)
}

// ---- helpers ----

// topicIDsLocked maps topic names to ids from the metadata cache.
func (c *ShareConsumer) topicIDsLocked() map[string][16]byte {
	ids, _ := c.meta.idsAndNames()
	return ids
}

func (c *ShareConsumer) namesSnapshot() map[[16]byte]string {
	_, names := c.meta.idsAndNames()
	return names
}
