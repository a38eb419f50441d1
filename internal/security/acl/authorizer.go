package acl

import (
	"errors"
	"fmt"
	"strings"
)

// Config is StandardAuthorizer's configuration.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything, whatever the ACLs say:
	// super.users.
	SuperUsers []string
	// AllowIfNoACL is allow.everyone.if.no.acl.found: whether a resource no ACL names is
	// open to everyone (false: closed to all but super users).
	AllowIfNoACL bool
}

// ParseConfig reads super.users (principals separated by ';', each "Type:Name", blanks
// ignored) and allow.everyone.if.no.acl.found ("true" in any case is true, anything else
// false, as Java's Boolean.parseBoolean) as StandardAuthorizer.configure does.
func ParseConfig(superUsers, allowEveryone string) (Config, error) {
	var c Config
	for v := range strings.SplitSeq(superUsers, ";") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if _, err := ParsePrincipal(v); err != nil {
			return Config{}, fmt.Errorf("super.users: %w", err)
		}
		c.SuperUsers = append(c.SuperUsers, v)
	}
	c.AllowIfNoACL = strings.EqualFold(strings.TrimSpace(allowEveryone), "true")
	return c, nil
}

// Authorizer decides with one Index and one Config. It is immutable: a broker builds a
// new one when the image's ACLs or the config change and swaps it in.
type Authorizer struct {
	index        *Index
	superUsers   map[string]bool
	allowIfNoACL bool
}

// New returns the authorizer of index under cfg.
func New(cfg Config, index *Index) *Authorizer {
	a := &Authorizer{index: index, superUsers: map[string]bool{}, allowIfNoACL: cfg.AllowIfNoACL}
	for _, u := range cfg.SuperUsers {
		a.superUsers[u] = true
	}
	return a
}

// Index returns the authorizer's ACLs.
func (a *Authorizer) Index() *Index { return a.index }

// WithIndex returns an authorizer with the same config over index.
func (a *Authorizer) WithIndex(index *Index) *Authorizer {
	return &Authorizer{index: index, superUsers: a.superUsers, allowIfNoACL: a.allowIfNoACL}
}

// Client is who asks: the connection's principal and its address as HostAddress writes
// it.
type Client struct {
	Principal Principal
	Host      string
}

// Action is what a client asks to do: an operation on the literal resource (type, name).
type Action struct {
	Operation    Operation
	ResourceType ResourceType
	ResourceName string
}

// Rule says which rule decided: a super user, the ACL that matched, or the default (no
// ACL named the resource, so allow.everyone.if.no.acl.found; or ACLs named it and none
// allowed).
type Rule int8

const (
	RuleSuperUser Rule = iota
	RuleACL
	RuleNoACLs      // no ACL names the resource: allow.everyone.if.no.acl.found decided
	RuleNoneAllowed // ACLs name the resource, none matched this client and operation
)

// Decision is Authorize's answer.
type Decision struct {
	Allowed bool
	Rule    Rule
	ACL     ACL // the deciding ACL, for RuleACL
}

// Authorize decides one action, as StandardAuthorizerData.authorize: super users are
// allowed; otherwise, among the ACLs whose pattern matches the resource, a DENY that
// matches the client and operation wins, then an ALLOW that does; if none matches, the
// resource is denied when any ACL names it and gets allow.everyone.if.no.acl.found when
// none does.
func (a *Authorizer) Authorize(c Client, act Action) Decision {
	if a.superUsers[c.Principal.String()] {
		return Decision{Allowed: true, Rule: RuleSuperUser}
	}
	var allow *ACL
	named := false
	var deny ACL
	denied := false
	a.index.visit(act.ResourceType, act.ResourceName, func(acl ACL) bool {
		named = true
		switch matchEntry(acl.Binding, c, act.Operation) {
		case Deny:
			deny, denied = acl, true
			return false
		case Allow:
			if allow == nil {
				allow = &acl
			}
		}
		return true
	})
	switch {
	case denied:
		return Decision{Rule: RuleACL, ACL: deny}
	case allow != nil:
		return Decision{Allowed: true, Rule: RuleACL, ACL: *allow}
	case !named:
		return Decision{Allowed: a.allowIfNoACL, Rule: RuleNoACLs}
	default:
		return Decision{Rule: RuleNoneAllowed}
	}
}

// Allowed is Authorize(c, act).Allowed.
func (a *Authorizer) Allowed(c Client, act Action) bool { return a.Authorize(c, act).Allowed }

// matchEntry is StandardAuthorizerData.findResult for an ACL whose pattern matches the
// resource: Allow or Deny when the ACL's principal, host and operation apply to the
// client and op, 0 when they do not. Implication (DESCRIBE from READ, WRITE, DELETE and
// ALTER; DESCRIBE_CONFIGS from ALTER_CONFIGS) applies to ALLOW only: a DENY of READ does
// not deny DESCRIBE.
func matchEntry(b Binding, c Client, op Operation) Permission {
	if !principalMatches(b.Principal, c.Principal) || !hostMatches(b.Host, c.Host) {
		return 0
	}
	if b.Operation != OpAll {
		if b.Permission == Allow {
			switch op {
			case OpDescribe:
				switch b.Operation {
				case OpDescribe, OpRead, OpWrite, OpDelete, OpAlter:
				default:
					return 0
				}
			case OpDescribeConfigs:
				if b.Operation != OpDescribeConfigs && b.Operation != OpAlterConfigs {
					return 0
				}
			default:
				if b.Operation != op {
					return 0
				}
			}
		} else if b.Operation != op {
			return 0
		}
	}
	if b.Permission == Allow {
		return Allow
	}
	return Deny
}

// principalMatches: the ACL names the client's principal (type and name, compared as
// Kafka compares KafkaPrincipals) or is User:*.
func principalMatches(aclPrincipal string, p Principal) bool {
	if aclPrincipal == WildcardPrincipal {
		return true
	}
	ap, err := ParsePrincipal(aclPrincipal)
	return err == nil && ap == p
}

// ErrFilterArgument is AuthorizeByResourceType's refusal of a filter-only or unknown
// operation or resource type (Kafka throws IllegalArgumentException).
var ErrFilterArgument = errors.New("acl: authorizeByResourceType needs a concrete operation and resource type")

// AuthorizeByResourceType reports whether the client may do op on at least one resource
// of type rt, Kafka's Authorizer.authorizeByResourceType default (which StandardAuthorizer
// keeps): the broker asks it whether a producer may write idempotently
// (IDEMPOTENT_WRITE on the cluster, or WRITE on any transactional id) and for the other
// "any resource of this type" checks.
//
// The rule, exactly Kafka's: allowed if Authorize allows op on a resource named
// "hardcode" (so super users, and a type with no ACLs under allow.everyone.if.no.acl.found,
// are allowed); otherwise only the client's ACLs for op itself or ALL count (no implied
// operations): a literal "*" DENY denies; a literal "*" ALLOW allows; otherwise allowed if
// some ALLOW's name is neither denied literally (for a literal ALLOW) nor starts with a
// prefixed DENY's name.
func (a *Authorizer) AuthorizeByResourceType(c Client, op Operation, rt ResourceType) (bool, error) {
	if normalize(rt, maxResourceType) < ResourceTopic || normalize(op, maxOperation) <= OpAny {
		return false, ErrFilterArgument
	}
	if a.Allowed(c, Action{Operation: op, ResourceType: rt, ResourceName: "hardcode"}) {
		return true, nil
	}
	denyLiteral := map[string]bool{}
	denyPrefix := map[string]bool{}
	var allowLiteral, allowPrefix []string
	wildcardAllow := false
	wildcardDeny := false
	a.index.ofType(rt, func(acl ACL) {
		if !hostMatches(acl.Host, c.Host) || !principalMatches(acl.Principal, c.Principal) {
			return
		}
		if acl.Operation != op && acl.Operation != OpAll {
			return
		}
		literal := acl.PatternType == PatternLiteral
		switch acl.Permission {
		case Deny:
			switch {
			case literal && acl.ResourceName == Wildcard:
				wildcardDeny = true
			case literal:
				denyLiteral[acl.ResourceName] = true
			default:
				denyPrefix[acl.ResourceName] = true
			}
		case Allow:
			switch {
			case literal && acl.ResourceName == Wildcard:
				wildcardAllow = true
			case literal:
				allowLiteral = append(allowLiteral, acl.ResourceName)
			default:
				allowPrefix = append(allowPrefix, acl.ResourceName)
			}
		}
	})
	// Kafka returns DENIED at the first wildcard DENY it meets, before it can have
	// counted a wildcard ALLOW; a wildcard DENY wins whatever the order.
	if wildcardDeny {
		return false, nil
	}
	if wildcardAllow {
		return true, nil
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !denyLiteral[n] && !dominated(n) {
			return true, nil
		}
	}
	for _, n := range allowPrefix {
		if !dominated(n) {
			return true, nil
		}
	}
	return false, nil
}

// SupportedOperations are the operations each resource type has (Kafka's
// AclEntry.supportedOperations), in code order: the operations IncludeAuthorizedOperations
// reports on.
func SupportedOperations(rt ResourceType) []Operation {
	switch rt {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	case ResourceGroup:
		return []Operation{OpRead, OpDelete, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	case ResourceCluster:
		return []Operation{OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite}
	case ResourceTransactionalID:
		return []Operation{OpWrite, OpDescribe, OpTwoPhaseCommit}
	case ResourceDelegationToken:
		return []Operation{OpDescribe}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens}
	}
	return nil
}

// AuthorizedOperations is the bit field Kafka answers for IncludeAuthorizedOperations:
// bit op set for each supported operation of the resource the client is allowed
// (Utils.to32BitField of the allowed operations' codes).
func (a *Authorizer) AuthorizedOperations(c Client, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(rt) {
		if a.Allowed(c, Action{Operation: op, ResourceType: rt, ResourceName: name}) {
			bits |= 1 << op
		}
	}
	return bits
}
