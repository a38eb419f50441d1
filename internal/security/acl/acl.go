// Package acl is Kafka's StandardAuthorizer (KRaft's org.apache.kafka.metadata.authorizer,
// Kafka 4.4) as pure code: the ACL bindings of CreateAcls/DescribeAcls/DeleteAcls, an
// immutable index of the ACLs the cluster metadata holds, and the decisions Kafka's
// authorizer makes from them.
//
// What it reproduces:
//   - Resource types TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN and USER;
//     LITERAL and PREFIXED patterns; the literal name "*" matching every name of its type;
//     the principal "User:*" matching every principal; the host "*" matching every client
//     address, a literal address matching itself (as Java's getHostAddress writes it:
//     HostAddress) and, as Kafka 4.4 added, a CIDR block matching the addresses in it.
//   - Authorize: super.users are allowed everything; otherwise a matching DENY wins over
//     any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW of
//     ALTER_CONFIGS also allows DESCRIBE_CONFIGS (DENY implies nothing), ALL matches every
//     operation; a resource no ACL names at all (for any principal) gets
//     allow.everyone.if.no.acl.found, a resource with ACLs none of which allow is denied.
//   - AuthorizeByResourceType: Kafka's Authorizer.authorizeByResourceType default, which
//     the broker uses for the idempotent-write and transactional checks.
//   - Filters (AclBindingFilter) as DescribeAcls and DeleteAcls match them, with ANY and
//     MATCH pattern types, and the checks CreateAcls, DescribeAcls and DeleteAcls apply
//     (ValidateCreations, ParseDescribeFilter, ParseDeleteFilters) with Kafka's error
//     codes.
//
// The index is built from the ACLs of the metadata image and updated by its deltas; it
// is never changed in place, so a broker swaps a pointer and readers take no lock. Pure:
// no I/O, no goroutines, no clock.
package acl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The codes are Kafka's (and kmsg's): ResourceType, PatternType, AclOperation and
// AclPermissionType of org.apache.kafka.common.
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

// OpTwoPhaseCommit is Kafka 4.x's TWO_PHASE_COMMIT operation (KIP-939, on a transactional
// id), which kmsg v1.15.1 does not name.
const OpTwoPhaseCommit Operation = 15

// The largest code of each kind Kafka 4.4 knows; a code above it is UNKNOWN (0), as
// Kafka's fromCode makes it.
const (
	maxResourceType = kmsg.ACLResourceTypeUser
	maxPatternType  = kmsg.ACLResourcePatternTypePrefixed
	maxOperation    = OpTwoPhaseCommit
	maxPermission   = kmsg.ACLPermissionTypeAllow
)

// Wildcard is the resource name, and the host, that match every name and host.
const Wildcard = "*"

// WildcardPrincipal is the principal that matches every principal.
const WildcardPrincipal = "User:*"

// ClusterName is the only name a CLUSTER resource has.
const ClusterName = "kafka-cluster"

// Binding is one ACL: who (principal, host) may or may not (permission) do what
// (operation) on which resources (type, name, pattern). Kafka's AclBinding.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string // "Type:Name", e.g. "User:alice"
	Host         string
	Operation    Operation
	Permission   Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s from %s: %s %s)", b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Permission, opName(b.Operation))
}

// ID is an ACL's id (a Kafka Uuid, AccessControlEntryRecord's Id).
type ID [16]byte

// ACL is a binding with the id the controller gave it.
type ACL struct {
	ID ID
	Binding
}

// Principal is an authenticated identity: Kafka's KafkaPrincipal (type "User" for SASL
// and TLS principals).
type Principal struct {
	Type, Name string
}

func (p Principal) String() string { return p.Type + ":" + p.Name }

// ParsePrincipal reads "Type:Name" as Kafka's SecurityUtils.parseKafkaPrincipal does: the
// type is what precedes the first colon, the name (possibly empty) what follows it.
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		return Principal{}, fmt.Errorf("expected a string in format principalType:principalName but got %q", s)
	}
	return Principal{Type: typ, Name: name}, nil
}

// HostAddress writes a client address as Java's InetAddress.getHostAddress does, which is
// the string Kafka compares an ACL's host with: dotted IPv4 (an IPv4-mapped IPv6 address
// is IPv4 to Java), and IPv6 as eight lowercase hex groups without leading zeros and
// without "::" compression ("0:0:0:0:0:0:0:1", not "::1"), then "%zone" if scoped. An
// ACL written for "::1" does not match that client in Kafka and does not here either.
func HostAddress(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() || !a.IsValid() {
		return a.String()
	}
	b := a.As16()
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(b[i])<<8|uint64(b[i+1]), 16))
	}
	if z := a.Zone(); z != "" {
		sb.WriteString("%" + z)
	}
	return sb.String()
}

// hostMatches is Kafka 4.4's host rule: "*", the same string, or a CIDR block (an ACL
// host with a '/') containing the address.
func hostMatches(aclHost, host string) bool {
	if aclHost == Wildcard || aclHost == host {
		return true
	}
	if !strings.Contains(aclHost, "/") {
		return false
	}
	prefix, err := netip.ParsePrefix(aclHost)
	if err != nil {
		return false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	// Kafka picks IPv4 or IPv6 by the block; an address of the other family is not in it.
	return prefix.Contains(addr.WithZone(""))
}

// normalize makes a code Kafka 4.4 does not know UNKNOWN, as its fromCode does.
func normalize[T ~int8](v, max T) T {
	if v < 0 || v > max {
		return 0
	}
	return v
}

func opName(op Operation) string {
	if op == OpTwoPhaseCommit {
		return "TWO_PHASE_COMMIT"
	}
	return op.String()
}

// Names for the codes this package uses.
const (
	ResourceAny             = kmsg.ACLResourceTypeAny
	ResourceTopic           = kmsg.ACLResourceTypeTopic
	ResourceGroup           = kmsg.ACLResourceTypeGroup
	ResourceCluster         = kmsg.ACLResourceTypeCluster
	ResourceTransactionalID = kmsg.ACLResourceTypeTransactionalId
	ResourceDelegationToken = kmsg.ACLResourceTypeDelegationToken
	ResourceUser            = kmsg.ACLResourceTypeUser

	PatternAny      = kmsg.ACLResourcePatternTypeAny
	PatternMatch    = kmsg.ACLResourcePatternTypeMatch
	PatternLiteral  = kmsg.ACLResourcePatternTypeLiteral
	PatternPrefixed = kmsg.ACLResourcePatternTypePrefixed

	OpAny             = kmsg.ACLOperationAny
	OpAll             = kmsg.ACLOperationAll
	OpRead            = kmsg.ACLOperationRead
	OpWrite           = kmsg.ACLOperationWrite
	OpCreate          = kmsg.ACLOperationCreate
	OpDelete          = kmsg.ACLOperationDelete
	OpAlter           = kmsg.ACLOperationAlter
	OpDescribe        = kmsg.ACLOperationDescribe
	OpClusterAction   = kmsg.ACLOperationClusterAction
	OpDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	OpAlterConfigs    = kmsg.ACLOperationAlterConfigs
	OpIdempotentWrite = kmsg.ACLOperationIdempotentWrite
	OpCreateTokens    = kmsg.ACLOperationCreateTokens
	OpDescribeTokens  = kmsg.ACLOperationDescribeTokens

	PermissionAny = kmsg.ACLPermissionTypeAny
	Deny          = kmsg.ACLPermissionTypeDeny
	Allow         = kmsg.ACLPermissionTypeAllow
)

// validCIDR reports whether host is a CIDR block ("10.0.0.0/8", "fd00::/8") as an ACL host
// may be from Kafka 4.4.
func validCIDR(host string) bool {
	_, err := netip.ParsePrefix(host)
	return err == nil
}
