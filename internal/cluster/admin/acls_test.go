package admin_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

func strp(s string) *string { return &s }

func creation(rt acl.ResourceType, name string, pt acl.PatternType, principal, host string, op acl.Operation, perm acl.Permission) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

func aclCreateReq(cs ...kmsg.CreateACLsRequestCreation) *kmsg.CreateACLsRequest {
	r := kmsg.NewPtrCreateACLsRequest()
	r.Version = 3
	r.Creations = cs
	return r
}

// counterIDs hands out ids 1, 2, 3, ... in the first byte's low bits (never one that
// begins with '-' in base64).
func counterIDs() func() acl.ID {
	var n byte
	return func() acl.ID { n++; return acl.ID{0, n} }
}

func applyRecs(t testing.TB, im *metadata.Image, recs []wire.MetadataRecord) *metadata.Image {
	t.Helper()
	if len(recs) == 0 {
		return im
	}
	next, _, err := metadata.ApplyEntry(im, 0, recs)
	if err != nil {
		t.Fatalf("records do not apply: %v", err)
	}
	return next
}

func createAcls(t *testing.T, im *metadata.Image, r *kmsg.CreateACLsRequest, ids func() acl.ID) (*metadata.Image, *kmsg.CreateACLsResponse) {
	t.Helper()
	recs, resp, err := admin.CreateAcls(im, r, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != len(r.Creations) {
		t.Fatalf("%d results for %d creations", len(resp.Results), len(r.Creations))
	}
	return applyRecs(t, im, recs), resp
}

func TestCreateAcls(t *testing.T) {
	ids := counterIDs()
	readFoo := creation(acl.ResourceTopic, "foo", acl.PatternLiteral, "User:alice", "*", acl.OpRead, acl.Allow)
	im, resp := createAcls(t, metadata.Empty(), aclCreateReq(
		readFoo,
		readFoo, // the same binding twice in one request: one ACL, both succeed
		creation(acl.ResourceGroup, "g-", acl.PatternPrefixed, "User:bob", "10.0.0.0/8", acl.OpRead, acl.Deny),
		creation(acl.ResourceTopic, "bar", acl.PatternLiteral, "alice", "*", acl.OpRead, acl.Allow),                // no colon
		creation(acl.ResourceCluster, "my-cluster", acl.PatternLiteral, "User:alice", "*", acl.OpAlter, acl.Allow), // not kafka-cluster
		creation(acl.ResourceTopic, "", acl.PatternLiteral, "User:alice", "*", acl.OpRead, acl.Allow),              // empty name
		creation(acl.ResourceTopic, "baz", acl.PatternLiteral, "User:alice", "", acl.OpRead, acl.Allow),            // empty host
		creation(acl.ResourceTopic, "baz", acl.PatternLiteral, "User:alice", "10.0.0.0/40", acl.OpRead, acl.Allow), // bad CIDR
		creation(acl.ResourceTopic, "baz", acl.PatternLiteral, "User:alice", "*", acl.Operation(42), acl.Allow),    // unknown to Kafka
		creation(acl.ResourceTransactionalID, "tx", acl.PatternLiteral, "User:carol", "*", acl.OpWrite, acl.Allow), // fine
	), ids)
	want := []int16{0, 0, 0, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code,
		kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, 0}
	for i, res := range resp.Results {
		if res.ErrorCode != want[i] {
			t.Errorf("creation %d: error %d, want %d (%v)", i, res.ErrorCode, want[i], res.ErrorMessage)
		}
		if (res.ErrorCode == 0) != (res.ErrorMessage == nil) {
			t.Errorf("creation %d: error %d with message %v", i, res.ErrorCode, res.ErrorMessage)
		}
	}
	if got := *resp.Results[3].ErrorMessage; got != "Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)" {
		t.Errorf("principal message %q", got)
	}
	if len(im.ACLs) != 3 {
		t.Fatalf("image holds %d ACLs, want 3: %v", len(im.ACLs), im.ACLs)
	}

	// Creating what exists succeeds and writes nothing.
	recs, resp, err := admin.CreateAcls(im, aclCreateReq(readFoo), ids)
	if err != nil || len(recs) != 0 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("re-creating: %d records, %+v, %v", len(recs), resp.Results, err)
	}

	// The authorizer built from the image decides with what was created.
	ix, err := im.ACLIndex()
	if err != nil {
		t.Fatal(err)
	}
	az := acl.New(acl.Config{}, ix)
	alice := acl.Client{Principal: acl.Principal{Type: "User", Name: "alice"}, Host: "192.0.2.1"}
	if !az.Allowed(alice, acl.Action{Operation: acl.OpDescribe, ResourceType: acl.ResourceTopic, ResourceName: "foo"}) {
		t.Error("alice may not describe foo after READ was granted")
	}
	bob := acl.Client{Principal: acl.Principal{Type: "User", Name: "bob"}, Host: "10.1.2.3"}
	if az.Allowed(bob, acl.Action{Operation: acl.OpRead, ResourceType: acl.ResourceGroup, ResourceName: "g-1"}) {
		t.Error("bob reads g-1 through a prefixed DENY")
	}
}

func TestCreateAclsRefusals(t *testing.T) {
	// ANY and MATCH pattern types (and ANY resource types) cannot be created: Kafka's
	// AclBinding refuses them, which answers every creation UNKNOWN_SERVER_ERROR.
	for _, bad := range []kmsg.CreateACLsRequestCreation{
		creation(acl.ResourceAny, "foo", acl.PatternLiteral, "User:a", "*", acl.OpRead, acl.Allow),
		creation(acl.ResourceTopic, "foo", acl.PatternMatch, "User:a", "*", acl.OpRead, acl.Allow),
		creation(acl.ResourceTopic, "foo", acl.PatternAny, "User:a", "*", acl.OpRead, acl.Allow),
		creation(acl.ResourceTopic, "foo", acl.PatternLiteral, "User:a", "*", acl.OpAny, acl.Allow),
	} {
		good := creation(acl.ResourceTopic, "ok", acl.PatternLiteral, "User:a", "*", acl.OpRead, acl.Allow)
		recs, resp, err := admin.CreateAcls(metadata.Empty(), aclCreateReq(good, bad), counterIDs())
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 0 {
			t.Errorf("%+v: %d records", bad, len(recs))
		}
		for i, res := range resp.Results {
			if res.ErrorCode != kerr.UnknownServerError.Code {
				t.Errorf("%+v: creation %d error %d", bad, i, res.ErrorCode)
			}
		}
	}
	// An UNKNOWN code, or a prefixed pattern at v0, is a request Kafka does not parse.
	for _, r := range []*kmsg.CreateACLsRequest{
		aclCreateReq(creation(0, "foo", acl.PatternLiteral, "User:a", "*", acl.OpRead, acl.Allow)),
		func() *kmsg.CreateACLsRequest {
			r := aclCreateReq(creation(acl.ResourceTopic, "foo", acl.PatternPrefixed, "User:a", "*", acl.OpRead, acl.Allow))
			r.Version = 0
			return r
		}(),
	} {
		if _, _, err := admin.CreateAcls(metadata.Empty(), r, counterIDs()); !errors.Is(err, acl.ErrMalformed) {
			t.Errorf("%+v: %v, want ErrMalformed", r.Creations, err)
		}
	}
}

func TestCreateAclsIDs(t *testing.T) {
	im, _ := createAcls(t, metadata.Empty(), aclCreateReq(creation(acl.ResourceTopic, "a", acl.PatternLiteral, "User:a", "*", acl.OpRead, acl.Allow)),
		func() acl.ID { return acl.ID{0, 1} })
	// The drawer offers zero, a '-' id (0xf8: base64 '-'), the id taken in the image, a
	// repeat within the request, then fresh ones: Kafka draws again for each.
	offers := []acl.ID{{}, {0xf8, 9}, {0, 1}, {0, 2}, {0, 2}, {0, 3}}
	ids := func() acl.ID { id := offers[0]; offers = offers[1:]; return id }
	im, _ = createAcls(t, im, aclCreateReq(
		creation(acl.ResourceTopic, "b", acl.PatternLiteral, "User:a", "*", acl.OpRead, acl.Allow),
		creation(acl.ResourceTopic, "c", acl.PatternLiteral, "User:a", "*", acl.OpRead, acl.Allow)), ids)
	if im.ACLs[acl.ID{0, 2}].ResourceName != "b" || im.ACLs[acl.ID{0, 3}].ResourceName != "c" || len(im.ACLs) != 3 {
		t.Fatalf("ids: %v", im.ACLs)
	}
}

func deleteReq(fs ...kmsg.DeleteACLsRequestFilter) *kmsg.DeleteACLsRequest {
	r := kmsg.NewPtrDeleteACLsRequest()
	r.Version = 3
	r.Filters = fs
	return r
}

func filter(rt acl.ResourceType, name *string, pt acl.PatternType, principal *string, op acl.Operation, perm acl.Permission) kmsg.DeleteACLsRequestFilter {
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal = rt, name, pt, principal
	f.Operation, f.PermissionType = op, perm
	return f
}

func TestDeleteAcls(t *testing.T) {
	im, _ := createAcls(t, metadata.Empty(), aclCreateReq(
		creation(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:alice", "*", acl.OpRead, acl.Allow),
		creation(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:bob", "*", acl.OpWrite, acl.Allow),
		creation(acl.ResourceTopic, "ord", acl.PatternPrefixed, "User:bob", "*", acl.OpRead, acl.Deny),
		creation(acl.ResourceTopic, "*", acl.PatternLiteral, "User:carol", "*", acl.OpDescribe, acl.Allow),
		creation(acl.ResourceGroup, "g", acl.PatternLiteral, "User:alice", "*", acl.OpRead, acl.Allow),
	), counterIDs())
	recs, resp, err := admin.DeleteAcls(im, deleteReq(
		// MATCH: every ACL that applies to topic "orders" for bob: his literal and prefixed.
		filter(acl.ResourceTopic, strp("orders"), acl.PatternMatch, strp("User:bob"), acl.OpAny, acl.PermissionAny),
		// ANY with a name: the literal and prefixed ACLs named exactly "ord": bob's prefix
		// again (listed again, removed once).
		filter(acl.ResourceAny, strp("ord"), acl.PatternAny, nil, acl.OpAny, acl.PermissionAny),
		// Matches nothing.
		filter(acl.ResourceUser, nil, acl.PatternAny, nil, acl.OpAny, acl.PermissionAny),
		// An operation Kafka does not know: INVALID_REQUEST for this filter alone.
		filter(acl.ResourceTopic, nil, acl.PatternAny, nil, acl.Operation(99), acl.PermissionAny),
	))
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{2, 1, 0, 0}
	for i, res := range resp.Results {
		if len(res.MatchingACLs) != counts[i] {
			t.Errorf("filter %d: %d matching, want %d: %+v", i, len(res.MatchingACLs), counts[i], res.MatchingACLs)
		}
		for _, m := range res.MatchingACLs {
			if m.ErrorCode != 0 || m.ErrorMessage != nil {
				t.Errorf("filter %d: a matching ACL with error %d", i, m.ErrorCode)
			}
		}
	}
	if r := resp.Results[3]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("unknown operation: error %d", r.ErrorCode)
	}
	if m := resp.Results[1].MatchingACLs[0]; m.ResourceName != "ord" || m.ResourcePatternType != acl.PatternPrefixed ||
		m.Principal != "User:bob" || m.Operation != acl.OpRead || m.PermissionType != acl.Deny || m.Host != "*" {
		t.Errorf("deleted ACL details %+v", m)
	}
	if len(recs) != 2 {
		t.Fatalf("%d removal records, want 2 (one per ACL)", len(recs))
	}
	im = applyRecs(t, im, recs)
	if len(im.ACLs) != 3 {
		t.Fatalf("%d ACLs left, want 3", len(im.ACLs))
	}
	// At v0 an ANY pattern filter is a literal one.
	r := deleteReq(filter(acl.ResourceTopic, strp("*"), acl.PatternAny, nil, acl.OpAny, acl.PermissionAny))
	r.Version = 0
	_, resp, err = admin.DeleteAcls(im, r)
	if err != nil || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("v0 delete of the literal wildcard: %+v, %v", resp, err)
	}
}

func TestDeleteAclsBounded(t *testing.T) {
	var cs []kmsg.CreateACLsRequestCreation
	for i := range admin.MaxRecordsPerRequest + 1 {
		cs = append(cs, creation(acl.ResourceTopic, "t", acl.PatternLiteral, "User:u"+strconv.Itoa(i), "*", acl.OpRead, acl.Allow))
	}
	var n uint32
	ids := func() acl.ID { n++; return acl.ID{0, byte(n >> 16), byte(n >> 8), byte(n)} }
	recs, resp, _ := admin.CreateAcls(metadata.Empty(), aclCreateReq(cs...), ids)
	if len(recs) != 0 || resp.Results[0].ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("creating %d: %d records, error %d", len(cs), len(recs), resp.Results[0].ErrorCode)
	}
	im, _ := createAcls(t, metadata.Empty(), aclCreateReq(cs[:admin.MaxRecordsPerRequest]...), ids)
	im, _ = createAcls(t, im, aclCreateReq(cs[admin.MaxRecordsPerRequest:]...), ids)
	all := filter(acl.ResourceAny, nil, acl.PatternAny, nil, acl.OpAny, acl.PermissionAny)
	recs, dresp, _ := admin.DeleteAcls(im, deleteReq(all, all))
	if len(recs) != 0 || dresp.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("deleting %d: %d records, %d/%d", len(im.ACLs), len(recs), dresp.Results[0].ErrorCode, dresp.Results[1].ErrorCode)
	}
	if *dresp.Results[0].ErrorMessage != "Cannot remove more than 10000 acls in a single delete operation." {
		t.Errorf("message %q", *dresp.Results[0].ErrorMessage)
	}
}

func TestDescribeAcls(t *testing.T) {
	im, _ := createAcls(t, metadata.Empty(), aclCreateReq(
		creation(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:bob", "*", acl.OpWrite, acl.Allow),
		creation(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:alice", "*", acl.OpRead, acl.Allow),
		creation(acl.ResourceTopic, "ord", acl.PatternPrefixed, "User:bob", "*", acl.OpRead, acl.Deny),
		creation(acl.ResourceGroup, "g", acl.PatternLiteral, "User:alice", "*", acl.OpRead, acl.Allow),
	), counterIDs())
	r := kmsg.NewPtrDescribeACLsRequest()
	r.Version = 3
	r.ResourceType, r.ResourceName, r.ResourcePatternType = acl.ResourceTopic, strp("orders"), acl.PatternMatch
	r.Operation, r.PermissionType = acl.OpAny, acl.PermissionAny
	resp, err := admin.DescribeAcls(im, r)
	if err != nil {
		t.Fatal(err)
	}
	// Two patterns, in name order: the prefix "ord" and the literal "orders" (alice, then
	// bob).
	if len(resp.Resources) != 2 {
		t.Fatalf("resources %+v", resp.Resources)
	}
	lit := resp.Resources[1]
	if lit.ResourceName != "orders" || lit.ResourcePatternType != acl.PatternLiteral || len(lit.ACLs) != 2 ||
		lit.ACLs[0].Principal != "User:alice" || lit.ACLs[1].Principal != "User:bob" {
		t.Errorf("literal resource %+v", lit)
	}
	if p := resp.Resources[0]; p.ResourceName != "ord" || p.ResourcePatternType != acl.PatternPrefixed || len(p.ACLs) != 1 {
		t.Errorf("prefixed resource %+v", p)
	}
	r.Operation = acl.Operation(77) // unknown to Kafka: matches nothing
	if resp, err := admin.DescribeAcls(im, r); err != nil || len(resp.Resources) != 0 || resp.ErrorCode != 0 {
		t.Errorf("unknown operation: %+v, %v", resp, err)
	}
	r.Operation = 0
	if _, err := admin.DescribeAcls(im, r); !errors.Is(err, acl.ErrMalformed) {
		t.Errorf("UNKNOWN operation: %v", err)
	}
}
