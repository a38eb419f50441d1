package sasl

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/exactq/exactq/internal/security/acl"
)

// plainExchange is RFC 4616's single message, `[authzid] NUL authcid NUL passwd`, checked as
// Kafka's PlainSaslServer checks it (its messages are the ones a client sees). The password
// is verified against the user's stored SCRAM credential, SCRAM-SHA-512 first, then
// SCRAM-SHA-256: exactq keeps no plaintext passwords, so a PLAIN user is a SCRAM user.
type plainExchange struct {
	credentials CredentialLookup
	over        bool
}

// maxPlainMessage bounds the message: RFC 4616 asks servers to accept 255 octets per
// field; Kafka accepts any size up to its receive limit, so allow generously.
const maxPlainMessage = 3 * 4096

func (x *plainExchange) Mechanism() string { return Plain }

func (x *plainExchange) Step(token []byte) (Outcome, error) {
	if x.over {
		return Outcome{}, ErrExchangeOver
	}
	x.over = true
	if len(token) > maxPlainMessage {
		return Outcome{}, public(Plain, "Authentication failed: SASL/PLAIN message too long")
	}
	if !utf8.Valid(token) {
		// Java decodes invalid UTF-8 to U+FFFD and carries on; the name and password can
		// then match nothing that was stored, so refuse it with Kafka's generic wording.
		return Outcome{}, public(Plain, "Authentication failed: Invalid username or password")
	}
	fields := strings.SplitN(string(token), "\x00", 4)
	if len(fields) != 3 {
		return Outcome{}, public(Plain, fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", min(len(fields), 4)))
	}
	authz, user, password := fields[0], fields[1], fields[2]
	if user == "" {
		return Outcome{}, public(Plain, "Authentication failed: username not specified")
	}
	if password == "" {
		return Outcome{}, public(Plain, "Authentication failed: password not specified")
	}
	if !x.verify(user, password) {
		return Outcome{}, public(Plain, "Authentication failed: Invalid username or password")
	}
	if authz != "" && authz != user {
		return Outcome{}, public(Plain, "Authentication failed: Client requested an authorization id that is different from username")
	}
	return Outcome{Done: true, Principal: acl.Principal{Type: "User", Name: user}}, nil
}

func (x *plainExchange) verify(user, password string) bool {
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		if cred, ok := x.credentials(user, mech); ok {
			return verifyPassword(mech, password, cred)
		}
	}
	return false
}
