package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each handler returns either an immediate response or a wait func for server.Reply.Wait.
// Responses carry the request's version.

// JoinGroup handles JoinGroup v0+. It waits until the join phase ends (or ctx is done).
// The broker should pass ctx through WithClient so members get their client id and host.
func (c *Coordinator) JoinGroup(ctx context.Context, version int16, req *kmsg.JoinGroupRequest) (kmsg.Response, func() kmsg.Response) {
	fail := func(code int16) kmsg.Response {
		r := joinError(req.MemberID, code)
		r.Version = version
		return r
	}
	if req.Group == "" {
		return fail(errInvalidGroupID), nil
	}
	if c.cfg.IsOtherGroupType != nil && c.cfg.IsOtherGroupType(req.Group) {
		// The id belongs to a share group: Kafka answers a classic join with
		// INCONSISTENT_GROUP_PROTOCOL and no member id.
		r := joinError("", kerr.InconsistentGroupProtocol.Code)
		r.Version = version
		return r, nil
	}
	if req.SessionTimeoutMillis < c.cfg.MinSessionTimeoutMs || req.SessionTimeoutMillis > c.cfg.MaxSessionTimeoutMs {
		return fail(errInvalidSessionTimeout), nil
	}
	r := *req
	if version == 0 {
		r.RebalanceTimeoutMillis = r.SessionTimeoutMillis // v0 has no rebalance timeout
	}
	cl := clientFrom(ctx)
	return c.runParked(ctx, req.Group, func(s *shard, tok uint64, nowMs int64, out *output) {
		s.join(joinRequest{version: version, req: &r, clientID: cl.ID, clientHost: cl.Host, token: tok}, nowMs, out)
	}, func(a any) kmsg.Response {
		resp := a.(*kmsg.JoinGroupResponse)
		resp.Version = version
		return resp
	}, fail)
}

// SyncGroup handles SyncGroup v0+. It waits for the leader's assignment to be durable.
func (c *Coordinator) SyncGroup(ctx context.Context, version int16, req *kmsg.SyncGroupRequest) (kmsg.Response, func() kmsg.Response) {
	fail := func(code int16) kmsg.Response {
		r := syncError(code)
		r.Version = version
		return r
	}
	if req.Group == "" {
		return fail(errInvalidGroupID), nil
	}
	return c.runParked(ctx, req.Group, func(s *shard, tok uint64, nowMs int64, out *output) {
		s.sync(syncRequest{req: req, token: tok}, nowMs, out)
	}, func(a any) kmsg.Response {
		resp := a.(*kmsg.SyncGroupResponse)
		resp.Version = version
		return resp
	}, fail)
}

// Heartbeat handles Heartbeat v0+ (always immediate).
func (c *Coordinator) Heartbeat(ctx context.Context, version int16, req *kmsg.HeartbeatRequest) (kmsg.Response, func() kmsg.Response) {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = version
	if req.Group == "" {
		r.ErrorCode = errInvalidGroupID
		return r, nil
	}
	p := c.partFor(req.Group)
	if p == nil {
		r.ErrorCode = kerr.NotCoordinator.Code
		return r, nil
	}
	if err := c.run(p, func(s *shard, nowMs int64, out *output) { r.ErrorCode = s.heartbeat(req, nowMs) }); err != nil {
		r.ErrorCode = errCoordinatorNotAvail
	}
	return r, nil
}

// LeaveGroup handles LeaveGroup v0+ (the batch form from v3). Immediate: Kafka does not
// wait for the rebalance the leave starts.
func (c *Coordinator) LeaveGroup(ctx context.Context, version int16, req *kmsg.LeaveGroupRequest) (kmsg.Response, func() kmsg.Response) {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = version
	if req.Group == "" {
		r.ErrorCode = errInvalidGroupID
		return r, nil
	}
	members := req.Members
	if version < 3 {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = req.MemberID
		members = []kmsg.LeaveGroupRequestMember{m}
	}
	p := c.partFor(req.Group)
	if p == nil {
		r.ErrorCode = kerr.NotCoordinator.Code
		return r, nil
	}
	if err := c.run(p, func(s *shard, nowMs int64, out *output) {
		r.ErrorCode, r.Members = s.leave(req.Group, members, nowMs, out)
	}); err != nil {
		r.ErrorCode, r.Members = errCoordinatorNotAvail, nil
	}
	if version < 3 {
		// One member, no member list: its error becomes the top-level error.
		if r.ErrorCode == 0 && len(r.Members) == 1 {
			r.ErrorCode = r.Members[0].ErrorCode
		}
		r.Members = nil
	}
	return r, nil
}

// commitResolve splits commit partitions into the ones that go to the coordinator (added
// to cr.parts, with the topic's name or id filled in) and the ones answered at once
// (unknown topic id, unknown topic or partition; added to early, which it returns), as
// KafkaApis does.
func (c *Coordinator) commitResolve(cr *commitRequest, early []commitResult, useIDs bool, cp commitPartition) []commitResult {
	code := int16(0)
	if useIDs {
		n, ok := "", false
		if c.cfg.TopicName != nil && cp.topicID != ([16]byte{}) {
			n, ok = c.cfg.TopicName(cp.topicID)
		}
		if ok {
			cp.topic = n
		} else {
			code = errUnknownTopicID
		}
	} else if c.cfg.TopicID != nil {
		if tid, ok := c.cfg.TopicID(cp.topic); ok {
			cp.topicID = tid
		}
	}
	if code == 0 && c.cfg.TopicExists != nil && !c.cfg.TopicExists(cp.topic, cp.partition) {
		code = errUnknownTopicOrPart
	}
	if code != 0 {
		return append(early, commitResult{cp.topic, cp.topicID, cp.partition, code})
	}
	cr.parts = append(cr.parts, cp)
	return early
}

// runCommit runs cr on its group's shard; build makes the response from the per-partition
// results once the offsets are durable.
func (c *Coordinator) runCommit(ctx context.Context, cr commitRequest, build func([]commitResult) kmsg.Response,
	fail func(code int16) kmsg.Response) (kmsg.Response, func() kmsg.Response) {
	return c.runParked(ctx, cr.group, func(s *shard, tok uint64, nowMs int64, out *output) {
		cr.token = tok
		s.commit(cr, nowMs, out)
	}, func(a any) kmsg.Response { return build(a.(commitDone).results) }, fail)
}

// OffsetCommit handles OffsetCommit v2-v10; it waits for the offsets to be durable.
func (c *Coordinator) OffsetCommit(ctx context.Context, version int16, req *kmsg.OffsetCommitRequest) (kmsg.Response, func() kmsg.Response) {
	useIDs := version >= 10
	cr := commitRequest{version: version, group: req.Group, memberID: req.MemberID, instanceID: req.InstanceID,
		generation: req.Generation, retentionMs: -1}
	if version >= 2 && version <= 4 {
		cr.retentionMs = req.RetentionTimeMillis
	}
	var early []commitResult
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			cp := commitPartition{topic: t.Topic, topicID: t.TopicID, partition: p.Partition, offset: p.Offset, leaderEpoch: -1, metadata: p.Metadata}
			if version >= 6 {
				cp.leaderEpoch = p.LeaderEpoch
			}
			early = c.commitResolve(&cr, early, useIDs, cp)
		}
	}
	build := func(res []commitResult) kmsg.Response {
		r := kmsg.NewPtrOffsetCommitResponse()
		r.Version = version
		for _, g := range byTopic(append(early, res...), useIDs) {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic, t.TopicID = g[0].topic, g[0].topicID
			for _, x := range g {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = x.partition, x.code
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
		}
		return r
	}
	fail := func(code int16) kmsg.Response { return build(allCodes(cr.parts, code).results) }
	if len(cr.parts) == 0 {
		return build(nil), nil
	}
	return c.runCommit(ctx, cr, build, fail)
}

// TxnOffsetCommit handles TxnOffsetCommit v0-v6. The offsets are written in a
// transactional batch and become visible when the transaction's marker commits them
// (CompleteTxn, or the marker on replay). It waits for the write to be durable.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, version int16, req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func() kmsg.Response) {
	useIDs := version >= 6
	cr := commitRequest{version: version, group: req.Group, memberID: req.MemberID, instanceID: req.InstanceID,
		generation: req.Generation, retentionMs: -1, txn: true, producerID: req.ProducerID, producerEpoch: req.ProducerEpoch}
	if version < 3 {
		cr.generation, cr.memberID, cr.instanceID = -1, "", nil
	}
	var early []commitResult
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			cp := commitPartition{topic: t.Topic, topicID: t.TopicID, partition: p.Partition, offset: p.Offset, leaderEpoch: -1, metadata: p.Metadata}
			if version >= 2 {
				cp.leaderEpoch = p.LeaderEpoch
			}
			early = c.commitResolve(&cr, early, useIDs, cp)
		}
	}
	build := func(res []commitResult) kmsg.Response {
		r := kmsg.NewPtrTxnOffsetCommitResponse()
		r.Version = version
		for _, g := range byTopic(append(early, res...), useIDs) {
			t := kmsg.NewTxnOffsetCommitResponseTopic()
			t.Topic, t.TopicID = g[0].topic, g[0].topicID
			for _, x := range g {
				p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = x.partition, x.code
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
		}
		return r
	}
	fail := func(code int16) kmsg.Response { return build(allCodes(cr.parts, code).results) }
	if req.Group == "" {
		return fail(errInvalidGroupID), nil
	}
	if len(cr.parts) == 0 {
		return build(nil), nil
	}
	if c.cfg.VerifyTxn == nil {
		return c.runCommit(ctx, cr, build, fail)
	}
	// Verification may ask the transaction coordinator: do it off the reader goroutine.
	return nil, func() kmsg.Response {
		if code := c.cfg.VerifyTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, c.PartitionFor(req.Group), version); code != 0 {
			return fail(code)
		}
		resp, wait := c.runCommit(ctx, cr, build, fail)
		if wait != nil {
			return wait()
		}
		return resp
	}
}

// OffsetFetch handles OffsetFetch v1-v10 (the multi-group form from v8). Immediate.
func (c *Coordinator) OffsetFetch(ctx context.Context, version int16, req *kmsg.OffsetFetchRequest) (kmsg.Response, func() kmsg.Response) {
	r := kmsg.NewPtrOffsetFetchResponse()
	r.Version = version
	requireStable := version >= 7 && req.RequireStable
	if version < 8 {
		var topics []fetchTopic
		for _, t := range req.Topics {
			topics = append(topics, fetchTopic{topic: t.Topic, partitions: t.Partitions})
		}
		g := c.fetchGroup(req.Group, topics, req.Topics == nil && version >= 2, requireStable, false, nil, -1)
		r.ErrorCode = g.ErrorCode
		if version < 2 && g.ErrorCode != 0 {
			// v1 has no top-level error: it goes on every partition.
			for i := range g.Topics {
				for j := range g.Topics[i].Partitions {
					g.Topics[i].Partitions[j].ErrorCode = g.ErrorCode
				}
			}
		}
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r, nil
	}
	useIDs := version >= 10
	for _, rg := range req.Groups {
		var topics []fetchTopic
		for _, t := range rg.Topics {
			topics = append(topics, fetchTopic{topic: t.Topic, topicID: t.TopicID, partitions: t.Partitions})
		}
		memberEpoch := int32(-1)
		var memberID *string
		if version >= 9 {
			memberID, memberEpoch = rg.MemberID, rg.MemberEpoch
		}
		r.Groups = append(r.Groups, c.fetchGroup(rg.Group, topics, rg.Topics == nil, requireStable, useIDs, memberID, memberEpoch))
	}
	return r, nil
}

func (c *Coordinator) fetchGroup(groupID string, topics []fetchTopic, all, requireStable, useIDs bool, memberID *string, memberEpoch int32) kmsg.OffsetFetchResponseGroup {
	var unknownIDs []kmsg.OffsetFetchResponseGroupTopic
	if useIDs && !all {
		kept := topics[:0:0]
		for _, t := range topics {
			name, ok := "", false
			if c.cfg.TopicName != nil && t.topicID != ([16]byte{}) {
				name, ok = c.cfg.TopicName(t.topicID)
			}
			if !ok {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.TopicID = t.topicID
				for _, p := range t.partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errUnknownTopicID
					rt.Partitions = append(rt.Partitions, rp)
				}
				unknownIDs = append(unknownIDs, rt)
				continue
			}
			t.topic = name
			kept = append(kept, t)
		}
		topics = kept
	}
	p := c.partFor(groupID)
	var g kmsg.OffsetFetchResponseGroup
	if p == nil {
		g = kmsg.NewOffsetFetchResponseGroup()
		g.Group, g.ErrorCode = groupID, kerr.NotCoordinator.Code
		return g
	}
	if err := c.run(p, func(s *shard, _ int64, _ *output) {
		g = s.fetch(groupID, topics, all, requireStable, memberID, memberEpoch)
	}); err != nil {
		g = kmsg.NewOffsetFetchResponseGroup()
		g.Group, g.ErrorCode = groupID, errCoordinatorNotAvail
		return g
	}
	if useIDs && all {
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			if c.cfg.TopicID == nil {
				continue
			}
			if id, ok := c.cfg.TopicID(t.Topic); ok {
				t.TopicID = id
				kept = append(kept, t)
			}
		}
		g.Topics = kept
	}
	g.Topics = append(g.Topics, unknownIDs...)
	return g
}

// DescribeGroups handles DescribeGroups v0+. Immediate.
func (c *Coordinator) DescribeGroups(ctx context.Context, version int16, req *kmsg.DescribeGroupsRequest) (kmsg.Response, func() kmsg.Response) {
	r := kmsg.NewPtrDescribeGroupsResponse()
	r.Version = version
	for _, id := range req.Groups {
		p := c.partFor(id)
		var dg kmsg.DescribeGroupsResponseGroup
		if p == nil {
			dg = kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = id, kerr.NotCoordinator.Code
		} else if err := c.run(p, func(s *shard, _ int64, _ *output) { dg = s.describe(id, version) }); err != nil {
			dg = kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = id, errCoordinatorNotAvail
		}
		if version >= 3 && req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			// KafkaApis.handleDescribeGroupsRequest fills them in for the groups described
			// without error (a missing group below v6 included); exactq has no authorizer,
			// so every operation is allowed. Otherwise the field keeps its default, INT32_MIN.
			dg.AuthorizedOperations = AllGroupOperations
		}
		r.Groups = append(r.Groups, dg)
	}
	return r, nil
}

// ListGroups handles ListGroups v0-v5 (state filter v4+, type filter v5+). Immediate.
func (c *Coordinator) ListGroups(ctx context.Context, version int16, req *kmsg.ListGroupsRequest) (kmsg.Response, func() kmsg.Response) {
	r := kmsg.NewPtrListGroupsResponse()
	r.Version = version
	for i := range c.cfg.NumPartitions {
		p := c.parts[i]
		if p == nil {
			continue
		}
		_ = c.run(p, func(s *shard, _ int64, _ *output) { r.Groups = s.list(req.StatesFilter, req.TypesFilter, r.Groups) })
	}
	return r, nil
}

// DeleteGroups handles DeleteGroups v0+; it waits for the tombstones to be durable.
func (c *Coordinator) DeleteGroups(ctx context.Context, version int16, req *kmsg.DeleteGroupsRequest) (kmsg.Response, func() kmsg.Response) {
	type pending struct {
		wait func() kmsg.Response
		resp kmsg.Response
	}
	r := kmsg.NewPtrDeleteGroupsResponse()
	r.Version = version
	byPart := map[int32][]string{}
	var order []int32
	for _, id := range req.Groups {
		pi := c.PartitionFor(id)
		if _, ok := byPart[pi]; !ok {
			order = append(order, pi)
		}
		byPart[pi] = append(byPart[pi], id)
	}
	var ps []pending
	for _, pi := range order {
		ids := byPart[pi]
		fail := func(code int16) kmsg.Response {
			fr := kmsg.NewPtrDeleteGroupsResponse()
			for _, id := range ids {
				g := kmsg.NewDeleteGroupsResponseGroup()
				g.Group, g.ErrorCode = id, code
				fr.Groups = append(fr.Groups, g)
			}
			return fr
		}
		resp, wait := c.runParked(ctx, ids[0], func(s *shard, tok uint64, _ int64, out *output) {
			s.deleteGroups(ids, tok, out)
		}, func(a any) kmsg.Response {
			fr := kmsg.NewPtrDeleteGroupsResponse()
			fr.Groups = a.([]kmsg.DeleteGroupsResponseGroup)
			return fr
		}, fail)
		ps = append(ps, pending{wait, resp})
	}
	collect := func() kmsg.Response {
		for _, p := range ps {
			resp := p.resp
			if p.wait != nil {
				resp = p.wait()
			}
			r.Groups = append(r.Groups, resp.(*kmsg.DeleteGroupsResponse).Groups...)
		}
		return r
	}
	for _, p := range ps {
		if p.wait != nil {
			return nil, collect
		}
	}
	return collect(), nil
}

// OffsetDelete handles OffsetDelete v0+; it waits for the tombstones to be durable.
func (c *Coordinator) OffsetDelete(ctx context.Context, version int16, req *kmsg.OffsetDeleteRequest) (kmsg.Response, func() kmsg.Response) {
	var early []kmsg.OffsetDeleteResponseTopic
	var topics []kmsg.OffsetDeleteRequestTopic
	for _, t := range req.Topics {
		kept := kmsg.NewOffsetDeleteRequestTopic()
		kept.Topic = t.Topic
		et := kmsg.NewOffsetDeleteResponseTopic()
		et.Topic = t.Topic
		for _, p := range t.Partitions {
			if c.cfg.TopicExists != nil && !c.cfg.TopicExists(t.Topic, p.Partition) {
				ep := kmsg.NewOffsetDeleteResponseTopicPartition()
				ep.Partition, ep.ErrorCode = p.Partition, errUnknownTopicOrPart
				et.Partitions = append(et.Partitions, ep)
				continue
			}
			kept.Partitions = append(kept.Partitions, p)
		}
		if len(et.Partitions) > 0 {
			early = append(early, et)
		}
		if len(kept.Partitions) > 0 {
			topics = append(topics, kept)
		}
	}
	fail := func(code int16) kmsg.Response {
		r := kmsg.NewPtrOffsetDeleteResponse()
		r.Version, r.ErrorCode = version, code
		return r
	}
	if req.Group == "" {
		return fail(errInvalidGroupID), nil
	}
	conv := func(a any) kmsg.Response {
		r := a.(*kmsg.OffsetDeleteResponse)
		r.Version = version
		if r.ErrorCode == 0 {
			r.Topics = append(early, r.Topics...)
		}
		return r
	}
	if len(topics) == 0 {
		return conv(kmsg.NewPtrOffsetDeleteResponse()), nil
	}
	return c.runParked(ctx, req.Group, func(s *shard, tok uint64, _ int64, out *output) {
		s.deleteOffsets(req.Group, topics, tok, out)
	}, conv, fail)
}

// byTopic groups commit results by topic (by id in the topic-id versions), topics in
// first-seen order and partitions in request order, as the responses list them.
func byTopic(res []commitResult, useIDs bool) [][]commitResult {
	idx := map[string]int{}
	var out [][]commitResult
	for _, x := range res {
		key := x.topic
		if useIDs {
			key = string(x.topicID[:])
		}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], x)
	}
	return out
}
