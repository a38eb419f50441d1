package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/controller"
	"github.com/exactq/exactq/internal/cluster/node"
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
