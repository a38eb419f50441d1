package group

import (
	"container/heap"

	"github.com/exactq/exactq/internal/group/consumer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka error codes used by the core.
var (
	errUnknownServer          = kerr.UnknownServerError.Code
	errCoordinatorNotAvail    = kerr.CoordinatorNotAvailable.Code
	errIllegalGeneration      = kerr.IllegalGeneration.Code
	errInconsistentProtocol   = kerr.InconsistentGroupProtocol.Code
	errUnknownMemberID        = kerr.UnknownMemberID.Code
	errInvalidSessionTimeout  = kerr.InvalidSessionTimeout.Code
	errRebalanceInProgress    = kerr.RebalanceInProgress.Code
	errInvalidGroupID         = kerr.InvalidGroupID.Code
	errOffsetMetadataTooLarge = kerr.OffsetMetadataTooLarge.Code
	errNonEmptyGroup          = kerr.NonEmptyGroup.Code
	errGroupIDNotFound        = kerr.GroupIDNotFound.Code
	errFencedInstanceID       = kerr.FencedInstanceID.Code
	errGroupMaxSizeReached    = kerr.GroupMaxSizeReached.Code
	errMemberIDRequired       = kerr.MemberIDRequired.Code
	errUnstableOffsetCommit   = kerr.UnstableOffsetCommit.Code
	errGroupSubscribedToTopic = kerr.GroupSubscribedToTopic.Code
	errUnknownTopicOrPart     = kerr.UnknownTopicOrPartition.Code
	errUnknownTopicID         = kerr.UnknownTopicID.Code
	// KIP-848 consumer groups.
	errFencedMemberEpoch        = kerr.FencedMemberEpoch.Code
	errStaleMemberEpoch         = kerr.StaleMemberEpoch.Code
	errUnreleasedInstanceID     = kerr.UnreleasedInstanceID.Code
	errUnsupportedVersion       = kerr.UnsupportedVersion.Code
	errInvalidRegularExpression = kerr.InvalidRegularExpression.Code
)

// shardConfig is the part of Config the core needs.
type shardConfig struct {
	initialRebalanceDelayMs int32
	maxGroupSize            int32
	offsetsRetentionMs      int64
	offsetMetadataMaxBytes  int32
	newMemberJoinTimeoutMs  int32 // group.classic.new.member.join.timeout.ms (5 minutes)
	// topicID is Config.TopicID: the current id of a topic name (nil: ids unknown).
	topicID func(topic string) ([16]byte, bool)

	// Consumer groups (KIP-848).
	consumerMaxSize   int32           // group.consumer.max.size (<= 0: unlimited)
	migration         MigrationPolicy // group.consumer.migration.policy
	consumerAssignors []string        // group.consumer.assignors, the default first
	// consumerTimeouts is a group's session timeout and heartbeat interval (nil:
	// Kafka's defaults, 45 s and 5 s).
	consumerTimeouts func(groupID string) (sessionMs, heartbeatMs int32)
	// topicMeta is a topic's id and partition count; topicNames every topic;
	// topicName a topic id's name. Never nil (newShard fills them in).
	topicMeta  func(name string) (id [16]byte, partitions int32, ok bool)
	topicNames func() []string
	topicName  func(id [16]byte) (string, bool)
}

// write is a group of records the shard wants made durable, in order with its other
// writes. done runs under the shard lock once the write is durable (err == nil; base is
// the log offset of the first record) or failed.
type write struct {
	records       []kmsg.Record
	producerID    int64 // -1: not transactional
	producerEpoch int16
	done          func(base int64, err error, out *output)
}

// completion is a response for a parked request, identified by the edge's token.
type completion struct {
	token uint64
	resp  any // *kmsg.XResponse, or commitDone for commits
}

// output collects what one input produced. The edge delivers completions and queues
// writes in order.
type output struct {
	completions []completion
	writes      []write
}

func (o *output) complete(token uint64, resp any) {
	if token != 0 {
		o.completions = append(o.completions, completion{token, resp})
	}
}

// timerKind identifies what a deadline does (Kafka's timer keys).
type timerKind uint8

const (
	timerHeartbeat         timerKind = iota + 1 // member session / new-member join timeout
	timerJoin                                   // end of the join phase (rebalance timeout)
	timerInitialJoin                            // group.initial.rebalance.delay steps
	timerSync                                   // pending-sync expiration
	timerConsumerSession                        // consumer-protocol member session
	timerConsumerRebalance                      // consumer-protocol revocation deadline (generation: the epoch)
	timerConsumerJoin                           // a classic member of a consumer group must rejoin by then
	timerConsumerSync                           // a classic member of a consumer group must sync by then
)

type timerKey struct {
	kind   timerKind
	group  string
	member string
}

type timerEntry struct {
	key        timerKey
	deadlineMs int64
	// payload
	delayMs, remainingMs int32 // timerInitialJoin
	generation           int32 // timerSync
	index                int   // heap index; -1 when removed
	seq                  uint64
}

// timers is a min-heap of deadlines with at most one entry per key (scheduling a key
// again replaces it, as Kafka's timer does).
type timers struct {
	byKey map[timerKey]*timerEntry
	h     timerHeap
	seq   uint64
}

type timerHeap []*timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].deadlineMs != h[j].deadlineMs {
		return h[i].deadlineMs < h[j].deadlineMs
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap) Push(x any)   { e := x.(*timerEntry); e.index = len(*h); *h = append(*h, e) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

func (t *timers) schedule(e *timerEntry) {
	if t.byKey == nil {
		t.byKey = map[timerKey]*timerEntry{}
	}
	t.cancel(e.key)
	t.seq++
	e.seq = t.seq
	t.byKey[e.key] = e
	heap.Push(&t.h, e)
}

func (t *timers) cancel(k timerKey) {
	if e, ok := t.byKey[k]; ok {
		delete(t.byKey, k)
		heap.Remove(&t.h, e.index)
	}
}

func (t *timers) has(k timerKey) bool { _, ok := t.byKey[k]; return ok }

// popDue removes and returns the earliest entry due at nowMs, or nil.
func (t *timers) popDue(nowMs int64) *timerEntry {
	if len(t.h) == 0 || t.h[0].deadlineMs > nowMs {
		return nil
	}
	e := heap.Pop(&t.h).(*timerEntry)
	delete(t.byKey, e.key)
	return e
}

// next is the earliest deadline, or -1.
func (t *timers) next() int64 {
	if len(t.h) == 0 {
		return -1
	}
	return t.h[0].deadlineMs
}

// shard is the pure core for one __consumer_offsets partition: its classic groups, its
// committed and pending transactional offsets, and its deadlines. Not safe for
// concurrent use; the edge serializes calls.
type shard struct {
	partition int32
	cfg       shardConfig
	newID     func(prefix string) string // member ids: prefix + "-" + unique suffix

	newUUID func() string // member ids of consumer-protocol v0 joins

	groups    map[string]*classicGroup
	consumers map[string]*consumerGroup // KIP-848 groups; an id is in one map at most
	offsets   offsetStore
	timers    timers
}

func newShard(partition int32, cfg shardConfig, newID func(string) string) *shard {
	if cfg.topicMeta == nil {
		cfg.topicMeta = func(string) ([16]byte, int32, bool) { return [16]byte{}, 0, false }
	}
	if cfg.topicName == nil {
		cfg.topicName = func([16]byte) (string, bool) { return "", false }
	}
	if len(cfg.consumerAssignors) == 0 {
		cfg.consumerAssignors = []string{consumer.UniformName, consumer.RangeName}
	}
	return &shard{partition: partition, cfg: cfg, newID: newID, newUUID: randomUUID, groups: map[string]*classicGroup{},
		consumers: map[string]*consumerGroup{}, offsets: newOffsetStore()}
}

// expire fires every deadline due at nowMs, in deadline order.
func (s *shard) expire(nowMs int64, out *output) {
	for range 1 << 20 { // bound: a firing may schedule, but never at or before nowMs
		e := s.timers.popDue(nowMs)
		if e == nil {
			return
		}
		switch e.key.kind {
		case timerHeartbeat:
			s.expireHeartbeat(e.key.group, e.key.member, nowMs, out)
		case timerJoin:
			if g := s.groups[e.key.group]; g != nil {
				s.completeJoin(g, nowMs, out)
			}
		case timerInitialJoin:
			s.tryCompleteInitialRebalance(e.key.group, e.delayMs, e.remainingMs, nowMs, out)
		case timerSync:
			s.expirePendingSync(e.key.group, e.generation, nowMs, out)
		case timerConsumerSession:
			s.expireConsumerMember(e.key.group, e.key.member, 0, false, nowMs, out)
		case timerConsumerRebalance:
			s.expireConsumerMember(e.key.group, e.key.member, e.generation, true, nowMs, out)
		case timerConsumerJoin, timerConsumerSync:
			s.expireConsumerMember(e.key.group, e.key.member, 0, false, nowMs, out)
		}
	}
}

// nextDeadline is the earliest armed deadline in ms, or -1.
func (s *shard) nextDeadline() int64 { return s.timers.next() }

func (s *shard) schedule(kind timerKind, group, memberID string, deadlineMs int64) *timerEntry {
	e := &timerEntry{key: timerKey{kind, group, memberID}, deadlineMs: deadlineMs}
	s.timers.schedule(e)
	return e
}

func (s *shard) cancel(kind timerKind, group, memberID string) {
	s.timers.cancel(timerKey{kind, group, memberID})
}
