// Package sasltest holds checks other packages' tests make of SASL credentials.
package sasltest

import (
	"testing"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/sasl"
)

// ImageCredentials is the broker's credential lookup over an image's SCRAM map.
func ImageCredentials(im *metadata.Image) sasl.CredentialLookup {
	return func(user, mech string) (sasl.ScramCredential, bool) {
		c, ok := im.Scram[metadata.ScramKey{User: user, Mechanism: sasl.ScramMechanismType(mech)}]
		return sasl.ScramCredential(c), ok
	}
}

// PlainLogin reports whether a SASL/PLAIN exchange of user and password authenticates
// against creds (PLAIN verifies the password with the user's SCRAM keys, so this checks
// that stored keys are the ones the password derives).
func PlainLogin(tb testing.TB, creds sasl.CredentialLookup, user, password string) bool {
	tb.Helper()
	a, err := sasl.New(sasl.Config{Mechanisms: []string{sasl.Plain}, Credentials: creds})
	if err != nil {
		tb.Fatal(err)
	}
	x, err := a.Start(sasl.Plain)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := x.Step([]byte("\x00" + user + "\x00" + password))
	return err == nil && out.Done
}
