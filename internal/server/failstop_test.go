package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// panicStops starts a server over h whose fail-stop reports to the returned channel
// instead of exiting the test binary.
func panicStops(t *testing.T, h Handler) (*Server, <-chan HandlerPanic) {
	t.Helper()
	stops := make(chan HandlerPanic, 4)
	s := startServer(t, Config{OnHandlerPanic: func(p HandlerPanic) { stops <- p }}, h)
	return s, stops
}

// expectFailStop waits for the fail-stop and checks what a supervisor and an operator rely
// on: the panic's value and stack are reported, every connection (not only the one that
// panicked) is closed, and the server accepts no new connection.
func expectFailStop(t *testing.T, s *Server, stops <-chan HandlerPanic, in, value string, conns ...*rawClient) {
	t.Helper()
	var p HandlerPanic
	select {
	case p = <-stops:
	case <-time.After(safetyDeadline):
		t.Fatal("no fail-stop after the panic")
	}
	if p.In != in || p.Value != value || !strings.Contains(string(p.Stack), "failstop_test.go") {
		t.Fatalf("fail-stop reported %q %v, stack:\n%s", p.In, p.Value, p.Stack)
	}
	for _, c := range conns {
		c.expectClosed()
	}
	if nc, err := net.DialTimeout("tcp", s.Addr().String(), safetyDeadline); err == nil {
		nc.Close()
		t.Fatal("the server still accepts connections after a handler panic")
	}
	select {
	case p := <-stops:
		t.Fatalf("second fail-stop: %+v", p)
	default:
	}
}

// TestHandlerPanicStopsServer: a panic in Handle stops the whole server, not only that
// connection (before: that connection was closed and the broker carried on, holding
// whatever lock the handler held).
func TestHandlerPanicStopsServer(t *testing.T) {
	h := newTestHandler()
	h.handle = func(ctx context.Context, req *Request) Reply {
		if req.Key == 12 {
			panic("handler bug")
		}
		return Reply{Resp: req.Body.ResponseKind()}
	}
	s, stops := panicStops(t, h)
	good, bad := dial(t, s), dial(t, s)
	req := metadataReq(1)
	good.send(req, 1)
	if corr, _ := good.recv(req); corr != 1 {
		t.Fatalf("correlation id %d", corr)
	}
	bad.send(kmsg.NewPtrHeartbeatRequest(), 2)
	expectFailStop(t, s, stops, "Handle", "handler bug", bad, good)
}

func TestWaitPanicStopsServer(t *testing.T) {
	h := newTestHandler()
	h.handle = func(ctx context.Context, req *Request) Reply {
		return Reply{Wait: func() kmsg.Response { panic("wait bug") }}
	}
	s, stops := panicStops(t, h)
	other := dial(t, s)
	c := dial(t, s)
	c.send(metadataReq(1), 1)
	expectFailStop(t, s, stops, "response", "wait bug", c, other)
}

func TestConnClosedPanicStopsServer(t *testing.T) {
	h := &panickingConnClosed{testHandler: newTestHandler()}
	s, stops := panicStops(t, h)
	other := dial(t, s)
	c := dial(t, s)
	c.nc.Close()
	expectFailStop(t, s, stops, "ConnClosed", "conn closed bug", other)
}

type panickingConnClosed struct{ *testHandler }

func (h *panickingConnClosed) ConnClosed(*ConnInfo) { panic("conn closed bug") }

// TestNoInjectedPanicWithoutTag: the client id that panics a broker built with -tags
// exactq_testpanic is served normally by every other build (this test binary is built as
// the product binary is).
func TestNoInjectedPanicWithoutTag(t *testing.T) {
	s, stops := panicStops(t, newTestHandler())
	c := dial(t, s)
	c.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(TestPanicClientID))
	req := metadataReq(1)
	c.send(req, 7)
	if corr, _ := c.recv(req); corr != 7 {
		t.Fatalf("correlation id %d", corr)
	}
	select {
	case p := <-stops:
		t.Fatalf("fail-stop without the build tag: %+v", p)
	default:
	}
}
