package admin

import (
	"cmp"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/sasl"
	"github.com/exactq/exactq/wire"
)

// The SCRAM credential requests as Kafka 4.4 decides them: AlterUserScramCredentials on
// the controller (ScramControlManager.alterCredentials), DescribeUserScramCredentials on
// any broker from its image (ScramImage.describe). The cluster ALTER or DESCRIBE check is
// the broker's and comes first.

const duplicateUser = "A user credential cannot be altered twice in the same request"

// AlterUserScramCredentials decides an AlterUserScramCredentials request (r.Version set)
// against im: the records (one group, written atomically as Kafka does) and the
// response. Per user, as Kafka's controller decides:
//   - a user named twice (two deletions, or an upsertion after a deletion or upsertion of
//     the same user) is DUPLICATE_RESOURCE and none of its changes is made; a user whose
//     first change already failed keeps that error and its later changes are not looked
//     at;
//   - an empty name is UNACCEPTABLE_CREDENTIAL, a mechanism other than 1 (SCRAM-SHA-256)
//     or 2 (SCRAM-SHA-512) UNSUPPORTED_SASL_MECHANISM;
//   - a deletion of a credential im lacks is RESOURCE_NOT_FOUND;
//   - an upsertion with fewer than 4096 or more than 16384 iterations is
//     UNACCEPTABLE_CREDENTIAL ("Too few iterations", "Too many iterations").
//
// An upsertion stores the salt, the iterations and the StoredKey and ServerKey derived
// from the salted password (ScramFormatter: H(HMAC(salted, "Client Key")) and
// HMAC(salted, "Server Key")); a deletion writes RemoveUserScramCredentialRecord. Results
// list the deletions made, then the upsertions made, then the errors, each in request
// order (Kafka's follow hash maps' order; clients match results by user).
func AlterUserScramCredentials(im *metadata.Image, r *kmsg.AlterUserSCRAMCredentialsRequest) ([]wire.MetadataRecord, *kmsg.AlterUserSCRAMCredentialsResponse) {
	type failure struct {
		code *kerr.Error
		msg  string
	}
	errs := map[string]failure{}
	var errOrder []string
	fail := func(user string, code *kerr.Error, msg string) {
		errs[user] = failure{code, msg}
		errOrder = append(errOrder, user)
	}
	deletions := map[string]int{} // user → index in r.Deletions
	upserts := map[string]int{}   // user → index in r.Upsertions
	for i, d := range r.Deletions {
		if _, failed := errs[d.Name]; failed {
			continue
		}
		if _, dup := deletions[d.Name]; dup {
			delete(deletions, d.Name)
			fail(d.Name, kerr.DuplicateResource, duplicateUser)
			continue
		}
		if code, msg := checkScramUser(d.Name, d.Mechanism); code != nil {
			fail(d.Name, code, msg)
			continue
		}
		if _, ok := im.Scram[metadata.ScramKey{User: d.Name, Mechanism: d.Mechanism}]; !ok {
			fail(d.Name, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			continue
		}
		deletions[d.Name] = i
	}
	for i, u := range r.Upsertions {
		if _, failed := errs[u.Name]; failed {
			continue
		}
		_, delDup := deletions[u.Name]
		_, upDup := upserts[u.Name]
		if delDup || upDup {
			delete(deletions, u.Name)
			delete(upserts, u.Name)
			fail(u.Name, kerr.DuplicateResource, duplicateUser)
			continue
		}
		if code, msg := checkScramUser(u.Name, u.Mechanism); code != nil {
			fail(u.Name, code, msg)
			continue
		}
		switch {
		case u.Iterations < sasl.MinScramIterations:
			fail(u.Name, kerr.UnacceptableCredential, sasl.ErrTooFewIterations.Error())
			continue
		case u.Iterations > sasl.MaxScramIterations:
			fail(u.Name, kerr.UnacceptableCredential, sasl.ErrTooManyIterations.Error())
			continue
		}
		upserts[u.Name] = i
	}

	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	resp.Version = r.Version
	ok := func(user string) {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		resp.Results = append(resp.Results, res)
	}
	var recs []wire.MetadataRecord
	for _, i := range slices.Sorted(maps.Values(deletions)) {
		d := r.Deletions[i]
		recs = append(recs, versioned(&wire.RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism}))
		ok(d.Name)
	}
	for _, i := range slices.Sorted(maps.Values(upserts)) {
		u := r.Upsertions[i]
		cred, err := sasl.CredentialFromSaltedPassword(sasl.ScramMechanismName(u.Mechanism), u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil { // checked above: a mechanism and iterations it accepts
			fail(u.Name, kerr.UnknownServerError, err.Error())
			continue
		}
		recs = append(recs, versioned(&wire.UserScramCredentialRecord{Name: u.Name, Mechanism: u.Mechanism, Salt: cred.Salt,
			StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations}))
		ok(u.Name)
	}
	for _, user := range errOrder {
		f := errs[user]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = user, f.code.Code, &f.msg
		resp.Results = append(resp.Results, res)
	}
	return recs, resp
}

// checkScramUser is Kafka's validateScramUsernameAndMechanism.
func checkScramUser(user string, mechanism int8) (*kerr.Error, string) {
	switch {
	case user == "":
		return kerr.UnacceptableCredential, "Username must not be empty"
	case mechanism != metadata.ScramSHA256 && mechanism != metadata.ScramSHA512:
		return kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"
	}
	return nil, ""
}

// DescribeUserScramCredentials answers a DescribeUserScramCredentials request (r.Version
// set) from im, as ScramImage.describe: without users, every user with a credential
// (in name order); otherwise each named user once, in the order first named, with
// DUPLICATE_RESOURCE for a user named more than once and RESOURCE_NOT_FOUND for one
// without credentials, with Kafka's messages. A user's credentials are listed by
// mechanism (1, then 2) with their iterations; salts and keys are never answered.
func DescribeUserScramCredentials(im *metadata.Image, r *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	byUser := map[string][]metadata.ScramKey{}
	for k := range im.Scram {
		byUser[k.User] = append(byUser[k.User], k)
	}
	var users []string
	dup := map[string]bool{}
	if len(r.Users) == 0 {
		users = slices.Sorted(maps.Keys(byUser))
	} else {
		for _, u := range r.Users {
			if _, seen := dup[u.Name]; seen {
				dup[u.Name] = true
				continue
			}
			dup[u.Name] = false
			users = append(users, u.Name)
		}
	}
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.Version = r.Version
	for _, user := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		keys := byUser[user]
		switch {
		case dup[user]:
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request: " + user
			res.ErrorCode, res.ErrorMessage = kerr.DuplicateResource.Code, &msg
		case len(keys) == 0:
			msg := "Attempt to describe a user credential that does not exist: " + user
			res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, &msg
		default:
			slices.SortFunc(keys, func(a, b metadata.ScramKey) int { return cmp.Compare(a.Mechanism, b.Mechanism) })
			for _, k := range keys {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = k.Mechanism, im.Scram[k].Iterations
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}
