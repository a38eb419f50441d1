package topicconfig

import (
	"errors"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sp(s string) *string { return &s }

// TestKafkaDefaults compares defaults with numbers read in Kafka 4.4's source.
func TestKafkaDefaults(t *testing.T) {
	r := Resolve(nil, nil)
	cases := []struct {
		name string
		want string
		from string
	}{
		{SegmentBytes, "1073741824", "LogConfig.java DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024"},
		{SegmentMs, "604800000", "LogConfig.java DEFAULT_SEGMENT_MS = 24 * 7 * 60 * 60 * 1000L"},
		{RetentionMs, "604800000", "LogConfig.java DEFAULT_RETENTION_MS"},
		{DeleteRetentionMs, "86400000", "LogConfig.java DEFAULT_DELETE_RETENTION_MS"},
		{MaxMessageBytes, "1048588", "ServerLogConfigs.java MAX_MESSAGE_BYTES_DEFAULT = 1024 * 1024 + Records.LOG_OVERHEAD"},
		{IndexIntervalBytes, "4096", "ServerLogConfigs.java LOG_INDEX_INTERVAL_BYTES_DEFAULT"},
		{SegmentIndexBytes, "10485760", "ServerLogConfigs.java LOG_INDEX_SIZE_MAX_BYTES_DEFAULT"},
		{MessageTimestampAfterMaxMs, "3600000", "ServerLogConfigs.java LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT"},
		{MessageTimestampBeforeMaxMs, "9223372036854775807", "ServerLogConfigs.java (Long.MAX_VALUE)"},
		{MinCleanableDirtyRatio, "0.5", "LogConfig.java DEFAULT_MIN_CLEANABLE_DIRTY_RATIO"},
		{CompressionZstdLevel, "3", "CompressionType.java ZSTD DEFAULT_LEVEL"},
		{CompressionLz4Level, "9", "CompressionType.java LZ4 DEFAULT_LEVEL"},
		{CompressionGzipLevel, "-1", "CompressionType.java GZIP Deflater.DEFAULT_COMPRESSION"},
		{CleanupPolicy, "delete", "ServerLogConfigs.java LOG_CLEANUP_POLICY_DEFAULT"},
		{CompressionType, "producer", "ServerLogConfigs.java COMPRESSION_TYPE_DEFAULT"},
		{LocalRetentionMs, "-2", "LogConfig.java DEFAULT_LOCAL_RETENTION_MS"},
		{FileDeleteDelayMs, "60000", "ServerLogConfigs.java LOG_DELETE_DELAY_MS_DEFAULT"},
	}
	for _, c := range cases {
		if got, _ := r.Value(c.name); got != c.want {
			t.Errorf("%s = %q, want %q (%s)", c.name, got, c.want, c.from)
		}
	}
	b := KafkaDefaults()
	if b.NumPartitions() != 1 || b.DefaultReplicationFactor() != 1 || !b.AutoCreateTopicsEnable() ||
		b.MessageMaxBytes() != 1048588 || b.MaxIncrementalFetchSessionCacheSlots() != 1000 {
		t.Fatalf("broker defaults differ from Kafka's")
	}
	if r.Has(InternalSegmentBytes) {
		t.Fatalf("internal.segment.bytes has no default")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name, value string
		err         string // "" = valid
	}{
		{"segment.bytes", "1048576", ""},
		{"segment.bytes", "1048575", "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"},
		{"segment.bytes", "abc", "Invalid value abc for configuration segment.bytes: Not a number of type INT"},
		{"segment.bytes", "2147483648", "Not a number of type INT"},
		{"segment.bytes", " 2097152 ", ""},
		{"retention.ms", "-1", ""},
		{"retention.ms", "-2", "Value must be at least -1"},
		{"retention.bytes", "-5", ""}, // Kafka has no validator on retention.bytes
		{"cleanup.policy", "compact,delete", ""},
		{"cleanup.policy", "compact, delete", ""},
		{"cleanup.policy", "", ""}, // empty list is allowed in Kafka 4.x
		{"cleanup.policy", "compact,compact", "Configuration 'cleanup.policy' values must not be duplicated."},
		{"cleanup.policy", "compact,", "Configuration 'cleanup.policy' values must not be empty."},
		{"cleanup.policy", "Compact", "Invalid value Compact for configuration cleanup.policy: String must be one of: compact, delete"},
		{"compression.type", "zstd", ""},
		{"compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{"message.timestamp.type", "LogAppendTime", ""},
		{"message.timestamp.type", "logappendtime", "String must be one of: CreateTime, LogAppendTime"},
		{"min.insync.replicas", "0", "Value must be at least 1"},
		{"min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"},
		{"min.cleanable.dirty.ratio", "NaN", "Not a number of type DOUBLE"},
		{"preallocate", "TRUE", ""},
		{"preallocate", "yes", "Expected value to be either true or false"},
		{"compression.gzip.level", "-1", ""},
		{"compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"},
		{"compression.zstd.level", "23", "Value must be no more than 22"},
		{"leader.replication.throttled.replicas", "*", ""},
		{"leader.replication.throttled.replicas", "0:1,1:2", ""},
		{"leader.replication.throttled.replicas", "0:1,x", "must be the literal '*'"},
		{"message.downconversion.enable", "true", "Unknown topic config name: message.downconversion.enable"},
		{"nope", "1", "Unknown topic config name: nope"},
		{"internal.segment.bytes", "1024", ""},
	}
	for _, c := range cases {
		err := Validate(c.name, c.value)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("Validate(%s=%q) = %v, want ok", c.name, c.value, err)
		case c.err != "" && err == nil:
			t.Errorf("Validate(%s=%q) ok, want %q", c.name, c.value, c.err)
		case c.err != "":
			if !strings.Contains(err.(*Error).Message, c.err) {
				t.Errorf("Validate(%s=%q) = %q, want %q", c.name, c.value, err.(*Error).Message, c.err)
			}
			if !errors.Is(err, kerr.InvalidConfig) {
				t.Errorf("Validate(%s=%q) not INVALID_CONFIG", c.name, c.value)
			}
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"preallocate", " TRUE "}:               "true",
		{"cleanup.policy", "compact , delete"}:  "compact,delete",
		{"min.cleanable.dirty.ratio", "1"}:      "1.0",
		{"min.cleanable.dirty.ratio", "0.0001"}: "1.0E-4",
		{"retention.ms", "+5"}:                  "5",
	} {
		got, err := Canonical(in[0], in[1])
		if err != nil || got != want {
			t.Errorf("Canonical(%s=%q) = %q, %v; want %q", in[0], in[1], got, err, want)
		}
	}
}

func TestValidateSetCrossRules(t *testing.T) {
	err := ValidateSet(Set{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, nil)
	if err == nil || err.(*Error).Message != "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)" {
		t.Fatalf("got %v", err)
	}
	// The broker's default could make the pair conflict too, but exactq does not act on
	// max.compaction.lag.ms, so its broker default is refused rather than accepted.
	if _, err := NewBrokerDefaults(map[string]string{"log.cleaner.max.compaction.lag.ms": "100"}); err == nil {
		t.Fatal("log.cleaner.max.compaction.lag.ms accepted though exactq does not act on it")
	}
	if err := ValidateSet(Set{"remote.storage.enable": "true"}, nil); err == nil || !strings.Contains(err.Error(), "Tiered Storage") {
		t.Fatalf("got %v", err)
	}
	if err := ValidateSet(Set{"remote.storage.enable": "false"}, nil); err != nil {
		t.Fatal(err)
	}
	// KIP-1191's topic switch: true would be accepted and ignored (no dead-letter queue).
	if err := ValidateSet(Set{"errors.deadletterqueue.group.enable": "true"}, nil); err == nil || !strings.Contains(err.Error(), "dead-letter") {
		t.Fatalf("errors.deadletterqueue.group.enable=true: %v, want INVALID_CONFIG naming the dead-letter queue", err)
	}
	if err := ValidateSet(Set{"errors.deadletterqueue.group.enable": "false"}, nil); err != nil {
		t.Fatalf("errors.deadletterqueue.group.enable=false: %v", err)
	}
}

func TestResolveSynonyms(t *testing.T) {
	b, err := NewBrokerDefaults(map[string]string{"log.retention.hours": "24", "log.segment.bytes": "2097152", "log.roll.ms": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	r := Resolve(Set{"segment.bytes": "3145728"}, b)
	if r.Long(RetentionMs) != 24*3600*1000 || r.Source(RetentionMs) != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("retention.ms = %d from %d", r.Long(RetentionMs), r.Source(RetentionMs))
	}
	if r.Int(SegmentBytes) != 3145728 || r.Source(SegmentBytes) != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("segment.bytes = %d", r.Int(SegmentBytes))
	}
	if r.Long(SegmentMs) != 1000 {
		t.Fatalf("segment.ms = %d", r.Long(SegmentMs))
	}
	b2, _ := NewBrokerDefaults(map[string]string{"log.retention.hours": "24", "log.retention.minutes": "5"})
	if got := Resolve(nil, b2).Long(RetentionMs); got != 5*60*1000 {
		t.Fatalf("minutes must win over hours, got %d", got)
	}
	if _, err := NewBrokerDefaults(map[string]string{"bogus": "1"}); err == nil {
		t.Fatal("unknown broker config accepted")
	}
}

func TestLogSettings(t *testing.T) {
	s := Resolve(Set{"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime", "internal.segment.bytes": "4096"}, nil).LogSettings()
	want := LogSettings{
		SegmentBytes: 4096, SegmentMs: DefaultSegmentMs, IndexIntervalBytes: 4096, RetentionMs: DefaultRetentionMs,
		RetentionBytes: -1, Compact: true, DeleteRetentionMs: DefaultDeleteRetentionMs, MaxMessageBytes: 1048588,
		LogAppendTime: true, MessageTimestampBeforeMaxMs: DefaultMessageTimestampBeforeMaxMs,
		MessageTimestampAfterMaxMs: 3600000, CompressionType: "producer",
	}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if s := Resolve(Set{"cleanup.policy": ""}, nil).LogSettings(); s.Delete || s.Compact {
		t.Fatal("empty cleanup.policy must disable both")
	}
}

func find(cs []kmsg.DescribeConfigsResponseResourceConfig, name string) *kmsg.DescribeConfigsResponseResourceConfig {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

type syn struct {
	name, value string
	src         kmsg.ConfigSource
}

func syns(c *kmsg.DescribeConfigsResponseResourceConfig) []syn {
	var out []syn
	for _, s := range c.ConfigSynonyms {
		v := "<null>"
		if s.Value != nil {
			v = *s.Value
		}
		out = append(out, syn{s.Name, v, s.Source})
	}
	return out
}

func TestDescribeDefaults(t *testing.T) {
	cs := Describe(nil, nil, nil, true, true)
	for _, d := range Defs() {
		if got := find(cs, d.Name) != nil; got == d.Internal {
			t.Errorf("%s listed=%v internal=%v", d.Name, got, d.Internal)
		}
	}
	for i := 1; i < len(cs); i++ {
		if cs[i-1].Name >= cs[i].Name {
			t.Fatal("not sorted")
		}
	}
	mm := find(cs, MaxMessageBytes)
	if *mm.Value != "1048588" || mm.Source != kmsg.ConfigSourceDefaultConfig || mm.ConfigType != kmsg.ConfigTypeInt || mm.Documentation == nil || mm.ReadOnly {
		t.Fatalf("max.message.bytes = %+v", mm)
	}
	if !reflect.DeepEqual(syns(mm), []syn{{"message.max.bytes", "1048588", kmsg.ConfigSourceDefaultConfig}}) {
		t.Fatalf("synonyms %v", syns(mm))
	}
	// Kafka's quirk: retention.ms's first synonym log.retention.ms has no default, so no
	// synonyms are shown (kafka-configs prints synonyms={}).
	rm := find(cs, RetentionMs)
	if *rm.Value != "604800000" || len(rm.ConfigSynonyms) != 0 || rm.Source != kmsg.ConfigSourceDefaultConfig || rm.ConfigType != kmsg.ConfigTypeLong {
		t.Fatalf("retention.ms = %+v", rm)
	}
	cp := find(cs, CleanupPolicy)
	if cp.ConfigType != kmsg.ConfigTypeList || !reflect.DeepEqual(syns(cp), []syn{{"log.cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig}}) {
		t.Fatalf("cleanup.policy = %+v", syns(cp))
	}
	if rs := find(cs, RemoteStorageEnable); len(rs.ConfigSynonyms) != 0 || rs.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatal("remote.storage.enable has no broker synonym")
	}
	if cs := Describe(nil, nil, nil, false, false); find(cs, MaxMessageBytes).ConfigSynonyms != nil || find(cs, MaxMessageBytes).Documentation != nil {
		t.Fatal("synonyms/docs not asked for")
	}
}

func TestDescribeOverridesAndStatic(t *testing.T) {
	b, _ := NewBrokerDefaults(map[string]string{"log.retention.ms": "1000", "message.max.bytes": "2000000"})
	cs := Describe(Set{"retention.ms": "5000", "internal.segment.bytes": "4096"}, b, nil, true, false)
	rm := find(cs, RetentionMs)
	want := []syn{
		{"retention.ms", "5000", kmsg.ConfigSourceDynamicTopicConfig},
		{"log.retention.ms", "1000", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.retention.hours", "168", kmsg.ConfigSourceDefaultConfig},
	}
	if rm.Source != kmsg.ConfigSourceDynamicTopicConfig || *rm.Value != "5000" || !reflect.DeepEqual(syns(rm), want) {
		t.Fatalf("retention.ms = %v %v", rm.Source, syns(rm))
	}
	mm := find(cs, MaxMessageBytes)
	if mm.Source != kmsg.ConfigSourceStaticBrokerConfig || *mm.Value != "2000000" || !reflect.DeepEqual(syns(mm), []syn{
		{"message.max.bytes", "2000000", kmsg.ConfigSourceStaticBrokerConfig},
		{"message.max.bytes", "1048588", kmsg.ConfigSourceDefaultConfig},
	}) {
		t.Fatalf("max.message.bytes = %v %v", mm.Source, syns(mm))
	}
	if find(cs, InternalSegmentBytes) == nil {
		t.Fatal("overridden internal config must be listed")
	}
	only := Describe(nil, b, []string{"segment.bytes", "no.such"}, false, false)
	if len(only) != 1 || only[0].Name != "segment.bytes" {
		t.Fatalf("filter: %+v", only)
	}
}

func TestDescribeBroker(t *testing.T) {
	b, _ := NewBrokerDefaults(map[string]string{"log.retention.hours": "24"})
	cs := b.DescribeBroker(nil, true, false)
	h := find(cs, "log.retention.hours")
	if !h.ReadOnly || *h.Value != "24" || h.Source != kmsg.ConfigSourceStaticBrokerConfig || !reflect.DeepEqual(syns(h), []syn{
		{"log.retention.hours", "24", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.retention.hours", "168", kmsg.ConfigSourceDefaultConfig},
	}) {
		t.Fatalf("log.retention.hours = %+v %v", h, syns(h))
	}
	if ms := find(cs, "log.retention.ms"); ms.Value != nil || ms.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("log.retention.ms = %+v", ms)
	}
	if np := find(cs, "num.partitions"); *np.Value != "1" || np.ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("num.partitions = %+v", np)
	}
}

func inc(name string, op kmsg.IncrementalAlterConfigOp, v *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, op, v
	return c
}

func TestApplyIncremental(t *testing.T) {
	const (
		set = kmsg.IncrementalAlterConfigOpSet
		del = kmsg.IncrementalAlterConfigOpDelete
		app = kmsg.IncrementalAlterConfigOpAppend
		sub = kmsg.IncrementalAlterConfigOpSubtract
	)
	cur := Set{"retention.ms": "1000", "segment.ms": "5"}
	cases := []struct {
		name string
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want Set
		kind *kerr.Error
		msg  string
	}{
		{"set and delete", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("retention.ms", set, sp(" 2000 ")), inc("segment.ms", del, nil)},
			Set{"retention.ms": "2000"}, nil, ""},
		{"delete unknown is a no-op", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("nope", del, nil)}, cur, nil, ""},
		{"append starts from default", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("cleanup.policy", app, sp("compact"))},
			Set{"retention.ms": "1000", "segment.ms": "5", "cleanup.policy": "delete,compact"}, nil, ""},
		{"append existing entry", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("cleanup.policy", app, sp("delete"))},
			Set{"retention.ms": "1000", "segment.ms": "5", "cleanup.policy": "delete"}, nil, ""},
		{"subtract to empty", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("cleanup.policy", sub, sp("delete"))},
			Set{"retention.ms": "1000", "segment.ms": "5", "cleanup.policy": ""}, nil, ""},
		{"append bad entry", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("cleanup.policy", app, sp("zap"))},
			nil, kerr.InvalidConfig, "String must be one of: compact, delete"},
		{"append on non-list", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("retention.ms", app, sp("1"))},
			nil, kerr.InvalidConfig, "Can't APPEND to key retention.ms because its type is not LIST."},
		{"subtract on non-list", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("retention.ms", sub, sp("1"))},
			nil, kerr.InvalidConfig, "Can't SUBTRACT to key retention.ms because its type is not LIST."},
		{"set unknown", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("nope", set, sp("1"))},
			nil, kerr.InvalidConfig, "Unknown topic config name: nope"},
		{"duplicate keys", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("retention.ms", set, sp("1")), inc("retention.ms", del, nil)},
			nil, kerr.InvalidRequest, "Error due to duplicate config keys"},
		{"null set", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("retention.ms", set, nil)},
			nil, kerr.InvalidRequest, "Null value not supported for : retention.ms"},
		{"unknown op", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("retention.ms", 9, sp("1"))},
			nil, kerr.InvalidRequest, "Unknown operations type 9"},
		{"too long", []kmsg.IncrementalAlterConfigsRequestResourceConfig{inc("leader.replication.throttled.replicas", set, sp(strings.Repeat("1:1,", 9000)+"1:1"))},
			nil, kerr.InvalidConfig, "exceeds the maximum value size of 32767 bytes"},
	}
	for _, c := range cases {
		got, err := ApplyIncremental(cur, c.ops, nil)
		if c.kind == nil {
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: got %v, want %s %q", c.name, err, c.kind.Message, c.msg)
		}
	}
	if !reflect.DeepEqual(cur, Set{"retention.ms": "1000", "segment.ms": "5"}) {
		t.Fatal("current modified")
	}
}

func TestApplyAlterReplaces(t *testing.T) {
	mk := func(n string, v *string) kmsg.AlterConfigsRequestResourceConfig {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = n, v
		return c
	}
	got, err := ApplyAlter([]kmsg.AlterConfigsRequestResourceConfig{mk("retention.ms", sp("10"))}, nil)
	if err != nil || !reflect.DeepEqual(got, Set{"retention.ms": "10"}) {
		t.Fatalf("got %v %v", got, err)
	}
	if _, err := ApplyAlter([]kmsg.AlterConfigsRequestResourceConfig{mk("retention.ms", nil)}, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("null: %v", err)
	}
	if _, err := ApplyAlter([]kmsg.AlterConfigsRequestResourceConfig{mk("a", sp("1")), mk("a", sp("2"))}, nil); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("dup: %v", err)
	}
}

func TestFromCreate(t *testing.T) {
	mk := func(n string, v *string) kmsg.CreateTopicsRequestTopicConfig {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = n, v
		return c
	}
	_, err := FromCreate([]kmsg.CreateTopicsRequestTopicConfig{mk("a", nil), mk("b", nil)}, nil)
	if e, ok := err.(*Error); !ok || e.Kind != kerr.InvalidConfig || e.Message != "Null value not supported for topic configs: a,b" {
		t.Fatalf("got %v", err)
	}
	s, err := FromCreate([]kmsg.CreateTopicsRequestTopicConfig{mk("cleanup.policy", sp("compact"))}, nil)
	if err != nil || s["cleanup.policy"] != "compact" {
		t.Fatalf("got %v %v", s, err)
	}
}

func TestTopicNames(t *testing.T) {
	cases := map[string]string{
		"":                       "Topic name is invalid: the empty string is not allowed",
		".":                      "Topic name is invalid: '.' is not allowed",
		"..":                     "Topic name is invalid: '..' is not allowed",
		"...":                    "",
		"a-b_c.D9":               "",
		strings.Repeat("a", 249): "",
		strings.Repeat("a", 250): "is longer than the max allowed length 249",
		"a b":                    "contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'",
		"é":                      "contains one or more characters",
		"__consumer_offsets":     "",
	}
	for name, want := range cases {
		err := ValidateTopicName(name)
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, kerr.InvalidTopicException) || !strings.Contains(err.(*Error).Message, want) {
			t.Errorf("%q: got %v, want %q", name, err, want)
		}
	}
	if CollisionKey("a.b") != CollisionKey("a_b") || CollisionKey("a.b") == CollisionKey("a-b") {
		t.Fatal("collision key")
	}
	if !IsInternal(ShareGroupStateTopic) || IsInternal("x") || !HasCollisionChars("a.b") || HasCollisionChars("ab") {
		t.Fatal("internal/collision chars")
	}
}

// TestHonouredListMatchesDoc compares the table's Honoured flags with the package doc's
// two lists (what exactq acts on, what it only stores and describes), so neither can
// change without the other.
func TestHonouredListMatchesDoc(t *testing.T) {
	honouredDoc, notHonouredDoc := docLists(t)
	var honoured []string
	for _, d := range Defs() {
		if d.Honoured {
			honoured = append(honoured, d.Name)
		}
	}
	if !slices.Equal(honouredDoc, honoured) {
		t.Errorf("doc.go lists as honoured\n  %v\nthe table (Def.Honoured) says\n  %v", honouredDoc, honoured)
	}
	if notHonoured := NotHonoured(); !slices.Equal(notHonouredDoc, notHonoured) {
		t.Errorf("doc.go lists as not acted on\n  %v\nNotHonoured says\n  %v", notHonouredDoc, notHonoured)
	}
}

// docLists returns the config names (sorted) of the package doc's paragraph starting
// "Honoured today" and of the one starting "Stored, validated and described but not acted on".
func docLists(t *testing.T) (honoured, notHonoured []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		t.Fatalf("reading the package doc: %v", err)
	}
	// A config name is a lower-case word, dotted (retention.ms) or not (preallocate).
	word := regexp.MustCompile(`\b[a-z][a-z0-9]*(?:\.[a-z0-9]+)*\b`)
	names := func(prefix string) []string {
		for _, para := range strings.Split(f.Doc.Text(), "\n\n") {
			if !strings.HasPrefix(para, prefix) {
				continue
			}
			var out []string
			for _, w := range word.FindAllString(para, -1) {
				switch {
				case Lookup(w) != nil:
					out = append(out, w)
				case strings.Contains(w, "."):
					t.Errorf("doc.go names %q, which is no topic config", w)
				}
			}
			slices.Sort(out)
			return slices.Compact(out)
		}
		t.Fatalf("doc.go has no paragraph starting %q", prefix)
		return nil
	}
	return names("Honoured today"), names("Stored, validated and described but not acted on")
}
