package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/exactq/exactq/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxDecompressedBytes bounds the decompressed records of one batch when the caller
// sets no limit.
const DefaultMaxDecompressedBytes = compress.DefaultMaxBytes

// minRecordSize is the smallest encoding of a v2 record: length, attributes, timestamp
// delta, offset delta, key length, value length and header count, one byte each.
const minRecordSize = 7

// Records decompresses and decodes every record of one batch (b as accepted by Parse).
// Keys, values and header values alias b for an uncompressed batch and a fresh buffer for
// a compressed one. It checks that the batch holds exactly NumRecords records filling the
// payload, with offset deltas strictly increasing in [0, LastOffsetDelta] (compaction
// leaves gaps, so dense deltas are not required here; Validate requires them).
//
// Errors: ErrCorrupt (CORRUPT_MESSAGE) for anything malformed, ErrTooLarge
// (MESSAGE_TOO_LARGE) if the records decompress to more than DefaultMaxDecompressedBytes,
// plus Parse's errors.
func Records(b []byte) ([]kmsg.Record, error) {
	return RecordsLimit(b, DefaultMaxDecompressedBytes)
}

// RecordsLimit is Records with an explicit bound on the decompressed size.
func RecordsLimit(b []byte, maxDecompressedBytes int) ([]kmsg.Record, error) {
	h, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return DecodeRecords(&h, maxDecompressedBytes)
}

// DecodeRecords decodes the records of an already parsed batch header (h.Records holds the
// possibly compressed payload).
func DecodeRecords(h *kmsg.RecordBatch, maxDecompressedBytes int) ([]kmsg.Record, error) {
	data, err := payload(nil, h, maxDecompressedBytes)
	if err != nil {
		return nil, err
	}
	if h.NumRecords < 0 || int(h.NumRecords) > len(data)/minRecordSize {
		// Checked before allocating: a header cannot make us allocate more records
		// than its payload could possibly hold.
		return nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, h.NumRecords, len(data))
	}
	out := make([]kmsg.Record, h.NumRecords)
	err = walkRecords(h, data, func(i int, raw rawRecord) error {
		if err := out[i].ReadFrom(raw.bytes); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// payload returns the uncompressed records of h, decompressing into dst's spare capacity
// when h is compressed.
func payload(dst []byte, h *kmsg.RecordBatch, maxDecompressedBytes int) ([]byte, error) {
	codec := int8(h.Attributes & AttrCompressionMask)
	if codec > CodecZstd {
		return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
	}
	if codec == CodecNone {
		return h.Records, nil
	}
	if maxDecompressedBytes <= 0 {
		maxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	data, err := compress.AppendDecompress(dst, codec, h.Records, maxDecompressedBytes)
	switch {
	case errors.Is(err, compress.ErrTooLarge):
		return nil, fmt.Errorf("%w: records decompress to more than %d bytes", ErrTooLarge, maxDecompressedBytes)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return data, nil
}

// rawRecord is one record in wire form, found by walkRecords.
type rawRecord struct {
	bytes       []byte // the whole record, length prefix included
	offsetDelta int32
	hasKey      bool
}

// walkRecords checks the framing of every record in data (the uncompressed payload of h)
// and calls visit for each. It allocates nothing.
func walkRecords(h *kmsg.RecordBatch, data []byte, visit func(i int, raw rawRecord) error) error {
	prev := int64(-1)
	for i := 0; i < int(h.NumRecords); i++ {
		raw, rest, err := nextRecord(data)
		if err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		d := int64(raw.offsetDelta)
		if d <= prev || d > int64(h.LastOffsetDelta) {
			return fmt.Errorf("%w: record %d has offset delta %d after %d (last offset delta %d)",
				ErrCorrupt, i, d, prev, h.LastOffsetDelta)
		}
		prev = d
		if visit != nil {
			if err := visit(i, raw); err != nil {
				return err
			}
		}
		data = rest
	}
	if len(data) != 0 {
		return fmt.Errorf("%w: %d bytes after the %d declared records", ErrCorrupt, len(data), h.NumRecords)
	}
	return nil
}

var (
	errVarint    = errors.New("bad varint")
	errShort     = errors.New("record shorter than its fields")
	errLength    = errors.New("record length does not match its fields")
	errNegLength = errors.New("negative length")
)

// nextRecord frames the first record of data, checking that its fields exactly fill its
// declared length, as Java's DefaultRecord.readFrom does.
func nextRecord(data []byte) (rawRecord, []byte, error) {
	var r rawRecord
	length, n, err := varint32(data)
	if err != nil {
		return r, nil, err
	}
	if length < 0 {
		return r, nil, errNegLength
	}
	if int64(length) > int64(len(data)-n) {
		return r, nil, errShort
	}
	end := n + int(length)
	body := data[n:end]
	// attributes (int8, unused), timestamp delta (varlong), offset delta (varint)
	if len(body) < 1 {
		return r, nil, errShort
	}
	p := 1
	if _, m := binary.Varint(body[p:]); m <= 0 {
		return r, nil, errVarint
	} else {
		p += m
	}
	od, m, err := varint32(body[p:])
	if err != nil {
		return r, nil, err
	}
	p += m
	r.offsetDelta = od
	// key, value: varint length (-1 = null) then bytes
	keyLen := int32(0)
	for field := 0; field < 2; field++ {
		l, m, err := varint32(body[p:])
		if err != nil {
			return r, nil, err
		}
		p += m
		if field == 0 {
			keyLen = l
		}
		if l < -1 {
			return r, nil, errNegLength
		}
		if l > 0 {
			if int64(l) > int64(len(body)-p) {
				return r, nil, errShort
			}
			p += int(l)
		}
	}
	r.hasKey = keyLen >= 0
	nh, m, err := varint32(body[p:])
	if err != nil {
		return r, nil, err
	}
	p += m
	if nh < 0 || int64(nh) > int64(len(body)-p)/2 { // each header takes at least two bytes
		return r, nil, errShort
	}
	for j := int32(0); j < nh; j++ {
		kl, m, err := varint32(body[p:])
		if err != nil {
			return r, nil, err
		}
		p += m
		if kl < 0 { // header keys are non-null strings
			return r, nil, errNegLength
		}
		if int64(kl) > int64(len(body)-p) {
			return r, nil, errShort
		}
		p += int(kl)
		vl, m, err := varint32(body[p:])
		if err != nil {
			return r, nil, err
		}
		p += m
		if vl < -1 {
			return r, nil, errNegLength
		}
		if vl > 0 {
			if int64(vl) > int64(len(body)-p) {
				return r, nil, errShort
			}
			p += int(vl)
		}
	}
	if p != len(body) {
		return r, nil, errLength
	}
	r.bytes = data[:end:end]
	return r, data[end:], nil
}

// varint32 reads a zigzag varint that must fit an int32 in at most 5 bytes (Kafka's
// ByteUtils.readVarint).
func varint32(b []byte) (int32, int, error) {
	v, n := binary.Varint(b)
	if n <= 0 || n > 5 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, 0, errVarint
	}
	return int32(v), n, nil
}
