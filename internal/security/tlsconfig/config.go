// Package tlsconfig turns Kafka's ssl.* broker settings into a crypto/tls server
// configuration: PEM and PKCS12 keystores and truststores, ssl.client.auth, the enabled
// protocols and cipher suites, certificates reloaded when their files change, and the
// client certificate's principal through ssl.principal.mapping.rules. Loading is pure
// (bytes in, *tls.Config out); the Server type adds the file reads and the reload check,
// done on the handshake path so no goroutine or watcher is needed.
package tlsconfig

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// ClientAuth is ssl.client.auth.
type ClientAuth string

const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

// Store types exactq reads (ssl.keystore.type, ssl.truststore.type). Kafka's default, JKS,
// is Java's own format: convert it with `keytool -importkeystore -deststoretype PKCS12`.
const (
	StoreTypePEM    = "PEM"
	StoreTypePKCS12 = "PKCS12"
)

// Config holds the ssl.* keys a TLS listener uses.
type Config struct {
	KeystoreType       string // ssl.keystore.type: PEM or PKCS12
	KeystoreLocation   string // ssl.keystore.location
	KeystorePassword   string // ssl.keystore.password (PKCS12)
	KeyPassword        string // ssl.key.password: PKCS12 only, and equal to the keystore's
	TruststoreType     string // ssl.truststore.type: PEM or PKCS12; "" with no location
	TruststoreLocation string // ssl.truststore.location: the CAs client certificates chain to
	TruststorePassword string // ssl.truststore.password (PKCS12; may be empty)
	ClientAuth         ClientAuth
	// MinVersion and MaxVersion come from ssl.enabled.protocols (TLSv1.2, TLSv1.3).
	MinVersion, MaxVersion uint16
	// CipherSuites is ssl.cipher.suites' TLS 1.2 suites (nil: Go's defaults). Go does not
	// let TLS 1.3's suites be chosen; the list may name all three of them or none.
	CipherSuites []uint16
	// PrincipalMappingRules is ssl.principal.mapping.rules ("" for DEFAULT).
	PrincipalMappingRules string
}

// ParseConfig reads the ssl.* keys from a listener's properties (its listener.name.*
// prefix already removed), with Kafka's defaults: ssl.client.auth none, TLSv1.2 and
// TLSv1.3 enabled. Keys exactq cannot honour are refused rather than ignored.
func ParseConfig(props map[string]string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(props[k]) }
	cfg := Config{
		KeystoreType:          strings.ToUpper(get("ssl.keystore.type")),
		KeystoreLocation:      get("ssl.keystore.location"),
		KeystorePassword:      props["ssl.keystore.password"],
		KeyPassword:           props["ssl.key.password"],
		TruststoreType:        strings.ToUpper(get("ssl.truststore.type")),
		TruststoreLocation:    get("ssl.truststore.location"),
		TruststorePassword:    props["ssl.truststore.password"],
		ClientAuth:            ClientAuth(strings.ToLower(get("ssl.client.auth"))),
		PrincipalMappingRules: props["ssl.principal.mapping.rules"],
	}
	for _, k := range []string{"ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates"} {
		if get(k) != "" {
			return cfg, fmt.Errorf("%s: inline PEM is not supported; put it in a file named by ssl.keystore.location / ssl.truststore.location", k)
		}
	}
	if cfg.ClientAuth == "" {
		cfg.ClientAuth = ClientAuthNone
	}
	protocols := get("ssl.enabled.protocols")
	if protocols == "" {
		protocols = "TLSv1.2,TLSv1.3"
	}
	for _, p := range strings.Split(protocols, ",") {
		var v uint16
		switch strings.TrimSpace(p) {
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		case "":
			continue
		default:
			return cfg, fmt.Errorf("ssl.enabled.protocols: %q is not supported (TLSv1.2 and TLSv1.3 are)", p)
		}
		if cfg.MinVersion == 0 || v < cfg.MinVersion {
			cfg.MinVersion = v
		}
		cfg.MaxVersion = max(cfg.MaxVersion, v)
	}
	if suites := get("ssl.cipher.suites"); suites != "" {
		var err error
		if cfg.CipherSuites, err = parseCipherSuites(suites); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.check()
}

func (cfg Config) check() error {
	switch cfg.ClientAuth {
	case ClientAuthNone, ClientAuthRequested, ClientAuthRequired:
	default:
		return fmt.Errorf("ssl.client.auth: %q is not none, requested or required", cfg.ClientAuth)
	}
	if cfg.KeystoreLocation == "" {
		return fmt.Errorf("ssl.keystore.location is required for a TLS listener")
	}
	if err := checkStoreType("ssl.keystore.type", cfg.KeystoreType); err != nil {
		return err
	}
	if cfg.KeystoreType == StoreTypePEM && cfg.KeyPassword != "" {
		return fmt.Errorf("ssl.key.password: encrypted PEM keys are not supported (Go's standard library cannot decrypt PKCS#8); use an unencrypted key file with tight permissions, or PKCS12")
	}
	if cfg.KeystoreType == StoreTypePKCS12 && cfg.KeyPassword != "" && cfg.KeyPassword != cfg.KeystorePassword {
		return fmt.Errorf("ssl.key.password: a PKCS12 key with a password other than ssl.keystore.password is not supported")
	}
	if cfg.TruststoreLocation != "" {
		if err := checkStoreType("ssl.truststore.type", cfg.TruststoreType); err != nil {
			return err
		}
	} else if cfg.ClientAuth != ClientAuthNone {
		return fmt.Errorf("ssl.client.auth=%s needs ssl.truststore.location (the CAs client certificates are checked against)", cfg.ClientAuth)
	}
	if cfg.MinVersion == 0 {
		return fmt.Errorf("ssl.enabled.protocols names no protocol")
	}
	_, err := ParsePrincipalMappingRules(cfg.PrincipalMappingRules)
	return err
}

func checkStoreType(key, t string) error {
	switch t {
	case StoreTypePEM, StoreTypePKCS12:
		return nil
	case "", "JKS":
		return fmt.Errorf("%s: JKS (Kafka's default) is not supported; set PKCS12 or PEM (keytool -importkeystore -deststoretype PKCS12 converts)", key)
	}
	return fmt.Errorf("%s: %q is not PEM or PKCS12", key, t)
}

// parseCipherSuites maps IANA suite names (what Java and Kafka use) to Go's suites, the
// secure ones only.
func parseCipherSuites(list string) ([]uint16, error) {
	byName := map[string]*tls.CipherSuite{}
	for _, s := range tls.CipherSuites() {
		byName[s.Name] = s
	}
	var out []uint16
	tls13 := 0
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		s, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("ssl.cipher.suites: %q is not a cipher suite Go offers (insecure suites are not)", name)
		}
		if slices.Equal(s.SupportedVersions, []uint16{tls.VersionTLS13}) {
			tls13++
			continue
		}
		out = append(out, s.ID)
	}
	if tls13 != 0 && tls13 != 3 {
		return nil, fmt.Errorf("ssl.cipher.suites: TLS 1.3's suites cannot be chosen in Go; name all three or none")
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ssl.cipher.suites: no TLS 1.2 suite named")
	}
	return out, nil
}
