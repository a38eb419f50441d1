package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/group"
	"github.com/exactq/exactq/internal/groupconfig"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/share"
	"github.com/exactq/exactq/internal/share/sharegroup"
	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/wire"
)

// shareGroupStateTopic holds share partitions' persisted state. Unlike the other internal
// topics it must not be compacted: its updates are deltas against the last snapshot.
const shareGroupStateTopic = "__share_group_state"

// shareStack is everything share groups need: the state store over __share_group_state,
// the membership coordinator (which shares __consumer_offsets with classic groups) and the
// share-fetch path.
type shareStack struct {
	store   *sharestate.Store
	members *sharegroup.Coordinator
	fetch   *share.Manager
}

// shares returns the share-group stack, creating its topic and loading it on first use.
func (b *Broker) shares() (*shareStack, error) {
	g, err := b.groupCoordinator()
	if err != nil {
		return nil, err
	}
	n := b.brokerInt32("share.coordinator.state.topic.num.partitions", 50)
	if err := b.ensureInternalTopicWith(shareGroupStateTopic, n, admin.ShareGroupStateConfigs); err != nil {
		return nil, err
	}
	return loadCoordinator(b, &b.coord.shares, func() (*shareStack, error) { return b.loadShares(g) })
}

func (b *Broker) loadShares(g *group.Coordinator) (*shareStack, error) {
	stateParts, err := b.internalPartitions(shareGroupStateTopic)
	if err != nil {
		return nil, err
	}
	offsetParts, err := b.internalPartitions(offsetsTopic)
	if err != nil {
		return nil, err
	}
	store, err := sharestate.New(sharestate.Config{
		NumPartitions:      b.topics.get(shareGroupStateTopic).numPartitions(),
		UpdatesPerSnapshot: int(b.brokerInt32("share.coordinator.snapshot.update.records.per.snapshot", 500)),
		Now:                b.now,
		Logger:             b.logger.With("component", "share-state"),
	}, stateParts)
	if err != nil {
		return nil, fmt.Errorf("load share-state store: %w", err)
	}
	var members *sharegroup.Coordinator // set below; the member check runs only after load
	mgr := share.NewManager(share.Config{
		Groups: b.shareGroupConfig,
		TxnMemberCheck: func(ctx context.Context, groupID, memberID string, epoch int32) error {
			if code := members.CheckMember(groupID, memberID, epoch); code != 0 {
				return kerr.ErrorForCode(code)
			}
			return nil
		},
		MaxShareSessions: int(b.brokerInt32("group.share.max.share.sessions", 2000)),
		MaxFetchBytes:    b.defaults.topic.FetchMaxBytes(),
		Now:              b.now,
		Logger:           b.logger.With("component", "share-fetch"),
	}, shareLogs{b}, store)
	members, err = sharegroup.New(sharegroup.Config{
		NumPartitions:        b.topics.get(offsetsTopic).numPartitions(),
		SessionTimeoutMs:     b.brokerInt32("group.share.session.timeout.ms", 45000),
		HeartbeatIntervalMs:  b.brokerInt32("group.share.heartbeat.interval.ms", 5000),
		MaxSize:              b.brokerInt32("group.share.max.size", 200),
		AssignmentIntervalMs: assignmentInterval(b.brokerInt32("group.share.assignment.interval.ms", 1000)),
		Topics: func(name string) ([16]byte, int32, bool) {
			t := b.topics.get(name)
			if t == nil || t.internal {
				return [16]byte{}, 0, false
			}
			return t.id, t.numPartitions(), true
		},
		IsOtherGroupType:     g.Exists,
		InitializeShareState: mgr.InitializeShareState,
		ResetShareState:      mgr.ResetShareState,
		DeleteShareState:     mgr.DeleteShareState,
		Now:                  b.now,
		Logger:               b.logger.With("component", "share-group-coordinator"),
	}, offsetParts)
	if err != nil {
		mgr.Close()
		store.Close()
		return nil, fmt.Errorf("load share-group coordinator: %w", err)
	}
	members.OnMemberRemoved(mgr.MemberRemoved)
	s := &shareStack{store: store, members: members, fetch: mgr}
	// Share state of topics deleted while a crash stopped deleteTopicShareState.
	b.deleteShareStateOf(s, b.unknownTopic)
	return s, nil
}

// isShareGroup reports whether a group id belongs to a share group (false before share
// groups were ever used).
func (b *Broker) isShareGroup(groupID string) bool {
	b.coord.mu.Lock()
	s := b.coord.shares
	b.coord.mu.Unlock()
	return s != nil && s.members.Exists(groupID)
}

// shareGroupConfig resolves a share group's effective configs for the fetch path.
func (b *Broker) shareGroupConfig(groupID string) share.GroupConfig {
	r := b.groupCfg.Resolve(groupID)
	return share.GroupConfig{
		AutoOffsetReset:         r.String(groupconfig.ShareAutoOffsetReset),
		IsolationLevel:          r.String(groupconfig.ShareIsolationLevel),
		RecordLockDurationMs:    r.Int(groupconfig.ShareRecordLockDurationMs),
		DeliveryCountLimit:      r.Int(groupconfig.ShareDeliveryCountLimit),
		PartitionMaxRecordLocks: r.Int(groupconfig.SharePartitionMaxRecordLock),
		RenewAcknowledgeEnable:  r.Bool(groupconfig.ShareRenewAckEnable),
	}
}

func (s *shareStack) close() {
	s.members.Close()
	s.fetch.Close()
	s.store.Close()
}

// shareReply runs a share request: an immediate response or a long poll in Reply.Wait.
func (b *Broker) shareReply(req *server.Request, call func(*shareStack) (kmsg.Response, func() kmsg.Response)) server.Reply {
	s, err := b.shares()
	if err != nil {
		b.logger.Error("share groups unavailable", "err", err)
		return server.Reply{Resp: shareError(req, kerr.CoordinatorNotAvailable)}
	}
	resp, wait := call(s)
	if wait != nil {
		return server.Reply{Wait: wait}
	}
	return server.Reply{Resp: resp}
}

// shareError is the response to a share request refused as a whole, with the error where
// KafkaApis puts it (each request's getErrorResponse): top level for ShareGroupHeartbeat,
// ShareFetch, ShareAcknowledge (no message) and Alter/DeleteShareGroupOffsets (with the
// error's message), per group for ShareGroupDescribe and DescribeShareGroupOffsets.
func shareError(req *server.Request, e *kerr.Error) kmsg.Response {
	resp := req.Body.ResponseKind()
	resp.SetVersion(req.Version)
	switch r := resp.(type) {
	case *kmsg.ShareGroupHeartbeatResponse:
		r.ErrorCode = e.Code
	case *kmsg.ShareFetchResponse:
		r.ErrorCode = e.Code
	case *kmsg.ShareAcknowledgeResponse:
		r.ErrorCode = e.Code
	case *kmsg.AlterShareGroupOffsetsResponse:
		r.ErrorCode, r.ErrorMessage = e.Code, &e.Description
	case *kmsg.DeleteShareGroupOffsetsResponse:
		r.ErrorCode, r.ErrorMessage = e.Code, &e.Description
	case *kmsg.ShareGroupDescribeResponse:
		for _, id := range req.Body.(*kmsg.ShareGroupDescribeRequest).GroupIDs {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, e.Code
			r.Groups = append(r.Groups, g)
		}
	case *kmsg.DescribeShareGroupOffsetsResponse:
		for _, rg := range req.Body.(*kmsg.DescribeShareGroupOffsetsRequest).Groups {
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID, g.ErrorCode = rg.GroupID, e.Code
			r.Groups = append(r.Groups, g)
		}
	}
	return resp
}

// shareDisabled answers a share request while share.version < 1
// (KafkaApis.isShareGroupProtocolEnabled): UNSUPPORTED_VERSION, placed as shareError does.
func shareDisabled(req *server.Request) server.Reply {
	return server.Reply{Resp: shareError(req, kerr.UnsupportedVersion)}
}

func clientHost(req *server.Request) string {
	if req.Conn != nil && req.Conn.RemoteAddr != nil {
		if h, _, err := net.SplitHostPort(req.Conn.RemoteAddr.String()); err == nil {
			return "/" + h
		}
	}
	return ""
}

func (b *Broker) handleShareGroupHeartbeat(ctx context.Context, req *server.Request, r *kmsg.ShareGroupHeartbeatRequest) server.Reply {
	if !b.shareGroupsEnabled() {
		return shareDisabled(req)
	}
	ctx = sharegroup.WithClient(group.WithClient(ctx, group.Client{ID: req.ClientID, Host: clientHost(req)}), req.ClientID, clientHost(req))
	return b.shareReply(req, func(s *shareStack) (kmsg.Response, func() kmsg.Response) {
		return s.members.ShareGroupHeartbeat(ctx, req.Version, r), nil
	})
}

// allGroupOperations is every operation Kafka defines on a GROUP resource (READ, DELETE,
// DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS): what Kafka reports as a group's authorized
// operations when no authorizer is configured (AuthHelper.authorizedOperations).
const allGroupOperations = group.AllGroupOperations

func (b *Broker) handleShareGroupDescribe(ctx context.Context, req *server.Request, r *kmsg.ShareGroupDescribeRequest) server.Reply {
	if !b.shareGroupsEnabled() {
		return shareDisabled(req)
	}
	return b.shareReply(req, func(s *shareStack) (kmsg.Response, func() kmsg.Response) {
		resp := s.members.ShareGroupDescribe(ctx, req.Version, r)
		if r.IncludeAuthorizedOperations {
			// KafkaApis.handleShareGroupDescribe fills them in for the groups described
			// without error; exactq has no authorizer, so every operation is allowed.
			for i := range resp.Groups {
				if resp.Groups[i].ErrorCode == 0 {
					resp.Groups[i].AuthorizedOperations = allGroupOperations
				}
			}
		}
		return resp, nil
	})
}

func (b *Broker) handleShareFetch(ctx context.Context, req *server.Request, r *kmsg.ShareFetchRequest) server.Reply {
	if !b.shareGroupsEnabled() {
		return shareDisabled(req)
	}
	reply := b.shareReply(req, func(s *shareStack) (kmsg.Response, func() kmsg.Response) {
		return s.fetch.ShareFetch(ctx, req.Conn.ID, req.Version, r)
	})
	// Records go out of the segment files with sendfile (fetchwrite.go).
	return mapReply(reply, func(resp kmsg.Response) kmsg.Response {
		if fr, ok := resp.(*share.FetchResponse); ok {
			return newShareFetchReply(fr)
		}
		return resp
	})
}

func (b *Broker) handleShareAcknowledge(ctx context.Context, req *server.Request, r *kmsg.ShareAcknowledgeRequest) server.Reply {
	if !b.shareGroupsEnabled() {
		return shareDisabled(req)
	}
	return b.shareReply(req, func(s *shareStack) (kmsg.Response, func() kmsg.Response) {
		return s.fetch.ShareAcknowledge(ctx, req.Conn.ID, req.Version, r)
	})
}

// loadedShares returns the share stack if share groups were ever used, else nil.
func (b *Broker) loadedShares() *shareStack {
	b.coord.mu.Lock()
	defer b.coord.mu.Unlock()
	return b.coord.shares
}

// handleListGroups lists classic groups from the group coordinator and share groups from
// the share-group coordinator, each honouring the v4/v5 state and type filters.
func (b *Broker) handleListGroups(ctx context.Context, req *server.Request, r *kmsg.ListGroupsRequest) server.Reply {
	reply := groupCall(b, ctx, req, r, (*group.Coordinator).ListGroups)
	s := b.loadedShares()
	if s == nil {
		return reply
	}
	add := func(resp kmsg.Response) kmsg.Response {
		if lr, ok := resp.(*kmsg.ListGroupsResponse); ok && lr.ErrorCode == 0 {
			lr.Groups = append(lr.Groups, s.members.ListGroups(r.StatesFilter, r.TypesFilter)...)
		}
		return resp
	}
	return mapReply(reply, add)
}

// mapReply applies fn to a reply's response, immediate or waited for.
func mapReply(reply server.Reply, fn func(kmsg.Response) kmsg.Response) server.Reply {
	if reply.Wait != nil {
		wait := reply.Wait
		reply.Wait = func() kmsg.Response { return fn(wait()) }
		return reply
	}
	reply.Resp = fn(reply.Resp)
	return reply
}

// handleDescribeGroups describes classic groups. A share group's id is not a classic group:
// Kafka answers it as a missing one (GroupMetadataManager.describeGroups: Dead, and from v6
// GROUP_ID_NOT_FOUND with "Group X is not a classic group.").
func (b *Broker) handleDescribeGroups(ctx context.Context, req *server.Request, r *kmsg.DescribeGroupsRequest) server.Reply {
	reply := groupCall(b, ctx, req, r, (*group.Coordinator).DescribeGroups)
	fix := func(resp kmsg.Response) kmsg.Response {
		if dr, ok := resp.(*kmsg.DescribeGroupsResponse); ok {
			for i := range dr.Groups {
				g := &dr.Groups[i]
				if g.ErrorCode == kerr.GroupIDNotFound.Code && b.isShareGroup(g.Group) {
					msg := "Group " + g.Group + " is not a classic group."
					g.ErrorMessage = &msg
				}
			}
		}
		return resp
	}
	return mapReply(reply, fix)
}

// handleDeleteGroups deletes share groups through the share-group coordinator (which also
// deletes their share state) and classic groups through the group coordinator.
func (b *Broker) handleDeleteGroups(ctx context.Context, req *server.Request, r *kmsg.DeleteGroupsRequest) server.Reply {
	s := b.loadedShares()
	var shareIDs, classic []string
	for _, id := range r.Groups {
		if s != nil && s.members.Exists(id) {
			shareIDs = append(shareIDs, id)
		} else {
			classic = append(classic, id)
		}
	}
	if len(shareIDs) == 0 {
		return groupCall(b, ctx, req, r, (*group.Coordinator).DeleteGroups)
	}
	shareResults := func() []kmsg.DeleteGroupsResponseGroup {
		var out []kmsg.DeleteGroupsResponseGroup
		for _, id := range shareIDs {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group = id
			if err := s.members.DeleteGroup(ctx, id); err != nil {
				g.ErrorCode = kerr.UnknownServerError.Code
				var ke *kerr.Error
				if errors.As(err, &ke) {
					g.ErrorCode = ke.Code
				}
			}
			out = append(out, g)
		}
		return out
	}
	if len(classic) == 0 {
		resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		return server.Reply{Wait: func() kmsg.Response {
			resp.Groups = shareResults()
			return resp
		}}
	}
	sub := *r
	sub.Groups = classic
	reply := groupCall(b, ctx, req, &sub, (*group.Coordinator).DeleteGroups)
	merge := func(resp kmsg.Response) kmsg.Response {
		if dr, ok := resp.(*kmsg.DeleteGroupsResponse); ok {
			dr.Groups = append(dr.Groups, shareResults()...)
		}
		return resp
	}
	if reply.Wait != nil {
		wait := reply.Wait
		return server.Reply{Wait: func() kmsg.Response { return merge(wait()) }}
	}
	resp := reply.Resp
	return server.Reply{Wait: func() kmsg.Response { return merge(resp) }}
}

// handleDescribeShareGroupOffsets answers DescribeShareGroupOffsets (KIP-932, lag from
// KIP-1226): per share partition its start offset (SPSO) and lag. A null topic list means
// every share partition of the group this broker has loaded.
func (b *Broker) handleDescribeShareGroupOffsets(ctx context.Context, req *server.Request, r *kmsg.DescribeShareGroupOffsetsRequest) server.Reply {
	if !b.shareGroupsEnabled() {
		return shareDisabled(req)
	}
	return b.shareReply(req, func(s *shareStack) (kmsg.Response, func() kmsg.Response) {
		resp := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
		return nil, func() kmsg.Response {
			for _, rg := range r.Groups {
				g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
				g.GroupID = rg.GroupID
				if !s.members.Exists(rg.GroupID) {
					g.ErrorCode = kerr.GroupIDNotFound.Code
					resp.Groups = append(resp.Groups, g)
					continue
				}
				topics := rg.Topics
				if topics == nil {
					// Every share partition the group has initialized state for.
					for id, parts := range s.members.InitializedPartitions(rg.GroupID) {
						if t := b.topics.getByID(id); t != nil {
							topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: t.name, Partitions: parts})
						}
					}
					sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
				}
				for _, rt := range topics {
					gt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
					gt.Topic = rt.Topic
					t := b.topics.get(rt.Topic)
					if t != nil {
						gt.TopicID = t.id
					}
					for _, idx := range rt.Partitions {
						gp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
						gp.Partition, gp.LeaderEpoch = idx, b.leaderEpochOf(t, idx)
						if partitionOf(t, idx) == nil {
							gp.ErrorCode, gp.StartOffset, gp.Lag = kerr.UnknownTopicOrPartition.Code, -1, -1
						} else if start, lag, err := s.fetch.Offsets(ctx, rg.GroupID, t.id, idx); err != nil {
							gp.ErrorCode, gp.StartOffset, gp.Lag = kerr.UnknownServerError.Code, -1, -1
							var ke *kerr.Error
							if errors.As(err, &ke) {
								gp.ErrorCode = ke.Code
							}
						} else {
							gp.StartOffset, gp.Lag = start, lag
						}
						gt.Partitions = append(gt.Partitions, gp)
					}
					g.Topics = append(g.Topics, gt)
				}
				resp.Groups = append(resp.Groups, g)
			}
			return resp
		}
	})
}

// handleTxnShareAcknowledge stages share acknowledgements in a producer transaction
// (KIP-1289): the share-fetch path validates, checks the member, registers the
// __share_group_state partitions in the transaction through the coordinator (as a
// server-side AddPartitionsToTxn), stages and makes the staged state durable, then answers.
// It blocks in request order, like the transaction handlers: the same producer's EndTxn
// must not overtake it.
func (b *Broker) handleTxnShareAcknowledge(ctx context.Context, req *server.Request, r *wire.TxnShareAcknowledgeRequest) server.Reply {
	defer b.metrics.observeTxnShareAck(time.Now())
	if !b.shareGroupsEnabled() {
		// As ShareAcknowledge: top-level UNSUPPORTED_VERSION.
		resp := r.ResponseKind().(*wire.TxnShareAcknowledgeResponse)
		resp.APIKey, resp.Version = r.Key(), req.Version
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return server.Reply{Resp: resp}
	}
	s, err := b.shares()
	if err != nil {
		resp := r.ResponseKind().(*wire.TxnShareAcknowledgeResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return server.Reply{Resp: resp}
	}
	register := func(ctx context.Context, stateParts []int32) int16 {
		if r.TransactionalID == nil {
			return kerr.InvalidRequest.Code
		}
		c, err := b.txnCoordinator()
		if err != nil {
			return kerr.CoordinatorNotAvailable.Code
		}
		for _, p := range stateParts {
			code := c.VerifyOrAdd(ctx, *r.TransactionalID, r.ProducerID, r.ProducerEpoch, shareGroupStateTopic, p, true)
			if code == kerr.NotEnoughReplicas.Code {
				// VerifyOrAdd speaks the produce path's dialect; a coordinator that is
				// unavailable or loading is retriable under its own name here.
				code = kerr.CoordinatorNotAvailable.Code
			}
			if code != 0 {
				return code
			}
		}
		return 0
	}
	resp := s.fetch.TxnShareAcknowledge(ctx, r, register)
	resp.APIKey, resp.Version = r.Key(), req.Version
	return server.Reply{Resp: resp}
}

// SharePartitionState is an operator's view of one share partition: its window with
// per-record states, delivery counts and staged transactions.
type SharePartitionState struct {
	Topic     string                     `json:"topic"`
	Partition int32                      `json:"partition"`
	State     share.PartitionDescription `json:"state"`
}

// DescribeShareGroupState lists the loaded share partitions of a group with their
// in-flight windows (for `exactq share describe --records` and the admin endpoint). Share
// partitions not loaded since start-up are absent.
func (b *Broker) DescribeShareGroupState(groupID string) []SharePartitionState {
	s := b.loadedShares()
	if s == nil {
		return nil
	}
	var out []SharePartitionState
	for _, d := range s.fetch.Describe(groupID) {
		name := ""
		if t := b.topics.getByID(d.TopicID); t != nil {
			name = t.name
		}
		out = append(out, SharePartitionState{Topic: name, Partition: d.Partition, State: d})
	}
	return out
}

// pruneShareState deletes the prefix of each __share_group_state partition that later
// snapshots superseded, and re-snapshots idle keys so they do not hold pruning back. The
// topic is not compacted (its updates are deltas), so this is what bounds its size.
func (b *Broker) pruneShareState() {
	s := b.loadedShares()
	if s == nil {
		return
	}
	if _, err := s.store.SnapshotCold(context.Background()); err != nil {
		b.logger.Warn("share-state cold snapshots failed", "err", err)
	}
	t := b.topics.get(shareGroupStateTopic)
	if t == nil {
		return
	}
	parts, _ := t.snapshot()
	for _, p := range parts {
		if p == nil {
			continue
		}
		off, ok := s.store.LastRedundantOffset(p.index)
		if !ok || off <= p.log.StartOffset() {
			continue
		}
		if _, err := p.log.DeleteRecordsBefore(min(off, p.highWatermark())); err != nil {
			b.logger.Warn("pruning share state failed", "partition", p.index, "err", err)
		}
	}
}

// assignmentInterval converts group.share.assignment.interval.ms to sharegroup's encoding,
// where 0 means "Kafka's default" and a negative value means no pacing.
func assignmentInterval(ms int32) int64 {
	if ms == 0 {
		return -1
	}
	return int64(ms)
}
