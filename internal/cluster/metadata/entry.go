package metadata

import (
	"errors"
	"fmt"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxEntryBytes bounds one raft entry's data: a metadata batch larger than this is refused
// when encoded, and the controller splits requests (at topic boundaries) to stay under it.
const MaxEntryBytes = 8 << 20

// MaxCheckpointBytes bounds a checkpoint's data: it travels in one raft message, and the
// inter-node frame limit (socket.request.max.bytes) is 100 MiB.
const MaxCheckpointBytes = 100 << 20

// minRecordBytes is the smallest framed record in a batch (length, attributes, deltas, key
// and value lengths, headers count, the value's frame): a batch of n bytes cannot hold more
// than n/minRecordBytes records, so a damaged count cannot make a decoder allocate for
// millions of records.
const minRecordBytes = 8

var (
	ErrEntryTooLarge = errors.New("metadata: entry larger than 8 MiB")
	ErrEntryDamaged  = errors.New("metadata: entry is not a metadata batch")
)

// EncodeEntry is the data of one raft entry carrying records: a Kafka v2 record batch
// (CRC-32C, uncompressed) whose record values are KRaft-framed metadata records, the way
// __cluster_metadata holds them. appendMillis is the batch's timestamp (when the
// controller wrote it); it is informational, nothing replays by it.
func EncodeEntry(appendMillis int64, records []wire.MetadataRecord) ([]byte, error) {
	return encodeBatch(appendMillis, records, MaxEntryBytes)
}

// DecodeEntry reads EncodeEntry's data back. Anything else (a damaged batch, a record
// that is not a known metadata record) is an error wrapping ErrEntryDamaged; it never
// panics (FuzzDecodeEntry).
func DecodeEntry(data []byte) ([]wire.MetadataRecord, error) {
	if len(data) > MaxEntryBytes {
		return nil, ErrEntryTooLarge
	}
	return decodeBatch(data)
}

func decodeBatch(data []byte) ([]wire.MetadataRecord, error) {
	h, err := batch.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEntryDamaged, err)
	}
	// The header fields the CRC does not cover are fixed by EncodeEntry; checking them
	// means any damaged byte is refused.
	if h.FirstOffset != 0 || h.PartitionLeaderEpoch != -1 || h.Attributes&batch.AttrControl != 0 || h.NumRecords <= 0 || int(h.NumRecords) > len(data)/minRecordBytes {
		return nil, fmt.Errorf("%w: base offset %d, epoch %d, attributes %#x, %d records", ErrEntryDamaged,
			h.FirstOffset, h.PartitionLeaderEpoch, h.Attributes, h.NumRecords)
	}
	rs, err := batch.DecodeRecords(&h, len(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEntryDamaged, err)
	}
	out := make([]wire.MetadataRecord, len(rs))
	for i, r := range rs {
		if out[i], err = wire.ReadMetadataRecord(r.Value, false); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrEntryDamaged, i, err)
		}
	}
	return out, nil
}

// Machine applies the metadata log to images, the quorum loop's state machine: states are
// *Image, deltas *Delta, and a checkpoint is the image's records as one entry-shaped batch.
type Machine struct{}

func (Machine) Empty() any { return Empty() }

// Apply decodes an entry and applies it. An error stops the quorum loop (a committed entry
// that does not apply means the nodes' images would differ), so the controller validates
// every batch against its latest image before proposing it.
func (Machine) Apply(state any, index uint64, data []byte) (any, any, error) {
	recs, err := DecodeEntry(data)
	if err != nil {
		return nil, nil, fmt.Errorf("entry %d: %w", index, err)
	}
	im, d, err := ApplyEntry(state.(*Image), index, recs)
	if err != nil {
		return nil, nil, fmt.Errorf("entry %d: %w", index, err)
	}
	return im, d, nil
}

// Encode is a checkpoint's data: the image's records. An empty image is no records, which
// no entry can be, so it encodes as nothing.
func (Machine) Encode(state any) ([]byte, error) {
	recs := state.(*Image).Records()
	if len(recs) == 0 {
		return nil, nil
	}
	return encodeCheckpoint(recs)
}

func (Machine) Decode(data []byte) (any, error) {
	if len(data) == 0 {
		return Empty(), nil
	}
	if len(data) > MaxCheckpointBytes {
		return nil, fmt.Errorf("metadata: checkpoint of %d bytes, the bound is %d", len(data), MaxCheckpointBytes)
	}
	recs, err := decodeBatch(data)
	if err != nil {
		return nil, err
	}
	return Replay(recs)
}

// encodeCheckpoint is EncodeEntry with the checkpoint's bound: it holds the whole image,
// which may exceed one entry; larger than the frame limit is refused loudly, never cut.
func encodeCheckpoint(records []wire.MetadataRecord) ([]byte, error) {
	data, err := encodeBatch(0, records, MaxCheckpointBytes)
	if errors.Is(err, ErrEntryTooLarge) {
		return nil, fmt.Errorf("metadata: the image's checkpoint exceeds %d bytes", MaxCheckpointBytes)
	}
	return data, err
}

func encodeBatch(appendMillis int64, records []wire.MetadataRecord, maxBytes int) ([]byte, error) {
	if len(records) == 0 {
		return nil, errors.New("metadata: an entry needs at least one record")
	}
	rs := make([]kmsg.Record, len(records))
	size := 0
	for i, r := range records {
		rs[i] = kmsg.Record{Value: wire.AppendMetadataRecord(nil, r)}
		if size += len(rs[i].Value); size > maxBytes {
			return nil, ErrEntryTooLarge
		}
	}
	data, err := batch.Encode(nil, batch.NoProducer(0, appendMillis), rs, batch.CodecNone)
	if err != nil {
		return nil, err
	}
	if len(data) > maxBytes {
		return nil, ErrEntryTooLarge
	}
	return data, nil
}
