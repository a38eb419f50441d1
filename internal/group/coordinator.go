package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Coordinator. Zero values take Kafka's defaults where one exists.
type Config struct {
	NumPartitions                            int32 // offsets.topic.num.partitions (50)
	MinSessionTimeoutMs, MaxSessionTimeoutMs int32 // group.min/max.session.timeout.ms (6000/1800000)
	// InitialRebalanceDelayMs is group.initial.rebalance.delay.ms (Kafka: 3000). Zero
	// means no delay; set 3000 explicitly for Kafka's behaviour.
	InitialRebalanceDelayMs int32
	MaxGroupSize            int32 // group.max.size (<= 0: unlimited, Kafka's Integer.MAX_VALUE)
	OffsetsRetentionMs      int64 // offsets.retention.minutes (7 days)
	OffsetMetadataMaxBytes  int32 // offset.metadata.max.bytes (4096)
	// NewMemberJoinTimeoutMs is group.classic.new.member.join.timeout.ms (5 minutes).
	NewMemberJoinTimeoutMs int32
	// RetentionCheckInterval is offsets.retention.check.interval.ms (10 minutes).
	RetentionCheckInterval time.Duration
	// TickInterval is how often the ticker goroutine fires due deadlines (default 50ms);
	// negative starts no goroutine and the caller drives Tick (tests).
	TickInterval time.Duration
	// MaxQueuedWrites bounds the writes waiting for one partition's log (default 4096);
	// past it requests get COORDINATOR_NOT_AVAILABLE and clients retry.
	MaxQueuedWrites int

	// TopicExists reports whether a partition exists; OffsetCommit, TxnOffsetCommit and
	// OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION for others (KafkaApis does this
	// before the coordinator). Nil accepts everything.
	TopicExists func(topic string, partition int32) bool
	// TopicID and TopicName map between topic names and ids for the topic-id versions
	// (OffsetCommit v10, OffsetFetch v10, TxnOffsetCommit v6). Nil: ids unknown.
	TopicID   func(topic string) ([16]byte, bool)
	TopicName func(id [16]byte) (string, bool)
	// VerifyTxn checks, for TxnOffsetCommit, that the transaction includes this group's
	// offsets partition (KIP-890 verification); returns 0 or an error code. May be nil.
	// version is the TxnOffsetCommit version: from v5 a transaction-version-2 client relies
	// on the broker adding the partition implicitly.
	VerifyTxn func(ctx context.Context, transactionalID string, pid int64, epoch int16, partition int32, version int16) int16
	// IsOtherGroupType reports that a group id is taken by a share group; a classic
	// JoinGroup for it is refused. Nil: no other group types.
	IsOtherGroupType func(groupID string) bool

	// Consumer groups (KIP-848, ConsumerGroupHeartbeat).
	//
	// ConsumerMaxSize is group.consumer.max.size (<= 0: unlimited, Kafka's
	// Integer.MAX_VALUE).
	ConsumerMaxSize int32
	// ConsumerMigrationPolicy is group.consumer.migration.policy; the zero value is
	// Kafka's default, bidirectional.
	ConsumerMigrationPolicy MigrationPolicy
	// ConsumerAssignors is group.consumer.assignors, the default first (nil: uniform,
	// range). Only the server-side uniform and range assignors exist.
	ConsumerAssignors []string
	// ConsumerTimeouts is a group's consumer.session.timeout.ms and
	// consumer.heartbeat.interval.ms (its own or the broker's group.consumer.* ones).
	// Nil: Kafka's defaults, 45000 and 5000.
	ConsumerTimeouts func(groupID string) (sessionMs, heartbeatMs int32)
	// TopicMeta is a topic's id and partition count; TopicNames lists every topic (for
	// regex subscriptions). Nil: no topics, so members are assigned nothing.
	TopicMeta  func(name string) (id [16]byte, partitions int32, ok bool)
	TopicNames func() []string

	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.MinSessionTimeoutMs == 0 {
		c.MinSessionTimeoutMs = 6000
	}
	if c.MaxSessionTimeoutMs == 0 {
		c.MaxSessionTimeoutMs = 1800000
	}
	if c.OffsetsRetentionMs == 0 {
		c.OffsetsRetentionMs = 7 * 24 * 3600 * 1000
	}
	if c.OffsetMetadataMaxBytes == 0 {
		c.OffsetMetadataMaxBytes = 4096
	}
	if c.NewMemberJoinTimeoutMs == 0 {
		c.NewMemberJoinTimeoutMs = 5 * 60 * 1000
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = 10 * time.Minute
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.MaxQueuedWrites <= 0 {
		c.MaxQueuedWrites = 4096
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Client identifies the client of a request: Kafka stores the client id and host on
// every member (DescribeGroups shows them) and derives member ids from the client id.
type Client struct {
	ID   string // client.id of the request header
	Host string // Kafka's form is "/" + IP address
}

type clientKey struct{}

// WithClient returns ctx carrying the request's client, for JoinGroup.
func WithClient(ctx context.Context, c Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

func clientFrom(ctx context.Context) Client {
	c, _ := ctx.Value(clientKey{}).(Client)
	return c
}

// part is one owned __consumer_offsets partition: its core and its write queue.
type part struct {
	log coordlog.Partition

	mu     sync.Mutex // guards shard and queue
	shard  *shard
	queue  []write
	failed error // a failed append: the partition stops serving
	// inflight counts writes queued or being appended (tests wait for it to reach 0).
	inflight int
	wake     chan struct{}
}

// Coordinator is the edge of the group coordinator: locking, the ticker, the per-partition
// writers and the waiting JoinGroup/SyncGroup requests.
type Coordinator struct {
	cfg   Config
	parts map[int32]*part

	mu        sync.Mutex // guards waiters, nextToken, closed
	waiters   map[uint64]chan any
	nextToken uint64
	closed    bool

	lastCleanupMs int64 // ticker goroutine / Tick only
	tickMu        sync.Mutex

	done chan struct{}
	wg   sync.WaitGroup
}

// New loads every partition by replaying its log and starts the writers and the ticker.
func New(cfg Config, parts []coordlog.Partition) (*Coordinator, error) {
	cfg.defaults()
	c := &Coordinator{cfg: cfg, parts: map[int32]*part{}, waiters: map[uint64]chan any{}, done: make(chan struct{})}
	nowMs := cfg.Now().UnixMilli()
	c.lastCleanupMs = nowMs
	sc := shardConfig{
		initialRebalanceDelayMs: cfg.InitialRebalanceDelayMs,
		maxGroupSize:            cfg.MaxGroupSize,
		offsetsRetentionMs:      cfg.OffsetsRetentionMs,
		offsetMetadataMaxBytes:  cfg.OffsetMetadataMaxBytes,
		newMemberJoinTimeoutMs:  cfg.NewMemberJoinTimeoutMs,
		topicID:                 cfg.TopicID,
		consumerMaxSize:         cfg.ConsumerMaxSize,
		migration:               cfg.ConsumerMigrationPolicy,
		consumerAssignors:       cfg.ConsumerAssignors,
		consumerTimeouts:        cfg.ConsumerTimeouts,
		topicMeta:               cfg.TopicMeta,
		topicNames:              cfg.TopicNames,
		topicName:               cfg.TopicName,
	}
	for _, lp := range parts {
		s := newShard(lp.Index(), sc, randomMemberID)
		if err := s.replayLog(lp, nowMs); err != nil {
			return nil, fmt.Errorf("group: loading __consumer_offsets-%d: %w", lp.Index(), err)
		}
		c.tombstoneOutlivedOffsets(lp, s)
		p := &part{log: lp, shard: s, wake: make(chan struct{}, 1)}
		var out output
		s.loaded(nowMs, &out)
		c.parts[lp.Index()] = p
		p.mu.Lock()
		c.apply(p, &out)
		p.mu.Unlock()
	}
	for _, p := range c.parts {
		c.wg.Add(1)
		go c.writer(p)
	}
	if cfg.TickInterval > 0 {
		c.wg.Add(1)
		go c.ticker()
	}
	return c, nil
}

// tombstoneOutlivedOffsets removes, at load, the offsets of topics deleted (or deleted and
// re-created) without their tombstones reaching the log: a crash between the removal of
// the topic's record and the tombstones, or a commit racing the deletion. The tombstones
// are written before the coordinator serves. If they cannot be (a full disk), the offsets
// still leave memory and the broker starts: the next load finds them outlived again, as
// their stored topic id no longer matches (only an offset stored without an id, which
// exactq never writes, could then be taken for a topic re-created meanwhile).
func (c *Coordinator) tombstoneOutlivedOffsets(lp coordlog.Partition, s *shard) {
	records, keys := s.tombstonesWhere(func(k tp, o committed) bool { return s.outlivedTopic(k.topic, o.topicID) })
	if len(records) == 0 {
		return
	}
	s.dropOffsets(keys)
	if _, err := lp.Append(context.Background(), coordlog.Batch{Records: records, ProducerID: -1}); err != nil {
		c.cfg.Logger.Error("group: tombstoning offsets of deleted topics failed; retried at the next load",
			"partition", lp.Index(), "offsets", len(keys), "err", err)
		return
	}
	c.cfg.Logger.Info("removed offsets of deleted topics", "partition", lp.Index(), "offsets", len(keys))
}

// DeleteTopicOffsets removes every group's offsets, committed and pending, of a deleted
// topic (GroupCoordinatorService.onMetadataUpdate -> onTopicsDeleted): they leave memory
// at once and their tombstones are durable when it returns nil. The broker calls it after
// the topic's record is gone; on an error the next load removes what is left.
func (c *Coordinator) DeleteTopicOffsets(ctx context.Context, topic string, id [16]byte) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errors.New("group: coordinator closed")
	}
	done := make(chan error, len(c.parts))
	for _, p := range c.parts {
		err := c.runUnbounded(p, func(s *shard, _ int64, out *output) {
			records := s.deletedTopicOffsets(topic, id)
			if len(records) == 0 {
				done <- nil
				return
			}
			out.writes = append(out.writes, write{records: records, producerID: -1,
				done: func(_ int64, err error, _ *output) { done <- err }})
		})
		if err != nil {
			done <- err
		}
	}
	var errs []error
	for range c.parts {
		select {
		case err := <-done:
			errs = append(errs, err)
		case <-ctx.Done():
			return fmt.Errorf("group: tombstones of topic %s: %w", topic, ctx.Err())
		}
	}
	return errors.Join(errs...)
}

// randomMemberID is Kafka's member id: prefix + "-" + a random UUID.
func randomMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// PartitionFor is the __consumer_offsets partition of a group:
// Utils.abs(groupId.hashCode()) % NumPartitions.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return coordlog.PartitionFor(groupID, c.cfg.NumPartitions)
}

// Close stops the ticker and writers and answers every waiting request NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for tok, ch := range c.waiters {
		delete(c.waiters, tok)
		close(ch)
	}
	c.mu.Unlock()
	close(c.done)
	c.wg.Wait()
}

func (c *Coordinator) partFor(groupID string) *part {
	return c.parts[c.PartitionFor(groupID)]
}

func (c *Coordinator) newWaiter() (uint64, chan any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, nil
	}
	c.nextToken++
	ch := make(chan any, 1)
	c.waiters[c.nextToken] = ch
	return c.nextToken, ch
}

func (c *Coordinator) dropWaiter(tok uint64) {
	c.mu.Lock()
	delete(c.waiters, tok)
	c.mu.Unlock()
}

// run feeds one input to p's core under its lock, then fires deadlines due now (a zero
// delay fires at once) and applies the output.
func (c *Coordinator) run(p *part, fn func(s *shard, nowMs int64, out *output)) error {
	return c.runQueued(p, c.cfg.MaxQueuedWrites, fn)
}

// runUnbounded is run for an input that must not be refused for a full write queue (it
// adds one write): a topic deletion, whose commit point has passed.
func (c *Coordinator) runUnbounded(p *part, fn func(s *shard, nowMs int64, out *output)) error {
	return c.runQueued(p, math.MaxInt, fn)
}

func (c *Coordinator) runQueued(p *part, maxQueued int, fn func(s *shard, nowMs int64, out *output)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return p.failed
	}
	if len(p.queue) >= maxQueued {
		return errBusy
	}
	nowMs := c.cfg.Now().UnixMilli()
	var out output
	fn(p.shard, nowMs, &out)
	p.shard.expire(nowMs, &out)
	c.apply(p, &out)
	return nil
}

var errBusy = errors.New("group: write queue full")

// apply delivers completions and queues writes; p.mu is held.
func (c *Coordinator) apply(p *part, out *output) {
	if len(out.completions) > 0 {
		c.mu.Lock()
		for _, cm := range out.completions {
			if ch, ok := c.waiters[cm.token]; ok {
				delete(c.waiters, cm.token)
				ch <- cm.resp
			}
		}
		c.mu.Unlock()
	}
	if len(out.writes) > 0 {
		p.queue = append(p.queue, out.writes...)
		p.inflight += len(out.writes)
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// writer appends p's queued writes in order. Consecutive plain writes share one batch
// (and so one fsync); a transactional write is a batch of its own.
func (c *Coordinator) writer(p *part) {
	defer c.wg.Done()
	for {
		stop := false
		select {
		case <-c.done:
			stop = true // drain what is queued, then stop
		case <-p.wake:
		}
		for {
			p.mu.Lock()
			ws := p.queue
			p.queue = nil
			p.mu.Unlock()
			if len(ws) == 0 {
				break
			}
			for i := 0; i < len(ws); {
				j := i + 1
				if ws[i].producerID < 0 {
					for j < len(ws) && ws[j].producerID < 0 {
						j++
					}
				}
				c.appendBatch(p, ws[i:j])
				i = j
			}
		}
		if stop {
			return
		}
	}
}

// replayLog rebuilds s from every batch stored in lp: records (a transactional batch's
// offsets pending under its producer) and the transaction markers that decide them.
func (s *shard) replayLog(lp coordlog.Partition, nowMs int64) error {
	return lp.Replay(func(b coordlog.Stored) error {
		if b.Marker != nil {
			s.replayMarker(b.ProducerID, b.Marker.Commit)
			return nil
		}
		pid := int64(-1)
		if b.Transactional {
			pid = b.ProducerID
		}
		for _, r := range b.Records {
			if err := s.replayRecord(r, b.BaseOffset+int64(r.OffsetDelta), pid, nowMs); err != nil {
				return err
			}
		}
		return nil
	})
}

func (c *Coordinator) appendBatch(p *part, ws []write) {
	b := coordlog.Batch{ProducerID: ws[0].producerID, ProducerEpoch: ws[0].producerEpoch}
	if b.ProducerID < 0 {
		b.ProducerID = -1
	}
	for _, w := range ws {
		b.Records = append(b.Records, w.records...)
	}
	base, err := p.log.Append(context.Background(), b)
	if err != nil {
		c.cfg.Logger.Error("group: append to __consumer_offsets failed; partition stops serving",
			"partition", p.log.Index(), "err", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight -= len(ws)
	if err != nil && p.failed == nil {
		p.failed = err
	}
	nowMs := c.cfg.Now().UnixMilli()
	var out output
	off := base
	for _, w := range ws {
		if w.done != nil {
			w.done(off, err, &out)
		}
		off += int64(len(w.records))
	}
	p.shard.expire(nowMs, &out)
	c.apply(p, &out)
}

func (c *Coordinator) ticker() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.Tick()
		}
	}
}

// Tick fires every deadline due now (session, rebalance, sync and initial-delay
// timeouts) and, every RetentionCheckInterval, expires offsets and empty groups. The
// ticker goroutine calls it; tests with TickInterval < 0 call it after moving the clock.
func (c *Coordinator) Tick() {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	nowMs := c.cfg.Now().UnixMilli()
	cleanup := nowMs-c.lastCleanupMs >= c.cfg.RetentionCheckInterval.Milliseconds()
	if cleanup {
		c.lastCleanupMs = nowMs
	}
	for _, p := range c.parts {
		_ = c.run(p, func(s *shard, nowMs int64, out *output) {
			if cleanup {
				s.cleanup(nowMs, out)
			}
		})
	}
}

// CompleteTxn applies a transaction marker the broker wrote (durably) to
// __consumer_offsets partition `partition`: commit makes producer pid's pending offsets
// visible, abort drops them.
func (c *Coordinator) CompleteTxn(partition int32, pid int64, commit bool) {
	p := c.parts[partition]
	if p == nil {
		return
	}
	p.mu.Lock()
	p.shard.offsets.completeTxn(pid, commit)
	p.mu.Unlock()
}

// wait returns an immediate response when the request already completed, or a wait func.
func (c *Coordinator) wait(ctx context.Context, tok uint64, ch chan any, conv func(any) kmsg.Response, fail func(code int16) kmsg.Response) (kmsg.Response, func() kmsg.Response) {
	select {
	case r, ok := <-ch:
		if !ok {
			return fail(kerr.NotCoordinator.Code), nil
		}
		return conv(r), nil
	default:
	}
	return nil, func() kmsg.Response {
		select {
		case r, ok := <-ch:
			if !ok {
				return fail(kerr.NotCoordinator.Code)
			}
			return conv(r)
		case <-ctx.Done():
			c.dropWaiter(tok)
			return fail(kerr.NotCoordinator.Code)
		}
	}
}

// runParked runs a request whose answer comes back as a completion of a token.
func (c *Coordinator) runParked(ctx context.Context, groupID string, fn func(s *shard, tok uint64, nowMs int64, out *output),
	conv func(any) kmsg.Response, fail func(code int16) kmsg.Response) (kmsg.Response, func() kmsg.Response) {
	p := c.partFor(groupID)
	if p == nil {
		return fail(kerr.NotCoordinator.Code), nil
	}
	tok, ch := c.newWaiter()
	if ch == nil {
		return fail(kerr.NotCoordinator.Code), nil
	}
	if err := c.run(p, func(s *shard, nowMs int64, out *output) { fn(s, tok, nowMs, out) }); err != nil {
		c.dropWaiter(tok)
		return fail(kerr.CoordinatorNotAvailable.Code), nil
	}
	return c.wait(ctx, tok, ch, conv, fail)
}

// Exists reports whether a classic or consumer group with this id exists (in any state but Dead), for
// the share-group coordinator's check that group ids are not shared across group types.
func (c *Coordinator) Exists(groupID string) bool {
	p := c.partFor(groupID)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shard.consumers[groupID] != nil {
		return true
	}
	g, ok := p.shard.groups[groupID]
	return ok && g.state != stateDead
}
