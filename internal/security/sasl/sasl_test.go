package sasl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"
)

// store is an in-memory credential lookup, as the broker's image provides one.
type store struct {
	mu    sync.Mutex
	creds map[[2]string]ScramCredential
}

func newStore(t testing.TB, users map[string]string, mechs ...string) *store {
	s := &store{creds: map[[2]string]ScramCredential{}}
	for u, p := range users {
		for _, m := range mechs {
			c, err := NewCredential(m, p, nil, MinScramIterations)
			if err != nil {
				t.Fatal(err)
			}
			s.creds[[2]string{u, m}] = c
		}
	}
	return s
}

func (s *store) lookup(user, mech string) (ScramCredential, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.creds[[2]string{user, mech}]
	return c, ok
}

func newAuth(t testing.TB, s *store, mechs ...string) *Authenticator {
	a, err := New(Config{Mechanisms: mechs, Credentials: s.lookup})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// drive runs a franz-go client mechanism (the one kgo uses on the wire) against an exchange
// until one side finishes, and returns the server's last outcome and error.
func drive(t testing.TB, a *Authenticator, m ksasl.Mechanism) (Outcome, error) {
	t.Helper()
	x, err := a.Start(m.Name())
	if err != nil {
		t.Fatal(err)
	}
	sess, tok, err := m.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		out, err := x.Step(tok)
		if err != nil {
			return out, err
		}
		done, next, cerr := sess.Challenge(out.Reply)
		if out.Done {
			if !done || cerr != nil {
				t.Fatalf("server done, client done=%v err=%v", done, cerr)
			}
			return out, nil
		}
		if cerr != nil {
			t.Fatalf("client refused the server's reply %q: %v", out.Reply, cerr)
		}
		tok = next
	}
	t.Fatal("exchange did not end")
	return Outcome{}, nil
}

func wantFailure(t *testing.T, err error, mech, clientMessage string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an authentication failure", err)
	}
	if e.Mechanism != mech || e.ClientMessage(false) != clientMessage {
		t.Fatalf("failure = %s / %q, want %s / %q", e.Mechanism, e.ClientMessage(false), mech, clientMessage)
	}
}

func generic(mech string) string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech
}

func TestScramWithFranzGoClient(t *testing.T) {
	s := newStore(t, map[string]string{"alice": "secret", "b,o=b": "pw"}, ScramSHA256, ScramSHA512)
	a := newAuth(t, s, ScramSHA256, ScramSHA512)
	for _, tc := range []struct {
		name string
		mech func(kscram.Auth) ksasl.Mechanism
	}{
		{ScramSHA256, kscram.Auth.AsSha256Mechanism},
		{ScramSHA512, kscram.Auth.AsSha512Mechanism},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := drive(t, a, tc.mech(kscram.Auth{User: "alice", Pass: "secret"}))
			if err != nil || out.Principal.String() != "User:alice" {
				t.Fatalf("right password: %v %v", out.Principal, err)
			}
			// A name with ',' and '=' travels as =2C and =3D and comes back decoded.
			out, err = drive(t, a, tc.mech(kscram.Auth{User: "b,o=b", Pass: "pw"}))
			if err != nil || out.Principal.Name != "b,o=b" {
				t.Fatalf("escaped name: %v %v", out.Principal, err)
			}
			_, err = drive(t, a, tc.mech(kscram.Auth{User: "alice", Pass: "wrong"}))
			wantFailure(t, err, tc.name, generic(tc.name))
			// An unknown user gets the same message as a wrong password.
			_, err = drive(t, a, tc.mech(kscram.Auth{User: "mallory", Pass: "secret"}))
			wantFailure(t, err, tc.name, generic(tc.name))
			_, err = drive(t, a, tc.mech(kscram.Auth{User: "alice", Pass: "secret", IsToken: true}))
			wantFailure(t, err, tc.name, generic(tc.name))
			_, err = drive(t, a, tc.mech(kscram.Auth{User: "alice", Pass: "secret", Zid: "root"}))
			wantFailure(t, err, tc.name, "Authentication failed: Client requested an authorization id that is different from username")
			out, err = drive(t, a, tc.mech(kscram.Auth{User: "alice", Pass: "secret", Zid: "alice"}))
			if err != nil || out.Principal.Name != "alice" {
				t.Fatalf("authzid equal to the user: %v %v", out.Principal, err)
			}
		})
	}
}

// TestScramWithXdgClient checks the credential derivation against a second, independent
// client implementation, and that a credential of one mechanism does not serve the other.
func TestScramWithXdgClient(t *testing.T) {
	s := newStore(t, map[string]string{"carol": "pässword"}, ScramSHA512)
	a := newAuth(t, s, ScramSHA256, ScramSHA512)
	run := func(mech string, h scram.HashGeneratorFcn, pass string) error {
		c, err := h.NewClientUnprepped("carol", pass, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := c.NewConversation()
		x, _ := a.Start(mech)
		msg, _ := conv.Step("")
		for !conv.Done() {
			out, err := x.Step([]byte(msg))
			if err != nil {
				return err
			}
			if msg, err = conv.Step(string(out.Reply)); err != nil {
				t.Fatalf("client refused the server (signature check): %v", err)
			}
			if out.Done != conv.Done() {
				t.Fatalf("server done %v, client done %v", out.Done, conv.Done())
			}
		}
		return nil
	}
	if err := run(ScramSHA512, scram.SHA512, "pässword"); err != nil {
		t.Fatal(err)
	}
	wantFailure(t, run(ScramSHA256, scram.SHA256, "pässword"), ScramSHA256, generic(ScramSHA256))
}

func TestScramRefusesWeakStoredCredential(t *testing.T) {
	s := newStore(t, map[string]string{"dave": "pw"}, ScramSHA256)
	c := s.creds[[2]string{"dave", ScramSHA256}]
	c.Iterations = 4095
	s.creds[[2]string{"dave", ScramSHA256}] = c
	_, err := drive(t, newAuth(t, s, ScramSHA256), kscram.Auth{User: "dave", Pass: "pw"}.AsSha256Mechanism())
	wantFailure(t, err, ScramSHA256, generic(ScramSHA256))
}

func TestCredentialIterationBounds(t *testing.T) {
	for _, tc := range []struct {
		iterations int
		want       error
	}{{4095, ErrTooFewIterations}, {4096, nil}, {16384, nil}, {16385, ErrTooManyIterations}} {
		_, err := NewCredential(ScramSHA256, "pw", []byte("salt"), tc.iterations)
		if err != tc.want {
			t.Errorf("%d iterations: %v, want %v", tc.iterations, err, tc.want)
		}
	}
	if _, err := NewCredential("PLAIN", "pw", nil, 4096); err == nil {
		t.Error("a credential for PLAIN was made")
	}
}

// TestCredentialRFC7677 checks the derivation with RFC 7677's example (user "user", password
// "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations): the conversation's server
// signature is the RFC's.
func TestCredentialRFC7677(t *testing.T) {
	salt := []byte{0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e, 0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81}
	cred, err := NewCredential(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) {
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(cred.Salt), Iters: 4096},
			StoredKey: cred.StoredKey, ServerKey: cred.ServerKey}, nil
	})
	srv.WithNonceGenerator(func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" })
	conv := srv.NewConversation()
	if _, err := conv.Step("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"); err != nil {
		t.Fatal(err)
	}
	final, err := conv.Step("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	if err != nil {
		t.Fatal(err)
	}
	if final != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server final = %q", final)
	}
}

func TestPlainAgainstScramCredentials(t *testing.T) {
	s := newStore(t, map[string]string{"erin": "hunter2"}, ScramSHA256)
	s512 := newStore(t, map[string]string{"frank": "hunter3"}, ScramSHA512)
	for u, c := range s512.creds {
		s.creds[u] = c
	}
	a := newAuth(t, s, Plain)
	for _, user := range []struct{ name, pass string }{{"erin", "hunter2"}, {"frank", "hunter3"}} {
		out, err := drive(t, a, plain.Auth{User: user.name, Pass: user.pass}.AsMechanism())
		if err != nil || !out.Done || out.Principal.String() != "User:"+user.name {
			t.Fatalf("%s: %+v %v", user.name, out, err)
		}
	}
	step := func(msg string) error {
		x, _ := a.Start(Plain)
		_, err := x.Step([]byte(msg))
		if _, again := x.Step([]byte(msg)); again != ErrExchangeOver {
			t.Fatalf("second step: %v", again)
		}
		return err
	}
	for msg, want := range map[string]string{
		"\x00erin\x00wrong":       "Authentication failed: Invalid username or password",
		"\x00nobody\x00hunter2":   "Authentication failed: Invalid username or password",
		"\x00\x00hunter2":         "Authentication failed: username not specified",
		"\x00erin\x00":            "Authentication failed: password not specified",
		"erin\x00hunter2":         "Invalid SASL/PLAIN response: expected 3 tokens, got 2",
		"a\x00b\x00c\x00d\x00e":   "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
		"root\x00erin\x00hunter2": "Authentication failed: Client requested an authorization id that is different from username",
		"\x00erin\x00hunter2\xff": "Authentication failed: Invalid username or password",
	} {
		wantFailure(t, step(msg), Plain, want)
	}
	if err := step("erin\x00erin\x00hunter2"); err != nil {
		t.Fatalf("authzid equal to the user: %v", err)
	}
}

func TestAuthenticatorConfig(t *testing.T) {
	s := newStore(t, nil)
	if _, err := New(Config{Mechanisms: []string{"GSSAPI"}, Credentials: s.lookup}); err == nil {
		t.Error("GSSAPI accepted")
	}
	if _, err := New(Config{Mechanisms: []string{Plain}}); err == nil {
		t.Error("PLAIN without credentials accepted")
	}
	if _, err := New(Config{Mechanisms: []string{OAuthBearer}, Credentials: s.lookup}); err == nil {
		t.Error("OAUTHBEARER without a validator accepted")
	}
	if _, err := New(Config{Mechanisms: []string{Plain, Plain}, Credentials: s.lookup}); err == nil {
		t.Error("a mechanism listed twice accepted")
	}
	a := newAuth(t, s, ScramSHA512, Plain)
	if got := strings.Join(a.Mechanisms(), ","); got != "SCRAM-SHA-512,PLAIN" {
		t.Errorf("mechanisms %s", got)
	}
	if _, err := a.Start(ScramSHA256); err != ErrUnsupportedMechanism {
		t.Errorf("a disabled mechanism started: %v", err)
	}
}

func TestErrorMessages(t *testing.T) {
	e := hidden(ScramSHA256, "unknown user")
	if got := e.ClientMessage(true); got != "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" {
		t.Error(got)
	}
	if strings.Contains(e.ClientMessage(false), "unknown") {
		t.Error("the hidden reason reached the client's message")
	}
}
