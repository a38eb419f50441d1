package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

type issuer struct {
	rsaKey *rsa.PrivateKey
	ecKey  *ecdsa.PrivateKey
	jwks   []byte
}

func newIssuer(t testing.TB) *issuer {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: rk.Public(), KeyID: "rsa-1", Algorithm: "RS256", Use: "sig"},
		{Key: ek.Public(), KeyID: "ec-1", Algorithm: "ES256", Use: "sig"},
	}}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{rsaKey: rk, ecKey: ek, jwks: b}
}

// sign makes a JWT with claims; kid "" leaves the header without one.
func (is *issuer) sign(t testing.TB, alg jose.SignatureAlgorithm, kid string, claims map[string]any) string {
	var key crypto.Signer = is.rsaKey
	if alg == jose.ES256 {
		key = is.ecKey
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claims(over map[string]any) map[string]any {
	c := map[string]any{"iss": "https://idp.example", "aud": []string{"kafka"}, "sub": "svc-orders",
		"iat": t0.Add(-time.Minute).Unix(), "exp": t0.Add(time.Hour).Unix(), "scope": "produce"}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func oauthAuth(t testing.TB, cfg OAuthConfig, now time.Time) *Authenticator {
	v, err := NewOAuthValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Mechanisms: []string{OAuthBearer}, OAuth: v, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func secureConfig(is *issuer) OAuthConfig {
	return OAuthConfig{JWKS: is.jwks, ExpectedAudience: []string{"kafka"}, ExpectedIssuer: "https://idp.example",
		ClockSkew: DefaultOAuthClockSkew}
}

// stepOAuth sends a token as franz-go's client does and, on an error reply, the client's
// %x01; it returns the final outcome or failure.
func stepOAuth(t *testing.T, a *Authenticator, token, zid string) (Outcome, error) {
	t.Helper()
	return drive(t, a, oauth.Auth{Token: token, Zid: zid, Extensions: map[string]string{"traceId": "abc"}}.AsMechanism())
}

func TestOAuthBearerJWKS(t *testing.T) {
	is := newIssuer(t)
	a := oauthAuth(t, secureConfig(is), t0)
	for _, tc := range []struct {
		alg jose.SignatureAlgorithm
		kid string
	}{{jose.RS256, "rsa-1"}, {jose.ES256, "ec-1"}, {jose.RS256, ""}, {jose.ES256, ""}} {
		out, err := stepOAuth(t, a, is.sign(t, tc.alg, tc.kid, claims(nil)), "")
		if err != nil || !out.Done || out.Principal.String() != "User:svc-orders" {
			t.Fatalf("%s kid %q: %+v %v", tc.alg, tc.kid, out, err)
		}
		if !out.Expiry.Equal(t0.Add(time.Hour)) {
			t.Fatalf("expiry %v", out.Expiry)
		}
	}
	invalidToken := `{"status":"invalid_token"}`
	for name, tok := range map[string]string{
		"expired beyond the skew":   is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"exp": t0.Add(-31 * time.Second).Unix()})),
		"expired at now minus skew": is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"exp": t0.Add(-30 * time.Second).Unix()})),
		"not yet valid":             is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"nbf": t0.Add(time.Minute).Unix()})),
		"issued in the future":      is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"iat": t0.Add(time.Minute).Unix()})),
		"no exp":                    is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"exp": nil})),
		"no iat":                    is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"iat": nil})),
		"other audience":            is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"aud": "billing"})),
		"other issuer":              is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"iss": "https://evil.example"})),
		"no subject":                is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"sub": nil})),
		"blank subject":             is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"sub": "  "})),
		"unknown kid":               is.sign(t, jose.RS256, "rsa-9", claims(nil)),
		"kid of another key":        is.sign(t, jose.RS256, "ec-1", claims(nil)),
		"alg none":                  unsecuredToken(claims(nil)),
		"not a JWT":                 "abc.def.ghi",
		"signed by someone else":    newIssuer(t).sign(t, jose.RS256, "rsa-1", claims(nil)),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := stepOAuth(t, a, tok, "")
			wantFailure(t, err, OAuthBearer, invalidToken)
		})
	}
	// Within the skew, an expired token and a not-yet-valid one still pass.
	for _, over := range []map[string]any{{"exp": t0.Add(-29 * time.Second).Unix()}, {"nbf": t0.Add(29 * time.Second).Unix()}} {
		if _, err := stepOAuth(t, a, is.sign(t, jose.RS256, "rsa-1", claims(over)), ""); err != nil {
			t.Fatalf("%v within the skew: %v", over, err)
		}
	}
	_, err := stepOAuth(t, a, is.sign(t, jose.RS256, "rsa-1", claims(nil)), "someone-else")
	wantFailure(t, err, OAuthBearer, "Authentication failed: Client requested an authorization id (someone-else) that is different from the token's principal name (svc-orders)")
}

func TestOAuthBearerHMACRefused(t *testing.T) {
	is := newIssuer(t)
	// An HS256 token whose secret is the RSA public key's bytes: the classic confusion.
	secret := is.rsaKey.N.Bytes()
	sig, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, (&jose.SignerOptions{}).WithHeader("kid", "rsa-1"))
	tok, _ := jwt.Signed(sig).Claims(claims(nil)).Serialize()
	_, err := stepOAuth(t, oauthAuth(t, secureConfig(is), t0), tok, "")
	wantFailure(t, err, OAuthBearer, `{"status":"invalid_token"}`)
}

func TestOAuthBearerClaimNames(t *testing.T) {
	is := newIssuer(t)
	cfg := secureConfig(is)
	cfg.SubClaim = "client_id"
	a := oauthAuth(t, cfg, t0)
	out, err := stepOAuth(t, a, is.sign(t, jose.ES256, "ec-1", claims(map[string]any{"client_id": "app-7"})), "")
	if err != nil || out.Principal.Name != "app-7" {
		t.Fatalf("%+v %v", out, err)
	}
	tok, terr := a.oauth.Validate(is.sign(t, jose.ES256, "ec-1", claims(map[string]any{"client_id": "x", "scope": []string{"a", "b"}})), t0)
	if terr != nil || strings.Join(tok.Scopes, ",") != "a,b" {
		t.Fatalf("scopes %v %v", tok.Scopes, terr)
	}
}

func TestOAuthConfigRequiresAudienceAndIssuer(t *testing.T) {
	is := newIssuer(t)
	cfg := secureConfig(is)
	cfg.ExpectedAudience = nil
	if _, err := NewOAuthValidator(cfg); err == nil {
		t.Error("no audience accepted")
	}
	cfg.AllowUnverifiedAudience = true
	cfg.ExpectedIssuer = ""
	if _, err := NewOAuthValidator(cfg); err == nil {
		t.Error("no issuer accepted")
	}
	cfg.AllowUnverifiedIssuer = true
	a := oauthAuth(t, cfg, t0)
	if _, err := stepOAuth(t, a, is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"aud": "x", "iss": "y"})), ""); err != nil {
		t.Fatalf("both opted out: %v", err)
	}
	priv := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: is.rsaKey, KeyID: "p"}}}
	cfg.JWKS, _ = json.Marshal(priv)
	if _, err := NewOAuthValidator(cfg); err == nil {
		t.Error("a private key in the key set accepted")
	}
}

func TestParseOAuthConfig(t *testing.T) {
	is := newIssuer(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, is.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseOAuthConfig(map[string]string{
		"sasl.oauthbearer.jwks.endpoint.url":  "file://" + path,
		"sasl.oauthbearer.expected.audience":  "kafka, other",
		"sasl.oauthbearer.expected.issuer":    "https://idp.example",
		"sasl.oauthbearer.clock.skew.seconds": "5",
		"sasl.oauthbearer.sub.claim.name":     "azp",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClockSkew != 5*time.Second || strings.Join(cfg.ExpectedAudience, "|") != "kafka|other" || cfg.SubClaim != "azp" {
		t.Fatalf("%+v", cfg)
	}
	a := oauthAuth(t, cfg, t0)
	if _, err := stepOAuth(t, a, is.sign(t, jose.RS256, "rsa-1", claims(map[string]any{"azp": "x", "exp": t0.Add(-6 * time.Second).Unix()})), ""); err == nil {
		t.Error("5 s skew let a token 6 s past exp through")
	}
	if _, err := ParseOAuthConfig(map[string]string{"sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks"}); err == nil {
		t.Error("an https key set URL accepted")
	}
}

func unsecuredToken(c map[string]any) string {
	h, _ := json.Marshal(map[string]any{"alg": "none"})
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(b) + "."
}

func TestOAuthBearerUnsecured(t *testing.T) {
	a := oauthAuth(t, OAuthConfig{Unsecured: true, RequiredScope: []string{"kafka"}}, t0)
	ok := map[string]any{"sub": "dev", "exp": float64(t0.Add(time.Minute).Unix()), "iat": float64(t0.Unix()), "scope": "kafka other"}
	out, err := stepOAuth(t, a, unsecuredToken(ok), "")
	if err != nil || out.Principal.Name != "dev" || !out.Expiry.Equal(t0.Add(time.Minute)) {
		t.Fatalf("%+v %v", out, err)
	}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range ok {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for name, c := range map[string]map[string]any{
		"expired":       with("exp", float64(t0.Unix())),
		"no exp":        with("exp", nil),
		"no sub":        with("sub", nil),
		"iat after exp": with("iat", float64(t0.Add(2*time.Minute).Unix())),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := stepOAuth(t, a, unsecuredToken(c), "")
			wantFailure(t, err, OAuthBearer, `{"status":"invalid_token"}`)
		})
	}
	_, err = stepOAuth(t, a, unsecuredToken(with("scope", "other")), "")
	wantFailure(t, err, OAuthBearer, `{"status":"insufficient_scope", "scope":"kafka"}`)
	// A signed token is not an unsecured one.
	is := newIssuer(t)
	_, err = stepOAuth(t, a, is.sign(t, jose.RS256, "rsa-1", claims(nil)), "")
	wantFailure(t, err, OAuthBearer, `{"status":"invalid_token"}`)
}

func TestOAuthInitialResponseGrammar(t *testing.T) {
	a := oauthAuth(t, OAuthConfig{Unsecured: true}, t0)
	tok := unsecuredToken(map[string]any{"sub": "dev", "exp": float64(t0.Add(time.Minute).Unix())})
	for msg, ok := range map[string]bool{
		"n,,\x01auth=Bearer " + tok + "\x01\x01":           true,
		"n,,\x01auth=bearer  " + tok + "\x01k=v w\x01\x01": true,
		"n,a=dev,\x01auth=Bearer " + tok + "\x01\x01":      true,
		"y,,\x01auth=Bearer " + tok + "\x01\x01":           false,
		"n,,\x01auth=Basic " + tok + "\x01\x01":            false,
		"n,,\x01auth=Bearer " + tok + "\x01":               false,
		"n,,\x01k=v\x01\x01":                               false,
		"n,,\x01auth=Bearer " + tok + "\x01k1=v\x01\x01":   false,
		"n,,\x01auth=Bearer a b\x01\x01":                   false,
		"n,,\x01auth=Bearer " + tok + "\x01=v\x01\x01":     false,
	} {
		x, _ := a.Start(OAuthBearer)
		out, err := x.Step([]byte(msg))
		if got := err == nil && out.Done; got != ok {
			t.Errorf("%q: done %v err %v, want ok=%v", msg, out.Done, err, ok)
		}
	}
	// After an error reply only %x01 is accepted.
	x, _ := a.Start(OAuthBearer)
	out, err := x.Step([]byte("n,,\x01auth=Bearer " + unsecuredToken(map[string]any{"sub": "dev"}) + "\x01\x01"))
	if err != nil || out.Done || len(out.Reply) == 0 {
		t.Fatalf("%+v %v", out, err)
	}
	if _, err := x.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); err == nil {
		t.Fatal("a second token after the error reply was accepted")
	}
}

// TestOAuthKeySetFileReloaded: a key set file rewritten with a new signing key is used
// once the validator looks again (at most a second later by its clock), as Kafka rereads
// its JWKS file; a rewrite that does not parse leaves the last good set.
func TestOAuthKeySetFileReloaded(t *testing.T) {
	old, rotated := newIssuer(t), newIssuer(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, old.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := secureConfig(old)
	cfg.JWKS, cfg.JWKSFile = nil, path
	var keySetErrors int
	cfg.OnKeySetError = func(error) { keySetErrors++ }
	now := t0
	v, err := NewOAuthValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := New(Config{Mechanisms: []string{OAuthBearer}, OAuth: v, Now: func() time.Time { return now }})
	tokRotated := rotated.sign(t, jose.RS256, "rsa-1", claims(nil))
	if _, err := stepOAuth(t, a, tokRotated, ""); err == nil {
		t.Fatal("a token of a key not yet in the file was accepted")
	}
	if err := os.WriteFile(path, rotated.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if _, err := stepOAuth(t, a, tokRotated, ""); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"keys": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if _, err := stepOAuth(t, a, tokRotated, ""); err != nil || keySetErrors != 1 {
		t.Fatalf("after a broken rewrite: %v, %d errors reported", err, keySetErrors)
	}
	cfg.JWKS = old.jwks
	if _, err := NewOAuthValidator(cfg); err == nil {
		t.Error("both a key set file and bytes accepted")
	}
}
