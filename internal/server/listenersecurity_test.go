package server

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/internal/security/tlsconfig/tlstest"
)

// serveListener serves env's handler on a listener built elsewhere.
func serveListener(t *testing.T, env *secureEnv, name string, lc ListenerConfig) *Server {
	t.Helper()
	env.tls, env.auth = lc.TLS, lc.SASL
	return serveSecure(t, env, lc.SecurityProtocol, func(_ *Config, l *ListenerConfig) { *l = lc })
}

// TestListenerSecurityFromProperties: a server.properties with broker-wide ssl.* keys and
// listener- and mechanism-prefixed SASL keys gives a listener kgo authenticates to.
func TestListenerSecurityFromProperties(t *testing.T) {
	env := newSecureEnv(t)
	dir := t.TempDir()
	ks, jwksPath := filepath.Join(dir, "broker.p12"), filepath.Join(dir, "jwks.json")
	tlstest.WriteFile(t, ks, env.ca.Server(t, "broker").PKCS12(t, "changeit"))
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: env.signer.Public(), KeyID: "k1", Algorithm: "RS256"}}})
	tlstest.WriteFile(t, jwksPath, jwks)
	props := map[string]string{
		"ssl.keystore.type":                              "PKCS12",
		"ssl.keystore.location":                          ks,
		"ssl.keystore.password":                          "changeit",
		"connections.max.reauth.ms":                      "600000",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file://" + jwksPath,
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.audience": "exactq",
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.issuer":   "https://idp.test",
		"listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms":          "30000",
		"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": OAuthSecuredHandler,
		"listener.name.plaintext.sasl.enabled.mechanisms":                       "PLAIN", // not a SASL listener: unused
	}
	creds := func(user, mech string) (sasl.ScramCredential, bool) {
		if user != "svc" || mech != sasl.ScramSHA512 {
			return sasl.ScramCredential{}, false
		}
		c, _ := sasl.NewCredential(mech, "svc-secret", []byte("0123456789abcdef"), 4096)
		return c, true
	}
	lc, err := ListenerSecurity("SASL_SSL", SASLSSL, props, SecurityInputs{Credentials: creds, Now: env.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if lc.MaxReauth != 10*time.Minute || lc.maxReauth(sasl.OAuthBearer) != 30*time.Second || lc.maxReauth(sasl.ScramSHA512) != 10*time.Minute {
		t.Fatalf("re-authentication caps %v %v", lc.MaxReauth, lc.MaxReauthByMechanism)
	}
	if got := strings.Join(lc.SASL.Mechanisms(), ","); got != "SCRAM-SHA-512,OAUTHBEARER" {
		t.Fatalf("mechanisms %s", got)
	}
	s := serveListener(t, env, "SASL_SSL", lc)
	if err := metadata(env.kgoClient(t, s, scram.Auth{User: "svc", Pass: "svc-secret"}.AsSha512Mechanism(), true)); err != nil {
		t.Fatalf("SCRAM: %v", err)
	}
	if err := metadata(env.kgoClient(t, s, oauth.Auth{Token: env.token(t, "svc", time.Hour)}.AsMechanism(), true)); err != nil {
		t.Fatalf("OAUTHBEARER: %v", err)
	}
	// A plaintext listener needs none of it.
	if lc, err := ListenerSecurity("PLAINTEXT", Plaintext, props, SecurityInputs{}); err != nil || lc.SASL != nil || lc.TLS != nil {
		t.Fatalf("plaintext: %+v %v", lc, err)
	}
	// An SSL listener's own keystore overrides the broker-wide one.
	props["listener.name.ssl.ssl.keystore.location"] = filepath.Join(dir, "missing.p12")
	if _, err := ListenerSecurity("SSL", SSL, props, SecurityInputs{}); err == nil || !strings.Contains(err.Error(), "missing.p12") {
		t.Fatalf("listener keystore override: %v", err)
	}
}

func TestListenerSecurityUnsecuredOAuth(t *testing.T) {
	env := newSecureEnv(t)
	props := map[string]string{
		"sasl.enabled.mechanisms": "OAUTHBEARER",
		"listener.name.dev.oauthbearer.sasl.server.callback.handler.class": OAuthUnsecuredHandler,
		"listener.name.dev.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
			unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="1000";`,
	}
	lc, err := ListenerSecurity("DEV", SASLPlaintext, props, SecurityInputs{Now: env.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	s := serveListener(t, env, "DEV", lc)
	unsecured := func(scope string) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`))
		c, _ := json.Marshal(map[string]any{"sub": "dev", "scope": scope, "exp": env.clock.Now().Add(time.Hour).Unix()})
		return h + "." + base64.RawURLEncoding.EncodeToString(c) + "."
	}
	if err := metadata(env.kgoClient(t, s, oauth.Auth{Token: unsecured("kafka")}.AsMechanism(), false)); err != nil {
		t.Fatalf("unsecured token with the scope: %v", err)
	}
	if err := metadata(env.kgoClient(t, s, oauth.Auth{Token: unsecured("other")}.AsMechanism(), false)); err == nil || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Fatalf("unsecured token without the scope: %v", err)
	}
}

func TestListenerSecurityRefusals(t *testing.T) {
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, props := range map[string]map[string]string{
		"no mechanisms":     {},
		"GSSAPI":            {"sasl.enabled.mechanisms": "GSSAPI"},
		"negative reauth":   {"sasl.enabled.mechanisms": "PLAIN", "connections.max.reauth.ms": "-1"},
		"unknown validator": {"sasl.enabled.mechanisms": "OAUTHBEARER", "oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"},
		"empty key set":     {"sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": "file://" + jwks, "sasl.oauthbearer.expected.audience": "a", "sasl.oauthbearer.expected.issuer": "i"},
		"JAAS bare number": {"sasl.enabled.mechanisms": "OAUTHBEARER", "oauthbearer.sasl.server.callback.handler.class": OAuthUnsecuredHandler,
			"oauthbearer.sasl.jaas.config": "M required unsecuredValidatorAllowableClockSkewMs=1000;"},
		"JAAS unknown option": {"sasl.enabled.mechanisms": "OAUTHBEARER", "oauthbearer.sasl.server.callback.handler.class": OAuthUnsecuredHandler,
			"oauthbearer.sasl.jaas.config": `M required unsecuredValidatorPrincipal="x";`},
	} {
		if _, err := ListenerSecurity("L", SASLPlaintext, props, SecurityInputs{Credentials: func(string, string) (sasl.ScramCredential, bool) { return sasl.ScramCredential{}, false }}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestJAASOptions(t *testing.T) {
	opts, err := jaasOptions(`org.example.Login required a="x y" b='q\'s' c=word d="=";`)
	if err != nil {
		t.Fatal(err)
	}
	if opts["a"] != "x y" || opts["b"] != "q's" || opts["c"] != "word" || opts["d"] != "=" || len(opts) != 4 {
		t.Fatalf("%q", opts)
	}
	for _, bad := range []string{
		`M required a="x"`,  // no ;
		`M always a="x";`,   // bad flag
		`M required a=;`,    // no value
		`M required a "x";`, // no =
		`M required a="x;`,  // unterminated
		`M required ="x";`,  // no name
	} {
		if _, err := jaasOptions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
