package controller

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/node/nodetest"
	"github.com/exactq/exactq/internal/security/acl"
)

func aclCreation(name, principal string, op acl.Operation) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = acl.ResourceTopic, name, acl.PatternLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, acl.Allow
	return c
}

// TestDriverSecurityAdmin runs the security admin requests through Driver.Handle on a
// quorum of three real nodes: the controller decides them against its latest image, every
// node's image then holds the result (so any broker's authorizer and credential lookup
// see it), a node that is not the controller answers NOT_CONTROLLER in every result,
// and concurrent creations of one ACL make one ACL.
func TestDriverSecurityAdmin(t *testing.T) {
	q := nodetest.Start(t, 3)
	drivers := make([]*Driver, len(q.Nodes))
	for i, n := range q.Nodes {
		drivers[i] = startDriver(t, n, nil)
	}
	leader, _ := q.Leader()
	d := drivers[leader]
	follower := drivers[(leader+1)%3]

	create := kmsg.NewPtrCreateACLsRequest()
	create.Version = 3
	create.Creations = []kmsg.CreateACLsRequestCreation{
		aclCreation("orders", "User:alice", acl.OpRead),
		aclCreation("orders", "alice", acl.OpRead), // no colon: INVALID_REQUEST
		aclCreation("orders", "User:bob", acl.OpWrite),
	}
	cr := ask[*kmsg.CreateACLsResponse](t, d, create)
	if cr.Results[0].ErrorCode != 0 || cr.Results[1].ErrorCode != kerr.InvalidRequest.Code || cr.Results[2].ErrorCode != 0 {
		t.Fatalf("CreateAcls results %+v", cr.Results)
	}
	fr := ask[*kmsg.CreateACLsResponse](t, follower, create)
	for i, r := range fr.Results {
		if r.ErrorCode != kerr.NotController.Code {
			t.Errorf("follower: creation %d error %d, want NOT_CONTROLLER", i, r.ErrorCode)
		}
	}

	// Every node's image, and so the authorizer built from it, holds the two ACLs.
	alice := acl.Client{Principal: acl.Principal{Type: "User", Name: "alice"}, Host: "127.0.0.1"}
	readOrders := acl.Action{Operation: acl.OpRead, ResourceType: acl.ResourceTopic, ResourceName: "orders"}
	everyImage(t, q, func(im *metadata.Image) error {
		ix, err := im.ACLIndex()
		if err != nil {
			return err
		}
		if ix.Len() != 2 || !acl.New(acl.Config{}, ix).Allowed(alice, readOrders) {
			return fmt.Errorf("%d ACLs, alice may read: %v", ix.Len(), acl.New(acl.Config{}, ix).Allowed(alice, readOrders))
		}
		return nil
	})

	// Concurrent creations of one binding, all decided on the latest image: one ACL.
	var wg sync.WaitGroup
	same := kmsg.NewPtrCreateACLsRequest()
	same.Version = 3
	same.Creations = []kmsg.CreateACLsRequestCreation{aclCreation("payments", "User:carol", acl.OpDescribe)}
	for range 8 {
		wg.Go(func() {
			if r := ask[*kmsg.CreateACLsResponse](t, d, same); r.Results[0].ErrorCode != 0 {
				t.Errorf("concurrent create: error %d", r.Results[0].ErrorCode)
			}
		})
	}
	wg.Wait()
	im, _ := q.Nodes[leader].Image()
	if n := len(im.ACLs); n != 3 {
		t.Fatalf("%d ACLs after eight creations of one binding, want 3", n)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = acl.ResourceTopic, acl.PatternAny, acl.OpAny, acl.PermissionAny
	f.ResourceName = new(string)
	*f.ResourceName = "orders"
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	dr := ask[*kmsg.DeleteACLsResponse](t, d, del)
	if dr.Results[0].ErrorCode != 0 || len(dr.Results[0].MatchingACLs) != 2 {
		t.Fatalf("DeleteAcls %+v", dr.Results)
	}

	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "admin", metadata.ScramSHA512, 8192, []byte("salt"), make([]byte, 64)
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{u}
	ar := ask[*kmsg.AlterUserSCRAMCredentialsResponse](t, d, alter)
	if len(ar.Results) != 1 || ar.Results[0].User != "admin" || ar.Results[0].ErrorCode != 0 {
		t.Fatalf("AlterUserScramCredentials %+v", ar.Results)
	}
	if r := ask[*kmsg.AlterUserSCRAMCredentialsResponse](t, follower, alter); r.Results[0].ErrorCode != kerr.NotController.Code {
		t.Errorf("follower: AlterUserScramCredentials error %d", r.Results[0].ErrorCode)
	}

	// Any node describes from its own image.
	everyImage(t, q, func(im *metadata.Image) error {
		if len(im.ACLs) != 1 {
			return fmt.Errorf("%d ACLs after the delete, want 1", len(im.ACLs))
		}
		desc := admin.DescribeUserScramCredentials(im, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
		if len(desc.Results) != 1 || len(desc.Results[0].CredentialInfos) != 1 || desc.Results[0].CredentialInfos[0].Iterations != 8192 {
			return fmt.Errorf("described %+v", desc.Results)
		}
		return nil
	})
}

// everyImage waits until check passes on every node's image.
func everyImage(t *testing.T, q *nodetest.Quorum, check func(*metadata.Image) error) {
	t.Helper()
	err := await.Until(10*time.Second, 5*time.Millisecond, func() error {
		var errs []error
		for i, n := range q.Nodes {
			im, _ := n.Image()
			if err := check(im); err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", i, err))
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCoreSecurityRefusals: a CreateAcls Kafka would not parse is answered at once,
// INVALID_REQUEST in every creation, with nothing proposed; a valid one is one batch.
func TestCoreSecurityRefusals(t *testing.T) {
	c := New(Config{})
	bad := kmsg.NewPtrCreateACLsRequest()
	bad.Version = 3
	bad.Creations = []kmsg.CreateACLsRequestCreation{aclCreation("a", "User:x", acl.OpRead), aclCreation("b", "User:x", 0)}
	r, err := c.Handle(metadata.Empty(), time.Now(), bad)
	if err != nil {
		t.Fatal(err)
	}
	resp := r.Reply(0).(*kmsg.CreateACLsResponse)
	if !r.Immediate || len(r.Records) != 0 || len(resp.Results) != 2 ||
		resp.Results[0].ErrorCode != kerr.InvalidRequest.Code || resp.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("malformed CreateAcls: %+v, %+v", r, resp.Results)
	}
	good := kmsg.NewPtrCreateACLsRequest()
	good.Version = 3
	good.Creations = []kmsg.CreateACLsRequestCreation{aclCreation("a", "User:x", acl.OpRead), aclCreation("b", "User:x", acl.OpWrite)}
	r, err = c.Handle(metadata.Empty(), time.Now(), good)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Batches()) != 1 || len(r.Records) != 2 || len(r.Next.ACLs) != 2 {
		t.Fatalf("CreateAcls: %d batches, %d records, next %v", len(r.Batches()), len(r.Records), r.Next)
	}
}
