// Package batch validates and inspects Kafka record batches (magic v2) in their wire form.
//
// exactq stores batches exactly as producers sent them: the broker validates a batch, sets
// its base offset and appends the bytes. The one exception is a topic whose
// compression.type names another codec: Recompress re-encodes the records' bytes into it,
// keeping every record and header field. The header is decoded with kmsg.RecordBatch,
// which slices the records instead of copying them.
package batch

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Layout of the v2 batch header, in bytes from the start of the batch.
const (
	offsetBaseOffset   = 0
	offsetLength       = 8  // int32: bytes after this field
	offsetLeaderEpoch  = 12 // int32
	offsetMagic        = 16 // int8
	offsetCRC          = 17 // uint32, CRC-32C of everything from attributes on
	offsetAttributes   = 21
	offsetMaxTimestamp = 35 // int64

	// HeaderSize is the size of a v2 batch header, records excluded.
	HeaderSize = 61
	// LengthPrefix is the part of the header before and including the length field.
	LengthPrefix = 12
)

// Attribute bits.
const (
	AttrCompressionMask = 0x07
	AttrTimestampType   = 0x08 // 1 = LogAppendTime
	AttrTransactional   = 0x10
	AttrControl         = 0x20
)

// Compression codecs, as stored in the low attribute bits.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// Errors, each mapping to one Kafka error code (see package kerr in franz-go).
var (
	ErrCorrupt      = errors.New("batch: corrupt record batch")        // CORRUPT_MESSAGE
	ErrCRC          = errors.New("batch: CRC mismatch")                // CORRUPT_MESSAGE
	ErrMagic        = errors.New("batch: unsupported magic (not v2)")  // UNSUPPORTED_FOR_MESSAGE_FORMAT
	ErrInvalidBatch = errors.New("batch: invalid record batch header") // INVALID_RECORD
	ErrTruncated    = errors.New("batch: truncated record batch")      // CORRUPT_MESSAGE
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Size returns the total size of the batch starting at b[0], read from its length field, or
// ErrTruncated if b is too short to hold even the length field.
func Size(b []byte) (int, error) {
	if len(b) < LengthPrefix {
		return 0, ErrTruncated
	}
	n := int32(binary.BigEndian.Uint32(b[offsetLength:]))
	if n < HeaderSize-LengthPrefix {
		return 0, ErrCorrupt
	}
	return LengthPrefix + int(n), nil
}

// Split cuts a concatenation of batches (a produce request's records field) into batches.
// It fails on a trailing partial batch: a produce request must carry whole batches.
func Split(records []byte) ([][]byte, error) {
	var out [][]byte
	for len(records) > 0 {
		n, err := Size(records)
		if err != nil {
			return nil, err
		}
		if n > len(records) {
			return nil, ErrTruncated
		}
		out = append(out, records[:n:n])
		records = records[n:]
	}
	return out, nil
}

// Parse decodes the header of exactly one batch and checks its magic, CRC and header
// sanity. The returned Records field aliases b.
func Parse(b []byte) (kmsg.RecordBatch, error) {
	var h kmsg.RecordBatch
	n, err := Size(b)
	if err != nil {
		return h, err
	}
	if n != len(b) {
		return h, ErrTruncated
	}
	if b[offsetMagic] != 2 {
		return h, ErrMagic
	}
	if err := h.ReadFrom(b); err != nil {
		return h, ErrCorrupt
	}
	if !CRCValid(b) {
		return h, ErrCRC
	}
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 || (h.Attributes&AttrControl == 0 && h.NumRecords == 0) {
		return h, ErrInvalidBatch
	}
	if h.NumRecords > 0 && h.NumRecords-1 != h.LastOffsetDelta && h.Attributes&AttrCompressionMask == CodecNone {
		// Uncompressed batches from every client have dense offsets; a gap means the
		// producer is broken or the bytes are damaged.
		return h, ErrInvalidBatch
	}
	return h, nil
}

// CRCValid reports whether the CRC-32C stored in the header matches the batch contents.
func CRCValid(b []byte) bool {
	if len(b) < HeaderSize {
		return false
	}
	return binary.BigEndian.Uint32(b[offsetCRC:]) == crc32.Checksum(b[offsetAttributes:], castagnoli)
}

// UpdateCRC recomputes the CRC after the broker changed a CRC-covered field (the max
// timestamp for LogAppendTime topics).
func UpdateCRC(b []byte) {
	binary.BigEndian.PutUint32(b[offsetCRC:], crc32.Checksum(b[offsetAttributes:], castagnoli))
}

// SetBaseOffset writes the base offset; it is outside the CRC, so the CRC stays valid.
func SetBaseOffset(b []byte, base int64) {
	binary.BigEndian.PutUint64(b[offsetBaseOffset:], uint64(base))
}

// BaseOffset reads the base offset.
func BaseOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[offsetBaseOffset:])) }

// SetLeaderEpoch writes the partition leader epoch (outside the CRC).
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offsetLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime stamps a batch of a LogAppendTime topic: the timestamp type bit and the
// max timestamp are both CRC-covered, so the CRC is recomputed.
func SetLogAppendTime(b []byte, nowMs int64) {
	attrs := binary.BigEndian.Uint16(b[offsetAttributes:])
	binary.BigEndian.PutUint16(b[offsetAttributes:], attrs|AttrTimestampType)
	binary.BigEndian.PutUint64(b[offsetMaxTimestamp:], uint64(nowMs))
	UpdateCRC(b)
}
