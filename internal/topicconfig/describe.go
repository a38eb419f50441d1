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
		var value *string
		if v, ok := r.Value(d.Name); ok && !d.sensitive() {
			value = str(v)
		}
		var syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if r.Source(d.Name) == kmsg.ConfigSourceDynamicTopicConfig {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = d.Name, value, kmsg.ConfigSourceDynamicTopicConfig
			syn = append(syn, s)
		}
		if len(d.Synonyms) > 0 {
			syn = append(syn, broker.brokerSynonyms(d.Synonyms[0].Name, d.sensitive())...)
		}
		out = append(out, describeEntry(d, d.ReadOnly, value, syn, includeSynonyms, includeDocs))
	}
	return out
}

// sensitive reports whether d's value is never shown (DescribeConfigs leaves it null).
func (d *Def) sensitive() bool { return d.Sensitive || d.Type == TypePassword }

// describeEntry is d's DescribeConfigs entry, for a topic or a broker: value is nil when
// unset or sensitive, syn its synonyms in priority order. Its Source is the head of syn
// (DEFAULT_CONFIG when there is none), IsDefault (v0 only) follows from it; the synonyms
// and the documentation are included only when asked.
func describeEntry(d *Def, readOnly bool, value *string, syn []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym,
	includeSynonyms, includeDocs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.ReadOnly, c.IsSensitive = d.Name, value, readOnly, d.sensitive()
	c.Source = kmsg.ConfigSourceDefaultConfig
	if len(syn) > 0 {
		c.Source = syn[0].Source
	}
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
	if includeSynonyms {
		c.ConfigSynonyms = syn
	}
	c.ConfigType = d.Type.ConfigType()
	if includeDocs {
		c.Documentation = str(d.Doc + notHonouredNote(d))
	}
	return c
}

// notHonouredNote is what the documentation of a config exactq does not act on adds, so a
// client listing configs does not take it for one that works.
func notHonouredNote(d *Def) string {
	switch {
	case d.Honoured:
		return ""
	case brokerSynonymOf[d.Name] != nil && brokerDefsByName[d.Name] == d:
		return " Not honoured by exactq (" + brokerSynonymOf[d.Name].Name + " is not acted on); setting it to anything but Kafka's default is refused."
	default:
		return " Not honoured by exactq: stored, validated and described as Kafka does, not acted on."
	}
}

// CreateTopicsConfigs is the config list a CreateTopics v5+ response carries for a new topic,
// as Kafka 4.4's controller builds it (KafkaConfigSchema.resolveEffectiveTopicConfig), which
// differs from Describe: no synonyms, ReadOnly false, and a value from a broker synonym is
// STATIC_BROKER_CONFIG even when it is not the highest-priority one, so retention.ms under
// log.retention.hours=100 is 360000000 from STATIC_BROKER_CONFIG here but DEFAULT_CONFIG in
// DescribeConfigs. The controller converts the synonym's value as written, without the
// broker's clamp: log.retention.hours=-1 is reported as -3600000 here, though the topic's
// retention is -1 (unlimited) and Describe shows -1. Internal configs are listed only when
// set; sensitive values are null. Sorted by name.
func CreateTopicsConfigs(overrides Set, broker *BrokerDefaults) []kmsg.CreateTopicsResponseTopicConfig {
	broker = broker.orDefault()
	r := Resolve(overrides, broker)
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, d := range sortedDefs {
		_, overridden := overrides[d.Name]
		if d.Internal && !overridden {
			continue
		}
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.IsSensitive, c.Source = d.Name, d.sensitive(), int8(kmsg.ConfigSourceDefaultConfig)
		var value *string
		if v, ok := r.Value(d.Name); ok {
			value = str(v)
		}
		switch r.Source(d.Name) {
		case kmsg.ConfigSourceDynamicTopicConfig:
			c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		case kmsg.ConfigSourceStaticBrokerConfig:
			c.Source = int8(kmsg.ConfigSourceStaticBrokerConfig)
			value = str(broker.controllerSynonymValue(d))
		}
		if !c.IsSensitive {
			c.Value = value
		}
		out = append(out, c)
	}
	return out
}
