package acl

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Index is an immutable set of ACLs arranged for Authorize: per resource type, the
// literal ACLs by resource name (the wildcard "*" among them) and the prefixed ACLs in a
// slice sorted by prefix, so finding the ACLs that apply to one resource costs a map
// look-up and a few binary searches, never a scan of every ACL. Apply returns a new
// Index sharing everything the delta did not touch.
type Index struct {
	sections map[ResourceType]*section
	count    int
}

type section struct {
	literal map[string][]ACL // resource name → its LITERAL ACLs
	prefix  []prefixGroup    // sorted by name, names distinct
	count   int
}

type prefixGroup struct {
	name string
	acls []ACL
}

// Empty is the index of no ACLs.
func Empty() *Index { return &Index{sections: map[ResourceType]*section{}} }

// NewIndex builds the index of acls.
func NewIndex(acls []ACL) (*Index, error) {
	return Empty().Apply(acls, nil)
}

// Len is the number of ACLs.
func (ix *Index) Len() int { return ix.count }

// Apply returns the index with removed taken out and added put in (removed first, so a
// delta may replace an id's ACL). A removed ACL is found by its binding and id; one the
// index lacks, an ACL added twice, or an ACL with a resource type or pattern
// type an ACL cannot have is an error and nothing is applied. It costs, per resource type
// the delta touches, a copy of that type's name map and prefix slice; other types are
// shared.
func (ix *Index) Apply(added, removed []ACL) (*Index, error) {
	next := &Index{sections: maps.Clone(ix.sections), count: ix.count}
	copied := map[ResourceType]bool{}
	edit := func(rt ResourceType) *section {
		s := next.sections[rt]
		if copied[rt] {
			return s
		}
		copied[rt] = true
		ns := &section{literal: map[string][]ACL{}}
		if s != nil {
			ns.literal = maps.Clone(s.literal)
			ns.prefix = slices.Clone(s.prefix)
			ns.count = s.count
		}
		next.sections[rt] = ns
		return ns
	}
	for _, a := range removed {
		if err := checkStorable(a.Binding); err != nil {
			return nil, err
		}
		if !edit(a.ResourceType).remove(a) {
			return nil, fmt.Errorf("acl: no ACL %x %v to remove", a.ID, a.Binding)
		}
		next.count--
	}
	for _, a := range added {
		if err := checkStorable(a.Binding); err != nil {
			return nil, err
		}
		if !edit(a.ResourceType).add(a) {
			return nil, fmt.Errorf("acl: ACL %x %v is already present", a.ID, a.Binding)
		}
		next.count++
	}
	for rt, s := range next.sections {
		if s.count == 0 {
			delete(next.sections, rt)
		}
	}
	return next, nil
}

// add puts a in, or reports false if that very ACL (id and binding) is already there.
// Ids are unique in the metadata image that feeds the index (it keeps ACLs by id), so the
// index checks only its own bucket.
func (s *section) add(a ACL) bool {
	if a.PatternType == PatternLiteral {
		acls := s.literal[a.ResourceName]
		if slices.Contains(acls, a) {
			return false
		}
		s.literal[a.ResourceName] = append(slices.Clip(acls), a)
		s.count++
		return true
	}
	i, ok := slices.BinarySearchFunc(s.prefix, a.ResourceName, byGroupName)
	if !ok {
		s.prefix = slices.Insert(s.prefix, i, prefixGroup{name: a.ResourceName, acls: []ACL{a}})
		s.count++
		return true
	}
	if slices.Contains(s.prefix[i].acls, a) {
		return false
	}
	s.prefix[i].acls = append(slices.Clip(s.prefix[i].acls), a)
	s.count++
	return true
}

func byGroupName(g prefixGroup, name string) int { return strings.Compare(g.name, name) }

func (s *section) remove(a ACL) bool {
	without := func(acls []ACL) ([]ACL, bool) {
		i := slices.Index(acls, a)
		if i < 0 {
			return acls, false
		}
		return slices.Delete(slices.Clone(acls), i, i+1), true
	}
	if a.PatternType == PatternLiteral {
		acls, ok := without(s.literal[a.ResourceName])
		if !ok {
			return false
		}
		if len(acls) == 0 {
			delete(s.literal, a.ResourceName)
		} else {
			s.literal[a.ResourceName] = acls
		}
		s.count--
		return true
	}
	i, found := slices.BinarySearchFunc(s.prefix, a.ResourceName, byGroupName)
	if !found {
		return false
	}
	acls, ok := without(s.prefix[i].acls)
	if !ok {
		return false
	}
	if len(acls) == 0 {
		s.prefix = slices.Delete(s.prefix, i, i+1)
	} else {
		s.prefix[i].acls = acls
	}
	s.count--
	return true
}

// checkStorable refuses what no stored ACL can be: a filter-only or unknown resource
// type or pattern type (the controller validates before writing; a record that breaks
// this is a corrupt log).
func checkStorable(b Binding) error {
	if b.ResourceType < ResourceTopic || b.ResourceType > maxResourceType {
		return fmt.Errorf("acl: resource type %d cannot be stored", b.ResourceType)
	}
	if b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed {
		return fmt.Errorf("acl: pattern type %d cannot be stored", b.PatternType)
	}
	return nil
}

// visit calls fn with every ACL whose resource pattern matches the resource (rt, name):
// the literal ACLs for name, the prefixed ACLs whose prefix name starts with, and the
// literal wildcard ACLs. fn returning false stops the walk.
func (ix *Index) visit(rt ResourceType, name string, fn func(ACL) bool) {
	s := ix.sections[rt]
	if s == nil {
		return
	}
	for _, a := range s.literal[name] {
		if !fn(a) {
			return
		}
	}
	if name != Wildcard {
		for _, a := range s.literal[Wildcard] {
			if !fn(a) {
				return
			}
		}
	}
	s.visitPrefixes(name, func(g prefixGroup) bool {
		for _, a := range g.acls {
			if !fn(a) {
				return false
			}
		}
		return true
	})
}

// visitPrefixes calls fn with each group whose prefix name starts with, longest first.
// It is Kafka's walk over its sorted set: take the greatest prefix not after the search
// string; if it is a prefix of name, visit it and search again below it, otherwise every
// remaining prefix of name is no longer than their common part, so search from that.
// Each search is shorter than the last, so a walk is at most len(name)+1 searches.
func (s *section) visitPrefixes(name string, fn func(prefixGroup) bool) {
	search := name
	for {
		// The greatest group name ≤ search.
		i, found := slices.BinarySearchFunc(s.prefix, search, byGroupName)
		if !found {
			i--
		}
		if i < 0 {
			return
		}
		g := s.prefix[i]
		common := commonPrefixLen(g.name, name)
		if common == len(g.name) {
			if !fn(g) || common == 0 {
				return
			}
			search = g.name[:common-1]
			continue
		}
		search = name[:common]
	}
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// each calls fn with every ACL, in no particular order, until fn returns false.
func (ix *Index) each(fn func(ACL) bool) {
	for _, s := range ix.sections {
		for _, acls := range s.literal {
			for _, a := range acls {
				if !fn(a) {
					return
				}
			}
		}
		for _, g := range s.prefix {
			for _, a := range g.acls {
				if !fn(a) {
					return
				}
			}
		}
	}
}

// ofType calls fn with every ACL of resource type rt.
func (ix *Index) ofType(rt ResourceType, fn func(ACL)) {
	s := ix.sections[rt]
	if s == nil {
		return
	}
	for _, acls := range s.literal {
		for _, a := range acls {
			fn(a)
		}
	}
	for _, g := range s.prefix {
		for _, a := range g.acls {
			fn(a)
		}
	}
}

// All returns every ACL in Order.
func (ix *Index) All() []ACL {
	out := make([]ACL, 0, ix.count)
	ix.each(func(a ACL) bool { out = append(out, a); return true })
	slices.SortFunc(out, Order)
	return out
}

// Match returns the ACLs f matches, in Order: what DescribeAcls answers and DeleteAcls
// removes. A filter naming one resource type looks only at that type's ACLs.
func (ix *Index) Match(f Filter) []ACL {
	var out []ACL
	keep := func(a ACL) {
		if f.Matches(a.Binding) {
			out = append(out, a)
		}
	}
	if f.ResourceType == ResourceAny {
		ix.each(func(a ACL) bool { keep(a); return true })
	} else {
		ix.ofType(f.ResourceType, keep)
	}
	slices.SortFunc(out, Order)
	return out
}

// Order sorts ACLs by resource type, resource name, pattern type, principal, host,
// operation, permission, then id: the order DescribeAcls lists them in (a fixed order,
// so equal images answer alike).
func Order(a, b ACL) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		strings.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
		slices.Compare(a.ID[:], b.ID[:]),
	)
}
