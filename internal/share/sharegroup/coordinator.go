package sharegroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/coordlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a Coordinator. Zero values take Kafka 4.4's defaults.
type Config struct {
	// NumPartitions is offsets.topic.num.partitions (50): share groups live in the same
	// __consumer_offsets partitions as classic groups, chosen the same way.
	NumPartitions int32
	// SessionTimeoutMs is group.share.session.timeout.ms (45000); HeartbeatIntervalMs is
	// group.share.heartbeat.interval.ms (5000), returned to clients; MaxSize is
	// group.share.max.size (200).
	SessionTimeoutMs, HeartbeatIntervalMs, MaxSize int32
	// AssignmentIntervalMs is group.share.assignment.interval.ms (KIP-1263, 4.3+; default
	// 1000): the least time between two target-assignment computations of a group. A
	// negative value means 0 (compute on every epoch bump).
	AssignmentIntervalMs int64
	// InitializeRetryIntervalMs is group.share.initialize.retry.interval.ms (internal,
	// 30000): an initialization still pending after this long is retried.
	InitializeRetryIntervalMs int64
	// TickInterval is how often the ticker fires session expiries (default 100ms);
	// negative starts no goroutine and the caller drives Tick (tests).
	TickInterval time.Duration

	// Topics resolves a subscribed topic name to its id and partition count (broker
	// metadata). Required.
	Topics func(name string) (id [16]byte, partitions int32, ok bool)
	// IsOtherGroupType reports that a group id is taken by a group of another type (a
	// classic group): share heartbeats and describes then get GROUP_ID_NOT_FOUND, as
	// GroupMetadataManager.getOrMaybeCreateShareGroup answers. May be nil.
	IsOtherGroupType func(groupID string) bool
	// InitializeShareState initializes one share partition's state (kip-932 §3.3,
	// InitializeShareGroupState) and returns once it is durable; the partition becomes
	// assignable only after. stateEpoch is the group epoch; startOffset is -1 for a topic
	// new to the group (share.auto.offset.reset applies) and 0 for new partitions of a
	// topic the group already had. Nil: every partition is initialized at once.
	InitializeShareState func(ctx context.Context, groupID string, topicID [16]byte, partition int32, stateEpoch int32, startOffset int64) error
	// ResetShareState re-initializes one share partition's state at startOffset for
	// AlterShareGroupOffsets and returns once it is durable; any live state of the
	// partition is dropped. stateEpoch is the group epoch (the store may write a higher
	// one). Nil: InitializeShareState is used.
	ResetShareState func(ctx context.Context, groupID string, topicID [16]byte, partition int32, stateEpoch int32, startOffset int64) error
	// DeleteShareState deletes one share partition's state when its group or its offsets
	// are deleted (DeleteShareGroupState). Nil: nothing to delete.
	DeleteShareState func(ctx context.Context, groupID string, topicID [16]byte, partition int32) error

	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.Topics == nil {
		return errors.New("sharegroup: Config.Topics is required")
	}
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.SessionTimeoutMs <= 0 {
		c.SessionTimeoutMs = 45000
	}
	if c.HeartbeatIntervalMs <= 0 {
		c.HeartbeatIntervalMs = 5000
	}
	if c.MaxSize <= 0 {
		c.MaxSize = 200
	}
	if c.AssignmentIntervalMs == 0 {
		c.AssignmentIntervalMs = 1000
	} else if c.AssignmentIntervalMs < 0 {
		c.AssignmentIntervalMs = 0
	}
	if c.InitializeRetryIntervalMs <= 0 {
		c.InitializeRetryIntervalMs = 30000
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.IsOtherGroupType == nil {
		c.IsOtherGroupType = func(string) bool { return false }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// part is one owned __consumer_offsets partition.
type part struct {
	log coordlog.Partition

	mu     sync.Mutex // guards shard and failed; held across the append of a change
	shard  *shard
	failed error // a failed append: the partition stops serving until reloaded
}

// Coordinator is the edge of the share-group coordinator: a lock per partition, the
// appends to __consumer_offsets, the session-expiry ticker and share-state
// initialization.
//
// A change is computed by the core, appended (durably) while the partition lock is held,
// and only then replayed into memory, so memory never holds what the log lacks and
// writes of a partition reach the log in the order they were decided. Holding the lock
// across the append serializes a partition's share-group changes behind its fsyncs;
// heartbeats that change nothing append nothing.
type Coordinator struct {
	cfg   Config
	parts map[int32]*part

	cbMu      sync.Mutex // guards onRemoved
	onRemoved []func(groupID, memberID string)

	tickMu    sync.Mutex // one Tick at a time
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New loads every partition by replaying its log (records of other group types are
// skipped), schedules every member's session, and starts the ticker.
func New(cfg Config, parts []coordlog.Partition) (*Coordinator, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, parts: map[int32]*part{}, done: make(chan struct{})}
	nowMs := cfg.Now().UnixMilli()
	cc := coreConfig{
		sessionTimeoutMs:     int64(cfg.SessionTimeoutMs),
		heartbeatIntervalMs:  cfg.HeartbeatIntervalMs,
		maxSize:              int(cfg.MaxSize),
		assignmentIntervalMs: cfg.AssignmentIntervalMs,
		initRetryIntervalMs:  cfg.InitializeRetryIntervalMs,
		topics:               cfg.Topics,
	}
	for _, lp := range parts {
		s := newShard(cc)
		if err := load(s, lp, nowMs); err != nil {
			return nil, err
		}
		s.loaded(nowMs)
		c.parts[lp.Index()] = &part{log: lp, shard: s}
	}
	if cfg.TickInterval > 0 {
		c.wg.Add(1)
		go c.ticker()
	}
	return c, nil
}

func load(s *shard, lp coordlog.Partition, nowMs int64) error {
	err := lp.Replay(func(b coordlog.Stored) error {
		if b.Marker != nil || b.Transactional {
			// Share-group records are never transactional; transactional batches
			// here are TxnOffsetCommit offsets, which belong to the classic coordinator.
			return nil
		}
		for _, r := range b.Records {
			if err := s.replay(r, nowMs); err != nil {
				return fmt.Errorf("offset %d: %w", b.BaseOffset+int64(r.OffsetDelta), err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sharegroup: loading __consumer_offsets-%d: %w", lp.Index(), err)
	}
	return nil
}

// PartitionFor is the __consumer_offsets partition of a group.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return coordlog.PartitionFor(groupID, c.cfg.NumPartitions)
}

func (c *Coordinator) partFor(groupID string) *part { return c.parts[c.PartitionFor(groupID)] }

// Close stops the ticker. Requests after Close still work on memory but their appends
// fail once the broker closes the partitions.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() { close(c.done) })
	c.wg.Wait()
}

// OnMemberRemoved registers fn, called (without locks held) for every member that leaves
// or is fenced after its session expired, so the share fetch path can release the
// member's acquired records and drop its share sessions.
func (c *Coordinator) OnMemberRemoved(fn func(groupID, memberID string)) {
	c.cbMu.Lock()
	c.onRemoved = append(c.onRemoved, fn)
	c.cbMu.Unlock()
}

func (c *Coordinator) notify(removed []memberRef) {
	if len(removed) == 0 {
		return
	}
	c.cbMu.Lock()
	fns := slices.Clone(c.onRemoved)
	c.cbMu.Unlock()
	for _, r := range removed {
		for _, fn := range fns {
			fn(r.groupID, r.memberID)
		}
	}
}

var errNotCoordinator = errors.New("sharegroup: partition not served")

// commit makes res durable and applies it; p.mu must be held.
func (c *Coordinator) commit(p *part, res result, nowMs int64) error {
	if p.failed != nil {
		return p.failed
	}
	if len(res.records) > 0 {
		if _, err := p.log.Append(context.Background(), coordlog.Batch{Records: res.records, ProducerID: -1}); err != nil {
			p.failed = fmt.Errorf("sharegroup: append to __consumer_offsets-%d: %w", p.log.Index(), err)
			c.cfg.Logger.Error("share group write failed; partition stops serving", "partition", p.log.Index(), "err", err)
			return p.failed
		}
		for _, r := range res.records {
			if err := p.shard.replay(r, nowMs); err != nil {
				// The core wrote a record it cannot read back: a bug. Memory may be
				// partially updated, so stop serving this partition.
				p.failed = fmt.Errorf("sharegroup: replaying own record: %w", err)
				return p.failed
			}
		}
	}
	p.shard.applySoft(nowMs, res)
	return nil
}

// validateHeartbeat is throwIfShareGroupHeartbeatRequestIsInvalid plus KafkaApis's
// member-id length check.
func validateHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) string {
	switch {
	case req.MemberID == "":
		return "MemberId can't be empty."
	case len(req.MemberID) > 36:
		return "MemberId must be at most 36 characters."
	case req.GroupID == "":
		return "GroupId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return "RackId can't be empty."
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return "SubscribedTopicNames must be set in first request."
	case req.MemberEpoch < -1:
		return "MemberEpoch is invalid."
	}
	return ""
}

type clientKey struct{}

// WithClient returns ctx carrying the request's client id and host (Kafka's form of the
// host is "/" + IP address); members record them and ShareGroupDescribe shows them.
func WithClient(ctx context.Context, clientID, host string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{id: clientID, host: host})
}

func clientFrom(ctx context.Context) clientInfo {
	cl, _ := ctx.Value(clientKey{}).(clientInfo)
	return cl
}

// ShareGroupHeartbeat serves ShareGroupHeartbeat v1 (v0 was removed in Kafka 4.1 and
// gets UNSUPPORTED_VERSION). The client id and host come from the context
// (WithClient). Partitions that need share-state initialization are initialized
// before this returns; they are assigned from the member's next heartbeat on, as in Kafka.
func (c *Coordinator) ShareGroupHeartbeat(ctx context.Context, version int16, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.Version = version
	fail := func(err *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = err.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if version < 1 {
		return fail(kerr.UnsupportedVersion, "")
	}
	if msg := validateHeartbeat(req); msg != "" {
		return fail(kerr.InvalidRequest, msg)
	}
	p := c.partFor(req.GroupID)
	if p == nil {
		return fail(kerr.NotCoordinator, "")
	}
	if c.cfg.IsOtherGroupType(req.GroupID) {
		return fail(kerr.GroupIDNotFound, "Group "+req.GroupID+" is not a share group.")
	}
	cl := clientFrom(ctx)
	p.mu.Lock()
	nowMs := c.cfg.Now().UnixMilli()
	if p.failed != nil {
		p.mu.Unlock()
		return fail(kerr.NotCoordinator, "")
	}
	out, res := p.shard.heartbeat(nowMs, req, cl)
	err := c.commit(p, res, nowMs)
	p.mu.Unlock()
	if err != nil {
		return fail(kerr.CoordinatorNotAvailable, "")
	}
	out.Version = version
	c.notify(res.removed)
	if len(res.inits) > 0 {
		c.initialize(ctx, p, res.inits)
	}
	return out
}

// initialize runs the share-state initializations a heartbeat asked for, then records
// which succeeded (now assignable) and which failed (retried by a later heartbeat).
func (c *Coordinator) initialize(ctx context.Context, p *part, jobs []initJob) {
	var done, failed []initJob
	for _, j := range jobs {
		var ok, bad []int32
		for _, partition := range j.partitions {
			var err error
			if c.cfg.InitializeShareState != nil {
				err = c.cfg.InitializeShareState(ctx, j.groupID, j.topicID, partition, j.stateEpoch, j.startOffset)
			}
			if err != nil {
				c.cfg.Logger.Warn("share-state initialization failed", "group", j.groupID, "topic", j.topicName, "partition", partition, "err", err)
				bad = append(bad, partition)
			} else {
				ok = append(ok, partition)
			}
		}
		if len(ok) > 0 {
			jj := j
			jj.partitions = ok
			done = append(done, jj)
		}
		if len(bad) > 0 {
			jj := j
			jj.partitions = bad
			failed = append(failed, jj)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	nowMs := c.cfg.Now().UnixMilli()
	if len(done) > 0 {
		_ = c.commit(p, p.shard.initialized(nowMs, jobs[0].groupID, done), nowMs)
	}
	if len(failed) > 0 {
		_ = c.commit(p, p.shard.uninitialized(jobs[0].groupID, failed), nowMs)
	}
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

// Tick fences every member whose session expired (the ticker calls it; tests call it
// after moving their clock).
func (c *Coordinator) Tick() {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	for _, p := range c.parts {
		var removed []memberRef
		p.mu.Lock()
		nowMs := c.cfg.Now().UnixMilli()
		for _, ref := range p.shard.expired(nowMs) {
			res := p.shard.expire(nowMs, ref)
			if err := c.commit(p, res, nowMs); err != nil {
				break
			}
			c.cfg.Logger.Info("share group member session expired", "group", ref.groupID, "member", ref.memberID)
			removed = append(removed, res.removed...)
		}
		p.mu.Unlock()
		c.notify(removed)
	}
}

// ShareGroupDescribe serves ShareGroupDescribe v1.
func (c *Coordinator) ShareGroupDescribe(ctx context.Context, version int16, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := kmsg.NewPtrShareGroupDescribeResponse()
	resp.Version = version
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		failg := func(err *kerr.Error, msg string) {
			g.ErrorCode = err.Code
			if msg != "" {
				g.ErrorMessage = &msg
			}
		}
		switch p := c.partFor(id); {
		case version < 1:
			failg(kerr.UnsupportedVersion, "")
		case id == "":
			failg(kerr.InvalidGroupID, "")
		case p == nil:
			failg(kerr.NotCoordinator, "")
		case c.cfg.IsOtherGroupType(id):
			failg(kerr.GroupIDNotFound, "Group "+id+" is not a share group.")
		default:
			p.mu.Lock()
			switch sg := p.shard.groups[id]; {
			case p.failed != nil:
				failg(kerr.NotCoordinator, "")
			case sg == nil:
				failg(kerr.GroupIDNotFound, "Group "+id+" not found.")
			default:
				c.describe(p.shard, sg, &g)
			}
			p.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

func (c *Coordinator) describe(s *shard, sg *group, out *kmsg.ShareGroupDescribeResponseGroup) {
	out.GroupState = sg.state()
	out.GroupEpoch = sg.epoch
	out.AssignmentEpoch = sg.assignmentEpoch
	out.Assignor = AssignorName
	names := map[[16]byte]string{}
	for _, es := range []map[[16]byte]*initEntry{sg.initialized, sg.initializing} {
		for id, e := range es {
			names[id] = e.name
		}
	}
	for _, mid := range sg.sortedMembers() {
		m := sg.members[mid]
		for _, t := range m.topics {
			if id, _, ok := s.cfg.topics(t); ok {
				names[id] = t
			}
		}
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.RackID = m.rackID
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.SubscribedTopicNames = slices.Clone(m.topics)
		dm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
		for _, t := range m.assigned.sortedTopics() {
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID = t
			tp.Topic = names[t]
			tp.Partitions = slices.Clone(m.assigned[t])
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		out.Members = append(out.Members, dm)
	}
}

// ListGroups lists the share groups for the broker to merge with the classic
// coordinator's answer (ProtocolType and GroupType "share", GroupState "Empty" or
// "Stable"). statesFilter and typesFilter are ListGroups v4/v5 filters, matched
// case-insensitively; empty means all.
func (c *Coordinator) ListGroups(statesFilter, typesFilter []string) []kmsg.ListGroupsResponseGroup {
	// GroupMetadataManager.listGroups trims and lower-cases the states; types are only
	// lower-cased (Group.GroupType.parse).
	match := func(filter []string, v string, trim bool) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool {
			if trim {
				f = strings.TrimSpace(f)
			}
			return strings.EqualFold(f, v)
		})
	}
	if !match(typesFilter, "share", false) {
		return nil
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, idx := range slices.Sorted(maps.Keys(c.parts)) {
		p := c.parts[idx]
		p.mu.Lock()
		for _, id := range slices.Sorted(maps.Keys(p.shard.groups)) {
			st := p.shard.groups[id].state()
			if !match(statesFilter, st, true) {
				continue
			}
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType, g.GroupState, g.GroupType = id, "share", st, "share"
			out = append(out, g)
		}
		p.mu.Unlock()
	}
	return out
}

// DeleteGroup deletes an empty share group: the share state of its partitions first
// (DeleteShareState; initialized, initializing and still-deleting topics), then its
// records. The group's partition lock is held throughout, so no member joins half-way. It
// returns kerr.GroupIDNotFound, kerr.NonEmptyGroup, kerr.NotCoordinator,
// kerr.CoordinatorNotAvailable or the DeleteShareState error (the group is then kept and a
// retry deletes what is left).
func (c *Coordinator) DeleteGroup(ctx context.Context, groupID string) error {
	p := c.partFor(groupID)
	if p == nil {
		return kerr.NotCoordinator
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return kerr.NotCoordinator
	}
	res, jobs, kerrv := p.shard.deleteGroup(groupID)
	if kerrv != nil {
		return kerrv
	}
	if c.cfg.DeleteShareState != nil {
		for _, j := range jobs {
			for _, partition := range j.partitions {
				if err := c.cfg.DeleteShareState(ctx, groupID, j.topicID, partition); err != nil {
					return err
				}
			}
		}
	}
	if err := c.commit(p, res, c.cfg.Now().UnixMilli()); err != nil {
		return kerr.CoordinatorNotAvailable
	}
	return nil
}

// DeleteTopics removes deleted topics from every share group's share-partition state
// metadata, durably (Kafka's maybeCleanupShareGroupState, run when topics are deleted): a
// topic re-created with the same name has a new id and is initialized afresh. Partitions
// that fail are skipped and reported in the error; the rest are done.
func (c *Coordinator) DeleteTopics(deleted func(topicID [16]byte) bool) error {
	var errs []error
	for _, idx := range slices.Sorted(maps.Keys(c.parts)) {
		p := c.parts[idx]
		p.mu.Lock()
		if p.failed == nil {
			if err := c.commit(p, p.shard.topicsDeleted(deleted), c.cfg.Now().UnixMilli()); err != nil {
				errs = append(errs, err)
			}
		}
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Exists reports whether a share group with this id exists (the broker's group-id
// namespace check for the classic coordinator: JoinGroup gets INCONSISTENT_GROUP_PROTOCOL
// for it).
func (c *Coordinator) Exists(groupID string) bool {
	p := c.partFor(groupID)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shard.groups[groupID] != nil
}

// Owns reports whether the member currently holds the partition in its assignment.
// Kafka's ShareFetch and ShareAcknowledge do not check this (SharePartitionManager only
// keys acquisitions by member id), so the broker must not reject on it to stay
// compatible; it serves diagnostics and tests.
func (c *Coordinator) Owns(groupID, memberID string, topicID [16]byte, partition int32) bool {
	p := c.partFor(groupID)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.shard.groups[groupID]
	if g == nil || g.members[memberID] == nil {
		return false
	}
	return g.members[memberID].assigned.has(topicID, partition)
}

// CheckMember validates a member id and epoch for KIP-1289 staging (exactq decision D7):
// 0 when the member exists in the group with exactly this epoch; UNKNOWN_MEMBER_ID when the
// group or member is unknown; FENCED_MEMBER_EPOCH when the epoch is stale or ahead.
func (c *Coordinator) CheckMember(groupID, memberID string, epoch int32) int16 {
	p := c.partFor(groupID)
	if p == nil {
		return kerr.NotCoordinator.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.shard.groups[groupID]
	if g == nil || g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	if g.members[memberID].epoch != epoch {
		return kerr.FencedMemberEpoch.Code
	}
	return 0
}

// InitializedPartitions lists, per topic id, the share partitions whose state the group has
// initialized: the partitions DescribeShareGroupOffsets reports when asked for all topics.
func (c *Coordinator) InitializedPartitions(groupID string) Assignment {
	p := c.partFor(groupID)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.shard.groups[groupID]
	if g == nil {
		return nil
	}
	out := Assignment{}
	for id, e := range g.initialized {
		out[id] = e.sorted()
	}
	return out
}
