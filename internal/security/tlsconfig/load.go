package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"software.sslmate.com/src/go-pkcs12"
)

// LoadKeystore reads a keystore's bytes: PEM (the private key and the certificate chain,
// leaf first, in one file) or PKCS12 (one key entry with its chain).
func LoadKeystore(storeType string, data []byte, password string) (tls.Certificate, error) {
	switch storeType {
	case StoreTypePEM:
		for _, b := range pemBlocks(data) {
			if b.Type == "ENCRYPTED PRIVATE KEY" {
				return tls.Certificate{}, errors.New("tlsconfig: the PEM keystore's key is encrypted, which is not supported")
			}
		}
		cert, err := tls.X509KeyPair(data, data)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tlsconfig: PEM keystore: %w", err)
		}
		return cert, nil
	case StoreTypePKCS12:
		key, leaf, chain, err := pkcs12.DecodeChain(data, password)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tlsconfig: PKCS12 keystore: %w", err)
		}
		cert := tls.Certificate{PrivateKey: key, Leaf: leaf, Certificate: [][]byte{leaf.Raw}}
		for _, c := range chain {
			cert.Certificate = append(cert.Certificate, c.Raw)
		}
		// The same check X509KeyPair makes: the key belongs to the leaf.
		if _, err := tls.X509KeyPair(pemCerts(leaf), pemKey(key)); err != nil {
			return tls.Certificate{}, fmt.Errorf("tlsconfig: PKCS12 keystore: %w", err)
		}
		return cert, nil
	}
	return tls.Certificate{}, fmt.Errorf("tlsconfig: keystore type %q", storeType)
}

// LoadTruststore reads a truststore's certificates: PEM (CERTIFICATE blocks) or PKCS12
// (Java's trusted-certificate entries, or a certificates-only file made by openssl).
func LoadTruststore(storeType string, data []byte, password string) (*x509.CertPool, error) {
	var certs []*x509.Certificate
	switch storeType {
	case StoreTypePEM:
		for _, b := range pemBlocks(data) {
			if b.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("tlsconfig: PEM truststore: %w", err)
			}
			certs = append(certs, c)
		}
	case StoreTypePKCS12:
		var err error
		if certs, err = pkcs12.DecodeTrustStore(data, password); err != nil {
			blocks, err2 := pkcs12.ToPEM(data, password)
			if err2 != nil {
				return nil, fmt.Errorf("tlsconfig: PKCS12 truststore: %w", err)
			}
			for _, b := range blocks {
				if b.Type == "CERTIFICATE" {
					c, err := x509.ParseCertificate(b.Bytes)
					if err != nil {
						return nil, fmt.Errorf("tlsconfig: PKCS12 truststore: %w", err)
					}
					certs = append(certs, c)
				}
			}
		}
	default:
		return nil, fmt.Errorf("tlsconfig: truststore type %q", storeType)
	}
	if len(certs) == 0 {
		return nil, errors.New("tlsconfig: the truststore holds no certificate")
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func pemBlocks(data []byte) []*pem.Block {
	var out []*pem.Block
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}
		out = append(out, b)
	}
}

func pemCerts(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func pemKey(key any) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
