package acl

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// model is the naive reference: a list of ACLs and Kafka's rules read off its javadoc,
// checked against every ACL on every call.
type model struct {
	acls         []ACL
	superUsers   []string
	allowIfNoACL bool
}

func (m *model) patternApplies(b Binding, rt ResourceType, name string) bool {
	if b.ResourceType != rt {
		return false
	}
	if b.PatternType == PatternLiteral {
		return b.ResourceName == name || b.ResourceName == "*"
	}
	return strings.HasPrefix(name, b.ResourceName)
}

func (m *model) entryApplies(b Binding, c Client, op Operation) bool {
	if b.Principal != "User:*" && b.Principal != c.Principal.Type+":"+c.Principal.Name {
		return false
	}
	if !hostMatches(b.Host, c.Host) {
		return false
	}
	if b.Operation == OpAll || b.Operation == op {
		return true
	}
	if b.Permission != Allow {
		return false
	}
	implied := map[Operation][]Operation{
		OpDescribe:        {OpRead, OpWrite, OpDelete, OpAlter},
		OpDescribeConfigs: {OpAlterConfigs},
	}
	return slices.Contains(implied[op], b.Operation)
}

func (m *model) authorize(c Client, act Action) bool {
	if slices.Contains(m.superUsers, c.Principal.String()) {
		return true
	}
	named, allowed := false, false
	for _, a := range m.acls {
		if !m.patternApplies(a.Binding, act.ResourceType, act.ResourceName) {
			continue
		}
		named = true
		if m.entryApplies(a.Binding, c, act.Operation) {
			if a.Permission == Deny {
				return false
			}
			allowed = true
		}
	}
	if !named {
		return m.allowIfNoACL
	}
	return allowed
}

// authorizeByResourceType is Kafka's default method, line for line over the list.
func (m *model) authorizeByResourceType(c Client, op Operation, rt ResourceType) bool {
	if m.authorize(c, Action{Operation: op, ResourceType: rt, ResourceName: "hardcode"}) {
		return true
	}
	denyLit, denyPre := map[string]bool{}, map[string]bool{}
	allowLit, allowPre := map[string]bool{}, map[string]bool{}
	wildAllow := false
	for _, a := range m.acls {
		if a.ResourceType != rt {
			continue
		}
		if a.Host != c.Host && a.Host != "*" && !hostMatches(a.Host, c.Host) {
			continue
		}
		if a.Principal != c.Principal.String() && a.Principal != "User:*" {
			continue
		}
		if a.Operation != op && a.Operation != OpAll {
			continue
		}
		if a.Permission == Deny {
			if a.PatternType == PatternLiteral {
				if a.ResourceName == "*" {
					return false
				}
				denyLit[a.ResourceName] = true
			} else {
				denyPre[a.ResourceName] = true
			}
			continue
		}
		if a.PatternType == PatternLiteral {
			if a.ResourceName == "*" {
				wildAllow = true
				continue
			}
			allowLit[a.ResourceName] = true
		} else {
			allowPre[a.ResourceName] = true
		}
	}
	if wildAllow {
		return true
	}
	check := func(s string, literal bool) bool {
		if literal && denyLit[s] {
			return false
		}
		for i := range s {
			if denyPre[s[:i+1]] {
				return false
			}
		}
		return true
	}
	for s := range allowLit {
		if check(s, true) {
			return true
		}
	}
	for s := range allowPre {
		if check(s, false) {
			return true
		}
	}
	return false
}

func (m *model) match(f Filter) []ACL {
	var out []ACL
	for _, a := range m.acls {
		if f.Matches(a.Binding) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, Order)
	return out
}

// Small alphabets, so that names share prefixes, principals and hosts collide.
var (
	genName      = rapid.StringOfN(rapid.SampledFrom([]rune("ab*")), 0, 3, -1)
	genPrincipal = rapid.SampledFrom([]string{"User:alice", "User:bob", "User:*", "Group:alice"})
	genHost      = rapid.SampledFrom([]string{"*", "10.0.0.1", "10.0.0.2", "10.0.0.0/30", "0:0:0:0:0:0:0:1", "::/0"})
	genOp        = rapid.Custom(func(t *rapid.T) Operation {
		return Operation(rapid.IntRange(int(OpAll), int(OpTwoPhaseCommit)).Draw(t, "op"))
	})
	genType    = rapid.SampledFrom([]ResourceType{ResourceTopic, ResourceGroup, ResourceTransactionalID})
	genBinding = rapid.Custom(func(t *rapid.T) Binding {
		return Binding{
			ResourceType: genType.Draw(t, "type"),
			ResourceName: genName.Draw(t, "name"),
			PatternType:  rapid.SampledFrom([]PatternType{PatternLiteral, PatternPrefixed}).Draw(t, "pattern"),
			Principal:    genPrincipal.Draw(t, "principal"),
			Host:         genHost.Draw(t, "host"),
			Operation:    genOp.Draw(t, "operation"),
			Permission:   rapid.SampledFrom([]Permission{Allow, Deny}).Draw(t, "permission"),
		}
	})
	genClient = rapid.Custom(func(t *rapid.T) Client {
		p, _ := ParsePrincipal(rapid.SampledFrom([]string{"User:alice", "User:bob", "Group:alice", "User:carol"}).Draw(t, "client"))
		return Client{Principal: p, Host: rapid.SampledFrom([]string{"10.0.0.1", "10.0.0.2", "10.0.0.9", "0:0:0:0:0:0:0:1"}).Draw(t, "clientHost")}
	})
	genOptString = func(g *rapid.Generator[string], label string) *rapid.Generator[*string] {
		return rapid.Custom(func(t *rapid.T) *string {
			if rapid.Bool().Draw(t, label+"Nil") {
				return nil
			}
			s := g.Draw(t, label)
			return &s
		})
	}
	genFilter = rapid.Custom(func(t *rapid.T) Filter {
		return Filter{
			ResourceType: rapid.SampledFrom([]ResourceType{ResourceAny, ResourceTopic, ResourceGroup, ResourceTransactionalID}).Draw(t, "ftype"),
			ResourceName: genOptString(genName, "fname").Draw(t, "fname"),
			PatternType:  rapid.SampledFrom([]PatternType{PatternAny, PatternMatch, PatternLiteral, PatternPrefixed}).Draw(t, "fpattern"),
			Principal:    genOptString(genPrincipal, "fprincipal").Draw(t, "fprincipal"),
			Host:         genOptString(genHost, "fhost").Draw(t, "fhost"),
			Operation:    rapid.SampledFrom([]Operation{OpAny, OpAll, OpRead, OpWrite, OpDescribe}).Draw(t, "fop"),
			Permission:   rapid.SampledFrom([]Permission{PermissionAny, Allow, Deny}).Draw(t, "fperm"),
		}
	})
)

// TestMatchesModel drives the index through a random history of deltas and checks, after
// each, every decision against the naive model: Authorize, AuthorizeByResourceType,
// filter matching, the ACL count, and that the delta-built index equals one built from
// scratch.
func TestMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &model{allowIfNoACL: rapid.Bool().Draw(t, "allowIfNoACL")}
		if rapid.Bool().Draw(t, "superUser") {
			m.superUsers = []string{"User:bob"}
		}
		cfg := Config{SuperUsers: m.superUsers, AllowIfNoACL: m.allowIfNoACL}
		ix := Empty()
		nextID := 0
		for step := range rapid.IntRange(1, 6).Draw(t, "steps") {
			var added, removed []ACL
			for range rapid.IntRange(0, 8).Draw(t, "adds") {
				nextID++
				added = append(added, ACL{ID: ID{byte(nextID >> 8), byte(nextID)}, Binding: genBinding.Draw(t, "binding")})
			}
			if len(m.acls) > 0 {
				for _, i := range rapid.SliceOfNDistinct(rapid.IntRange(0, len(m.acls)-1), 0, len(m.acls), rapid.ID[int]).Draw(t, "removes") {
					removed = append(removed, m.acls[i])
				}
			}
			var err error
			ix, err = ix.Apply(added, removed)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			m.acls = slices.DeleteFunc(m.acls, func(a ACL) bool { return slices.Contains(removed, a) })
			m.acls = append(m.acls, added...)

			if ix.Len() != len(m.acls) {
				t.Fatalf("Len %d, model %d", ix.Len(), len(m.acls))
			}
			fresh, err := NewIndex(m.acls)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ix.All(), fresh.All()) {
				t.Fatalf("delta-built index differs from a fresh one")
			}
			a := New(cfg, ix)
			for range 20 {
				c := genClient.Draw(t, "client")
				act := Action{Operation: genOp.Draw(t, "aop"), ResourceType: genType.Draw(t, "atype"), ResourceName: genName.Draw(t, "aname")}
				if got, want := a.Allowed(c, act), m.authorize(c, act); got != want {
					t.Fatalf("Authorize(%+v, %+v) = %v, model %v; ACLs %v", c, act, got, want, m.acls)
				}
				got, err := a.AuthorizeByResourceType(c, act.Operation, act.ResourceType)
				if want := m.authorizeByResourceType(c, act.Operation, act.ResourceType); err != nil || got != want {
					t.Fatalf("AuthorizeByResourceType(%+v, %v, %v) = %v, %v; model %v; ACLs %v", c, act.Operation, act.ResourceType, got, err, want, m.acls)
				}
				f := genFilter.Draw(t, "filter")
				if got, want := ix.Match(f), m.match(f); !slices.Equal(got, want) {
					t.Fatalf("Match(%+v) = %v, model %v", f, got, want)
				}
			}
		}
	})
}

// TestApplyRefuses checks the deltas no metadata log can produce are refused whole.
func TestApplyRefuses(t *testing.T) {
	acls := withIDs(lit(ResourceTopic, "t", "User:a", "*", OpRead, Allow), pre(ResourceTopic, "t", "User:a", "*", OpRead, Allow))
	ix, err := NewIndex(acls)
	if err != nil {
		t.Fatal(err)
	}
	other := acls[0]
	other.ID = ID{9}
	for name, d := range map[string][2][]ACL{
		"remove unknown":      {nil, {other}},
		"add twice":           {{acls[1]}, nil},
		"any resource type":   {{{ID: ID{8}, Binding: lit(ResourceAny, "t", "User:a", "*", OpRead, Allow)}}, nil},
		"match pattern":       {{{ID: ID{8}, Binding: Binding{ResourceType: ResourceTopic, PatternType: PatternMatch}}}, nil},
		"remove then missing": {nil, {acls[0], acls[0]}},
	} {
		if _, err := ix.Apply(d[0], d[1]); err == nil {
			t.Errorf("%s: applied", name)
		}
	}
	if ix.Len() != 2 || len(ix.All()) != 2 {
		t.Fatal("a refused delta changed the index")
	}
	// Removing an ACL and adding it back in one delta is a replacement.
	if _, err := ix.Apply(acls[:1], acls[:1]); err != nil {
		t.Fatal(err)
	}
}
