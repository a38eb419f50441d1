package broker

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/producerstate"
	"github.com/exactq/exactq/internal/txn"
	"github.com/exactq/exactq/wire"
)

// abortedTxn is one entry of a partition's aborted-transaction index: read_committed
// fetches return the entries overlapping what they read, and clients drop those producers'
// records between FirstOffset and the abort marker.
type abortedTxn struct {
	ProducerID  int64 `json:"pid"`
	FirstOffset int64 `json:"first"`
	LastOffset  int64 `json:"last"` // the abort marker's offset
}

// refreshUnstable recomputes the first offset of any open transaction. Caller holds p.mu.
func (p *partition) refreshUnstable() {
	if off, ok := p.producers.FirstUnstableOffset(); ok {
		p.unstable.Store(off)
	} else {
		p.unstable.Store(math.MaxInt64)
	}
}

// lastStableOffset is the offset below which every transaction is decided: read_committed
// consumers read up to it and no further.
func (p *partition) lastStableOffset() int64 {
	return min(p.highWatermark(), p.unstable.Load())
}

// abortedIn returns the aborted transactions a read_committed fetch of [from, to) must
// report.
func (p *partition) abortedIn(from, to int64) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	for _, a := range p.aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			out = append(out, at)
		}
	}
	return out
}

// pruneAborted drops index entries wholly below the log start offset. Caller holds p.mu.
func (p *partition) pruneAborted(start int64) {
	i := 0
	for i < len(p.aborted) && p.aborted[i].LastOffset < start {
		i++
	}
	if i > 0 {
		p.aborted = append(p.aborted[:0:0], p.aborted[i:]...)
	}
}

// noteCompleted applies a finished transaction to the partition's indexes. Caller holds
// p.mu.
func (p *partition) noteCompleted(done producerstate.CompletedTxn) {
	if done.Aborted {
		p.aborted = append(p.aborted, abortedTxn{ProducerID: done.ProducerID, FirstOffset: done.FirstOffset, LastOffset: done.LastOffset})
	}
	p.refreshUnstable()
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// WriteMarkers appends a transaction marker (COMMIT or ABORT) for pid/epoch to each
// partition and returns once they are all durable. A partition that no longer exists
// (its topic was deleted) is skipped without error, as Kafka's marker writer does. On an
// internal partition, the owning coordinator is told after the marker is durable.
func (b *Broker) WriteMarkers(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32, parts []TopicPartition) map[TopicPartition]error {
	return b.writeMarkers(ctx, txnMarker{pid: pid, epoch: epoch, commit: commit, coordinatorEpoch: coordinatorEpoch}, parts)
}

// txnMarker is one transaction marker: what a WriteTxnMarkers entry or this node's own
// transaction coordinator asks a partition to append.
type txnMarker struct {
	pid              int64
	epoch            int16
	commit           bool
	coordinatorEpoch int32
	// transactionVersion is the WriteTxnMarkers (v2+) field; from 2 the epoch check is
	// strict (see checkMarkerEpoch). 0 for this node's own coordinator's markers.
	transactionVersion int8
}

func (b *Broker) writeMarkers(ctx context.Context, m txnMarker, parts []TopicPartition) map[TopicPartition]error {
	errs := map[TopicPartition]error{}
	type written struct {
		tp  TopicPartition
		p   *partition
		end int64
	}
	var done []written
	for _, tp := range parts {
		p := partitionOf(b.topics.get(tp.Topic), tp.Partition)
		if p == nil {
			continue
		}
		if tp.Topic == shareGroupStateTopic {
			// KIP-1289: the share-state store resolves the transaction's staged
			// acknowledgements at the marker's position in the log (durable before the
			// marker is answered).
			if err := b.applyShareStateTxnMarker(ctx, p, m); err != nil {
				errs[tp] = err
			}
			continue
		}
		end, err := p.appendMarker(m, b.now().UnixMilli())
		if err != nil {
			errs[tp] = err
			continue
		}
		done = append(done, written{tp, p, end})
	}
	for _, w := range done {
		if err := b.makeDurable(w.p, w.end); err != nil {
			errs[w.tp] = err
			continue
		}
		if fn := b.markerListener(w.p.topic.name); fn != nil {
			fn(w.p.index, m.pid, m.commit)
		}
	}
	return errs
}

// markerListener returns the coordinator callback for markers on an internal topic.
func (b *Broker) markerListener(topic string) func(partition int32, pid int64, commit bool) {
	if topic == offsetsTopic {
		if fn := b.onOffsetsMarker.Load(); fn != nil {
			return *fn
		}
	}
	return nil
}

// appendMarker writes one control batch and closes the producer's transaction on this
// partition. It returns the offset after the marker.
func (p *partition) appendMarker(m txnMarker, nowMs int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkMarkerEpoch(m); err != nil {
		return 0, err
	}
	pid, epoch, commit, coordinatorEpoch := m.pid, m.epoch, m.commit, m.coordinatorEpoch
	if err := p.producers.CheckMarker(pid, epoch, coordinatorEpoch); err != nil {
		return 0, kerrWrap(producerstate.KafkaCode(err), err)
	}
	raw := batch.ControlBatch(pid, epoch, commit, coordinatorEpoch, nowMs)
	batch.SetLeaderEpoch(raw, p.epoch.Load())
	first, _, err := p.log.Append([][]byte{raw})
	if err != nil {
		return 0, err
	}
	if done, ok := p.producers.CompleteTxn(pid, epoch, commit, coordinatorEpoch, first, nowMs); ok {
		p.noteCompleted(done)
	}
	return first + 1, nil
}

// checkMarkerEpoch is Kafka 4.4's stricter epoch rule for markers of transaction version 2
// (ProducerAppendInfo.checkProducerEpoch): the coordinator bumps the epoch before it writes
// them, so a marker at or below the producer's epoch here is late or duplicated
// (INVALID_PRODUCER_EPOCH), except the retry of one already written: the same epoch with
// no transaction open (KAFKA-19999). Older versions keep CheckMarker's "not below" rule.
// Called with p.mu held.
func (p *partition) checkMarkerEpoch(m txnMarker) error {
	if m.transactionVersion < 2 {
		return nil
	}
	e, ok := p.producers.Producer(m.pid)
	if !ok || m.epoch > e.Epoch {
		return nil
	}
	if m.epoch == e.Epoch && (e.CurrentTxnFirstOffset == producerstate.NoOffset || m.epoch == math.MaxInt16) {
		return nil
	}
	return kerrWrap(kerr.InvalidProducerEpoch.Code, fmt.Errorf("marker epoch %d of producer %d is at or below the last seen epoch %d (transaction version %d)",
		m.epoch, m.pid, e.Epoch, m.transactionVersion))
}

// checkTransactional decides whether a transactional batch may be appended: the producer
// must be in an ongoing transaction that includes the partition, or (transaction version 2)
// the coordinator adds it (KIP-890).
func (b *Broker) checkTransactional(ctx context.Context, transactionalID *string, h kmsg.RecordBatch, t *topic, partition int32, version int16) (int16, string) {
	v := b.txn.Load()
	if v == nil {
		// No transaction coordinator has run, so no producer holds a transactional id.
		return kerr.InvalidProducerIDMapping.Code, "no transaction is ongoing for this producer"
	}
	if transactionalID == nil || *transactionalID == "" {
		return kerr.InvalidRequest.Code, "transactional batches need the request's transactional id"
	}
	if h.ProducerID < 0 {
		return kerr.InvalidRecord.Code, "transactional batch without a producer id"
	}
	add := version >= 12 && b.transactionVersion() >= 2
	if code := txn.LegacyProduceError(v.VerifyOrAdd(ctx, *transactionalID, h.ProducerID, h.ProducerEpoch, t.name, partition, add), version); code != 0 {
		return code, "transaction verification failed"
	}
	return 0, ""
}

// transactionVersion is the finalized transaction.version feature level. The coordinator
// starts on first use, but the level is a property of the broker and is advertised from
// the first ApiVersions, as clients choose their transaction protocol from it.
func (b *Broker) transactionVersion() int16 { return transactionVersionLevel }

func (b *Broker) setOffsetsMarkerListener(fn func(partition int32, pid int64, commit bool)) {
	b.onOffsetsMarker.Store(&fn)
}

// txnVerifier checks transactional produce requests against the transaction coordinator.
type txnVerifier interface {
	VerifyOrAdd(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32, add bool) int16
}

// txnVerifierBox lets the verifier be published atomically once the coordinator starts.
type txnVerifierBox struct{ txnVerifier }

// applyShareStateMarker writes a marker on a __share_group_state partition through the
// share stack, which appends it (durably) and resolves the staged records in the same step.
func (b *Broker) applyShareStateMarker(ctx context.Context, p *partition, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	return b.applyShareStateTxnMarker(ctx, p, txnMarker{pid: pid, epoch: epoch, commit: commit, coordinatorEpoch: coordinatorEpoch})
}

func (b *Broker) applyShareStateTxnMarker(ctx context.Context, p *partition, m txnMarker) error {
	appendMarker := func(ctx context.Context) error {
		end, err := p.appendMarker(m, b.now().UnixMilli())
		if err != nil {
			return err
		}
		return b.makeDurable(p, end)
	}
	s, err := b.shares()
	if err != nil {
		return err
	}
	return s.fetch.ApplyMarker(ctx, p.index, m.pid, m.epoch, m.commit, appendMarker)
}

// txnShareAckKey is the API key of TxnShareAcknowledge, or -1 when the feature is off.
func (b *Broker) txnShareAckKey() int16 {
	switch k := b.cfg.TxnShareAckKey; {
	case k < 0:
		return -1
	case k == 0:
		return wire.TxnShareAcknowledgeDefaultKey
	default:
		return k
	}
}
