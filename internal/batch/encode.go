package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Header holds the batch header fields a caller of Encode chooses; lengths, counts, the
// CRC, the codec bits and the max timestamp are computed.
type Header struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	// Attributes: timestamp type, transactional and control bits. The codec bits are
	// taken from Encode's codec argument.
	Attributes     int16
	FirstTimestamp int64
	ProducerID     int64 // -1: none
	ProducerEpoch  int16 // -1: none
	BaseSequence   int32 // -1: none
}

// NoProducer returns a Header for a batch without producer id, epoch or sequence.
func NoProducer(baseOffset, firstTimestampMs int64) Header {
	return Header{
		BaseOffset:           baseOffset,
		PartitionLeaderEpoch: -1,
		FirstTimestamp:       firstTimestampMs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
}

// Encode appends a v2 batch holding records to dst. Record i gets offset delta i and its
// length computed; its TimestampDelta64 (or TimestampDelta) is kept, and the batch max
// timestamp is FirstTimestamp plus the largest delta. The records are not modified.
func Encode(dst []byte, h Header, records []kmsg.Record, codec int8) ([]byte, error) {
	if len(records) == 0 {
		return dst, errors.New("batch: Encode needs at least one record")
	}
	if codec < CodecNone || codec > CodecZstd {
		return dst, fmt.Errorf("batch: unknown codec %d", codec)
	}
	var raw, scratch []byte
	maxDelta := int64(0)
	for i := range records {
		r := records[i] // copy: we set Length and OffsetDelta
		r.OffsetDelta = int32(i)
		r.Length = 0
		// Encode with a zero length (a one byte varint), then prefix the real length.
		scratch = r.AppendTo(scratch[:0])
		raw = binary.AppendVarint(raw, int64(len(scratch)-1))
		raw = append(raw, scratch[1:]...)
		d := r.TimestampDelta64
		if d == 0 {
			d = int64(r.TimestampDelta)
		}
		maxDelta = max(maxDelta, d)
	}
	payload := raw
	if codec != CodecNone {
		var err error
		if payload, err = compress.Compress(codec, nil, raw); err != nil {
			return dst, err
		}
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          h.BaseOffset,
		Length:               int32(HeaderSize - LengthPrefix + len(payload)),
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           h.Attributes&^AttrCompressionMask | int16(codec),
		LastOffsetDelta:      int32(len(records) - 1),
		FirstTimestamp:       h.FirstTimestamp,
		MaxTimestamp:         h.FirstTimestamp + maxDelta,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		FirstSequence:        h.BaseSequence,
		NumRecords:           int32(len(records)),
		Records:              payload,
	}
	start := len(dst)
	dst = rb.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+offsetCRC:], crc32.Checksum(dst[start+offsetAttributes:], castagnoli))
	return dst, nil
}

// Control record types (the int16 after the version in a control record's key), as in
// Kafka's ControlRecordType.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ControlBatch returns a transaction marker: a transactional control batch with one
// record whose key is (version 0, type ABORT=0 or COMMIT=1) and whose value is Kafka's
// EndTransactionMarker (version 0, coordinator epoch). Base offset 0 and partition leader
// epoch -1 are for the log to set; base sequence is -1 as in Kafka.
func ControlBatch(pid int64, epoch int16, commit bool, coordinatorEpoch int32, timestampMs int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 2, 4), uint16(typ)) // version 0, type
	value := binary.BigEndian.AppendUint32(make([]byte, 2, 6), uint32(coordinatorEpoch))
	h := Header{
		PartitionLeaderEpoch: -1,
		Attributes:           AttrTransactional | AttrControl,
		FirstTimestamp:       timestampMs,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		BaseSequence:         -1,
	}
	b, err := Encode(nil, h, []kmsg.Record{{Key: key, Value: value}}, CodecNone)
	if err != nil {
		panic("batch: ControlBatch: " + err.Error()) // one record, no codec: cannot fail
	}
	return b
}

// Marker is a decoded transaction marker.
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// ErrNotMarker is returned by ParseMarker for a batch that is not a transaction marker
// (not a control batch, or a control record of another type, e.g. KRaft's LEADER_CHANGE).
var ErrNotMarker = errors.New("batch: not a transaction marker")

// ParseMarker decodes the transaction marker in a parsed control batch. It follows Java's
// ControlRecordType.parse and EndTransactionMarker.deserialize: key at least 4 bytes with
// a non-negative version, value at least 6 bytes; newer versions are read as version 0.
func ParseMarker(h *kmsg.RecordBatch) (Marker, error) {
	if h.Attributes&AttrControl == 0 || h.NumRecords != 1 {
		return Marker{}, ErrNotMarker
	}
	recs, err := DecodeRecords(h, 1<<10)
	if err != nil {
		return Marker{}, err
	}
	k, v := recs[0].Key, recs[0].Value
	if len(k) < 4 || int16(binary.BigEndian.Uint16(k)) < 0 {
		return Marker{}, fmt.Errorf("%w: control record key %x", ErrCorrupt, k)
	}
	typ := int16(binary.BigEndian.Uint16(k[2:]))
	if typ != ControlAbort && typ != ControlCommit {
		return Marker{}, ErrNotMarker
	}
	if len(v) < 6 || int16(binary.BigEndian.Uint16(v)) < 0 {
		return Marker{}, fmt.Errorf("%w: end transaction marker value %x", ErrCorrupt, v)
	}
	return Marker{Commit: typ == ControlCommit, CoordinatorEpoch: int32(binary.BigEndian.Uint32(v[2:]))}, nil
}
