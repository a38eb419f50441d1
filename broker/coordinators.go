package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/group"
	"github.com/exactq/exactq/server"
)

// coordinators holds the group coordinator. It starts at Open when its internal topic
// already exists (it must replay before serving and before any transaction marker reaches
// __consumer_offsets), and otherwise on first use, which is when Kafka creates the topic too.
type coordinators struct {
	mu     sync.Mutex
	groups *group.Coordinator // guarded by mu
}

// groupCoordinator returns the group coordinator, creating __consumer_offsets and loading
// it on first use.
func (b *Broker) groupCoordinator() (*group.Coordinator, error) {
	b.coord.mu.Lock()
	defer b.coord.mu.Unlock()
	if b.coord.groups != nil {
		return b.coord.groups, nil
	}
	if err := b.ensureInternalTopic(offsetsTopic, b.defaults.topic.OffsetsTopicNumPartitions()); err != nil {
		return nil, err
	}
	g, err := group.New(group.Config{
		NumPartitions:           b.topics.get(offsetsTopic).numPartitions(),
		MinSessionTimeoutMs:     b.brokerInt32("group.min.session.timeout.ms", 6000),
		MaxSessionTimeoutMs:     b.brokerInt32("group.max.session.timeout.ms", 1800000),
		InitialRebalanceDelayMs: b.defaults.topic.GroupInitialRebalanceDelayMs(),
		MaxGroupSize:            b.brokerInt32("group.max.size", 0),
		TopicExists:             func(topic string, p int32) bool { return partitionOf(b.topics.get(topic), p) != nil },
		TopicID: func(name string) ([16]byte, bool) {
			if t := b.topics.get(name); t != nil {
				return t.id, true
			}
			return [16]byte{}, false
		},
		TopicName: func(id [16]byte) (string, bool) {
			if t := b.topics.getByID(id); t != nil {
				return t.name, true
			}
			return "", false
		},
		Now:    b.now,
		Logger: b.logger.With("component", "group-coordinator"),
	}, b.internalPartitions(offsetsTopic))
	if err != nil {
		return nil, fmt.Errorf("load group coordinator: %w", err)
	}
	b.coord.groups = g
	b.setOffsetsMarkerListener(g.CompleteTxn)
	return g, nil
}

func (t *topic) numPartitions() int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return int32(len(t.partitions))
}

// brokerInt32 reads an integer broker config exactq passes to a coordinator, falling back to
// Kafka's default when unset or unparsable (startup validation reports bad values).
func (b *Broker) brokerInt32(name string, def int32) int32 {
	if v, ok := b.cfg.BrokerConfigs[name]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return int32(n)
		}
	}
	return def
}

// closeCoordinators stops the coordinators before the logs they write close.
func (b *Broker) closeCoordinators() {
	b.coord.mu.Lock()
	defer b.coord.mu.Unlock()
	if b.coord.groups != nil {
		b.coord.groups.Close()
		b.coord.groups = nil
	}
}

// groupReply runs a group-coordinator handler: an immediate response, or a wait the server
// runs off the connection's read loop.
func (b *Broker) groupReply(ctx context.Context, req *server.Request, call func(*group.Coordinator, context.Context) (kmsg.Response, func() kmsg.Response)) server.Reply {
	g, err := b.groupCoordinator()
	if err != nil {
		b.logger.Error("group coordinator unavailable", "err", err)
		return server.Reply{Resp: coordinatorUnavailable(req)}
	}
	host := ""
	if req.Conn != nil && req.Conn.RemoteAddr != nil {
		if h, _, err := net.SplitHostPort(req.Conn.RemoteAddr.String()); err == nil {
			host = "/" + h
		}
	}
	ctx = group.WithClient(ctx, group.Client{ID: req.ClientID, Host: host})
	resp, wait := call(g, ctx)
	if wait != nil {
		return server.Reply{Wait: wait}
	}
	return server.Reply{Resp: resp}
}

// coordinatorUnavailable builds the request's response with COORDINATOR_NOT_AVAILABLE in
// every error field a client reads.
func coordinatorUnavailable(req *server.Request) kmsg.Response {
	resp := req.Body.ResponseKind()
	code := int16(15) // COORDINATOR_NOT_AVAILABLE
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.OffsetCommitResponse:
		for _, t := range req.Body.(*kmsg.OffsetCommitRequest).Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
		for _, g := range req.Body.(*kmsg.OffsetFetchRequest).Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			r.Groups = append(r.Groups, rg)
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range req.Body.(*kmsg.TxnOffsetCommitRequest).Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DescribeGroupsResponse:
		for _, id := range req.Body.(*kmsg.DescribeGroupsRequest).Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			r.Groups = append(r.Groups, g)
		}
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.DeleteGroupsResponse:
		for _, id := range req.Body.(*kmsg.DeleteGroupsRequest).Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			r.Groups = append(r.Groups, g)
		}
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	}
	return resp
}
