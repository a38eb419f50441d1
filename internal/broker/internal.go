package broker

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/producerstate"
)

// Internal topics and the configs Kafka gives them.
const (
	offsetsTopic          = "__consumer_offsets"
	transactionStateTopic = "__transaction_state"
)

// internalPartitions returns a coordinator's view of an internal topic's partitions; an
// offline one (its log could not be opened) fails the coordinator's load, which is tried
// again at its next use.
func (b *Broker) internalPartitions(name string) ([]coordlog.Partition, error) {
	t := b.topics.get(name)
	if t == nil {
		return nil, fmt.Errorf("internal topic %s does not exist", name)
	}
	parts, _ := t.snapshot()
	out := make([]coordlog.Partition, len(parts))
	for i, p := range parts {
		if ip := imagePartition(b.pub.image(), t.id, int32(i)); p == nil && ip != nil && !b.hosts(ip) {
			if name == offsetsTopic {
				out[i] = elsewhere(i) // its groups are coordinated there (groupsacross.go)
				continue
			}
			// The transaction and share coordinators need every partition of their
			// topic here until they work across nodes (steps 14-17).
			return nil, fmt.Errorf("%s-%d is on another node (transactions and share groups across nodes are not built yet): %w",
				name, i, kerr.CoordinatorNotAvailable)
		}
		if p == nil {
			return nil, fmt.Errorf("%s-%d is offline: %w", name, i, kerr.KafkaStorageError)
		}
		out[i] = &internalPartition{b: b, p: p}
	}
	return out, nil
}

// internalPartition implements coordlog.Partition over a partition of an internal topic.
type internalPartition struct {
	b *Broker
	p *partition
}

func (ip *internalPartition) Index() int32 { return ip.p.index }

// Append writes a coordinator batch. Coordinator batches carry no sequence numbers (Kafka
// appends them with the coordinator as origin, which skips sequence checks); a batch with a
// producer id is transactional (TxnOffsetCommit) and waits for its marker.
func (ip *internalPartition) Append(ctx context.Context, cb coordlog.Batch) (int64, error) {
	p := ip.p
	h := batch.NoProducer(0, ip.b.now().UnixMilli())
	if cb.ProducerID >= 0 {
		h.ProducerID, h.ProducerEpoch = cb.ProducerID, cb.ProducerEpoch
		h.Attributes |= batch.AttrTransactional
	}
	recs := make([]kmsg.Record, len(cb.Records))
	copy(recs, cb.Records)
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
		recs[i].TimestampDelta64 = 0
	}
	raw, err := batch.Encode(nil, h, recs, batch.CodecNone)
	if err != nil {
		return -1, err
	}
	p.mu.Lock()
	batch.SetLeaderEpoch(raw, p.epoch.Load())
	first, _, err := p.log.Append([][]byte{raw})
	if err == nil && cb.ProducerID >= 0 {
		p.producers.Update(producerstate.Batch{
			ProducerID: cb.ProducerID, Epoch: cb.ProducerEpoch, BaseSeq: -1, LastSeq: -1, Transactional: true,
			FirstOffset: first, LastOffset: first + int64(len(recs)) - 1, TimestampMs: h.FirstTimestamp,
		})
		p.refreshUnstable()
	}
	p.mu.Unlock()
	if err != nil {
		return -1, err
	}
	end := first + int64(max(len(recs), 1))
	if err := ip.b.makeDurable(p, end); err != nil {
		return -1, err
	}
	return first, nil
}

// Replay hands every stored batch, markers included, to a loading coordinator.
func (ip *internalPartition) Replay(fn func(coordlog.Stored) error) error {
	l := ip.p.log
	return l.Scan(l.StartOffset(), func(raw []byte) error {
		var h kmsg.RecordBatch
		if err := h.ReadFrom(raw); err != nil {
			return err
		}
		st := coordlog.Stored{BaseOffset: h.FirstOffset, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
			Transactional: h.Attributes&batch.AttrTransactional != 0}
		if h.Attributes&batch.AttrControl != 0 {
			m, err := batch.ParseMarker(&h)
			if err != nil {
				return nil // other control records carry nothing for coordinators
			}
			st.Marker = &coordlog.Marker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
			return fn(st)
		}
		recs, err := batch.DecodeRecords(&h, math.MaxInt32)
		if err != nil {
			return fmt.Errorf("%s-%d offset %d: %w", ip.p.topic.name, ip.p.index, h.FirstOffset, err)
		}
		st.Records = recs
		return fn(st)
	})
}

// makeDurable waits until the partition is durable up to end and publishes the new high
// watermark, the acks=all rule for writes the broker makes itself.
func (b *Broker) makeDurable(p *partition, end int64) error {
	if b.cfg.Fsync != FsyncAlways {
		p.advanceHW(end)
		return nil
	}
	if err := p.log.WaitDurable(end); err != nil {
		return err
	}
	p.advanceHW(p.log.DurableEnd())
	return nil
}
