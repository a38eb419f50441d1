package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/internal/security/tlsconfig"
	"github.com/exactq/exactq/internal/security/tlsconfig/tlstest"
	"github.com/exactq/exactq/internal/testclock"
)

// secureEnv is a broker-side security setup made for one test: users alice (password
// "alice-secret", SCRAM-SHA-256 and -512) and bob ("bob-secret", SCRAM-SHA-512), an
// OAuth issuer whose key set the broker trusts, and a CA with a server certificate.
type secureEnv struct {
	auth    *sasl.Authenticator
	tls     *tlsconfig.Server
	ca      *tlstest.CA
	signer  *rsa.PrivateKey
	clock   *testclock.Clock // OAuth token validation's clock
	handler *principalHandler
}

func newSecureEnv(t *testing.T) *secureEnv {
	t.Helper()
	creds := map[[2]string]sasl.ScramCredential{}
	for user, mechs := range map[string][]string{"alice": {sasl.ScramSHA256, sasl.ScramSHA512}, "bob": {sasl.ScramSHA512}} {
		for _, m := range mechs {
			c, err := sasl.NewCredential(m, user+"-secret", nil, sasl.MinScramIterations)
			if err != nil {
				t.Fatal(err)
			}
			creds[[2]string{user, m}] = c
		}
	}
	env := &secureEnv{ca: tlstest.NewCA(t, "test-ca"), clock: testclock.New(), handler: newPrincipalHandler()}
	var err error
	if env.signer, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: env.signer.Public(), KeyID: "k1", Algorithm: "RS256"}}})
	validator, err := sasl.NewOAuthValidator(sasl.OAuthConfig{JWKS: jwks, ExpectedAudience: []string{"exactq"},
		ExpectedIssuer: "https://idp.test", ClockSkew: sasl.DefaultOAuthClockSkew})
	if err != nil {
		t.Fatal(err)
	}
	env.auth, err = sasl.New(sasl.Config{
		Mechanisms: []string{sasl.ScramSHA512, sasl.ScramSHA256, sasl.Plain, sasl.OAuthBearer},
		Credentials: func(user, mech string) (sasl.ScramCredential, bool) {
			c, ok := creds[[2]string{user, mech}]
			return c, ok
		},
		OAuth: validator,
		Now:   env.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ks := filepath.Join(t.TempDir(), "broker.pem")
	tlstest.WriteFile(t, ks, env.ca.Server(t, "broker").PEM(t))
	if env.tls, err = tlsconfig.NewServer(tlsconfig.Config{KeystoreType: tlsconfig.StoreTypePEM, KeystoreLocation: ks,
		ClientAuth: tlsconfig.ClientAuthNone, MinVersion: tls.VersionTLS12}, tlsconfig.Options{}); err != nil {
		t.Fatal(err)
	}
	return env
}

// token is a JWT for sub, valid from the test clock's now for ttl.
func (env *secureEnv) token(t *testing.T, sub string, ttl time.Duration) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: env.signer}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := env.clock.Now()
	tok, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: "https://idp.test", Audience: jwt.Audience{"exactq"}, Subject: sub,
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// principalHandler records the principal and connection of every request it handles.
type principalHandler struct {
	*testHandler
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	key       int16
	conn      uint64
	principal acl.Principal
	protocol  SecurityProtocol
}

func newPrincipalHandler() *principalHandler {
	h := &principalHandler{testHandler: newTestHandler()}
	h.handle = func(ctx context.Context, req *Request) Reply {
		h.mu.Lock()
		h.seen = append(h.seen, seenRequest{req.Key, req.Conn.ID, req.Conn.Principal, req.Conn.SecurityProtocol})
		h.mu.Unlock()
		return Reply{Resp: req.Body.ResponseKind()}
	}
	return h
}

func (h *principalHandler) requests() []seenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seenRequest(nil), h.seen...)
}

// serveSecure serves env's handler on one listener named after its protocol.
func serveSecure(t *testing.T, env *secureEnv, proto SecurityProtocol, edit func(*Config, *ListenerConfig)) *Server {
	t.Helper()
	lc := ListenerConfig{SecurityProtocol: proto}
	if proto.usesTLS() {
		lc.TLS = env.tls
	}
	if proto.usesSASL() {
		lc.SASL = env.auth
	}
	cfg := Config{FailedAuthenticationDelay: NoFailedAuthenticationDelay, Now: env.clock.Now}
	if edit != nil {
		edit(&cfg, &lc)
	}
	cfg.Listeners = map[string]ListenerConfig{string(proto): lc}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, env.handler, quietLogger(t))
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(string(proto), ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve returned %v", err)
		}
	})
	return s
}

// kgoClient is a franz-go client for s with mech (nil: no SASL) over TLS when tlsOn.
func (env *secureEnv) kgoClient(t *testing.T, s *Server, mech ksasl.Mechanism, tlsOn bool) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(s.Addr().String()), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	if tlsOn {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: env.ca.Pool(), ServerName: "localhost"}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// metadata sends one Metadata request straight to the seed broker.
func metadata(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

func TestSASLWithFranzGo(t *testing.T) {
	env := newSecureEnv(t)
	for _, proto := range []SecurityProtocol{SASLPlaintext, SASLSSL} {
		s := serveSecure(t, env, proto, nil)
		for name, mech := range map[string]ksasl.Mechanism{
			"PLAIN":         plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
			"SCRAM-SHA-256": scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
			"SCRAM-SHA-512": scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
			"OAUTHBEARER":   oauth.Auth{Token: env.token(t, "alice", time.Hour)}.AsMechanism(),
		} {
			t.Run(string(proto)+"/"+name, func(t *testing.T) {
				before := len(env.handler.requests())
				cl := env.kgoClient(t, s, mech, proto.usesTLS())
				if err := metadata(cl); err != nil {
					t.Fatalf("metadata: %v", err)
				}
				got := env.handler.requests()[before:]
				if len(got) != 1 || got[0].principal.String() != "User:alice" || got[0].protocol != proto {
					t.Fatalf("handler saw %+v", got)
				}
			})
		}
	}
}

func TestSASLFailuresWithFranzGo(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, SASLSSL, nil)
	for _, tc := range []struct {
		name string
		mech ksasl.Mechanism
		msg  string
	}{
		{"PLAIN wrong password", plain.Auth{User: "alice", Pass: "guess"}.AsMechanism(), "Authentication failed: Invalid username or password"},
		{"PLAIN unknown user", plain.Auth{User: "mallory", Pass: "guess"}.AsMechanism(), "Authentication failed: Invalid username or password"},
		{"SCRAM wrong password", scram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism(), "due to invalid credentials with SASL mechanism SCRAM-SHA-512"},
		{"SCRAM no such credential", scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(), "due to invalid credentials with SASL mechanism SCRAM-SHA-256"},
		{"OAUTHBEARER expired token", oauth.Auth{Token: env.token(t, "alice", -time.Minute)}.AsMechanism(), "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.AuthStats().Failed
			cl := env.kgoClient(t, s, tc.mech, true)
			err := metadata(cl)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one saying %q", err, tc.msg)
			}
			if tc.name != "OAUTHBEARER expired token" && !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("err = %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			if got := s.AuthStats().Failed; got != before+1 {
				t.Fatalf("failed authentications %d, want %d", got, before+1)
			}
		})
	}
	if got := env.handler.requests(); len(got) != 0 {
		t.Fatalf("the handler saw requests from clients that failed to authenticate: %+v", got)
	}
	// The broker is unharmed: a right password still works.
	if err := metadata(env.kgoClient(t, s, scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(), true)); err != nil {
		t.Fatal(err)
	}
}

func TestSSLListenerPrincipal(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, SSL, nil)
	if err := metadata(env.kgoClient(t, s, nil, true)); err != nil {
		t.Fatal(err)
	}
	if got := env.handler.requests(); len(got) != 1 || got[0].principal != Anonymous || got[0].protocol != SSL {
		t.Fatalf("handler saw %+v", got)
	}
	// A plaintext client on the TLS port never reaches the handler.
	c := dialServer(t, s)
	c.send(kmsg.NewPtrMetadataRequest(), 1)
	c.expectClosed()
	if got := env.handler.requests(); len(got) != 1 {
		t.Fatalf("handler saw %+v", got)
	}
}

func TestPlaintextListenerIsAnonymous(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, Plaintext, nil)
	if err := metadata(env.kgoClient(t, s, nil, false)); err != nil {
		t.Fatal(err)
	}
	if got := env.handler.requests(); len(got) != 1 || got[0].principal.String() != "User:ANONYMOUS" {
		t.Fatalf("handler saw %+v", got)
	}
}

func TestListenerConfigRefused(t *testing.T) {
	env := newSecureEnv(t)
	for name, lc := range map[string]ListenerConfig{
		"SSL without TLS":           {SecurityProtocol: SSL},
		"SASL_SSL without SASL":     {SecurityProtocol: SASLSSL, TLS: env.tls},
		"PLAINTEXT with SASL":       {SASL: env.auth},
		"unknown protocol":          {SecurityProtocol: "KERBEROS"},
		"reauth on a non-SASL port": {SecurityProtocol: SSL, TLS: env.tls, MaxReauth: time.Minute},
	} {
		s := New(Config{Listeners: map[string]ListenerConfig{"L": lc}}, env.handler, quietLogger(t))
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		if err := s.ServeListener("L", ln); err == nil || errors.Is(err, ErrServerClosed) {
			t.Errorf("%s: served (%v)", name, err)
		}
		s.Close()
	}
}

// dialServer is a raw client of s's first listener.
func dialServer(t *testing.T, s *Server) *rawClient { return dial(t, s) }

func saslHandshake(version int16, mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = version, mech
	return r
}

func saslAuthenticate(version int16, token string) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = version, []byte(token)
	return r
}

func TestRequestsBeforeAuthentication(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, SASLPlaintext, nil)
	md := metadataReq(12)

	// A request other than ApiVersions or SaslHandshake first: closed, unanswered.
	c := dial(t, s)
	c.send(md, 1)
	c.expectClosed()

	// ApiVersions lists the SASL keys; then anything but SaslHandshake closes.
	c = dial(t, s)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	c.send(av, 1)
	_, resp := c.recv(av)
	keys := map[int16]bool{}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		keys[k.ApiKey] = true
	}
	if !keys[17] || !keys[36] {
		t.Fatalf("ApiVersions on a SASL listener lacks SaslHandshake/SaslAuthenticate: %v", keys)
	}
	c.send(md, 2)
	c.expectClosed()

	// ApiVersions twice: closed (Kafka answers it once, before the handshake).
	c = dial(t, s)
	c.send(av, 1)
	c.recv(av)
	c.send(av, 2)
	c.expectClosed()

	// After the handshake, anything but SaslAuthenticate: closed.
	c = dial(t, s)
	hs := saslHandshake(1, "PLAIN")
	c.send(hs, 1)
	if _, r := c.recv(hs); r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		t.Fatalf("handshake: %+v", r)
	}
	c.send(md, 2)
	c.expectClosed()

	// An unsupported mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, closed.
	c = dial(t, s)
	hs = saslHandshake(1, "GSSAPI")
	c.send(hs, 1)
	_, r := c.recv(hs)
	hr := r.(*kmsg.SASLHandshakeResponse)
	if hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hr.SupportedMechanisms, ",") != "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER" {
		t.Fatalf("unsupported mechanism: %+v", hr)
	}
	c.expectClosed()

	// A failed SaslAuthenticate: answered with the error, then closed.
	c = dial(t, s)
	c.send(saslHandshake(1, "PLAIN"), 1)
	c.recv(saslHandshake(1, "PLAIN"))
	sa := saslAuthenticate(2, "\x00alice\x00wrong")
	c.send(sa, 2)
	_, r = c.recv(sa)
	ar := r.(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || *ar.ErrorMessage != "Authentication failed: Invalid username or password" {
		t.Fatalf("failed authenticate: %+v", ar)
	}
	c.expectClosed()

	// An oversized frame before authentication: closed (sasl.server.max.receive.size).
	c = dial(t, s)
	c.write(binary.BigEndian.AppendUint32(nil, MaxSASLReceiveBytes+1))
	c.expectClosed()

	if got := env.handler.requests(); len(got) != 0 {
		t.Fatalf("the handler saw unauthenticated requests: %+v", got)
	}
}

func TestAfterAuthentication(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, SASLPlaintext, nil)
	c := dial(t, s)
	c.send(saslHandshake(1, "PLAIN"), 1)
	c.recv(saslHandshake(1, "PLAIN"))
	sa := saslAuthenticate(0, "\x00alice\x00alice-secret")
	c.send(sa, 2)
	if _, r := c.recv(sa); r.(*kmsg.SASLAuthenticateResponse).ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", r)
	}
	md := metadataReq(12)
	c.send(md, 3)
	c.recv(md)
	// SaslAuthenticate again: ILLEGAL_SASL_STATE, the connection stays.
	c.send(sa, 4)
	if _, r := c.recv(sa); r.(*kmsg.SASLAuthenticateResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("second authenticate: %+v", r)
	}
	// A SaslAuthenticate v0 client cannot re-authenticate: its handshake is refused too.
	hs := saslHandshake(1, "PLAIN")
	c.send(hs, 5)
	if _, r := c.recv(hs); r.(*kmsg.SASLHandshakeResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake after authentication: %+v", r)
	}
	c.send(md, 6)
	c.recv(md)
	if got := env.handler.requests(); len(got) != 2 || got[0].principal.Name != "alice" {
		t.Fatalf("handler saw %+v", got)
	}
}

// rawFrame writes a size-prefixed frame with no header (a SaslHandshake v0 token).
func (c *rawClient) rawFrame(b []byte) {
	c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
}

func TestSaslHandshakeV0Tokens(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, SASLPlaintext, nil)
	c := dial(t, s)
	hs := saslHandshake(0, "PLAIN")
	c.send(hs, 1)
	if _, r := c.recv(hs); r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		t.Fatalf("handshake v0: %+v", r)
	}
	c.rawFrame([]byte("\x00bob\x00bob-secret"))
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil || binary.BigEndian.Uint32(size[:]) != 0 {
		t.Fatalf("raw token answer: %v %v", size, err)
	}
	md := metadataReq(12)
	c.send(md, 2)
	c.recv(md)
	if got := env.handler.requests(); len(got) != 1 || got[0].principal.Name != "bob" {
		t.Fatalf("handler saw %+v", got)
	}
	// A wrong raw token closes without an answer.
	c = dial(t, s)
	c.send(hs, 1)
	c.recv(hs)
	c.rawFrame([]byte("\x00bob\x00wrong"))
	c.expectClosed()
}

func TestReauthenticationWithFranzGo(t *testing.T) {
	env := newSecureEnv(t)
	// A lifetime under kgo's one-second margin makes it re-authenticate before every
	// request, in place on the same connection.
	s := serveSecure(t, env, SASLSSL, func(_ *Config, lc *ListenerConfig) { lc.MaxReauth = 500 * time.Millisecond })
	cl := env.kgoClient(t, s, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), true)
	for i := range 4 {
		if err := metadata(cl); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	got := env.handler.requests()
	for _, r := range got {
		if r.conn != got[0].conn || r.principal.Name != "alice" {
			t.Fatalf("requests on different connections or principals: %+v", got)
		}
	}
	if st := s.AuthStats(); st.Succeeded != 1 || st.Reauthenticated < 3 || st.ReauthFailed != 0 {
		t.Fatalf("auth stats %+v, want 1 authentication and 3+ re-authentications", st)
	}
}

// authenticate runs a PLAIN v1 handshake and SaslAuthenticate at version v on c and
// returns the response.
func authenticate(t *testing.T, c *rawClient, corr int32, user, pass string, v int16) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := saslHandshake(1, "PLAIN")
	c.send(hs, corr)
	if _, r := c.recv(hs); r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		t.Fatalf("handshake: %+v", r)
	}
	sa := saslAuthenticate(v, "\x00"+user+"\x00"+pass)
	c.send(sa, corr+1)
	_, r := c.recv(sa)
	return r.(*kmsg.SASLAuthenticateResponse)
}

func TestSessionExpiry(t *testing.T) {
	env := newSecureEnv(t)
	clock := env.clock // sessions and tokens on one clock
	s := serveSecure(t, env, SASLPlaintext, func(cfg *Config, lc *ListenerConfig) { lc.MaxReauth = time.Minute })
	md := metadataReq(12)

	// The lifetime is reported; within it requests are served, past it the next one
	// closes the connection.
	c := dial(t, s)
	if r := authenticate(t, c, 1, "alice", "alice-secret", 1); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
		t.Fatalf("authenticate: %+v", r)
	}
	clock.Advance(59 * time.Second)
	c.send(md, 3)
	c.recv(md)
	clock.Advance(time.Second)
	c.send(md, 4)
	c.expectClosed()

	// Re-authenticated in time, the session goes on; as another user, it fails.
	c = dial(t, s)
	authenticate(t, c, 1, "alice", "alice-secret", 2)
	clock.Advance(30 * time.Second)
	if r := authenticate(t, c, 3, "alice", "alice-secret", 2); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
		t.Fatalf("re-authenticate: %+v", r)
	}
	clock.Advance(45 * time.Second) // past the first session's end, within the second's
	c.send(md, 5)
	c.recv(md)
	r := authenticate(t, c, 6, "bob", "bob-secret", 2)
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || !strings.Contains(*r.ErrorMessage, "Cannot change principals during re-authentication from User.alice: User.bob") {
		t.Fatalf("re-authenticate as bob: %+v", r)
	}
	c.expectClosed()

	// An OAUTHBEARER session ends with its token, sooner than connections.max.reauth.ms.
	c = dial(t, s)
	hs := saslHandshake(1, "OAUTHBEARER")
	c.send(hs, 1)
	c.recv(hs)
	sa := saslAuthenticate(2, "n,,\x01auth=Bearer "+env.token(t, "carol", 10*time.Second)+"\x01\x01")
	c.send(sa, 2)
	if _, r := c.recv(sa); r.(*kmsg.SASLAuthenticateResponse).SessionLifetimeMillis != 10000 {
		t.Fatalf("token session: %+v", r)
	}
}

func TestFailedAuthenticationDelay(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, SASLPlaintext, func(cfg *Config, _ *ListenerConfig) {
		cfg.FailedAuthenticationDelay = 300 * time.Millisecond
	})
	c := dial(t, s)
	c.send(saslHandshake(1, "PLAIN"), 1)
	c.recv(saslHandshake(1, "PLAIN"))
	start := time.Now()
	sa := saslAuthenticate(1, "\x00alice\x00wrong")
	c.send(sa, 2)
	c.recv(sa)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("the failure was answered after %v, before the delay", waited)
	}
}

// TestHandshakeSlotsPerAddress: one address holding all its authentication slots (say,
// connections guessing passwords) makes its next connection wait, while another address
// authenticates at once.
func TestHandshakeSlotsPerAddress(t *testing.T) {
	env := newSecureEnv(t)
	s := serveSecure(t, env, SASLPlaintext, func(cfg *Config, _ *ListenerConfig) { cfg.MaxConcurrentAuthPerIP = 2 })
	hs := saslHandshake(1, "PLAIN")
	var holders []*rawClient
	for range 2 {
		c := dialFrom(t, s, "127.0.0.2")
		c.send(hs, 1)
		c.recv(hs) // answered: it holds a slot, mid-authentication
		holders = append(holders, c)
	}
	// A third connection from that address is not read while the two hold the slots.
	waiting := dialFrom(t, s, "127.0.0.2")
	waiting.send(hs, 1)
	answered := make(chan struct{})
	go func() { waiting.recv(hs); close(answered) }()

	// Another address is not held up.
	other := dialFrom(t, s, "127.0.0.3")
	if r := authenticate(t, other, 1, "alice", "alice-secret", 1); r.ErrorCode != 0 {
		t.Fatalf("other address: %+v", r)
	}
	select {
	case <-answered:
		t.Fatal("a third connection of a full address was served")
	default:
	}
	// One holder finishing (here: failing) frees a slot for the waiting connection.
	sa := saslAuthenticate(1, "\x00alice\x00wrong")
	holders[0].send(sa, 2)
	holders[0].recv(sa)
	holders[0].expectClosed()
	select {
	case <-answered:
	case <-time.After(safetyDeadline):
		t.Fatal("the waiting connection was never served")
	}
}

// TestSSLClientCertificate: on an SSL listener requiring client certificates, the
// principal is the certificate's subject through ssl.principal.mapping.rules; on SASL_SSL
// the SASL identity wins over the certificate, as in Kafka.
func TestSSLClientCertificate(t *testing.T) {
	env := newSecureEnv(t)
	dir := t.TempDir()
	ks, ts := filepath.Join(dir, "ks.p12"), filepath.Join(dir, "ts.pem")
	tlstest.WriteFile(t, ks, env.ca.Server(t, "broker").PKCS12(t, "pw"))
	tlstest.WriteFile(t, ts, tlstest.CertPEM(env.ca.Cert))
	cfg, err := tlsconfig.ParseConfig(map[string]string{
		"ssl.keystore.type": "PKCS12", "ssl.keystore.location": ks, "ssl.keystore.password": "pw",
		"ssl.truststore.type": "PEM", "ssl.truststore.location": ts, "ssl.client.auth": "required",
		"ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=apps,O=Example$/$1/U,DEFAULT",
	})
	if err != nil {
		t.Fatal(err)
	}
	mtls, err := tlsconfig.NewServer(cfg, tlsconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env.tls = mtls
	leaf := env.ca.Client(t, pkix.Name{CommonName: "orders", OrganizationalUnit: []string{"apps"}, Organization: []string{"Example"}})
	withCert := func(mech ksasl.Mechanism, s *Server) *kgo.Client {
		opts := []kgo.Opt{kgo.SeedBrokers(s.Addr().String()), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second),
			kgo.DialTLSConfig(&tls.Config{RootCAs: env.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{leaf.TLS()}})}
		if mech != nil {
			opts = append(opts, kgo.SASL(mech))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	s := serveSecure(t, env, SSL, nil)
	if err := metadata(withCert(nil, s)); err != nil {
		t.Fatal(err)
	}
	// Without a certificate the handshake fails and nothing reaches the handler.
	if err := metadata(env.kgoClient(t, s, nil, true)); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	s2 := serveSecure(t, env, SASLSSL, nil)
	if err := metadata(withCert(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), s2)); err != nil {
		t.Fatal(err)
	}
	got := env.handler.requests()
	if len(got) != 2 || got[0].principal.String() != "User:ORDERS" || got[1].principal.String() != "User:alice" {
		t.Fatalf("handler saw %+v", got)
	}
}
