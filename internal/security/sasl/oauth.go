package sasl

import (
	"strconv"
	"strings"
	"time"

	"github.com/exactq/exactq/internal/security/acl"
)

// oauthExchange is RFC 7628's exchange as Kafka's OAuthBearerSaslServer runs it: the client's
// initial response carries the token; a valid one completes with an empty reply. An invalid
// one is answered with the JSON error status (`{"status":"invalid_token"}`) and the exchange
// waits for the client's single %x01, after which it fails with that JSON as the message.
// Kafka also accepts a fresh initial response instead of the %x01 (one more try on the same
// connection); exactq does not, so a connection tries one token per handshake.
type oauthExchange struct {
	validator *OAuthValidator
	now       func() time.Time
	errorJSON string // set after an invalid token: the reply sent, awaiting %x01
	over      bool
}

// maxOAuthMessage bounds the initial response: JWTs from real providers are a few KiB.
const maxOAuthMessage = 64 << 10

func (x *oauthExchange) Mechanism() string { return OAuthBearer }

func (x *oauthExchange) Step(token []byte) (Outcome, error) {
	if x.over {
		return Outcome{}, ErrExchangeOver
	}
	if x.errorJSON != "" {
		x.over = true
		if len(token) == 1 && token[0] == 0x01 {
			return Outcome{}, public(OAuthBearer, x.errorJSON)
		}
		return Outcome{}, hidden(OAuthBearer, "client did not acknowledge the error with %%x01")
	}
	resp, perr := parseOAuthInitialResponse(token)
	if perr != nil {
		x.over = true
		return Outcome{}, perr.withMechanism(OAuthBearer)
	}
	tok, verr := x.validator.Validate(resp.token, x.now())
	if verr != nil {
		x.errorJSON = verr.json()
		return Outcome{Reply: []byte(x.errorJSON)}, nil
	}
	x.over = true
	if resp.authzid != "" && resp.authzid != tok.Principal {
		return Outcome{}, public(OAuthBearer, "Authentication failed: Client requested an authorization id ("+
			resp.authzid+") that is different from the token's principal name ("+tok.Principal+")")
	}
	return Outcome{Done: true, Principal: acl.Principal{Type: "User", Name: tok.Principal}, Expiry: tok.Expiry}, nil
}

type oauthInitialResponse struct {
	authzid    string
	token      string
	extensions map[string]string
}

// parseOAuthInitialResponse reads `n,[a=authzid],%x01 key=value%x01 ... %x01` as Kafka's
// OAuthBearerClientInitialResponse does: keys are letters, values printable ASCII plus
// space, tab, CR and LF, `auth` required and of the form `Bearer <token68>`.
func parseOAuthInitialResponse(b []byte) (oauthInitialResponse, *parseError) {
	var r oauthInitialResponse
	if len(b) > maxOAuthMessage {
		return r, &parseError{reason: "initial response too long"}
	}
	s := string(b)
	rest, ok := strings.CutPrefix(s, "n,")
	if !ok {
		return r, &parseError{reason: "Invalid OAUTHBEARER client first message"}
	}
	authz, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return r, &parseError{reason: "Invalid OAUTHBEARER client first message"}
	}
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok || !validSaslName(a) {
			return r, &parseError{reason: "Invalid OAUTHBEARER client first message"}
		}
		// Kafka compares the authzid as sent, without decoding =2C and =3D.
		r.authzid = a
	}
	// rest is %x01 (key=value %x01)* %x01.
	body, ok := strings.CutPrefix(rest, "\x01")
	if !ok {
		return r, &parseError{reason: "Invalid OAUTHBEARER client first message"}
	}
	body, ok = strings.CutSuffix(body, "\x01")
	if !ok {
		return r, &parseError{reason: "Invalid OAUTHBEARER client first message"}
	}
	r.extensions = map[string]string{}
	auth, haveAuth := "", false
	for body != "" {
		pair, tail, ok := strings.Cut(body, "\x01")
		if !ok {
			return r, &parseError{reason: "Invalid OAUTHBEARER client first message"}
		}
		body = tail
		k, v, ok := strings.Cut(pair, "=")
		if !ok || !alpha(k) || !oauthValue(v) {
			return r, &parseError{reason: "Invalid OAUTHBEARER client first message"}
		}
		if len(r.extensions) >= maxOAuthExtensions {
			return r, &parseError{reason: "too many OAUTHBEARER extensions"}
		}
		if k == "auth" {
			auth, haveAuth = v, true
			continue
		}
		r.extensions[k] = v
	}
	if !haveAuth {
		return r, &parseError{reason: "Invalid OAUTHBEARER client first message: 'auth' not specified"}
	}
	scheme, tok, ok := strings.Cut(auth, " ")
	tok = strings.TrimLeft(tok, " ")
	if !ok || scheme == "" || !wordChars(scheme) || !token68(tok) {
		return r, &parseError{reason: "Invalid OAUTHBEARER client first message: invalid 'auth' format"}
	}
	if !strings.EqualFold(scheme, "bearer") {
		return r, &parseError{reason: "Invalid scheme in OAUTHBEARER client first message: " + strconv.Quote(scheme)}
	}
	r.token = tok
	return r, nil
}

const maxOAuthExtensions = 64

func oauthValue(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

func wordChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z') {
			return false
		}
	}
	return true
}

// token68 is Kafka's token pattern: [-_~+/.a-zA-Z0-9]+ then any number of '='.
func token68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(strings.IndexByte("-_~+/.", c) >= 0 || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z') {
			return false
		}
	}
	return true
}
