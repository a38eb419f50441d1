package broker

import (
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
	numPartitions int32
	topic         *topicconfig.BrokerDefaults
}

func newBrokerDefaults(static map[string]string) (brokerDefaults, error) {
	d, err := topicconfig.NewBrokerDefaults(static)
	if err != nil {
		return brokerDefaults{}, fmt.Errorf("broker config: %w", err)
	}
	return brokerDefaults{numPartitions: d.NumPartitions(), topic: d}, nil
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

func validateTopicName(name string) error { return topicconfig.ValidateTopicName(name) }

func isInternalTopic(name string) bool { return topicconfig.IsInternal(name) }
