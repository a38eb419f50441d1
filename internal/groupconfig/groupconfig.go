// Package groupconfig holds Kafka's group-level dynamic configs (the GROUP config resource,
// type 32): their definitions, validation against the broker's min/max bounds, resolution
// to effective values and the DescribeConfigs view. Facts from Kafka 4.4's GroupConfig.java
// and ShareGroupConfig.java; exactq stores the overrides and the share path reads them.
//
// Kafka 4.4 also defines the KIP-1191 dead-letter-queue configs errors.deadletterqueue.topic.name
// and errors.deadletterqueue.copy.record.enable. exactq does not dead-letter records yet, so
// it refuses them (INVALID_CONFIG, as Kafka refuses a group config it does not know) and does
// not describe them, rather than accept a setting nothing acts on. Kafka itself only acts on
// them from share.version 2; exactq's share.version is 1.
package groupconfig

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Names of the group configs exactq acts on.
const (
	ShareSessionTimeoutMs       = "share.session.timeout.ms"
	ShareHeartbeatIntervalMs    = "share.heartbeat.interval.ms"
	ShareRecordLockDurationMs   = "share.record.lock.duration.ms"
	ShareDeliveryCountLimit     = "share.delivery.count.limit"
	SharePartitionMaxRecordLock = "share.partition.max.record.locks"
	ShareAutoOffsetReset        = "share.auto.offset.reset"
	ShareIsolationLevel         = "share.isolation.level"
	ShareRenewAckEnable         = "share.renew.acknowledge.enable"
	ShareAssignmentIntervalMs   = "share.assignment.interval.ms"
	ConsumerSessionTimeoutMs    = "consumer.session.timeout.ms"
	ConsumerHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"
)

// Kafka 4.4's KIP-1191 group configs, refused until exactq has a dead-letter queue.
const (
	DLQTopicName        = "errors.deadletterqueue.topic.name"
	DLQCopyRecordEnable = "errors.deadletterqueue.copy.record.enable"
)

// unsupported are Kafka group configs exactq refuses, with the reason a client is told.
var unsupported = map[string]string{
	DLQTopicName:        "exactq has no KIP-1191 dead-letter queue yet, so nothing would act on it",
	DLQCopyRecordEnable: "exactq has no KIP-1191 dead-letter queue yet, so nothing would act on it",
}

type kind int8

const (
	kindInt kind = iota
	kindBool
	kindString
)

// def is one group config. An int config falls back to brokerDefault and must lie within
// [brokerMin, brokerMax] (broker config names; Kafka's bounds are dynamic per cluster).
type def struct {
	name          string
	kind          kind
	brokerDefault string // broker config supplying the default, or "" for a fixed default
	fixedDefault  string
	brokerMin     string
	brokerMax     string
	atLeast       int64
	validate      func(string) error
	doc           string
}

var defs = []def{
	{name: ShareSessionTimeoutMs, kind: kindInt, brokerDefault: "group.share.session.timeout.ms", brokerMin: "group.share.min.session.timeout.ms", brokerMax: "group.share.max.session.timeout.ms", doc: "Share-group member session timeout."},
	{name: ShareHeartbeatIntervalMs, kind: kindInt, brokerDefault: "group.share.heartbeat.interval.ms", brokerMin: "group.share.min.heartbeat.interval.ms", brokerMax: "group.share.max.heartbeat.interval.ms", doc: "Share-group member heartbeat interval."},
	{name: ShareRecordLockDurationMs, kind: kindInt, brokerDefault: "group.share.record.lock.duration.ms", brokerMin: "group.share.min.record.lock.duration.ms", brokerMax: "group.share.max.record.lock.duration.ms", atLeast: 1000, doc: "How long a consumer holds an acquired record before it is released."},
	{name: ShareDeliveryCountLimit, kind: kindInt, brokerDefault: "group.share.delivery.count.limit", brokerMin: "group.share.min.delivery.count.limit", brokerMax: "group.share.max.delivery.count.limit", atLeast: 2, doc: "Deliveries after which a record is archived."},
	{name: SharePartitionMaxRecordLock, kind: kindInt, brokerDefault: "group.share.partition.max.record.locks", brokerMin: "group.share.min.partition.max.record.locks", brokerMax: "group.share.max.partition.max.record.locks", atLeast: 100, doc: "Most records acquired at once in one share partition."},
	{name: ShareAssignmentIntervalMs, kind: kindInt, brokerDefault: "group.share.assignment.interval.ms", brokerMin: "group.share.min.assignment.interval.ms", brokerMax: "group.share.max.assignment.interval.ms", doc: "Least time between target-assignment computations."},
	{name: ShareAutoOffsetReset, kind: kindString, fixedDefault: "latest", validate: validateAutoOffsetReset, doc: "Where a share partition starts when the group has no state for it: earliest, latest or by_duration:<ISO-8601 duration>."},
	{name: ShareIsolationLevel, kind: kindString, fixedDefault: "read_uncommitted", validate: oneOf("read_committed", "read_uncommitted"), doc: "Whether share consumers see records of open or aborted transactions."},
	{name: ShareRenewAckEnable, kind: kindBool, fixedDefault: "true", doc: "Whether consumers may renew acquisition locks (KIP-1222)."},
	{name: ConsumerSessionTimeoutMs, kind: kindInt, brokerDefault: "group.consumer.session.timeout.ms", brokerMin: "group.consumer.min.session.timeout.ms", brokerMax: "group.consumer.max.session.timeout.ms", doc: "Consumer-protocol (KIP-848) member session timeout."},
	{name: ConsumerHeartbeatIntervalMs, kind: kindInt, brokerDefault: "group.consumer.heartbeat.interval.ms", brokerMin: "group.consumer.min.heartbeat.interval.ms", brokerMax: "group.consumer.max.heartbeat.interval.ms", doc: "Consumer-protocol (KIP-848) heartbeat interval."},
}

// brokerDefaults are Kafka 4.4's defaults of the broker configs group configs fall back to.
var brokerDefaults = map[string]int64{
	"group.share.session.timeout.ms": 45000, "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
	"group.share.heartbeat.interval.ms": 5000, "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
	"group.share.record.lock.duration.ms": 30000, "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
	"group.share.delivery.count.limit": 5, "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
	"group.share.partition.max.record.locks": 2000, "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
	"group.share.assignment.interval.ms": 1000, "group.share.min.assignment.interval.ms": 0, "group.share.max.assignment.interval.ms": 15000,
	"group.consumer.session.timeout.ms": 45000, "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
	"group.consumer.heartbeat.interval.ms": 5000, "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
}

var byName = func() map[string]*def {
	m := map[string]*def{}
	for i := range defs {
		m[defs[i].name] = &defs[i]
	}
	return m
}()

// Broker is the broker-level configuration group configs are checked and resolved against.
type Broker struct{ ints map[string]int64 }

// NewBroker reads the broker configs that bound group configs (Kafka names, e.g.
// group.share.record.lock.duration.ms) on top of Kafka's defaults.
func NewBroker(static map[string]string) (*Broker, error) {
	b := &Broker{ints: map[string]int64{}}
	for k, v := range brokerDefaults {
		b.ints[k] = v
	}
	for k, v := range static {
		if _, ok := brokerDefaults[k]; !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("broker config %s=%q: not an integer", k, v)
		}
		b.ints[k] = n
	}
	return b, nil
}

// Int returns a broker config's value.
func (b *Broker) Int(name string) int64 { return b.ints[name] }

// Error is a config error with its Kafka error code.
type Error struct {
	Kind    *kerr.Error
	Message string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

func invalid(format string, args ...any) *Error {
	return &Error{Kind: kerr.InvalidConfig, Message: fmt.Sprintf(format, args...)}
}

// lookup returns a config's definition, or INVALID_CONFIG with Kafka's message for a name it
// does not know and exactq's reason for one exactq refuses.
func lookup(name string) (*def, error) {
	if why, ok := unsupported[name]; ok {
		return nil, invalid("Unsupported group config name: %s (%s)", name, why)
	}
	if d := byName[name]; d != nil {
		return d, nil
	}
	return nil, invalid("Unknown group config name: %s", name)
}

// Validate checks one override against its definition and the broker's bounds.
func (b *Broker) Validate(name, value string) error {
	d, err := lookup(name)
	if err != nil {
		return err
	}
	switch d.kind {
	case kindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
		if err != nil {
			return invalid("Invalid value %s for configuration %s: Not a number of type INT", value, name)
		}
		if n < d.atLeast {
			return invalid("Invalid value %d for configuration %s: Value must be at least %d", n, name, d.atLeast)
		}
		if d.brokerMin != "" && n < b.ints[d.brokerMin] {
			return invalid("%s must be greater than or equal to %s (%d)", name, d.brokerMin, b.ints[d.brokerMin])
		}
		if d.brokerMax != "" && n > b.ints[d.brokerMax] {
			return invalid("%s must be less than or equal to %s (%d)", name, d.brokerMax, b.ints[d.brokerMax])
		}
	case kindBool:
		if v := strings.ToLower(strings.TrimSpace(value)); v != "true" && v != "false" {
			return invalid("Invalid value %s for configuration %s: Expected value to be either true or false", value, name)
		}
	case kindString:
		if d.validate != nil {
			if err := d.validate(value); err != nil {
				return invalid("Invalid value %s for configuration %s: %v", value, name, err)
			}
		}
	}
	return nil
}

// ValidateSet checks a whole override set, including the rules across configs.
func (b *Broker) ValidateSet(s map[string]string) error {
	names := make([]string, 0, len(s))
	for k := range s {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := b.Validate(k, s[k]); err != nil {
			return err
		}
	}
	r := b.Resolve(s)
	if r.Int(ShareSessionTimeoutMs) <= r.Int(ShareHeartbeatIntervalMs) {
		return invalid("%s must be greater than %s", ShareSessionTimeoutMs, ShareHeartbeatIntervalMs)
	}
	if r.Int(ConsumerSessionTimeoutMs) <= r.Int(ConsumerHeartbeatIntervalMs) {
		return invalid("%s must be greater than %s", ConsumerSessionTimeoutMs, ConsumerHeartbeatIntervalMs)
	}
	return nil
}

// Resolved is a group's effective configuration.
type Resolved struct {
	values  map[string]string
	sources map[string]kmsg.ConfigSource
}

// Resolve applies overrides over the broker defaults.
func (b *Broker) Resolve(overrides map[string]string) Resolved {
	r := Resolved{values: map[string]string{}, sources: map[string]kmsg.ConfigSource{}}
	for _, d := range defs {
		if v, ok := overrides[d.name]; ok {
			r.values[d.name], r.sources[d.name] = strings.TrimSpace(v), kmsg.ConfigSourceGroupConfig
			continue
		}
		if d.brokerDefault != "" {
			r.values[d.name] = strconv.FormatInt(b.ints[d.brokerDefault], 10)
		} else {
			r.values[d.name] = d.fixedDefault
		}
		r.sources[d.name] = kmsg.ConfigSourceDefaultConfig
	}
	return r
}

// Int returns an int config.
func (r Resolved) Int(name string) int32 {
	n, _ := strconv.ParseInt(r.values[name], 10, 32)
	return int32(n)
}

// Bool returns a bool config.
func (r Resolved) Bool(name string) bool { return strings.EqualFold(r.values[name], "true") }

// String returns a string config.
func (r Resolved) String(name string) string { return r.values[name] }

// Describe is the DescribeConfigs view of a group: every config, sorted, filtered by names
// when given.
func (b *Broker) Describe(overrides map[string]string, names []string, includeDocs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	r := b.Resolve(overrides)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	sorted := append([]def(nil), defs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, d := range sorted {
		if len(want) > 0 && !want[d.name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = d.name
		v := r.values[d.name]
		c.Value = &v
		c.Source = r.sources[d.name]
		switch d.kind {
		case kindInt:
			c.ConfigType = kmsg.ConfigTypeInt
		case kindBool:
			c.ConfigType = kmsg.ConfigTypeBoolean
		default:
			c.ConfigType = kmsg.ConfigTypeString
		}
		if includeDocs {
			doc := d.doc
			c.Documentation = &doc
		}
		out = append(out, c)
	}
	return out
}

// ApplyIncremental applies IncrementalAlterConfigs operations to a group's overrides.
// APPEND and SUBTRACT need list configs, which groups do not have.
func (b *Broker) ApplyIncremental(current map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	next := known(current)
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, &Error{Kind: kerr.InvalidRequest, Message: "Error due to duplicate config keys"}
		}
		seen[op.Name] = true
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, &Error{Kind: kerr.InvalidRequest, Message: "Null value not supported for : " + op.Name}
			}
			if err := b.Validate(op.Name, *op.Value); err != nil {
				return nil, err
			}
			next[op.Name] = strings.TrimSpace(*op.Value)
		case kmsg.IncrementalAlterConfigOpDelete:
			if _, err := lookup(op.Name); err != nil {
				return nil, err
			}
			delete(next, op.Name)
		default:
			return nil, invalid("Config value append/subtract is not supported for group configs (%s)", op.Name)
		}
	}
	if err := b.ValidateSet(next); err != nil {
		return nil, err
	}
	return next, nil
}

// ApplyAlter applies a legacy AlterConfigs request: the configs given replace the group's
// whole override set, as Kafka's controller replaces it. Duplicate names and null values are
// INVALID_REQUEST, checked before any name, as Kafka's ConfigAdminManager checks them.
func (b *Broker) ApplyAlter(configs []kmsg.AlterConfigsRequestResourceConfig) (map[string]string, error) {
	next := make(map[string]string, len(configs))
	var nulls []string
	for _, c := range configs {
		if _, dup := next[c.Name]; dup {
			return nil, &Error{Kind: kerr.InvalidRequest, Message: "Error due to duplicate config keys"}
		}
		next[c.Name] = ""
		if c.Value == nil {
			nulls = append(nulls, c.Name)
			continue
		}
		next[c.Name] = strings.TrimSpace(*c.Value)
	}
	if len(nulls) > 0 {
		return nil, &Error{Kind: kerr.InvalidRequest, Message: "Null value not supported for : " + strings.Join(nulls, ", ")}
	}
	if err := b.ValidateSet(next); err != nil {
		return nil, err
	}
	return next, nil
}

// known copies the overrides of configs exactq defines. A stored override of one it no longer
// accepts (an errors.deadletterqueue.* set before it was refused) never took effect; it is
// dropped at the group's next change instead of failing that change.
func known(overrides map[string]string) map[string]string {
	out := make(map[string]string, len(overrides))
	for k, v := range overrides {
		if byName[k] != nil {
			out[k] = v
		}
	}
	return out
}

func oneOf(valid ...string) func(string) error {
	return func(v string) error {
		for _, ok := range valid {
			if strings.TrimSpace(v) == ok {
				return nil
			}
		}
		return fmt.Errorf("String must be one of: %s", strings.Join(valid, ", "))
	}
}

// isoDuration matches the ISO-8601 durations Java's Duration.parse accepts (PnDTnHnMn.nS).
var isoDuration = regexp.MustCompile(`^-?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

func validateAutoOffsetReset(v string) error {
	v = strings.TrimSpace(v)
	switch {
	case v == "earliest" || v == "latest":
		return nil
	case strings.HasPrefix(v, "by_duration:"):
		d := strings.TrimPrefix(v, "by_duration:")
		if d == "" || d == "P" || d == "PT" || !isoDuration.MatchString(strings.ToUpper(d)) || strings.HasPrefix(d, "-") {
			return errors.New("by_duration needs a non-negative ISO-8601 duration, e.g. by_duration:PT1H")
		}
		return nil
	}
	return errors.New("must be earliest, latest or by_duration:<ISO-8601 duration>")
}

// ByDurationMs parses share.auto.offset.reset=by_duration:<d> into milliseconds; ok is false
// for earliest/latest.
func ByDurationMs(v string) (ms int64, ok bool) {
	d, found := strings.CutPrefix(strings.TrimSpace(v), "by_duration:")
	if !found {
		return 0, false
	}
	m := isoDuration.FindStringSubmatch(strings.ToUpper(d))
	if m == nil {
		return 0, false
	}
	part := func(s string, unit float64) float64 {
		if s == "" {
			return 0
		}
		f, _ := strconv.ParseFloat(s, 64)
		return f * unit
	}
	total := part(m[1], 86400e3) + part(m[2], 3600e3) + part(m[3], 60e3) + part(m[4], 1e3)
	return int64(total), true
}
