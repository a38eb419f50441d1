package group

import (
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// committed is one stored offset (Kafka's OffsetAndMetadata).
type committed struct {
	offset       int64
	leaderEpoch  int32 // -1 none
	metadata     string
	commitMs     int64
	expireMs     int64 // -1 none (only OffsetCommit v2-v4 with a retention time)
	recordOffset int64 // log offset of the record that stored it
	topicID      [16]byte
}

// offsetStore holds the committed offsets of a shard and the transactional offsets that
// wait for their marker (OffsetMetadataManager's offsets, pendingTransactionalOffsets
// and openTransactions).
type offsetStore struct {
	byGroup map[string]map[tp]committed
	pending map[int64]map[string]map[tp]committed // producer id → group → partition
	open    map[string]map[tp]map[int64]struct{}  // group → partition → producer ids
}

func newOffsetStore() offsetStore {
	return offsetStore{byGroup: map[string]map[tp]committed{}, pending: map[int64]map[string]map[tp]committed{},
		open: map[string]map[tp]map[int64]struct{}{}}
}

func (o *offsetStore) get(group, topic string, partition int32) (committed, bool) {
	c, ok := o.byGroup[group][tp{topic, partition}]
	return c, ok
}

func (o *offsetStore) put(group, topic string, partition int32, c committed) {
	m := o.byGroup[group]
	if m == nil {
		m = map[tp]committed{}
		o.byGroup[group] = m
	}
	m[tp{topic, partition}] = c
}

func (o *offsetStore) hasPending(group, topic string, partition int32) bool {
	return len(o.open[group][tp{topic, partition}]) > 0
}

func (o *offsetStore) addPending(pid int64, group, topic string, partition int32, c committed) {
	byGroup := o.pending[pid]
	if byGroup == nil {
		byGroup = map[string]map[tp]committed{}
		o.pending[pid] = byGroup
	}
	m := byGroup[group]
	if m == nil {
		m = map[tp]committed{}
		byGroup[group] = m
	}
	k := tp{topic, partition}
	m[k] = c
	og := o.open[group]
	if og == nil {
		og = map[tp]map[int64]struct{}{}
		o.open[group] = og
	}
	if og[k] == nil {
		og[k] = map[int64]struct{}{}
	}
	og[k][pid] = struct{}{}
}

func (o *offsetStore) removeOpen(group string, k tp, pid int64) {
	og := o.open[group]
	if og == nil {
		return
	}
	delete(og[k], pid)
	if len(og[k]) == 0 {
		delete(og, k)
	}
	if len(og) == 0 {
		delete(o.open, group)
	}
}

// tombstone removes an offset and every pending transactional offset of that partition
// (OffsetMetadataManager.replay with a null value).
func (o *offsetStore) tombstone(group, topic string, partition int32) {
	k := tp{topic, partition}
	if m := o.byGroup[group]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(o.byGroup, group)
		}
	}
	for pid := range o.open[group][k] {
		if byGroup := o.pending[pid]; byGroup != nil {
			delete(byGroup[group], k)
			if len(byGroup[group]) == 0 {
				delete(byGroup, group)
			}
			if len(byGroup) == 0 {
				delete(o.pending, pid)
			}
		}
	}
	if og := o.open[group]; og != nil {
		delete(og, k)
		if len(og) == 0 {
			delete(o.open, group)
		}
	}
}

// completeTxn applies a transaction marker (replayEndTransactionMarker). On commit a
// pending offset replaces the stored one only if its record is later in the log, so a
// mix of plain and transactional commits materializes the most recent one.
func (o *offsetStore) completeTxn(pid int64, commit bool) {
	byGroup := o.pending[pid]
	if byGroup == nil {
		return
	}
	delete(o.pending, pid)
	for group, m := range byGroup {
		for k, c := range m {
			o.removeOpen(group, k, pid)
			if !commit {
				continue
			}
			if cur, ok := o.get(group, k.topic, k.partition); !ok || c.recordOffset > cur.recordOffset {
				o.put(group, k.topic, k.partition, c)
			}
		}
	}
}

// groupPartition names one group's offset of one partition.
type groupPartition struct {
	group string
	k     tp
}

// tombstonesWhere returns a tombstone for every offset, committed or pending, that doomed
// selects, once per group and partition (a tombstone removes both kinds).
func (s *shard) tombstonesWhere(doomed func(k tp, c committed) bool) ([]kmsg.Record, []groupPartition) {
	var records []kmsg.Record
	var keys []groupPartition
	seen := map[groupPartition]bool{}
	add := func(group string, k tp, c committed) {
		gp := groupPartition{group, k}
		if !seen[gp] && doomed(k, c) {
			seen[gp] = true
			records = append(records, offsetTombstone(group, k.topic, k.partition))
			keys = append(keys, gp)
		}
	}
	for group, offs := range s.offsets.byGroup {
		for k, c := range offs {
			add(group, k, c)
		}
	}
	for _, byGroup := range s.offsets.pending {
		for group, offs := range byGroup {
			for k, c := range offs {
				add(group, k, c)
			}
		}
	}
	return records, keys
}

func (s *shard) dropOffsets(keys []groupPartition) {
	for _, gp := range keys {
		s.offsets.tombstone(gp.group, gp.k.topic, gp.k.partition)
	}
}

// deletedTopicOffsets is OffsetMetadataManager.onTopicsDeleted: the offsets of topic id of
// that name, and those stored without a topic id (records older than topic ids), leave
// memory at once and get tombstones. Memory goes first because the topic's record, the
// deletion's commit point, is already gone: whether or not the tombstones reach the log
// (a crash, a failed write), these offsets must never be served again, and if they do not
// reach it the next load removes them (outlivedTopic).
func (s *shard) deletedTopicOffsets(topic string, id [16]byte) []kmsg.Record {
	records, keys := s.tombstonesWhere(func(k tp, c committed) bool {
		return k.topic == topic && (c.topicID == [16]byte{} || c.topicID == id)
	})
	s.dropOffsets(keys)
	return records
}

// outlivedTopic reports whether an offset stored for topic under topic id id belongs to a
// topic that is gone: the name no longer exists, or it now names a re-created topic with
// another id. The topic id, not time, tells the two apart: every commit stores the id the
// topic had when the commit was accepted (OffsetCommitValue v4's TopicId), a re-created
// topic always gets a new random id, and ids do not depend on clocks (a commit timestamp
// compared with a creation time would misjudge a clock step or a commit racing the
// deletion). An offset without an id (written before exactq stored ids; exactq always
// stores one) only goes when the name is gone. Without a topic lookup nothing is outlived.
func (s *shard) outlivedTopic(topic string, id [16]byte) bool {
	if s.cfg.topicID == nil {
		return false
	}
	cur, ok := s.cfg.topicID(topic)
	return !ok || (id != [16]byte{} && id != cur)
}

func (s *shard) applyOffsetTombstone(group, topic string, partition int32, _ int64) {
	s.offsets.tombstone(group, topic, partition)
}

// metadataTooLarge compares Java String.length() (UTF-16 units), as Kafka does.
func (s *shard) metadataTooLarge(md *string) bool {
	if md == nil {
		return false
	}
	n := len(*md)
	if n > int(s.cfg.offsetMetadataMaxBytes) {
		n = len(utf16.Encode([]rune(*md)))
	}
	return n > int(s.cfg.offsetMetadataMaxBytes)
}

// validateOffsetCommit is ClassicGroup.validateOffsetCommit; 0 when accepted.
func (g *classicGroup) validateOffsetCommit(memberID string, instanceID *string, generation int32, txn bool) int16 {
	if g.is(stateDead) {
		return errCoordinatorNotAvail
	}
	if generation < 0 && g.is(stateEmpty) {
		return 0 // admin client or a consumer outside group management
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return errIllegalGeneration
		}
	} else if !txn && !g.is(stateEmpty) {
		return errUnknownMemberID
	}
	if !txn && g.is(stateCompletingRebalance) {
		return errRebalanceInProgress
	}
	return 0
}

// commitPartition is one partition of an OffsetCommit/TxnOffsetCommit after the edge
// resolved topic names and dropped unknown partitions.
type commitPartition struct {
	topic       string
	topicID     [16]byte
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    *string
	// code, when set by the group's validation, answers this partition without
	// storing it (a stale member epoch for one partition).
	code int16
}

// commitResult is the per-partition outcome of a commit.
type commitResult struct {
	topic     string
	topicID   [16]byte
	partition int32
	code      int16
}

// commitRequest is what the core needs of an OffsetCommit or TxnOffsetCommit.
type commitRequest struct {
	version     int16
	group       string
	memberID    string
	instanceID  *string
	generation  int32
	retentionMs int64 // -1: broker default
	parts       []commitPartition
	// Transactional commits only.
	txn           bool
	producerID    int64
	producerEpoch int16
	token         uint64
}

// commitDone is the response of a commit: per-partition codes.
type commitDone struct{ results []commitResult }

func allCodes(parts []commitPartition, code int16) commitDone {
	res := make([]commitResult, len(parts))
	for i, p := range parts {
		res[i] = commitResult{p.topic, p.topicID, p.partition, code}
	}
	return commitDone{res}
}

// commit handles OffsetCommit (commitOffset) and TxnOffsetCommit
// (commitTransactionalOffset). The response is a commitDone completion for cr.token,
// sent once the records are durable.
func (s *shard) commit(cr commitRequest, nowMs int64, out *output) {
	if cg := s.consumers[cr.group]; cg != nil {
		if code := cg.validateOffsetCommit(&cr); code != 0 {
			out.complete(cr.token, allCodes(cr.parts, code))
			return
		}
		s.storeOffsets(cr, nowMs, out)
		return
	}
	g := s.groups[cr.group]
	if g == nil {
		switch {
		case cr.generation < 0:
			g = s.simpleGroupIfMissing(cr.group, nowMs)
		case (!cr.txn && cr.version >= 9) || (cr.txn && cr.version >= 6):
			out.complete(cr.token, allCodes(cr.parts, errGroupIDNotFound))
			return
		default:
			out.complete(cr.token, allCodes(cr.parts, errIllegalGeneration))
			return
		}
	}
	if code := g.validateOffsetCommit(cr.memberID, cr.instanceID, cr.generation, cr.txn); code != 0 {
		out.complete(cr.token, allCodes(cr.parts, code))
		return
	}
	if !cr.txn && (g.is(stateStable) || g.is(statePreparingRebalance)) {
		// A classic member's commit keeps its session alive.
		if m := g.members[cr.memberID]; m != nil {
			s.rescheduleHeartbeat(g, m, nowMs)
		}
	}
	s.storeOffsets(cr, nowMs, out)
}

// storeOffsets writes the partitions of an accepted commit (those with a per-partition
// code already set are answered with it) and applies them once durable.
func (s *shard) storeOffsets(cr commitRequest, nowMs int64, out *output) {
	results := make([]commitResult, len(cr.parts))
	var records []kmsg.Record
	var stored []int // index into parts of each record
	expireMs := int64(-1)
	if !cr.txn && cr.retentionMs != -1 {
		expireMs = nowMs + cr.retentionMs
	}
	for i, p := range cr.parts {
		results[i] = commitResult{p.topic, p.topicID, p.partition, p.code}
		if p.code != 0 {
			continue
		}
		if s.metadataTooLarge(p.metadata) {
			results[i].code = errOffsetMetadataTooLarge
			continue
		}
		c := committed{offset: p.offset, leaderEpoch: p.leaderEpoch, commitMs: nowMs, expireMs: expireMs, topicID: p.topicID}
		if p.metadata != nil {
			c.metadata = *p.metadata
		}
		if c.leaderEpoch < 0 {
			c.leaderEpoch = -1
		}
		records = append(records, offsetRecord(cr.group, p.topic, p.partition, c))
		stored = append(stored, i)
	}
	if len(records) == 0 {
		out.complete(cr.token, commitDone{results})
		return
	}
	w := write{records: records, producerID: -1}
	if cr.txn {
		w.producerID, w.producerEpoch = cr.producerID, cr.producerEpoch
	}
	w.done = func(base int64, err error, out *output) {
		if err != nil {
			out.complete(cr.token, allCodes(cr.parts, errCoordinatorNotAvail))
			return
		}
		for j, i := range stored {
			p := cr.parts[i]
			c := committed{offset: p.offset, leaderEpoch: p.leaderEpoch, commitMs: nowMs, expireMs: expireMs,
				recordOffset: base + int64(j), topicID: p.topicID}
			if p.metadata != nil {
				c.metadata = *p.metadata
			}
			if c.leaderEpoch < 0 {
				c.leaderEpoch = -1
			}
			if s.outlivedTopic(p.topic, p.topicID) {
				// The topic was deleted while this commit was being written: the
				// deletion's tombstones could not cover it, so it stays out of memory
				// and the next load tombstones its record.
				continue
			}
			s.simpleGroupIfMissing(cr.group, nowMs)
			if cr.txn {
				s.offsets.addPending(cr.producerID, cr.group, p.topic, p.partition, c)
			} else {
				s.offsets.put(cr.group, p.topic, p.partition, c)
			}
		}
		out.complete(cr.token, commitDone{results})
	}
	out.writes = append(out.writes, w)
}

// fetchTopic is one topic of an OffsetFetch; partitions nil is impossible (the all-topics
// form passes a nil []fetchTopic).
type fetchTopic struct {
	topic      string
	topicID    [16]byte
	partitions []int32
}

// fetch answers one group of an OffsetFetch (fetchOffsets / fetchAllOffsets). topics nil
// means every committed offset of the group.
func (s *shard) fetch(group string, topics []fetchTopic, all, requireStable bool, memberID *string, memberEpoch int32) kmsg.OffsetFetchResponseGroup {
	resp := kmsg.NewOffsetFetchResponseGroup()
	resp.Group = group
	g := s.groups[group]
	cg := s.consumers[group]
	if cg != nil {
		if code := cg.validateOffsetFetch(memberID, memberEpoch); code != 0 {
			resp.ErrorCode = code
			return resp
		}
	}
	missing := (g == nil || g.is(stateDead)) && cg == nil
	partResp := func(p int32, c committed, ok, unstable bool) kmsg.OffsetFetchResponseGroupTopicPartition {
		r := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		r.Partition = p
		r.Offset, r.LeaderEpoch, r.Metadata = -1, -1, strp("")
		switch {
		case unstable:
			r.ErrorCode = errUnstableOffsetCommit
		case ok:
			r.Offset, r.LeaderEpoch, r.Metadata = c.offset, c.leaderEpoch, strp(c.metadata)
		}
		return r
	}
	if all {
		if missing {
			return resp
		}
		byTopic := map[string][]kmsg.OffsetFetchResponseGroupTopicPartition{}
		var order []string
		for k, c := range s.offsets.byGroup[group] {
			if _, ok := byTopic[k.topic]; !ok {
				order = append(order, k.topic)
			}
			unstable := requireStable && s.offsets.hasPending(group, k.topic, k.partition)
			byTopic[k.topic] = append(byTopic[k.topic], partResp(k.partition, c, true, unstable))
		}
		sortStrings(order)
		for _, t := range order {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t
			rt.Partitions = byTopic[t]
			sortFetchPartitions(rt.Partitions)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.topic, t.topicID
		for _, p := range t.partitions {
			var c committed
			ok := false
			if !missing {
				c, ok = s.offsets.get(group, t.topic, p)
				if ok && c.topicID != ([16]byte{}) && t.topicID != ([16]byte{}) && c.topicID != t.topicID {
					ok = false // committed for an earlier topic of the same name
				}
			}
			unstable := !missing && requireStable && s.offsets.hasPending(group, t.topic, p)
			rt.Partitions = append(rt.Partitions, partResp(p, c, ok, unstable))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// deleteOffsets handles OffsetDelete (deleteOffsets). It returns a group-level error
// code, or completes token with an *kmsg.OffsetDeleteResponse once tombstones are durable.
func (s *shard) deleteOffsets(group string, topics []kmsg.OffsetDeleteRequestTopic, token uint64, out *output) {
	fail := func(code int16) {
		r := kmsg.NewPtrOffsetDeleteResponse()
		r.ErrorCode = code
		out.complete(token, r)
	}
	var isSubscribed func(topic string) bool
	if cg := s.consumers[group]; cg != nil {
		// ConsumerGroup.validateOffsetDelete accepts any state; the offsets of topics a
		// member subscribes to (by name or regex) stay.
		names := map[string]bool{}
		for _, n := range s.subscribedTopicNames(cg) {
			names[n] = true
		}
		isSubscribed = func(topic string) bool { return names[topic] }
	} else {
		g := s.groups[group]
		if g == nil || g.is(stateDead) {
			fail(errGroupIDNotFound)
			return
		}
		switch g.state {
		case stateStable, statePreparingRebalance, stateCompletingRebalance:
			if !g.usesConsumerProtocol() {
				fail(errNonEmptyGroup)
				return
			}
		}
		isSubscribed = g.isSubscribedToTopic
	}
	resp := kmsg.NewPtrOffsetDeleteResponse()
	var records []kmsg.Record
	var keys []tp
	for _, t := range topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		subscribed := isSubscribed(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if subscribed {
				rp.ErrorCode = errGroupSubscribedToTopic
			} else if _, ok := s.offsets.get(group, t.Topic, p.Partition); ok || s.offsets.hasPending(group, t.Topic, p.Partition) {
				records = append(records, offsetTombstone(group, t.Topic, p.Partition))
				keys = append(keys, tp{t.Topic, p.Partition})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(records) == 0 {
		out.complete(token, resp)
		return
	}
	out.writes = append(out.writes, write{records: records, producerID: -1, done: func(_ int64, err error, out *output) {
		if err != nil {
			fail(errCoordinatorNotAvail)
			return
		}
		for _, k := range keys {
			s.offsets.tombstone(group, k.topic, k.partition)
		}
		out.complete(token, resp)
	}})
}

// offsetTombstones returns tombstones for every offset of a group, committed or pending
// (deleteAllOffsets).
func (s *shard) offsetTombstones(group string) ([]kmsg.Record, []tp) {
	var records []kmsg.Record
	var keys []tp
	for k := range s.offsets.byGroup[group] {
		records = append(records, offsetTombstone(group, k.topic, k.partition))
		keys = append(keys, k)
	}
	for k := range s.offsets.open[group] {
		if _, ok := s.offsets.get(group, k.topic, k.partition); !ok {
			records = append(records, offsetTombstone(group, k.topic, k.partition))
			keys = append(keys, k)
		}
	}
	return records, keys
}

// isOffsetExpired is OffsetExpirationConditionImpl for the group's condition; ok false
// means the group's offsets do not expire now.
func (g *classicGroup) expirationBase() (base func(c committed) int64, ok bool) {
	if g.protocolType == "" {
		return func(c committed) int64 { return c.commitMs }, true
	}
	if g.is(stateEmpty) {
		return func(c committed) int64 {
			if g.stateTimestampMs >= 0 {
				return g.stateTimestampMs
			}
			return c.commitMs
		}, true
	}
	if g.usesConsumerProtocol() && g.subscribed != nil && g.is(stateStable) {
		return func(c committed) int64 { return c.commitMs }, true
	}
	return nil, false
}

// cleanup is GroupCoordinatorShard.cleanupGroupMetadata: expired offsets get tombstones,
// and an Empty group left with no offsets is deleted.
func (s *shard) cleanup(nowMs int64, out *output) {
	var records []kmsg.Record
	type gk struct {
		group string
		k     tp
	}
	var dead []gk
	for _, id := range sortedKeys(s.groups) {
		g := s.groups[id]
		allExpired := true
		if offs := s.offsets.byGroup[id]; len(offs) > 0 {
			base, ok := g.expirationBase()
			if !ok {
				continue
			}
			for k, c := range offs {
				expired := false
				if !g.isSubscribedToTopic(k.topic) && !s.offsets.hasPending(id, k.topic, k.partition) {
					if c.expireMs >= 0 {
						expired = nowMs >= c.expireMs
					} else {
						expired = nowMs-base(c) >= s.cfg.offsetsRetentionMs
					}
				}
				if expired {
					records = append(records, offsetTombstone(id, k.topic, k.partition))
					dead = append(dead, gk{id, k})
				} else {
					allExpired = false
				}
			}
		}
		if allExpired && len(s.offsets.open[id]) == 0 && g.is(stateEmpty) {
			records = append(records, groupTombstone(id))
			delete(s.groups, id)
			g.state = stateDead
		}
	}
	e := &emitter{s: s, nowMs: nowMs}
	for _, id := range sortedKeys(s.consumers) {
		g := s.consumers[id]
		subscribed := map[string]bool{}
		for _, n := range s.subscribedTopicNames(g) {
			subscribed[n] = true
		}
		allExpired := true
		for k, c := range s.offsets.byGroup[id] {
			// ConsumerGroup's expiration condition: the commit time, for offsets of
			// topics no member subscribes to.
			expired := !subscribed[k.topic] && !s.offsets.hasPending(id, k.topic, k.partition)
			if expired && c.expireMs >= 0 {
				expired = nowMs >= c.expireMs
			} else if expired {
				expired = nowMs-c.commitMs >= s.cfg.offsetsRetentionMs
			}
			if expired {
				records = append(records, offsetTombstone(id, k.topic, k.partition))
				dead = append(dead, gk{id, k})
			} else {
				allExpired = false
			}
		}
		if allExpired && len(s.offsets.open[id]) == 0 && len(g.members) == 0 {
			records = append(records, s.consumerGroupTombstones(g, e)...)
		}
	}
	if len(records) == 0 {
		return
	}
	out.writes = append(out.writes, write{records: records, producerID: -1, done: func(_ int64, err error, _ *output) {
		if err != nil {
			return
		}
		for _, d := range dead {
			s.offsets.tombstone(d.group, d.k.topic, d.k.partition)
		}
	}})
}
