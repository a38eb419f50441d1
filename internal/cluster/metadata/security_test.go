package metadata

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
	"pgregory.net/rapid"
)

// genSecurityRecord is an ACL or SCRAM record, sometimes one the image refuses (a removal
// of what is not there, an id already used, a mechanism or pattern type no record has).
func genSecurityRecord(t *rapid.T, im *Image) wire.MetadataRecord {
	id := acl.ID{byte(rapid.IntRange(1, 6).Draw(t, "aclID"))}
	user := rapid.SampledFrom([]string{"alice", "bob"}).Draw(t, "user")
	mech := rapid.SampledFrom([]int8{ScramSHA256, ScramSHA512, 0}).Draw(t, "mech")
	switch rapid.IntRange(0, 3).Draw(t, "security kind") {

	case 0:
		return &wire.AccessControlEntryRecord{ID: id, ResourceType: int8(rapid.SampledFrom([]acl.ResourceType{acl.ResourceTopic, acl.ResourceGroup, acl.ResourceAny}).Draw(t, "rt")),
			ResourceName: rapid.SampledFrom([]string{"a", "ab", "*"}).Draw(t, "rn"),
			PatternType:  int8(rapid.SampledFrom([]acl.PatternType{acl.PatternLiteral, acl.PatternPrefixed, acl.PatternMatch}).Draw(t, "pt")),
			Principal:    "User:" + user, Host: "*", Operation: int8(acl.OpRead), PermissionType: int8(rapid.SampledFrom([]acl.Permission{acl.Allow, acl.Deny}).Draw(t, "perm"))}
	case 1:
		if ids := slices.SortedFunc(maps.Keys(im.ACLs), func(a, b acl.ID) int { return int(a[0]) - int(b[0]) }); len(ids) > 0 && rapid.IntRange(0, 4).Draw(t, "unknown id") > 0 {
			id = rapid.SampledFrom(ids).Draw(t, "existing")
		}
		return &wire.RemoveAccessControlEntryRecord{ID: id}
	case 2:
		return &wire.UserScramCredentialRecord{Name: user, Mechanism: mech, Salt: []byte{byte(rapid.IntRange(0, 3).Draw(t, "salt"))},
			StoredKey: []byte("sk"), ServerKey: []byte("svk"), Iterations: 4096}
	default:
		return &wire.RemoveUserScramCredentialRecord{Name: user, Mechanism: mech}
	}
}

// checkSecurityDelta: the delta's ACL changes, applied to the index of Before's ACLs,
// give the index of After's; its SCRAM changes are exactly the keys that differ.
func checkSecurityDelta(t *rapid.T, d *Delta) {
	ix, err := d.Before.ACLIndex()
	if err != nil {
		t.Fatal(err)
	}
	added, removed := d.ACLChanges()
	ix, err = ix.Apply(added, removed)
	if err != nil {
		t.Fatalf("the delta's ACL changes do not apply to the index: %v", err)
	}
	want, err := d.After.ACLIndex()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ix.All(), want.All()) {
		t.Fatalf("index after the delta %v, the image's %v", ix.All(), want.All())
	}
	n := 0
	keys := map[ScramKey]ScramCredential{}
	maps.Copy(keys, d.Before.Scram)
	maps.Copy(keys, d.After.Scram)
	for k := range keys {
		b, okB := d.Before.Scram[k]
		a, okA := d.After.Scram[k]
		if okB != okA || string(a.Salt) != string(b.Salt) {
			n++
		}
	}
	if len(d.ScramChanges()) != n {
		t.Fatalf("delta has %d SCRAM changes, the images differ in %d", len(d.ScramChanges()), n)
	}
}

// TestSecurityRules: KRaft's replay rules for ACL and SCRAM records, one by one.
func TestSecurityRules(t *testing.T) {
	id := acl.ID{1}
	add := &wire.AccessControlEntryRecord{ID: id, ResourceType: int8(acl.ResourceTopic), ResourceName: "orders-",
		PatternType: int8(acl.PatternPrefixed), Principal: "User:alice", Host: "*", Operation: int8(acl.OpWrite), PermissionType: int8(acl.Allow)}
	cred := &wire.UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("v"), Iterations: 8192}
	im, d, err := Apply(Empty(), []wire.MetadataRecord{add, cred})
	if err != nil {
		t.Fatal(err)
	}
	if a := im.ACLs[id]; a.ResourceName != "orders-" || a.PatternType != acl.PatternPrefixed || a.Permission != acl.Allow {
		t.Fatalf("ACL %+v", a)
	}
	if added, removed := d.ACLChanges(); len(added) != 1 || len(removed) != 0 {
		t.Fatalf("ACLChanges %v %v", added, removed)
	}
	if c := im.Scram[ScramKey{"alice", ScramSHA512}]; c.Iterations != 8192 || string(c.Salt) != "s" {
		t.Fatalf("credential %+v", c)
	}
	ix, err := im.ACLIndex()
	if err != nil {
		t.Fatal(err)
	}
	authz := acl.New(acl.Config{}, ix)
	alice := acl.Client{Principal: acl.Principal{Type: "User", Name: "alice"}, Host: "10.0.0.1"}
	if !authz.Allowed(alice, acl.Action{Operation: acl.OpWrite, ResourceType: acl.ResourceTopic, ResourceName: "orders-eu"}) {
		t.Fatal("the image's ACL does not allow what it says")
	}

	// A credential is replaced by a new one for the same user and mechanism.
	cred2 := *cred
	cred2.Iterations = 4096
	im2, d, err := Apply(im, []wire.MetadataRecord{&cred2})
	if err != nil || im2.Scram[ScramKey{"alice", ScramSHA512}].Iterations != 4096 || len(d.ScramChanges()) != 1 {
		t.Fatalf("replace: %v %+v", err, im2.Scram)
	}
	for name, r := range map[string]wire.MetadataRecord{
		"ACL id reused":                add,
		"remove an unknown ACL":        &wire.RemoveAccessControlEntryRecord{ID: acl.ID{2}},
		"ACL with resource type ANY":   &wire.AccessControlEntryRecord{ID: acl.ID{3}, ResourceType: int8(acl.ResourceAny), PatternType: int8(acl.PatternLiteral)},
		"ACL with pattern MATCH":       &wire.AccessControlEntryRecord{ID: acl.ID{3}, ResourceType: int8(acl.ResourceTopic), PatternType: int8(acl.PatternMatch)},
		"remove an unknown credential": &wire.RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256},
		"credential with mechanism 0":  &wire.UserScramCredentialRecord{Name: "bob"},
		"credential with mechanism 3":  &wire.UserScramCredentialRecord{Name: "bob", Mechanism: 3},
	} {
		if _, _, err := Apply(im, []wire.MetadataRecord{r}); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	im3, _, err := Apply(im, []wire.MetadataRecord{&wire.RemoveAccessControlEntryRecord{ID: id},
		&wire.RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512}})
	if err != nil || len(im3.ACLs) != 0 || len(im3.Scram) != 0 {
		t.Fatalf("removal: %v, %v, %v", err, im3.ACLs, im3.Scram)
	}
	if len(im.ACLs) != 1 || len(im.Scram) != 1 {
		t.Fatal("Apply changed the image it was applied to")
	}
	back, err := Replay(im.Records())
	if err != nil || !maps.Equal(back.ACLs, im.ACLs) || !reflect.DeepEqual(back.Scram, im.Scram) {
		t.Fatalf("checkpoint replay: %v, ACLs %v, credentials %v", err, back.ACLs, back.Scram)
	}
}
