package tlsconfig

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/internal/security/acl"
)

// Server is a TLS listener's configuration, reloaded when the keystore or truststore
// file changes. The handshake path reads the files at most once per CheckInterval; a change is loaded whole (keystore and truststore together)
// and serves the next handshakes, while connections already open keep theirs. A file
// that does not load (half written, wrong password) leaves the previous configuration in
// place and is tried again at the next check. Safe for concurrent use.
type Server struct {
	cfg    Config
	mapper *PrincipalMapper
	// CheckInterval is the least time between two looks at the files (1 s by default);
	// OnReloadError, if set, hears each failed reload (for the broker's log).
	checkInterval time.Duration
	onReloadError func(error)

	current atomic.Pointer[tls.Config]
	mu      sync.Mutex        // held while checking and reloading
	loaded  [sha256.Size]byte // digest of the files current was built from
	checked time.Time
}

// Options tunes a Server.
type Options struct {
	CheckInterval time.Duration // 0: DefaultCheckInterval; negative: check every handshake
	OnReloadError func(error)
}

// DefaultCheckInterval is how often, at most, the handshake path looks at the files.
const DefaultCheckInterval = time.Second

// NewServer loads cfg's files and returns the server configuration.
func NewServer(cfg Config, opts Options) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	mapper, _ := ParsePrincipalMappingRules(cfg.PrincipalMappingRules) // checked above
	s := &Server{cfg: cfg, mapper: mapper, checkInterval: opts.CheckInterval, onReloadError: opts.OnReloadError}
	if s.checkInterval == 0 {
		s.checkInterval = DefaultCheckInterval
	}
	files, err := s.read()
	if err != nil {
		return nil, err
	}
	conf, err := s.build(files)
	if err != nil {
		return nil, err
	}
	s.loaded = files.digest()
	s.current.Store(conf)
	s.checked = time.Now()
	return s, nil
}

// TLSConfig is the configuration to hand tls.NewListener or tls.Server: it picks up the
// current files for every handshake.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: s.cfg.MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s.maybeReload(time.Now())
			return s.current.Load(), nil
		},
	}
}

func (s *Server) maybeReload(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checkInterval > 0 && now.Sub(s.checked) < s.checkInterval {
		return
	}
	s.checked = now
	files, err := s.read()
	if err != nil {
		s.reloadFailed(err)
		return
	}
	if files.digest() == s.loaded {
		return
	}
	conf, err := s.build(files)
	if err != nil {
		s.reloadFailed(err)
		return
	}
	s.loaded = files.digest()
	s.current.Store(conf)
}

func (s *Server) reloadFailed(err error) {
	if s.onReloadError != nil {
		s.onReloadError(err)
	}
}

// storeFiles are the keystore's and truststore's bytes. A change is found by comparing
// their digest, not the files' modification times: file systems stamp times at a clock
// tick of some milliseconds, and a certificate rewritten within one tick at the same size
// would be missed. The files are a few KiB, read at most once per CheckInterval.
type storeFiles struct{ keystore, truststore []byte }

func (f storeFiles) digest() [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d:", len(f.keystore))
	h.Write(f.keystore)
	h.Write(f.truststore)
	return [sha256.Size]byte(h.Sum(nil))
}

func (s *Server) read() (storeFiles, error) {
	var f storeFiles
	var err error
	if f.keystore, err = readLimited(s.cfg.KeystoreLocation); err != nil {
		return f, fmt.Errorf("tlsconfig: ssl.keystore.location: %w", err)
	}
	if s.cfg.TruststoreLocation != "" {
		if f.truststore, err = readLimited(s.cfg.TruststoreLocation); err != nil {
			return f, fmt.Errorf("tlsconfig: ssl.truststore.location: %w", err)
		}
	}
	return f, nil
}

// maxStoreBytes bounds a keystore or truststore file: a chain of certificates or a
// bundle of CAs is far smaller.
const maxStoreBytes = 16 << 20

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStoreBytes+1))
	if err == nil && len(b) > maxStoreBytes {
		err = fmt.Errorf("%s is larger than %d bytes", path, maxStoreBytes)
	}
	return b, err
}

func (s *Server) build(files storeFiles) (*tls.Config, error) {
	cert, err := LoadKeystore(s.cfg.KeystoreType, files.keystore, s.cfg.KeystorePassword)
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   s.cfg.MinVersion,
		MaxVersion:   s.cfg.MaxVersion,
		CipherSuites: s.cfg.CipherSuites,
	}
	if s.cfg.TruststoreLocation != "" {
		if conf.ClientCAs, err = LoadTruststore(s.cfg.TruststoreType, files.truststore, s.cfg.TruststorePassword); err != nil {
			return nil, err
		}
	}
	switch s.cfg.ClientAuth {
	case ClientAuthRequested:
		conf.ClientAuth = tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// Anonymous is Kafka's KafkaPrincipal.ANONYMOUS: a TLS client without a certificate.
var Anonymous = acl.Principal{Type: "User", Name: "ANONYMOUS"}

// Principal is the principal of a completed handshake, as Kafka's
// DefaultKafkaPrincipalBuilder gives it for SSL: the client certificate's distinguished
// name through ssl.principal.mapping.rules, or ANONYMOUS without a certificate. An error
// (no rule applies) fails the connection, as Kafka fails its handshake.
func (s *Server) Principal(state tls.ConnectionState) (acl.Principal, error) {
	return principalOf(s.mapper, state)
}

func principalOf(m *PrincipalMapper, state tls.ConnectionState) (acl.Principal, error) {
	if len(state.PeerCertificates) == 0 {
		return Anonymous, nil
	}
	dn, err := DistinguishedName(state.PeerCertificates[0])
	if err != nil {
		return acl.Principal{}, err
	}
	name, err := m.Name(dn)
	if err != nil {
		return acl.Principal{}, err
	}
	if name == "" {
		return acl.Principal{}, errors.New("tlsconfig: the mapping rules gave an empty principal name")
	}
	return acl.Principal{Type: "User", Name: name}, nil
}
