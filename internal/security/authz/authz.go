// Package authz is what every API checks before it acts: for each API key exactq serves,
// the ACL checks Kafka 4.4's KafkaApis (and ControllerApis, for the requests a broker
// forwards) makes, which resource each check reads from which request field, which
// operation it needs, and how a refusal is answered (the whole request, or the refused
// resource's entries, with TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// or the resource left out of the response). The table (Rules) is data, so the same
// entries drive the broker's handlers (Authorize, one call per request) and an
// authorization-matrix test (grant or withhold each check's ACLs, expect its code).
//
// Pure: the authorizer, the client and the request come in; a Decision goes out.
package authz

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

// Scope is how a refused check is answered.
type Scope int8

const (
	// Whole: the request is refused; its response carries Code everywhere it can (the
	// request's error response, as Kafka's getErrorResponse builds it).
	Whole Scope = iota
	// Each: the refused resources' entries carry Code; the rest of the request goes on.
	Each
	// Hide: refused resources are left out of the response as if they did not exist
	// (Kafka: "do not disclose the existence of topics unauthorized for Describe").
	Hide
)

func (s Scope) String() string {
	return [...]string{"whole request", "each resource", "hidden"}[s]
}

// Grant is one ACL decision that satisfies a check: Op on a resource of Type named by
// the check's field (CLUSTER is always kafka-cluster). ByType grants pass through
// Authorizer.AuthorizeByResourceType: Op on any resource of Type.
type Grant struct {
	Type   acl.ResourceType
	Op     acl.Operation
	ByType bool
}

// Check is one ACL check of an API, in the order Kafka makes them.
type Check struct {
	// Field names the request field the resource names come from ("GroupID",
	// "Topics[].Topic or TopicID"); "" for the cluster. A deferred check's field says
	// what the handler checks ("response: the groups listed").
	Field string
	// AnyOf: the check passes when any of these is allowed (CreateTopics: CREATE on the
	// cluster or on the topic).
	AnyOf []Grant
	Scope Scope
	// Code is the refusal's error code (Whole, Each; for Hide, what a resource the
	// request named explicitly gets, 0 if it is simply left out).
	Code int16
	// When says when the check applies, in words; "" always.
	When string
	// Deferred checks read what only the handler knows (the response's contents, the
	// image): Authorize skips them and the handler calls Allows.
	Deferred bool

	applies func(kmsg.Request) bool
	names   func(kmsg.Request, TopicNames) []string // nil: the cluster
}

// Rule is what one API key checks.
type Rule struct {
	Key    int16
	Name   string
	Checks []Check
	// Operations are the resource types whose IncludeAuthorizedOperations bit sets the
	// response carries (computed with Operations).
	Operations []acl.ResourceType
	// Notes is what else the handler must do to answer as Kafka does.
	Notes string
}

// TopicNames resolves a topic id to its name (false for an id the image lacks: the
// handler answers UNKNOWN_TOPIC_ID and no ACL is checked for it).
type TopicNames func(id [16]byte) (string, bool)

// Resource is a resource a check named: its ACL resource type (a config resource of type
// BROKER, BROKER_LOGGER or CLIENT_METRICS is CLUSTER, under its own name) and name.
type Resource struct {
	Type acl.ResourceType
	Name string
}

// Decision is what Authorize found.
type Decision struct {
	// Code, when not 0, refuses the whole request (Scope Whole).
	Code int16
	// Refused are the resources refused one by one (Scope Each), with their codes; the
	// first refusal of a resource is kept.
	Refused map[Resource]int16
	// Hidden are the resources to leave out of the response (Scope Hide), with the code a
	// resource the request named gets (0: simply absent).
	Hidden map[Resource]int16
}

// Allowed reports whether nothing was refused.
func (d Decision) Allowed() bool { return d.Code == 0 && len(d.Refused) == 0 && len(d.Hidden) == 0 }

// TopicCode is the code a topic's entries get (0: go on).
func (d Decision) TopicCode(name string) int16 { return d.Refused[Resource{acl.ResourceTopic, name}] }

// GroupCode is the code a group's entries get (0: go on).
func (d Decision) GroupCode(name string) int16 { return d.Refused[Resource{acl.ResourceGroup, name}] }

// TransactionalIDCode is the code a transactional id's entries get (0: go on).
func (d Decision) TransactionalIDCode(id string) int16 {
	return d.Refused[Resource{acl.ResourceTransactionalID, id}]
}

// IsHidden reports whether a resource is to be left out, and the code it gets if named.
func (d Decision) IsHidden(rt acl.ResourceType, name string) (bool, int16) {
	code, ok := d.Hidden[Resource{rt, name}]
	return ok, code
}

// Authorize makes every check of req's API key that the request itself names (not the
// deferred ones) for client c: Whole checks in order until one refuses, Each and Hide
// checks for every resource named. topics resolves topic ids. An API key without a rule
// is an error (a new API must be given its checks before it is served).
func Authorize(az *acl.Authorizer, c acl.Client, req kmsg.Request, topics TopicNames) (Decision, error) {
	r, ok := RuleOf(req)
	if !ok {
		return Decision{}, fmt.Errorf("authz: no rule for API key %d", req.Key())
	}
	var d Decision
	for _, a := range Applied(r, req, topics) {
		for _, name := range a.Names {
			if a.Check.Allows(az, c, name) {
				continue
			}
			if a.Check.Scope == Whole {
				return Decision{Code: a.Check.Code}, nil
			}
			d.refuse(a.Check, a.Type, name)
		}
	}
	return d, nil
}

// RuleOf is the rule of req's API key (TxnShareAcknowledge's whatever key it is served
// at).
func RuleOf(req kmsg.Request) (Rule, bool) {
	key := req.Key()
	if _, ok := req.(*wire.TxnShareAcknowledgeRequest); ok {
		key = wire.TxnShareAcknowledgeDefaultKey
	}
	r, ok := Rules[key]
	return r, ok
}

// AppliedCheck is a check that applies to a request, with the resources it names (the
// cluster's name for a cluster check) and their type.
type AppliedCheck struct {
	Check Check
	Type  acl.ResourceType
	Names []string
}

// Applied are the checks of r that Authorize makes on req, in order: what an
// authorization-matrix test grants and withholds.
func Applied(r Rule, req kmsg.Request, topics TopicNames) []AppliedCheck {
	var out []AppliedCheck
	for _, ch := range r.Checks {
		if ch.Deferred || (ch.applies != nil && !ch.applies(req)) {
			continue
		}
		a := AppliedCheck{Check: ch, Type: ch.resourceType()}
		if ch.names == nil {
			a.Names = []string{acl.ClusterName}
		} else if a.Names = ch.names(req, topics); len(a.Names) == 0 {
			continue
		}
		out = append(out, a)
	}
	return out
}

func (d *Decision) refuse(ch Check, rt acl.ResourceType, name string) {
	res := Resource{rt, name}
	m := &d.Refused
	if ch.Scope == Hide {
		m = &d.Hidden
	}
	if *m == nil {
		*m = map[Resource]int16{}
	}
	if _, seen := (*m)[res]; !seen {
		(*m)[res] = ch.Code
	}
}

// resourceType is the type of the resources the check's field names: its first grant
// that is not on the cluster (CLUSTER when all are).
func (ch Check) resourceType() acl.ResourceType {
	for _, g := range ch.AnyOf {
		if g.Type != acl.ResourceCluster {
			return g.Type
		}
	}
	return acl.ResourceCluster
}

// Allows reports whether c passes the check for the resource named name (ignored by
// cluster grants): the handler's call for deferred checks.
func (ch Check) Allows(az *acl.Authorizer, c acl.Client, name string) bool {
	for _, g := range ch.AnyOf {
		switch {
		case g.ByType:
			if ok, _ := az.AuthorizeByResourceType(c, g.Op, g.Type); ok {
				return true
			}
		case g.Type == acl.ResourceCluster:
			if az.Allowed(c, acl.Action{Operation: g.Op, ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName}) {
				return true
			}
		default:
			if az.Allowed(c, acl.Action{Operation: g.Op, ResourceType: g.Type, ResourceName: name}) {
				return true
			}
		}
	}
	return false
}

// Deferred returns the deferred check of key whose field is field, for the handler to
// call Allows on.
func Deferred(key int16, field string) (Check, bool) {
	for _, ch := range Rules[key].Checks {
		if ch.Deferred && ch.Field == field {
			return ch, true
		}
	}
	return Check{}, false
}

// Operations is the IncludeAuthorizedOperations bit set of a resource as Kafka answers
// it: each supported operation the client is allowed; for the cluster, 0 unless the
// client may DESCRIBE it (AuthHelper: Metadata v8-10 and DescribeCluster).
func Operations(az *acl.Authorizer, c acl.Client, rt acl.ResourceType, name string) int32 {
	if rt == acl.ResourceCluster {
		if !az.Allowed(c, acl.Action{Operation: acl.OpDescribe, ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName}) {
			return 0
		}
		name = acl.ClusterName
	}
	return az.AuthorizedOperations(c, rt, name)
}
