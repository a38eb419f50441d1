// Package addscram reads the --add-scram arguments of Kafka's `kafka-storage format`
// (Kafka 4.4's ScramParser), which bootstrap a new cluster's first SCRAM credentials
// (the first super user, typically) before any client can connect, and turns them into
// the UserScramCredentialRecords to write with the cluster's first metadata records.
//
// The syntax, exactly Kafka's:
//
//	SCRAM-SHA-256=[name=admin,password=secret]
//	SCRAM-SHA-512=[name=admin,password="my secret",iterations=8192]
//	SCRAM-SHA-256=[name=alice,salt="MWx2NHBk...",saltedpassword="mT0yyUUx..."]
//
// a mechanism (SCRAM-SHA-256 or SCRAM-SHA-512, as written), '=', and in brackets
// comma-separated key=value components: name (required), password or saltedpassword
// (one required; password wins if both are given), salt (standard base64; required with
// saltedpassword, otherwise drawn at random as Kafka draws it), iterations (4096..16384,
// default 4096). A value in double quotes loses them; a key given twice keeps its last
// value; keys are case-sensitive and not trimmed; a comma cannot be part of a value.
// Errors carry Kafka's FormatterException messages.
//
// Use (the serve flag's owner wires it):
//
//	creds, err := addscram.ParseAll(flagValues)   // at flag parsing: a bad argument stops start-up
//	recs, err := addscram.Records(creds, rand.Reader)
//	// append recs to the cluster's first records (with the ClusterRecord and feature
//	// levels), once, when the metadata log is created; never on a later start.
//
// Pure but for the randomness passed in.
package addscram

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/wire"
)

// DefaultIterations is the iteration count when the argument names none.
const DefaultIterations = 4096

// Credential is one parsed --add-scram argument (Kafka's PerMechanismData).
type Credential struct {
	Mechanism string // sasl.ScramSHA256 or sasl.ScramSHA512
	Name      string
	// Salt is the configured salt; nil draws one (Records).
	Salt []byte
	// Iterations is the count (Parse sets DefaultIterations when none is given).
	Iterations int
	// Password is set when the argument gives password (used even if saltedpassword is
	// given too); otherwise SaltedPassword is, with Salt.
	Password       *string
	SaltedPassword []byte
}

// Error is a refused argument, with Kafka's message.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func errorf(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }

// Parse reads one --add-scram argument.
func Parse(arg string) (Credential, error) {
	arg = javaTrim(arg)
	mech, config, ok := strings.Cut(arg, "=")
	if !ok {
		return Credential{}, errorf("Failed to find equals sign in SCRAM argument '%s'", arg)
	}
	if sasl.ScramMechanismType(mech) == 0 {
		return Credential{}, errorf("The add-scram mechanism %s is not supported.", mech)
	}
	if !strings.HasPrefix(config, "[") {
		return Credential{}, errorf("Expected configuration string to start with [")
	}
	if !strings.HasSuffix(config, "]") {
		return Credential{}, errorf("Expected configuration string to end with ]")
	}
	return parseComponents(mech, config[1:len(config)-1])
}

// ParseAll parses every argument, stopping at the first refused one.
func ParseAll(args []string) ([]Credential, error) {
	out := make([]Credential, 0, len(args))
	for _, a := range args {
		c, err := Parse(a)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func parseComponents(mech, config string) (Credential, error) {
	components := map[string]string{}
	for _, part := range javaSplitComma(config) {
		i := strings.IndexByte(part, '=')
		if i < 0 {
			return Credential{}, errorf("No equals sign found in SCRAM component: %s", part)
		}
		v := part[i+1:]
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		components[part[:i]] = v
	}
	take := func(k string) (string, bool) {
		v, ok := components[k]
		delete(components, k)
		return v, ok
	}
	c := Credential{Mechanism: mech, Iterations: DefaultIterations}
	name, ok := take("name")
	if !ok {
		return Credential{}, errorf("You must supply 'name' to add-scram")
	}
	c.Name = name
	if s, ok := take("salt"); ok {
		b, err := javaBase64(s)
		if err != nil {
			return Credential{}, errorf("Failed to decode given salt: %s", s)
		}
		c.Salt = b
	}
	if s, ok := take("iterations"); ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return Credential{}, errorf("Failed to parse iterations count: %s", s)
		}
		c.Iterations = int(n)
	}
	password, hasPassword := take("password")
	salted, hasSalted := take("saltedpassword")
	switch {
	case hasPassword:
		c.Password = &password
	case !hasSalted:
		return Credential{}, errorf("You must supply one of 'password' or 'saltedpassword' to add-scram")
	case c.Salt == nil:
		return Credential{}, errorf("You must supply 'salt' with 'saltedpassword' to add-scram")
	default:
		b, err := javaBase64(salted)
		if err != nil {
			return Credential{}, errorf("Failed to decode given saltedPassword: %s", salted)
		}
		c.SaltedPassword = b
	}
	if len(components) > 0 {
		return Credential{}, errorf("Unknown SCRAM configurations: %s", strings.Join(slices.Sorted(maps.Keys(components)), ", "))
	}
	return c, nil
}

// Record is the credential's UserScramCredentialRecord: the salt (c.Salt, or drawn from
// random as Kafka's ScramFormatter draws one: 130 random bits written in base 36, as
// ASCII), the iterations (refused outside 4096..16384 with Kafka's message), and the
// StoredKey and ServerKey of the salted password (c.SaltedPassword, or PBKDF2 of the
// password's UTF-8 bytes, no SASLprep, as Kafka's ScramFormatter does).
func (c Credential) Record(random io.Reader) (*wire.UserScramCredentialRecord, error) {
	mechType := sasl.ScramMechanismType(c.Mechanism)
	if mechType == 0 {
		return nil, errorf("The add-scram mechanism %s is not supported.", c.Mechanism)
	}
	salt := c.Salt
	if salt == nil {
		var err error
		if salt, err = randomSalt(random); err != nil {
			return nil, err
		}
	}
	it := c.Iterations
	javaName := strings.ReplaceAll(c.Mechanism, "-", "_") // the enum's name, as Kafka prints it
	if it < sasl.MinScramIterations {
		return nil, errorf("The 'iterations' value must be >= %d for add-scram using %s", sasl.MinScramIterations, javaName)
	}
	if it > sasl.MaxScramIterations {
		return nil, errorf("The 'iterations' value must be <= %d for add-scram using %s", sasl.MaxScramIterations, javaName)
	}
	var cred sasl.ScramCredential
	var err error
	if c.Password != nil {
		cred, err = sasl.NewCredential(c.Mechanism, *c.Password, salt, it)
	} else {
		cred, err = sasl.CredentialFromSaltedPassword(c.Mechanism, salt, c.SaltedPassword, it)
	}
	if err != nil { // the mechanism and iterations were checked
		return nil, err
	}
	r := &wire.UserScramCredentialRecord{Name: c.Name, Mechanism: mechType, Salt: cred.Salt, StoredKey: cred.StoredKey,
		ServerKey: cred.ServerKey, Iterations: cred.Iterations}
	r.SetVersion(r.MaxVersion())
	return r, nil
}

// Records are the records of creds, in order (a user and mechanism given twice: the
// later replaces the earlier when the records are applied, as in Kafka).
func Records(creds []Credential, random io.Reader) ([]wire.MetadataRecord, error) {
	out := make([]wire.MetadataRecord, 0, len(creds))
	for _, c := range creds {
		r, err := c.Record(random)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// randomSalt is ScramFormatter.secureRandomBytes: new BigInteger(130, random) written in
// base 36, as UTF-8.
func randomSalt(random io.Reader) ([]byte, error) {
	var b [17]byte // 136 bits; the top 6 are dropped
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return nil, fmt.Errorf("addscram: drawing a salt: %w", err)
	}
	b[0] &= 0x03
	return []byte(new(big.Int).SetBytes(b[:]).Text(36)), nil
}

// javaTrim is Java's String.trim: it strips every char up to ' ' at both ends.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// javaSplitComma is Java's s.split(","): trailing empty parts are dropped, others kept
// (so "" is one empty part).
func javaSplitComma(s string) []string {
	parts := strings.Split(s, ",")
	for len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 1 && parts[0] == "" && s != "" {
		return nil // s was all commas: Java's split gives no parts
	}
	return parts
}

var errBase64 = errors.New("illegal base64")

// javaBase64 is Java's Base64.getDecoder().decode: the standard alphabet, padding
// optional but correct when present, no line breaks.
func javaBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errBase64
	}
	if strings.HasSuffix(s, "=") {
		return base64.StdEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}
