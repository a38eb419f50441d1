package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testHandler serves Metadata (key 3) and Heartbeat (key 12) by calling handle, which
// defaults to an immediate empty response at the request's version.
type testHandler struct {
	apis   []APIRange
	handle func(ctx context.Context, req *Request) Reply

	mu     sync.Mutex
	closed map[uint64]int // ConnInfo.ID → ConnClosed calls
	ended  chan uint64    // receives each ConnClosed, if non-nil
}

func newTestHandler() *testHandler {
	return &testHandler{
		apis: []APIRange{
			{Key: 0, MinVersion: 3, MaxVersion: 13},
			{Key: 3, MinVersion: 0, MaxVersion: 13},
			{Key: 12, MinVersion: 0, MaxVersion: 4},
		},
		closed: make(map[uint64]int),
		ended:  make(chan uint64, 64),
	}
}

// parkedHandler is a test handler that signals handled as it takes each request and
// answers it from its Reply.Wait only once release is closed, as a long poll does.
func parkedHandler() (h *testHandler, handled, release chan struct{}) {
	h = newTestHandler()
	handled, release = make(chan struct{}, 1), make(chan struct{})
	h.handle = func(ctx context.Context, req *Request) Reply {
		handled <- struct{}{}
		return Reply{Wait: func() kmsg.Response {
			<-release
			return req.Body.ResponseKind()
		}}
	}
	return h, handled, release
}

func (h *testHandler) APIs() []APIRange { return h.apis }

func (h *testHandler) Handle(ctx context.Context, req *Request) Reply {
	if h.handle != nil {
		return h.handle(ctx, req)
	}
	return Reply{Resp: req.Body.ResponseKind()}
}

func (h *testHandler) Features(resp *kmsg.ApiVersionsResponse) {
	f := kmsg.NewApiVersionsResponseSupportedFeature()
	f.Name, f.MinVersion, f.MaxVersion = "transaction.version", 0, 2
	resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	f.Name, f.MinVersion, f.MaxVersion = "metadata.version", 7, 27
	resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", 2, 2
	resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	resp.FinalizedFeaturesEpoch = 1
}

func (h *testHandler) ConnClosed(ci *ConnInfo) {
	h.mu.Lock()
	h.closed[ci.ID]++
	h.mu.Unlock()
	if h.ended != nil {
		h.ended <- ci.ID
	}
}

func (h *testHandler) closedCounts() map[uint64]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[uint64]int, len(h.closed))
	for k, v := range h.closed {
		m[k] = v
	}
	return m
}

// quietLogger discards logs unless -v is given.
func quietLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// startServer serves h on a loopback listener until the test ends.
func startServer(t testing.TB, cfg Config, h Handler) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, h, quietLogger(t))
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		if t.Failed() {
			s.Close() // a failed test may have left a Wait blocked forever
			return
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve returned %v", err)
		}
	})
	return s
}

// safetyDeadline bounds every raw-socket read in tests so a server bug fails the test
// instead of hanging it. Outcomes never depend on it.
const safetyDeadline = 20 * time.Second

type rawClient struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
	f  *kmsg.RequestFormatter
}

func dial(t testing.TB, s *Server) *rawClient {
	t.Helper()
	return dialFrom(t, s, "")
}

// dialFrom connects to s from the local address ip (empty: any), so a test can play clients
// on different hosts: Linux routes all of 127.0.0.0/8 to the loopback interface.
func dialFrom(t testing.TB, s *Server, ip string) *rawClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(safetyDeadline))
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))}
}

func (c *rawClient) send(req kmsg.Request, corr int32) {
	c.t.Helper()
	c.write(c.f.AppendRequest(nil, req, corr))
}

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame: correlation id and the rest.
func (c *rawClient) readFrame() (int32, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return 0, nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c.br, buf); err != nil {
		return 0, nil, err
	}
	if len(buf) < 4 {
		c.t.Fatalf("response frame of %d bytes", len(buf))
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// recv reads one response to req (sent at req's version) and decodes it.
func (c *rawClient) recv(req kmsg.Request) (int32, kmsg.Response) {
	c.t.Helper()
	corr, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if req.Key() != 18 && resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("flexible response header: want empty tag section, got %x", body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode response: %v", err)
	}
	return corr, resp
}

// expectClosed asserts the server closes the connection without sending anything more.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	n, err := io.Copy(io.Discard, c.br)
	if isTimeout(err) {
		c.t.Fatalf("connection not closed (safety deadline hit)")
	}
	if n != 0 {
		c.t.Fatalf("got %d unexpected bytes before close", n)
	}
}

func metadataReq(version int16) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.SetVersion(version)
	return r
}

// scriptConn is a net.Conn whose reads are scripted by the test (data or an error such as a
// deadline timeout) and whose writes arrive on out. Deadlines are ignored: the script
// decides when a read times out.
type scriptConn struct {
	reads     chan readEvent
	out       chan []byte
	closed    chan struct{}
	closeOnce sync.Once
	pending   []byte // owned by the reader goroutine
	// failWrites makes every Write fail as a stalled client would (write deadline).
	failWrites atomic.Bool
}

type readEvent struct {
	data []byte
	err  error
}

func newScriptConn() *scriptConn {
	return &scriptConn{reads: make(chan readEvent), out: make(chan []byte, 64), closed: make(chan struct{})}
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		select {
		case ev := <-c.reads:
			if ev.err != nil {
				return 0, ev.err
			}
			c.pending = ev.data
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	if c.failWrites.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	case c.out <- append([]byte(nil), p...):
		return len(p), nil
	}
}

func (c *scriptConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	c    net.Conn
	once sync.Once
	mu   sync.Mutex
	used bool
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		l.mu.Unlock()
		return l.c, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// readResponseFrom reassembles one response frame from a scriptConn's writes.
func readResponseFrom(t testing.TB, out <-chan []byte) (int32, []byte) {
	t.Helper()
	var buf []byte
	for len(buf) < 4 || len(buf) < 4+int(binary.BigEndian.Uint32(buf)) {
		buf = append(buf, <-out...)
	}
	return int32(binary.BigEndian.Uint32(buf[4:])), buf[8:]
}
