package sharegroup

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932, Kafka 4.4's
// GroupMetadataManager.alterShareGroupOffsets, GroupCoordinatorShard.
// initiateDeleteShareGroupOffsets and completeDeleteShareGroupOffsets, with the checks
// KafkaApis makes before them).
//
// Both need a share group without members. Each holds the group's __consumer_offsets
// partition lock from the check to the last record, the share-state calls included, so no
// member can join (and no heartbeat can initialize the partitions) half-way: what the
// response says is what the group and the share-state store hold, durably.

// resetTarget is one share partition that AlterShareGroupOffsets re-initializes.
type resetTarget struct {
	topicID   [16]byte
	topicName string
	partition int32
	start     int64
}

// groupOpError is a top-level error of the offsets RPCs with Kafka's message.
type groupOpError struct {
	err *kerr.Error
	msg string
}

// lockEmptyShareGroup checks the precondition of both RPCs, with Kafka's errors and
// messages, and returns the group's partition locked (the caller unlocks p.mu): the group id
// must be non-empty (INVALID_GROUP_ID) and not taken by a group of another type
// (GROUP_ID_NOT_FOUND); an existing share group must have no members (NON_EMPTY_GROUP).
// mustExist makes a missing group GROUP_ID_NOT_FOUND (delete); alter creates it.
func (c *Coordinator) lockEmptyShareGroup(groupID string, mustExist bool) (*part, *groupOpError) {
	switch {
	case groupID == "":
		return nil, &groupOpError{kerr.InvalidGroupID, "The group id is invalid."} // Kafka's Errors message
	case c.cfg.IsOtherGroupType(groupID):
		return nil, &groupOpError{kerr.GroupIDNotFound, "Group " + groupID + " is not a share group."}
	}
	p := c.partFor(groupID)
	if p == nil {
		return nil, &groupOpError{kerr.NotCoordinator, kerr.NotCoordinator.Description}
	}
	p.mu.Lock()
	var gerr *groupOpError
	g := p.shard.groups[groupID]
	switch {
	case p.failed != nil:
		gerr = &groupOpError{kerr.NotCoordinator, kerr.NotCoordinator.Description}
	case g == nil && mustExist:
		gerr = &groupOpError{kerr.GroupIDNotFound, "Group " + groupID + " not found."}
	case g != nil && len(g.members) > 0:
		gerr = &groupOpError{kerr.NonEmptyGroup, kerr.NonEmptyGroup.Description}
	}
	if gerr != nil {
		p.mu.Unlock()
		return nil, gerr
	}
	return p, nil
}

// AlterShareGroupOffsets serves AlterShareGroupOffsets v0: the given share partitions of an
// empty share group (created if missing, as Kafka does) start over at the given offsets.
// Each is re-initialized through Config.ResetShareState (its live state dropped, the new
// start offset durable), then recorded as initialized, so the group assigns it without
// initializing it again and the next fetch starts at the new offset.
//
// Errors: top-level INVALID_GROUP_ID, GROUP_ID_NOT_FOUND (another group type),
// NON_EMPTY_GROUP, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE; per partition
// UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist and the error of
// the re-initialization otherwise. Partitions of unknown topics come first, as KafkaApis
// answers them before asking the coordinator.
func (c *Coordinator) AlterShareGroupOffsets(ctx context.Context, version int16, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	resp.Version = version
	fail := func(e *groupOpError) *kmsg.AlterShareGroupOffsetsResponse {
		resp.ErrorCode, resp.ErrorMessage, resp.Topics = e.err.Code, &e.msg, nil
		return resp
	}
	p, gerr := c.lockEmptyShareGroup(req.GroupID, false)
	if gerr != nil {
		return fail(gerr)
	}
	defer p.mu.Unlock()
	epoch := int32(0)
	if g := p.shard.groups[req.GroupID]; g != nil {
		epoch = g.epoch
	}

	unknownMsg := kerr.UnknownTopicOrPartition.Description
	partErr := func(idx int32, code int16, msg *string) kmsg.AlterShareGroupOffsetsResponseTopicPartition {
		rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = idx, code, msg
		return rp
	}
	var unknown, known []kmsg.AlterShareGroupOffsetsResponseTopic
	type slot struct{ topic, part int }
	var targets []resetTarget
	var slots []slot
	for _, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		id, n, ok := c.cfg.Topics(rt.Topic)
		if !ok {
			for _, rp := range rt.Partitions {
				t.Partitions = append(t.Partitions, partErr(rp.Partition, kerr.UnknownTopicOrPartition.Code, &unknownMsg))
			}
			unknown = append(unknown, t)
			continue
		}
		t.TopicID = id
		for _, rp := range rt.Partitions {
			if rp.Partition < 0 || rp.Partition >= n {
				t.Partitions = append(t.Partitions, partErr(rp.Partition, kerr.UnknownTopicOrPartition.Code, &unknownMsg))
				continue
			}
			slots = append(slots, slot{len(known), len(t.Partitions)})
			targets = append(targets, resetTarget{topicID: id, topicName: rt.Topic, partition: rp.Partition, start: rp.StartOffset})
			t.Partitions = append(t.Partitions, partErr(rp.Partition, 0, nil))
		}
		known = append(known, t)
	}

	reset := c.cfg.ResetShareState
	if reset == nil {
		reset = c.cfg.InitializeShareState
	}
	var done []resetTarget
	for i, tg := range targets {
		var err error
		if reset != nil {
			err = reset(ctx, req.GroupID, tg.topicID, tg.partition, epoch, tg.start)
		}
		if err != nil {
			c.cfg.Logger.Warn("share-state reset failed", "group", req.GroupID, "topic", tg.topicName, "partition", tg.partition, "err", err)
			code, msg := errCodeMessage(err)
			s := slots[i]
			known[s.topic].Partitions[s.part].ErrorCode = code
			known[s.topic].Partitions[s.part].ErrorMessage = &msg
			continue
		}
		done = append(done, tg)
	}
	if len(done) > 0 {
		nowMs := c.cfg.Now().UnixMilli()
		if err := c.commit(p, p.shard.offsetsReset(nowMs, req.GroupID, done), nowMs); err != nil {
			// The share state is reset but the group does not record it: answer the
			// partitions as failed; a retry resets them again.
			for ti := range known {
				for pi := range known[ti].Partitions {
					if known[ti].Partitions[pi].ErrorCode == 0 {
						msg := kerr.CoordinatorNotAvailable.Description
						known[ti].Partitions[pi].ErrorCode = kerr.CoordinatorNotAvailable.Code
						known[ti].Partitions[pi].ErrorMessage = &msg
					}
				}
			}
		}
	}
	resp.Topics = append(unknown, known...)
	if resp.Topics == nil {
		resp.Topics = []kmsg.AlterShareGroupOffsetsResponseTopic{}
	}
	return resp
}

// offsetsReset records the partitions AlterShareGroupOffsets re-initialized as initialized
// (GroupCoordinatorService.persisterInitialize, then initializeShareGroupState): they leave
// the initializing set and their topics leave the deleting set. A missing group is created
// by the record, as in Kafka.
func (s *shard) offsetsReset(nowMs int64, groupID string, done []resetTarget) result {
	g := s.groups[groupID]
	if g == nil {
		g = newGroup(groupID)
	}
	add := map[[16]byte]*initEntry{}
	for _, t := range done {
		e := add[t.topicID]
		if e == nil {
			e = &initEntry{name: t.topicName, parts: map[int32]bool{}, tsMs: nowMs}
			add[t.topicID] = e
		}
		e.parts[t.partition] = true
	}
	deleting := maps.Clone(g.deleting)
	for id := range add {
		delete(deleting, id)
	}
	return result{records: []kmsg.Record{statePartitionRecord(groupID, s.without(g.initializing, add), combineInit(g.initialized, add), deleting)}}
}

// deleteTarget is one topic whose share state DeleteShareGroupOffsets deletes.
type deleteTarget struct {
	topicID    [16]byte
	topicName  string
	partitions []int32
}

// DeleteShareGroupOffsets serves DeleteShareGroupOffsets v0: the share state of the given
// topics is deleted (Config.DeleteShareState for each partition, live state dropped first)
// and the group forgets them as initialized, so the next assignment initializes them again
// with share.auto.offset.reset.
//
// Errors: top-level INVALID_GROUP_ID, GROUP_ID_NOT_FOUND (missing, or another group type),
// NON_EMPTY_GROUP, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE; per topic
// UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist or that the group has no
// offsets for ("There is no offset information to delete."), and the error of a failed
// deletion (the topic then stays in the group's deleting set and a retry deletes it again).
// The topics deleted come first, then the others, as in Kafka. A group that never
// initialized a share partition answers no topics at all, as Kafka does.
func (c *Coordinator) DeleteShareGroupOffsets(ctx context.Context, version int16, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	resp.Version = version
	resp.Topics = []kmsg.DeleteShareGroupOffsetsResponseTopic{}
	fail := func(e *groupOpError) *kmsg.DeleteShareGroupOffsetsResponse {
		resp.ErrorCode, resp.ErrorMessage, resp.Topics = e.err.Code, &e.msg, nil
		return resp
	}
	p, gerr := c.lockEmptyShareGroup(req.GroupID, true)
	if gerr != nil {
		return fail(gerr)
	}
	defer p.mu.Unlock()
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	targets, errTopics, res := p.shard.deleteOffsets(req.GroupID, names)
	nowMs := c.cfg.Now().UnixMilli()
	if err := c.commit(p, res, nowMs); err != nil {
		return fail(&groupOpError{kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable.Description})
	}
	var deleted [][16]byte
	var ok []kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, tg := range targets {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic, t.TopicID = tg.topicName, tg.topicID
		var failed error
		for _, partition := range tg.partitions {
			if c.cfg.DeleteShareState == nil {
				break
			}
			if err := c.cfg.DeleteShareState(ctx, req.GroupID, tg.topicID, partition); err != nil {
				c.cfg.Logger.Warn("share-state deletion failed", "group", req.GroupID, "topic", tg.topicName, "partition", partition, "err", err)
				failed = err
				break
			}
		}
		if failed != nil {
			// Kafka answers the code's own message (Errors.forCode(code).message()).
			code, msg := errCodeMessage(failed)
			var ke *kerr.Error
			if errors.As(failed, &ke) {
				msg = ke.Description
			}
			t.ErrorCode, t.ErrorMessage = code, &msg
			errTopics = append(errTopics, t)
			continue
		}
		deleted = append(deleted, tg.topicID)
		ok = append(ok, t)
	}
	if len(deleted) > 0 {
		if err := c.commit(p, p.shard.offsetsDeleted(req.GroupID, deleted), nowMs); err != nil {
			// The state is deleted; the topics stay in the deleting set, which a retry or
			// the group's deletion clears.
			return fail(&groupOpError{kerr.CoordinatorNotAvailable, kerr.CoordinatorNotAvailable.Description})
		}
	}
	resp.Topics = append(append(resp.Topics, ok...), errTopics...)
	return resp
}

// deleteOffsets is GroupMetadataManager.sharePartitionsEligibleForOffsetDeletion: per
// requested topic, its initialized partitions (the topic moves from initialized to
// deleting), or every partition of a topic already deleting (a retry), or an error. The
// record is returned in res.
func (s *shard) deleteOffsets(groupID string, topics []string) ([]deleteTarget, []kmsg.DeleteShareGroupOffsetsResponseTopic, result) {
	g := s.groups[groupID]
	if g == nil || !g.stateMeta {
		return nil, nil, result{}
	}
	initialized := map[[16]byte]*initEntry{}
	for id, e := range g.initialized {
		initialized[id] = e
	}
	deleting := maps.Clone(g.deleting)
	var targets []deleteTarget
	var errs []kmsg.DeleteShareGroupOffsetsResponseTopic
	seen := map[[16]byte]bool{}
	for _, name := range topics {
		id, n, ok := s.cfg.topics(name)
		if ok && seen[id] {
			continue
		}
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = name
		switch e := initialized[id]; {
		case !ok:
			msg := kerr.UnknownTopicOrPartition.Description
			t.ErrorCode, t.ErrorMessage = kerr.UnknownTopicOrPartition.Code, &msg
			errs = append(errs, t)
		case e != nil:
			seen[id] = true
			targets = append(targets, deleteTarget{topicID: id, topicName: name, partitions: e.sorted()})
			delete(initialized, id)
			deleting[id] = name
		case hasKey(deleting, id):
			seen[id] = true
			ps := make([]int32, n)
			for i := range ps {
				ps[i] = int32(i)
			}
			targets = append(targets, deleteTarget{topicID: id, topicName: name, partitions: ps})
		default:
			msg := "There is no offset information to delete."
			t.ErrorCode, t.ErrorMessage = kerr.UnknownTopicOrPartition.Code, &msg
			errs = append(errs, t)
		}
	}
	if len(targets) == 0 {
		return nil, errs, result{}
	}
	return targets, errs, result{records: []kmsg.Record{statePartitionRecord(groupID, g.initializing, initialized, deleting)}}
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// offsetsDeleted is GroupMetadataManager.completeDeleteShareGroupOffsets: topics whose
// share state is deleted leave the deleting set.
func (s *shard) offsetsDeleted(groupID string, topics [][16]byte) result {
	g := s.groups[groupID]
	if g == nil {
		return result{}
	}
	deleting := maps.Clone(g.deleting)
	for _, id := range topics {
		delete(deleting, id)
	}
	return result{records: []kmsg.Record{statePartitionRecord(groupID, g.initializing, g.initialized, deleting)}}
}

// deletingTargets lists the partitions of the group's deleting topics that still exist
// (shareGroupBuildPartitionDeleteRequest's retry of an unfinished deletion), for the
// group's own deletion.
func (s *shard) deletingTargets(g *group) []initJob {
	var jobs []initJob
	for _, id := range slices.SortedFunc(maps.Keys(g.deleting), compareIDs) {
		name := g.deleting[id]
		tid, n, ok := s.cfg.topics(name)
		if !ok || tid != id {
			continue // the topic is gone: nothing left to delete
		}
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i)
		}
		jobs = append(jobs, initJob{groupID: g.id, topicID: id, topicName: name, partitions: ps})
	}
	return jobs
}

// errCodeMessage returns the Kafka code of err and a message for the response: the
// code's description when err is the bare Kafka error, else err's text.
func errCodeMessage(err error) (int16, string) {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError.Code, kerr.UnknownServerError.Description
	}
	if err == error(ke) {
		return ke.Code, ke.Description
	}
	return ke.Code, err.Error()
}
