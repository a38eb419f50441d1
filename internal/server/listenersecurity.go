package server

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/internal/security/tlsconfig"
)

// Building a listener's security from Kafka's broker properties, with Kafka's override
// rules (ListenerName.configPrefix, saslMechanismConfigPrefix, ConfigurationUtils): a key
// under `listener.name.<listener, lower case>.` overrides the broker-wide key for that
// listener, and a SASL mechanism's keys under `<mechanism, lower case>.` within the
// listener's view override the listener's (`listener.name.sasl_ssl.oauthbearer.
// sasl.oauthbearer.expected.audience`, `listener.name.sasl_ssl.scram-sha-512.
// connections.max.reauth.ms`).

// SecurityInputs is what the broker hands ListenerSecurity besides the properties.
type SecurityInputs struct {
	// Credentials looks SCRAM credentials up (the metadata image's); PLAIN and SCRAM need it.
	Credentials sasl.CredentialLookup
	// Now is the clock OAUTHBEARER tokens are checked by (time.Now when nil).
	Now func() time.Time
	// OnReloadError hears keystores, truststores and JWKS files that changed but do not
	// load (the last good one stays in use).
	OnReloadError func(error)
}

// Kafka's OAUTHBEARER validator classes, the values of
// listener.name.<l>.oauthbearer.sasl.server.callback.handler.class exactq understands.
const (
	OAuthSecuredHandler   = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	OAuthUnsecuredHandler = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)

// ListenerProps is the listener's view of the broker properties: every key, with the
// listener's `listener.name.<name>.` keys overriding (prefix removed).
func ListenerProps(props map[string]string, listener string) map[string]string {
	return withPrefixOverride(props, "listener.name."+strings.ToLower(listener)+".")
}

func withPrefixOverride(props map[string]string, prefix string) map[string]string {
	out := make(map[string]string, len(props))
	for k, v := range props {
		if !strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	for k, v := range props {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

// ListenerSecurity builds the security parts of a listener's ListenerConfig (protocol,
// TLS, SASL, re-authentication) from the broker's properties. SSL and SASL_SSL read the
// ssl.* keys (tlsconfig.ParseConfig); SASL listeners read sasl.enabled.mechanisms (which
// must be set: Kafka's default, GSSAPI, is not supported), connections.max.reauth.ms (per
// mechanism too) and, for OAUTHBEARER, the sasl.oauthbearer.* keys (sasl.ParseOAuthConfig)
// or, when the mechanism's sasl.server.callback.handler.class names Kafka's unsecured
// validator, that validator's unsecuredValidator* options from its sasl.jaas.config.
// Unlike Kafka, whose default OAUTHBEARER validator is the unsecured one, exactq validates
// signed tokens unless the unsecured class is named.
func ListenerSecurity(listener string, protocol SecurityProtocol, props map[string]string, in SecurityInputs) (ListenerConfig, error) {
	lc := ListenerConfig{SecurityProtocol: protocol}
	view := ListenerProps(props, listener)
	fail := func(err error) (ListenerConfig, error) {
		return ListenerConfig{}, fmt.Errorf("listener %s: %w", listener, err)
	}
	if protocol.usesTLS() {
		cfg, err := tlsconfig.ParseConfig(view)
		if err != nil {
			return fail(err)
		}
		if lc.TLS, err = tlsconfig.NewServer(cfg, tlsconfig.Options{OnReloadError: in.OnReloadError}); err != nil {
			return fail(err)
		}
	}
	if !protocol.usesSASL() {
		return lc, lc.check(listener)
	}
	var mechs []string
	for _, m := range strings.Split(view["sasl.enabled.mechanisms"], ",") {
		if m = strings.TrimSpace(m); m != "" {
			mechs = append(mechs, m)
		}
	}
	if len(mechs) == 0 {
		return fail(errors.New("sasl.enabled.mechanisms is empty (Kafka's default, GSSAPI, is not supported): name PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"))
	}
	saslCfg := sasl.Config{Mechanisms: mechs, Credentials: in.Credentials, Now: in.Now}
	maxReauth, err := reauthMillis(view, "connections.max.reauth.ms")
	if err != nil {
		return fail(err)
	}
	lc.MaxReauth = maxReauth
	for _, m := range mechs {
		mview := withPrefixOverride(view, strings.ToLower(m)+".")
		d, err := reauthMillis(mview, "connections.max.reauth.ms")
		if err != nil {
			return fail(err)
		}
		if d != maxReauth {
			if lc.MaxReauthByMechanism == nil {
				lc.MaxReauthByMechanism = map[string]time.Duration{}
			}
			lc.MaxReauthByMechanism[m] = d
		}
		if m != sasl.OAuthBearer {
			continue
		}
		oauthCfg, err := oauthConfig(mview)
		if err != nil {
			return fail(err)
		}
		oauthCfg.OnKeySetError = in.OnReloadError
		if saslCfg.OAuth, err = sasl.NewOAuthValidator(oauthCfg); err != nil {
			return fail(err)
		}
	}
	if lc.SASL, err = sasl.New(saslCfg); err != nil {
		return fail(err)
	}
	return lc, lc.check(listener)
}

func reauthMillis(view map[string]string, key string) (time.Duration, error) {
	v := strings.TrimSpace(view[key])
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative number of milliseconds", key, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// oauthConfig reads one listener's OAUTHBEARER validation (the mechanism's view).
func oauthConfig(view map[string]string) (sasl.OAuthConfig, error) {
	switch class := strings.TrimSpace(view["sasl.server.callback.handler.class"]); class {
	case "", OAuthSecuredHandler:
		return sasl.ParseOAuthConfig(view)
	case OAuthUnsecuredHandler:
		opts, err := jaasOptions(view["sasl.jaas.config"])
		if err != nil {
			return sasl.OAuthConfig{}, err
		}
		cfg := sasl.OAuthConfig{Unsecured: true, SubClaim: opts["unsecuredValidatorPrincipalClaimName"],
			ScopeClaim: opts["unsecuredValidatorScopeClaimName"], RequiredScope: strings.Fields(opts["unsecuredValidatorRequiredScope"])}
		if v, ok := opts["unsecuredValidatorAllowableClockSkewMs"]; ok {
			ms, err := strconv.Atoi(v)
			if err != nil || ms < 0 {
				return cfg, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs: %q is not a non-negative integer", v)
			}
			cfg.ClockSkew = time.Duration(ms) * time.Millisecond
		}
		for k := range opts {
			if strings.HasPrefix(k, "unsecuredValidator") && !slices.Contains([]string{"unsecuredValidatorPrincipalClaimName",
				"unsecuredValidatorScopeClaimName", "unsecuredValidatorRequiredScope", "unsecuredValidatorAllowableClockSkewMs"}, k) {
				return cfg, fmt.Errorf("sasl.jaas.config: unknown option %s", k)
			}
		}
		return cfg, nil
	default:
		return sasl.OAuthConfig{}, fmt.Errorf("sasl.server.callback.handler.class: %q is not a validator exactq has (%s or %s)",
			class, OAuthSecuredHandler, OAuthUnsecuredHandler)
	}
}

// jaasOptions reads the options of a one-entry sasl.jaas.config, `LoginModule flag
// key=value ...;`, as Kafka's JaasConfig tokenizes it: values are words or quoted
// strings; a bare number is refused, as Java's StreamTokenizer makes it no value.
func jaasOptions(s string) (map[string]string, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return nil, err
	}
	if len(toks) < 3 || toks[len(toks)-1] != ";" {
		return nil, errors.New("sasl.jaas.config: expected `LoginModule flag key=value ...;`")
	}
	switch toks[1] {
	case "required", "requisite", "sufficient", "optional":
	default:
		return nil, fmt.Errorf("sasl.jaas.config: invalid control flag %q", toks[1])
	}
	opts := map[string]string{}
	body := toks[2 : len(toks)-1]
	for i := 0; i < len(body); i += 3 {
		if k := body[i]; k == "=" || k == ";" || strings.HasPrefix(k, "\x00") {
			return nil, fmt.Errorf("sasl.jaas.config: expected an option name, not %q", strings.TrimPrefix(k, "\x00"))
		}
		if i+2 >= len(body) || body[i+1] != "=" || body[i+2] == "=" || body[i+2] == ";" {
			return nil, fmt.Errorf("sasl.jaas.config: value not specified for key %q", body[i])
		}
		opts[body[i]] = strings.TrimPrefix(body[i+2], "\x00") // quoted values are marked
	}
	return opts, nil
}

// jaasTokens splits a JAAS entry into words, '=', ';' and quoted strings (marked with a
// leading NUL so a quoted "=" is not the operator).
func jaasTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=' || c == ';':
			toks = append(toks, string(c))
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, errors.New("sasl.jaas.config: unterminated quoted value")
			}
			toks = append(toks, "\x00"+b.String())
			i = j + 1
		case c >= '0' && c <= '9':
			return nil, errors.New("sasl.jaas.config: quote numeric values (\"300\")")
		default:
			j := i
			for j < len(s) && strings.IndexByte(" \t\n\r=;\"'", s[j]) < 0 {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}
