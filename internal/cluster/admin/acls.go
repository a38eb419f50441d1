package admin

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

// The ACL requests as Kafka 4.4's KRaft controller decides them (AclControlManager, with
// the broker's AclApis checks folded in, since exactq's controller sees the request
// itself): CreateAcls and DeleteAcls against the latest image, DescribeAcls against the
// image a broker serves from. The cluster ALTER (create, delete) or DESCRIBE (describe)
// check, and SECURITY_DISABLED when no authorizer is configured, are the broker's and
// come before these.

// MaxRecordsPerRequest is how many records one ACL request may write: Kafka's
// MAX_RECORDS_PER_USER_OP (the controller's largest batch).
const MaxRecordsPerRequest = 10_000

// CreateAcls decides a CreateAcls request (r.Version set) against im: the records of
// the new ACLs, all one group (Kafka writes them atomically), and the response, a result
// per creation in request order. Each creation is checked as acl.ValidateCreations says;
// a valid binding that im already holds, or that the request names twice, succeeds with
// no new record (Kafka's existingAcls). Each new ACL gets an id drawn from newID, drawn
// again while it is zero, begins with '-' in Kafka's base64 form, or is taken in im or by
// this request, as Kafka's Uuid.randomUuid and newAclId draw. A request that would write
// more than MaxRecordsPerRequest records fails every creation UNKNOWN_SERVER_ERROR, as
// Kafka's bounded record list makes it. The error is acl.ErrMalformed for a request
// Kafka fails to parse (the broker closes the connection); nothing is written then.
func CreateAcls(im *metadata.Image, r *kmsg.CreateACLsRequest, newID func() acl.ID) ([]wire.MetadataRecord, *kmsg.CreateACLsResponse, error) {
	creations := make([]acl.Binding, len(r.Creations))
	for i, c := range r.Creations {
		creations[i] = acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
	}
	results, err := acl.ValidateCreations(r.Version, creations)
	if err != nil {
		return nil, nil, err
	}
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Version = r.Version
	existing := make(map[acl.Binding]bool, len(im.ACLs))
	for _, a := range im.ACLs {
		existing[a.Binding] = true
	}
	taken := map[acl.ID]bool{}
	var recs []wire.MetadataRecord
	for _, res := range results {
		out := kmsg.NewCreateACLsResponseResult()
		if res.ErrorCode != 0 {
			out.ErrorCode, out.ErrorMessage = res.ErrorCode, &res.Message
		} else if !existing[res.Binding] {
			existing[res.Binding] = true
			id := drawACLID(im, taken, newID)
			recs = append(recs, aclRecord(acl.ACL{ID: id, Binding: res.Binding}))
		}
		resp.Results = append(resp.Results, out)
	}
	if len(recs) > MaxRecordsPerRequest {
		msg := fmt.Sprintf("Cannot add another element to the list because it would exceed the maximum length of %d", MaxRecordsPerRequest)
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, &msg
		}
		return nil, resp, nil
	}
	return recs, resp, nil
}

// drawACLID is a new ACL id: not zero, not starting with '-' when written in Kafka's
// URL-safe base64 (Uuid.randomUuid redraws those), not in im, not drawn before for this
// request (taken, which it updates).
func drawACLID(im *metadata.Image, taken map[acl.ID]bool, newID func() acl.ID) acl.ID {
	for {
		id := newID()
		_, inImage := im.ACLs[id]
		if id == (acl.ID{}) || inImage || taken[id] || base64.RawURLEncoding.EncodeToString(id[:1])[0] == '-' {
			continue
		}
		taken[id] = true
		return id
	}
}

func aclRecord(a acl.ACL) wire.MetadataRecord {
	return versioned(&wire.AccessControlEntryRecord{ID: a.ID, ResourceType: int8(a.ResourceType), ResourceName: a.ResourceName,
		PatternType: int8(a.PatternType), Principal: a.Principal, Host: a.Host, Operation: int8(a.Operation),
		PermissionType: int8(a.Permission)})
}

// DeleteAcls decides a DeleteAcls request (r.Version set) against im: the removal
// records, one group (Kafka writes them atomically), and a result per filter in request
// order listing every ACL the filter matches (in acl.Order), each with error NONE. A
// filter with a code Kafka does not know is INVALID_REQUEST (acl.ParseDeleteFilters).
// ACLs matched by several filters are listed by each and removed once. More than
// MaxRecordsPerRequest matches fail every filter INVALID_REQUEST with Kafka's message and
// remove nothing. The error is acl.ErrMalformed, as for CreateAcls.
func DeleteAcls(im *metadata.Image, r *kmsg.DeleteACLsRequest) ([]wire.MetadataRecord, *kmsg.DeleteACLsResponse, error) {
	filters := make([]acl.Filter, len(r.Filters))
	for i, f := range r.Filters {
		filters[i] = acl.Filter{ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType}
	}
	parsed, err := acl.ParseDeleteFilters(r.Version, filters)
	if err != nil {
		return nil, nil, err
	}
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Version = r.Version
	all := slices.SortedFunc(maps.Values(im.ACLs), acl.Order)
	removed := map[acl.ID]bool{}
	var recs []wire.MetadataRecord
	for _, pf := range parsed {
		out := kmsg.NewDeleteACLsResponseResult()
		if pf.ErrorCode != 0 {
			out.ErrorCode, out.ErrorMessage = pf.ErrorCode, &pf.Message
			resp.Results = append(resp.Results, out)
			continue
		}
		for _, a := range all {
			if !pf.Filter.Matches(a.Binding) {
				continue
			}
			if len(removed) >= MaxRecordsPerRequest {
				return nil, tooManyDeletions(r), nil
			}
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
			out.MatchingACLs = append(out.MatchingACLs, m)
			if !removed[a.ID] {
				removed[a.ID] = true
				recs = append(recs, versioned(&wire.RemoveAccessControlEntryRecord{ID: a.ID}))
			}
		}
		resp.Results = append(resp.Results, out)
	}
	return recs, resp, nil
}

func tooManyDeletions(r *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Version = r.Version
	msg := fmt.Sprintf("Cannot remove more than %d acls in a single delete operation.", MaxRecordsPerRequest)
	for range r.Filters {
		out := kmsg.NewDeleteACLsResponseResult()
		out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, &msg
		resp.Results = append(resp.Results, out)
	}
	return resp
}

// DescribeAcls answers a DescribeAcls request (r.Version set) from im, as a broker
// answers it from its image (StandardAuthorizer.acls and DescribeAclsResponse.
// aclsResources): the ACLs the filter matches, grouped by resource pattern, patterns and
// their entries in acl.Order (Kafka's order is a hash map's). A filter with a code Kafka
// does not know matches nothing. The error is acl.ErrMalformed, as for CreateAcls.
func DescribeAcls(im *metadata.Image, r *kmsg.DescribeACLsRequest) (*kmsg.DescribeACLsResponse, error) {
	f, err := acl.ParseDescribeFilter(r.Version, acl.Filter{ResourceType: r.ResourceType, ResourceName: r.ResourceName,
		PatternType: r.ResourcePatternType, Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType})
	if err != nil {
		return nil, err
	}
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.Version = r.Version
	var matched []acl.ACL
	if !f.Unknown() {
		for _, a := range im.ACLs {
			if f.Matches(a.Binding) {
				matched = append(matched, a)
			}
		}
	}
	slices.SortFunc(matched, acl.Order)
	for _, a := range matched {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != a.ResourceType || resp.Resources[n-1].ResourceName != a.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != a.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			resp.Resources = append(resp.Resources, res)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	return resp, nil
}
