// Package sasl holds the server side of Kafka's SASL mechanisms as pure state machines: PLAIN
// (RFC 4616, verified against stored SCRAM credentials), SCRAM-SHA-256 and SCRAM-SHA-512
// (RFC 5802/7677, through github.com/xdg-go/scram) and OAUTHBEARER (RFC 7628, JWTs checked
// with github.com/go-jose/go-jose/v4). An Exchange consumes the client's tokens (the
// auth_bytes of SaslAuthenticate) and returns the server's replies; it does no I/O, reads
// the clock only through the Authenticator's Now, and looks credentials up through the
// Authenticator's Credentials function, so the connection layer owns framing, timeouts and
// the re-authentication schedule.
package sasl

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/exactq/exactq/internal/security/acl"
)

// Mechanism names as clients send them in SaslHandshake and as sasl.enabled.mechanisms lists
// them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// MaxTokenBytes bounds one client token. Kafka bounds the whole pre-authentication receive
// by sasl.server.max.receive.size (524288); a token is never larger than the frame.
const MaxTokenBytes = 524288

// Outcome is what one Step produced.
type Outcome struct {
	// Reply is the server's token for the client (SaslAuthenticate's auth_bytes); it may be
	// empty, and is sent even when Done.
	Reply []byte
	// Done is set when the client is authenticated: Principal is then who it is.
	Done      bool
	Principal acl.Principal
	// Expiry is when the credential itself stops being valid (an OAUTHBEARER token's exp);
	// zero when the credential does not expire. KIP-368 caps the session lifetime by it.
	Expiry time.Time
}

// Exchange is one authentication conversation, begun by Authenticator.Start. Step is called
// with each client token in turn until it returns Done or an error; after either, the
// exchange is over and Step returns ErrExchangeOver.
type Exchange interface {
	Mechanism() string
	Step(clientToken []byte) (Outcome, error)
}

// Error is an authentication failure: the client answered SASL_AUTHENTICATION_FAILED (58)
// and the connection closed, as Kafka does. It is never a server error.
type Error struct {
	Mechanism string
	// Public is the message the client may see (Kafka's SaslAuthenticationException text).
	// Empty means the reason may reveal something (whether a user exists), so the client
	// gets Kafka's generic text instead; see ClientMessage.
	Public string
	// Reason is for the broker's log only.
	Reason string
}

func (e *Error) Error() string {
	if e.Public != "" {
		return e.Public
	}
	return e.Mechanism + " authentication failed: " + e.Reason
}

// ClientMessage is SaslAuthenticate's error_message for this failure. reauth selects
// Kafka's wording for a failed re-authentication.
func (e *Error) ClientMessage(reauth bool) string {
	if e.Public != "" {
		return e.Public
	}
	what := "authentication"
	if reauth {
		what = "re-authentication"
	}
	return "Authentication failed during " + what + " due to invalid credentials with SASL mechanism " + e.Mechanism
}

func public(mech, msg string) *Error { return &Error{Mechanism: mech, Public: msg, Reason: msg} }

func hidden(mech, format string, args ...any) *Error {
	return &Error{Mechanism: mech, Reason: fmt.Sprintf(format, args...)}
}

// ErrExchangeOver is returned by Step after the exchange finished or failed.
var ErrExchangeOver = errors.New("sasl: the exchange is over")

// ErrUnsupportedMechanism is returned by Start for a mechanism not enabled (Kafka answers
// SaslHandshake with UNSUPPORTED_SASL_MECHANISM, 33).
var ErrUnsupportedMechanism = errors.New("sasl: mechanism not enabled")

// CredentialLookup returns a user's SCRAM credential for one mechanism (ScramSHA256 or
// ScramSHA512). The broker backs it with the metadata image's Scram map; it must be safe
// for concurrent use and must not block on I/O.
type CredentialLookup func(user, mechanism string) (ScramCredential, bool)

// Authenticator starts exchanges for the enabled mechanisms. It is immutable after
// construction and safe for concurrent use.
type Authenticator struct {
	mechanisms  []string
	credentials CredentialLookup
	oauth       *OAuthValidator
	now         func() time.Time
}

// Config configures an Authenticator.
type Config struct {
	// Mechanisms is sasl.enabled.mechanisms, in the order SaslHandshake lists them.
	Mechanisms []string
	// Credentials serves PLAIN and SCRAM; required when either is enabled.
	Credentials CredentialLookup
	// OAuth validates OAUTHBEARER tokens; required when it is enabled.
	OAuth *OAuthValidator
	// Now is the clock (time.Now when nil); tests pass a fake one.
	Now func() time.Time
}

// New checks cfg and returns its Authenticator.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{credentials: cfg.Credentials, oauth: cfg.OAuth, now: cfg.Now}
	if a.now == nil {
		a.now = time.Now
	}
	if len(cfg.Mechanisms) == 0 {
		return nil, errors.New("sasl: sasl.enabled.mechanisms is empty")
	}
	for _, m := range cfg.Mechanisms {
		switch m {
		case Plain, ScramSHA256, ScramSHA512:
			if cfg.Credentials == nil {
				return nil, fmt.Errorf("sasl: %s needs a credential lookup", m)
			}
		case OAuthBearer:
			if cfg.OAuth == nil {
				return nil, errors.New("sasl: OAUTHBEARER needs a token validator")
			}
		default:
			return nil, fmt.Errorf("sasl: unknown mechanism %q in sasl.enabled.mechanisms", m)
		}
		if slices.Contains(a.mechanisms, m) {
			return nil, fmt.Errorf("sasl: mechanism %q listed twice", m)
		}
		a.mechanisms = append(a.mechanisms, m)
	}
	return a, nil
}

// Mechanisms returns the enabled mechanisms (SaslHandshake's mechanisms field).
func (a *Authenticator) Mechanisms() []string { return slices.Clone(a.mechanisms) }

// Start begins an exchange for mechanism, or returns ErrUnsupportedMechanism.
func (a *Authenticator) Start(mechanism string) (Exchange, error) {
	if !slices.Contains(a.mechanisms, mechanism) {
		return nil, ErrUnsupportedMechanism
	}
	switch mechanism {
	case Plain:
		return &plainExchange{credentials: a.credentials}, nil
	case ScramSHA256, ScramSHA512:
		return newScramExchange(mechanism, a.credentials), nil
	default: // OAuthBearer; New admits nothing else
		return &oauthExchange{validator: a.oauth, now: a.now}, nil
	}
}
