package metadata

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

// ScramKey names one SCRAM credential: a user and a mechanism (1 SCRAM-SHA-256,
// 2 SCRAM-SHA-512, Kafka's ScramMechanism types).
type ScramKey struct {
	User      string
	Mechanism int8
}

// ScramCredential is a user's credential for one mechanism as Kafka stores it: never the
// password, only the salt, the iteration count and the two keys derived from them.
type ScramCredential struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// SCRAM mechanisms a UserScramCredentialRecord may name.
const (
	ScramSHA256 int8 = 1
	ScramSHA512 int8 = 2
)

func (b *builder) acls() map[acl.ID]acl.ACL {
	m := owned(&b.im.ACLs, &b.ownACLs)
	if m == nil {
		m = map[acl.ID]acl.ACL{}
		b.im.ACLs = m
	}
	return m
}

func (b *builder) scram() map[ScramKey]ScramCredential {
	m := owned(&b.im.Scram, &b.ownScram)
	if m == nil {
		m = map[ScramKey]ScramCredential{}
		b.im.Scram = m
	}
	return m
}

// applySecurity applies the ACL and SCRAM records with the rules KRaft replays them by
// (AclControlManager, ScramControlManager and the broker's AclCache): an ACL id is added
// once and removed only if present; a credential is set (replacing the user's credential
// for that mechanism) or removed only if present. It reports false for other records.
func (b *builder) applySecurity(r wire.MetadataRecord) (bool, error) {
	switch r := r.(type) {
	case *wire.AccessControlEntryRecord:
		a := acl.ACL{ID: r.ID, Binding: acl.Binding{
			ResourceType: acl.ResourceType(r.ResourceType), ResourceName: r.ResourceName,
			PatternType: acl.PatternType(r.PatternType), Principal: r.Principal, Host: r.Host,
			Operation: acl.Operation(r.Operation), Permission: acl.Permission(r.PermissionType)}}
		if _, ok := b.im.ACLs[a.ID]; ok {
			return true, fmt.Errorf("ACL %x already exists", a.ID)
		}
		if _, err := acl.NewIndex([]acl.ACL{a}); err != nil {
			return true, err
		}
		b.acls()[a.ID] = a
		b.d.acls[a.ID] = struct{}{}
	case *wire.RemoveAccessControlEntryRecord:
		if _, ok := b.im.ACLs[r.ID]; !ok {
			return true, fmt.Errorf("no ACL %x", r.ID)
		}
		delete(b.acls(), r.ID)
		b.d.acls[r.ID] = struct{}{}
	case *wire.UserScramCredentialRecord:
		if r.Mechanism != ScramSHA256 && r.Mechanism != ScramSHA512 {
			return true, fmt.Errorf("SCRAM mechanism %d", r.Mechanism)
		}
		k := ScramKey{r.Name, r.Mechanism}
		b.scram()[k] = ScramCredential{Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations}
		b.d.scram[k] = struct{}{}
	case *wire.RemoveUserScramCredentialRecord:
		k := ScramKey{r.Name, r.Mechanism}
		if _, ok := b.im.Scram[k]; !ok {
			return true, fmt.Errorf("no SCRAM credential %s/%d to remove", r.Name, r.Mechanism)
		}
		delete(b.scram(), k)
		b.d.scram[k] = struct{}{}
	default:
		return false, nil
	}
	return true, nil
}

// ACLChanges returns the ACLs the delta added and removed (a re-added id is both), in id
// order: exactly the arguments of the broker's acl.Index.Apply.
func (d *Delta) ACLChanges() (added, removed []acl.ACL) {
	for _, id := range slices.SortedFunc(maps.Keys(d.acls), func(a, b acl.ID) int { return bytes.Compare(a[:], b[:]) }) {
		before, okB := d.Before.ACLs[id]
		after, okA := d.After.ACLs[id]
		if okB && okA && before == after {
			continue
		}
		if okB {
			removed = append(removed, before)
		}
		if okA {
			added = append(added, after)
		}
	}
	return added, removed
}

// ScramChanges returns the credentials that differ between Before and After (set,
// replaced or removed), in key order.
func (d *Delta) ScramChanges() []ScramKey {
	var out []ScramKey
	for _, k := range slices.SortedFunc(maps.Keys(d.scram), compareScramKeys) {
		b, okB := d.Before.Scram[k]
		a, okA := d.After.Scram[k]
		if okB != okA || !reflect.DeepEqual(b, a) {
			out = append(out, k)
		}
	}
	return out
}

func compareScramKeys(a, b ScramKey) int {
	return cmp.Or(strings.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
}

// ACLIndex builds the authorizer's index of the image's ACLs (a broker does it once at
// start, then applies ACLChanges of each delta).
func (im *Image) ACLIndex() (*acl.Index, error) {
	return acl.NewIndex(slices.Collect(maps.Values(im.ACLs)))
}

// securityRecords are the image's ACLs (by id) and credentials (by user, mechanism) as
// records, for Records.
func (im *Image) securityRecords(add func(wire.MetadataRecord)) {
	for _, id := range slices.SortedFunc(maps.Keys(im.ACLs), func(a, b acl.ID) int { return bytes.Compare(a[:], b[:]) }) {
		a := im.ACLs[id]
		add(&wire.AccessControlEntryRecord{ID: a.ID, ResourceType: int8(a.ResourceType), ResourceName: a.ResourceName,
			PatternType: int8(a.PatternType), Principal: a.Principal, Host: a.Host, Operation: int8(a.Operation),
			PermissionType: int8(a.Permission)})
	}
	for _, k := range slices.SortedFunc(maps.Keys(im.Scram), compareScramKeys) {
		c := im.Scram[k]
		add(&wire.UserScramCredentialRecord{Name: k.User, Mechanism: k.Mechanism, Salt: c.Salt, StoredKey: c.StoredKey,
			ServerKey: c.ServerKey, Iterations: c.Iterations})
	}
}
