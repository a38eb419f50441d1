package tlsconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/internal/security/reload"
)

// Server is a TLS listener's configuration, reloaded when the keystore or truststore
// file changes (internal/security/reload: the handshake path looks at the files at most
// once per CheckInterval and compares their contents). A change is loaded whole (keystore
// and truststore together) and serves the next handshakes, while connections already
// open keep theirs; files that do not load leave the previous configuration in place and
// are tried again at the next look. Safe for concurrent use.
type Server struct {
	cfg    Config
	mapper *PrincipalMapper
	files  *reload.Files[*tls.Config]
}

// Options tunes a Server.
type Options struct {
	CheckInterval time.Duration // 0: reload.DefaultInterval; negative: look at every handshake
	OnReloadError func(error)   // hears each failed reload, for the broker's log
}

// NewServer loads cfg's files and returns the server configuration.
func NewServer(cfg Config, opts Options) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	mapper, _ := ParsePrincipalMappingRules(cfg.PrincipalMappingRules) // checked above
	s := &Server{cfg: cfg, mapper: mapper}
	paths := []string{cfg.KeystoreLocation}
	if cfg.TruststoreLocation != "" {
		paths = append(paths, cfg.TruststoreLocation)
	}
	var err error
	s.files, err = reload.New(paths, s.build, time.Now(), reload.Options{Interval: opts.CheckInterval, OnError: opts.OnReloadError})
	if err != nil {
		return nil, fmt.Errorf("tlsconfig: %w", err)
	}
	return s, nil
}

// TLSConfig is the configuration to hand tls.NewListener or tls.Server: it picks up the
// current files for every handshake.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: s.cfg.MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.files.Get(time.Now()), nil
		},
	}
}

// build makes the tls.Config from the keystore's and (if configured) truststore's bytes.
func (s *Server) build(files [][]byte) (*tls.Config, error) {
	cert, err := LoadKeystore(s.cfg.KeystoreType, files[0], s.cfg.KeystorePassword)
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
		if conf.ClientCAs, err = LoadTruststore(s.cfg.TruststoreType, files[1], s.cfg.TruststorePassword); err != nil {
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
