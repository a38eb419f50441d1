package groupconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func mustBroker(t *testing.T, kv map[string]string) *Broker {
	t.Helper()
	b, err := NewBroker(kv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidateBounds(t *testing.T) {
	b := mustBroker(t, nil)
	cases := []struct {
		name, value string
		ok          bool
	}{
		{ShareRecordLockDurationMs, "15000", true},
		{ShareRecordLockDurationMs, "14999", false}, // below group.share.min.record.lock.duration.ms
		{ShareRecordLockDurationMs, "60001", false}, // above the max
		{ShareRecordLockDurationMs, "soon", false},
		{ShareDeliveryCountLimit, "2", true},
		{ShareDeliveryCountLimit, "1", false},
		{ShareDeliveryCountLimit, "11", false},
		{SharePartitionMaxRecordLock, "4000", true},
		{SharePartitionMaxRecordLock, "99", false},
		{ShareAutoOffsetReset, "earliest", true},
		{ShareAutoOffsetReset, "by_duration:PT1H", true},
		{ShareAutoOffsetReset, "by_duration:P1DT2H30M", true},
		{ShareAutoOffsetReset, "by_duration:", false},
		{ShareAutoOffsetReset, "none", false},
		{ShareIsolationLevel, "read_committed", true},
		{ShareIsolationLevel, "committed", false},
		{ShareRenewAckEnable, "TRUE", true},
		{ShareRenewAckEnable, "yes", false},
		{"share.no.such", "1", false},
	}
	for _, c := range cases {
		err := b.Validate(c.name, c.value)
		if (err == nil) != c.ok {
			t.Errorf("%s=%s: err %v, want ok=%v", c.name, c.value, err, c.ok)
		}
		if err != nil && !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%s=%s: %v is not INVALID_CONFIG", c.name, c.value, err)
		}
	}
	// A broker that widens the bounds widens what groups may set.
	wide := mustBroker(t, map[string]string{"group.share.max.record.lock.duration.ms": "3600000"})
	if err := wide.Validate(ShareRecordLockDurationMs, "600000"); err != nil {
		t.Errorf("within widened bounds: %v", err)
	}
}

func TestIncrementalAndResolve(t *testing.T) {
	b := mustBroker(t, nil)
	set := func(name, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &v
		return c
	}
	cur, err := b.ApplyIncremental(nil, []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(ShareAutoOffsetReset, "earliest"), set(ShareDeliveryCountLimit, "3")})
	if err != nil {
		t.Fatal(err)
	}
	r := b.Resolve(cur)
	if r.String(ShareAutoOffsetReset) != "earliest" || r.Int(ShareDeliveryCountLimit) != 3 || r.Int(ShareRecordLockDurationMs) != 30000 {
		t.Fatalf("resolved %v", r.values)
	}
	del := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	del.Name, del.Op = ShareDeliveryCountLimit, kmsg.IncrementalAlterConfigOpDelete
	cur, err = b.ApplyIncremental(cur, []kmsg.IncrementalAlterConfigsRequestResourceConfig{del})
	if err != nil || b.Resolve(cur).Int(ShareDeliveryCountLimit) != 5 {
		t.Fatalf("after delete: %v %v", cur, err)
	}
	// A session timeout not above the heartbeat interval is refused as a whole.
	if _, err := b.ApplyIncremental(cur, []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(ShareHeartbeatIntervalMs, "15000"), set(ShareSessionTimeoutMs, "45000")}); err != nil {
		t.Fatalf("valid pair refused: %v", err)
	}
	if _, err := b.ApplyIncremental(nil, []kmsg.IncrementalAlterConfigsRequestResourceConfig{set(ShareAutoOffsetReset, "latest"), set(ShareAutoOffsetReset, "earliest")}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("duplicate keys: %v", err)
	}
}

func TestDescribeSources(t *testing.T) {
	b := mustBroker(t, nil)
	cfgs := b.DescribeConfigs(map[string]string{ShareIsolationLevel: "read_committed"}, nil, false, false)
	found := 0
	for _, c := range cfgs {
		switch c.Name {
		case ShareIsolationLevel:
			found++
			if *c.Value != "read_committed" || c.Source != kmsg.ConfigSourceGroupConfig {
				t.Errorf("isolation: %v %v", *c.Value, c.Source)
			}
		case ShareAutoOffsetReset:
			found++
			if *c.Value != "latest" || c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("auto offset reset: %v %v", *c.Value, c.Source)
			}
		}
	}
	if found != 2 {
		t.Fatalf("described %d of the two configs", found)
	}
}

func TestByDuration(t *testing.T) {
	for in, want := range map[string]int64{"by_duration:PT1H": 3600000, "by_duration:P1DT30M": 86400000 + 1800000, "by_duration:PT1.5S": 1500} {
		if got, ok := ByDurationMs(in); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, ok, want)
		}
	}
	if _, ok := ByDurationMs("latest"); ok {
		t.Error("latest parsed as a duration")
	}
}

// The KIP-1191 dead-letter configs are refused (exactq dead-letters nothing yet) by every
// alter path, and left out of Describe (DescribeConfigs lists them read-only, see
// TestDescribeLikeKafka); every other config behaves as before.
func TestDLQConfigsRefused(t *testing.T) {
	b := mustBroker(t, nil)
	set := func(name, v string) []kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &v
		return []kmsg.IncrementalAlterConfigsRequestResourceConfig{c}
	}
	legacy := func(name, v string) []kmsg.AlterConfigsRequestResourceConfig {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = name, &v
		return []kmsg.AlterConfigsRequestResourceConfig{c}
	}
	refused := func(what string, err error) {
		t.Helper()
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(ce.Message, "dead-letter") {
			t.Errorf("%s: %v, want INVALID_CONFIG saying there is no dead-letter queue", what, err)
		}
	}
	for name, value := range map[string]string{DLQTopicName: "dlq", DLQCopyRecordEnable: "true"} {
		refused("Validate "+name, b.Validate(name, value))
		_, err := b.ApplyIncremental(nil, set(name, value))
		refused("IncrementalAlterConfigs SET "+name, err)
		del := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		del.Name, del.Op = name, kmsg.IncrementalAlterConfigOpDelete
		_, err = b.ApplyIncremental(nil, []kmsg.IncrementalAlterConfigsRequestResourceConfig{del})
		refused("IncrementalAlterConfigs DELETE "+name, err)
		_, err = b.ApplyAlter(legacy(name, value))
		refused("AlterConfigs "+name, err)
	}
	// Described as Kafka lists them, read-only, saying exactq does not act on them.
	for _, c := range b.DescribeConfigs(nil, []string{DLQTopicName}, false, true) {
		if !c.ReadOnly || c.Documentation == nil || *c.Documentation == "" {
			t.Errorf("%s: read-only %v, documentation %v; want read-only and documented", c.Name, c.ReadOnly, c.Documentation)
		}
	}
	// An override stored before the configs were refused never took effect: the group's
	// next change drops it instead of failing.
	next, err := b.ApplyIncremental(map[string]string{DLQTopicName: "dlq"}, set(ShareAutoOffsetReset, "earliest"))
	if err != nil || len(next) != 1 || next[ShareAutoOffsetReset] != "earliest" {
		t.Fatalf("change over a stored DLQ override: %v %v", next, err)
	}
}

// Legacy AlterConfigs replaces a group's whole override set, checking it as
// IncrementalAlterConfigs does.
func TestApplyAlterReplaces(t *testing.T) {
	b := mustBroker(t, nil)
	cfg := func(name string, v *string) kmsg.AlterConfigsRequestResourceConfig {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = name, v
		return c
	}
	earliest, three := "earliest", "3"
	next, err := b.ApplyAlter([]kmsg.AlterConfigsRequestResourceConfig{cfg(ShareAutoOffsetReset, &earliest)})
	if err != nil || len(next) != 1 || next[ShareAutoOffsetReset] != "earliest" {
		t.Fatalf("alter: %v %v", next, err)
	}
	if _, err := b.ApplyAlter([]kmsg.AlterConfigsRequestResourceConfig{cfg(ShareDeliveryCountLimit, &three), cfg(ShareDeliveryCountLimit, &three)}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("duplicate keys: %v", err)
	}
	if _, err := b.ApplyAlter([]kmsg.AlterConfigsRequestResourceConfig{cfg(ShareDeliveryCountLimit, nil)}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("null value: %v", err)
	}
	if _, err := b.ApplyAlter([]kmsg.AlterConfigsRequestResourceConfig{cfg("share.no.such", &three)}); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("unknown name: %v", err)
	}
}

// TestDescribeLikeKafka: DescribeConfigs of a group lists Kafka 4.4's 21 group configs with
// Kafka's values, sources and synonyms (the group's override first, then the broker synonym
// as the broker's configuration sets it and its DEFAULT_CONFIG:group.* default, or the group
// config's own default), and the configs exactq does not act on are read-only, documented as
// such and refused when set.
func TestDescribeLikeKafka(t *testing.T) {
	b := mustBroker(t, map[string]string{"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"})
	cfgs := b.DescribeConfigs(map[string]string{ShareIsolationLevel: "read_committed", ConsumerSessionTimeoutMs: "50000"}, nil, true, true)
	want := []string{
		"consumer.assignment.interval.ms", "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
		"errors.deadletterqueue.copy.record.enable", "errors.deadletterqueue.topic.name",
		"share.assignment.interval.ms", "share.auto.offset.reset", "share.delivery.count.limit", "share.heartbeat.interval.ms",
		"share.isolation.level", "share.partition.max.record.locks", "share.record.lock.duration.ms", "share.renew.acknowledge.enable",
		"share.session.timeout.ms", "streams.assignment.interval.ms", "streams.assignor.name", "streams.heartbeat.interval.ms",
		"streams.initial.rebalance.delay.ms", "streams.num.standby.replicas", "streams.rack.aware.assignment.tags", "streams.session.timeout.ms",
	}
	var got []string
	by := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range cfgs {
		got = append(got, c.Name)
		by[c.Name] = c
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("described\n%v\nwant Kafka's 21\n%v", got, want)
	}
	syn := func(c kmsg.DescribeConfigsResponseResourceConfig) string {
		var parts []string
		for _, s := range c.ConfigSynonyms {
			parts = append(parts, s.Source.String()+":"+s.Name+"="+*s.Value)
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct{ name, value, source, synonyms string }{
		{"consumer.assignment.interval.ms", "1000", "DEFAULT_CONFIG", "DEFAULT_CONFIG:group.consumer.assignment.interval.ms=1000"},
		{"consumer.session.timeout.ms", "50000", "GROUP_CONFIG", "GROUP_CONFIG:consumer.session.timeout.ms=50000 DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000"},
		{"consumer.heartbeat.interval.ms", "500", "STATIC_BROKER_CONFIG", "STATIC_BROKER_CONFIG:group.consumer.heartbeat.interval.ms=500 DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000"},
		{"share.isolation.level", "read_committed", "GROUP_CONFIG", "GROUP_CONFIG:share.isolation.level=read_committed DEFAULT_CONFIG:share.isolation.level=read_uncommitted"},
		{"share.auto.offset.reset", "latest", "DEFAULT_CONFIG", "DEFAULT_CONFIG:share.auto.offset.reset=latest"},
		{"share.record.lock.duration.ms", "30000", "DEFAULT_CONFIG", "DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000"},
		{"streams.assignor.name", "sticky", "DEFAULT_CONFIG", "DEFAULT_CONFIG:group.streams.assignors=sticky"},
		{"streams.rack.aware.assignment.tags", "", "DEFAULT_CONFIG", "DEFAULT_CONFIG:group.streams.rack.aware.assignment.tags="},
		{"errors.deadletterqueue.topic.name", "", "DEFAULT_CONFIG", "DEFAULT_CONFIG:errors.deadletterqueue.topic.name="},
		{"errors.deadletterqueue.copy.record.enable", "false", "DEFAULT_CONFIG", "DEFAULT_CONFIG:errors.deadletterqueue.copy.record.enable=false"},
	} {
		c := by[tc.name]
		if *c.Value != tc.value || c.Source.String() != tc.source || syn(c) != tc.synonyms {
			t.Errorf("%s = %q %s {%s}, want %q %s {%s}", tc.name, *c.Value, c.Source, syn(c), tc.value, tc.source, tc.synonyms)
		}
	}
	for name, c := range by {
		acted := byName[name].unsupported == ""
		if c.ReadOnly == acted || (!acted && !strings.Contains(*c.Documentation, "Not honoured by exactq")) {
			t.Errorf("%s: read-only %v, documentation %q", name, c.ReadOnly, *c.Documentation)
		}
		if !acted {
			if err := b.Validate(name, *c.Value); !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "Unsupported group config name") {
				t.Errorf("setting %s: %v", name, err)
			}
		}
	}
	if cfgs := b.DescribeConfigs(nil, []string{ConsumerSessionTimeoutMs}, false, false); len(cfgs) != 1 || cfgs[0].ConfigSynonyms != nil || cfgs[0].Documentation != nil {
		t.Fatalf("without synonyms or docs: %+v", cfgs)
	}
	// Kafka's internal configs are refused too.
	if err := b.Validate("consumer.assignor.offload.enable", "false"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("internal config: %v", err)
	}
	// Kafka's range message, within the broker's bounds.
	if err := b.Validate(ConsumerSessionTimeoutMs, "70000"); err == nil || err.Error() != "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive." {
		t.Fatalf("out of range: %v", err)
	}
}
