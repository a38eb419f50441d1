package group

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGeneratedMemberIDVersion is the ConsumerGroupHeartbeat version from which
// the client generates its member id (KIP-1082).
const consumerGeneratedMemberIDVersion = 1

// validateConsumerHeartbeat is GroupCoordinatorService's
// throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (c *Coordinator) validateConsumerHeartbeat(version int16, req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	invalid := kerr.InvalidRequest.Code
	if (version >= consumerGeneratedMemberIDVersion || req.MemberEpoch > 0 || req.MemberEpoch == leaveGroupMemberEpoch) && req.MemberID == "" {
		return invalid, "MemberId can't be empty."
	}
	switch {
	case req.Group == "":
		return invalid, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return invalid, "RackId can't be empty."
	}
	switch {
	case req.MemberEpoch == 0:
		if req.RebalanceTimeoutMillis == -1 {
			return invalid, "RebalanceTimeoutMs must be provided in first request."
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return invalid, "TopicPartitions must be empty when (re-)joining."
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
		}
	case req.MemberEpoch == leaveGroupStaticMemberEpoch:
		if req.InstanceID == nil {
			return invalid, "InstanceId can't be null."
		}
	case req.MemberEpoch < leaveGroupStaticMemberEpoch:
		return invalid, "MemberEpoch is invalid."
	}
	if req.ServerAssignor != nil && !slices.Contains(c.assignors(), *req.ServerAssignor) {
		return kerr.UnsupportedAssignor.Code, "ServerAssignor " + *req.ServerAssignor +
			" is not supported. Supported assignors: " + strings.Join(c.assignors(), ", ") + "."
	}
	return 0, ""
}

func (c *Coordinator) assignors() []string {
	if len(c.cfg.ConsumerAssignors) > 0 {
		return c.cfg.ConsumerAssignors
	}
	return []string{"uniform", "range"}
}

// ConsumerGroupHeartbeat handles ConsumerGroupHeartbeat v0-v1 (KIP-848). It waits until
// the records of the change are durable.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, version int16, req *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, func() kmsg.Response) {
	fail := func(code int16) kmsg.Response {
		r := heartbeatError(code, "")
		r.Version = version
		return r
	}
	if code, msg := c.validateConsumerHeartbeat(version, req); code != 0 {
		r := heartbeatError(code, msg)
		r.Version = version
		return r, nil
	}
	if c.cfg.IsOtherGroupType != nil && c.cfg.IsOtherGroupType(req.Group) {
		r := heartbeatError(errGroupIDNotFound, "Group "+req.Group+" is not a consumer group.")
		r.Version = version
		return r, nil
	}
	cl := clientFrom(ctx)
	return c.runParked(ctx, req.Group, func(s *shard, tok uint64, nowMs int64, out *output) {
		s.consumerHeartbeat(heartbeatRequest{req: req, clientID: cl.ID, clientHost: cl.Host, token: tok}, nowMs, out)
	}, func(a any) kmsg.Response {
		r := a.(*kmsg.ConsumerGroupHeartbeatResponse)
		r.Version = version
		return r
	}, fail)
}

// ConsumerGroupDescribe handles ConsumerGroupDescribe v0-v1. Immediate.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, version int16, req *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, func() kmsg.Response) {
	r := kmsg.NewPtrConsumerGroupDescribeResponse()
	r.Version = version
	for _, id := range req.Groups {
		var dg kmsg.ConsumerGroupDescribeResponseGroup
		p := c.partFor(id)
		switch {
		case id == "":
			dg = kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.ErrorCode = errInvalidGroupID
		case p == nil:
			dg = kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = id, kerr.NotCoordinator.Code
		default:
			if err := c.run(p, func(s *shard, _ int64, _ *output) { dg = s.describeConsumer(id) }); err != nil {
				dg = kmsg.NewConsumerGroupDescribeResponseGroup()
				dg.Group, dg.ErrorCode = id, errCoordinatorNotAvail
			}
		}
		if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			dg.AuthorizedOperations = AllGroupOperations
		}
		r.Groups = append(r.Groups, dg)
	}
	return r, nil
}
