package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/internal/security/tlsconfig"
)

// SecurityProtocol is a listener's security.protocol (Kafka's listener.security.protocol.map
// values).
type SecurityProtocol string

const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

func (p SecurityProtocol) usesTLS() bool  { return p == SSL || p == SASLSSL }
func (p SecurityProtocol) usesSASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Anonymous is the principal of a connection nobody authenticated (Kafka's
// KafkaPrincipal.ANONYMOUS): every PLAINTEXT connection, and SSL without a client
// certificate.
var Anonymous = tlsconfig.Anonymous

// Defaults for the authentication limits (see Config).
const (
	// DefaultFailedAuthenticationDelay is Kafka's connection.failed.authentication.delay.ms.
	DefaultFailedAuthenticationDelay = 100 * time.Millisecond
	// DefaultMaxConcurrentAuthPerIP bounds the connections from one address that are in
	// their TLS handshake or SASL exchange at once (exactq only; see handshakeLimiter).
	DefaultMaxConcurrentAuthPerIP = 8
)

// NoFailedAuthenticationDelay as Config.FailedAuthenticationDelay answers a failed
// authentication at once.
const NoFailedAuthenticationDelay = -1

// checkListener reports what a listener's configuration lacks for its protocol.
func (l ListenerConfig) check(name string) error {
	switch l.SecurityProtocol {
	case "", Plaintext, SSL, SASLPlaintext, SASLSSL:
	default:
		return fmt.Errorf("server: listener %s: unknown security protocol %q", name, l.SecurityProtocol)
	}
	if l.SecurityProtocol.usesTLS() != (l.TLS != nil) {
		return fmt.Errorf("server: listener %s: security protocol %s with TLS config %v", name, l.protocol(), l.TLS != nil)
	}
	if l.SecurityProtocol.usesSASL() != (l.SASL != nil) {
		return fmt.Errorf("server: listener %s: security protocol %s with SASL config %v", name, l.protocol(), l.SASL != nil)
	}
	for _, d := range append([]time.Duration{l.MaxReauth}, slices.Collect(maps.Values(l.MaxReauthByMechanism))...) {
		if d < 0 || d > 0 && l.SASL == nil {
			return fmt.Errorf("server: listener %s: connections.max.reauth.ms %v on a %s listener (it is for SASL sessions)", name, d, l.protocol())
		}
	}
	return nil
}

func (l ListenerConfig) protocol() SecurityProtocol {
	if l.SecurityProtocol == "" {
		return Plaintext
	}
	return l.SecurityProtocol
}

// handshakeLimiter bounds, per client address, the connections authenticating at once
// (their TLS handshake, their SASL exchange, a re-authentication, and the delay after a
// failure). An address guessing passwords fast holds its few slots and queues behind
// them, each attempt costing it a failed-authentication delay; other addresses never
// wait for it, and a PLAIN attempt's PBKDF2 (thousands of HMAC rounds) runs for at most
// that many of its connections at a time. The map holds an entry only for addresses with
// a holder or waiter, so it is bounded by the open connections.
type handshakeLimiter struct {
	perIP int
	mu    sync.Mutex
	ips   map[netip.Addr]*ipSlots
}

type ipSlots struct {
	slots chan struct{} // a token per slot in use
	users int           // holders and waiters; the entry goes at zero
}

func newHandshakeLimiter(perIP int) *handshakeLimiter {
	return &handshakeLimiter{perIP: perIP, ips: map[netip.Addr]*ipSlots{}}
}

// acquire waits for one of ip's slots until ctx ends, and returns its release.
func (l *handshakeLimiter) acquire(ctx context.Context, ip netip.Addr) (release func(), err error) {
	l.mu.Lock()
	s := l.ips[ip]
	if s == nil {
		s = &ipSlots{slots: make(chan struct{}, l.perIP)}
		l.ips[ip] = s
	}
	s.users++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if s.users--; s.users == 0 {
			delete(l.ips, ip)
		}
		l.mu.Unlock()
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { <-s.slots; done() }) }, nil
}

// AuthStats counts SASL authentications since the server started (Kafka's
// successful-authentication-total, failed-authentication-total and their
// re-authentication twins).
type AuthStats struct {
	Succeeded, Failed             int64
	Reauthenticated, ReauthFailed int64
}

type authCounters struct{ succeeded, failed, reauthenticated, reauthFailed atomic.Int64 }

func (a *authCounters) count(reauth, ok bool) {
	switch {
	case reauth && ok:
		a.reauthenticated.Add(1)
	case reauth:
		a.reauthFailed.Add(1)
	case ok:
		a.succeeded.Add(1)
	default:
		a.failed.Add(1)
	}
}

// AuthStats returns the authentication counts.
func (s *Server) AuthStats() AuthStats {
	a := &s.authStats
	return AuthStats{Succeeded: a.succeeded.Load(), Failed: a.failed.Load(),
		Reauthenticated: a.reauthenticated.Load(), ReauthFailed: a.reauthFailed.Load()}
}

// authState is where a SASL connection is in Kafka's SaslServerAuthenticator states.
type authState int8

const (
	// authInitial: nothing received; ApiVersions or SaslHandshake may come.
	authInitial authState = iota
	// authHandshake: ApiVersions answered; only SaslHandshake may come.
	authHandshake
	// authExchange: SaslHandshake accepted; SaslAuthenticate tokens (or raw tokens after a
	// v0 handshake) until the exchange ends.
	authExchange
	// authBadMechanism: a re-authentication asked for another mechanism; the next
	// request closes the connection (Kafka's REAUTH_BAD_MECHANISM).
	authBadMechanism
	// authDone: authenticated; requests go to the handler.
	authDone
)

// connAuth is a connection's authentication state. The reader goroutine owns it.
type connAuth struct {
	listener  ListenerConfig
	state     authState
	exchange  sasl.Exchange
	mechanism string // of the last successful authentication
	rawTokens bool   // SaslHandshake v0: tokens framed without Kafka headers
	reauth    bool   // the exchange under way is a re-authentication
	// clientReauth: the client sent SaslAuthenticate v1+, so it knows session lifetimes
	// and can re-authenticate (Kafka's connectedClientSupportsReauthentication).
	clientReauth bool
	// sessionEnd is when the authenticated session expires (zero: never); the first
	// request after it, other than a re-authentication, closes the connection.
	sessionEnd time.Time
	release    func() // the handshake slot held, nil when none
}

// MaxSASLReceiveBytes bounds a frame on a SASL listener until the client is authenticated
// (Kafka's sasl.server.max.receive.size, 524288): an unauthenticated client cannot make
// the broker buffer a socket.request.max.bytes frame.
const MaxSASLReceiveBytes = 524288

// maxFrameBytes is the largest frame the connection accepts now.
func (c *conn) maxFrameBytes() int32 {
	if a := c.auth; a.listener.protocol().usesSASL() && (a.state != authDone || a.release != nil) {
		return min(c.s.cfg.MaxRequestBytes, MaxSASLReceiveBytes)
	}
	return c.s.cfg.MaxRequestBytes
}

func (a *connAuth) releaseSlot() {
	if a.release != nil {
		a.release()
		a.release = nil
	}
}

// authVerdict is what the authentication layer decided for one request.
type authVerdict int8

const (
	toHandler authVerdict = iota // authenticated: dispatch it
	answered                     // the server answered it (the pending reply is set)
	closeConn                    // close without an answer, as Kafka does
)

// errAuth explains a closeConn verdict in the log.
type errAuth struct{ reason string }

func (e errAuth) Error() string { return e.reason }

// gate runs a decoded request through the listener's authentication: on a SASL listener
// it answers ApiVersions, SaslHandshake and SaslAuthenticate until the client is
// authenticated, starts re-authentications and ends expired sessions; on the others
// every request goes to the handler (their TLS, if any, was done by secure).
func (c *conn) gate(d *decoded, p *pending) (authVerdict, error) {
	a := c.auth
	if a == nil || !a.listener.protocol().usesSASL() {
		return toHandler, nil
	}
	now := c.s.cfg.Now()
	switch a.state {
	case authDone:
		switch d.key {
		case 17:
			if a.clientReauth && a.mechanism != "" {
				return c.beginReauth(d, p)
			}
		}
		if !a.sessionEnd.IsZero() && !now.Before(a.sessionEnd) {
			return closeConn, errAuth{"the authenticated session expired without re-authentication (connections.max.reauth.ms or the credential's lifetime)"}
		}
		switch d.key {
		case 17: // a client that cannot re-authenticate: KafkaApis' answer
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.ErrorCode = 34 // ILLEGAL_SASL_STATE
			p.reply = Reply{Resp: resp}
			return answered, nil
		case 36:
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.ErrorCode = 34
			msg := "SaslAuthenticate request received after successful authentication"
			resp.ErrorMessage = &msg
			p.reply = Reply{Resp: resp}
			return answered, nil
		}
		return toHandler, nil
	case authInitial, authHandshake:
		switch {
		case d.key == 18 && a.state == authInitial:
			resp := c.s.apiVersionsReply(d, c.info, c.apiKeys)
			p.version = resp.Version
			p.reply = Reply{Resp: resp}
			if !d.apiVersionsFallback && resp.ErrorCode == 0 {
				a.state = authHandshake
			}
			return answered, nil
		case d.key == 17:
			return c.handshake(d, p)
		}
		return closeConn, errAuth{fmt.Sprintf("unexpected request %s (key %d) during SASL handshake", kmsg.NameForKey(d.key), d.key)}
	case authExchange:
		if d.key != 36 {
			// Kafka answers the request with ILLEGAL_SASL_STATE in its own response type
			// and closes; exactq closes without the answer (the client is broken either way).
			return closeConn, errAuth{fmt.Sprintf("unexpected request %s (key %d) during SASL authentication", kmsg.NameForKey(d.key), d.key)}
		}
		req := d.body.(*kmsg.SASLAuthenticateRequest)
		if d.version > 0 {
			a.clientReauth = true
		}
		return c.step(req.SASLAuthBytes, p, func(out sasl.Outcome, lifetime time.Duration) {
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.SASLAuthBytes = out.Reply
			if resp.SASLAuthBytes == nil {
				resp.SASLAuthBytes = []byte{}
			}
			resp.SessionLifetimeMillis = lifetime.Milliseconds()
			p.reply = Reply{Resp: resp}
		}, func(e *sasl.Error) {
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
			msg := e.ClientMessage(a.reauth)
			resp.ErrorMessage = &msg
			c.failReply(p, resp)
		})
	}
	// authBadMechanism
	return closeConn, errAuth{"re-authentication asked for a different SASL mechanism"}
}

// handshake answers SaslHandshake: the mechanism is started, or the connection fails
// with UNSUPPORTED_SASL_MECHANISM.
func (c *conn) handshake(d *decoded, p *pending) (authVerdict, error) {
	a := c.auth
	req := d.body.(*kmsg.SASLHandshakeRequest)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SupportedMechanisms = a.listener.SASL.Mechanisms()
	x, err := a.listener.SASL.Start(req.Mechanism)
	if err != nil {
		resp.ErrorCode = 33 // UNSUPPORTED_SASL_MECHANISM
		c.failReply(p, resp)
		c.log.Info("authentication failed: unsupported SASL mechanism", "mechanism", req.Mechanism)
		c.s.authStats.count(a.reauth, false)
		return answered, nil
	}
	p.reply = Reply{Resp: resp}
	if a.reauth && req.Mechanism != a.mechanism {
		a.state = authBadMechanism
		return answered, nil
	}
	a.exchange = x
	a.rawTokens = d.version == 0
	a.state = authExchange
	return answered, nil
}

// beginReauth starts a KIP-368 re-authentication on an authenticated connection: a
// handshake slot is taken again (a re-authentication is as costly as the first), then the
// handshake is answered as the first was.
func (c *conn) beginReauth(d *decoded, p *pending) (authVerdict, error) {
	a := c.auth
	if err := c.acquireHandshakeSlot(); err != nil {
		return closeConn, err
	}
	a.reauth = true
	return c.handshake(d, p)
}

// step feeds one client token to the exchange. ok is called with the outcome when the
// exchange continues or completes, fail with the failure.
func (c *conn) step(token []byte, p *pending, ok func(sasl.Outcome, time.Duration), fail func(*sasl.Error)) (authVerdict, error) {
	a := c.auth
	out, err := a.exchange.Step(token)
	if err == nil && out.Done && a.reauth && out.Principal != c.info.Principal {
		old := c.info.Principal
		err = &sasl.Error{Mechanism: a.exchange.Mechanism(), Public: fmt.Sprintf(
			"Cannot change principals during re-authentication from %s.%s: %s.%s",
			old.Type, old.Name, out.Principal.Type, out.Principal.Name)}
	}
	if err != nil {
		var e *sasl.Error
		if !errors.As(err, &e) { // the exchange promises *sasl.Error; be safe anyway
			e = &sasl.Error{Mechanism: a.exchange.Mechanism(), Reason: err.Error()}
		}
		c.log.Info("authentication failed", "mechanism", e.Mechanism, "reauthentication", a.reauth, "reason", e.Reason)
		c.s.authStats.count(a.reauth, false)
		fail(e)
		return answered, nil
	}
	var lifetime time.Duration
	if out.Done {
		now := c.s.cfg.Now()
		lifetime = sessionLifetime(now, out.Expiry, a.listener.maxReauth(a.exchange.Mechanism()))
		a.sessionEnd = time.Time{}
		if lifetime > 0 || !out.Expiry.IsZero() {
			a.sessionEnd = now.Add(lifetime)
		}
		c.s.authStats.count(a.reauth, true)
		a.mechanism = a.exchange.Mechanism()
		a.exchange, a.rawTokens, a.reauth = nil, false, false
		a.state = authDone
		c.info.Principal = out.Principal
		a.releaseSlot()
		c.log.Debug("authenticated", "principal", out.Principal.String(), "mechanism", a.mechanism, "session_lifetime", lifetime)
	}
	ok(out, lifetime)
	return answered, nil
}

// sessionLifetime is Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the time to
// the credential's expiry, capped by connections.max.reauth.ms, never negative; zero when
// neither applies (the session does not expire).
func sessionLifetime(now, credentialExpiry time.Time, maxReauth time.Duration) time.Duration {
	var lifetime time.Duration
	switch {
	case credentialExpiry.IsZero() && maxReauth <= 0:
		return 0
	case credentialExpiry.IsZero():
		lifetime = maxReauth
	case maxReauth <= 0:
		lifetime = credentialExpiry.Sub(now)
	default:
		lifetime = min(credentialExpiry.Sub(now), maxReauth)
	}
	return max(lifetime, 0)
}

// rawToken handles a frame after SaslHandshake v0: the frame is a bare SASL token and so
// is the answer (Kafka's handleSaslToken without headers). A failure closes the
// connection without an answer, after the failed-authentication delay.
func (c *conn) rawToken(frame []byte, p *pending) (authVerdict, error) {
	return c.step(frame, p, func(out sasl.Outcome, _ time.Duration) {
		p.raw = out.Reply
		if p.raw == nil {
			p.raw = []byte{}
		}
	}, func(*sasl.Error) {
		c.failReply(p, nil)
	})
}

// failReply answers a failed authentication: resp (nil for none) is sent after the
// failed-authentication delay and the connection closes. The handshake slot stays held
// until then (the connection's end releases it), so the delay paces the address.
func (c *conn) failReply(p *pending, resp kmsg.Response) {
	delay := c.s.cfg.FailedAuthenticationDelay
	ctx := c.ctx
	p.reply = Reply{Close: true, Wait: func() kmsg.Response {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		return resp
	}}
}

// acquireHandshakeSlot takes one of the address's authentication slots, waiting at most
// the idle timeout.
func (c *conn) acquireHandshakeSlot() error {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.IdleTimeout)
	defer cancel()
	release, err := c.s.handshakes.acquire(ctx, c.ip)
	if err != nil {
		return errAuth{"waited too long for an authentication slot of this address"}
	}
	c.auth.release = release
	return nil
}

// secure runs what a listener needs before the first request: a handshake slot, the TLS
// handshake and its principal. It returns an error to close the connection.
func (c *conn) secure() error {
	a := c.auth
	proto := a.listener.protocol()
	if proto == Plaintext {
		return nil
	}
	if err := c.acquireHandshakeSlot(); err != nil {
		return err
	}
	if proto.usesTLS() {
		tc := c.tlsConn()
		_ = tc.SetDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if err := tc.HandshakeContext(c.ctx); err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		_ = tc.SetDeadline(time.Time{})
		principal, err := a.listener.TLS.Principal(tc.ConnectionState())
		if err != nil {
			return fmt.Errorf("TLS client principal: %w", err)
		}
		c.info.Principal = principal
	}
	if !proto.usesSASL() {
		a.state = authDone
		a.releaseSlot()
	}
	return nil
}

// tlsConn is the connection's TLS layer; only called on TLS listeners, whose accept
// wrapped the socket.
func (c *conn) tlsConn() *tls.Conn { return c.nc.(*tls.Conn) }
