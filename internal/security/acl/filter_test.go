package acl

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func str(s string) *string { return &s }

// TestFilterMatches is ResourcePatternFilter and AccessControlEntryFilter's table from
// Kafka's tests: ANY matches every pattern type by exact name, MATCH what would apply.
func TestFilterMatches(t *testing.T) {
	acls := map[string]Binding{
		"lit foo":  lit(ResourceTopic, "foo", "User:a", "*", OpRead, Allow),
		"lit *":    lit(ResourceTopic, "*", "User:a", "*", OpRead, Allow),
		"pre fo":   pre(ResourceTopic, "fo", "User:a", "*", OpRead, Allow),
		"pre foob": pre(ResourceTopic, "foob", "User:a", "*", OpRead, Allow),
		"group":    lit(ResourceGroup, "foo", "User:b", "10.0.0.1", OpWrite, Deny),
	}
	cases := []struct {
		name string
		f    Filter
		want []string
	}{
		{"match all", MatchAll, []string{"lit foo", "lit *", "pre fo", "pre foob", "group"}},
		{"ANY pattern, name exact", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, []string{"lit foo"}},
		{"ANY pattern, name *", Filter{ResourceType: ResourceTopic, ResourceName: str("*"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, []string{"lit *"}},
		{"MATCH foo", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []string{"lit foo", "lit *", "pre fo"}},
		{"MATCH without a name", Filter{ResourceType: ResourceTopic, PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []string{"lit foo", "lit *", "pre fo", "pre foob"}},
		{"PREFIXED exact name", Filter{ResourceType: ResourceTopic, ResourceName: str("fo"), PatternType: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, []string{"pre fo"}},
		{"LITERAL foo is not the wildcard", Filter{ResourceType: ResourceTopic, ResourceName: str("foo"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, []string{"lit foo"}},
		{"principal exact, no wildcard expansion", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: str("User:*"), Operation: OpAny, Permission: PermissionAny}, nil},
		{"host and operation", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Host: str("10.0.0.1"), Operation: OpWrite, Permission: Deny}, []string{"group"}},
		{"operation ALL is a value, not ANY", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAll, Permission: PermissionAny}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := map[string]bool{}
			for _, w := range c.want {
				want[w] = true
			}
			for name, b := range acls {
				if got := c.f.Matches(b); got != want[name] {
					t.Errorf("%s: Matches = %v, want %v", name, got, want[name])
				}
			}
		})
	}
}

func TestParseFilters(t *testing.T) {
	f := Filter{ResourceType: ResourceTopic, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	got, err := ParseDescribeFilter(0, f)
	if err != nil || got.PatternType != PatternLiteral {
		t.Fatalf("v0 ANY: %+v, %v; want LITERAL", got, err)
	}
	f.PatternType = PatternPrefixed
	if _, err := ParseDescribeFilter(0, f); !errors.Is(err, ErrMalformed) {
		t.Fatalf("v0 PREFIXED: %v, want ErrMalformed", err)
	}
	if _, err := ParseDescribeFilter(1, f); err != nil {
		t.Fatalf("v1 PREFIXED: %v", err)
	}
	f.Operation = 0
	if _, err := ParseDescribeFilter(1, f); !errors.Is(err, ErrMalformed) {
		t.Fatalf("operation 0: %v, want ErrMalformed", err)
	}
	// A code Kafka does not know: describe matches nothing, delete answers INVALID_REQUEST.
	f.Operation = 99
	got, err = ParseDescribeFilter(1, f)
	if err != nil || got.Operation != 0 {
		t.Fatalf("operation 99: %+v, %v", got, err)
	}
	ix := mustIndex(t, lit(ResourceTopic, "t", "User:a", "*", OpRead, Allow))
	if m := ix.Match(got); len(m) != 0 {
		t.Fatalf("an unknown operation matched %v", m)
	}
	ds, err := ParseDeleteFilters(1, []Filter{MatchAll, f})
	if err != nil || ds[0].ErrorCode != 0 || ds[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("ParseDeleteFilters = %+v, %v", ds, err)
	}
	f.Operation = 0
	if _, err := ParseDeleteFilters(1, []Filter{MatchAll, f}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("delete with operation 0: %v", err)
	}
}

func TestValidateCreations(t *testing.T) {
	ok := lit(ResourceTopic, "t", "User:a", "*", OpRead, Allow)
	with := func(f func(*Binding)) Binding { b := ok; f(&b); return b }
	invalid := kerr.InvalidRequest.Code
	cases := []struct {
		name string
		b    Binding
		want int16
	}{
		{"valid", ok, 0},
		{"prefixed", with(func(b *Binding) { b.PatternType = PatternPrefixed }), 0},
		{"CIDR host", with(func(b *Binding) { b.Host = "10.0.0.0/8" }), 0},
		{"IPv6 CIDR host", with(func(b *Binding) { b.Host = "fd00::/8" }), 0},
		{"empty principal name is a principal", with(func(b *Binding) { b.Principal = "User:" }), 0},
		{"cluster named kafka-cluster", with(func(b *Binding) { b.ResourceType, b.ResourceName = ResourceCluster, ClusterName }), 0},
		{"cluster named otherwise", with(func(b *Binding) { b.ResourceType, b.ResourceName = ResourceCluster, "c" }), invalid},
		{"empty name", with(func(b *Binding) { b.ResourceName = "" }), invalid},
		{"principal without a colon", with(func(b *Binding) { b.Principal = "alice" }), invalid},
		{"empty host", with(func(b *Binding) { b.Host = "" }), invalid},
		{"bad CIDR", with(func(b *Binding) { b.Host = "10.0.0.0/33" }), invalid},
		{"resource type Kafka does not know", with(func(b *Binding) { b.ResourceType = 42 }), invalid},
		{"pattern type Kafka does not know", with(func(b *Binding) { b.PatternType = 9 }), invalid},
		{"operation Kafka does not know", with(func(b *Binding) { b.Operation = 16 }), invalid},
		{"permission Kafka does not know", with(func(b *Binding) { b.Permission = 4 }), invalid},
		{"two-phase commit is known", with(func(b *Binding) { b.ResourceType, b.Operation = ResourceTransactionalID, OpTwoPhaseCommit }), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := ValidateCreations(1, []Binding{ok, c.b})
			if err != nil {
				t.Fatal(err)
			}
			if rs[0].ErrorCode != 0 || rs[1].ErrorCode != c.want {
				t.Fatalf("results %+v, want [0 %d]", rs, c.want)
			}
			if c.want == 0 && rs[1].Binding.Host != c.b.Host {
				t.Fatalf("binding not returned: %+v", rs[1])
			}
		})
	}
	// Filter-only values fail the whole request with UNKNOWN_SERVER_ERROR (Kafka's
	// AclBinding constructors throw IllegalArgumentException in the handler).
	for _, b := range []Binding{
		with(func(b *Binding) { b.ResourceType = ResourceAny }),
		with(func(b *Binding) { b.PatternType = PatternMatch }),
		with(func(b *Binding) { b.PatternType = PatternAny }),
		with(func(b *Binding) { b.Operation = OpAny }),
		with(func(b *Binding) { b.Permission = PermissionAny }),
	} {
		rs, err := ValidateCreations(1, []Binding{ok, b})
		if err != nil || rs[0].ErrorCode != kerr.UnknownServerError.Code || rs[1].ErrorCode != kerr.UnknownServerError.Code {
			t.Errorf("%v: %+v, %v; want every result UNKNOWN_SERVER_ERROR", b, rs, err)
		}
	}
	// Parse failures: UNKNOWN (0) codes, and a non-literal pattern at version 0.
	for _, c := range []struct {
		v int16
		b Binding
	}{
		{1, with(func(b *Binding) { b.ResourceType = 0 })},
		{1, with(func(b *Binding) { b.Operation = 0 })},
		{1, with(func(b *Binding) { b.Permission = 0 })},
		{1, with(func(b *Binding) { b.PatternType = 0 })},
		{0, with(func(b *Binding) { b.PatternType = PatternPrefixed })},
	} {
		if _, err := ValidateCreations(c.v, []Binding{ok, c.b}); !errors.Is(err, ErrMalformed) {
			t.Errorf("v%d %v: %v, want ErrMalformed", c.v, c.b, err)
		}
	}
}
