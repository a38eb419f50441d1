package tlsconfig

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// PrincipalMapper is ssl.principal.mapping.rules as Kafka's SslPrincipalMapper applies it:
// a comma-separated list of `DEFAULT` (the distinguished name itself) and
// `RULE:pattern/replacement/[LU]` (if pattern matches the whole DN, the DN with the
// pattern replaced, lower- or upper-cased with L or U); the first rule that applies names
// the principal, and a DN no rule applies to is refused (Kafka's NoMatchingRule, which
// fails the handshake).
//
// Patterns are Go regular expressions (RE2): Java's syntax less backreferences and
// lookaround, which fail at configuration time. The replacement is Java's: `$n` a group
// (digits taken while the number stays a group, as Java's Matcher does), `${name}` a named
// group, `\x` the character x; a `$n` beyond the pattern's groups is the literal text, as
// Kafka arranges. Java's replaceAll and Go's differ only on an empty match right after
// another match, which a pattern anchored as mapping rules are cannot produce.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault        bool
	source           string // the rule as written, for errors
	pattern          string
	whole, all       *regexp.Regexp
	replacement      string
	toLower, toUpper bool
}

// Kafka's grammar, which RE2 runs the same way (leftmost-first alternation, lazy
// quantifiers): a rule is DEFAULT, RULE:pattern/replacement/[LU], or anything else (which
// the parser then refuses), each followed by a comma or the end.
const rulePattern = `(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	ruleSplitter = regexp.MustCompile(`\s*(` + rulePattern + `)\s*(?:,\s*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// DefaultPrincipalMappingRules is ssl.principal.mapping.rules' default.
const DefaultPrincipalMappingRules = "DEFAULT"

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules ("" is Kafka's default,
// DEFAULT).
func ParsePrincipalMappingRules(rules string) (*PrincipalMapper, error) {
	if strings.TrimSpace(rules) == "" {
		rules = DefaultPrincipalMappingRules
	}
	m := &PrincipalMapper{}
	for _, match := range ruleSplitter.FindAllStringSubmatch(strings.TrimSpace(rules), -1) {
		rule := match[1]
		p := ruleParser.FindStringSubmatchIndex(rule)
		if p == nil || p[1] != len(rule) {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q", rule)
		}
		switch {
		case p[2] >= 0: // DEFAULT
			m.rules = append(m.rules, mappingRule{isDefault: true, source: rule})
		case p[4] >= 0: // RULE:
			pattern, repl, flag := rule[p[4]:p[5]], rule[p[6]:p[7]], rule[p[8]:p[9]]
			// The parser's trailing .*? lets text follow the flag; Kafka's full-match check
			// (rule.length() == matcher.end()) then refuses it, and so does p[1] above.
			whole, err := regexp.Compile(`^(?:` + pattern + `)$`)
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: %w", rule, err)
			}
			all := regexp.MustCompile(pattern) // compiles, since whole did
			m.rules = append(m.rules, mappingRule{source: rule, pattern: pattern, whole: whole, all: all, replacement: repl,
				toLower: flag == "L", toUpper: flag == "U"})
		default: // the empty alternative: empty rules are ignored, others refused
			if rule != "" {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q", rule)
			}
		}
	}
	return m, nil
}

// String lists the rules as Kafka's SslPrincipalMapper.toString does, e.g.
// "[RULE:^CN=(.*)$/$1/L, DEFAULT]".
func (m *PrincipalMapper) String() string {
	parts := make([]string, len(m.rules))
	for i, r := range m.rules {
		switch {
		case r.isDefault:
			parts[i] = "DEFAULT"
		default:
			parts[i] = "RULE:" + r.pattern + "/" + r.replacement
			if r.toLower {
				parts[i] += "/L"
			} else if r.toUpper {
				parts[i] += "/U"
			}
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ErrNoMatchingRule is returned by Name when no rule applies to the DN.
var ErrNoMatchingRule = errors.New("tlsconfig: no ssl.principal.mapping.rules rule applies")

// Name maps a distinguished name (as DistinguishedName writes it) to a principal name.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.whole.MatchString(dn) {
			continue
		}
		out, err := r.apply(dn)
		if err != nil {
			return "", fmt.Errorf("tlsconfig: rule %q: %w", r.source, err)
		}
		if r.toLower {
			out = strings.ToLower(out)
		} else if r.toUpper {
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w to %q", ErrNoMatchingRule, dn)
}

// apply is Java's String.replaceAll(pattern, replacement) after Kafka's escaping of
// backreferences beyond the group count.
func (r mappingRule) apply(dn string) (string, error) {
	var b strings.Builder
	last := 0
	for _, loc := range r.all.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:loc[0]])
		if err := r.expand(&b, dn, loc); err != nil {
			return "", err
		}
		last = loc[1]
	}
	b.WriteString(dn[last:])
	return b.String(), nil
}

func (r mappingRule) expand(b *strings.Builder, s string, loc []int) error {
	groups := r.all.NumSubexp()
	repl := r.replacement
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '\\':
			i++
			if i == len(repl) {
				return errors.New("character to be escaped is missing")
			}
			b.WriteByte(repl[i])
		case c == '$':
			i++
			if i == len(repl) {
				return errors.New("illegal group reference: group index is missing")
			}
			if repl[i] == '{' {
				end := strings.IndexByte(repl[i:], '}')
				if end < 0 {
					return errors.New("named capturing group is missing trailing '}'")
				}
				name := repl[i+1 : i+end]
				idx := r.all.SubexpIndex(name)
				if idx < 0 {
					return fmt.Errorf("no group with name {%s}", name)
				}
				writeGroup(b, s, loc, idx)
				i += end
				continue
			}
			if repl[i] < '0' || repl[i] > '9' {
				return errors.New("illegal group reference")
			}
			// Kafka's escapeLiteralBackReferences: a reference (not starting with 0) that
			// still exceeds the group count after dropping digits is literal text.
			j := i
			for j < len(repl) && repl[j] >= '0' && repl[j] <= '9' {
				j++
			}
			if repl[i] != '0' && groups > 0 {
				n, _ := strconv.Atoi(repl[i:min(j, i+9)])
				for n > groups && n >= 10 {
					n /= 10
				}
				if n > groups {
					b.WriteByte('$')
					i-- // the digits follow as literal text
					continue
				}
			}
			// Java: the first digit, then more while the number stays a group.
			ref := int(repl[i] - '0')
			for i+1 < len(repl) && repl[i+1] >= '0' && repl[i+1] <= '9' {
				next := ref*10 + int(repl[i+1]-'0')
				if next > groups {
					break
				}
				ref = next
				i++
			}
			if ref > groups {
				return fmt.Errorf("no group %d", ref)
			}
			writeGroup(b, s, loc, ref)
		default:
			b.WriteByte(c)
		}
	}
	return nil
}

func writeGroup(b *strings.Builder, s string, loc []int, g int) {
	if start := loc[2*g]; start >= 0 {
		b.WriteString(s[start:loc[2*g+1]])
	}
}

// attributeKeywords are the attribute types Java's X500Principal.getName() (RFC 2253)
// writes by keyword; every other type is written as its dotted OID.
var attributeKeywords = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
	"2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1": "UID",
}

type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// attributeSET is one RDN; encoding/asn1 reads a slice type named ...SET as a SET OF.
type attributeSET []attribute

// DistinguishedName writes a certificate's subject as Java's X500Principal.getName()
// does (RFC 2253): RDNs from the last in the certificate to the first, an RDN's
// attributes joined by '+', keywords for the types above and dotted OIDs with the DER
// value in hex (#...) for the others, values escaped as RFC 2253 asks. This is the string
// ssl.principal.mapping.rules are written against.
func DistinguishedName(cert *x509.Certificate) (string, error) {
	var rdns []attributeSET
	rest, err := asn1.Unmarshal(cert.RawSubject, &rdns)
	if err != nil || len(rest) != 0 {
		return "", errors.New("tlsconfig: the certificate's subject does not parse")
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i != len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, a := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			name, known := attributeKeywords[a.Type.String()]
			if !known {
				name = a.Type.String()
			}
			if str, ok := decodeString(a.Value); ok && known {
				b.WriteString(name + "=" + escapeValue(str))
			} else {
				b.WriteString(name + "=#" + hex.EncodeToString(a.Value.FullBytes))
			}
		}
	}
	return b.String(), nil
}

func decodeString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagNumericString:
		if !utf8.Valid(v.Bytes) {
			return "", false
		}
		return string(v.Bytes), true
	case asn1.TagT61String: // read as Latin-1, as Java does
		r := make([]rune, len(v.Bytes))
		for i, c := range v.Bytes {
			r[i] = rune(c)
		}
		return string(r), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	}
	return "", false
}

// escapeValue escapes as Java's AVA.toRFC2253String: the specials ,=+<>#;"\ anywhere, a
// NUL as \00, a leading or trailing space.
func escapeValue(s string) string {
	var b strings.Builder
	for i, c := range s {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, c):
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == 0:
			b.WriteString(`\00`)
		case c == ' ' && (i == 0 || i == len(s)-1):
			b.WriteString(`\ `)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}
