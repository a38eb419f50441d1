// Package topicconfig is Kafka's topic configuration as exactq serves it: the table of every
// Kafka 4.4 topic config (type, default, broker synonyms, validator, docs), validation with
// Kafka's error messages, resolution of a topic's effective values against the broker's
// static settings, DescribeConfigs entries for TOPIC and BROKER resources and the configs a
// CreateTopics response carries, the IncrementalAlterConfigs / AlterConfigs / CreateTopics
// config operations, and Kafka's topic name rules. It is pure: no I/O, no clock, no goroutines.
//
// Facts come from Apache Kafka 4.4: LogConfig.java (the topic ConfigDef),
// TopicConfig.java, ServerLogConfigs.java, ServerTopicConfigSynonyms.java (fallback
// order), ConfigHelper.scala (DescribeConfigs sources and synonyms),
// ConfigurationControlManager.java (incremental operations), Topic.java (names).
//
// # What exactq acts on
//
// Honoured today (Def.Honoured, and the fields of LogSettings): segment.bytes (and the
// test-only internal.segment.bytes), segment.ms, index.interval.bytes, retention.ms,
// retention.bytes, cleanup.policy, delete.retention.ms, min.compaction.lag.ms,
// max.message.bytes, message.timestamp.type, message.timestamp.before.max.ms,
// message.timestamp.after.max.ms, compression.type, compression.gzip.level,
// compression.zstd.level.
//
// Stored, validated and described but not acted on (so clients listing configs see Kafka's
// set): segment.jitter.ms, segment.index.bytes, flush.messages, flush.ms (exactq fsyncs by
// group commit), max.compaction.lag.ms, file.delete.delay.ms, min.cleanable.dirty.ratio,
// unclean.leader.election.enable, min.insync.replicas (single node),
// compression.lz4.level, preallocate,
// leader.replication.throttled.replicas, follower.replication.throttled.replicas,
// local.retention.ms, local.retention.bytes, remote.log.copy.disable, remote.copy.lag.ms,
// remote.copy.lag.bytes, remote.log.delete.on.disable, errors.deadletterqueue.group.enable.
// remote.storage.enable is accepted only as false: exactq has no tiered storage, and Kafka
// with tiered storage disabled refuses true the same way. errors.deadletterqueue.group.enable
// is accepted only as false too (Kafka's default): exactq has no dead-letter queue yet.
// NotHonoured returns this list.
//
// # Broker defaults
//
// BrokerDefaults holds the operator's static broker settings over Kafka's defaults. A topic
// config falls back to its broker synonyms in ServerTopicConfigSynonyms order, the first one
// set winning and converted to the topic's unit (retention.ms ← log.retention.ms ←
// log.retention.minutes ← log.retention.hours; segment.ms ← log.roll.ms ← log.roll.hours;
// segment.jitter.ms ← log.roll.jitter.ms ← log.roll.jitter.hours; flush.ms ←
// log.flush.interval.ms ← log.flush.scheduler.interval.ms), then to Kafka's default. A
// negative retention in any unit is -1 (unlimited); settings whose derived topic default is
// invalid (a retention of 0, log.roll.ms=0) are refused as Kafka refuses to start with them.
// exactq has no dynamic broker configs, so Describe never reports sources 2 or 3, and every
// BROKER config is read-only (also those Kafka can change at runtime: exactq refuses to
// alter a BROKER resource). A broker default of a topic config exactq does not act on
// (log.preallocate, min.insync.replicas, log.flush.*, log.roll.jitter.*, ...) is refused
// unless it is at Kafka's default; it and its topic config are described with documentation
// saying exactq does not honour them.
//
// Describe's sources and synonyms are ConfigHelper's, not the controller's: a topic config
// lists the synonyms from its highest-priority broker synonym on, so a retention.ms that
// comes from log.retention.hours=100 is 360000000 with source DEFAULT_CONFIG and no
// synonyms, exactly as a Kafka 4.4 broker describes it (and kafka-topics --describe leaves
// it out of Configs there too). Only the controller's CreateTopics answer
// (KafkaConfigSchema), which CreateTopicsConfigs gives, reports such a value as
// STATIC_BROKER_CONFIG.
package topicconfig
