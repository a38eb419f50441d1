package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxRequestBytes    int32 = 100 << 20 // socket.request.max.bytes (104857600)
	DefaultMaxConnections           = 10000
	DefaultIdleTimeout              = 10 * time.Minute // connections.max.idle.ms (600000)
	DefaultMaxInFlightPerConn       = 100
)

// ErrServerClosed is returned by Serve and ListenAndServe after Shutdown or Close.
var ErrServerClosed = errors.New("server: closed")

// Config bounds what one server accepts. Zero fields take the Default* values.
type Config struct {
	// MaxRequestBytes is the largest request frame (size prefix excluded) accepted; a larger
	// or negative size closes the connection, like Kafka's socket.request.max.bytes.
	MaxRequestBytes int32
	// MaxConnections caps open client connections (max.connections). At the limit the
	// server stops accepting until a connection closes, as Kafka does.
	MaxConnections int
	// MaxConnectionsPerIP caps the open connections from one address
	// (max.connections.per.ip); a connection beyond it is closed right after accept. Zero
	// takes DefaultMaxConnectionsPerIP, capped at nine tenths of MaxConnections;
	// NoConnectionsPerIP admits only the addresses in MaxConnectionsPerIPOverrides.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides are per-address limits replacing MaxConnectionsPerIP
	// (max.connections.per.ip.overrides; see ParseConnectionsPerIPOverrides).
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// Listeners holds per-listener limits by listener name; Serve serves
	// DefaultListenerName.
	Listeners map[string]ListenerConfig
	// IdleTimeout closes a connection that sent no request for this long while it had no
	// request in flight, or whose client did not take its responses for this long
	// (connections.max.idle.ms).
	IdleTimeout time.Duration
	// QueuedMaxRequestBytes bounds the memory of requests being read, decoded or queued
	// across all connections (queued.max.request.bytes; see budget.go). Zero takes
	// DefaultQueuedMaxRequestBytes; a value below MinQueuedMaxRequestBytes(MaxRequestBytes)
	// is raised to it; negative is unbounded (Kafka's -1; still counted).
	QueuedMaxRequestBytes int64
	// MaxInFlightPerConn bounds the replies queued between a connection's reader and its
	// writer. When the queue is full the reader stops reading (TCP back-pressure).
	MaxInFlightPerConn int

	// FailedAuthenticationDelay delays the answer to a failed authentication and the
	// close after it (connection.failed.authentication.delay.ms); zero takes
	// DefaultFailedAuthenticationDelay, NoFailedAuthenticationDelay none.
	FailedAuthenticationDelay time.Duration
	// MaxConcurrentAuthPerIP bounds the connections from one address in their TLS
	// handshake or SASL exchange at once; more wait (unread) for a slot, at most
	// IdleTimeout. Zero takes DefaultMaxConcurrentAuthPerIP.
	MaxConcurrentAuthPerIP int
	// Now is the clock authenticated sessions are timed by (time.Now when nil); tests set
	// it to move a session past its end.
	Now func() time.Time

	// ClusterID and NodeID, when ClusterID is set, let ApiVersions v5 (KIP-1242) answer
	// REBOOTSTRAP_REQUIRED to a client that expects another cluster or node.
	ClusterID string
	NodeID    int32

	// OnHandlerPanic, when set, is called once instead of exiting the process after
	// handler code panicked (see failstop.go); the server has logged the panic and closed
	// its listeners and connections by then. For tests of the fail-stop itself: a broker
	// leaves it nil.
	OnHandlerPanic func(HandlerPanic)
}

func (c Config) withDefaults() Config {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.QueuedMaxRequestBytes == 0 {
		c.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if c.QueuedMaxRequestBytes > 0 {
		c.QueuedMaxRequestBytes = max(c.QueuedMaxRequestBytes, MinQueuedMaxRequestBytes(c.MaxRequestBytes))
	}
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = perIPLimit(c.MaxConnections)
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxInFlightPerConn <= 0 {
		c.MaxInFlightPerConn = DefaultMaxInFlightPerConn
	}
	switch {
	case c.FailedAuthenticationDelay == 0:
		c.FailedAuthenticationDelay = DefaultFailedAuthenticationDelay
	case c.FailedAuthenticationDelay < 0:
		c.FailedAuthenticationDelay = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxConcurrentAuthPerIP <= 0 {
		c.MaxConcurrentAuthPerIP = DefaultMaxConcurrentAuthPerIP
	}
	return c
}

// Server accepts Kafka protocol connections and serves them with a Handler.
type Server struct {
	cfg     Config
	h       Handler
	log     *slog.Logger
	apis    *apiTable
	apiKeys []kmsg.ApiVersionsResponseApiKey // advertised by ApiVersions, read-only
	// saslAPIs and saslAPIKeys are the same plus SaslHandshake and SaslAuthenticate, which
	// the server serves itself on SASL listeners.
	saslAPIs    *apiTable
	saslAPIKeys []kmsg.ApiVersionsResponseApiKey
	budget      *requestBudget
	handshakes  *handshakeLimiter
	authStats   authCounters

	// baseCtx is the parent of every connection context; cancel ends it at Shutdown/Close.
	baseCtx context.Context
	cancel  context.CancelFunc

	nextConnID atomic.Uint64

	mu          sync.Mutex // guards everything below
	listeners   map[net.Listener]struct{}
	conns       map[*conn]struct{}
	perIP       map[netip.Addr]int // open connections by remote address; no zero entries
	perListener map[string]int     // open connections by listener name
	// slotFreed (on mu) is broadcast when a connection ends or closing begins, waking
	// acceptors waiting for a connection slot.
	slotFreed        *sync.Cond
	acceptorsWaiting int           // acceptors blocked in waitForSlot (read by tests)
	rejectLog        logLimiter    // per-address rejections: one log line a second at most
	closing          bool          // Shutdown or Close has begun
	connsDone        chan struct{} // closed when closing and conns is empty
	addr             net.Addr      // first listener's address
	addrReady        chan struct{} // closed once addr is set

	failStop sync.Once // the first handler panic stops the server (failstop.go)
}

// New returns a server for h. h.APIs is called once, here: the served keys and versions are
// fixed for the server's lifetime. Keys kmsg cannot decode are dropped; ApiVersions is always
// served by the server itself (versions 0-5, capped by h's entry for key 18 if it has one).
func New(cfg Config, h Handler, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:    cfg,
		h:      h,
		log:    logger,
		budget: newRequestBudget(cfg.QueuedMaxRequestBytes, cfg.MaxRequestBytes),

		handshakes: newHandshakeLimiter(cfg.MaxConcurrentAuthPerIP),

		baseCtx:   ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		connsDone: make(chan struct{}),
		addrReady: make(chan struct{}),

		perIP:       make(map[netip.Addr]int),
		perListener: make(map[string]int),
	}
	s.slotFreed = sync.NewCond(&s.mu)
	var dropped []APIRange
	s.apis, dropped = newAPITable(h.APIs())
	for _, r := range dropped {
		logger.Warn("server: not serving API range the handler listed (empty, not decodable by kmsg, or a handler-defined type decodecost does not bound)",
			"key", r.Key, "name", kmsg.NameForKey(r.Key), "min_version", r.MinVersion, "max_version", r.MaxVersion)
	}
	s.apiKeys = advertisedAPIKeys(s.apis)
	s.saslAPIs = s.apis.withSASL()
	s.saslAPIKeys = advertisedAPIKeys(s.saslAPIs)
	return s
}

// QueuedRequestBytes is the request memory charged now against QueuedMaxRequestBytes:
// frames being read, decoded or queued, and what decoding them allocates (Kafka's
// MemoryPoolUsed gauge, with decoding counted too).
func (s *Server) QueuedRequestBytes() int64 { return s.budget.usedBytes() }

// ListenAndServe listens on the TCP address addr and calls Serve.
func (s *Server) ListenAndServe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Addr returns the address of the first listener passed to Serve, blocking until Serve has
// been called. It returns nil if the server was shut down before any Serve.
func (s *Server) Addr() net.Addr {
	select {
	case <-s.addrReady:
	case <-s.baseCtx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serve serves ln as the listener DefaultListenerName; see ServeListener.
func (s *Server) Serve(ln net.Listener) error {
	return s.ServeListener(DefaultListenerName, ln)
}

// ServeListener accepts connections on ln until Shutdown or Close, then returns
// ErrServerClosed. It closes ln. It may be called for several listeners; listeners of the
// same name share that name's connection limit (Config.Listeners) and its security
// protocol; a listener whose protocol lacks its TLS or SASL configuration is refused.
func (s *Server) ServeListener(name string, ln net.Listener) error {
	lc := s.cfg.Listeners[name]
	if err := lc.check(name); err != nil {
		ln.Close()
		return err
	}
	var tlsConf *tls.Config
	if lc.TLS != nil {
		tlsConf = lc.TLS.TLSConfig()
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	if s.addr == nil {
		s.addr = ln.Addr()
		close(s.addrReady)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, a connection aborted before accept and the like:
			// back off as net/http does, bounded at one second, instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed, retrying", "err", err, "backoff", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.baseCtx.Done():
				t.Stop()
			}
			continue
		}
		backoff = 0
		s.accept(nc, name, tlsConf)
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// accept registers nc, accepted on listener, and starts its goroutines. At the broker's or
// the listener's connection limit it first waits for a slot; it closes nc at once when the
// server is closing or nc's address already holds its maximum (Kafka's ConnectionQuotas.inc:
// the slot wait comes first, then the per-address check).
func (s *Server) accept(nc net.Conn, listener string, tlsConf *tls.Config) {
	if tc, ok := nc.(*net.TCPConn); ok {
		// Go enables TCP_NODELAY by default; say it, since small pipelined responses
		// must not wait for Nagle.
		_ = tc.SetNoDelay(true)
	}
	ip := remoteIP(nc)
	if tlsConf != nil {
		nc = tls.Server(nc, tlsConf) // the handshake runs on the connection's reader
	}
	s.mu.Lock()
	if !s.waitForSlot(listener) {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if lim := s.cfg.maxConnsForIP(ip); s.perIP[ip] >= lim {
		logIt, suppressed := s.rejectLog.allow(time.Now())
		s.mu.Unlock()
		if logIt {
			s.log.Info("rejected connection: its address already has the maximum number of connections",
				"remote", nc.RemoteAddr(), "max_connections_per_ip", lim, "rejections_not_logged", suppressed)
		}
		nc.Close()
		return
	}
	c := newConn(s, nc, ip, listener)
	s.conns[c] = struct{}{}
	s.perIP[ip]++
	s.perListener[listener]++
	s.mu.Unlock()
	c.start()
}

// connEnded is called once by each conn after both its goroutines have finished.
func (s *Server) connEnded(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
		delete(s.perIP, c.ip)
	}
	s.perListener[c.listener]--
	s.slotFreed.Broadcast()
	if s.closing && len(s.conns) == 0 {
		select {
		case <-s.connsDone:
		default:
			close(s.connsDone)
		}
	}
	s.mu.Unlock()
}

// beginClose stops accepting: it marks the server closing, closes the listeners and returns
// the open connections.
func (s *Server) beginClose() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		s.closing = true
		s.slotFreed.Broadcast()
		for ln := range s.listeners {
			ln.Close()
		}
		if len(s.conns) == 0 {
			close(s.connsDone)
		}
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// Shutdown stops accepting connections, stops reading new requests, lets every request
// already read finish (its Handle call, its Wait and the write of its response), then closes
// the connections. Handler contexts are cancelled at once so long polls return early. If ctx
// ends first, the remaining connections are closed without waiting and ctx's error is
// returned. When Shutdown returns nil, every ConnClosed call has been made.
func (s *Server) Shutdown(ctx context.Context) error {
	conns := s.beginClose()
	s.cancel()
	for _, c := range conns {
		c.stopReading()
	}
	select {
	case <-s.connsDone:
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close closes the listeners and every connection at once, dropping queued responses.
// ConnClosed is still called for each connection, possibly after Close returns.
func (s *Server) Close() error {
	conns := s.beginClose()
	s.cancel()
	for _, c := range conns {
		c.kill()
	}
	return nil
}
