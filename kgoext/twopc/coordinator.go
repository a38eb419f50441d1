package twopc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinator sends requests to the transaction coordinator of one transactional id (or
// to the group coordinator of one group) over the kgo client's connections. kgo routes the transaction requests it knows
// ((*kgo.Client).Request on a *kmsg.EndTxnRequest, ...) by their concrete kmsg type, so it
// cannot carry InitProducerId v6 (a wire package type) nor a request whose version must be
// capped (EndTxn below v5 for transactions v1): the coordinator is found with a
// FindCoordinator through (*kgo.Client).Request and the request goes to that broker with
// (*kgo.Broker).RetriableRequest, which retries the connection; the coordinator errors are
// retried here, as kgo does for its own transactional producer. Used under Producer.mu.
type coordinator struct {
	cl *kgo.Client
	// keyType and key name what is coordinated: a transactional id (1) or a group (0).
	keyType int8
	key     string
	retries int
	backoff func(int) time.Duration
	node    int32 // -1: unknown, ask FindCoordinator
	// versions caches each broker's ApiVersions answer: the versions it serves and the
	// finalized features (transaction.version).
	versions map[int32]*kmsg.ApiVersionsResponse
}

// Coordinator key types of FindCoordinator.
const (
	groupCoordinator int8 = 0
	txnCoordinator   int8 = 1
)

// find asks for the coordinator of key.
func (c *coordinator) find(ctx context.Context) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = c.keyType
	req.CoordinatorKey = c.key
	req.CoordinatorKeys = []string{c.key}
	resp, err := c.cl.Request(ctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, node := r.ErrorCode, r.NodeID
	if len(r.Coordinators) > 0 {
		code, node = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return -1, fmt.Errorf("twopc: FindCoordinator %q: %w", c.key, err)
	}
	return node, nil
}

// broker returns the coordinator's node id, looking it up when unknown.
func (c *coordinator) broker(ctx context.Context) (int32, error) {
	if c.node >= 0 {
		return c.node, nil
	}
	node, err := c.find(ctx)
	if err != nil {
		return -1, err
	}
	c.node = node
	return node, nil
}

// apiVersions returns what broker node serves, asking it once.
func (c *coordinator) apiVersions(ctx context.Context, node int32) (*kmsg.ApiVersionsResponse, error) {
	if v := c.versions[node]; v != nil {
		return v, nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	// kgo fills these only for an ApiVersions sent through (*kgo.Client).Request, which
	// picks the broker itself; v3 and up require them.
	req.ClientSoftwareName, req.ClientSoftwareVersion = "exactq-twopc", "1"
	resp, err := c.cl.Broker(int(node)).RetriableRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, fmt.Errorf("twopc: ApiVersions of broker %d: %w", node, err)
	}
	c.versions[node] = r
	return r, nil
}

// maxVersion is the newest version of key that v serves, -1 when none.
func maxVersion(v *kmsg.ApiVersionsResponse, key int16) int16 {
	for _, k := range v.ApiKeys {
		if k.ApiKey == key {
			return k.MaxVersion
		}
	}
	return -1
}

// feature is the finalized level of the named feature, 0 when not finalized.
func feature(v *kmsg.ApiVersionsResponse, name string) int16 {
	for _, f := range v.FinalizedFeatures {
		if f.Name == name {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// request sends req to the coordinator until it answers something other than a
// coordinator error, within the kgo client's RequestRetries and ctx. code reads the
// answer's error code; the answer is returned with that error (a kerr error) so the
// caller can classify it.
func (c *coordinator) request(ctx context.Context, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, error) {
	return c.requestChecked(ctx, req, nil, code)
}

// requestChecked is request with before, which vets each broker the request is about to
// go to; its error ends the call.
func (c *coordinator) requestChecked(ctx context.Context, req kmsg.Request, before func(context.Context, int32) error, code func(kmsg.Response) int16) (kmsg.Response, error) {
	var last error
	for try := 0; ; try++ {
		if try > 0 {
			if try > c.retries {
				return nil, last
			}
			if err := sleep(ctx, c.backoff(try)); err != nil {
				return nil, fmt.Errorf("%w (last error: %v)", err, last)
			}
		}
		node, err := c.broker(ctx)
		if err != nil {
			if final(ctx, err) || !retriableCoordinatorErr(err) {
				return nil, err
			}
			last = err
			continue
		}
		if before != nil {
			if err := before(ctx, node); err != nil {
				if final(ctx, err) || isKafkaErr(err) {
					return nil, err
				}
				c.node, last = -1, err
				continue
			}
		}
		resp, err := c.cl.Broker(int(node)).RetriableRequest(ctx, req)
		if err != nil {
			if final(ctx, err) {
				return nil, err
			}
			// The connection failed (kgo retried it already): the coordinator may have
			// moved, or the broker restarted with other versions. Ask again.
			delete(c.versions, node)
			c.node, last = -1, err
			continue
		}
		err = kerr.ErrorForCode(code(resp))
		switch {
		case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable):
			c.node, last = -1, err
			continue
		case errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions):
			last = err
			continue
		}
		return resp, err
	}
}

// retriableCoordinatorErr reports FindCoordinator failures worth asking again.
func retriableCoordinatorErr(err error) bool {
	return errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.NotCoordinator) || !isKafkaErr(err)
}

// final reports transport errors not worth retrying: ctx ended or the kgo client closed.
func final(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, kgo.ErrClientClosed)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// capped is a request whose version kgo may not raise above max: kgo sends a request at
// the lower of its MaxVersion and the broker's, and this is the only way to lower it
// from outside kgo (kgo's own version pins are unexported). Being another type, it also
// keeps kgo from rewriting a Produce request's acks to the client's. Produce above v11 and EndTxn above v4 tell the broker the producer
// speaks transactions v2 (KIP-890); Produce v13 names topics by id, which this producer
// does not track.
type capped struct {
	kmsg.Request
	max int16
}

func (r *capped) MaxVersion() int16 { return min(r.max, r.Request.MaxVersion()) }

// cappedProduce is capped for Produce, keeping kmsg.TimeoutRequest: kgo waits for a
// request's answer its RequestTimeoutOverhead plus the request's own timeout.
type cappedProduce struct {
	*kmsg.ProduceRequest
	max int16
}

func (r *cappedProduce) MaxVersion() int16 { return min(r.max, r.ProduceRequest.MaxVersion()) }
