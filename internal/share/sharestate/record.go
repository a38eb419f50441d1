package sharestate

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Record types: the int16 that starts every __share_group_state record key (Kafka's
// CoordinatorRecordSerde writes the record type where other serdes write a key version;
// ShareCoordinator.SHARE_SNAPSHOT_RECORD_KEY_VERSION and SHARE_UPDATE_RECORD_KEY_VERSION).
const (
	recordTypeSnapshot int16 = 0
	recordTypeUpdate   int16 = 1
)

// valueVersion is the only version of ShareSnapshotValue and ShareUpdateValue (Kafka 4.4).
const valueVersion int16 = 0

// Tags of the exactq extension to the StateBatch struct of both value schemas (KIP-1289
// staging; kip-1289.md §4.5 recommends tagged fields so readers that do not know them,
// Kafka's included, skip them). They are written only for TX_PENDING batches.
const (
	tagStagedProducerID    = 0 // int64
	tagStagedProducerEpoch = 1 // int16
	tagStagedAckType       = 2 // int8
	tagStagedCommitState   = 3 // int8
	tagStagedAbortState    = 4 // int8
)

// Tag of DeliveryCompleteCount in both values (KIP-1226, Kafka 4.2+), default -1.
const tagDeliveryCompleteCount = 0

// complete reports a short read or trailing bytes.
func complete(r *kbin.Reader, what string) error {
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %s: %v", errBadRecord, what, err)
	}
	if len(r.Src) != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", errBadRecord, what, len(r.Src))
	}
	return nil
}

// maxDecodeBatches bounds the state batches one decoded value may claim before any is read,
// so a corrupt length cannot make the decoder allocate gigabytes. A batch is at least 20
// bytes on disk, so a real value never gets near it.
const maxDecodeBatches = 1 << 20

// recordKey is the key of a ShareSnapshot or ShareUpdate record: the record type and the
// non-flexible v0 key message {GroupId string, TopicId uuid, Partition int32}.
type recordKey struct {
	Type int16
	Key  Key
}

// snapshotValue is ShareSnapshotValue v0 (flexible).
type snapshotValue struct {
	SnapshotEpoch         int32
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32 // tag 0, default -1
	CreateTimestamp       int64
	WriteTimestamp        int64
	Batches               []StateBatch
}

// updateValue is ShareUpdateValue v0 (flexible). StartOffset -1 and LeaderEpoch -1 mean
// unchanged; DeliveryCompleteCount -1 means unchanged.
type updateValue struct {
	SnapshotEpoch         int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32 // tag 0, default -1
	Batches               []StateBatch
}

func encodeKey(dst []byte, k recordKey) []byte {
	dst = kbin.AppendInt16(dst, k.Type)
	dst = kbin.AppendString(dst, k.Key.GroupID)
	dst = kbin.AppendUuid(dst, k.Key.TopicID)
	return kbin.AppendInt32(dst, k.Key.Partition)
}

var errBadRecord = errors.New("sharestate: malformed __share_group_state record")

func decodeKey(b []byte) (recordKey, error) {
	r := kbin.Reader{Src: b}
	var k recordKey
	k.Type = r.Int16()
	if k.Type != recordTypeSnapshot && k.Type != recordTypeUpdate {
		if !r.Ok() {
			return k, fmt.Errorf("%w: short key", errBadRecord)
		}
		return k, fmt.Errorf("%w: unknown record type %d", errBadRecord, k.Type)
	}
	k.Key.GroupID = r.String()
	k.Key.TopicID = r.Uuid()
	k.Key.Partition = r.Int32()
	if err := complete(&r, "key"); err != nil {
		return k, err
	}
	return k, nil
}

func encodeSnapshotValue(dst []byte, v *snapshotValue) []byte {
	dst = kbin.AppendInt16(dst, valueVersion)
	dst = kbin.AppendInt32(dst, v.SnapshotEpoch)
	dst = kbin.AppendInt32(dst, v.StateEpoch)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendInt64(dst, v.StartOffset)
	dst = kbin.AppendInt64(dst, v.CreateTimestamp)
	dst = kbin.AppendInt64(dst, v.WriteTimestamp)
	dst = appendBatches(dst, v.Batches)
	return appendDCCTags(dst, v.DeliveryCompleteCount)
}

func encodeUpdateValue(dst []byte, v *updateValue) []byte {
	dst = kbin.AppendInt16(dst, valueVersion)
	dst = kbin.AppendInt32(dst, v.SnapshotEpoch)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendInt64(dst, v.StartOffset)
	dst = appendBatches(dst, v.Batches)
	return appendDCCTags(dst, v.DeliveryCompleteCount)
}

// appendDCCTags writes the value's tagged-field section: DeliveryCompleteCount when it is
// not the default -1.
func appendDCCTags(dst []byte, dcc int32) []byte {
	if dcc == -1 {
		return kbin.AppendUvarint(dst, 0)
	}
	dst = kbin.AppendUvarint(dst, 1)
	dst = kbin.AppendUvarint(dst, tagDeliveryCompleteCount)
	dst = kbin.AppendUvarint(dst, 4)
	return kbin.AppendInt32(dst, dcc)
}

func appendBatches(dst []byte, bs []StateBatch) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(bs))
	for i := range bs {
		b := &bs[i]
		dst = kbin.AppendInt64(dst, b.FirstOffset)
		dst = kbin.AppendInt64(dst, b.LastOffset)
		dst = kbin.AppendInt8(dst, b.DeliveryState)
		dst = kbin.AppendInt16(dst, b.DeliveryCount)
		if b.DeliveryState != StateTxPending {
			dst = kbin.AppendUvarint(dst, 0)
			continue
		}
		dst = kbin.AppendUvarint(dst, 5)
		dst = kbin.AppendUvarint(dst, tagStagedProducerID)
		dst = kbin.AppendUvarint(dst, 8)
		dst = kbin.AppendInt64(dst, b.TxnProducerID)
		dst = kbin.AppendUvarint(dst, tagStagedProducerEpoch)
		dst = kbin.AppendUvarint(dst, 2)
		dst = kbin.AppendInt16(dst, b.TxnProducerEpoch)
		dst = kbin.AppendUvarint(dst, tagStagedAckType)
		dst = kbin.AppendUvarint(dst, 1)
		dst = kbin.AppendInt8(dst, b.TxnAckType)
		dst = kbin.AppendUvarint(dst, tagStagedCommitState)
		dst = kbin.AppendUvarint(dst, 1)
		dst = kbin.AppendInt8(dst, b.TxnCommitState)
		dst = kbin.AppendUvarint(dst, tagStagedAbortState)
		dst = kbin.AppendUvarint(dst, 1)
		dst = kbin.AppendInt8(dst, b.TxnAbortState)
	}
	return dst
}

func decodeSnapshotValue(b []byte) (*snapshotValue, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v != valueVersion {
		return nil, fmt.Errorf("%w: snapshot value version %d", errBadRecord, v)
	}
	v := &snapshotValue{DeliveryCompleteCount: -1}
	v.SnapshotEpoch = r.Int32()
	v.StateEpoch = r.Int32()
	v.LeaderEpoch = r.Int32()
	v.StartOffset = r.Int64()
	v.CreateTimestamp = r.Int64()
	v.WriteTimestamp = r.Int64()
	var err error
	if v.Batches, err = readBatches(&r); err != nil {
		return nil, err
	}
	if v.DeliveryCompleteCount, err = readDCCTags(&r); err != nil {
		return nil, err
	}
	if err := complete(&r, "snapshot value"); err != nil {
		return nil, err
	}
	return v, nil
}

func decodeUpdateValue(b []byte) (*updateValue, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v != valueVersion {
		return nil, fmt.Errorf("%w: update value version %d", errBadRecord, v)
	}
	v := &updateValue{DeliveryCompleteCount: -1}
	v.SnapshotEpoch = r.Int32()
	v.LeaderEpoch = r.Int32()
	v.StartOffset = r.Int64()
	var err error
	if v.Batches, err = readBatches(&r); err != nil {
		return nil, err
	}
	if v.DeliveryCompleteCount, err = readDCCTags(&r); err != nil {
		return nil, err
	}
	if err := complete(&r, "update value"); err != nil {
		return nil, err
	}
	return v, nil
}

func readBatches(r *kbin.Reader) ([]StateBatch, error) {
	n := r.CompactArrayLen()
	if n < 0 || n > maxDecodeBatches || !r.Ok() {
		return nil, fmt.Errorf("%w: state batch count %d", errBadRecord, n)
	}
	if int(n)*20 > len(r.Src) { // 19 fixed bytes + 1 tag count each
		return nil, fmt.Errorf("%w: %d state batches in %d bytes", errBadRecord, n, len(r.Src))
	}
	if n == 0 {
		return nil, nil
	}
	bs := make([]StateBatch, n)
	for i := range bs {
		b := &bs[i]
		b.FirstOffset = r.Int64()
		b.LastOffset = r.Int64()
		b.DeliveryState = r.Int8()
		b.DeliveryCount = r.Int16()
		b.TxnProducerID, b.TxnProducerEpoch, b.TxnAckType = -1, -1, -1
		b.TxnCommitState, b.TxnAbortState = -1, -1
		if err := readTags(r, func(tag uint32, f *kbin.Reader) {
			switch tag {
			case tagStagedProducerID:
				b.TxnProducerID = f.Int64()
			case tagStagedProducerEpoch:
				b.TxnProducerEpoch = f.Int16()
			case tagStagedAckType:
				b.TxnAckType = f.Int8()
			case tagStagedCommitState:
				b.TxnCommitState = f.Int8()
			case tagStagedAbortState:
				b.TxnAbortState = f.Int8()
			}
		}); err != nil {
			return nil, err
		}
		if b.DeliveryState != StateTxPending {
			b.clearStaged()
		}
	}
	if !r.Ok() {
		return nil, fmt.Errorf("%w: short state batches", errBadRecord)
	}
	return bs, nil
}

func readDCCTags(r *kbin.Reader) (int32, error) {
	dcc := int32(-1)
	err := readTags(r, func(tag uint32, f *kbin.Reader) {
		if tag == tagDeliveryCompleteCount {
			dcc = f.Int32()
		}
	})
	return dcc, err
}

// readTags reads a tagged-field section, handing each field's bytes to fn; unknown tags are
// skipped, as Kafka's generated readers do. A known tag too short for its field is
// malformed.
func readTags(r *kbin.Reader, fn func(tag uint32, field *kbin.Reader)) error {
	n := r.Uvarint()
	if !r.Ok() {
		return fmt.Errorf("%w: short tagged fields", errBadRecord)
	}
	last := int64(-1)
	for range n {
		tag, size := r.Uvarint(), r.Uvarint()
		if !r.Ok() || int64(tag) <= last || uint64(size) > uint64(len(r.Src)) {
			return fmt.Errorf("%w: tagged field", errBadRecord)
		}
		last = int64(tag)
		f := kbin.Reader{Src: r.Span(int(size))}
		fn(tag, &f)
		if !f.Ok() {
			return fmt.Errorf("%w: tagged field %d", errBadRecord, tag)
		}
	}
	return nil
}

// clampDCC converts the API's int64 delivery-complete count to the on-disk int32.
// Callers validate the range first; this only guards the conversion.
func clampDCC(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < -1 {
		return -1
	}
	return int32(v)
}
