package client

import (
	"time"

	"github.com/exactq/exactq/internal/compress"
)

// Record is one message produced or consumed.
type Record struct {
	Topic string
	// Partition is chosen by the producer's Partitioner (overwriting what the caller set)
	// unless the Partitioner is ManualPartitioner. Set on consumed records.
	Partition int32
	Key       []byte // nil is a null key: unkeyed records are partitioned sticky
	Value     []byte // nil is a null value (a tombstone on compacted topics)
	Headers   []Header
	// Timestamp is the record's create time; the producer stamps time.Now() when it is
	// zero. On consumed records it is the create time, or the broker's append time for
	// LogAppendTime topics.
	Timestamp time.Time
	// Offset is set when the record was produced (-1 with acks=0 or when the broker
	// reported a duplicate), and on consumed records.
	Offset int64
	// LeaderEpoch is the partition leader epoch of the batch a consumed record came in.
	LeaderEpoch int32
	// DeliveryCount is set on records from a ShareConsumer: how many times the record was
	// acquired by a share consumer, this delivery included (1 on the first delivery).
	DeliveryCount int16
}

// Header is one record header. Keys need not be unique.
type Header struct {
	Key   string
	Value []byte
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Compression is a record batch codec.
type Compression int8

// Codecs, with Kafka's numbering.
const (
	NoCompression Compression = Compression(compress.None)
	Gzip          Compression = Compression(compress.Gzip)
	Snappy        Compression = Compression(compress.Snappy)
	LZ4           Compression = Compression(compress.LZ4)
	Zstd          Compression = Compression(compress.Zstd)
)

func (c Compression) String() string { return compress.Name(int8(c)) }

// Acks is how many replicas must have a batch before the broker answers. The zero value
// is AcksAll, the only setting compatible with idempotence.
type Acks int8

const (
	AcksAll    Acks = iota // acks=-1: every in-sync replica
	AcksLeader             // acks=1: the leader only
	AcksNone               // acks=0: no response at all
)

// wire returns the value sent in ProduceRequest.Acks.
func (a Acks) wire() int16 {
	switch a {
	case AcksLeader:
		return 1
	case AcksNone:
		return 0
	}
	return -1
}
