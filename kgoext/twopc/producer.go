package twopc

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/kgoext"
)

// Producer is a KIP-939 two-phase-commit transactional producer over a *kgo.Client. It is
// safe for concurrent use; its methods run one at a time (a Flush holds back a Produce).
type Producer struct {
	cl             *kgo.Client
	txnID          string
	partitioner    kgo.Partitioner
	batchMaxBytes  func(topic string) int32
	codec          int8
	produceTimeout time.Duration
	autoCreate     bool
	retries        int
	// unknownTopicRetries is kgo.UnknownTopicRetries: metadata lookups of a topic the
	// brokers do not know before Produce fails its record (-1: never).
	unknownTopicRetries int
	backoff             func(int) time.Duration

	// mu serialises the methods and guards everything below.
	mu    sync.Mutex
	coord coordinator
	txn   txnState
	// id is the producer id and epoch the coordinator handed out; seqs the next sequence
	// number of each partition under it (reset whenever id changes).
	id   producerID
	seqs map[topicPartition]int32
	// parts holds each topic's partitioner; buf the records produced and not yet
	// written, per partition in the order they are sent (only the last batch takes more
	// records, and only until it is first sent).
	parts map[string]kgo.TopicPartitioner
	buf   map[topicPartition][]*pendingBatch
	// staleMeta asks the next metadata lookup to bypass kgo's cache (a leader moved).
	staleMeta bool
	// counts caches each topic's partition count for Produce, for metadataMinAge
	// (kgo.MetadataMinAge).
	counts         map[string]partitionCount
	metadataMinAge time.Duration
}

type partitionCount struct {
	partitions int
	at         time.Time
}

type producerID struct {
	id    int64
	epoch int16
}

var noProducerID = producerID{id: -1, epoch: -1}

type topicPartition struct {
	topic     string
	partition int32
}

// NewProducer returns a producer for transactionalID that talks to the cluster through
// cl: cl's metadata (partition counts and leaders, topic auto-creation as configured
// with kgo.AllowAutoTopicCreation), its connections and connection retries, and its
// kgo.RecordPartitioner, kgo.ProducerBatchMaxBytes, kgo.ProducerBatchCompression (the
// first codec, at its default level), kgo.RequestRetries, kgo.UnknownTopicRetries,
// kgo.RetryBackoffFn and kgo.ProduceRequestTimeout settings. It sends nothing until InitTransactions or
// RecoverPreparedTransaction.
//
// cl must not be transactional with the same id (its own InitProducerId would abort the
// prepared transaction this producer exists to keep) and must allow InitProducerId v6:
// build it with kgo.MaxVersions(twopc.Versions()) (or add key 22 version 6 to your own).
func NewProducer(cl *kgo.Client, transactionalID string) (*Producer, error) {
	if cl == nil || transactionalID == "" {
		return nil, errors.New("twopc: NewProducer needs a client and a transactional id")
	}
	if id, _ := cl.OptValue(kgo.TransactionalID).(string); id == transactionalID {
		return nil, fmt.Errorf("twopc: the kgo client is transactional with id %q itself: its InitProducerId would abort the prepared transaction", id)
	}
	if v, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions); v != nil {
		if max, ok := v.LookupMaxKeyVersion(22); !ok || max < 6 {
			return nil, errors.New("twopc: the kgo client's MaxVersions stop InitProducerId below v6 (two-phase commit): build it with kgo.MaxVersions(twopc.Versions())")
		}
	}
	p := &Producer{
		cl:                  cl,
		txnID:               transactionalID,
		batchMaxBytes:       optBatchMaxBytes(cl),
		codec:               optCodec(cl),
		produceTimeout:      optDuration(cl, kgo.ProduceRequestTimeout, 10*time.Second),
		autoCreate:          optBool(cl, kgo.AllowAutoTopicCreation),
		retries:             int(optInt(cl, kgo.RequestRetries, 20)),
		unknownTopicRetries: int(optInt(cl, kgo.UnknownTopicRetries, 4)),
		backoff:             optBackoff(cl),
		id:                  noProducerID,
		seqs:                map[topicPartition]int32{},
		parts:               map[string]kgo.TopicPartitioner{},
		counts:              map[string]partitionCount{},
		metadataMinAge:      optDuration(cl, kgo.MetadataMinAge, 5*time.Second),
		buf:                 map[topicPartition][]*pendingBatch{},
	}
	p.partitioner, _ = cl.OptValue(kgo.RecordPartitioner).(kgo.Partitioner)
	if p.partitioner == nil {
		p.partitioner = kgo.StickyKeyPartitioner(nil)
	}
	p.coord = p.newCoordinator(txnCoordinator, transactionalID)
	p.txn.added = map[topicPartition]bool{}
	return p, nil
}

// newCoordinator routes requests for key (a transactional id or a group) over p's client.
func (p *Producer) newCoordinator(keyType int8, key string) coordinator {
	return coordinator{cl: p.cl, keyType: keyType, key: key, retries: p.retries, backoff: p.backoff, node: -1,
		versions: map[int32]*kmsg.ApiVersionsResponse{}}
}

// Versions is kgoext.Versions() (kversion.Stable() and TxnShareAcknowledge) with
// InitProducerId raised to v6 (KIP-939), for kgo.MaxVersions: kgo sends no request
// version its MaxVersions leave out.
func Versions() *kversion.Versions {
	v := kgoext.Versions()
	v.SetMaxKeyVersion(kmsg.InitProducerID.Int16(), initProducerID2PCVersion)
	return v
}

// TransactionalID is the producer's transactional id.
func (p *Producer) TransactionalID() string { return p.txnID }

// ProducerID returns the producer id and epoch the coordinator gave this producer, -1/-1
// before InitTransactions or RecoverPreparedTransaction. Under transactions v2 (KIP-890)
// the epoch grows with every commit or abort.
func (p *Producer) ProducerID() (int64, int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id.id, p.id.epoch
}

// setID installs a new producer id or epoch: sequences start again at 0 (p.mu held).
func (p *Producer) setID(id producerID) {
	p.id = id
	clear(p.seqs)
	for _, q := range p.buf {
		for _, b := range q {
			b.seqFor = noProducerID
		}
	}
}

func optDuration(cl *kgo.Client, o any, def time.Duration) time.Duration {
	if d, ok := cl.OptValue(o).(time.Duration); ok && d > 0 {
		return d
	}
	return def
}

func optInt(cl *kgo.Client, o any, def int64) int64 {
	switch v := cl.OptValue(o).(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case int32:
		return int64(v)
	}
	return def
}

func optBatchMaxBytes(cl *kgo.Client) func(string) int32 {
	if fn, ok := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32); ok && fn != nil {
		return fn
	}
	return func(string) int32 { return 1_000_012 } // kgo's default
}

// optCodec is the batch codec of the kgo client's first kgo.ProducerBatchCompression
// choice (kgo's default: snappy). kgo keeps a codec's level unexported, so a level set
// with WithLevel is not carried over: the codec's default level is used.
func optCodec(cl *kgo.Client) int8 {
	cs, _ := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec)
	if len(cs) == 0 {
		return batch.CodecSnappy
	}
	switch cs[0].WithLevel(0) {
	case kgo.GzipCompression().WithLevel(0):
		return batch.CodecGzip
	case kgo.SnappyCompression():
		return batch.CodecSnappy
	case kgo.Lz4Compression():
		return batch.CodecLZ4
	case kgo.ZstdCompression():
		return batch.CodecZstd
	}
	return batch.CodecNone
}

func optBool(cl *kgo.Client, o any) bool {
	b, _ := cl.OptValue(o).(bool)
	return b
}

func optBackoff(cl *kgo.Client) func(int) time.Duration {
	if fn, ok := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration); ok && fn != nil {
		return fn
	}
	return func(int) time.Duration { return 100 * time.Millisecond }
}
