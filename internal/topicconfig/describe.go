package topicconfig

import "github.com/twmb/franz-go/pkg/kmsg"

// Describe answers DescribeConfigs for one TOPIC resource as Kafka's ConfigHelper does:
// every non-internal topic config (internal ones only when overridden), sorted by name,
// filtered by names when it is non-empty (unknown names are silently left out). Each entry
// has its effective value, Source (DYNAMIC_TOPIC_CONFIG=1 when overridden, else the head of
// its synonym list, else DEFAULT_CONFIG=5), ConfigType (v3+), ReadOnly false, and, when
// asked, the synonyms (topic override first, then the highest-priority broker synonym's
// group: operator-set before defaults) and documentation.
func Describe(overrides Set, broker *BrokerDefaults, names []string, includeSynonyms, includeDocs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	broker = broker.orDefault()
	r := Resolve(overrides, broker)
	want := nameFilter(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range sortedDefs {
		_, overridden := overrides[d.Name]
		if !want(d.Name) || (d.Internal && !overridden) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = d.Name
		c.ReadOnly = d.ReadOnly
		c.IsSensitive = d.Sensitive || d.Type == TypePassword
		if v, ok := r.Value(d.Name); ok && !c.IsSensitive {
			c.Value = str(v)
		}
		var syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if r.Source(d.Name) == kmsg.ConfigSourceDynamicTopicConfig {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = d.Name, c.Value, kmsg.ConfigSourceDynamicTopicConfig
			syn = append(syn, s)
		}
		if len(d.Synonyms) > 0 {
			syn = append(syn, broker.brokerSynonyms(d.Synonyms[0].Name, c.IsSensitive)...)
		}
		c.Source = kmsg.ConfigSourceDefaultConfig
		if len(syn) > 0 {
			c.Source = syn[0].Source
		}
		c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig // v0 only
		if includeSynonyms {
			c.ConfigSynonyms = syn
		}
		c.ConfigType = d.Type.ConfigType()
		if includeDocs {
			c.Documentation = str(d.Doc)
		}
		out = append(out, c)
	}
	return out
}
