package topicconfig

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokerSynonymValues is how a topic config's default follows the broker settings that
// stand for it, with the cases of Kafka 4.4's KafkaConfigTest (retention in ms, minutes and
// hours; -1 unlimited; 0 refused) and PlaintextAdminIntegrationTest (log.roll.hours=2 is
// segment.ms 7200000).
func TestBrokerSynonymValues(t *testing.T) {
	cases := []struct {
		name   string
		broker map[string]string
		config string
		want   int64
	}{
		{"retention default", nil, RetentionMs, DefaultRetentionMs},
		{"hours", map[string]string{"log.retention.hours": "100"}, RetentionMs, 360000000},
		{"minutes beat hours", map[string]string{"log.retention.minutes": "30", "log.retention.hours": "1"}, RetentionMs, 30 * 60 * 1000},
		{"ms beat minutes", map[string]string{"log.retention.ms": "1800000", "log.retention.minutes": "10"}, RetentionMs, 1800000},
		{"ms beat hours", map[string]string{"log.retention.ms": "5", "log.retention.hours": "2"}, RetentionMs, 5},
		{"ms unlimited", map[string]string{"log.retention.ms": "-1"}, RetentionMs, -1},
		{"minutes unlimited", map[string]string{"log.retention.minutes": "-1"}, RetentionMs, -1},
		{"hours unlimited", map[string]string{"log.retention.hours": "-1"}, RetentionMs, -1},
		{"any negative is unlimited", map[string]string{"log.retention.hours": "-7"}, RetentionMs, -1},
		{"unlimited ms beats minutes", map[string]string{"log.retention.ms": "-1", "log.retention.minutes": "30"}, RetentionMs, -1},
		{"roll default", nil, SegmentMs, DefaultSegmentMs},
		{"roll hours", map[string]string{"log.roll.hours": "2"}, SegmentMs, 7200000},
		{"roll ms beat hours", map[string]string{"log.roll.ms": "1000", "log.roll.hours": "2"}, SegmentMs, 1000},
		{"jitter default", nil, SegmentJitterMs, 0},
		{"flush default", nil, FlushMs, math.MaxInt64},
	}
	for _, c := range cases {
		b, err := NewBrokerDefaults(c.broker)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := Resolve(nil, b)
		if got := r.Long(c.config); got != c.want {
			t.Errorf("%s: %s = %d, want %d", c.name, c.config, got, c.want)
		}
		if v, _ := r.Value(c.config); v != strconv.FormatInt(c.want, 10) {
			t.Errorf("%s: %s shown as %s", c.name, c.config, v)
		}
	}
}

// TestBrokerSynonymsRefused: the settings a Kafka 4.4 broker refuses to start with, because
// the topic default they make is invalid.
func TestBrokerSynonymsRefused(t *testing.T) {
	cases := []struct {
		broker map[string]string
		msg    string
	}{
		{map[string]string{"log.retention.ms": "0"}, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"},
		{map[string]string{"log.retention.minutes": "0"}, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"},
		{map[string]string{"log.retention.hours": "0"}, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"},
		{map[string]string{"log.roll.ms": "0"}, "Invalid value 0 for configuration segment.ms: Value must be at least 1"},
		{map[string]string{"log.roll.hours": "0"}, "Invalid value 0 for configuration log.roll.hours: Value must be at least 1"},
		// Broker defaults of topic configs exactq does not act on: refused unless at Kafka's
		// default, rather than accepted and ignored.
		{map[string]string{"log.roll.jitter.ms": "123"}, "log.roll.jitter.ms is not honoured by exactq: it is the broker default of the topic config segment.jitter.ms, which exactq does not act on; leave it unset"},
		{map[string]string{"log.roll.jitter.hours": "3"}, "log.roll.jitter.hours is not honoured by exactq: it is the broker default of the topic config segment.jitter.ms, which exactq does not act on; leave it unset or at Kafka's default 0"},
		{map[string]string{"log.flush.interval.ms": "500"}, "log.flush.interval.ms is not honoured by exactq: it is the broker default of the topic config flush.ms, which exactq does not act on; leave it unset"},
		{map[string]string{"log.flush.scheduler.interval.ms": "2000"}, "log.flush.scheduler.interval.ms is not honoured by exactq: it is the broker default of the topic config flush.ms, which exactq does not act on; leave it unset or at Kafka's default 9223372036854775807"},
		{map[string]string{"min.insync.replicas": "2"}, "min.insync.replicas is not honoured by exactq: it is the broker default of the topic config min.insync.replicas, which exactq does not act on; leave it unset or at Kafka's default 1"},
		{map[string]string{"log.preallocate": "true"}, "log.preallocate is not honoured by exactq: it is the broker default of the topic config preallocate, which exactq does not act on; leave it unset or at Kafka's default false"},
	}
	for _, c := range cases {
		_, err := NewBrokerDefaults(c.broker)
		if err == nil {
			t.Errorf("%v accepted", c.broker)
			continue
		}
		if e, ok := err.(*Error); !ok || e.Message != c.msg {
			t.Errorf("%v: %v, want %q", c.broker, err, c.msg)
		}
	}
	// Kafka's own default changes nothing, so it is accepted.
	if _, err := NewBrokerDefaults(map[string]string{"min.insync.replicas": "1", "log.roll.jitter.hours": "0", "log.preallocate": "false"}); err != nil {
		t.Fatalf("Kafka's defaults refused: %v", err)
	}
	// Only the retention that decides is checked: Kafka has no validator on
	// log.retention.hours itself, so 0 there is fine while log.retention.ms is set.
	if _, err := NewBrokerDefaults(map[string]string{"log.retention.ms": "1000", "log.retention.hours": "0"}); err != nil {
		t.Fatalf("ms decides, hours=0 unused: %v", err)
	}
}

// TestDescribeTopicSynonyms is DescribeConfigs for a TOPIC resource as Kafka 4.4's
// ConfigHelper.createTopicConfigEntry answers it: the override (DYNAMIC_TOPIC_CONFIG), then
// configSynonyms of the highest-priority broker synonym (those set, then those with a
// default, each in DynamicBrokerConfig.brokerConfigSynonyms order) with everything ahead of
// that synonym dropped. So a retention that comes from log.retention.hours is described with
// the converted value but no synonyms and DEFAULT_CONFIG (which kafka-topics --describe
// leaves out of Configs, on Kafka as here), while a set log.retention.ms brings the whole
// chain. The value is always the effective one, converted and clamped.
func TestDescribeTopicSynonyms(t *testing.T) {
	const (
		topic   = kmsg.ConfigSourceDynamicTopicConfig
		static  = kmsg.ConfigSourceStaticBrokerConfig
		dflt    = kmsg.ConfigSourceDefaultConfig
		maxLong = "9223372036854775807"
	)
	cases := []struct {
		name      string
		broker    map[string]string
		overrides Set
		config    string
		value     string
		source    kmsg.ConfigSource
		syns      []syn
	}{
		{"retention at Kafka's default", nil, nil, RetentionMs, "604800000", dflt, nil},
		{"retention from hours", map[string]string{"log.retention.hours": "100"}, nil, RetentionMs, "360000000", dflt, nil},
		{"retention from minutes", map[string]string{"log.retention.minutes": "30"}, nil, RetentionMs, "1800000", dflt, nil},
		{"retention unlimited by hours", map[string]string{"log.retention.hours": "-1"}, nil, RetentionMs, "-1", dflt, nil},
		{"retention from ms", map[string]string{"log.retention.ms": "1000", "log.retention.hours": "100"}, nil, RetentionMs, "1000", static, []syn{
			{"log.retention.ms", "1000", static}, {"log.retention.hours", "100", static}, {"log.retention.hours", "168", dflt}}},
		{"retention from ms and minutes", map[string]string{"log.retention.ms": "1000", "log.retention.minutes": "3"}, nil, RetentionMs, "1000", static, []syn{
			{"log.retention.ms", "1000", static}, {"log.retention.minutes", "3", static}, {"log.retention.hours", "168", dflt}}},
		{"retention overridden, hours set", map[string]string{"log.retention.hours": "100"}, Set{RetentionMs: "5000"}, RetentionMs, "5000", topic, []syn{
			{"retention.ms", "5000", topic}}},
		{"segment.ms at default", nil, nil, SegmentMs, "604800000", dflt, nil},
		{"segment.ms from roll hours", map[string]string{"log.roll.hours": "2"}, nil, SegmentMs, "7200000", dflt, nil},
		{"segment.ms from roll ms", map[string]string{"log.roll.ms": "1000"}, nil, SegmentMs, "1000", static, []syn{
			{"log.roll.ms", "1000", static}, {"log.roll.hours", "168", dflt}}},
		{"segment.jitter.ms at default", nil, nil, SegmentJitterMs, "0", dflt, nil},
		{"flush.ms at default", nil, nil, FlushMs, maxLong, dflt, nil},
		{"single synonym set", map[string]string{"log.segment.bytes": "2097152"}, nil, SegmentBytes, "2097152", static, []syn{
			{"log.segment.bytes", "2097152", static}, {"log.segment.bytes", "1073741824", dflt}}},
		{"single synonym overridden", map[string]string{"log.segment.bytes": "2097152"}, Set{SegmentBytes: "3145728"}, SegmentBytes, "3145728", topic, []syn{
			{"segment.bytes", "3145728", topic}, {"log.segment.bytes", "2097152", static}, {"log.segment.bytes", "1073741824", dflt}}},
	}
	for _, c := range cases {
		b, err := NewBrokerDefaults(c.broker)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e := find(Describe(c.overrides, b, []string{c.config}, true, false), c.config)
		if e == nil || e.Value == nil {
			t.Fatalf("%s: %s not described with a value", c.name, c.config)
		}
		if *e.Value != c.value || e.Source != c.source || !reflect.DeepEqual(syns(e), c.syns) || e.ReadOnly {
			t.Errorf("%s: %s = %s from %d, synonyms %v; want %s from %d, %v", c.name, c.config, *e.Value, e.Source, syns(e), c.value, c.source, c.syns)
		}
	}
}

// TestNotHonouredDescribed: a config exactq does not act on is never described as if it
// worked. Its documentation says so, for a topic and for the broker default behind it; the
// ones exactq acts on say nothing of the kind. Every broker config is read-only (exactq
// refuses dynamic broker configs).
func TestNotHonouredDescribed(t *testing.T) {
	const note = "Not honoured by exactq"
	for _, c := range Describe(nil, nil, nil, false, true) {
		d := Lookup(c.Name)
		if got := strings.Contains(*c.Documentation, note); got == d.Honoured {
			t.Errorf("topic %s: honoured=%v, documentation %q", c.Name, d.Honoured, *c.Documentation)
		}
	}
	seen := 0
	for _, c := range KafkaDefaults().DescribeBroker(nil, false, true) {
		d := LookupBroker(c.Name)
		if !c.ReadOnly {
			t.Errorf("broker %s not read-only", c.Name)
		}
		if got := strings.Contains(*c.Documentation, note); got == d.Honoured {
			t.Errorf("broker %s: honoured=%v, documentation %q", c.Name, d.Honoured, *c.Documentation)
		}
		if td := brokerSynonymOf[c.Name]; td != nil && td.Honoured != d.Honoured {
			t.Errorf("broker %s: honoured=%v, its topic config %s honoured=%v", c.Name, d.Honoured, td.Name, td.Honoured)
		}
		if !d.Honoured {
			seen++
		}
	}
	for _, name := range []string{"log.preallocate", "log.flush.interval.messages", "min.insync.replicas", "log.roll.jitter.hours"} {
		if LookupBroker(name).Honoured {
			t.Errorf("%s described as honoured", name)
		}
	}
	for _, name := range []string{"log.retention.hours", "log.roll.ms", "log.segment.bytes", "compression.type", "num.partitions"} {
		if !LookupBroker(name).Honoured {
			t.Errorf("%s described as not honoured", name)
		}
	}
	if seen == 0 {
		t.Fatal("no broker config described as not honoured")
	}
}

// TestCreateTopicsConfigs is the CreateTopics answer's config list as Kafka 4.4's controller
// gives it (the shapes of PlaintextAdminIntegrationTest's create-topics-with-broker-defaults
// test): a value from any broker synonym, converted, is STATIC_BROKER_CONFIG; Kafka's
// default is DEFAULT_CONFIG; the topic's own is DYNAMIC_TOPIC_CONFIG; never read-only.
func TestCreateTopicsConfigs(t *testing.T) {
	b, err := NewBrokerDefaults(map[string]string{"log.retention.hours": "100", "log.roll.hours": "2", "message.max.bytes": "2000000"})
	if err != nil {
		t.Fatal(err)
	}
	cs := CreateTopicsConfigs(Set{IndexIntervalBytes: "9999999"}, b)
	type entry struct {
		value  string
		source kmsg.ConfigSource
	}
	got := map[string]entry{}
	for i, c := range cs {
		if c.ReadOnly || c.Value == nil {
			t.Fatalf("%s: read-only %v, value %v", c.Name, c.ReadOnly, c.Value)
		}
		if i > 0 && cs[i-1].Name >= c.Name {
			t.Fatal("not sorted")
		}
		got[c.Name] = entry{*c.Value, kmsg.ConfigSource(c.Source)}
	}
	want := map[string]entry{
		CleanupPolicy:      {"delete", kmsg.ConfigSourceDefaultConfig},
		RetentionMs:        {"360000000", kmsg.ConfigSourceStaticBrokerConfig},
		SegmentMs:          {"7200000", kmsg.ConfigSourceStaticBrokerConfig},
		MaxMessageBytes:    {"2000000", kmsg.ConfigSourceStaticBrokerConfig},
		IndexIntervalBytes: {"9999999", kmsg.ConfigSourceDynamicTopicConfig},
		SegmentJitterMs:    {"0", kmsg.ConfigSourceDefaultConfig},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s = %+v, want %+v", name, got[name], w)
		}
	}
	if _, ok := got[InternalSegmentBytes]; ok || len(cs) != len(Describe(nil, b, nil, false, false)) {
		t.Fatalf("%d entries, internal listed %v", len(cs), ok)
	}
	// The controller converts without the broker's clamp (Kafka's own inconsistency): the
	// retention acted on and described is -1, the CreateTopics answer says -3600000.
	unlimited, _ := NewBrokerDefaults(map[string]string{"log.retention.hours": "-1"})
	for _, c := range CreateTopicsConfigs(nil, unlimited) {
		if c.Name == RetentionMs && (*c.Value != "-3600000" || c.Source != int8(kmsg.ConfigSourceStaticBrokerConfig)) {
			t.Fatalf("retention.ms = %s from %d", *c.Value, c.Source)
		}
	}
	if r := Resolve(nil, unlimited); r.Long(RetentionMs) != -1 {
		t.Fatalf("retention acted on = %d", r.Long(RetentionMs))
	}
}
