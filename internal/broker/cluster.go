package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/wire"
)

// Coordinator types in FindCoordinator.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
	coordinatorShare       = 2
)

var errNoCoordinator = errors.New("no coordinator of this type")

func (b *Broker) handleFindCoordinator(req *server.Request, r *kmsg.FindCoordinatorRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var err error
		node := endpoint{id: b.cfg.NodeID, host: b.cfg.AdvertisedHost, port: b.cfg.AdvertisedPort}
		switch r.CoordinatorType {
		case coordinatorGroup:
			_, err = b.groupCoordinator()
			if err == nil && b.clustered() && key != "" {
				node, err = b.groupCoordinatorNode(key)
			}
		case coordinatorTransaction:
			_, err = b.txnCoordinator()
		case coordinatorShare:
			_, err = b.shares()
		default:
			err = errNoCoordinator
		}
		switch {
		case key == "" && r.CoordinatorType == coordinatorGroup:
			c.NodeID, c.Port = -1, -1
			c.ErrorCode = kerr.InvalidGroupID.Code
		case key == "" && r.CoordinatorType == coordinatorTransaction:
			c.NodeID, c.Port = -1, -1
			c.ErrorCode = kerr.InvalidRequest.Code
		case err != nil:
			c.NodeID, c.Port = -1, -1
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			c.NodeID, c.Host, c.Port = node.id, node.host, node.port
		}
		return c
	}
	if req.Version >= 4 {
		for _, k := range r.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, answer(k))
		}
		return server.Reply{Resp: resp}
	}
	c := answer(r.CoordinatorKey)
	resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
	resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	return server.Reply{Resp: resp}
}

func (b *Broker) handleDescribeCluster(req *server.Request, r *kmsg.DescribeClusterRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	if r.EndpointType != 0 && r.EndpointType != 1 {
		// Only brokers (1) are served; Kafka rejects controller endpoints on a broker listener.
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		return server.Reply{Resp: resp}
	}
	resp.EndpointType = 1
	resp.ClusterID = b.ClusterID()
	resp.ControllerID = b.controllerID()
	resp.ClusterAuthorizedOperations = authorizedOperationsUnset
	for _, e := range b.brokersFenced(r.IncludeFencedBrokers) {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack, db.IsFenced = e.id, e.host, e.port, e.rack, e.fenced
		resp.Brokers = append(resp.Brokers, db)
	}
	return server.Reply{Resp: resp}
}

func (b *Broker) handleInitProducerID(req *server.Request, r *wire.InitProducerIDRequest) server.Reply {
	resp := r.ResponseKind().(*wire.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		// Transactional ids need the transaction coordinator (its own issue). Kafka answers
		// COORDINATOR_NOT_AVAILABLE when no coordinator can serve the id.
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return server.Reply{Resp: resp}
	}
	// An idempotent producer always gets a fresh id, even when it offers its old one (KIP-360
	// bumps matter only for transactional ids): Kafka does the same.
	id, err := b.pids.allocate()
	if err != nil {
		b.storageError("reserve producer ids", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return server.Reply{Resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return server.Reply{Resp: resp}
}
