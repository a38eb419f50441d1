// Package peer is exactq's inter-broker client (docs/architecture.md, "Inter-broker client"):
// one Transport per node that sends kmsg requests to other nodes and returns their
// responses. Traffic to a peer goes over three lanes, one connection each, so a long replica
// fetch poll never holds up a raft heartbeat or a transaction marker.
//
// Each lane is pipelined (up to MaxInFlight requests written before the first is answered;
// Kafka answers a connection's requests in order, so responses are matched in order) and
// bounded (MaxQueued requests or MaxQueuedBytes not answered yet): a full lane fails a call
// at once with ErrQueueFull, which callers retry like any retriable Kafka error, except a
// raft message, which is dropped (raft resends) and reported through Config.OnRaftDrop so
// the quorum loop can call ReportUnreachable.
//
// Two implementations: TCP, connections dialled to the addresses a resolver gives, and
// Local, a function call into this node's own handlers. The simulation supplies a third,
// its virtual network, through the same interface.
package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Lane is one of a peer's connections.
type Lane uint8

const (
	// Control carries raft messages, registration, heartbeats, AllocateProducerIds,
	// AlterPartition and forwarded requests.
	Control Lane = iota
	// Replication carries replica Fetch: long polls with large answers.
	Replication
	// Coordination carries markers, AddPartitionsToTxn verification, the share persister
	// messages, ShareTxnResolved and ShareGroupDescribe.
	Coordination

	// NumLanes is the number of lanes.
	NumLanes = 3
)

func (l Lane) String() string {
	switch l {
	case Control:
		return "control"
	case Replication:
		return "replication"
	case Coordination:
		return "coordination"
	}
	return fmt.Sprintf("lane(%d)", uint8(l))
}

// RaftMessageKey is the private API key of RaftMessage (exactq's, not advertised to
// clients). A raft message that finds its lane full is dropped instead of refused.
const RaftMessageKey int16 = 32000

// Limits of one lane (the design's numbers).
const (
	// MaxInFlight is how many requests one connection has written and not had answered.
	MaxInFlight = 32
	// MaxQueued and MaxQueuedBytes bound what a lane holds from Send until the answer
	// (waiting to be written and in flight). One request larger than MaxQueuedBytes is
	// admitted only into an empty lane, so a large raft snapshot can still be sent.
	MaxQueued      = 1024
	MaxQueuedBytes = 64 << 20
	// MaxResponseBytes is the largest response frame read: the broker's largest request
	// frame (socket.request.max.bytes, 100 MiB), which bounds the largest raft message.
	MaxResponseBytes = 100 << 20
	// BackoffMin and BackoffMax bound the wait after a failed dial; it doubles per failure
	// and is jittered so that nodes do not redial a restarted peer in lockstep.
	BackoffMin = 50 * time.Millisecond
	BackoffMax = time.Second
	// DialTimeout bounds a dial plus the ApiVersions exchange (Kafka's
	// socket.connection.setup.timeout.ms).
	DialTimeout = 10 * time.Second
)

// Transport sends a request to a node over a lane and returns its response. A request's
// version is set by Send (the highest both sides support); a response that carries a Kafka
// error code is a response, not an error. Send is safe for concurrent use.
type Transport interface {
	Send(ctx context.Context, node int32, lane Lane, req kmsg.Request) (kmsg.Response, error)
}

var (
	// ErrQueueFull: the lane holds MaxQueued requests or MaxQueuedBytes. Retriable.
	ErrQueueFull = errors.New("peer: lane queue full")
	// ErrRaftDropped: a raft message found its lane full and was dropped. Retriable (raft
	// resends on its own).
	ErrRaftDropped = errors.New("peer: lane queue full, raft message dropped")
	// ErrUnknownNode: the resolver has no address for the node (yet). Retriable.
	ErrUnknownNode = errors.New("peer: no address for node")
	// ErrUnsupported: the peer's ApiVersions does not list the request's key, or no version
	// both sides support. Not retriable on this connection; a rolling upgrade changes it.
	ErrUnsupported = errors.New("peer: request not supported by the peer")
	// ErrClosed: the transport is closed.
	ErrClosed = errors.New("peer: transport closed")
)

// ConnError is a failed connection: the dial, the ApiVersions exchange, a write or a read.
// A request in flight when it failed may or may not have been applied by the peer. Retriable.
type ConnError struct {
	Node int32
	Lane Lane
	Addr string
	Err  error
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("peer: node %d %s lane (%s): %v", e.Node, e.Lane, e.Addr, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

// Retriable reports whether a Send error is one a caller should retry (after the usual
// backoff): a full lane, a node without an address yet, a failed connection.
func Retriable(err error) bool {
	var ce *ConnError
	return errors.Is(err, ErrQueueFull) || errors.Is(err, ErrRaftDropped) ||
		errors.Is(err, ErrUnknownNode) || errors.As(err, &ce)
}
