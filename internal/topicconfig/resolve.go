package topicconfig

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resolved is a topic's effective configuration: each config from the topic override, else
// from the first broker synonym the operator set, else Kafka's default. It is immutable.
type Resolved struct {
	values  map[string]any
	sources map[string]kmsg.ConfigSource
}

// Resolve computes a topic's effective configuration. overrides should have passed
// ValidateSet; an override that does not parse (a corrupt store) is ignored and the config
// falls back as if it were absent. broker may be nil for Kafka's defaults.
func Resolve(overrides Set, broker *BrokerDefaults) Resolved {
	broker = broker.orDefault()
	r := Resolved{values: make(map[string]any, len(defs)), sources: make(map[string]kmsg.ConfigSource, len(defs))}
	for _, d := range defs {
		if raw, ok := overrides[d.Name]; ok {
			if v, err := parseValid(d, raw); err == nil {
				r.values[d.Name] = v
				r.sources[d.Name] = kmsg.ConfigSourceDynamicTopicConfig
				continue
			}
		}
		if v, ok := broker.synonymValue(d); ok {
			r.values[d.Name] = v
			r.sources[d.Name] = kmsg.ConfigSourceStaticBrokerConfig
			continue
		}
		if d.Default != nil {
			v, err := parse(d.Name, *d.Default, d.Type)
			if err != nil {
				panic("topicconfig: bad built-in default: " + err.Error())
			}
			r.values[d.Name] = v
		}
		r.sources[d.Name] = kmsg.ConfigSourceDefaultConfig
	}
	return r
}

func (r Resolved) get(name string, t Type) any {
	d := defsByName[name]
	if d == nil || d.Type != t {
		panic(fmt.Sprintf("topicconfig: %s is not a %s topic config", name, t))
	}
	return r.values[name]
}

// Has reports whether the config has a value (only internal configs may lack one).
func (r Resolved) Has(name string) bool { _, ok := r.values[name]; return ok }

// Int returns an INT config. It panics if name is not an INT topic config.
func (r Resolved) Int(name string) int32 { v, _ := r.get(name, TypeInt).(int32); return v }

// Long returns a LONG config. It panics if name is not a LONG topic config.
func (r Resolved) Long(name string) int64 { v, _ := r.get(name, TypeLong).(int64); return v }

// Bool returns a BOOLEAN config. It panics if name is not a BOOLEAN topic config.
func (r Resolved) Bool(name string) bool { v, _ := r.get(name, TypeBoolean).(bool); return v }

// Double returns a DOUBLE config. It panics if name is not a DOUBLE topic config.
func (r Resolved) Double(name string) float64 { v, _ := r.get(name, TypeDouble).(float64); return v }

// String returns a STRING config. It panics if name is not a STRING topic config.
func (r Resolved) String(name string) string { v, _ := r.get(name, TypeString).(string); return v }

// List returns a copy of a LIST config. It panics if name is not a LIST topic config.
func (r Resolved) List(name string) []string {
	v, _ := r.get(name, TypeList).([]string)
	return append([]string(nil), v...)
}

// Value returns the config rendered as Kafka shows it, and false if it has no value.
func (r Resolved) Value(name string) (string, bool) {
	v, ok := r.values[name]
	if !ok {
		return "", false
	}
	return format(v), true
}

// Source says where the effective value came from: DYNAMIC_TOPIC_CONFIG (override),
// STATIC_BROKER_CONFIG (a broker synonym the operator set) or DEFAULT_CONFIG.
func (r Resolved) Source(name string) kmsg.ConfigSource { return r.sources[name] }

// LogSettings are the topic configs the partition log acts on, typed. The broker converts
// them into the log package's config.
type LogSettings struct {
	SegmentBytes       int64 // segment.bytes, or internal.segment.bytes when set
	SegmentMs          int64 // segment.ms
	IndexIntervalBytes int32 // index.interval.bytes
	RetentionMs        int64 // retention.ms; -1 = unlimited
	RetentionBytes     int64 // retention.bytes; -1 = unlimited
	// Delete and Compact are cleanup.policy. Both false (an empty list) means neither
	// retention deletion nor compaction runs (Kafka 4.x semantics).
	Delete             bool
	Compact            bool
	DeleteRetentionMs  int64 // delete.retention.ms
	MinCompactionLagMs int64 // min.compaction.lag.ms
	MaxMessageBytes    int32 // max.message.bytes
	// LogAppendTime is message.timestamp.type == LogAppendTime.
	LogAppendTime               bool
	MessageTimestampBeforeMaxMs int64 // message.timestamp.before.max.ms
	MessageTimestampAfterMaxMs  int64 // message.timestamp.after.max.ms
	// CompressionType is one of uncompressed, zstd, lz4, snappy, gzip, producer.
	CompressionType string
	// CompressionLevel is compression.gzip.level or compression.zstd.level when
	// CompressionType is gzip or zstd, else 0 (no level applies).
	CompressionLevel int
}

// LogSettings extracts the settings the log acts on.
func (r Resolved) LogSettings() LogSettings {
	seg := int64(r.Int(SegmentBytes))
	if r.Has(InternalSegmentBytes) {
		seg = int64(r.Int(InternalSegmentBytes))
	}
	s := LogSettings{
		SegmentBytes:                seg,
		SegmentMs:                   r.Long(SegmentMs),
		IndexIntervalBytes:          r.Int(IndexIntervalBytes),
		RetentionMs:                 r.Long(RetentionMs),
		RetentionBytes:              r.Long(RetentionBytes),
		DeleteRetentionMs:           r.Long(DeleteRetentionMs),
		MinCompactionLagMs:          r.Long(MinCompactionLagMs),
		MaxMessageBytes:             r.Int(MaxMessageBytes),
		LogAppendTime:               r.String(MessageTimestampType) == TimestampLogAppendTime,
		MessageTimestampBeforeMaxMs: r.Long(MessageTimestampBeforeMaxMs),
		MessageTimestampAfterMaxMs:  r.Long(MessageTimestampAfterMaxMs),
		CompressionType:             r.String(CompressionType),
	}
	switch s.CompressionType {
	case "gzip":
		s.CompressionLevel = int(r.Int(CompressionGzipLevel))
	case "zstd":
		s.CompressionLevel = int(r.Int(CompressionZstdLevel))
	}
	for _, p := range r.List(CleanupPolicy) {
		switch p {
		case CleanupDelete:
			s.Delete = true
		case CleanupCompact:
			s.Compact = true
		}
	}
	return s
}
