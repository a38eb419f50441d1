package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/producerstate"
)

// Producer-state bounds (exactq's; Kafka 4.4 has only producer.id.expiration.ms).
const (
	maxProducersPerPartitionConfig = "producer.id.max.entries.per.partition"
	maxProducersConfig             = "producer.id.max.entries"
)

// producerStateConfig is every partition's producer-state configuration, with one budget
// for the whole broker.
func (b *Broker) producerStateConfig() producerstate.Config {
	return producerstate.Config{
		ExpirationMs: int64(b.brokerInt32("producer.id.expiration.ms", producerstate.DefaultExpirationMs)),
		MaxProducers: int(b.brokerInt32(maxProducersPerPartitionConfig, 10000)),
		Budget:       producerstate.NewBudget(int64(b.brokerInt32(maxProducersConfig, 1000000))),
	}
}

// checkProducerIssued refuses a batch whose producer id this broker never handed out:
// every id below the allocator's next one may have been issued (before a restart too,
// since a restart resumes above the durable reservation), none at or above it was. Kafka
// 4.4 accepts any producer id in Produce and keeps state for each for
// producer.id.expiration.ms, so a client inventing ids grows the broker by an entry per
// id; exactq refuses them, with INVALID_PRODUCER_ID_MAPPING, the error Kafka gives for a
// producer id that is not assigned (UNKNOWN_PRODUCER_ID would make a Java idempotent
// producer bump its epoch locally and retry the same id until its delivery timeout; this
// one is fatal to it, and kgo re-initializes its producer id). Transactional batches were
// already checked against their transaction.
func (b *Broker) checkProducerIssued(pid int64) (int16, string) {
	if pid < 0 || b.pids.issued(pid) {
		return 0, ""
	}
	return kerr.InvalidProducerIDMapping.Code, fmt.Sprintf("Producer id %d was never issued by this broker (InitProducerId)", pid)
}

// issued reports whether id may have been handed out by any broker: it is below the
// bound of the blocks the controller has given out (the image's ProducerIdsRecord).
func (p *producerIDs) issued(id int64) bool {
	im, _ := p.b.image()
	return id < im.ProducerIDs.Next
}

// checkProducer applies the idempotence rules to a batch before it is appended. A retry of
// one of the producer's last five batches returns the original offsets, so the client
// sees success and nothing is written twice. Caller holds p.mu.
func (p *partition) checkProducer(h kmsg.RecordBatch) (*appendResult, error) {
	lastSeq := producerstate.LastSeq(h.FirstSequence, h.LastOffsetDelta)
	res, err := p.producers.Check(h.ProducerID, h.ProducerEpoch, h.FirstSequence, lastSeq, h.Attributes&batch.AttrTransactional != 0)
	if err != nil {
		return nil, kerrWrap(producerstate.KafkaCode(err), err)
	}
	if res.Duplicate {
		lat := int64(-1)
		if p.topic.settingsLogAppendTime() {
			lat = res.TimestampMs
		}
		return &appendResult{baseOffset: res.FirstOffset, end: res.LastOffset + 1, logAppendTime: lat, duplicate: true}, nil
	}
	return nil, nil
}

// recordProducer notes an appended batch (h.FirstOffset set to its base offset) in the
// producer state. Caller holds p.mu.
func (p *partition) recordProducer(h kmsg.RecordBatch) {
	p.producers.Update(producerstate.Batch{
		ProducerID:    h.ProducerID,
		Epoch:         h.ProducerEpoch,
		BaseSeq:       h.FirstSequence,
		LastSeq:       producerstate.LastSeq(h.FirstSequence, h.LastOffsetDelta),
		Transactional: h.Attributes&batch.AttrTransactional != 0,
		FirstOffset:   h.FirstOffset,
		LastOffset:    h.FirstOffset + int64(h.LastOffsetDelta),
		TimestampMs:   h.MaxTimestamp,
	})
}

func (t *topic) settingsLogAppendTime() bool {
	_, s := t.snapshot()
	return s.logAppendTime
}

// kerrError carries a Kafka error code together with the detailed message.
type kerrError struct {
	kind *kerr.Error
	err  error
}

func (e *kerrError) Error() string { return e.err.Error() }
func (e *kerrError) Unwrap() error { return e.kind }

func kerrWrap(code int16, err error) error {
	k, ok := kerr.ErrorForCode(code).(*kerr.Error)
	if !ok {
		k = kerr.UnknownServerError
	}
	return &kerrError{kind: k, err: err}
}
