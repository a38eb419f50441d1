package admin_test

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/sasl/sasltest"
)

func upsertion(user string, mech int8, iterations int32, password string) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mech, iterations
	u.Salt = []byte("salt-of-" + user)
	h := sha256.New
	if mech == metadata.ScramSHA512 {
		h = sha512.New
	}
	// What a client sends: Hi(password, salt, i), RFC 5802's SaltedPassword.
	size := map[bool]int{true: 64, false: 32}[mech == metadata.ScramSHA512]
	u.SaltedPassword, _ = pbkdf2.Key(func() hash.Hash { return h() }, password, u.Salt, int(iterations), size)
	return u
}

func deletion(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mech
	return d
}

func scramReq(ds []kmsg.AlterUserSCRAMCredentialsRequestDeletion, us ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) *kmsg.AlterUserSCRAMCredentialsRequest {
	r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	r.Deletions, r.Upsertions = ds, us
	return r
}

func alterResults(resp *kmsg.AlterUserSCRAMCredentialsResponse) map[string]int16 {
	out := map[string]int16{}
	for _, r := range resp.Results {
		if _, dup := out[r.User]; dup {
			out[r.User] = -1 // a user answered twice
			continue
		}
		out[r.User] = r.ErrorCode
	}
	return out
}

func plainLogin(t *testing.T, im *metadata.Image, user, password string) bool {
	t.Helper()
	return sasltest.PlainLogin(t, sasltest.ImageCredentials(im), user, password)
}

func TestAlterUserScramCredentials(t *testing.T) {
	im := metadata.Empty()
	recs, resp := admin.AlterUserScramCredentials(im, scramReq(nil,
		upsertion("alice", metadata.ScramSHA512, 4096, "alice-secret"),
		upsertion("bob", metadata.ScramSHA256, 8192, "bob-secret"),
		upsertion("weak", metadata.ScramSHA256, 4095, "x"),
		upsertion("slow", metadata.ScramSHA256, 16385, "x"),
		upsertion("", metadata.ScramSHA256, 4096, "x"),
		upsertion("odd", 3, 4096, "x"),
	))
	want := map[string]int16{"alice": 0, "bob": 0, "weak": kerr.UnacceptableCredential.Code, "slow": kerr.UnacceptableCredential.Code,
		"": kerr.UnacceptableCredential.Code, "odd": kerr.UnsupportedSaslMechanism.Code}
	if got := alterResults(resp); !maps.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	msgs := map[string]string{}
	for _, r := range resp.Results {
		if r.ErrorMessage != nil {
			msgs[r.User] = *r.ErrorMessage
		}
	}
	if msgs["weak"] != "Too few iterations" || msgs["slow"] != "Too many iterations" || msgs[""] != "Username must not be empty" ||
		msgs["odd"] != "Unknown SCRAM mechanism" {
		t.Errorf("messages %q", msgs)
	}
	im = applyRecs(t, im, recs)
	if len(im.Scram) != 2 {
		t.Fatalf("credentials %v", im.Scram)
	}
	if c := im.Scram[metadata.ScramKey{User: "bob", Mechanism: metadata.ScramSHA256}]; c.Iterations != 8192 || string(c.Salt) != "salt-of-bob" {
		t.Errorf("bob's credential %+v", c)
	}
	// The stored keys are those the password derives: PLAIN (checked against them)
	// accepts the password and nothing else.
	if !plainLogin(t, im, "alice", "alice-secret") || !plainLogin(t, im, "bob", "bob-secret") {
		t.Error("a created credential does not authenticate its password")
	}
	if plainLogin(t, im, "alice", "bob-secret") {
		t.Error("alice authenticates with bob's password")
	}

	// Duplicates: a user deleted twice, deleted and upserted, upserted twice: DUPLICATE
	// and nothing done for them; a deletion of what is missing: RESOURCE_NOT_FOUND; a
	// user whose first change failed keeps that error.
	recs, resp = admin.AlterUserScramCredentials(im, scramReq(
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{
			deletion("alice", metadata.ScramSHA512), deletion("alice", metadata.ScramSHA512),
			deletion("bob", metadata.ScramSHA256),
			deletion("carol", metadata.ScramSHA256),
			deletion("bob", 9), // bob already listed: DUPLICATE, not UNSUPPORTED
		},
		upsertion("bob", metadata.ScramSHA512, 4096, "b2"),
		upsertion("dave", metadata.ScramSHA256, 4096, "d"), upsertion("dave", metadata.ScramSHA512, 4096, "d"),
		upsertion("carol", metadata.ScramSHA256, 4096, "c"),
		upsertion("erin", metadata.ScramSHA256, 4096, "e"),
	))
	want = map[string]int16{"alice": kerr.DuplicateResource.Code, "bob": kerr.DuplicateResource.Code, "carol": kerr.ResourceNotFound.Code,
		"dave": kerr.DuplicateResource.Code, "erin": 0}
	if got := alterResults(resp); !maps.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	im = applyRecs(t, im, recs)
	if len(im.Scram) != 3 || !plainLogin(t, im, "alice", "alice-secret") || !plainLogin(t, im, "erin", "e") {
		t.Fatalf("after the duplicates: %v", im.Scram)
	}

	// A deletion removes the credential; the user no longer authenticates.
	recs, resp = admin.AlterUserScramCredentials(im, scramReq([]kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", metadata.ScramSHA512)}))
	if resp.Results[0].ErrorCode != 0 || len(recs) != 1 {
		t.Fatalf("delete: %+v", resp.Results)
	}
	im = applyRecs(t, im, recs)
	if plainLogin(t, im, "alice", "alice-secret") {
		t.Error("a deleted credential authenticates")
	}
}

func TestDescribeUserScramCredentials(t *testing.T) {
	recs, _ := admin.AlterUserScramCredentials(metadata.Empty(), scramReq(nil,
		upsertion("bob", metadata.ScramSHA512, 8192, "b"), upsertion("alice", metadata.ScramSHA256, 4096, "a")))
	im := applyRecs(t, metadata.Empty(), recs)
	recs, _ = admin.AlterUserScramCredentials(im, scramReq(nil, upsertion("bob", metadata.ScramSHA256, 5000, "b")))
	im = applyRecs(t, im, recs)

	all := admin.DescribeUserScramCredentials(im, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
	if len(all.Results) != 2 || all.Results[0].User != "alice" || all.Results[1].User != "bob" {
		t.Fatalf("all users: %+v", all.Results)
	}
	bob := all.Results[1].CredentialInfos
	if len(bob) != 2 || bob[0].Mechanism != 1 || bob[0].Iterations != 5000 || bob[1].Mechanism != 2 || bob[1].Iterations != 8192 {
		t.Errorf("bob's credentials %+v", bob)
	}

	r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range []string{"carol", "bob", "alice", "bob"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		r.Users = append(r.Users, u)
	}
	resp := admin.DescribeUserScramCredentials(im, r)
	if len(resp.Results) != 3 {
		t.Fatalf("results %+v", resp.Results)
	}
	carol, dupBob, alice := resp.Results[0], resp.Results[1], resp.Results[2]
	if carol.User != "carol" || carol.ErrorCode != kerr.ResourceNotFound.Code ||
		*carol.ErrorMessage != "Attempt to describe a user credential that does not exist: carol" {
		t.Errorf("carol %+v", carol)
	}
	if dupBob.User != "bob" || dupBob.ErrorCode != kerr.DuplicateResource.Code || len(dupBob.CredentialInfos) != 0 ||
		*dupBob.ErrorMessage != "Cannot describe SCRAM credentials for the same user twice in a single request: bob" {
		t.Errorf("bob named twice %+v", dupBob)
	}
	if alice.ErrorCode != 0 || len(alice.CredentialInfos) != 1 || alice.CredentialInfos[0].Iterations != 4096 {
		t.Errorf("alice %+v", alice)
	}
}
