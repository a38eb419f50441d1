package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/batch"
	"github.com/exactq/exactq/producerstate"
)

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
