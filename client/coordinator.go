package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator types of FindCoordinator.
const (
	coordinatorGroup int8 = 0
	coordinatorTxn   int8 = 1
)

// coordinator is the broker that coordinates one group id or transactional id. The node
// is looked up on first use and forgotten when a request fails in a way that says the
// coordinator moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a dead connection).
type coordinator struct {
	cl  *cluster
	typ int8
	key string

	mu   sync.Mutex
	node int32 // -1: unknown
}

func newCoordinator(cl *cluster, typ int8, key string) *coordinator {
	return &coordinator{cl: cl, typ: typ, key: key, node: -1}
}

// find returns the coordinator's node id, asking FindCoordinator when it is unknown. The
// coordinator's address is added to the cluster's broker map, so a coordinator is
// reachable before a Metadata answer names it.
func (co *coordinator) find(ctx context.Context) (int32, error) {
	co.mu.Lock()
	node := co.node
	co.mu.Unlock()
	if node >= 0 {
		return node, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = co.key
	req.CoordinatorKeys = []string{co.key}
	req.CoordinatorType = co.typ
	resp, err := co.cl.do(ctx, anyBroker(), req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, nodeID, host, port := r.ErrorCode, r.NodeID, r.Host, r.Port
	if r.Version >= 4 {
		if len(r.Coordinators) != 1 {
			return -1, fmt.Errorf("client: FindCoordinator answered %d coordinators for one key: %w", len(r.Coordinators), kerr.UnknownServerError)
		}
		c := r.Coordinators[0]
		code, nodeID, host, port = c.ErrorCode, c.NodeID, c.Host, c.Port
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return -1, fmt.Errorf("client: FindCoordinator %q: %w", co.key, err)
	}
	co.cl.mu.Lock()
	if b, ok := co.cl.brokers[nodeID]; !ok || b.Host != host || b.Port != port {
		co.cl.brokers[nodeID] = BrokerInfo{NodeID: nodeID, Host: host, Port: port}
	}
	co.cl.mu.Unlock()
	co.mu.Lock()
	co.node = nodeID
	co.mu.Unlock()
	return nodeID, nil
}

// invalidate forgets the coordinator; the next request looks it up again.
func (co *coordinator) invalidate() {
	co.mu.Lock()
	co.node = -1
	co.mu.Unlock()
}

// conn returns a connection to the coordinator.
func (co *coordinator) conn(ctx context.Context) (*conn, error) {
	node, err := co.find(ctx)
	if err != nil {
		return nil, err
	}
	c, err := co.cl.brokerConn(ctx, node)
	if err != nil {
		co.invalidate()
	}
	return c, err
}

// do sends req to the coordinator. A transport failure forgets the coordinator; the error
// is returned for the caller's retry policy.
func (co *coordinator) do(ctx context.Context, req kmsg.Request, o reqOpts) (kmsg.Response, error) {
	node, err := co.find(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := co.cl.doWith(ctx, broker(node), req, o)
	if err != nil {
		co.invalidate()
	}
	return resp, err
}

// coordinatorMoved reports Kafka errors after which the coordinator must be looked up
// again.
func coordinatorMoved(err error) bool {
	return errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable)
}

// retryCoordinator runs one coordinator exchange until it succeeds, fails for good or ctx
// is done. attempt returns retry=true for errors worth another try; coordinator moves
// (by error code or a dead connection) forget the coordinator first. Between tries it
// waits the retry backoff.
func retryCoordinator(ctx context.Context, co *coordinator, attempt func() (retry bool, err error)) error {
	for {
		retry, err := attempt()
		if err == nil || !retry {
			return err
		}
		if coordinatorMoved(err) || isTransportError(err) {
			co.invalidate()
		}
		if werr := sleepCtx(ctx, co.cl.cfg.retryBackoff); werr != nil {
			return fmt.Errorf("%w (last error: %v)", werr, err) // not %w: the retriable error is not the outcome
		}
	}
}

// retriableCoordinatorErr reports errors a coordinator exchange retries: coordinator moves
// and loading, transport failures, and Kafka's retriable codes.
func retriableCoordinatorErr(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		return false
	}
	if isTransportError(err) {
		return true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return false
}
