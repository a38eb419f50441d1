package tlsconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/internal/security/acl"
)

// Server is a TLS listener's configuration, reloaded when the keystore or truststore
// file changes. The handshake path checks the files' modification time and size at most
// once per CheckInterval; a change is loaded whole (keystore and truststore together)
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
	mu      sync.Mutex // held while checking and reloading
	stamps  [2]fileStamp
	checked time.Time
}

// Options tunes a Server.
type Options struct {
	CheckInterval time.Duration // 0: DefaultCheckInterval; negative: check every handshake
	OnReloadError func(error)
}

// DefaultCheckInterval is how often, at most, the handshake path looks at the files.
const DefaultCheckInterval = time.Second

type fileStamp struct {
	modTime time.Time
	size    int64
}

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
	stamps, conf, err := s.load()
	if err != nil {
		return nil, err
	}
	s.stamps = stamps
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
	stamps, err := s.stat()
	if err != nil {
		s.reloadFailed(err)
		return
	}
	if stamps == s.stamps {
		return
	}
	stamps, conf, err := s.load()
	if err != nil {
		s.reloadFailed(err)
		return
	}
	s.stamps = stamps
	s.current.Store(conf)
}

func (s *Server) reloadFailed(err error) {
	if s.onReloadError != nil {
		s.onReloadError(err)
	}
}

func (s *Server) stat() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, path := range []string{s.cfg.KeystoreLocation, s.cfg.TruststoreLocation} {
		if path == "" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			return out, fmt.Errorf("tlsconfig: %w", err)
		}
		out[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return out, nil
}

// load reads both files, stamping them before reading so that a write racing the read is
// seen again at the next check.
func (s *Server) load() ([2]fileStamp, *tls.Config, error) {
	stamps, err := s.stat()
	if err != nil {
		return stamps, nil, err
	}
	ks, err := os.ReadFile(s.cfg.KeystoreLocation)
	if err != nil {
		return stamps, nil, fmt.Errorf("tlsconfig: ssl.keystore.location: %w", err)
	}
	cert, err := LoadKeystore(s.cfg.KeystoreType, ks, s.cfg.KeystorePassword)
	if err != nil {
		return stamps, nil, err
	}
	conf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   s.cfg.MinVersion,
		MaxVersion:   s.cfg.MaxVersion,
		CipherSuites: s.cfg.CipherSuites,
	}
	if s.cfg.TruststoreLocation != "" {
		ts, err := os.ReadFile(s.cfg.TruststoreLocation)
		if err != nil {
			return stamps, nil, fmt.Errorf("tlsconfig: ssl.truststore.location: %w", err)
		}
		if conf.ClientCAs, err = LoadTruststore(s.cfg.TruststoreType, ts, s.cfg.TruststorePassword); err != nil {
			return stamps, nil, err
		}
	}
	switch s.cfg.ClientAuth {
	case ClientAuthRequested:
		conf.ClientAuth = tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return stamps, conf, nil
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
