package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/topicconfig"
)

// topicSettings is a topic's effective configuration in the form the data path uses.
type topicSettings struct {
	log               log.Config
	maxMessageBytes   int
	logAppendTime     bool
	timestampBeforeMs int64 // message.timestamp.before.max.ms
	timestampAfterMs  int64 // message.timestamp.after.max.ms
	compacted         bool
	storeCodec        int8 // compression.type as a batch codec; codecProducer keeps the producer's
	storeLevel        int  // compression.gzip.level or compression.zstd.level for storeCodec
}

// brokerDefaults are the broker-level configs: defaults for topics and the broker settings
// exactq reads.
type brokerDefaults struct {
	numPartitions     int32
	replicationFactor int16
	topic             *topicconfig.BrokerDefaults
}

func newBrokerDefaults(static map[string]string) (brokerDefaults, error) {
	d, err := topicconfig.NewBrokerDefaults(static)
	if err != nil {
		return brokerDefaults{}, fmt.Errorf("broker config: %w", err)
	}
	return brokerDefaults{numPartitions: d.NumPartitions(), replicationFactor: d.DefaultReplicationFactor(), topic: d}, nil
}

func (b *Broker) resolveSettings(overrides map[string]string) (topicSettings, error) {
	ls := topicconfig.Resolve(overrides, b.defaults.topic).LogSettings()
	return topicSettings{
		log: log.Config{
			SegmentBytes:       ls.SegmentBytes,
			SegmentMs:          ls.SegmentMs,
			IndexIntervalBytes: ls.IndexIntervalBytes,
			RetentionMs:        ls.RetentionMs,
			RetentionBytes:     ls.RetentionBytes,
			Delete:             ls.Delete,
			Compact:            ls.Compact,
			DeleteRetentionMs:  ls.DeleteRetentionMs,
			MinCompactionLagMs: ls.MinCompactionLagMs,
		},
		maxMessageBytes:   int(ls.MaxMessageBytes),
		logAppendTime:     ls.LogAppendTime,
		timestampBeforeMs: ls.MessageTimestampBeforeMaxMs,
		timestampAfterMs:  ls.MessageTimestampAfterMaxMs,
		compacted:         ls.Compact,
		storeCodec:        storeCodec(ls.CompressionType),
		storeLevel:        ls.CompressionLevel,
	}, nil
}

// checkTimestamps applies message.timestamp.before/after.max.ms to a CreateTime batch. The
// header carries the base and the max timestamp; Kafka checks every record, which differs
// only for batches whose records are out of timestamp order.
func (s topicSettings) checkTimestamps(h kmsg.RecordBatch, nowMs int64) (int16, string) {
	if s.logAppendTime || h.Attributes&0x08 != 0 {
		return 0, ""
	}
	for _, ts := range []int64{h.FirstTimestamp, h.MaxTimestamp} {
		if ts < 0 {
			continue // records without timestamps (-1) are allowed, as in Kafka
		}
		if nowMs-ts > s.timestampBeforeMs {
			return kerr.InvalidTimestamp.Code, fmt.Sprintf("Timestamp %d of a record is before the allowed %d ms (message.timestamp.before.max.ms)", ts, s.timestampBeforeMs)
		}
		if ts-nowMs > s.timestampAfterMs {
			return kerr.InvalidTimestamp.Code, fmt.Sprintf("Timestamp %d of a record is after the allowed %d ms (message.timestamp.after.max.ms)", ts, s.timestampAfterMs)
		}
	}
	return 0, ""
}

// validateConfigs checks a topic's override set as Kafka does at creation.
func (b *Broker) validateConfigs(configs map[string]string) *adminError {
	if err := topicconfig.ValidateSet(configs, b.defaults.topic); err != nil {
		return configAdminError(err)
	}
	return nil
}

func configAdminError(err error) *adminError {
	var ce *topicconfig.Error
	if errors.As(err, &ce) {
		return &adminError{err: kerr.ErrorForCode(ce.Code()).(*kerr.Error), msg: ce.Message}
	}
	return newAdminError(kerr.InvalidConfig, "%v", err)
}

// createTopicsConfigs is the config list CreateTopics v5+ returns for a new topic.
func (b *Broker) createTopicsConfigs(overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, c := range topicconfig.Describe(overrides, b.defaults.topic, nil, false, false) {
		rc := kmsg.NewCreateTopicsResponseTopicConfig()
		rc.Name, rc.Value, rc.ReadOnly, rc.Source, rc.IsSensitive = c.Name, c.Value, c.ReadOnly, int8(c.Source), c.IsSensitive
		out = append(out, rc)
	}
	return out
}

func validateTopicName(name string) error { return topicconfig.ValidateTopicName(name) }

func isInternalTopic(name string) bool { return topicconfig.IsInternal(name) }

// topicCollision returns an existing topic whose name differs from name only by '.' versus
// '_' (they would clash in metric names), or "".
func (b *Broker) topicCollision(name string) string {
	if !topicconfig.HasCollisionChars(name) {
		return ""
	}
	key := topicconfig.CollisionKey(name)
	for _, t := range b.topics.all() {
		if t.name != name && topicconfig.CollisionKey(t.name) == key {
			return t.name
		}
	}
	return ""
}
