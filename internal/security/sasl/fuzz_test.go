package sasl

import (
	"errors"
	"testing"
	"time"
)

// The fuzz targets feed each exchange's decoder arbitrary client tokens. Beyond "never
// panics", each checks the property that matters: no input authenticates without the
// secret (the password, or a key of the key set), and every failure is an authentication
// failure (*Error), never anything a broker would answer as a server error.

func fuzzStore(t testing.TB) *store {
	return newStore(t, map[string]string{"alice": "secret"}, ScramSHA256, ScramSHA512)
}

func wantAuthFailure(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("error %v is not an authentication failure", err)
	}
}

func FuzzScramExchange(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"), []byte("c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="))
	f.Add([]byte("n,a=alice,n=alice,r=abc,tokenauth=true"), []byte(""))
	f.Add([]byte("n,,n=al=2Cice,r=x,ext=1"), []byte("c=biws,r=x,p="))
	a := newAuth(f, fuzzStore(f), ScramSHA256, ScramSHA512)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, mech := range []string{ScramSHA256, ScramSHA512} {
			x, _ := a.Start(mech)
			out, err := x.Step(first)
			wantAuthFailure(t, err)
			if out.Done {
				t.Fatal("authenticated by the client-first message")
			}
			if err != nil {
				continue
			}
			out, err = x.Step(final)
			wantAuthFailure(t, err)
			if out.Done {
				t.Fatalf("authenticated without the password: %q %q", first, final)
			}
			if _, err := x.Step(final); err != ErrExchangeOver {
				t.Fatalf("third step: %v", err)
			}
		}
	})
}

func FuzzPlainExchange(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("alice\x00alice\x00secret"))
	f.Add([]byte("\x00alice\x00wrong"))
	f.Add([]byte("a\x00b\x00c\x00d"))
	a := newAuth(f, fuzzStore(f), Plain)
	f.Fuzz(func(t *testing.T, msg []byte) {
		x, _ := a.Start(Plain)
		out, err := x.Step(msg)
		wantAuthFailure(t, err)
		if out.Done != (err == nil) {
			t.Fatalf("done %v with err %v", out.Done, err)
		}
		if out.Done {
			if s := string(msg); s != "\x00alice\x00secret" && s != "alice\x00alice\x00secret" {
				t.Fatalf("%q authenticated", msg)
			}
			if out.Principal.String() != "User:alice" {
				t.Fatalf("principal %v", out.Principal)
			}
		}
	})
}

func FuzzOAuthExchange(f *testing.F) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	tok := unsecuredToken(map[string]any{"sub": "dev", "exp": float64(now.Add(time.Minute).Unix()), "scope": []any{"a"}})
	f.Add([]byte("n,,\x01auth=Bearer "+tok+"\x01\x01"), []byte{1})
	f.Add([]byte("n,a=dev,\x01auth=Bearer "+tok+"\x01k=v\x01\x01"), []byte{1})
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.e30.\x01\x01"), []byte{1})
	is := newIssuer(f)
	unsecured := oauthAuth(f, OAuthConfig{Unsecured: true}, now)
	secure := oauthAuth(f, secureConfig(is), now)
	f.Fuzz(func(t *testing.T, first, second []byte) {
		for i, a := range []*Authenticator{unsecured, secure} {
			x, _ := a.Start(OAuthBearer)
			out, err := x.Step(first)
			wantAuthFailure(t, err)
			if out.Done {
				if i == 1 {
					t.Fatalf("a token not signed by the key set authenticated: %q", first)
				}
				if out.Principal.Name == "" || out.Expiry.IsZero() {
					t.Fatalf("authenticated without a principal or expiry: %+v", out)
				}
				continue
			}
			if err != nil {
				continue
			}
			out, err = x.Step(second)
			if err == nil || out.Done {
				t.Fatalf("the exchange went on after an error reply: %+v %v", out, err)
			}
			wantAuthFailure(t, err)
		}
	})
}
