package sasl

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/exactq/exactq/internal/security/reload"
)

// OAuthConfig is the broker's OAUTHBEARER validation, Kafka's keys in brackets.
type OAuthConfig struct {
	// JWKSFile is the JSON Web Key Set file the tokens are signed with (the file: URL of
	// sasl.oauthbearer.jwks.endpoint.url; exactq fetches no keys over the network). It is
	// read again when it changes, looked at at most once a second on the validation path,
	// as Kafka's JwksFileVerificationKeyResolver rereads it; a new file that does not
	// parse leaves the last good key set. JWKS, the set's bytes, may be given instead.
	// Keys are matched by the token's kid; a token without kid is tried against every key.
	JWKSFile string
	JWKS     []byte
	// OnKeySetError, if set, hears each rewrite of JWKSFile that does not load (for the
	// broker's log; the last good key set stays in use).
	OnKeySetError func(error)
	// ExpectedAudience (sasl.oauthbearer.expected.audience): the token's aud must contain
	// one of them. Required unless AllowUnverifiedAudience
	// (sasl.oauthbearer.allow.unverified.audience), as Kafka 4.4 requires.
	ExpectedAudience        []string
	AllowUnverifiedAudience bool
	// ExpectedIssuer (sasl.oauthbearer.expected.issuer): iss must equal it. Required unless
	// AllowUnverifiedIssuer (sasl.oauthbearer.allow.unverified.issuer).
	ExpectedIssuer        string
	AllowUnverifiedIssuer bool
	// ClockSkew (sasl.oauthbearer.clock.skew.seconds, default 30 s) is allowed on exp, nbf
	// and iat.
	ClockSkew time.Duration
	// SubClaim (sasl.oauthbearer.sub.claim.name, default "sub") names the principal's claim;
	// ScopeClaim (sasl.oauthbearer.scope.claim.name, default "scope") the scope's.
	SubClaim, ScopeClaim string

	// Unsecured selects Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: tokens with
	// alg "none" and no signature, for development only. Set only when the operator names
	// that handler (listener.name.*.oauthbearer.sasl.server.callback.handler.class); its
	// JAAS options map to RequiredScope (unsecuredValidatorRequiredScope), SubClaim
	// (unsecuredValidatorPrincipalClaimName), ScopeClaim (unsecuredValidatorScopeClaimName)
	// and ClockSkew (unsecuredValidatorAllowableClockSkewMs, default 0). JWKS, audience and
	// issuer are not used then.
	Unsecured     bool
	RequiredScope []string
}

// DefaultOAuthClockSkew is sasl.oauthbearer.clock.skew.seconds' default.
const DefaultOAuthClockSkew = 30 * time.Second

// secureAlgorithms are the signature algorithms accepted: every asymmetric JWS algorithm.
// Kafka (jose4j) refuses only "none"; HMAC algorithms are left out here because a JWKS of
// public keys must never verify a token signed with a shared secret.
var secureAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// OAuthValidator checks bearer tokens. It is immutable and safe for concurrent use.
type OAuthValidator struct {
	cfg  OAuthConfig
	keys func(now time.Time) jose.JSONWebKeySet
}

// Token is a validated token: who it names, its scopes, and its lifetime.
type Token struct {
	Principal        string
	Scopes           []string
	Expiry, IssuedAt time.Time
}

// NewOAuthValidator checks cfg (defaults filled in) and parses its key set.
func NewOAuthValidator(cfg OAuthConfig) (*OAuthValidator, error) {
	if cfg.SubClaim == "" {
		cfg.SubClaim = "sub"
	}
	if cfg.ScopeClaim == "" {
		cfg.ScopeClaim = "scope"
	}
	if cfg.ClockSkew < 0 {
		return nil, errors.New("sasl: OAUTHBEARER clock skew must not be negative")
	}
	v := &OAuthValidator{cfg: cfg}
	if cfg.Unsecured {
		return v, nil
	}
	if len(cfg.ExpectedAudience) == 0 && !cfg.AllowUnverifiedAudience {
		return nil, errors.New(`sasl: OAUTHBEARER needs sasl.oauthbearer.expected.audience (or sasl.oauthbearer.allow.unverified.audience=true)`)
	}
	if cfg.ExpectedIssuer == "" && !cfg.AllowUnverifiedIssuer {
		return nil, errors.New(`sasl: OAUTHBEARER needs sasl.oauthbearer.expected.issuer (or sasl.oauthbearer.allow.unverified.issuer=true)`)
	}
	switch {
	case (cfg.JWKSFile == "") == (cfg.JWKS == nil):
		return nil, errors.New("sasl: OAUTHBEARER needs a key set: a file or its bytes, not both")
	case cfg.JWKSFile != "":
		files, err := reload.New([]string{cfg.JWKSFile}, func(b [][]byte) (jose.JSONWebKeySet, error) {
			return parseKeySet(b[0])
		}, time.Now(), reload.Options{OnError: cfg.OnKeySetError})
		if err != nil {
			return nil, fmt.Errorf("sasl: sasl.oauthbearer.jwks.endpoint.url: %w", err)
		}
		v.keys = files.Get
	default:
		set, err := parseKeySet(cfg.JWKS)
		if err != nil {
			return nil, err
		}
		v.keys = func(time.Time) jose.JSONWebKeySet { return set }
	}
	return v, nil
}

// parseKeySet reads a JWKS: at least one key, public keys only.
func parseKeySet(b []byte) (jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return set, fmt.Errorf("sasl: OAUTHBEARER key set: %w", err)
	}
	if len(set.Keys) == 0 {
		return set, errors.New("sasl: OAUTHBEARER key set has no keys")
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return set, fmt.Errorf("sasl: OAUTHBEARER key %q is not a public key", k.KeyID)
		}
	}
	return set, nil
}

// ParseOAuthConfig reads Kafka's broker properties for OAUTHBEARER (listener prefixes
// already removed): the sasl.oauthbearer.* keys above. The key set comes from a file: URL
// in sasl.oauthbearer.jwks.endpoint.url.
func ParseOAuthConfig(props map[string]string) (OAuthConfig, error) {
	cfg := OAuthConfig{ClockSkew: DefaultOAuthClockSkew, SubClaim: props["sasl.oauthbearer.sub.claim.name"],
		ScopeClaim: props["sasl.oauthbearer.scope.claim.name"], ExpectedIssuer: props["sasl.oauthbearer.expected.issuer"]}
	if v := props["sasl.oauthbearer.expected.audience"]; v != "" {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				cfg.ExpectedAudience = append(cfg.ExpectedAudience, a)
			}
		}
	}
	for key, dst := range map[string]*bool{
		"sasl.oauthbearer.allow.unverified.audience": &cfg.AllowUnverifiedAudience,
		"sasl.oauthbearer.allow.unverified.issuer":   &cfg.AllowUnverifiedIssuer,
	} {
		if v, ok := props[key]; ok {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return cfg, fmt.Errorf("%s: %q is not a boolean", key, v)
			}
			*dst = b
		}
	}
	if v, ok := props["sasl.oauthbearer.clock.skew.seconds"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return cfg, fmt.Errorf("sasl.oauthbearer.clock.skew.seconds: %q is not a non-negative integer", v)
		}
		cfg.ClockSkew = time.Duration(n) * time.Second
	}
	url := props["sasl.oauthbearer.jwks.endpoint.url"]
	path, ok := strings.CutPrefix(url, "file:")
	if !ok {
		return cfg, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %q is not a file: URL (exactq reads key sets from files only)", url)
	}
	cfg.JWKSFile = strings.TrimPrefix(path, "//")
	return cfg, nil
}

// tokenError is a validation failure: RFC 7628's JSON status for the client and the
// reason for the log.
type tokenError struct {
	status, scope, reason string
}

func (e *tokenError) Error() string { return e.reason }

func (e *tokenError) json() string {
	s := `{"status":"` + e.status + `"`
	if e.scope != "" {
		s += `, "scope":"` + e.scope + `"`
	}
	return s + "}"
}

func invalid(format string, args ...any) *tokenError {
	return &tokenError{status: "invalid_token", reason: fmt.Sprintf(format, args...)}
}

// Validate checks a token at time now as Kafka's BrokerJwtValidator does (or, when
// Unsecured, its unsecured validator).
func (v *OAuthValidator) Validate(token string, now time.Time) (Token, *tokenError) {
	if v.cfg.Unsecured {
		return v.validateUnsecured(token, now)
	}
	parsed, err := jwt.ParseSigned(token, secureAlgorithms)
	if err != nil {
		return Token{}, invalid("could not parse the token: %v", err)
	}
	if len(parsed.Headers) != 1 {
		return Token{}, invalid("the token has %d signatures", len(parsed.Headers))
	}
	set := v.keys(now)
	keys := set.Keys
	if kid := parsed.Headers[0].KeyID; kid != "" {
		keys = set.Key(kid)
	}
	var std jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range keys {
		if parsed.Claims(k.Key, &std, &all) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Token{}, invalid("the token's signature matches no key of the key set")
	}
	if std.Expiry == nil {
		return Token{}, invalid("the token has no exp claim")
	}
	if std.IssuedAt == nil {
		return Token{}, invalid("the token has no iat claim")
	}
	exp := jwt.Expected{Issuer: v.cfg.ExpectedIssuer, AnyAudience: v.cfg.ExpectedAudience, Time: now}
	if err := std.ValidateWithLeeway(exp, v.cfg.ClockSkew); err != nil {
		return Token{}, invalid("%v", err)
	}
	// go-jose lets a token expire at exp+leeway exactly; jose4j already refuses it then.
	if !now.Add(-v.cfg.ClockSkew).Before(std.Expiry.Time()) {
		return Token{}, invalid("the token expired at %s", std.Expiry.Time().UTC().Format(time.RFC3339))
	}
	sub, ok := all[v.cfg.SubClaim].(string)
	if sub = strings.TrimSpace(sub); !ok || sub == "" {
		return Token{}, invalid("the token's %s claim is not a non-empty string", v.cfg.SubClaim)
	}
	scopes, terr := scopeClaim(all[v.cfg.ScopeClaim], v.cfg.ScopeClaim, false)
	if terr != nil {
		return Token{}, terr
	}
	return Token{Principal: sub, Scopes: scopes, Expiry: std.Expiry.Time(), IssuedAt: std.IssuedAt.Time()}, nil
}

// scopeClaim reads a scope claim: a list of strings, or one string, which Kafka's secure
// validator takes as one scope and its unsecured one splits at spaces (splitString).
func scopeClaim(raw any, name string, splitString bool) ([]string, *tokenError) {
	var scopes []string
	switch s := raw.(type) {
	case nil:
	case string:
		if splitString {
			scopes = strings.Fields(s)
		} else {
			scopes = []string{s}
		}
	case []any:
		for _, e := range s {
			str, ok := e.(string)
			if !ok {
				return nil, invalid("the token's %s claim holds a non-string", name)
			}
			scopes = append(scopes, str)
		}
	default:
		if !splitString {
			return nil, nil // Kafka treats any other type as no scope
		}
		return nil, invalid("The %s claim had the incorrect type", name)
	}
	for i, s := range scopes {
		if scopes[i] = strings.TrimSpace(s); scopes[i] == "" {
			return nil, invalid("the token's %s claim holds an empty scope", name)
		}
	}
	return scopes, nil
}

// validateUnsecured is Kafka's OAuthBearerUnsecuredJws and the unsecured validator's checks:
// alg "none", no signature, exp required, iat optional but not in the future, exp after
// iat, the principal claim a non-blank string, every required scope present.
func (v *OAuthValidator) validateUnsecured(token string, now time.Time) (Token, *tokenError) {
	if strings.Contains(token, "..") {
		return Token{}, invalid("Malformed compact serialization contains '..'")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Token{}, invalid("the token has %d parts, not 3", len(parts))
	}
	var header, claims map[string]any
	if err := decodeSegment(parts[0], &header); err != nil {
		return Token{}, invalid("the token's header: %v", err)
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return Token{}, invalid("the token's claims: %v", err)
	}
	if alg, _ := header["alg"].(string); alg != "none" {
		return Token{}, invalid("Unsecured JWS must have 'none' for an algorithm")
	}
	if parts[2] != "" {
		return Token{}, invalid("Unsecured JWS must not contain a digital signature")
	}
	expS, ok := claims["exp"].(float64)
	if !ok {
		return Token{}, invalid("No expiration time in JWT")
	}
	sub, ok := claims[v.cfg.SubClaim].(string)
	if !ok || strings.TrimSpace(sub) == "" {
		return Token{}, invalid("No principal name in JWT claim: %s", v.cfg.SubClaim)
	}
	scopes, terr := scopeClaim(claims[v.cfg.ScopeClaim], v.cfg.ScopeClaim, true)
	if terr != nil {
		return Token{}, terr
	}
	nowMs := float64(now.UnixMilli())
	skewMs := float64(v.cfg.ClockSkew.Milliseconds())
	var issued time.Time
	if raw, present := claims["iat"]; present {
		iatS, ok := raw.(float64)
		if !ok {
			return Token{}, invalid("The iat claim had the incorrect type")
		}
		if 1000*iatS > nowMs+skewMs {
			return Token{}, invalid("The Issued At value (%f seconds) was after the indicated time plus allowable clock skew", iatS)
		}
		if expS <= iatS {
			return Token{}, invalid("The Expiration Time time (%f seconds) was not after the Issued At time (%f seconds)", expS, iatS)
		}
		issued = secondsTime(iatS)
	}
	if nowMs-skewMs >= 1000*expS {
		return Token{}, invalid("The indicated time minus allowable clock skew was on or after the Expiration Time value (%f seconds)", expS)
	}
	for _, want := range v.cfg.RequiredScope {
		if !slices.Contains(scopes, want) {
			return Token{}, &tokenError{status: "insufficient_scope", scope: strings.Join(v.cfg.RequiredScope, " "),
				reason: fmt.Sprintf("The provided scope (%v) was missing a required scope (%s)", scopes, want)}
		}
	}
	return Token{Principal: sub, Scopes: scopes, Expiry: secondsTime(expS), IssuedAt: issued}, nil
}

func decodeSegment(seg string, into *map[string]any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return err
	}
	if *into == nil {
		return errors.New("not a JSON object")
	}
	return nil
}

func secondsTime(s float64) time.Time {
	if s > math.MaxInt64/1e9 || s < math.MinInt64/1e9 {
		s = math.Copysign(math.MaxInt64/1e9, s)
	}
	return time.Unix(0, int64(s*1e9))
}
