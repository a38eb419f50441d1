package peer

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The in-process transport calls the handler at the version the node's own ApiVersions
// agrees, refuses what it does not serve as TCP does, and Route sends only its own node
// there.
func TestLocalAndRoute(t *testing.T) {
	var got int16 = -1
	local := NewLocal(1, []kmsg.ApiVersionsResponseApiKey{{ApiKey: 12, MinVersion: 0, MaxVersion: 2}},
		func(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
			got = req.GetVersion()
			return echo(fakeReq{key: req.Key(), version: req.GetVersion(), body: req}), nil
		})
	fp := startFake(t, nil)
	remote := NewTCP(Config{Self: 1, Addr: func(node int32) (string, bool) { return fp.addr, node == 2 }})
	t.Cleanup(remote.Close)
	tr := Route(1, local, remote)
	ctx := ctxT(t)
	resp, err := tr.Send(ctx, 1, Coordination, heartbeat(3))
	checkEcho(t, resp, err, 3)
	if got != 2 {
		t.Errorf("local handler saw v%d, want v2", got)
	}
	if _, err := tr.Send(ctx, 1, Control, raftMsg(1)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unserved key in process: %v", err)
	}
	resp, err = tr.Send(ctx, 2, Control, heartbeat(4))
	checkEcho(t, resp, err, 4)
	if fp.received.Load() != 1 {
		t.Errorf("the remote peer read %d requests, want 1", fp.received.Load())
	}
	if _, err := local.Send(ctx, 2, Control, heartbeat(5)); err == nil {
		t.Error("the local transport answered for another node")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := local.Send(cctx, 1, Control, heartbeat(6)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
