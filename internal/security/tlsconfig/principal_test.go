package tlsconfig

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/security/tlsconfig/tlstest"
)

// The cases follow Kafka's SslPrincipalMapperTest: which rule lists parse, how a list is
// split (seen through String, which writes rules as Kafka's toString does), and what
// names a list of rules gives.

func TestMappingRulesThatParse(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := ParsePrincipalMappingRules(rules); err != nil {
			t.Errorf("%q: %v", rules, err)
		}
	}
}

func TestMappingRulesRefused(t *testing.T) {
	for _, rules := range []string{
		"default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		"RULE:^CN=(?=x)$/$1/", // lookahead: Java has it, RE2 does not
	} {
		if _, err := ParsePrincipalMappingRules(rules); err == nil {
			t.Errorf("%q parsed", rules)
		}
	}
}

func TestMappingRulesSplit(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{"", "[DEFAULT]"}, // exactq: empty is the default, as an unset key is in Kafka
		{"DEFAULT", "[DEFAULT]"},
		{"RULE://", "[RULE:/]"},
		{"RULE:/.*/", "[RULE:/.*]"},
		{"RULE:/.*/L", "[RULE:/.*/L]"},
		{"RULE://,DEFAULT", "[RULE:/, DEFAULT]"},
		{"  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"},
		{"  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"},
		{"  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"},
		{"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"},
		{",   , , ,      , , ,   ", "[]"},
		{",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"},
		{",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"},
		{"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"},
		{`RULE:\/\\\(\)\n\t/\/\//`, `[RULE:\/\\\(\)\n\t/\/\/]`},
		{`RULE:\**\/+/*/L,RULE:\/*\**/**/`, `[RULE:\**\/+/*/L, RULE:\/*\**/**]`},
		{`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
			`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`},
	} {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		if got := m.String(); got != tc.want {
			t.Errorf("%q split as %s, want %s", tc.rules, got, tc.want)
		}
	}
}

func TestMappingNames(t *testing.T) {
	m, err := ParsePrincipalMappingRules(strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("%s → %q %v, want %q", dn, got, err, want)
		}
	}
	// An escaped comma inside a value stays part of the name.
	m, _ = ParsePrincipalMappingRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if got, _ := m.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); got != `Tkac\, Adam` {
		t.Errorf("escaped comma: %q", got)
	}
	// No rule applies: refused.
	m, _ = ParsePrincipalMappingRules("RULE:^CN=(.*)$/$1/")
	if _, err := m.Name("O=Org"); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("no rule applies: %v", err)
	}
}

func TestMappingReplacement(t *testing.T) {
	for _, tc := range []struct{ rule, dn, want string }{
		{`RULE:^CN=(.*),O=(.*)$/$1@$2/`, "CN=a,O=b", "a@b"},
		{`RULE:^CN=(.*),O=(.*)$/$2$1/`, "CN=a,O=b", "ba"},
		{`RULE:^CN=(.*),O=(.*)$/$1@$4/`, "CN=a,O=b", "a@$4"},      // beyond the groups: literal
		{`RULE:^CN=(.*),O=(.*)$/$12/`, "CN=a,O=b", "a2"},          // Java reads $1 then 2
		{`RULE:^CN=(.*),O=(.*)$/\$1/`, "CN=a,O=b", "$1"},          // escaped dollar
		{`RULE:^CN=(?P<who>.*),O=.*$/${who}!/`, "CN=a,O=b", "a!"}, // a named group
		{`RULE:^CN=(.*),O=(.*)$/$0/U`, "CN=a,O=b", "CN=A,O=B"},    // the whole match
	} {
		m, err := ParsePrincipalMappingRules(tc.rule)
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		if got, err := m.Name(tc.dn); err != nil || got != tc.want {
			t.Errorf("%s on %s: %q %v, want %q", tc.rule, tc.dn, got, err, tc.want)
		}
	}
}

func TestDistinguishedName(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	oidDC := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidEmail := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	for _, tc := range []struct {
		subject pkix.Name
		want    string
	}{
		{pkix.Name{CommonName: "Duke", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}, Country: []string{"US"}},
			"CN=Duke,OU=ServiceUsers,O=Org,C=US"},
		{pkix.Name{CommonName: "Tkac, Adam", OrganizationalUnit: []string{"ITZ"}},
			`CN=Tkac\, Adam,OU=ITZ`},
		{pkix.Name{CommonName: " a+b=c ", Organization: []string{"#x"}},
			`CN=\ a\+b\=c\ ,O=\#x`},
		{pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{{Type: oidDC, Value: "com"}, {Type: oidDC, Value: "mycp"}, {Type: []int{2, 5, 4, 3}, Value: "svc"}}},
			"CN=svc,DC=mycp,DC=com"},
		{pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{{Type: oidEmail, Value: "a@b"}}},
			"1.2.840.113549.1.9.1=#0c03614062"},
	} {
		leaf := ca.Client(t, tc.subject)
		got, err := DistinguishedName(leaf.Cert)
		if err != nil || got != tc.want {
			t.Errorf("%v: %q %v, want %q", tc.subject, got, err, tc.want)
		}
	}
}
