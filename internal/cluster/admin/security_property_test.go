package admin_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

// The vocabulary of the property tests: small, so creations collide and filters match.
var (
	propResources  = []acl.ResourceType{acl.ResourceTopic, acl.ResourceGroup, acl.ResourceCluster, acl.ResourceTransactionalID}
	propACLNames   = []string{"a", "ab", "abc", "b", "*"}
	propPrincipals = []string{"User:alice", "User:bob", "User:*", "alice"} // the last has no colon: refused
	propHosts      = []string{"*", "10.0.0.1", "10.0.0.0/8", ""}           // the last is empty: refused
	propOps        = []acl.Operation{acl.OpAll, acl.OpRead, acl.OpWrite, acl.OpDescribe, acl.OpAlter}
	propPerms      = []acl.Permission{acl.Allow, acl.Deny}
)

func genBinding(rt *rapid.T) acl.Binding {
	b := acl.Binding{
		ResourceType: rapid.SampledFrom(propResources).Draw(rt, "type"),
		ResourceName: rapid.SampledFrom(propACLNames).Draw(rt, "name"),
		PatternType:  rapid.SampledFrom([]acl.PatternType{acl.PatternLiteral, acl.PatternPrefixed}).Draw(rt, "pattern"),
		Principal:    rapid.SampledFrom(propPrincipals).Draw(rt, "principal"),
		Host:         rapid.SampledFrom(propHosts).Draw(rt, "host"),
		Operation:    rapid.SampledFrom(propOps).Draw(rt, "op"),
		Permission:   rapid.SampledFrom(propPerms).Draw(rt, "perm"),
	}
	if b.ResourceType == acl.ResourceCluster {
		b.ResourceName = acl.ClusterName
	}
	return b
}

// validBinding is the model's rule for which generated bindings Kafka stores.
func validBinding(b acl.Binding) bool {
	return strings.Contains(b.Principal, ":") && b.Host != ""
}

// genFilter draws a filter over the vocabulary, with every field sometimes a wildcard.
func genFilter(rt *rapid.T) acl.Filter {
	f := acl.Filter{
		ResourceType: rapid.SampledFrom(append([]acl.ResourceType{acl.ResourceAny}, propResources...)).Draw(rt, "f type"),
		PatternType:  rapid.SampledFrom([]acl.PatternType{acl.PatternAny, acl.PatternMatch, acl.PatternLiteral, acl.PatternPrefixed}).Draw(rt, "f pattern"),
		Operation:    rapid.SampledFrom(append([]acl.Operation{acl.OpAny}, propOps...)).Draw(rt, "f op"),
		Permission:   rapid.SampledFrom([]acl.Permission{acl.PermissionAny, acl.Allow, acl.Deny}).Draw(rt, "f perm"),
	}
	if rapid.Bool().Draw(rt, "f named") {
		f.ResourceName = strp(rapid.SampledFrom(append([]string{acl.ClusterName}, propACLNames...)).Draw(rt, "f name"))
	}
	if rapid.Bool().Draw(rt, "f principal set") {
		f.Principal = strp(rapid.SampledFrom(propPrincipals[:3]).Draw(rt, "f principal"))
	}
	if rapid.Bool().Draw(rt, "f host set") {
		f.Host = strp(rapid.SampledFrom(propHosts[:3]).Draw(rt, "f host"))
	}
	return f
}

// modelMatches is the filter rule written out plainly (AclBindingFilter.matches): ANY
// and nil match everything, MATCH selects the patterns that apply to the name.
func modelMatches(f acl.Filter, b acl.Binding) bool {
	if f.ResourceType != acl.ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.ResourceName != nil {
		n := *f.ResourceName
		switch f.PatternType {
		case acl.PatternAny:
			if n != b.ResourceName {
				return false
			}
		case acl.PatternMatch:
			applies := (b.PatternType == acl.PatternLiteral && (b.ResourceName == n || b.ResourceName == "*")) ||
				(b.PatternType == acl.PatternPrefixed && strings.HasPrefix(n, b.ResourceName))
			if !applies {
				return false
			}
		default:
			if f.PatternType != b.PatternType || n != b.ResourceName {
				return false
			}
		}
	} else if f.PatternType != acl.PatternAny && f.PatternType != acl.PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	return (f.Principal == nil || *f.Principal == b.Principal) && (f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == acl.OpAny || f.Operation == b.Operation) && (f.Permission == acl.PermissionAny || f.Permission == b.Permission)
}

func bindingsOf(acls []acl.ACL) map[acl.Binding]bool {
	out := map[acl.Binding]bool{}
	for _, a := range acls {
		out[a.Binding] = true
	}
	return out
}

// TestAclRequestsMatchModel: random CreateAcls and DeleteAcls requests, each applied
// through its records to the image, against a model that is a set of bindings. After
// every request the index built from the image, the broker's index kept by the deltas'
// ACLChanges, and DescribeAcls of everything hold exactly the model's bindings, and
// every DeleteAcls result lists exactly what its filter matched in the model.
func TestAclRequestsMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		im := metadata.Empty()
		model := map[acl.Binding]bool{}
		kept := acl.Empty()
		var n uint16
		ids := func() acl.ID { n++; return acl.ID{0, byte(n >> 8), byte(n)} }
		for range rapid.IntRange(1, 30).Draw(rt, "requests") {
			var recs []wire.MetadataRecord
			if rapid.IntRange(0, 2).Draw(rt, "delete?") > 0 {
				bs := rapid.SliceOfN(rapid.Custom(genBinding), 1, 6).Draw(rt, "creations")
				r := kmsg.NewPtrCreateACLsRequest()
				r.Version = 3
				for _, b := range bs {
					r.Creations = append(r.Creations, creation(b.ResourceType, b.ResourceName, b.PatternType, b.Principal, b.Host, b.Operation, b.Permission))
				}
				var resp *kmsg.CreateACLsResponse
				var err error
				recs, resp, err = admin.CreateAcls(im, r, ids)
				if err != nil {
					rt.Fatal(err)
				}
				for i, b := range bs {
					if got, want := resp.Results[i].ErrorCode == 0, validBinding(b); got != want {
						rt.Fatalf("creation %v: error %d, valid %v", b, resp.Results[i].ErrorCode, want)
					}
					if validBinding(b) {
						model[b] = true
					}
				}
			} else {
				fs := rapid.SliceOfN(rapid.Custom(genFilter), 1, 3).Draw(rt, "filters")
				r := kmsg.NewPtrDeleteACLsRequest()
				r.Version = 3
				for _, f := range fs {
					kf := kmsg.NewDeleteACLsRequestFilter()
					kf.ResourceType, kf.ResourceName, kf.ResourcePatternType = f.ResourceType, f.ResourceName, f.PatternType
					kf.Principal, kf.Host, kf.Operation, kf.PermissionType = f.Principal, f.Host, f.Operation, f.Permission
					r.Filters = append(r.Filters, kf)
				}
				var resp *kmsg.DeleteACLsResponse
				var err error
				recs, resp, err = admin.DeleteAcls(im, r)
				if err != nil {
					rt.Fatal(err)
				}
				gone := map[acl.Binding]bool{}
				for i, f := range fs {
					want := map[acl.Binding]bool{}
					for b := range model {
						if modelMatches(f, b) {
							want[b] = true
							gone[b] = true
						}
					}
					got := map[acl.Binding]bool{}
					for _, m := range resp.Results[i].MatchingACLs {
						got[acl.Binding{ResourceType: m.ResourceType, ResourceName: m.ResourceName, PatternType: m.ResourcePatternType,
							Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType}] = true
					}
					if resp.Results[i].ErrorCode != 0 || !maps.Equal(got, want) || len(resp.Results[i].MatchingACLs) != len(want) {
						rt.Fatalf("filter %+v: error %d, deleted %v, model matches %v", f, resp.Results[i].ErrorCode, got, want)
					}
				}
				for b := range gone {
					delete(model, b)
				}
			}
			if len(recs) > 0 {
				next, delta, err := metadata.ApplyEntry(im, 0, recs)
				if err != nil {
					rt.Fatalf("records do not apply: %v", err)
				}
				added, removed := delta.ACLChanges()
				if kept, err = kept.Apply(added, removed); err != nil {
					rt.Fatalf("the delta does not apply to the kept index: %v", err)
				}
				im = next
			}
			built, err := im.ACLIndex()
			if err != nil {
				rt.Fatal(err)
			}
			if got := bindingsOf(built.All()); !maps.Equal(got, model) || built.Len() != len(model) {
				rt.Fatalf("index from the image %v, model %v", slices.Collect(maps.Keys(got)), slices.Collect(maps.Keys(model)))
			}
			if got := bindingsOf(kept.All()); !maps.Equal(got, model) || kept.Len() != len(model) {
				rt.Fatalf("index kept by deltas %v, model %v", got, model)
			}
			d := kmsg.NewPtrDescribeACLsRequest()
			d.Version = 3
			d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = acl.ResourceAny, acl.PatternAny, acl.OpAny, acl.PermissionAny
			desc, err := admin.DescribeAcls(im, d)
			if err != nil {
				rt.Fatal(err)
			}
			described := map[acl.Binding]bool{}
			count := 0
			for _, res := range desc.Resources {
				for _, e := range res.ACLs {
					described[acl.Binding{ResourceType: res.ResourceType, ResourceName: res.ResourceName, PatternType: res.ResourcePatternType,
						Principal: e.Principal, Host: e.Host, Operation: e.Operation, Permission: e.PermissionType}] = true
					count++
				}
			}
			if !maps.Equal(described, model) || count != len(model) {
				rt.Fatalf("described %v, model %v", described, model)
			}
		}
	})
}

// TestScramRequestsMatchModel: random AlterUserScramCredentials requests applied through
// their records, against a model of Kafka's per-user rule (a user's first change decides
// unless a later one names it again; then DUPLICATE_RESOURCE and nothing for it). The
// image's credentials and DescribeUserScramCredentials agree with the model after each.
func TestScramRequestsMatchModel(t *testing.T) {
	users := []string{"alice", "bob", "carol", ""}
	iterations := []int32{4096, 8192, 16384, 4095, 16385}
	mechs := []int8{metadata.ScramSHA256, metadata.ScramSHA512, 0}
	rapid.Check(t, func(rt *rapid.T) {
		im := metadata.Empty()
		model := map[metadata.ScramKey]int32{} // credential → iterations
		for range rapid.IntRange(1, 12).Draw(rt, "requests") {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			type op struct {
				user  string
				mech  int8
				iters int32 // 0 for a deletion
			}
			var ops []op
			for range rapid.IntRange(0, 4).Draw(rt, "deletions") {
				d := deletion(rapid.SampledFrom(users).Draw(rt, "user"), rapid.SampledFrom(mechs).Draw(rt, "mech"))
				r.Deletions = append(r.Deletions, d)
				ops = append(ops, op{d.Name, d.Mechanism, 0})
			}
			for range rapid.IntRange(0, 4).Draw(rt, "upsertions") {
				u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
				u.Name, u.Mechanism = rapid.SampledFrom(users).Draw(rt, "user"), rapid.SampledFrom(mechs).Draw(rt, "mech")
				u.Iterations = rapid.SampledFrom(iterations).Draw(rt, "iterations")
				u.Salt, u.SaltedPassword = []byte("s"), []byte("not derived here: the keys are HMACs of it")
				r.Upsertions = append(r.Upsertions, u)
				ops = append(ops, op{u.Name, u.Mechanism, u.Iterations})
			}
			// The model: per user, the code of its first op unless named again.
			code := map[string]int16{}
			chosen := map[string]op{}
			for _, o := range ops {
				if c, named := code[o.user]; named {
					if c == 0 {
						code[o.user] = kerr.DuplicateResource.Code
						delete(chosen, o.user)
					}
					continue
				}
				k := metadata.ScramKey{User: o.user, Mechanism: o.mech}
				_, have := model[k]
				switch {
				case o.user == "":
					code[o.user] = kerr.UnacceptableCredential.Code
				case o.mech == 0:
					code[o.user] = kerr.UnsupportedSaslMechanism.Code
				case o.iters == 0 && !have:
					code[o.user] = kerr.ResourceNotFound.Code
				case o.iters != 0 && (o.iters < 4096 || o.iters > 16384):
					code[o.user] = kerr.UnacceptableCredential.Code
				default:
					code[o.user] = 0
					chosen[o.user] = o
				}
			}
			recs, resp := admin.AlterUserScramCredentials(im, r)
			if got := alterResults(resp); !maps.Equal(got, code) {
				rt.Fatalf("results %v, model %v", got, code)
			}
			for _, o := range chosen {
				k := metadata.ScramKey{User: o.user, Mechanism: o.mech}
				if o.iters == 0 {
					delete(model, k)
				} else {
					model[k] = o.iters
				}
			}
			if len(recs) > 0 {
				var err error
				if im, _, err = metadata.ApplyEntry(im, 0, recs); err != nil {
					rt.Fatalf("records do not apply: %v", err)
				}
			}
			got := map[metadata.ScramKey]int32{}
			for k, c := range im.Scram {
				got[k] = c.Iterations
			}
			if !maps.Equal(got, model) {
				rt.Fatalf("image %v, model %v", got, model)
			}
			described := map[metadata.ScramKey]int32{}
			for _, res := range admin.DescribeUserScramCredentials(im, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).Results {
				for _, ci := range res.CredentialInfos {
					described[metadata.ScramKey{User: res.User, Mechanism: ci.Mechanism}] = ci.Iterations
				}
			}
			if !maps.Equal(described, model) {
				rt.Fatalf("described %v, model %v", described, model)
			}
		}
	})
}
