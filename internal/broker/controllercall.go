package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/controller"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/server"
)

// The broker decides no metadata change itself: topic admin (CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs, UpdateFeatures), the topics
// Metadata auto-creates and the coordinators' internal topics, registration, heartbeats
// and producer-id blocks all go to the controller, which decides them against its latest
// image (internal/cluster/admin) and answers once they are applied. The broker learns the
// outcome as every other change, through its publisher (publisher.go), and answers its
// client only once the publisher has applied the image the controller answered at.

// controllerClient is the broker's one way to the controller. Each call returns the
// controller's answer and the metadata index it is at: the broker has applied every change
// the answer reports once its publisher reached that index.
//
// On one node it is the node's own controller.Driver, in process (localController); a
// cluster reaches the node named by node.Controller() over the network with the same
// requests.
type controllerClient interface {
	// Call sends one controller request: the admin keys above, BrokerRegistration,
	// BrokerHeartbeat, UnregisterBroker, AllocateProducerIds. The error is ctx's or the
	// transport's; the controller's refusals are in the response.
	Call(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error)
	// AutoCreateTopic creates a topic a client named in Metadata, with the defaults.
	AutoCreateTopic(ctx context.Context, name string) (kmsg.CreateTopicsResponseTopic, uint64, error)
	// CreateInternalTopic creates a coordinator's internal topic unless it exists.
	CreateInternalTopic(ctx context.Context, req controller.CreateInternalTopicRequest) (kmsg.CreateTopicsResponseTopic, uint64, error)
}

// localController is this node's controller, called in process. The index of an answer
// is the node's applied index once the Driver answered: the Driver answers after the
// batches its answer depends on are applied on this node.
type localController struct {
	d *controller.Driver
	n *node.Node
}

func (c localController) applied() uint64 {
	_, idx := c.n.Image()
	return idx
}

func (c localController) Call(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	resp, err := c.d.Handle(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	return resp, c.applied(), nil
}

func (c localController) AutoCreateTopic(ctx context.Context, name string) (kmsg.CreateTopicsResponseTopic, uint64, error) {
	t, err := c.d.AutoCreateTopic(ctx, name)
	if err != nil {
		return t, 0, err
	}
	return t, c.applied(), nil
}

func (c localController) CreateInternalTopic(ctx context.Context, req controller.CreateInternalTopicRequest) (kmsg.CreateTopicsResponseTopic, uint64, error) {
	t, err := c.d.CreateInternalTopic(ctx, req)
	if err != nil {
		return t, 0, err
	}
	return t, c.applied(), nil
}

// forwardReply serves a client's admin request (CreateTopics, DeleteTopics,
// CreatePartitions, AlterConfigs, IncrementalAlterConfigs, UpdateFeatures: the controller
// decides them all) by forwarding it at the version it came in.
func (b *Broker) forwardReply(ctx context.Context, req *server.Request, r kmsg.Request) server.Reply {
	r.SetVersion(req.Version)
	return server.Reply{Resp: b.forwardAdmin(ctx, req.ClientID, r)}
}

// forwardAdmin sends a client's admin request to the controller and returns the answer
// once this broker has applied what it reports; a controller that does not answer in
// time, or a publisher that does not catch up, is REQUEST_TIMED_OUT in every topic or
// resource (the change may still happen: the client retries and meets it).
func (b *Broker) forwardAdmin(ctx context.Context, clientID string, r kmsg.Request) kmsg.Response {
	controller.StripInternalTag(r)
	ctx, cancel := context.WithTimeout(controller.WithClientID(ctx, clientID), metadataProposeTimeout)
	defer cancel()
	resp, idx, err := b.ctl.Call(ctx, r)
	if err == nil {
		err = b.pub.wait(ctx, idx)
	}
	if err != nil {
		b.logger.Warn("admin request: no answer from the controller in time", "key", r.Key(), "err", err)
		return controller.ErrorResponse(r, kerr.RequestTimedOut, "the controller did not answer in time: "+err.Error())
	}
	return resp
}

// networkController is the controller of a cluster of several voters: the node named by
// node.Controller(), over its control lane (the controller listener), or this node's own
// Driver in process while it is the controller. A request that finds no controller (an
// election is on), a connection that fails, or a controller that answers NOT_CONTROLLER
// (it lost the lead, or has not applied its term's first entry) is sent again after a
// backoff, until ctx ends: the request's own timeout bounds it. A request sent again may
// meet its own effect (TOPIC_ALREADY_EXISTS after a lost answer), as after a Kafka
// controller failover.
//
// The index of an answer is the controller's commit index read after the answer (its
// DescribeQuorum high watermark): the controller answers once the change is applied there,
// so this broker has applied it once its publisher reaches that index.
type networkController struct {
	self   int32
	local  localController
	tr     peer.Transport
	logger *slog.Logger
}

// Retry backoff of controller requests: short, since the usual cause is an election (a
// few hundred milliseconds) or a leader that has not served its first entry yet.
const (
	controllerRetryFirst = 20 * time.Millisecond
	controllerRetryMax   = 500 * time.Millisecond
)

// pinned is a request sent at exactly the version the client sent it (at most): peer's
// Transport picks the highest version both sides support, and a forwarded admin request
// must be decided as its client asked.
type pinned struct {
	kmsg.Request
	max int16
}

func (p pinned) MaxVersion() int16 { return p.max }

// send sends req to the current controller until it answers something other than
// NOT_CONTROLLER (done says what counts as answered), or ctx ends.
func (c networkController) send(ctx context.Context, req any, done func(kmsg.Response) bool) (kmsg.Response, int32, error) {
	wireReq := controller.WireRequest(req)
	version := wireReq.GetVersion()
	backoff := controllerRetryFirst
	var last error
	for {
		id, ok := c.local.n.Controller()
		var resp kmsg.Response
		var err error
		switch {
		case !ok:
			err = errNoController
		case id == c.self:
			resp, err = c.localAsk(ctx, req)
		default:
			var out kmsg.Request = wireReq
			if _, isAdmin := adminKeys[wireReq.Key()]; isAdmin {
				out = pinned{wireReq, version}
			}
			resp, err = c.tr.Send(ctx, id, peer.Control, out)
		}
		if err == nil && done(resp) {
			return resp, id, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, -1, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
			}
			if !peer.Retriable(err) && !errors.Is(err, errNoController) {
				return nil, -1, err
			}
			last = err
		} else {
			last = fmt.Errorf("node %d is not the controller", id)
		}
		select {
		case <-ctx.Done():
			return nil, -1, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, controllerRetryMax)
	}
}

var errNoController = errors.New("no controller known (an election is on)")

// adminKeys are the forwarded client admin requests, sent at their client's version: the
// topic, config and feature keys, and the ACL and SCRAM ones (#14).
var adminKeys = map[int16]struct{}{19: {}, 20: {}, 37: {}, 33: {}, 44: {}, 57: {}, 30: {}, 31: {}, 51: {}}

func (c networkController) localAsk(ctx context.Context, req any) (kmsg.Response, error) {
	if p, ok := req.(pinned); ok {
		req = p.Request
	}
	switch r := req.(type) {
	case *kmsg.DescribeQuorumRequest:
		return c.local.n.DescribeQuorum(ctx, r), nil
	case *controller.AutoCreateTopicRequest:
		t, err := c.local.d.AutoCreateTopic(ctx, r.Name)
		return oneTopic(t), err
	case *controller.CreateInternalTopicRequest:
		t, err := c.local.d.CreateInternalTopic(ctx, *r)
		return oneTopic(t), err
	}
	return c.local.d.Handle(ctx, req.(kmsg.Request))
}

func oneTopic(t kmsg.CreateTopicsResponseTopic) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Topics = []kmsg.CreateTopicsResponseTopic{t}
	return resp
}

func notNotController(resp kmsg.Response) bool { return !controller.NotController(resp) }

// commitIndex is the controller's commit index (the high watermark of its DescribeQuorum),
// read after an answer of node: every change the answer reports is at or below it.
func (c networkController) commitIndex(ctx context.Context, node int32) (uint64, error) {
	if node == c.self {
		return c.local.applied(), nil
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	dt := kmsg.NewDescribeQuorumRequestTopic()
	dt.Topic = node2LogTopic
	dt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{dt}
	resp, _, err := c.send(ctx, req, func(r kmsg.Response) bool { return describeQuorumAnswered(r) })
	if err != nil {
		return 0, err
	}
	hw := resp.(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0].HighWatermark
	return uint64(max(hw, 0)), nil
}

// node2LogTopic is the metadata log's topic name in DescribeQuorum.
const node2LogTopic = "__cluster_metadata"

// describeQuorumAnswered: the leader answered (a follower answers NOT_LEADER_OR_FOLLOWER
// in the partition).
func describeQuorumAnswered(r kmsg.Response) bool {
	resp := r.(*kmsg.DescribeQuorumResponse)
	return resp.ErrorCode == 0 && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 &&
		resp.Topics[0].Partitions[0].ErrorCode == 0
}

// needsIndex: the caller waits for its publisher to reach the answer's index (admin
// changes, producer-id blocks); registration and heartbeats do not.
func needsIndex(req kmsg.Request) bool {
	switch req.(type) {
	case *kmsg.BrokerRegistrationRequest, *kmsg.BrokerHeartbeatRequest, *kmsg.UnregisterBrokerRequest:
		return false
	}
	return true
}

func (c networkController) Call(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	resp, from, err := c.send(ctx, req, notNotController)
	if err != nil || !needsIndex(req) {
		return resp, 0, err
	}
	idx, err := c.commitIndex(ctx, from)
	return resp, idx, err
}

func (c networkController) createTopic(ctx context.Context, req any) (kmsg.CreateTopicsResponseTopic, uint64, error) {
	resp, from, err := c.send(ctx, req, notNotController)
	if err != nil {
		return kmsg.CreateTopicsResponseTopic{}, 0, err
	}
	t := resp.(*kmsg.CreateTopicsResponse).Topics[0]
	idx, err := c.commitIndex(ctx, from)
	return t, idx, err
}

func (c networkController) AutoCreateTopic(ctx context.Context, name string) (kmsg.CreateTopicsResponseTopic, uint64, error) {
	return c.createTopic(ctx, &controller.AutoCreateTopicRequest{Name: name})
}

func (c networkController) CreateInternalTopic(ctx context.Context, req controller.CreateInternalTopicRequest) (kmsg.CreateTopicsResponseTopic, uint64, error) {
	return c.createTopic(ctx, &req)
}

// DescribeQuorum is the controller's answer to a client's DescribeQuorum (Kafka 4.x
// brokers forward it to the controller); a lone voter answers itself.
func (b *Broker) handleDescribeQuorum(ctx context.Context, req *server.Request, r *kmsg.DescribeQuorumRequest) server.Reply {
	return server.Reply{Wait: func() kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, metadataProposeTimeout)
		defer cancel()
		nc, ok := b.ctl.(networkController)
		if !ok {
			return b.meta.DescribeQuorum(ctx, r)
		}
		resp, _, err := nc.send(ctx, pinned{r, req.Version}, func(resp kmsg.Response) bool {
			// A stale leader answers NOT_LEADER_OR_FOLLOWER in the partition; an answer
			// for a partition that is not the log's is the answer.
			dq := resp.(*kmsg.DescribeQuorumResponse)
			return describeQuorumAnswered(dq) || !asksMetadataLog(r)
		})
		if err != nil {
			resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
			resp.ErrorCode = kerr.RequestTimedOut.Code
			return resp
		}
		return resp
	}}
}

func asksMetadataLog(r *kmsg.DescribeQuorumRequest) bool {
	return len(r.Topics) == 1 && r.Topics[0].Topic == node2LogTopic &&
		len(r.Topics[0].Partitions) == 1 && r.Topics[0].Partitions[0].Partition == 0
}
