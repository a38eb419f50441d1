package tlsconfig

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/internal/security/tlsconfig/tlstest"
)

// listener serves TLS with srv on a real TCP port; each accepted connection completes
// its handshake and reports the principal (or the handshake's error) on the channel.
type listener struct {
	addr    string
	results chan result
}

type result struct {
	principal acl.Principal
	err       error
}

func serve(t *testing.T, srv *Server) *listener {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{addr: ln.Addr().String(), results: make(chan result, 16)}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			err = tc.Handshake()
			var r result
			if err != nil {
				r.err = err
			} else {
				r.principal, r.err = srv.Principal(tc.ConnectionState())
			}
			// Answer one byte so the client knows the server side finished (TLS 1.3
			// reports a refused client certificate only on the first read).
			if r.err == nil {
				tc.Write([]byte{1})
			}
			tc.Close()
			l.results <- r
		}
	}()
	return l
}

// dial connects with conf and returns the server's leaf certificate serial and the
// server side's outcome.
func (l *listener) dial(t *testing.T, conf *tls.Config) (string, result, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.addr, conf)
	var serial string
	if err == nil {
		serial = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
		var b [1]byte
		if n, rerr := c.Read(b[:]); n != 1 {
			err = rerr // a byte, with or without the EOF after it, is success
		}
		c.Close()
	}
	select {
	case r := <-l.results:
		return serial, r, err
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not finish the handshake")
	}
	return "", result{}, nil
}

type fixture struct {
	dir    string
	ca     *tlstest.CA
	server *tlstest.Leaf
	ksPath string
	tsPath string
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{dir: t.TempDir(), ca: tlstest.NewCA(t, "test-ca")}
	f.server = f.ca.Server(t, "broker")
	f.ksPath = filepath.Join(f.dir, "keystore")
	f.tsPath = filepath.Join(f.dir, "truststore")
	return f
}

func (f *fixture) client(extra ...func(*tls.Config)) *tls.Config {
	c := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"}
	for _, e := range extra {
		e(c)
	}
	return c
}

func TestPEMKeystoreAndReload(t *testing.T) {
	f := newFixture(t)
	tlstest.WriteFile(t, f.ksPath, f.server.PEM(t))
	var reloadErrs []error
	var mu sync.Mutex
	srv, err := NewServer(Config{KeystoreType: StoreTypePEM, KeystoreLocation: f.ksPath, ClientAuth: ClientAuthNone,
		MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13},
		Options{CheckInterval: -1, OnReloadError: func(err error) { mu.Lock(); reloadErrs = append(reloadErrs, err); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	l := serve(t, srv)
	serial, r, err := l.dial(t, f.client())
	if err != nil || r.err != nil || serial != f.server.Cert.SerialNumber.String() {
		t.Fatalf("first connection: serial %s (want %s) %v %v", serial, f.server.Cert.SerialNumber, err, r.err)
	}
	if r.principal != Anonymous {
		t.Fatalf("no client certificate: principal %v", r.principal)
	}
	// A new certificate written over the file is served to the next connection.
	next := f.ca.Server(t, "broker")
	tlstest.WriteFile(t, f.ksPath, next.PEM(t))
	serial, _, err = l.dial(t, f.client())
	if err != nil || serial != next.Cert.SerialNumber.String() {
		t.Fatalf("after the change: serial %s (want %s) %v", serial, next.Cert.SerialNumber, err)
	}
	// A broken file keeps the last good certificate and reports the failure.
	tlstest.WriteFile(t, f.ksPath, []byte("-----BEGIN PRIVATE KEY-----\ngarbage\n"))
	serial, _, err = l.dial(t, f.client())
	if err != nil || serial != next.Cert.SerialNumber.String() {
		t.Fatalf("after a broken write: serial %s %v", serial, err)
	}
	mu.Lock()
	if len(reloadErrs) == 0 {
		t.Error("the failed reload was not reported")
	}
	mu.Unlock()
}

func TestPKCS12StoresAndClientAuth(t *testing.T) {
	f := newFixture(t)
	tlstest.WriteFile(t, f.ksPath, f.server.PKCS12(t, "ks-pass"))
	tlstest.WriteFile(t, f.tsPath, f.ca.TrustPKCS12(t, "ts-pass"))
	cfg, err := ParseConfig(map[string]string{
		"ssl.keystore.type": "PKCS12", "ssl.keystore.location": f.ksPath, "ssl.keystore.password": "ks-pass",
		"ssl.truststore.type": "PKCS12", "ssl.truststore.location": f.tsPath, "ssl.truststore.password": "ts-pass",
		"ssl.client.auth":             "required",
		"ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT",
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, Options{CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	l := serve(t, srv)
	alice := f.ca.Client(t, pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}})
	withCert := func(leaf *tlstest.Leaf) func(*tls.Config) {
		return func(c *tls.Config) { c.Certificates = []tls.Certificate{leaf.TLS()} }
	}
	_, r, err := l.dial(t, f.client(withCert(alice)))
	if err != nil || r.err != nil || r.principal.String() != "User:alice" {
		t.Fatalf("mapped principal: %v %v %v", r.principal, err, r.err)
	}
	other := f.ca.Client(t, pkix.Name{CommonName: "bob", Organization: []string{"Org"}})
	_, r, _ = l.dial(t, f.client(withCert(other)))
	if r.err != nil || r.principal.String() != "User:CN=bob,O=Org" {
		t.Fatalf("DEFAULT rule: %v %v", r.principal, r.err)
	}
	// Required: no certificate, or one from another CA, fails the handshake.
	_, r, _ = l.dial(t, f.client())
	if r.err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	stranger := tlstest.NewCA(t, "other-ca").Client(t, pkix.Name{CommonName: "mallory"})
	_, r, _ = l.dial(t, f.client(withCert(stranger)))
	if r.err == nil {
		t.Fatal("a certificate from an untrusted CA was accepted")
	}
}

func TestClientAuthRequested(t *testing.T) {
	f := newFixture(t)
	tlstest.WriteFile(t, f.ksPath, f.server.PEM(t))
	tlstest.WriteFile(t, f.tsPath, tlstest.CertPEM(f.ca.Cert))
	cfg, err := ParseConfig(map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": f.ksPath,
		"ssl.truststore.type": "PEM", "ssl.truststore.location": f.tsPath, "ssl.client.auth": "requested"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := serve(t, srv)
	_, r, err := l.dial(t, f.client())
	if err != nil || r.err != nil || r.principal != Anonymous {
		t.Fatalf("requested, no certificate: %v %v %v", r.principal, err, r.err)
	}
	carol := f.ca.Client(t, pkix.Name{CommonName: "carol"})
	_, r, _ = l.dial(t, f.client(func(c *tls.Config) { c.Certificates = []tls.Certificate{carol.TLS()} }))
	if r.err != nil || r.principal.String() != "User:CN=carol" {
		t.Fatalf("requested, with certificate: %v %v", r.principal, r.err)
	}
}

func TestEnabledProtocols(t *testing.T) {
	f := newFixture(t)
	tlstest.WriteFile(t, f.ksPath, f.server.PEM(t))
	props := map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": f.ksPath}
	cfg, err := ParseConfig(props)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS13 {
		t.Fatalf("default protocols %x..%x", cfg.MinVersion, cfg.MaxVersion)
	}
	srv, _ := NewServer(cfg, Options{})
	l := serve(t, srv)
	// TLS 1.1 is never served.
	if _, _, err := l.dial(t, f.client(func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 })); err == nil {
		t.Fatal("a TLS 1.1 client connected")
	}
	props["ssl.enabled.protocols"] = "TLSv1.3"
	cfg, _ = ParseConfig(props)
	srv, _ = NewServer(cfg, Options{})
	l = serve(t, srv)
	if _, _, err := l.dial(t, f.client(func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 })); err == nil {
		t.Fatal("a TLS 1.2 client connected to a TLSv1.3-only listener")
	}
	if _, r, err := l.dial(t, f.client()); err != nil || r.err != nil {
		t.Fatalf("TLS 1.3: %v %v", err, r.err)
	}
	// Cipher suites: TLS 1.2 suites by their IANA names.
	props["ssl.enabled.protocols"] = "TLSv1.2"
	props["ssl.cipher.suites"] = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	cfg, err = ParseConfig(props)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ = NewServer(cfg, Options{})
	l = serve(t, srv)
	if _, _, err := l.dial(t, f.client(func(c *tls.Config) {
		c.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	})); err == nil {
		t.Fatal("a suite outside ssl.cipher.suites was negotiated")
	}
	if _, r, err := l.dial(t, f.client()); err != nil || r.err != nil {
		t.Fatalf("the configured suite: %v %v", err, r.err)
	}
}

func TestParseConfigRefusals(t *testing.T) {
	base := func() map[string]string {
		return map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": "/x"}
	}
	for name, edit := range map[string]func(map[string]string){
		"JKS keystore":       func(p map[string]string) { p["ssl.keystore.type"] = "JKS" },
		"no keystore type":   func(p map[string]string) { delete(p, "ssl.keystore.type") },
		"no keystore":        func(p map[string]string) { delete(p, "ssl.keystore.location") },
		"TLSv1.1":            func(p map[string]string) { p["ssl.enabled.protocols"] = "TLSv1.1,TLSv1.2" },
		"bad client auth":    func(p map[string]string) { p["ssl.client.auth"] = "sometimes" },
		"required, no trust": func(p map[string]string) { p["ssl.client.auth"] = "required" },
		"encrypted PEM key":  func(p map[string]string) { p["ssl.key.password"] = "x" },
		"inline key":         func(p map[string]string) { p["ssl.keystore.key"] = "-----BEGIN" },
		"unknown suite":      func(p map[string]string) { p["ssl.cipher.suites"] = "TLS_RSA_WITH_RC4_128_SHA" },
		"one TLS 1.3 suite": func(p map[string]string) {
			p["ssl.cipher.suites"] = "TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
		},
		"bad mapping rule": func(p map[string]string) { p["ssl.principal.mapping.rules"] = "RULE:x" },
	} {
		p := base()
		edit(p)
		if _, err := ParseConfig(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// An encrypted PEM key is named as such when found in the file.
	_, err := LoadKeystore(StoreTypePEM, []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"), "")
	if err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Errorf("encrypted key: %v", err)
	}
	// A PKCS12 keystore with the wrong password does not load.
	f := newFixture(t)
	if _, err := LoadKeystore(StoreTypePKCS12, f.server.PKCS12(t, "right"), "wrong"); err == nil {
		t.Error("wrong PKCS12 password accepted")
	}
}
