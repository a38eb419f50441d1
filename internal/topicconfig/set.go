package topicconfig

import (
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Set is a topic's explicit config overrides (DYNAMIC_TOPIC_CONFIG), by name. Values are
// stored in canonical form (see Canonical). A nil Set has no overrides.
type Set map[string]string

// Clone returns a copy of s.
func (s Set) Clone() Set {
	out := make(Set, len(s))
	for k, v := range s {
		out[k] = v
	}
	return out
}

// maxValueBytes is the largest config value Kafka's controller stores (Short.MAX_VALUE).
const maxValueBytes = 32767

func parseValid(d *Def, raw string) (any, *Error) {
	v, err := parse(d.Name, raw, d.Type)
	if err != nil {
		return nil, err
	}
	if d.validate != nil {
		if err := d.validate(d.Name, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Validate checks one topic config: a known name and a value that parses and passes the
// config's validator. Errors are INVALID_CONFIG with Kafka's message.
func Validate(name, value string) error {
	if _, err := Canonical(name, value); err != nil {
		return err
	}
	return nil
}

// Canonical validates a topic config value and returns it as Kafka renders it (trimmed,
// "TRUE" → "true", "compact, delete" → "compact,delete").
func Canonical(name, value string) (string, error) {
	d := defsByName[name]
	if d == nil {
		return "", invalidConfig("Unknown topic config name: %s", name)
	}
	if len(value) > maxValueBytes {
		return "", invalidConfig("The configuration value cannot be added because it exceeds the maximum value size of %d bytes.", maxValueBytes)
	}
	v, err := parseValid(d, value)
	if err != nil {
		return "", err
	}
	return format(v), nil
}

// ValidateSet checks a whole override set as Kafka's LogConfig.validate does: every entry
// on its own, then the rules across configs, resolved against the broker defaults
// (min.compaction.lag.ms ≤ max.compaction.lag.ms; no tiered storage). Entries are checked
// in name order so the reported error is deterministic.
func ValidateSet(s Set, broker *BrokerDefaults) error {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := Validate(n, s[n]); err != nil {
			return err
		}
	}
	r := Resolve(s, broker)
	if minLag, maxLag := r.Long(MinCompactionLagMs), r.Long(MaxCompactionLagMs); minLag > maxLag {
		return invalidConfig("conflict topic config setting %s (%d) > %s (%d)",
			MinCompactionLagMs, minLag, MaxCompactionLagMs, maxLag)
	}
	if r.Bool(RemoteStorageEnable) {
		// Kafka's answer when remote.log.storage.system.enable is false, which is always
		// true of exactq.
		return invalidConfig("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	if r.Bool(ErrorsDeadletterqueueGroupEnable) {
		// KIP-1191: true would let share groups dead-letter into this topic, and exactq has
		// no dead-letter queue yet, so it would be accepted and ignored (issue #11). false,
		// Kafka's default, is what exactq does.
		return invalidConfig("%s=true is not supported: exactq has no KIP-1191 dead-letter queue yet", ErrorsDeadletterqueueGroupEnable)
	}
	return nil
}

// canonicalize validates every entry of s and returns the canonical copy.
func canonicalize(s Set, broker *BrokerDefaults) (Set, error) {
	if err := ValidateSet(s, broker); err != nil {
		return nil, err
	}
	out := make(Set, len(s))
	for n, v := range s {
		c, _ := Canonical(n, v)
		out[n] = c
	}
	return out, nil
}

// FromCreate builds the override set of a CreateTopics request's topic configs. Kafka
// answers null values with INVALID_CONFIG "Null value not supported for topic configs: a,b";
// a name given twice keeps the last value.
func FromCreate(configs []kmsg.CreateTopicsRequestTopicConfig, broker *BrokerDefaults) (Set, error) {
	s := make(Set, len(configs))
	var nulls []string
	for _, c := range configs {
		if c.Value == nil {
			nulls = append(nulls, c.Name)
			continue
		}
		s[c.Name] = *c.Value
	}
	if len(nulls) > 0 {
		return nil, invalidConfig("Null value not supported for topic configs: %s", strings.Join(nulls, ","))
	}
	return canonicalize(s, broker)
}

// ApplyAlter applies a legacy AlterConfigs request to a topic: the request's configs
// replace the whole override set (configs not listed return to their defaults). Duplicate
// names or null values are INVALID_REQUEST; bad names or values INVALID_CONFIG.
func ApplyAlter(ops []kmsg.AlterConfigsRequestResourceConfig, broker *BrokerDefaults) (Set, error) {
	s := make(Set, len(ops))
	var nulls []string
	for _, op := range ops {
		if _, dup := s[op.Name]; dup {
			return nil, invalidRequest("Error due to duplicate config keys")
		}
		if op.Value == nil {
			nulls = append(nulls, op.Name)
			s[op.Name] = ""
			continue
		}
		s[op.Name] = *op.Value
	}
	if len(nulls) > 0 {
		return nil, invalidRequest("Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	return canonicalize(s, broker)
}

// ApplyIncremental applies IncrementalAlterConfigs operations to a topic's current
// overrides and returns the new set; current is not modified. SET replaces a value,
// DELETE removes the override (unknown names are a no-op, as in Kafka), APPEND and SUBTRACT
// add or remove comma-separated entries of a LIST config, starting from the topic-level
// default when the topic has no override. The result is validated as a whole.
func ApplyIncremental(current Set, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, broker *BrokerDefaults) (Set, error) {
	seen := make(map[string]bool, len(ops))
	var nulls []string
	for _, op := range ops {
		if seen[op.Name] {
			return nil, invalidRequest("Error due to duplicate config keys")
		}
		seen[op.Name] = true
		if op.Op != kmsg.IncrementalAlterConfigOpDelete && op.Value == nil {
			nulls = append(nulls, op.Name)
		}
	}
	if len(nulls) > 0 {
		return nil, invalidRequest("Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	next := current.Clone()
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			next[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			d := defsByName[op.Name]
			opName := "APPEND"
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
				opName = "SUBTRACT"
			}
			if d == nil || d.Type != TypeList {
				return nil, invalidConfig("Can't %s to key %s because its type is not LIST.", opName, op.Name)
			}
			parts := listParts(next, d)
			for _, v := range strings.Split(*op.Value, ",") {
				if op.Op == kmsg.IncrementalAlterConfigOpAppend {
					if !contains(parts, v) {
						parts = append(parts, v)
					}
				} else {
					parts = removeFirst(parts, v)
				}
			}
			next[op.Name] = strings.Join(parts, ",")
		default:
			return nil, invalidRequest("Unknown operations type %s", strconv.Itoa(int(op.Op)))
		}
	}
	return canonicalize(next, broker)
}

// listParts is the controller's getParts: the current value (or the default) split on
// commas, empty parts dropped.
func listParts(s Set, d *Def) []string {
	v, ok := s[d.Name]
	if !ok && d.Default != nil {
		v = *d.Default
	}
	var parts []string
	for _, p := range strings.Split(v, ",") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

func contains(l []string, v string) bool {
	for _, e := range l {
		if e == v {
			return true
		}
	}
	return false
}

func removeFirst(l []string, v string) []string {
	for i, e := range l {
		if e == v {
			return append(l[:i:i], l[i+1:]...)
		}
	}
	return l
}
