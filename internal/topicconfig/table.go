package topicconfig

import (
	"math"
	"sort"
	"strconv"
)

// Synonym is a broker config a topic config falls back to. Broker synonyms are tried in the
// order listed (ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS): the first one the
// operator set wins, converted to the topic config's unit by multiplying with Factor.
type Synonym struct {
	Name   string
	Factor int64 // 1, or 60000 for minutes, 3600000 for hours
}

// Def describes one topic config.
type Def struct {
	Name     string
	Type     Type
	Default  *string   // nil when Kafka has no default (null)
	Synonyms []Synonym // broker fallbacks in priority order; empty when there is none
	Doc      string
	// Valid describes the accepted values, as Kafka's docs print them.
	Valid     string
	Sensitive bool
	ReadOnly  bool
	// Internal configs are accepted but hidden from Describe unless set (Kafka's
	// defineInternal).
	Internal bool
	// Honoured says whether exactq acts on the value today. Configs with Honoured false are
	// stored, validated and described so clients see Kafka's set, but change nothing.
	Honoured bool

	validate validator
}

func str(s string) *string { return &s }

func i64(v int64) *string { return str(strconv.FormatInt(v, 10)) }

const (
	msPerMinute = 60 * 1000
	msPerHour   = 60 * msPerMinute
	msPerDay    = 24 * msPerHour
	maxLong     = math.MaxInt64
)

// Kafka's topic-level defaults, from storage/.../log/LogConfig.java and
// server-common/.../config/ServerLogConfigs.java (Kafka 4.4).
const (
	DefaultSegmentBytes       = 1024 * 1024 * 1024 // LogConfig.DEFAULT_SEGMENT_BYTES
	DefaultSegmentMs          = 7 * msPerDay       // LogConfig.DEFAULT_SEGMENT_MS
	DefaultRetentionMs        = 7 * msPerDay       // LogConfig.DEFAULT_RETENTION_MS
	DefaultDeleteRetentionMs  = msPerDay           // LogConfig.DEFAULT_DELETE_RETENTION_MS
	DefaultIndexIntervalBytes = 4096               // ServerLogConfigs.LOG_INDEX_INTERVAL_BYTES_DEFAULT
	DefaultIndexSizeMaxBytes  = 10 * 1024 * 1024   // ServerLogConfigs.LOG_INDEX_SIZE_MAX_BYTES_DEFAULT
	// DefaultMaxMessageBytes is 1 MiB plus the 12-byte log overhead (offset + size), as
	// ServerLogConfigs.MAX_MESSAGE_BYTES_DEFAULT = 1024 * 1024 + Records.LOG_OVERHEAD.
	DefaultMaxMessageBytes             = 1024*1024 + 12
	DefaultMessageTimestampAfterMaxMs  = msPerHour // ServerLogConfigs.LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT
	DefaultMessageTimestampBeforeMaxMs = maxLong
	DefaultFileDeleteDelayMs           = 60000 // ServerLogConfigs.LOG_DELETE_DELAY_MS_DEFAULT
)

// Topic config names (TopicConfig.java, QuotaConfig.java, LogConfig.java).
const (
	SegmentBytes                         = "segment.bytes"
	SegmentMs                            = "segment.ms"
	SegmentJitterMs                      = "segment.jitter.ms"
	SegmentIndexBytes                    = "segment.index.bytes"
	FlushMessages                        = "flush.messages"
	FlushMs                              = "flush.ms"
	RetentionBytes                       = "retention.bytes"
	RetentionMs                          = "retention.ms"
	MaxMessageBytes                      = "max.message.bytes"
	IndexIntervalBytes                   = "index.interval.bytes"
	DeleteRetentionMs                    = "delete.retention.ms"
	MinCompactionLagMs                   = "min.compaction.lag.ms"
	MaxCompactionLagMs                   = "max.compaction.lag.ms"
	FileDeleteDelayMs                    = "file.delete.delay.ms"
	MinCleanableDirtyRatio               = "min.cleanable.dirty.ratio"
	CleanupPolicy                        = "cleanup.policy"
	UncleanLeaderElectionEnable          = "unclean.leader.election.enable"
	MinInsyncReplicas                    = "min.insync.replicas"
	CompressionType                      = "compression.type"
	CompressionGzipLevel                 = "compression.gzip.level"
	CompressionLz4Level                  = "compression.lz4.level"
	CompressionZstdLevel                 = "compression.zstd.level"
	Preallocate                          = "preallocate"
	MessageTimestampType                 = "message.timestamp.type"
	MessageTimestampBeforeMaxMs          = "message.timestamp.before.max.ms"
	MessageTimestampAfterMaxMs           = "message.timestamp.after.max.ms"
	LeaderReplicationThrottledReplicas   = "leader.replication.throttled.replicas"
	FollowerReplicationThrottledReplicas = "follower.replication.throttled.replicas"
	RemoteStorageEnable                  = "remote.storage.enable"
	LocalRetentionMs                     = "local.retention.ms"
	LocalRetentionBytes                  = "local.retention.bytes"
	RemoteLogCopyDisable                 = "remote.log.copy.disable"
	RemoteCopyLagMs                      = "remote.copy.lag.ms"
	RemoteCopyLagBytes                   = "remote.copy.lag.bytes"
	RemoteLogDeleteOnDisable             = "remote.log.delete.on.disable"
	ErrorsDeadletterqueueGroupEnable     = "errors.deadletterqueue.group.enable"
	// InternalSegmentBytes overrides segment.bytes without its 1 MiB minimum; Kafka defines
	// it for tests only and so do we.
	InternalSegmentBytes = "internal.segment.bytes"
)

// Cleanup policies and timestamp types.
const (
	CleanupDelete          = "delete"
	CleanupCompact         = "compact"
	TimestampCreateTime    = "CreateTime"
	TimestampLogAppendTime = "LogAppendTime"
)

// Compression type values (BrokerCompressionType, in Kafka's order).
var compressionTypes = []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}

func logSyn(name string) []Synonym { return []Synonym{{Name: "log." + name, Factor: 1}} }

func cleanerSyn(name string) []Synonym { return []Synonym{{Name: "log.cleaner." + name, Factor: 1}} }

func sameSyn(name string) []Synonym { return []Synonym{{Name: name, Factor: 1}} }

// defs is the table of every Kafka 4.4 topic config (LogConfig.CONFIG), in Kafka's
// definition order.
var defs = []*Def{
	{Name: SegmentBytes, Type: TypeInt, Default: i64(DefaultSegmentBytes), Synonyms: logSyn(SegmentBytes),
		Doc: "Size in bytes at which the active log segment is rolled.", Valid: "[1048576,...]",
		validate: atLeast(1024 * 1024), Honoured: true},
	{Name: SegmentMs, Type: TypeLong, Default: i64(DefaultSegmentMs),
		Synonyms: []Synonym{{"log.roll.ms", 1}, {"log.roll.hours", msPerHour}},
		Doc:      "Age in ms after which the active segment is rolled even if it is not full, so retention and compaction can act on it.",
		Valid:    "[1,...]", validate: atLeast(1), Honoured: true},
	{Name: SegmentJitterMs, Type: TypeLong, Default: i64(0),
		Synonyms: []Synonym{{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", msPerHour}},
		Doc:      "Largest random jitter subtracted from segment.ms, to avoid all segments rolling at once.",
		Valid:    "[0,...]", validate: atLeast(0)},
	{Name: SegmentIndexBytes, Type: TypeInt, Default: i64(DefaultIndexSizeMaxBytes), Synonyms: []Synonym{{"log.index.size.max.bytes", 1}},
		Doc: "Size in bytes of the offset and time index preallocated per segment.", Valid: "[4,...]", validate: atLeast(4)},
	{Name: FlushMessages, Type: TypeLong, Default: i64(maxLong), Synonyms: []Synonym{{"log.flush.interval.messages", 1}},
		Doc: "Force an fsync after this many messages. exactq fsyncs by group commit instead.", Valid: "[1,...]", validate: atLeast(1)},
	{Name: FlushMs, Type: TypeLong, Default: i64(maxLong),
		Synonyms: []Synonym{{"log.flush.interval.ms", 1}, {"log.flush.scheduler.interval.ms", 1}},
		Doc:      "Force an fsync when data is older than this many ms. exactq fsyncs by group commit instead.",
		Valid:    "[0,...]", validate: atLeast(0)},
	{Name: RetentionBytes, Type: TypeLong, Default: i64(-1), Synonyms: logSyn(RetentionBytes),
		Doc:      "Largest size in bytes a partition may reach before old segments are deleted (delete policy); -1 means no limit.",
		Honoured: true},
	{Name: RetentionMs, Type: TypeLong, Default: i64(DefaultRetentionMs),
		Synonyms: []Synonym{{"log.retention.ms", 1}, {"log.retention.minutes", msPerMinute}, {"log.retention.hours", msPerHour}},
		Doc:      "Longest time in ms a segment is kept before deletion (delete policy); -1 means no time limit.",
		Valid:    "[-1,...]", validate: atLeast(-1), Honoured: true},
	{Name: MaxMessageBytes, Type: TypeInt, Default: i64(DefaultMaxMessageBytes), Synonyms: sameSyn("message.max.bytes"),
		Doc: "Largest record batch size in bytes the topic accepts.", Valid: "[0,...]", validate: atLeast(0), Honoured: true},
	{Name: IndexIntervalBytes, Type: TypeInt, Default: i64(DefaultIndexIntervalBytes), Synonyms: logSyn(IndexIntervalBytes),
		Doc: "Bytes of log between two offset index entries.", Valid: "[0,...]", validate: atLeast(0), Honoured: true},
	{Name: DeleteRetentionMs, Type: TypeLong, Default: i64(DefaultDeleteRetentionMs), Synonyms: cleanerSyn(DeleteRetentionMs),
		Doc:   "How long in ms tombstones (and transaction markers) survive compaction, so consumers can see deletes.",
		Valid: "[0,...]", validate: atLeast(0), Honoured: true},
	{Name: MinCompactionLagMs, Type: TypeLong, Default: i64(0), Synonyms: cleanerSyn(MinCompactionLagMs),
		Doc: "Minimum age in ms a record must reach before compaction may remove it.", Valid: "[0,...]", validate: atLeast(0), Honoured: true},
	{Name: MaxCompactionLagMs, Type: TypeLong, Default: i64(maxLong), Synonyms: cleanerSyn(MaxCompactionLagMs),
		Doc: "Maximum time in ms a record may stay ineligible for compaction.", Valid: "[1,...]", validate: atLeast(1)},
	{Name: FileDeleteDelayMs, Type: TypeLong, Default: i64(DefaultFileDeleteDelayMs), Synonyms: []Synonym{{"log.segment.delete.delay.ms", 1}},
		Doc: "Delay in ms before a deleted segment's files are removed from disk.", Valid: "[0,...]", validate: atLeast(0)},
	{Name: MinCleanableDirtyRatio, Type: TypeDouble, Default: str("0.5"), Synonyms: []Synonym{{"log.cleaner.min.cleanable.ratio", 1}},
		Doc: "Share of the log that must be uncompacted before the cleaner compacts it.", Valid: "[0,...,1]", validate: between(0, 1)},
	{Name: CleanupPolicy, Type: TypeList, Default: str(CleanupDelete), Synonyms: logSyn(CleanupPolicy),
		Doc:   "How old segments are reclaimed: delete (by retention), compact (keep the latest value per key), both, or neither (empty list).",
		Valid: "[compact, delete]", validate: listOf(CleanupCompact, CleanupDelete), Honoured: true},
	{Name: UncleanLeaderElectionEnable, Type: TypeBoolean, Default: str("false"), Synonyms: sameSyn(UncleanLeaderElectionEnable),
		Doc: "Whether a replica outside the ISR may become leader, at the risk of data loss."},
	{Name: MinInsyncReplicas, Type: TypeInt, Default: i64(1), Synonyms: sameSyn(MinInsyncReplicas),
		Doc: "Minimum in-sync replicas that must acknowledge an acks=all write.", Valid: "[1,...]", validate: atLeast(1)},
	{Name: CompressionType, Type: TypeString, Default: str("producer"), Synonyms: sameSyn(CompressionType),
		Doc:   "Final compression of stored batches; producer keeps the producer's codec.",
		Valid: "[uncompressed, zstd, lz4, snappy, gzip, producer]", validate: oneOf(compressionTypes...), Honoured: true},
	{Name: CompressionGzipLevel, Type: TypeInt, Default: i64(-1), Synonyms: sameSyn(CompressionGzipLevel),
		Doc: "gzip level used when compression.type is gzip.", Valid: "[1,...,9] or -1", validate: gzipLevel, Honoured: true},
	{Name: CompressionLz4Level, Type: TypeInt, Default: i64(9), Synonyms: sameSyn(CompressionLz4Level),
		Doc: "lz4 level used when compression.type is lz4 (stored, not applied: exactq recompresses with the lz4 library's fast level).", Valid: "[1,...,17]", validate: between(1, 17)},
	{Name: CompressionZstdLevel, Type: TypeInt, Default: i64(3), Synonyms: sameSyn(CompressionZstdLevel),
		Doc: "zstd level used when compression.type is zstd (mapped onto the encoder's four levels).", Valid: "[-131072,...,22]", validate: between(-131072, 22), Honoured: true},
	{Name: Preallocate, Type: TypeBoolean, Default: str("false"), Synonyms: logSyn(Preallocate),
		Doc: "Whether segment files are preallocated on disk when created."},
	{Name: MessageTimestampType, Type: TypeString, Default: str(TimestampCreateTime), Synonyms: logSyn(MessageTimestampType),
		Doc:   "Whether stored timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime).",
		Valid: "[CreateTime, LogAppendTime]", validate: oneOf(TimestampCreateTime, TimestampLogAppendTime), Honoured: true},
	{Name: MessageTimestampBeforeMaxMs, Type: TypeLong, Default: i64(DefaultMessageTimestampBeforeMaxMs), Synonyms: logSyn(MessageTimestampBeforeMaxMs),
		Doc:   "With CreateTime, how far in ms a record timestamp may lie before the broker's clock.",
		Valid: "[0,...]", validate: atLeast(0), Honoured: true},
	{Name: MessageTimestampAfterMaxMs, Type: TypeLong, Default: i64(DefaultMessageTimestampAfterMaxMs), Synonyms: logSyn(MessageTimestampAfterMaxMs),
		Doc:   "With CreateTime, how far in ms a record timestamp may lie after the broker's clock.",
		Valid: "[0,...]", validate: atLeast(0), Honoured: true},
	{Name: LeaderReplicationThrottledReplicas, Type: TypeList, Default: str(""),
		Doc:   "Replicas (partition:broker pairs, or *) whose replication is throttled on the leader side.",
		Valid: "[partitionId]:[brokerId],[partitionId]:[brokerId],...", validate: throttledReplicas},
	{Name: FollowerReplicationThrottledReplicas, Type: TypeList, Default: str(""),
		Doc:   "Replicas (partition:broker pairs, or *) whose replication is throttled on the follower side.",
		Valid: "[partitionId]:[brokerId],[partitionId]:[brokerId],...", validate: throttledReplicas},
	{Name: RemoteStorageEnable, Type: TypeBoolean, Default: str("false"),
		Doc: "Whether the topic uses tiered storage. exactq has none, so true is refused."},
	{Name: LocalRetentionMs, Type: TypeLong, Default: i64(-2), Synonyms: logSyn(LocalRetentionMs),
		Doc: "Tiered storage: local retention in ms; -2 means use retention.ms.", Valid: "[-2,...]", validate: atLeast(-2)},
	{Name: LocalRetentionBytes, Type: TypeLong, Default: i64(-2), Synonyms: logSyn(LocalRetentionBytes),
		Doc: "Tiered storage: local retention in bytes; -2 means use retention.bytes.", Valid: "[-2,...]", validate: atLeast(-2)},
	{Name: RemoteLogCopyDisable, Type: TypeBoolean, Default: str("false"),
		Doc: "Tiered storage: stop copying segments to remote storage."},
	{Name: RemoteCopyLagMs, Type: TypeLong, Default: i64(0), Synonyms: logSyn(RemoteCopyLagMs),
		Doc: "Tiered storage: age in ms before a segment is copied to remote storage.", Valid: "[-1,...]", validate: atLeast(-1)},
	{Name: RemoteCopyLagBytes, Type: TypeLong, Default: i64(-1), Synonyms: logSyn(RemoteCopyLagBytes),
		Doc: "Tiered storage: local bytes before segments are copied to remote storage.", Valid: "[-1,...]", validate: atLeast(-1)},
	{Name: RemoteLogDeleteOnDisable, Type: TypeBoolean, Default: str("false"),
		Doc: "Tiered storage: delete remote data when tiered storage is turned off for the topic."},
	{Name: ErrorsDeadletterqueueGroupEnable, Type: TypeBoolean, Default: str("false"),
		Doc: "Whether share groups may use this topic as a dead-letter queue."},
	{Name: InternalSegmentBytes, Type: TypeInt, Internal: true, Honoured: true,
		Doc: "Segment size in bytes without segment.bytes's minimum; for tests only."},
}

var defsByName = func() map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for _, d := range defs {
		m[d.Name] = d
	}
	return m
}()

// Lookup returns the definition of a topic config, or nil for an unknown name.
func Lookup(name string) *Def { return defsByName[name] }

// Defs returns every topic config definition (internal ones included), sorted by name. The
// result is shared and must not be modified.
func Defs() []*Def { return sortedDefs }

var sortedDefs = func() []*Def {
	out := append([]*Def(nil), defs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}()

// NotHonoured lists the topic configs exactq stores and describes but does not act on.
func NotHonoured() []string {
	var out []string
	for _, d := range sortedDefs {
		if !d.Honoured {
			out = append(out, d.Name)
		}
	}
	return out
}
