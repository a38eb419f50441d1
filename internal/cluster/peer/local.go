package peer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Local is the Transport to this node itself: Send calls Handle on the caller's goroutine
// with the request object (no encoding, no connection, no queue), at the version the node's
// own ApiVersions would agree, so a request the node does not serve fails with
// ErrUnsupported as it would over TCP. The handler must treat the request as read-only:
// the caller keeps it.
type Local struct {
	node   int32
	vers   apiVersions
	handle func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// NewLocal returns the in-process transport to node: apis is the node's ApiVersions list
// (what its server advertises), handle answers a request as the server's handler does a
// decoded one.
func NewLocal(node int32, apis []kmsg.ApiVersionsResponseApiKey, handle func(context.Context, kmsg.Request) (kmsg.Response, error)) *Local {
	return &Local{node: node, handle: handle, vers: versionsOf(&kmsg.ApiVersionsResponse{ApiKeys: apis})}
}

// Send answers a request for this node; lane only matters to the network transports.
func (l *Local) Send(ctx context.Context, node int32, ln Lane, req kmsg.Request) (kmsg.Response, error) {
	if node != l.node {
		return nil, fmt.Errorf("peer: the local transport of node %d asked for node %d", l.node, node)
	}
	if ln >= NumLanes {
		return nil, fmt.Errorf("peer: no lane %d", ln)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, err := l.vers.pick(req)
	if err != nil {
		return nil, err
	}
	req.SetVersion(v)
	return l.handle(ctx, req)
}

// Route is the Transport a node uses: its own node in process, every other over remote.
func Route(self int32, local, remote Transport) Transport {
	return router{self, local, remote}
}

type router struct {
	self          int32
	local, remote Transport
}

func (r router) Send(ctx context.Context, node int32, ln Lane, req kmsg.Request) (kmsg.Response, error) {
	if node == r.self {
		return r.local.Send(ctx, node, ln, req)
	}
	return r.remote.Send(ctx, node, ln, req)
}
