package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
)

// served asserts that c's connection is served: a Metadata request is answered.
func (c *rawClient) served(corr int32) {
	c.t.Helper()
	req := metadataReq(1)
	c.send(req, corr)
	if got, _ := c.recv(req); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
}

// waitUntil polls cond until it holds, failing the test after safetyDeadline.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := await.Until(safetyDeadline, time.Millisecond, func() error {
		if !cond() {
			return errors.New("timed out waiting until " + what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (s *Server) acceptorsWaitingNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acceptorsWaiting
}

// TestConnectionsPerIP (#17 finding 5): an address that opens as many connections as the
// broker allows holds only its per-address maximum; the rest are closed at once, so a client
// on another address still connects and is served. An override raises one address's limit.
// Failed before the fix: every one of the attacker's connections was accepted and the
// victim's was closed.
func TestConnectionsPerIP(t *testing.T) {
	h := newTestHandler()
	h.ended = nil
	const maxConns, perIP, override = 10, 3, 5
	s := startServer(t, Config{
		MaxConnections:               maxConns,
		MaxConnectionsPerIP:          perIP,
		MaxConnectionsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): override},
	}, h)

	var attacker []*rawClient
	for i := range maxConns {
		c := dialFrom(t, s, "127.0.0.2")
		if i < perIP {
			c.served(int32(i))
			attacker = append(attacker, c)
		} else {
			c.expectClosed()
		}
	}
	dialFrom(t, s, "127.0.0.1").served(100)

	for i := range override + 1 {
		c := dialFrom(t, s, "127.0.0.3")
		if i < override {
			c.served(int32(200 + i))
		} else {
			c.expectClosed()
		}
	}

	// A slot of the attacker's address frees when one of its connections closes.
	attacker[0].nc.Close()
	waitUntil(t, "the closed connection is released", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.perIP[netip.MustParseAddr("127.0.0.2")] == perIP-1
	})
	dialFrom(t, s, "127.0.0.2").served(300)
}

// TestMaxConnectionsPerIPZero: Kafka's max.connections.per.ip=0 admits only the addresses
// that have an override.
func TestMaxConnectionsPerIPZero(t *testing.T) {
	s := startServer(t, Config{
		MaxConnectionsPerIP:          NoConnectionsPerIP,
		MaxConnectionsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.1"): 1},
	}, newTestHandler())
	dialFrom(t, s, "127.0.0.2").expectClosed()
	dialFrom(t, s, "127.0.0.1").served(1)
}

// TestMaxConnections: at the broker-wide limit, or the listener's
// (listener.name.plaintext.max.connections) when lower, the server stops accepting (Kafka's
// ConnectionQuotas.waitForConnectionSlot) and serves the waiting client once a slot frees.
func TestMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		max  int
	}{
		{"broker", Config{MaxConnections: 1}, 1},
		{"listener", Config{Listeners: map[string]ListenerConfig{DefaultListenerName: {MaxConnections: 2}}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.cfg, newTestHandler())
			var open []*rawClient
			for i := range tc.max {
				c := dial(t, s)
				c.served(int32(i))
				open = append(open, c)
			}
			waiting := dial(t, s)
			req := metadataReq(1)
			waiting.send(req, 99)
			waitUntil(t, "the acceptor waits for a slot", func() bool { return s.acceptorsWaitingNow() == 1 })

			open[0].nc.Close()
			if corr, _ := waiting.recv(req); corr != 99 {
				t.Fatalf("correlation id %d", corr)
			}
		})
	}
}

// TestShutdownWakesWaitingAcceptor: an acceptor waiting for a slot does not hold up
// Shutdown.
func TestShutdownWakesWaitingAcceptor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{MaxConnections: 1}, newTestHandler(), quietLogger(t))
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	dial(t, s).served(1)
	second := dial(t, s)
	waitUntil(t, "the acceptor waits for a slot", func() bool { return s.acceptorsWaitingNow() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), safetyDeadline)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	second.expectClosed()
}

func TestDefaultMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct{ maxConns, want int }{
		{DefaultMaxConnections, DefaultMaxConnectionsPerIP},
		{100, 90},
		{2, 2},
		{1, 1},
	} {
		if got := (Config{MaxConnections: tc.maxConns}).withDefaults().MaxConnectionsPerIP; got != tc.want {
			t.Errorf("max connections %d: per-IP default %d, want %d", tc.maxConns, got, tc.want)
		}
	}
}

func TestParseConnectionsPerIPOverrides(t *testing.T) {
	got, err := ParseConnectionsPerIPOverrides(context.Background(), "127.0.0.5:200, ::1:5 ,[fe80::2]:0,localhost:7")
	if err != nil {
		t.Fatal(err)
	}
	if got[netip.MustParseAddr("127.0.0.5")] != 200 || got[netip.MustParseAddr("127.0.0.1")] != 7 {
		t.Errorf("overrides %v", got)
	}
	if n, ok := got[netip.MustParseAddr("fe80::2")]; !ok || n != 0 {
		t.Errorf("fe80::2: %d %v", n, ok)
	}
	if empty, err := ParseConnectionsPerIPOverrides(context.Background(), " "); err != nil || len(empty) != 0 {
		t.Errorf("empty: %v %v", empty, err)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:-1", "127.0.0.1:x", ":5", "no-such-host.invalid:3"} {
		if _, err := ParseConnectionsPerIPOverrides(context.Background(), bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLogLimiter(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	if ok, n := l.allow(t0); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := range 5 {
		if ok, _ := l.allow(t0.Add(time.Duration(i) * 100 * time.Millisecond)); ok {
			t.Fatalf("line %d within the interval logged", i)
		}
	}
	if ok, n := l.allow(t0.Add(rejectLogInterval)); !ok || n != 5 {
		t.Fatalf("after the interval: %v %d", ok, n)
	}
}
