package addscram_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"reflect"
	"regexp"
	"testing"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/addscram"
	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/internal/security/sasl/sasltest"
	"github.com/exactq/exactq/wire"
)

// The salt and salted password of Kafka's ScramParserTest, as the arguments write them.
const (
	testSalt         = "MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E="         // "1lv4pdnw4fwq7notcxm0yy1k7q"
	testSaltedPasswd = "mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE=" // 32 bytes
)

func pw(s string) *string { return &s }

func mustDecode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestParse(t *testing.T) {
	salt := []byte("1lv4pdnw4fwq7notcxm0yy1k7q")
	salted := []byte{0x99, 0x3d, 0x32, 0xc9, 0x45, 0x31, 0x9e, 0x52, 0x5a, 0x0b, 0xdf, 0x47, 0x5e, 0x04, 0x53, 0x49,
		0x89, 0x5b, 0xba, 0xa6, 0xb8, 0x15, 0x21, 0xad, 0x24, 0x22, 0x5f, 0x4c, 0xcb, 0xe3, 0x60, 0x21}
	for _, tc := range []struct {
		arg  string
		want addscram.Credential
	}{
		{"SCRAM-SHA-512=[name=scram-admin,password=scram-user-secret]",
			addscram.Credential{Mechanism: sasl.ScramSHA512, Name: "scram-admin", Iterations: 4096, Password: pw("scram-user-secret")}},
		{"SCRAM-SHA-256=[name=bob,password=mypass]",
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "bob", Iterations: 4096, Password: pw("mypass")}},
		// Spaces inside a value are kept; the argument as a whole is trimmed.
		{"  SCRAM-SHA-256=[name=bob,password=my pass,iterations=8192]\t",
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "bob", Iterations: 8192, Password: pw("my pass")}},
		// Quotes around a value are dropped; a quoted salt is base64.
		{`SCRAM-SHA-512=[name=bob,password=my pass,salt="` + testSalt + `"]`,
			addscram.Credential{Mechanism: sasl.ScramSHA512, Name: "bob", Iterations: 4096, Password: pw("my pass"), Salt: salt}},
		{`SCRAM-SHA-256=[name=bob,password=my pass,iterations=8192,salt="` + testSalt + `"]`,
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "bob", Iterations: 8192, Password: pw("my pass"), Salt: salt}},
		{`SCRAM-SHA-256=[name=alice,salt="` + testSalt + `",saltedpassword="` + testSaltedPasswd + `"]`,
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "alice", Iterations: 4096, Salt: salt, SaltedPassword: salted}},
		// Empty and quoted-empty values; a key given twice keeps the last; trailing commas go.
		{`SCRAM-SHA-256=[name="",password=,name=x,,]`,
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "x", Iterations: 4096, Password: pw("")}},
		// A lone quote is not a quoted value; password wins over saltedpassword.
		{`SCRAM-SHA-256=[name=",password=p,saltedpassword=AA]`,
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: `"`, Iterations: 4096, Password: pw("p")}},
		// Padding is optional in Java's decoder.
		{`SCRAM-SHA-256=[name=a,password=p,salt=YWI]`,
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "a", Iterations: 4096, Password: pw("p"), Salt: []byte("ab")}},
		// Integer.parseInt takes a sign; the range is checked by Records.
		{`SCRAM-SHA-256=[name=a,password=p,iterations=+100]`,
			addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "a", Iterations: 100, Password: pw("p")}},
	} {
		got, err := addscram.Parse(tc.arg)
		if err != nil {
			t.Errorf("%s: %v", tc.arg, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.arg, got, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ arg, msg string }{
		{"SCRAM-SHA-512", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-512'"},
		{"SCRAM-SHA-UNSUPPORTED=[name=scram-admin,password=scram-user-secret]", "The add-scram mechanism SCRAM-SHA-UNSUPPORTED is not supported."},
		{"scram-sha-256=[name=a,password=b]", "The add-scram mechanism scram-sha-256 is not supported."},
		{"SCRAM-SHA-256=name=scram-admin,password=scram-user-secret", "Expected configuration string to start with ["},
		{"SCRAM-SHA-256=[name=scram-admin,password=scram-user-secret", "Expected configuration string to end with ]"},
		{"SCRAM-SHA-256=[password=mypass]", "You must supply 'name' to add-scram"},
		{"SCRAM-SHA-256=[name=bar]", "You must supply one of 'password' or 'saltedpassword' to add-scram"},
		{"SCRAM-SHA-256=[name=bob,password=mypass,unknown2=somethingelse,unknown=something]", "Unknown SCRAM configurations: unknown, unknown2"},
		{`SCRAM-SHA-256=[name=alice,saltedpassword="` + testSaltedPasswd + `"]`, "You must supply 'salt' with 'saltedpassword' to add-scram"},
		{"SCRAM-SHA-256=[name]", "No equals sign found in SCRAM component: name"},
		{"SCRAM-SHA-256=[]", "No equals sign found in SCRAM component: "},
		{"SCRAM-SHA-256=[name=a,,password=b]", "No equals sign found in SCRAM component: "},
		// Keys are not trimmed.
		{"SCRAM-SHA-256=[name=a, password=b]", "You must supply one of 'password' or 'saltedpassword' to add-scram"},
		{"SCRAM-SHA-256=[name=a,password=b,salt=!!]", "Failed to decode given salt: !!"},
		{"SCRAM-SHA-256=[name=a,password=b,salt=YWI=x]", "Failed to decode given salt: YWI=x"},
		{"SCRAM-SHA-256=[name=a,salt=YWI,saltedpassword=a_b]", "Failed to decode given saltedPassword: a_b"},
		{"SCRAM-SHA-256=[name=a,password=b,iterations=4k]", "Failed to parse iterations count: 4k"},
		{"SCRAM-SHA-256=[name=a,password=b,iterations=]", "Failed to parse iterations count: "},
	} {
		_, err := addscram.Parse(tc.arg)
		var e *addscram.Error
		if !errors.As(err, &e) || err.Error() != tc.msg {
			t.Errorf("%s: %v, want %q", tc.arg, err, tc.msg)
		}
	}
}

// login reports whether PLAIN with user and password passes against the records
// applied to an image.
func login(t *testing.T, recs []wire.MetadataRecord, user, password string) bool {
	t.Helper()
	im, _, err := metadata.Apply(metadata.Empty(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return sasltest.PlainLogin(t, sasltest.ImageCredentials(im), user, password)
}

func TestRecords(t *testing.T) {
	creds, err := addscram.ParseAll([]string{
		"SCRAM-SHA-256=[name=admin,password=admin-secret]",
		"SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]",
		`SCRAM-SHA-512=[name=alice,salt="` + testSalt + `",saltedpassword="` + testSaltedPasswd + `"]`,
	})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := addscram.Records(creds, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	r0, r1, r2 := recs[0].(*wire.UserScramCredentialRecord), recs[1].(*wire.UserScramCredentialRecord), recs[2].(*wire.UserScramCredentialRecord)
	if r0.Name != "admin" || r0.Mechanism != 1 || r0.Iterations != 4096 || r1.Mechanism != 2 || r1.Iterations != 8192 {
		t.Errorf("records %+v %+v", r0, r1)
	}
	// A drawn salt is Kafka's: 130 random bits in base 36, different each time.
	if !regexp.MustCompile(`^[0-9a-z]{1,26}$`).Match(r0.Salt) || bytes.Equal(r0.Salt, r1.Salt) {
		t.Errorf("drawn salts %q %q", r0.Salt, r1.Salt)
	}
	// The given salt and salted password are Kafka's test vector: the keys are the
	// formatter's from the salted password.
	want, _ := sasl.CredentialFromSaltedPassword(sasl.ScramSHA512, []byte("1lv4pdnw4fwq7notcxm0yy1k7q"), mustDecode(testSaltedPasswd), 4096)
	if string(r2.Salt) != "1lv4pdnw4fwq7notcxm0yy1k7q" || !bytes.Equal(r2.StoredKey, want.StoredKey) || !bytes.Equal(r2.ServerKey, want.ServerKey) {
		t.Errorf("alice's record %+v", r2)
	}
	// The bootstrapped user logs in with the password, and not with another.
	if !login(t, recs, "admin", "admin-secret") || login(t, recs, "admin", "admin-secreT") {
		t.Error("the bootstrapped admin's password does not decide its login")
	}
}

func TestRecordsRefuse(t *testing.T) {
	for _, tc := range []struct{ arg, msg string }{
		{"SCRAM-SHA-256=[name=a,password=p,iterations=4095]", "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"},
		{"SCRAM-SHA-512=[name=a,password=p,iterations=0]", "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_512"},
		{"SCRAM-SHA-512=[name=a,password=p,iterations=16385]", "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512"},
	} {
		c, err := addscram.Parse(tc.arg)
		if err != nil {
			t.Fatalf("%s: %v", tc.arg, err)
		}
		if _, err := addscram.Records([]addscram.Credential{c}, rand.Reader); err == nil || err.Error() != tc.msg {
			t.Errorf("%s: %v, want %q", tc.arg, err, tc.msg)
		}
	}
}

func TestRandomSaltIsJavas(t *testing.T) {
	// BigInteger(130, rnd) reads 17 bytes and keeps the low 2 bits of the first: these
	// bytes are 2^130 - 1, which base 36 writes as below.
	ones := bytes.Repeat([]byte{0xff}, 17)
	c := addscram.Credential{Mechanism: sasl.ScramSHA256, Name: "a", Iterations: 4096, Password: pw("p")}
	r, err := c.Record(bytes.NewReader(ones))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Salt); got != "1omfro7zwmumr3umxudzyj6scf" {
		t.Errorf("salt %q", got)
	}
	if _, err := c.Record(bytes.NewReader(ones[:3])); err == nil {
		t.Error("a short random source gave a salt")
	}
}
