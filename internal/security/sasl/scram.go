package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"hash"
	"strings"

	"github.com/xdg-go/scram"

	"github.com/exactq/exactq/internal/security/acl"
)

// ScramCredential is a user's credential for one SCRAM mechanism: the salt, the iteration
// count and the two keys RFC 5802 derives from the password, never the password. Its fields
// are those of the metadata image's ScramCredential, in the same order, so the broker
// converts one into the other with a plain conversion.
type ScramCredential struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// Kafka's bounds on a credential's iterations (ScramMechanism and ScramControlManager):
// new credentials must be within them; authentication refuses fewer than the minimum.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ErrTooFewIterations and ErrTooManyIterations are AlterUserScramCredentials'
// UNACCEPTABLE_CREDENTIAL (88) messages, Kafka's words.
var (
	ErrTooFewIterations  = errors.New("Too few iterations")
	ErrTooManyIterations = errors.New("Too many iterations")
	errNotScram          = errors.New("not a SCRAM mechanism")
)

// ScramMechanismType is the int8 Kafka's records and AlterUserScramCredentials use for a
// SCRAM mechanism name (1 SCRAM-SHA-256, 2 SCRAM-SHA-512), and 0 for anything else.
func ScramMechanismType(mechanism string) int8 {
	switch mechanism {
	case ScramSHA256:
		return 1
	case ScramSHA512:
		return 2
	}
	return 0
}

// ScramMechanismName is the inverse of ScramMechanismType ("" for an unknown type).
func ScramMechanismName(t int8) string {
	switch t {
	case 1:
		return ScramSHA256
	case 2:
		return ScramSHA512
	}
	return ""
}

func scramHash(mechanism string) func() hash.Hash {
	if mechanism == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// CredentialFromSaltedPassword derives the stored and server keys from a salted password,
// which is what AlterUserScramCredentials carries (the client salts the password itself).
// The iteration count must be within Kafka's bounds.
func CredentialFromSaltedPassword(mechanism string, salt, saltedPassword []byte, iterations int) (ScramCredential, error) {
	if ScramMechanismType(mechanism) == 0 {
		return ScramCredential{}, errNotScram
	}
	if err := checkIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	h := scramHash(mechanism)
	clientKey := mac(h, saltedPassword, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  stored.Sum(nil),
		ServerKey:  mac(h, saltedPassword, "Server Key"),
		Iterations: int32(iterations),
	}, nil
}

func checkIterations(iterations int) error {
	if iterations < MinScramIterations {
		return ErrTooFewIterations
	}
	if iterations > MaxScramIterations {
		return ErrTooManyIterations
	}
	return nil
}

// NewCredential salts password (with a fresh 32-byte random salt when salt is nil) and
// derives its credential: the bootstrap path (`--add-scram`) and tests.
func NewCredential(mechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	if ScramMechanismType(mechanism) == 0 {
		return ScramCredential{}, errNotScram
	}
	if err := checkIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	if salt == nil {
		salt = make([]byte, 32)
		rand.Read(salt)
	}
	return CredentialFromSaltedPassword(mechanism, salt, saltPassword(mechanism, password, salt, iterations), iterations)
}

// saltPassword is RFC 5802's Hi(password, salt, i): PBKDF2 with the mechanism's HMAC. The
// password is used as its UTF-8 bytes without SASLprep, as Kafka's ScramFormatter does, so
// credentials made by Kafka's tools verify here.
func saltPassword(mechanism, password string, salt []byte, iterations int) []byte {
	h := scramHash(mechanism)
	key, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil { // only for FIPS-mode key-length rules, which these lengths meet
		panic("sasl: pbkdf2: " + err.Error())
	}
	return key
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// verifyPassword reports whether password derives cred's StoredKey (compared in constant
// time). A credential below Kafka's minimum iterations never verifies.
func verifyPassword(mechanism, password string, cred ScramCredential) bool {
	if cred.Iterations < MinScramIterations || cred.Iterations > MaxScramIterations {
		return false
	}
	h := scramHash(mechanism)
	clientKey := mac(h, saltPassword(mechanism, password, cred.Salt, int(cred.Iterations)), "Client Key")
	stored := h()
	stored.Write(clientKey)
	return subtle.ConstantTimeCompare(stored.Sum(nil), cred.StoredKey) == 1
}

// scramExchange runs RFC 5802's two round trips with xdg-go/scram's server conversation,
// after checking each client-first message against Kafka's grammar (ScramMessages), which
// is stricter than the library's: no channel binding ("n," only), and an authzid, if any,
// equal to the user name. Kafka's `tokenauth=true` extension asks for delegation-token
// authentication, which exactq does not have, so it is refused.
type scramExchange struct {
	mechanism   string
	credentials CredentialLookup
	conv        *scram.ServerConversation
	user        string
	lookupFail  string // why the credential lookup failed, for the log
	step        int    // 0: client-first expected, 1: client-final expected, 2: over
}

func newScramExchange(mechanism string, credentials CredentialLookup) *scramExchange {
	return &scramExchange{mechanism: mechanism, credentials: credentials}
}

func (x *scramExchange) Mechanism() string { return x.mechanism }

func (x *scramExchange) Step(token []byte) (Outcome, error) {
	switch x.step {
	case 0:
		x.step = 2 // stays over unless the first message is accepted
		return x.first(token)
	case 1:
		x.step = 2
		return x.final(token)
	}
	return Outcome{}, ErrExchangeOver
}

func (x *scramExchange) first(token []byte) (Outcome, error) {
	user, err := parseScramClientFirst(string(token))
	if err != nil {
		return Outcome{}, err.withMechanism(x.mechanism)
	}
	x.user = user
	h := scram.SHA256
	if x.mechanism == ScramSHA512 {
		h = scram.SHA512
	}
	srv, _ := h.NewServer(func(name string) (scram.StoredCredentials, error) {
		cred, ok := x.credentials(name, x.mechanism)
		if !ok {
			x.lookupFail = "unknown user"
			return scram.StoredCredentials{}, errors.New("unknown user")
		}
		if cred.Iterations < MinScramIterations {
			x.lookupFail = "iterations below the minimum"
			return scram.StoredCredentials{}, errors.New("iterations below the minimum")
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(cred.Salt), Iters: int(cred.Iterations)},
			StoredKey:  cred.StoredKey, ServerKey: cred.ServerKey,
		}, nil
	})
	x.conv = srv.NewConversation()
	reply, err2 := x.conv.Step(string(token))
	if err2 != nil {
		// Kafka answers an unknown user and a short iteration count with its generic
		// message (a SaslException), so the reply does not say whether the user exists.
		reason := x.lookupFail
		if reason == "" {
			reason = err2.Error()
		}
		return Outcome{}, hidden(x.mechanism, "client-first message: %s", reason)
	}
	x.step = 1
	return Outcome{Reply: []byte(reply)}, nil
}

func (x *scramExchange) final(token []byte) (Outcome, error) {
	if len(token) > maxScramMessage {
		return Outcome{}, hidden(x.mechanism, "client-final message of %d bytes", len(token))
	}
	reply, err := x.conv.Step(string(token))
	if err != nil || !x.conv.Valid() {
		reason := "invalid proof"
		if err != nil {
			reason = err.Error()
		}
		return Outcome{}, hidden(x.mechanism, "client-final message: %s", reason)
	}
	return Outcome{Reply: []byte(reply), Done: true, Principal: acl.Principal{Type: "User", Name: x.user}}, nil
}

// maxScramMessage bounds a SCRAM message: a user name, a nonce, a proof and a few
// extensions fit in far less.
const maxScramMessage = 8192

// parseError is a grammar failure before the mechanism is known to the parser.
type parseError struct {
	public string // Kafka's SaslAuthenticationException text, if it has one
	reason string
}

func (e *parseError) withMechanism(mech string) *Error {
	if e.public != "" {
		return public(mech, e.public)
	}
	return hidden(mech, "%s", e.reason)
}

// parseScramClientFirst checks a client-first message as Kafka's ClientFirstMessage pattern
// does (`n,[a=authzid],n=saslname,r=nonce[,ext=value...]`) and returns the user name.
func parseScramClientFirst(msg string) (string, *parseError) {
	if len(msg) > maxScramMessage {
		return "", &parseError{reason: "client-first message too long"}
	}
	rest, ok := strings.CutPrefix(msg, "n,")
	if !ok {
		return "", &parseError{reason: "client-first message without the gs2 header n,"}
	}
	authz, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return "", &parseError{reason: "client-first message without an authzid field"}
	}
	fields := strings.Split(rest, ",")
	if len(fields) < 2 {
		return "", &parseError{reason: "client-first message without user and nonce"}
	}
	rawName, ok := strings.CutPrefix(fields[0], "n=")
	if !ok || !validSaslName(rawName) {
		return "", &parseError{reason: "client-first message with an invalid user name"}
	}
	nonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || nonce == "" || !printable(nonce) {
		return "", &parseError{reason: "client-first message with an invalid nonce"}
	}
	for _, ext := range fields[2:] {
		k, v, ok := strings.Cut(ext, "=")
		if !ok || !alpha(k) || v == "" || !ascii(v) {
			return "", &parseError{reason: "client-first message with an invalid extension"}
		}
		if k == "tokenauth" && strings.EqualFold(v, "true") {
			return "", &parseError{reason: "delegation-token authentication (tokenauth) is not supported"}
		}
	}
	user := decodeSaslName(rawName)
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok || !validSaslName(a) {
			return "", &parseError{reason: "client-first message with an invalid authzid"}
		}
		if decodeSaslName(a) != user {
			return "", &parseError{public: "Authentication failed: Client requested an authorization id that is different from username"}
		}
	}
	return user, nil
}

// validSaslName is RFC 5802's saslname as Kafka's pattern has it: one or more characters,
// where ',' and '=' appear only as "=2C" and "=3D".
func validSaslName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',', 0:
			return false
		default:
			if s[i] > 0x7f {
				return false
			}
		case '=':
			if !strings.HasPrefix(s[i:], "=2C") && !strings.HasPrefix(s[i:], "=3D") {
				return false
			}
			i += 2
		}
	}
	return true
}

func decodeSaslName(s string) string {
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
}

// printable is RFC 5802's printable: %x21-2B / %x2D-7E (no comma).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 || s[i] > 0x7f {
			return false
		}
	}
	return true
}

func alpha(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
