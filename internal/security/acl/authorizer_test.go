package acl

import (
	"net/netip"
	"testing"
)

func lit(rt ResourceType, name, principal, host string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: PatternLiteral, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func pre(rt ResourceType, name, principal, host string, op Operation, perm Permission) Binding {
	b := lit(rt, name, principal, host, op, perm)
	b.PatternType = PatternPrefixed
	return b
}

func withIDs(bs ...Binding) []ACL {
	out := make([]ACL, len(bs))
	for i, b := range bs {
		out[i] = ACL{ID: ID{byte(i >> 8), byte(i), 1}, Binding: b}
	}
	return out
}

func mustIndex(t *testing.T, bs ...Binding) *Index {
	t.Helper()
	ix, err := NewIndex(withIDs(bs...))
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

var (
	alice = Client{Principal: Principal{Type: "User", Name: "alice"}, Host: "10.0.0.1"}
	bob   = Client{Principal: Principal{Type: "User", Name: "bob"}, Host: "10.0.0.2"}
)

func topic(op Operation, name string) Action {
	return Action{Operation: op, ResourceType: ResourceTopic, ResourceName: name}
}

// TestAuthorizeRules covers each of StandardAuthorizer's rules with the case Kafka's
// StandardAuthorizerTest uses for it, and the case that tells the rule from its
// neighbours.
func TestAuthorizeRules(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		acls     []Binding
		client   Client
		action   Action
		want     bool
		wantRule Rule
	}{
		{"no ACLs, default deny", Config{}, nil, alice, topic(OpRead, "t"), false, RuleNoACLs},
		{"no ACLs, allow.everyone.if.no.acl.found", Config{AllowIfNoACL: true}, nil, alice, topic(OpRead, "t"), true, RuleNoACLs},
		{"ACLs on the resource for someone else: denied even with allow.everyone",
			Config{AllowIfNoACL: true}, []Binding{lit(ResourceTopic, "t", "User:bob", "*", OpRead, Allow)}, alice, topic(OpRead, "t"), false, RuleNoneAllowed},
		{"ACLs on another resource only: allow.everyone applies",
			Config{AllowIfNoACL: true}, []Binding{lit(ResourceTopic, "u", "User:bob", "*", OpRead, Allow)}, alice, topic(OpRead, "t"), true, RuleNoACLs},
		{"a wildcard ACL for someone else names every topic",
			Config{AllowIfNoACL: true}, []Binding{lit(ResourceTopic, "*", "User:bob", "*", OpRead, Allow)}, alice, topic(OpRead, "t"), false, RuleNoneAllowed},
		{"a prefixed ACL for someone else names the topics it prefixes",
			Config{AllowIfNoACL: true}, []Binding{pre(ResourceTopic, "t", "User:bob", "*", OpRead, Allow)}, alice, topic(OpRead, "tx"), false, RuleNoneAllowed},
		{"same name on another resource type does not count",
			Config{AllowIfNoACL: true}, []Binding{lit(ResourceGroup, "t", "User:bob", "*", OpRead, Allow)}, alice, topic(OpRead, "t"), true, RuleNoACLs},
		{"literal allow", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "t"), true, RuleACL},
		{"literal is not a prefix", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "tt"), false, RuleNoACLs},
		{"prefixed allow", Config{}, []Binding{pre(ResourceTopic, "foo", "User:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "foobar"), true, RuleACL},
		{"prefixed matches its own name", Config{}, []Binding{pre(ResourceTopic, "foo", "User:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "foo"), true, RuleACL},
		{"prefixed is not a suffix", Config{}, []Binding{pre(ResourceTopic, "foo", "User:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "fo"), false, RuleNoACLs},
		{"wildcard resource", Config{}, []Binding{lit(ResourceTopic, "*", "User:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "anything"), true, RuleACL},
		{"prefixed * is a prefix, not a wildcard", Config{}, []Binding{pre(ResourceTopic, "*", "User:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "anything"), false, RuleNoACLs},
		{"wildcard principal", Config{}, []Binding{lit(ResourceTopic, "t", "User:*", "*", OpRead, Allow)}, alice, topic(OpRead, "t"), true, RuleACL},
		{"principal type counts", Config{}, []Binding{lit(ResourceTopic, "t", "Group:alice", "*", OpRead, Allow)}, alice, topic(OpRead, "t"), false, RuleNoneAllowed},
		{"host literal", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "10.0.0.1", OpRead, Allow)}, alice, topic(OpRead, "t"), true, RuleACL},
		{"other host", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "10.0.0.9", OpRead, Allow)}, alice, topic(OpRead, "t"), false, RuleNoneAllowed},
		{"host CIDR", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "10.0.0.0/24", OpRead, Allow)}, alice, topic(OpRead, "t"), true, RuleACL},
		{"host outside CIDR", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "10.0.1.0/24", OpRead, Allow)}, alice, topic(OpRead, "t"), false, RuleNoneAllowed},
		{"deny wins over allow", Config{}, []Binding{
			lit(ResourceTopic, "t", "User:alice", "*", OpRead, Allow),
			lit(ResourceTopic, "t", "User:alice", "*", OpRead, Deny)}, alice, topic(OpRead, "t"), false, RuleACL},
		{"wildcard deny wins over literal allow", Config{}, []Binding{
			lit(ResourceTopic, "t", "User:alice", "*", OpRead, Allow),
			lit(ResourceTopic, "*", "User:*", "*", OpRead, Deny)}, alice, topic(OpRead, "t"), false, RuleACL},
		{"prefixed deny wins over literal allow", Config{}, []Binding{
			lit(ResourceTopic, "foobar", "User:alice", "*", OpAll, Allow),
			pre(ResourceTopic, "foo", "User:alice", "10.0.0.0/8", OpWrite, Deny)}, alice, topic(OpWrite, "foobar"), false, RuleACL},
		{"deny for another host does not apply", Config{}, []Binding{
			lit(ResourceTopic, "t", "User:alice", "*", OpRead, Allow),
			lit(ResourceTopic, "t", "User:alice", "10.0.0.2", OpRead, Deny)}, alice, topic(OpRead, "t"), true, RuleACL},
		{"READ implies DESCRIBE", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpRead, Allow)}, alice, topic(OpDescribe, "t"), true, RuleACL},
		{"WRITE implies DESCRIBE", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpWrite, Allow)}, alice, topic(OpDescribe, "t"), true, RuleACL},
		{"DELETE implies DESCRIBE", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpDelete, Allow)}, alice, topic(OpDescribe, "t"), true, RuleACL},
		{"ALTER implies DESCRIBE", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpAlter, Allow)}, alice, topic(OpDescribe, "t"), true, RuleACL},
		{"CREATE does not imply DESCRIBE", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpCreate, Allow)}, alice, topic(OpDescribe, "t"), false, RuleNoneAllowed},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpAlterConfigs, Allow)}, alice, topic(OpDescribeConfigs, "t"), true, RuleACL},
		{"ALTER does not imply DESCRIBE_CONFIGS", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpAlter, Allow)}, alice, topic(OpDescribeConfigs, "t"), false, RuleNoneAllowed},
		{"implication is one way: DESCRIBE does not allow READ", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpDescribe, Allow)}, alice, topic(OpRead, "t"), false, RuleNoneAllowed},
		{"DENY READ does not deny DESCRIBE", Config{}, []Binding{
			lit(ResourceTopic, "t", "User:alice", "*", OpWrite, Allow),
			lit(ResourceTopic, "t", "User:alice", "*", OpRead, Deny)}, alice, topic(OpDescribe, "t"), true, RuleACL},
		{"ALLOW ALL allows everything", Config{}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpAll, Allow)}, alice, topic(OpAlterConfigs, "t"), true, RuleACL},
		{"DENY ALL denies everything", Config{}, []Binding{
			lit(ResourceTopic, "t", "User:*", "*", OpAll, Allow),
			lit(ResourceTopic, "t", "User:alice", "*", OpAll, Deny)}, alice, topic(OpDescribe, "t"), false, RuleACL},
		{"super user beats DENY", Config{SuperUsers: []string{"User:alice"}}, []Binding{lit(ResourceTopic, "t", "User:alice", "*", OpAll, Deny)}, alice, topic(OpRead, "t"), true, RuleSuperUser},
		{"super user is exact", Config{SuperUsers: []string{"User:Alice"}}, nil, alice, topic(OpRead, "t"), false, RuleNoACLs},
		{"cluster resource", Config{}, []Binding{lit(ResourceCluster, ClusterName, "User:alice", "*", OpIdempotentWrite, Allow)}, alice,
			Action{Operation: OpIdempotentWrite, ResourceType: ResourceCluster, ResourceName: ClusterName}, true, RuleACL},
		{"transactional id", Config{}, []Binding{pre(ResourceTransactionalID, "app-", "User:alice", "*", OpWrite, Allow)}, alice,
			Action{Operation: OpDescribe, ResourceType: ResourceTransactionalID, ResourceName: "app-1"}, true, RuleACL},
		{"user resource", Config{}, []Binding{lit(ResourceUser, "bob", "User:alice", "*", OpCreateTokens, Allow)}, alice,
			Action{Operation: OpCreateTokens, ResourceType: ResourceUser, ResourceName: "bob"}, true, RuleACL},
		{"delegation token", Config{}, []Binding{lit(ResourceDelegationToken, "tok", "User:alice", "*", OpDescribe, Allow)}, alice,
			Action{Operation: OpDescribe, ResourceType: ResourceDelegationToken, ResourceName: "tok"}, true, RuleACL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(c.cfg, mustIndex(t, c.acls...))
			d := a.Authorize(c.client, c.action)
			if d.Allowed != c.want || d.Rule != c.wantRule {
				t.Fatalf("Authorize = %+v, want allowed %v by rule %d", d, c.want, c.wantRule)
			}
		})
	}
}

// TestPrefixWalk is the example in StandardAuthorizerData.findAclRule's comment: many
// prefixes sharing and diverging, so the walk must jump past non-prefixes.
func TestPrefixWalk(t *testing.T) {
	bs := []Binding{
		pre(ResourceTopic, "gar", "User:alice", "*", OpRead, Allow),
		pre(ResourceTopic, "foobar", "User:alice", "*", OpWrite, Allow),
		lit(ResourceTopic, "foob", "User:alice", "*", OpAlter, Allow),
		pre(ResourceTopic, "foo", "User:alice", "*", OpDelete, Allow),
		pre(ResourceTopic, "fb", "User:alice", "*", OpCreate, Allow),
		pre(ResourceTopic, "fa", "User:alice", "*", OpCreate, Allow),
		pre(ResourceTopic, "f", "User:alice", "*", OpAlterConfigs, Allow),
		lit(ResourceTopic, "eeee", "User:alice", "*", OpCreate, Allow),
		pre(ResourceTopic, "fooa", "User:alice", "*", OpCreate, Allow),
		pre(ResourceTopic, "", "User:alice", "*", OpClusterAction, Allow),
	}
	a := New(Config{}, mustIndex(t, bs...))
	for op, want := range map[Operation]bool{
		OpWrite: true, OpDelete: true, OpAlterConfigs: true, OpClusterAction: true,
		OpRead: false, OpAlter: false, OpCreate: false,
	} {
		if got := a.Allowed(alice, topic(op, "foobar")); got != want {
			t.Errorf("%v on foobar: %v, want %v", op, got, want)
		}
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		acls []Binding
		op   Operation
		want bool
	}{
		{"no ACLs, default deny", Config{}, nil, OpWrite, false},
		{"no ACLs, allow everyone", Config{AllowIfNoACL: true}, nil, OpWrite, true},
		{"super user", Config{SuperUsers: []string{"User:alice"}}, []Binding{lit(ResourceTransactionalID, "*", "User:*", "*", OpAll, Deny)}, OpWrite, true},
		{"one literal allow", Config{}, []Binding{lit(ResourceTransactionalID, "x", "User:alice", "*", OpWrite, Allow)}, OpWrite, true},
		{"no implied operations", Config{}, []Binding{lit(ResourceTransactionalID, "x", "User:alice", "*", OpWrite, Allow)}, OpDescribe, false},
		{"ALL counts", Config{}, []Binding{pre(ResourceTransactionalID, "x", "User:alice", "*", OpAll, Allow)}, OpWrite, true},
		{"literal allow denied literally", Config{}, []Binding{
			lit(ResourceTransactionalID, "x", "User:alice", "*", OpWrite, Allow),
			lit(ResourceTransactionalID, "x", "User:alice", "*", OpWrite, Deny)}, OpWrite, false},
		{"literal allow dominated by prefixed deny", Config{}, []Binding{
			lit(ResourceTransactionalID, "abc", "User:alice", "*", OpWrite, Allow),
			pre(ResourceTransactionalID, "ab", "User:alice", "*", OpWrite, Deny)}, OpWrite, false},
		{"prefixed allow dominated by shorter prefixed deny", Config{}, []Binding{
			pre(ResourceTransactionalID, "abc", "User:alice", "*", OpWrite, Allow),
			pre(ResourceTransactionalID, "a", "User:alice", "*", OpWrite, Deny)}, OpWrite, false},
		{"prefixed allow not dominated by a longer prefixed deny", Config{}, []Binding{
			pre(ResourceTransactionalID, "ab", "User:alice", "*", OpWrite, Allow),
			pre(ResourceTransactionalID, "abc", "User:alice", "*", OpWrite, Deny)}, OpWrite, true},
		{"prefixed allow not dominated by a literal deny", Config{}, []Binding{
			pre(ResourceTransactionalID, "ab", "User:alice", "*", OpWrite, Allow),
			lit(ResourceTransactionalID, "ab", "User:alice", "*", OpWrite, Deny)}, OpWrite, true},
		{"wildcard deny", Config{}, []Binding{
			lit(ResourceTransactionalID, "x", "User:alice", "*", OpWrite, Allow),
			lit(ResourceTransactionalID, "*", "User:alice", "*", OpWrite, Deny)}, OpWrite, false},
		{"wildcard allow beats a prefixed deny", Config{}, []Binding{
			lit(ResourceTransactionalID, "*", "User:*", "*", OpWrite, Allow),
			pre(ResourceTransactionalID, "", "User:alice", "*", OpWrite, Deny)}, OpWrite, true},
		{"other host", Config{}, []Binding{lit(ResourceTransactionalID, "x", "User:alice", "10.9.9.9", OpWrite, Allow)}, OpWrite, false},
		{"other principal", Config{}, []Binding{lit(ResourceTransactionalID, "x", "User:bob", "*", OpWrite, Allow)}, OpWrite, false},
		{"the hardcode probe: a prefix of 'hardcode' allows", Config{}, []Binding{
			pre(ResourceTransactionalID, "h", "User:alice", "*", OpWrite, Allow),
			lit(ResourceTransactionalID, "*", "User:alice", "*", OpWrite, Deny)}, OpWrite, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(c.cfg, mustIndex(t, c.acls...))
			got, err := a.AuthorizeByResourceType(alice, c.op, ResourceTransactionalID)
			if err != nil || got != c.want {
				t.Fatalf("AuthorizeByResourceType = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	a := New(Config{}, Empty())
	for _, bad := range []struct {
		op Operation
		rt ResourceType
	}{{OpAny, ResourceTopic}, {0, ResourceTopic}, {OpRead, ResourceAny}, {OpRead, 0}, {OpRead, 42}} {
		if _, err := a.AuthorizeByResourceType(alice, bad.op, bad.rt); err == nil {
			t.Errorf("AuthorizeByResourceType(%v, %v) accepted", bad.op, bad.rt)
		}
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := New(Config{}, mustIndex(t,
		lit(ResourceTopic, "t", "User:alice", "*", OpRead, Allow),
		lit(ResourceTopic, "t", "User:alice", "*", OpAlterConfigs, Allow)))
	want := int32(1<<OpRead | 1<<OpDescribe | 1<<OpAlterConfigs | 1<<OpDescribeConfigs)
	if got := a.AuthorizedOperations(alice, ResourceTopic, "t"); got != want {
		t.Fatalf("AuthorizedOperations = %b, want %b", got, want)
	}
	if got := a.AuthorizedOperations(bob, ResourceTopic, "t"); got != 0 {
		t.Fatalf("bob's AuthorizedOperations = %b, want 0", got)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(" User:admin ;; User:ops;", "TRUE")
	if err != nil || len(c.SuperUsers) != 2 || c.SuperUsers[0] != "User:admin" || c.SuperUsers[1] != "User:ops" || !c.AllowIfNoACL {
		t.Fatalf("ParseConfig = %+v, %v", c, err)
	}
	if c, _ := ParseConfig("", "yes"); c.AllowIfNoACL {
		t.Fatal("allow.everyone.if.no.acl.found=yes read as true (Java's parseBoolean says false)")
	}
	if _, err := ParseConfig("admin", ""); err == nil {
		t.Fatal("a super user without a principal type was accepted")
	}
}

func TestHostAddress(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":            "10.0.0.1",
		"::ffff:10.0.0.1":     "10.0.0.1",
		"::1":                 "0:0:0:0:0:0:0:1",
		"fe80::1%eth0":        "fe80:0:0:0:0:0:0:1%eth0",
		"2001:db8::abcd:12":   "2001:db8:0:0:0:0:abcd:12",
		"2001:0db8:0:0:1::ff": "2001:db8:0:0:1:0:0:ff",
	} {
		if got := HostAddress(netip.MustParseAddr(in)); got != want {
			t.Errorf("HostAddress(%s) = %s, want %s", in, got, want)
		}
	}
	// An IPv6 client matches an IPv6 block, written the way Java writes the address.
	a := New(Config{}, mustIndex(t, lit(ResourceTopic, "t", "User:alice", "fd00::/8", OpRead, Allow)))
	c := Client{Principal: alice.Principal, Host: HostAddress(netip.MustParseAddr("fd00::5"))}
	if !a.Allowed(c, topic(OpRead, "t")) {
		t.Fatal("fd00::5 not in fd00::/8")
	}
}
