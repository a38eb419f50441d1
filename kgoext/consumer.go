package kgoext

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

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

// topicIDsLocked maps topic names to ids from the metadata cache.
func (c *ShareConsumer) topicIDsLocked() map[string][16]byte {
	ids, _ := c.meta.idsAndNames()
	return ids
}

func (c *ShareConsumer) namesSnapshot() map[[16]byte]string {
	_, names := c.meta.idsAndNames()
	return names
}
