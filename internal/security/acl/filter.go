package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Filter selects ACLs: Kafka's AclBindingFilter, what DescribeAcls and DeleteAcls send.
// ResourceAny, PatternAny, OpAny and PermissionAny match every value; a nil name,
// principal or host matches every string. PatternMatch selects the ACLs that would apply
// to the named resource: its literal ACLs, the literal wildcard and the prefixes of the
// name.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// MatchAll is the filter that selects every ACL.
var MatchAll = Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}

// Matches is AclBindingFilter.matches: ResourcePatternFilter.matches on the pattern and
// AccessControlEntryFilter.matches (exact strings, no wildcard expansion) on the entry.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) && f.matchesEntry(b)
}

func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType == PatternAny || f.PatternType == b.PatternType {
		return name == b.ResourceName
	}
	// PatternMatch: the ACLs whose pattern applies to the resource name.
	switch b.PatternType {
	case PatternLiteral:
		return name == b.ResourceName || b.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

func (f Filter) matchesEntry(b Binding) bool {
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

// Unknown is AclBindingFilter.isUnknown: a field is UNKNOWN.
func (f Filter) Unknown() bool {
	return f.ResourceType == 0 || f.PatternType == 0 || f.Operation == 0 || f.Permission == 0
}

// ErrMalformed is a request Kafka fails to parse (it closes the connection): an UNKNOWN
// (0) code in an ACL or filter, or a pattern type version 0 cannot carry.
var ErrMalformed = errors.New("acl: malformed ACL request")

// normalizeFilter is what parsing does to a filter: at version 0, whose filters have
// no pattern type, ANY becomes LITERAL (the wildcard "*" is a literal name there) and
// anything else but LITERAL is refused; a code of 0 is refused; a code Kafka does not
// know becomes UNKNOWN.
func normalizeFilter(version int16, f Filter) (Filter, error) {
	if version == 0 {
		switch f.PatternType {
		case PatternAny:
			f.PatternType = PatternLiteral
		case PatternLiteral:
		default:
			return Filter{}, fmt.Errorf("%w: pattern type %s needs version 1", ErrMalformed, f.PatternType)
		}
	}
	if f.Unknown() {
		return Filter{}, fmt.Errorf("%w: a filter has an UNKNOWN field", ErrMalformed)
	}
	f.ResourceType = normalize(f.ResourceType, maxResourceType)
	f.PatternType = normalize(f.PatternType, maxPatternType)
	f.Operation = normalize(f.Operation, maxOperation)
	f.Permission = normalize(f.Permission, maxPermission)
	return f, nil
}

// ParseDescribeFilter is what Kafka makes of DescribeAcls's filter at version: the filter
// to match with, or ErrMalformed. A filter with a code Kafka does not know is not an
// error: it matches nothing.
func ParseDescribeFilter(version int16, f Filter) (Filter, error) {
	return normalizeFilter(version, f)
}

// DeleteFilter is one DeleteAcls filter as Kafka takes it: the filter, or the error code
// its result carries.
type DeleteFilter struct {
	Filter    Filter
	ErrorCode int16
	Message   string
}

// ParseDeleteFilters is what Kafka makes of DeleteAcls's filters at version:
// ErrMalformed for the whole request (the rules of ParseDescribeFilter), otherwise per
// filter INVALID_REQUEST for a filter with a code Kafka does not know (the controller's
// validateFilter) or the filter to delete with.
func ParseDeleteFilters(version int16, filters []Filter) ([]DeleteFilter, error) {
	out := make([]DeleteFilter, len(filters))
	for i, f := range filters {
		nf, err := normalizeFilter(version, f)
		if err != nil {
			return nil, err
		}
		if nf.Unknown() {
			out[i] = DeleteFilter{ErrorCode: kerr.InvalidRequest.Code, Message: "Unknown patternFilter or entryFilter."}
			continue
		}
		out[i] = DeleteFilter{Filter: nf}
	}
	return out, nil
}

// CreateResult is one CreateAcls result: 0 and the binding to create, or an error code
// and message.
type CreateResult struct {
	Binding   Binding
	ErrorCode int16
	Message   string
}

// ValidateCreations applies, in Kafka's order, the checks a CreateAcls request at
// version goes through before the controller writes anything:
//
//   - parsing (CreateAclsRequest.validate): a 0 (UNKNOWN) resource type, pattern type,
//     operation or permission, or at version 0 a pattern type other than LITERAL, fails
//     the request: ErrMalformed;
//   - the handler's AclBinding construction: a resource type ANY, a pattern type ANY or
//     MATCH, an operation ANY or a permission ANY throws IllegalArgumentException, which
//     answers every creation UNKNOWN_SERVER_ERROR;
//   - AclApis: a CLUSTER resource not named kafka-cluster, an empty resource name:
//     INVALID_REQUEST for that creation;
//   - the controller (AclControlManager.validateNewAcl): a code Kafka does not know
//     (UNKNOWN after fromCode), a principal without a colon, an empty host or a host with
//     a '/' that is not a CIDR block: INVALID_REQUEST for that creation.
//
// The cluster ALTER check comes before all of this and is the broker's.
func ValidateCreations(version int16, creations []Binding) ([]CreateResult, error) {
	for _, b := range creations {
		if b.ResourceType == 0 || b.PatternType == 0 || b.Operation == 0 || b.Permission == 0 {
			return nil, fmt.Errorf("%w: a creation has an UNKNOWN field", ErrMalformed)
		}
		if version == 0 && b.PatternType != PatternLiteral {
			return nil, fmt.Errorf("%w: version 0 only supports literal resource pattern types", ErrMalformed)
		}
	}
	out := make([]CreateResult, len(creations))
	for _, b := range creations {
		if b.ResourceType == ResourceAny || b.PatternType == PatternAny || b.PatternType == PatternMatch ||
			b.Operation == OpAny || b.Permission == PermissionAny {
			for i := range out {
				out[i] = CreateResult{ErrorCode: kerr.UnknownServerError.Code, Message: fmt.Sprintf("invalid ACL binding %v", b)}
			}
			return out, nil
		}
	}
	for i, b := range creations {
		b.ResourceType = normalize(b.ResourceType, maxResourceType)
		b.PatternType = normalize(b.PatternType, maxPatternType)
		b.Operation = normalize(b.Operation, maxOperation)
		b.Permission = normalize(b.Permission, maxPermission)
		out[i] = CreateResult{Binding: b}
		if msg := invalidCreation(b); msg != "" {
			out[i] = CreateResult{ErrorCode: kerr.InvalidRequest.Code, Message: msg}
		}
	}
	return out, nil
}

func invalidCreation(b Binding) string {
	switch {
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return "The only valid name for the CLUSTER resource is " + ClusterName
	case b.ResourceName == "":
		return "Invalid empty resource name"
	case b.ResourceType == 0:
		return "Invalid resourceType UNKNOWN"
	case b.PatternType == 0:
		return "Invalid patternType UNKNOWN"
	case b.Operation == 0:
		return "Invalid operation UNKNOWN"
	case b.Permission == 0:
		return "Invalid permissionType UNKNOWN"
	case !strings.Contains(b.Principal, ":"):
		return fmt.Sprintf("Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", b.Principal)
	case b.Host == "":
		return "Host pattern cannot be null or empty"
	case b.Host != Wildcard && strings.Contains(b.Host, "/") && !validCIDR(b.Host):
		return fmt.Sprintf("Invalid CIDR notation '%s'", b.Host)
	}
	return ""
}
