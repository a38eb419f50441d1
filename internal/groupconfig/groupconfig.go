// Package groupconfig holds Kafka's group-level dynamic configs (the GROUP config resource,
// type 32): their definitions, validation against the broker's bounds, resolution to
// effective values and the DescribeConfigs view, with Kafka's broker synonyms. Facts from
// Kafka 4.4's GroupConfig.java, GroupCoordinatorConfig.java, ShareGroupConfig.java and
// ConfigHelper.createGroupConfigEntry; exactq stores the overrides and the consumer and share
// paths read them.
//
// DescribeConfigs lists the 21 configs Kafka 4.4 lists (its internal ones are listed by
// Kafka only when set, and exactq refuses to set them). Eight of them exactq does not act on:
// consumer.assignment.interval.ms (the target assignment is computed on the heartbeat that
// needs it), the seven streams.* configs (no streams groups) and the two KIP-1191
// dead-letter-queue configs (no dead-letter queue yet). Those are described with Kafka's
// values and sources, marked read-only, their documentation saying so, and setting one is
// refused with INVALID_CONFIG and the reason, rather than accepted with nothing acting on it.
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

// Kafka 4.4's group configs exactq describes but does not act on, so refuses to set.
const (
	ConsumerAssignmentIntervalMs = "consumer.assignment.interval.ms"
	DLQTopicName                 = "errors.deadletterqueue.topic.name"
	DLQCopyRecordEnable          = "errors.deadletterqueue.copy.record.enable"
)

// Kafka 4.4's internal group configs (defineInternal): not listed unless set, and exactq
// refuses to set them.
var internal = map[string]string{
	"consumer.assignor.offload.enable": "exactq computes assignments inline; there is no offload to enable",
	"share.assignor.offload.enable":    "exactq computes assignments inline; there is no offload to enable",
	"streams.assignor.offload.enable":  "exactq has no streams groups",
	"streams.task.offset.interval.ms":  "exactq has no streams groups",
	"streams.num.warmup.replicas":      "exactq has no streams groups",
	"streams.acceptable.recovery.lag":  "exactq has no streams groups",
}

const (
	noStreams = "exactq has no streams groups (KIP-1071), so nothing would act on it"
	noDLQ     = "exactq has no KIP-1191 dead-letter queue yet, so nothing would act on it"
)

type kind int8

const (
	kindInt kind = iota
	kindBool
	kindString
	kindList
)

// def is one group config. With a broker synonym its default is that broker config's value
// (Kafka's extractGroupConfigMap), else fixedDefault. An int config must lie within
// [brokerMin, brokerMax] (broker config names; Kafka's bounds are per cluster).
type def struct {
	name          string
	kind          kind
	brokerSynonym string // GroupConfig.ALL_GROUP_CONFIG_SYNONYMS, or ""
	fixedDefault  string
	brokerMin     string
	brokerMax     string
	atLeast       int64
	validate      func(string) error
	doc           string
	// unsupported is why exactq does not act on the config ("" when it does).
	unsupported string
}

var defs = []def{
	{name: ConsumerSessionTimeoutMs, kind: kindInt, brokerSynonym: "group.consumer.session.timeout.ms", brokerMin: "group.consumer.min.session.timeout.ms", brokerMax: "group.consumer.max.session.timeout.ms", atLeast: 1, doc: "The timeout to detect client failures when using the consumer group protocol."},
	{name: ConsumerHeartbeatIntervalMs, kind: kindInt, brokerSynonym: "group.consumer.heartbeat.interval.ms", brokerMin: "group.consumer.min.heartbeat.interval.ms", brokerMax: "group.consumer.max.heartbeat.interval.ms", atLeast: 1, doc: "The heartbeat interval given to the members of a consumer group."},
	{name: ConsumerAssignmentIntervalMs, kind: kindInt, brokerSynonym: "group.consumer.assignment.interval.ms", doc: "The interval between assignment updates for a consumer group.",
		unsupported: "exactq computes a consumer group's target assignment on the heartbeat that needs it, with no interval between updates"},
	{name: ShareSessionTimeoutMs, kind: kindInt, brokerSynonym: "group.share.session.timeout.ms", brokerMin: "group.share.min.session.timeout.ms", brokerMax: "group.share.max.session.timeout.ms", atLeast: 1, doc: "The timeout to detect client failures when using the share group protocol."},
	{name: ShareHeartbeatIntervalMs, kind: kindInt, brokerSynonym: "group.share.heartbeat.interval.ms", brokerMin: "group.share.min.heartbeat.interval.ms", brokerMax: "group.share.max.heartbeat.interval.ms", atLeast: 1, doc: "The heartbeat interval given to the members of a share group."},
	{name: ShareRecordLockDurationMs, kind: kindInt, brokerSynonym: "group.share.record.lock.duration.ms", brokerMin: "group.share.min.record.lock.duration.ms", brokerMax: "group.share.max.record.lock.duration.ms", atLeast: 1000, doc: "The record acquisition lock duration in milliseconds for share groups."},
	{name: ShareDeliveryCountLimit, kind: kindInt, brokerSynonym: "group.share.delivery.count.limit", brokerMin: "group.share.min.delivery.count.limit", brokerMax: "group.share.max.delivery.count.limit", atLeast: 2, doc: "The maximum number of delivery attempts for a record delivered to a share group."},
	{name: SharePartitionMaxRecordLock, kind: kindInt, brokerSynonym: "group.share.partition.max.record.locks", brokerMin: "group.share.min.partition.max.record.locks", brokerMax: "group.share.max.partition.max.record.locks", atLeast: 100, doc: "Share-group record lock limit per share-partition."},
	{name: ShareAssignmentIntervalMs, kind: kindInt, brokerSynonym: "group.share.assignment.interval.ms", brokerMin: "group.share.min.assignment.interval.ms", brokerMax: "group.share.max.assignment.interval.ms", doc: "The interval between assignment updates for a share group."},
	{name: ShareAutoOffsetReset, kind: kindString, fixedDefault: "latest", validate: validateAutoOffsetReset, doc: "The strategy to initialize the share-partition start offset: earliest, latest or by_duration:<ISO-8601 duration>."},
	{name: ShareIsolationLevel, kind: kindString, fixedDefault: "read_uncommitted", validate: oneOf("read_committed", "read_uncommitted"), doc: "Controls how to read records written transactionally: read_committed delivers only committed transactional records, read_uncommitted all of them."},
	{name: ShareRenewAckEnable, kind: kindBool, fixedDefault: "true", doc: "Whether the renew acknowledge type is enabled for the share group."},
	{name: "streams.session.timeout.ms", kind: kindInt, brokerSynonym: "group.streams.session.timeout.ms", doc: "The timeout to detect client failures when using the streams group protocol.", unsupported: noStreams},
	{name: "streams.heartbeat.interval.ms", kind: kindInt, brokerSynonym: "group.streams.heartbeat.interval.ms", doc: "The heartbeat interval given to the members.", unsupported: noStreams},
	{name: "streams.num.standby.replicas", kind: kindInt, brokerSynonym: "group.streams.num.standby.replicas", doc: "The number of standby replicas for each task.", unsupported: noStreams},
	{name: "streams.initial.rebalance.delay.ms", kind: kindInt, brokerSynonym: "group.streams.initial.rebalance.delay.ms", doc: "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance.", unsupported: noStreams},
	{name: "streams.assignment.interval.ms", kind: kindInt, brokerSynonym: "group.streams.assignment.interval.ms", doc: "The interval between assignment updates for a streams group.", unsupported: noStreams},
	{name: "streams.rack.aware.assignment.tags", kind: kindList, brokerSynonym: "group.streams.rack.aware.assignment.tags", doc: "List of client tag keys used to distribute standby replicas across Kafka Streams instances.", unsupported: noStreams},
	{name: "streams.assignor.name", kind: kindString, brokerSynonym: "group.streams.assignors", doc: "The task assignor to use for this streams group, by short name from the broker's group.streams.assignors.", unsupported: noStreams},
	{name: DLQTopicName, kind: kindString, fixedDefault: "", doc: "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic.", unsupported: noDLQ},
	{name: DLQCopyRecordEnable, kind: kindBool, fixedDefault: "false", doc: "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or just write a record containing the context information headers.", unsupported: noDLQ},
}

// brokerDefaults are Kafka 4.4's defaults of the broker configs group configs fall back to
// or are bounded by.
var brokerDefaults = map[string]string{
	"group.share.session.timeout.ms": "45000", "group.share.min.session.timeout.ms": "45000", "group.share.max.session.timeout.ms": "60000",
	"group.share.heartbeat.interval.ms": "5000", "group.share.min.heartbeat.interval.ms": "5000", "group.share.max.heartbeat.interval.ms": "15000",
	"group.share.record.lock.duration.ms": "30000", "group.share.min.record.lock.duration.ms": "15000", "group.share.max.record.lock.duration.ms": "60000",
	"group.share.delivery.count.limit": "5", "group.share.min.delivery.count.limit": "2", "group.share.max.delivery.count.limit": "10",
	"group.share.partition.max.record.locks": "2000", "group.share.min.partition.max.record.locks": "100", "group.share.max.partition.max.record.locks": "4000",
	"group.share.assignment.interval.ms": "1000", "group.share.min.assignment.interval.ms": "0", "group.share.max.assignment.interval.ms": "15000",
	"group.consumer.session.timeout.ms": "45000", "group.consumer.min.session.timeout.ms": "45000", "group.consumer.max.session.timeout.ms": "60000",
	"group.consumer.heartbeat.interval.ms": "5000", "group.consumer.min.heartbeat.interval.ms": "5000", "group.consumer.max.heartbeat.interval.ms": "15000",
	"group.consumer.assignment.interval.ms": "1000",
	"group.streams.session.timeout.ms":      "45000", "group.streams.heartbeat.interval.ms": "5000", "group.streams.num.standby.replicas": "0",
	"group.streams.initial.rebalance.delay.ms": "3000", "group.streams.assignment.interval.ms": "1000",
	"group.streams.rack.aware.assignment.tags": "", "group.streams.assignors": "sticky",
}

// intBrokerConfig reports whether a broker config of brokerDefaults holds an integer.
func intBrokerConfig(name string) bool {
	_, err := strconv.ParseInt(brokerDefaults[name], 10, 64)
	return err == nil
}

var byName = func() map[string]*def {
	m := map[string]*def{}
	for i := range defs {
		m[defs[i].name] = &defs[i]
	}
	return m
}()

// Broker is the broker-level configuration group configs are checked and resolved against.
type Broker struct {
	values map[string]string // every broker config of brokerDefaults, set or default
	ints   map[string]int64
	static map[string]bool // set in the broker's configuration (STATIC_BROKER_CONFIG)
}

// NewBroker reads the broker configs that bound group configs (Kafka names, e.g.
// group.share.record.lock.duration.ms) on top of Kafka's defaults.
func NewBroker(static map[string]string) (*Broker, error) {
	b := &Broker{values: map[string]string{}, ints: map[string]int64{}, static: map[string]bool{}}
	for k, v := range brokerDefaults {
		b.values[k] = v
	}
	for k, v := range static {
		if _, ok := brokerDefaults[k]; !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if intBrokerConfig(k) {
			if _, err := strconv.ParseInt(v, 10, 32); err != nil {
				return nil, fmt.Errorf("broker config %s=%q: not an integer", k, v)
			}
		}
		b.values[k], b.static[k] = v, true
	}
	for k, v := range b.values {
		if intBrokerConfig(k) {
			b.ints[k], _ = strconv.ParseInt(v, 10, 64)
		}
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

// lookup returns the definition of a config exactq lets a group set, or INVALID_CONFIG with
// Kafka's message for a name it does not know and exactq's reason for one exactq refuses.
func lookup(name string) (*def, error) {
	if why, ok := internal[name]; ok {
		return nil, invalid("Unsupported group config name: %s (%s)", name, why)
	}
	d := byName[name]
	if d == nil {
		return nil, invalid("Unknown group config name: %s", name)
	}
	if d.unsupported != "" {
		return nil, invalid("Unsupported group config name: %s (%s)", name, d.unsupported)
	}
	return d, nil
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
		if d.brokerMin != "" && (n < b.ints[d.brokerMin] || n > b.ints[d.brokerMax]) {
			return invalid("%s must be in the range %d to %d inclusive.", name, b.ints[d.brokerMin], b.ints[d.brokerMax])
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
	// validateSessionExceedsHeartbeat: checked when the group sets either of the pair.
	r := b.Resolve(s)
	for _, pair := range [][2]string{{ConsumerSessionTimeoutMs, ConsumerHeartbeatIntervalMs}, {ShareSessionTimeoutMs, ShareHeartbeatIntervalMs}} {
		_, session := s[pair[0]]
		_, heartbeat := s[pair[1]]
		if (session || heartbeat) && r.Int(pair[0]) <= r.Int(pair[1]) {
			return invalid("%s must be greater than %s", pair[0], pair[1])
		}
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
		if v, ok := overrides[d.name]; ok && d.unsupported == "" {
			r.values[d.name], r.sources[d.name] = strings.TrimSpace(v), kmsg.ConfigSourceGroupConfig
			continue
		}
		r.values[d.name], r.sources[d.name] = b.defaultOf(d)
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

// defaultOf is a config's value and source when the group does not set it: its broker
// synonym's (STATIC_BROKER_CONFIG when the broker's configuration sets it), or Kafka's
// fixed default. streams.assignor.name takes the first of group.streams.assignors.
func (b *Broker) defaultOf(d def) (string, kmsg.ConfigSource) {
	if d.brokerSynonym == "" {
		return d.fixedDefault, kmsg.ConfigSourceDefaultConfig
	}
	v := b.values[d.brokerSynonym]
	if d.name == "streams.assignor.name" {
		v, _, _ = strings.Cut(v, ",")
		v = strings.TrimSpace(v)
	}
	if b.static[d.brokerSynonym] {
		return v, kmsg.ConfigSourceStaticBrokerConfig
	}
	return v, kmsg.ConfigSourceDefaultConfig
}

// synonyms is ConfigHelper.createGroupConfigEntry's list, most specific first: the group's
// override, then the broker synonym as the broker's configuration sets it and as Kafka's
// default (DEFAULT_CONFIG:group.*), or, for a config without a broker synonym, the group
// config's own default.
func (b *Broker) synonyms(d def, override *string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	add := func(name, value string, source kmsg.ConfigSource) {
		sy := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		sy.Name, sy.Source = name, source
		sy.Value = &value
		out = append(out, sy)
	}
	if override != nil {
		add(d.name, *override, kmsg.ConfigSourceGroupConfig)
	}
	if d.brokerSynonym == "" {
		add(d.name, d.fixedDefault, kmsg.ConfigSourceDefaultConfig)
		return out
	}
	if b.static[d.brokerSynonym] {
		add(d.brokerSynonym, b.values[d.brokerSynonym], kmsg.ConfigSourceStaticBrokerConfig)
	}
	add(d.brokerSynonym, brokerDefaults[d.brokerSynonym], kmsg.ConfigSourceDefaultConfig)
	return out
}

// DescribeConfigs is the DescribeConfigs view of a group as Kafka 4.4 gives it: the 21
// configs it lists, sorted, filtered by names when given, each with its value and source
// (the group's override, else its broker synonym's) and, when asked, its synonyms and
// documentation. A config exactq does not act on is read-only and its documentation says
// why; an override of one stored before exactq refused it never took effect and is not
// shown.
func (b *Broker) DescribeConfigs(overrides map[string]string, names []string, includeSynonyms, includeDocs bool) []kmsg.DescribeConfigsResponseResourceConfig {
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
		var override *string
		if v, ok := overrides[d.name]; ok && d.unsupported == "" {
			v = strings.TrimSpace(v)
			override = &v
		}
		syn := b.synonyms(d, override)
		value, source := b.defaultOf(d)
		if override != nil {
			value, source = *override, kmsg.ConfigSourceGroupConfig
		}
		c.Value, c.Source = &value, source
		if includeSynonyms {
			c.ConfigSynonyms = syn
		}
		c.ReadOnly = d.unsupported != ""
		switch d.kind {
		case kindInt:
			c.ConfigType = kmsg.ConfigTypeInt
		case kindBool:
			c.ConfigType = kmsg.ConfigTypeBoolean
		case kindList:
			c.ConfigType = kmsg.ConfigTypeList
		default:
			c.ConfigType = kmsg.ConfigTypeString
		}
		if includeDocs {
			doc := d.doc
			if d.unsupported != "" {
				doc += " Not honoured by exactq: " + d.unsupported + "; setting it is refused."
			}
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
		if d := byName[k]; d != nil && d.unsupported == "" {
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
