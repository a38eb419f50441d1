package topicconfig

import (
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker config names exactq reads itself.
const (
	BrokerNumPartitions                   = "num.partitions"
	BrokerDefaultReplicationFactor        = "default.replication.factor"
	BrokerAutoCreateTopicsEnable          = "auto.create.topics.enable"
	BrokerDeleteTopicEnable               = "delete.topic.enable"
	BrokerMessageMaxBytes                 = "message.max.bytes"
	BrokerOffsetsTopicNumPartitions       = "offsets.topic.num.partitions"
	BrokerOffsetsTopicReplicationFactor   = "offsets.topic.replication.factor"
	BrokerTxnStateLogNumPartitions        = "transaction.state.log.num.partitions"
	BrokerTxnStateLogReplicationFactor    = "transaction.state.log.replication.factor"
	BrokerTxnTwoPhaseCommitEnable         = "transaction.two.phase.commit.enable"
	BrokerMaxIncrementalFetchSessionSlots = "max.incremental.fetch.session.cache.slots"
	BrokerGroupInitialRebalanceDelayMs    = "group.initial.rebalance.delay.ms"
	BrokerSocketRequestMaxBytes           = "socket.request.max.bytes"
	BrokerFetchMaxBytes                   = "fetch.max.bytes"
	BrokerMaxBrokerPartitions             = "max.broker.partitions"
	BrokerLogDirs                         = "log.dirs"
	BrokerLogCleanerDedupeBufferSize      = "log.cleaner.dedupe.buffer.size"
	BrokerNodeID                          = "node.id"
	// BrokerDecompressionBudgetBytes is exactq's own (Kafka has no such limit): the
	// memory all produce-path decompressions may hold at once.
	BrokerDecompressionBudgetBytes = "exactq.decompression.budget.bytes"
)

// brokerDefs are the BROKER configs exactq knows: every broker synonym of a topic config
// (so topic describes can show them) plus the broker settings exactq reads. Defaults are
// Kafka 4.4's (ServerLogConfigs.java, CleanerConfig.java, RemoteLogManagerConfig.java,
// ServerConfigs/ReplicationConfigs/GroupCoordinatorConfig/TransactionLogConfig).
var brokerDefs = []*Def{
	{Name: BrokerNodeID, Type: TypeInt, Default: i64(-1), Doc: "This broker's id."},
	{Name: BrokerLogDirs, Type: TypeList, Doc: "Directories holding partition logs."},
	{Name: BrokerNumPartitions, Type: TypeInt, Default: i64(1), validate: atLeast(1), Valid: "[1,...]",
		Doc: "Partitions of an auto-created topic or of a CreateTopics request with -1 partitions."},
	{Name: BrokerDefaultReplicationFactor, Type: TypeInt, Default: i64(1),
		Doc: "Replication factor of auto-created topics or of a CreateTopics request with -1."},
	{Name: BrokerAutoCreateTopicsEnable, Type: TypeBoolean, Default: str("true"),
		Doc: "Whether Metadata requests for an unknown topic create it."},
	{Name: BrokerDeleteTopicEnable, Type: TypeBoolean, Default: str("true"), Doc: "Whether DeleteTopics is allowed."},
	{Name: BrokerMessageMaxBytes, Type: TypeInt, Default: i64(DefaultMaxMessageBytes), validate: atLeast(0), Valid: "[0,...]",
		Doc: "Largest record batch accepted; default for max.message.bytes."},
	{Name: BrokerOffsetsTopicNumPartitions, Type: TypeInt, Default: i64(50), validate: atLeast(1), Valid: "[1,...]",
		Doc: "Partitions of __consumer_offsets."},
	{Name: BrokerOffsetsTopicReplicationFactor, Type: TypeShort, Default: i64(3), validate: atLeast(1), Valid: "[1,...]",
		Doc: "Replication factor of __consumer_offsets."},
	{Name: BrokerTxnStateLogNumPartitions, Type: TypeInt, Default: i64(50), validate: atLeast(1), Valid: "[1,...]",
		Doc: "Partitions of __transaction_state."},
	{Name: BrokerTxnStateLogReplicationFactor, Type: TypeShort, Default: i64(3), validate: atLeast(1), Valid: "[1,...]",
		Doc: "Replication factor of __transaction_state."},
	{Name: BrokerMaxIncrementalFetchSessionSlots, Type: TypeInt, Default: i64(1000), validate: atLeast(0), Valid: "[0,...]",
		Doc: "Most incremental fetch sessions the broker caches (KIP-227)."},
	{Name: BrokerGroupInitialRebalanceDelayMs, Type: TypeInt, Default: i64(3000),
		Doc: "How long a new classic group waits for more members before its first rebalance."},
	{Name: BrokerSocketRequestMaxBytes, Type: TypeInt, Default: i64(100 * 1024 * 1024), validate: atLeast(1), Valid: "[1,...]",
		Doc: "Largest request the broker reads."},
	{Name: BrokerFetchMaxBytes, Type: TypeInt, Default: i64(DefaultFetchMaxBytes), validate: atLeast(1024), Valid: "[1024,...]",
		Doc: "The maximum number of bytes we will return for a fetch request. Must be at least 1024."},
	// KIP-578's proposed limit (Kafka has none). No fixed default: the broker sizes it from
	// the process's descriptor limit (broker.defaultMaxBrokerPartitions).
	{Name: BrokerMaxBrokerPartitions, Type: TypeInt, validate: atLeast(1), Valid: "[1,...]",
		Doc: "Most partitions this broker hosts; CreateTopics, CreatePartitions and auto-creation beyond it get POLICY_VIOLATION. Default: sized from the open-file limit."},
	// Kafka refuses 1 MiB or less per cleaner thread (KafkaConfig: "must be at least 1MB per
	// cleaner thread"); exactq compacts on one thread.
	{Name: BrokerLogCleanerDedupeBufferSize, Type: TypeLong, Default: i64(128 << 20), validate: atLeast(1<<20 + 1), Valid: "[1048577,...]",
		Doc: "Memory compaction's key map may hold (16-byte key hash and offset per key, filled to 90%); a compaction whose keys do not fit cleans in several passes."},
	{Name: BrokerDecompressionBudgetBytes, Type: TypeLong, Default: i64(128 << 20), validate: atLeast(1), Valid: "[1,...]",
		Doc: "exactq only: memory (decoder state and windows) that validating compressed produce batches may hold at once, across all producers; over it a produce waits up to 10 s, then gets REQUEST_TIMED_OUT."},
	// Coordinator settings exactq reads (group, transaction and share coordinators).
	{Name: "group.min.session.timeout.ms", Type: TypeInt, Default: i64(6000), Doc: "Shortest session timeout a classic group member may ask for."},
	{Name: "group.max.session.timeout.ms", Type: TypeInt, Default: i64(1800000), Doc: "Longest session timeout a classic group member may ask for."},
	{Name: "group.max.size", Type: TypeInt, Default: i64(2147483647), validate: atLeast(1), Valid: "[1,...]", Doc: "Most members of one classic group."},
	{Name: "transaction.max.timeout.ms", Type: TypeInt, Default: i64(900000), validate: atLeast(1), Valid: "[1,...]", Doc: "Longest transaction timeout a producer may ask for."},
	{Name: BrokerTxnTwoPhaseCommitEnable, Type: TypeBoolean, Default: str("false"), Doc: "Whether producers may take part in two-phase commit with an external coordinator (KIP-939): InitProducerId with Enable2Pc, transactions without a timeout."},
	{Name: "producer.id.expiration.ms", Type: TypeInt, Default: i64(86400000), validate: atLeast(1), Valid: "[1,...]", Doc: "How long a partition keeps an idle producer's state (sequence numbers for idempotence); never while its transaction is open."},
	{Name: "producer.id.max.entries.per.partition", Type: TypeInt, Default: i64(10000), validate: atLeast(1), Valid: "[1,...]", Doc: "exactq: most producers one partition keeps state for; a new one beyond it evicts the least recently active producer without an open transaction."},
	{Name: "producer.id.max.entries", Type: TypeInt, Default: i64(1000000), validate: atLeast(1), Valid: "[1,...]", Doc: "exactq: most producer states all partitions keep together; a new one beyond it evicts in its own partition as producer.id.max.entries.per.partition does."},
	{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: TypeInt, Default: i64(10000), validate: atLeast(1), Valid: "[1,...]", Doc: "How often the transaction coordinator aborts transactions past their timeout."},
	{Name: "share.coordinator.state.topic.num.partitions", Type: TypeInt, Default: i64(50), validate: atLeast(1), Valid: "[1,...]", Doc: "Partitions of __share_group_state."},
	{Name: "share.coordinator.snapshot.update.records.per.snapshot", Type: TypeInt, Default: i64(500), validate: atLeast(0), Valid: "[0,...]", Doc: "Share-state updates between snapshots."},
	{Name: "group.share.max.size", Type: TypeInt, Default: i64(200), validate: between(1, 1000), Valid: "[1,...,1000]", Doc: "Most members of one share group (GROUP_MAX_SIZE_REACHED beyond)."},
	{Name: "group.share.max.share.sessions", Type: TypeInt, Default: i64(2000), validate: atLeast(1), Valid: "[1,...]", Doc: "Most share sessions the broker keeps."},
	{Name: "group.share.session.timeout.ms", Type: TypeInt, Default: i64(45000), Doc: "Default share-group member session timeout."},
	{Name: "group.share.min.session.timeout.ms", Type: TypeInt, Default: i64(45000), Doc: "Lower bound of share.session.timeout.ms."},
	{Name: "group.share.max.session.timeout.ms", Type: TypeInt, Default: i64(60000), Doc: "Upper bound of share.session.timeout.ms."},
	{Name: "group.share.heartbeat.interval.ms", Type: TypeInt, Default: i64(5000), Doc: "Default share-group heartbeat interval."},
	{Name: "group.share.min.heartbeat.interval.ms", Type: TypeInt, Default: i64(5000), Doc: "Lower bound of share.heartbeat.interval.ms."},
	{Name: "group.share.max.heartbeat.interval.ms", Type: TypeInt, Default: i64(15000), Doc: "Upper bound of share.heartbeat.interval.ms."},
	{Name: "group.share.record.lock.duration.ms", Type: TypeInt, Default: i64(30000), validate: atLeast(1000), Valid: "[1000,...]", Doc: "Default acquisition lock duration."},
	{Name: "group.share.min.record.lock.duration.ms", Type: TypeInt, Default: i64(15000), validate: atLeast(1000), Valid: "[1000,...]", Doc: "Lower bound of share.record.lock.duration.ms."},
	{Name: "group.share.max.record.lock.duration.ms", Type: TypeInt, Default: i64(60000), validate: atLeast(1000), Valid: "[1000,...]", Doc: "Upper bound of share.record.lock.duration.ms."},
	{Name: "group.share.delivery.count.limit", Type: TypeInt, Default: i64(5), validate: atLeast(2), Valid: "[2,...]", Doc: "Default delivery limit before a record is archived."},
	{Name: "group.share.min.delivery.count.limit", Type: TypeInt, Default: i64(2), validate: atLeast(2), Valid: "[2,...]", Doc: "Lower bound of share.delivery.count.limit."},
	{Name: "group.share.max.delivery.count.limit", Type: TypeInt, Default: i64(10), validate: atLeast(2), Valid: "[2,...]", Doc: "Upper bound of share.delivery.count.limit."},
	{Name: "group.share.partition.max.record.locks", Type: TypeInt, Default: i64(2000), validate: atLeast(100), Valid: "[100,...]", Doc: "Default in-flight record limit per share partition."},
	{Name: "group.share.min.partition.max.record.locks", Type: TypeInt, Default: i64(100), validate: atLeast(100), Valid: "[100,...]", Doc: "Lower bound of share.partition.max.record.locks."},
	{Name: "group.share.max.partition.max.record.locks", Type: TypeInt, Default: i64(4000), validate: atLeast(100), Valid: "[100,...]", Doc: "Upper bound of share.partition.max.record.locks."},
	{Name: "group.share.assignment.interval.ms", Type: TypeInt, Default: i64(1000), validate: atLeast(0), Valid: "[0,...]", Doc: "Default least time between share-group assignments."},
	{Name: "group.share.min.assignment.interval.ms", Type: TypeInt, Default: i64(0), validate: atLeast(0), Valid: "[0,...]", Doc: "Lower bound of share.assignment.interval.ms."},
	{Name: "group.share.max.assignment.interval.ms", Type: TypeInt, Default: i64(15000), validate: atLeast(0), Valid: "[0,...]", Doc: "Upper bound of share.assignment.interval.ms."},
	{Name: "group.consumer.max.size", Type: TypeInt, Default: i64(2147483647), validate: atLeast(1), Valid: "[1,...]", Doc: "Most members of one consumer-protocol (KIP-848) group (GROUP_MAX_SIZE_REACHED beyond)."},
	// Only the two server-side assignors Kafka ships, by name or by Kafka's class name.
	{Name: "group.consumer.assignors", Type: TypeList, Default: str("uniform,range"),
		validate: listOf("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor", "org.apache.kafka.coordinator.group.assignor.RangeAssignor"),
		Valid:    "[uniform, range]", Doc: "Server-side assignors of consumer-protocol groups, the first the default."},
	{Name: "group.consumer.migration.policy", Type: TypeString, Default: str("bidirectional"),
		validate: oneOfFold("disabled", "downgrade", "upgrade", "bidirectional"),
		Valid:    "(case insensitive) [DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL]", Doc: "Which conversions between the classic and consumer protocols a non-empty group may make."},
	{Name: "group.consumer.session.timeout.ms", Type: TypeInt, Default: i64(45000), Doc: "Default consumer-protocol session timeout."},
	{Name: "group.consumer.min.session.timeout.ms", Type: TypeInt, Default: i64(45000), Doc: "Lower bound of consumer.session.timeout.ms."},
	{Name: "group.consumer.max.session.timeout.ms", Type: TypeInt, Default: i64(60000), Doc: "Upper bound of consumer.session.timeout.ms."},
	{Name: "group.consumer.heartbeat.interval.ms", Type: TypeInt, Default: i64(5000), Doc: "Default consumer-protocol heartbeat interval."},
	{Name: "group.consumer.min.heartbeat.interval.ms", Type: TypeInt, Default: i64(5000), Doc: "Lower bound of consumer.heartbeat.interval.ms."},
	{Name: "group.consumer.max.heartbeat.interval.ms", Type: TypeInt, Default: i64(15000), Doc: "Upper bound of consumer.heartbeat.interval.ms."},

	// Broker synonyms of topic configs.
	{Name: "log.segment.bytes", Type: TypeInt, Default: i64(DefaultSegmentBytes), validate: atLeast(1024 * 1024), Valid: "[1048576,...]", Doc: "Default for segment.bytes."},
	{Name: "log.roll.ms", Type: TypeLong, Doc: "Default for segment.ms; overrides log.roll.hours."},
	{Name: "log.roll.hours", Type: TypeInt, Default: i64(168), validate: atLeast(1), Valid: "[1,...]", Doc: "Default for segment.ms, in hours."},
	{Name: "log.roll.jitter.ms", Type: TypeLong, Doc: "Default for segment.jitter.ms; overrides log.roll.jitter.hours."},
	{Name: "log.roll.jitter.hours", Type: TypeInt, Default: i64(0), validate: atLeast(0), Valid: "[0,...]", Doc: "Default for segment.jitter.ms, in hours."},
	{Name: "log.index.size.max.bytes", Type: TypeInt, Default: i64(DefaultIndexSizeMaxBytes), validate: atLeast(4), Valid: "[4,...]", Doc: "Default for segment.index.bytes."},
	{Name: "log.flush.interval.messages", Type: TypeLong, Default: i64(maxLong), validate: atLeast(1), Valid: "[1,...]", Doc: "Default for flush.messages."},
	{Name: "log.flush.interval.ms", Type: TypeLong, Doc: "Default for flush.ms; overrides log.flush.scheduler.interval.ms."},
	{Name: "log.flush.scheduler.interval.ms", Type: TypeLong, Default: i64(maxLong), Doc: "Default for flush.ms."},
	{Name: "log.retention.bytes", Type: TypeLong, Default: i64(-1), Doc: "Default for retention.bytes."},
	{Name: "log.retention.ms", Type: TypeLong, Doc: "Default for retention.ms; overrides the minutes and hours forms."},
	{Name: "log.retention.minutes", Type: TypeInt, Doc: "Default for retention.ms, in minutes; overrides log.retention.hours."},
	{Name: "log.retention.hours", Type: TypeInt, Default: i64(168), Doc: "Default for retention.ms, in hours."},
	{Name: "log.index.interval.bytes", Type: TypeInt, Default: i64(DefaultIndexIntervalBytes), validate: atLeast(0), Valid: "[0,...]", Doc: "Default for index.interval.bytes."},
	{Name: "log.cleaner.delete.retention.ms", Type: TypeLong, Default: i64(DefaultDeleteRetentionMs), validate: atLeast(0), Valid: "[0,...]", Doc: "Default for delete.retention.ms."},
	{Name: "log.cleaner.min.compaction.lag.ms", Type: TypeLong, Default: i64(0), validate: atLeast(0), Valid: "[0,...]", Doc: "Default for min.compaction.lag.ms."},
	{Name: "log.cleaner.max.compaction.lag.ms", Type: TypeLong, Default: i64(maxLong), validate: atLeast(1), Valid: "[1,...]", Doc: "Default for max.compaction.lag.ms."},
	{Name: "log.segment.delete.delay.ms", Type: TypeLong, Default: i64(DefaultFileDeleteDelayMs), validate: atLeast(0), Valid: "[0,...]", Doc: "Default for file.delete.delay.ms."},
	{Name: "log.cleaner.min.cleanable.ratio", Type: TypeDouble, Default: str("0.5"), validate: between(0, 1), Valid: "[0,...,1]", Doc: "Default for min.cleanable.dirty.ratio."},
	{Name: "log.cleanup.policy", Type: TypeList, Default: str(CleanupDelete), validate: listOf(CleanupCompact, CleanupDelete), Valid: "[compact, delete]", Doc: "Default for cleanup.policy."},
	{Name: UncleanLeaderElectionEnable, Type: TypeBoolean, Default: str("false"), Doc: "Default for the topic config of the same name."},
	{Name: MinInsyncReplicas, Type: TypeInt, Default: i64(1), validate: atLeast(1), Valid: "[1,...]", Doc: "Default for the topic config of the same name."},
	{Name: CompressionType, Type: TypeString, Default: str("producer"), validate: oneOf(compressionTypes...), Valid: "[uncompressed, zstd, lz4, snappy, gzip, producer]", Doc: "Default for the topic config of the same name."},
	{Name: CompressionGzipLevel, Type: TypeInt, Default: i64(-1), validate: gzipLevel, Valid: "[1,...,9] or -1", Doc: "Default for the topic config of the same name."},
	{Name: CompressionLz4Level, Type: TypeInt, Default: i64(9), validate: between(1, 17), Valid: "[1,...,17]", Doc: "Default for the topic config of the same name."},
	{Name: CompressionZstdLevel, Type: TypeInt, Default: i64(3), validate: between(-131072, 22), Valid: "[-131072,...,22]", Doc: "Default for the topic config of the same name."},
	{Name: "log.preallocate", Type: TypeBoolean, Default: str("false"), Doc: "Default for preallocate."},
	{Name: "log.message.timestamp.type", Type: TypeString, Default: str(TimestampCreateTime), validate: oneOf(TimestampCreateTime, TimestampLogAppendTime), Valid: "[CreateTime, LogAppendTime]", Doc: "Default for message.timestamp.type."},
	{Name: "log.message.timestamp.before.max.ms", Type: TypeLong, Default: i64(maxLong), validate: atLeast(0), Valid: "[0,...]", Doc: "Default for message.timestamp.before.max.ms."},
	{Name: "log.message.timestamp.after.max.ms", Type: TypeLong, Default: i64(DefaultMessageTimestampAfterMaxMs), validate: atLeast(0), Valid: "[0,...]", Doc: "Default for message.timestamp.after.max.ms."},
	{Name: "log.local.retention.ms", Type: TypeLong, Default: i64(-2), validate: atLeast(-2), Valid: "[-2,...]", Doc: "Default for local.retention.ms."},
	{Name: "log.local.retention.bytes", Type: TypeLong, Default: i64(-2), validate: atLeast(-2), Valid: "[-2,...]", Doc: "Default for local.retention.bytes."},
	{Name: "log.remote.copy.lag.ms", Type: TypeLong, Default: i64(0), validate: atLeast(-1), Valid: "[-1,...]", Doc: "Default for remote.copy.lag.ms."},
	{Name: "log.remote.copy.lag.bytes", Type: TypeLong, Default: i64(-1), validate: atLeast(-1), Valid: "[-1,...]", Doc: "Default for remote.copy.lag.bytes."},
}

// brokerSynonymOf maps a broker config to the topic config it is the default of.
var brokerSynonymOf = func() map[string]*Def {
	m := map[string]*Def{}
	for _, d := range defs {
		for _, s := range d.Synonyms {
			m[s.Name] = d
		}
	}
	return m
}()

var brokerDefsByName = func() map[string]*Def {
	m := make(map[string]*Def, len(brokerDefs))
	for _, d := range brokerDefs {
		// exactq has no dynamic broker configs: IncrementalAlterConfigs and AlterConfigs
		// refuse a BROKER resource, so every broker config is read-only, even those Kafka
		// can change at runtime.
		d.ReadOnly = true
		// The broker settings exactq reads itself are honoured; a broker synonym is honoured
		// exactly when its topic config is.
		d.Honoured = true
		if t := brokerSynonymOf[d.Name]; t != nil {
			d.Honoured = t.Honoured
		}
		m[d.Name] = d
	}
	return m
}()

// checkHonoured refuses a broker setting exactq would not act on: the default of a topic
// config exactq only stores and describes (log.preallocate, min.insync.replicas,
// log.flush.interval.messages, ...). Kafka's own default is accepted, since it changes
// nothing.
func checkHonoured(d *Def, canonical string) *Error {
	if d.Honoured || (d.Default != nil && canonical == *d.Default) {
		return nil
	}
	return invalidConfig("%s is not honoured by exactq: it is the broker default of the topic config %s, which exactq does not act on; leave it unset%s",
		d.Name, brokerSynonymOf[d.Name].Name, kafkaDefaultHint(d))
}

func kafkaDefaultHint(d *Def) string {
	if d.Default == nil {
		return ""
	}
	return " or at Kafka's default " + *d.Default
}

// LookupBroker returns the definition of a broker config exactq knows, or nil.
func LookupBroker(name string) *Def { return brokerDefsByName[name] }

// BrokerDefaults is the broker's static configuration as far as topics care: values the
// operator set (STATIC_BROKER_CONFIG) over Kafka's defaults (DEFAULT_CONFIG). A nil
// *BrokerDefaults means "everything at Kafka's default". It is immutable once built.
type BrokerDefaults struct {
	static map[string]string // canonical values the operator set, by broker config name
	values map[string]any    // parsed effective values (static over default); absent = null
}

// NewBrokerDefaults validates the operator's broker settings (names must be among the
// broker configs exactq knows) and returns the defaults view.
func NewBrokerDefaults(static map[string]string) (*BrokerDefaults, error) {
	b := &BrokerDefaults{static: map[string]string{}, values: map[string]any{}}
	for _, d := range brokerDefs {
		if d.Default != nil {
			v, err := parse(d.Name, *d.Default, d.Type)
			if err != nil {
				panic("topicconfig: bad built-in default: " + err.Error())
			}
			b.values[d.Name] = v
		}
	}
	for name, raw := range static {
		d := brokerDefsByName[name]
		if d == nil {
			return nil, invalidConfig("Unknown broker config name: %s", name)
		}
		v, err := parseValid(d, raw)
		if err != nil {
			return nil, err
		}
		if err := checkHonoured(d, format(v)); err != nil {
			return nil, err
		}
		b.static[name] = format(v)
		b.values[name] = v
	}
	if err := b.checkTopicDefaults(); err != nil {
		return nil, err
	}
	return b, nil
}

// checkTopicDefaults refuses broker settings whose topic defaults Kafka refuses at startup:
// KafkaConfig requires the retention derived from log.retention.{ms,minutes,hours} to be -1
// or at least 1, and LogManager builds its default LogConfig from the derived values, so each
// must pass its topic config's validator (log.roll.ms=0 fails as segment.ms=0 would).
func (b *BrokerDefaults) checkTopicDefaults() *Error {
	if v, ok := b.synonymValue(defsByName[RetentionMs]); ok && v.(int64) == 0 {
		return invalidConfig("log.retention.ms must be unlimited (-1) or, greater than or equal to 1")
	}
	for _, d := range defs {
		if d.validate == nil {
			continue
		}
		if v, ok := b.synonymValue(d); ok {
			if err := d.validate(d.Name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

var kafkaDefaults, _ = NewBrokerDefaults(nil)

// KafkaDefaults is the broker view with every setting at Kafka's default.
func KafkaDefaults() *BrokerDefaults { return kafkaDefaults }

func (b *BrokerDefaults) orDefault() *BrokerDefaults {
	if b == nil {
		return kafkaDefaults
	}
	return b
}

// staticValue returns what the operator set for a broker config.
func (b *BrokerDefaults) staticValue(name string) (string, bool) {
	v, ok := b.orDefault().static[name]
	return v, ok
}

func (b *BrokerDefaults) value(name string) any { return b.orDefault().values[name] }

func (b *BrokerDefaults) int32(name string) int32 {
	switch v := b.value(name).(type) {
	case int32:
		return v
	case int16:
		return int32(v)
	}
	return 0
}

// NumPartitions is num.partitions (default 1).
func (b *BrokerDefaults) NumPartitions() int32 { return b.int32(BrokerNumPartitions) }

// DefaultReplicationFactor is default.replication.factor (default 1).
func (b *BrokerDefaults) DefaultReplicationFactor() int16 {
	return int16(b.int32(BrokerDefaultReplicationFactor))
}

// AutoCreateTopicsEnable is auto.create.topics.enable (default true).
func (b *BrokerDefaults) AutoCreateTopicsEnable() bool {
	return b.value(BrokerAutoCreateTopicsEnable).(bool)
}

// DeleteTopicEnable is delete.topic.enable (default true).
func (b *BrokerDefaults) DeleteTopicEnable() bool { return b.value(BrokerDeleteTopicEnable).(bool) }

// MessageMaxBytes is message.max.bytes (default 1048588).
func (b *BrokerDefaults) MessageMaxBytes() int32 { return b.int32(BrokerMessageMaxBytes) }

// OffsetsTopicNumPartitions is offsets.topic.num.partitions (default 50).
func (b *BrokerDefaults) OffsetsTopicNumPartitions() int32 {
	return b.int32(BrokerOffsetsTopicNumPartitions)
}

// TransactionStateLogNumPartitions is transaction.state.log.num.partitions (default 50).
func (b *BrokerDefaults) TransactionStateLogNumPartitions() int32 {
	return b.int32(BrokerTxnStateLogNumPartitions)
}

// TransactionTwoPhaseCommitEnable is transaction.two.phase.commit.enable (default false).
func (b *BrokerDefaults) TransactionTwoPhaseCommitEnable() bool {
	return b.value(BrokerTxnTwoPhaseCommitEnable).(bool)
}

// MaxIncrementalFetchSessionCacheSlots is max.incremental.fetch.session.cache.slots
// (default 1000).
func (b *BrokerDefaults) MaxIncrementalFetchSessionCacheSlots() int32 {
	return b.int32(BrokerMaxIncrementalFetchSessionSlots)
}

// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms (default 3000).
func (b *BrokerDefaults) GroupInitialRebalanceDelayMs() int32 {
	return b.int32(BrokerGroupInitialRebalanceDelayMs)
}

// SocketRequestMaxBytes is socket.request.max.bytes (default 100 MiB).
func (b *BrokerDefaults) SocketRequestMaxBytes() int32 { return b.int32(BrokerSocketRequestMaxBytes) }

// DefaultFetchMaxBytes is Kafka's fetch.max.bytes default (ServerConfigs.FETCH_MAX_BYTES_DEFAULT,
// 55 MiB).
const DefaultFetchMaxBytes = 55 * 1024 * 1024

// FetchMaxBytes is fetch.max.bytes (default 55 MiB): the most a Fetch or ShareFetch
// response carries, whatever the request's MaxBytes (at least one batch still goes out).
func (b *BrokerDefaults) FetchMaxBytes() int32 { return b.int32(BrokerFetchMaxBytes) }

// MaxBrokerPartitions is max.broker.partitions when the operator set it.
func (b *BrokerDefaults) MaxBrokerPartitions() (int32, bool) {
	if _, ok := b.staticValue(BrokerMaxBrokerPartitions); !ok {
		return 0, false
	}
	return b.int32(BrokerMaxBrokerPartitions), true
}

// LogCleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size (default 128 MiB).
func (b *BrokerDefaults) LogCleanerDedupeBufferSize() int64 {
	return b.value(BrokerLogCleanerDedupeBufferSize).(int64)
}

// DecompressionBudgetBytes is exactq.decompression.budget.bytes (default 128 MiB).
func (b *BrokerDefaults) DecompressionBudgetBytes() int64 {
	return b.value(BrokerDecompressionBudgetBytes).(int64)
}

// brokerSynonymNames is DynamicBrokerConfig.brokerConfigSynonyms: the broker configs that
// describe the same setting, highest priority first.
func brokerSynonymNames(name string) []string {
	groups := [][]string{
		{"log.roll.ms", "log.roll.hours"},
		{"log.roll.jitter.ms", "log.roll.jitter.hours"},
		{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
	}
	for _, g := range groups {
		for _, n := range g {
			if n == name {
				return g
			}
		}
	}
	if name == "log.flush.interval.ms" {
		return []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}
	}
	return []string{name}
}

// brokerSynonyms is ConfigHelper.configSynonyms for a broker without dynamic configs: the
// operator-set synonyms (STATIC_BROKER_CONFIG) then the defaulted ones (DEFAULT_CONFIG),
// each in priority order, with everything before the first entry named name dropped.
//
// That last rule is Kafka's and has a visible quirk we keep on purpose: retention.ms's first
// synonym log.retention.ms has no default, so a topic that leaves retention.ms alone shows
// no synonyms at all (kafka-configs prints "synonyms={}"), even though the value comes from
// log.retention.hours.
func (b *BrokerDefaults) brokerSynonyms(name string, sensitive bool) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	names := brokerSynonymNames(name)
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	add := func(n, v string, src kmsg.ConfigSource) {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Source = n, src
		if !sensitive {
			s.Value = str(v)
		}
		out = append(out, s)
	}
	for _, n := range names {
		if v, ok := b.staticValue(n); ok {
			add(n, v, kmsg.ConfigSourceStaticBrokerConfig)
		}
	}
	for _, n := range names {
		if d := brokerDefsByName[n]; d != nil && d.Default != nil {
			add(n, *d.Default, kmsg.ConfigSourceDefaultConfig)
		}
	}
	for len(out) > 0 && out[0].Name != name {
		out = out[1:]
	}
	return out
}

// DescribeBroker answers DescribeConfigs for resource type BROKER with this broker's id as
// the name: the broker configs exactq knows, all read-only. names filters (empty = all);
// unknown names are left out, as Kafka does. For an empty resource name (cluster-wide
// dynamic defaults) Kafka lists only dynamic defaults; exactq has none, so the broker
// should answer with an empty list.
func (b *BrokerDefaults) DescribeBroker(names []string, includeSynonyms, includeDocs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	b = b.orDefault()
	want := nameFilter(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range sortedBrokerDefs {
		if !want(d.Name) {
			continue
		}
		var value *string
		if v, ok := b.values[d.Name]; ok && !d.sensitive() {
			value = str(format(v))
		}
		syn := b.brokerSynonyms(d.Name, d.sensitive())
		out = append(out, describeEntry(d, true, value, syn, includeSynonyms, includeDocs))
	}
	return out
}

var sortedBrokerDefs = func() []*Def {
	out := append([]*Def(nil), brokerDefs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}()

func nameFilter(names []string) func(string) bool {
	if len(names) == 0 {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(n string) bool { return set[n] }
}

// synonymValue returns the operator's value for a topic config's broker synonyms, converted
// to the topic config's unit, and whether one was set: the first synonym set wins
// (log.retention.ms over log.retention.minutes over log.retention.hours), as
// AbstractKafkaConfig's logRetentionTimeMillis, logRollTimeMillis, logRollTimeJitterMillis
// and logFlushIntervalMs pick them. Any negative retention, in whichever unit, means
// unlimited and becomes -1 (so log.retention.hours=-1 is -1, not -3600000). b must not be
// nil.
func (b *BrokerDefaults) synonymValue(d *Def) (any, bool) {
	for _, s := range d.Synonyms {
		raw, ok := b.static[s.Name]
		if !ok {
			continue
		}
		v := convert(b.values[s.Name], d.Type)
		if s.Factor != 1 {
			n, _ := strconv.ParseInt(raw, 10, 64)
			v = convert(n*s.Factor, d.Type)
		}
		if n, ok := v.(int64); ok && d.Name == RetentionMs && n < 0 {
			v = int64(-1)
		}
		return v, true
	}
	return nil, false
}

// controllerSynonymValue is the first set broker synonym of d as Kafka's controller reports
// it: the value as the operator wrote it (canonical form), multiplied into the topic's unit,
// with no clamp of negative retentions. d must have a set synonym; b must not be nil.
func (b *BrokerDefaults) controllerSynonymValue(d *Def) string {
	for _, s := range d.Synonyms {
		raw, ok := b.static[s.Name]
		if !ok {
			continue
		}
		if s.Factor == 1 {
			return raw
		}
		n, _ := strconv.ParseInt(raw, 10, 64)
		return strconv.FormatInt(n*s.Factor, 10)
	}
	panic("topicconfig: " + d.Name + " has no broker synonym set")
}

// convert widens a broker value to the topic config's type (log.roll.hours is an INT, but
// segment.ms is a LONG).
func convert(v any, t Type) any {
	switch t {
	case TypeLong:
		switch x := v.(type) {
		case int32:
			return int64(x)
		case int16:
			return int64(x)
		}
	case TypeInt:
		if x, ok := v.(int64); ok {
			return int32(x)
		}
	}
	return v
}
