package batch

import (
	"fmt"

	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Recompress re-encodes a validated batch (h parsed from it, Validate passed) with codec,
// as Kafka's LogValidator does when a topic's compression.type differs from the batch's
// codec. Only the records' framing changes: every header field (base offset, leader
// epoch, timestamp type, transactional bit, first and max timestamp, producer id, epoch,
// base sequence, record count, last offset delta) and every record byte (offset and
// timestamp deltas, keys, values, headers) are kept; the codec bits, length and CRC are
// recomputed. Control batches are never passed here (Validate refuses them on produce).
//
// Memory: the decompressed records (at most maxDecompressedBytes) and the re-encoded
// payload are held at once; with budget set, both are reserved from it first (ErrBusy
// after its wait), as the produce path's decompression is.
func Recompress(h *kmsg.RecordBatch, codec int8, level, maxDecompressedBytes int, budget *compress.Budget) ([]byte, error) {
	if codec < CodecNone || codec > CodecZstd {
		return nil, fmt.Errorf("batch: unknown codec %d", codec)
	}
	if maxDecompressedBytes <= 0 {
		maxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if budget != nil {
		need := int64(maxDecompressedBytes) // the re-encoded payload
		if h.Attributes&AttrCompressionMask != CodecNone {
			need += int64(maxDecompressedBytes) // the decompressed records
		}
		reserved, err := budget.Acquire(need)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBusy, err)
		}
		defer budget.Release(reserved)
	}
	records, err := payload(nil, h, maxDecompressedBytes)
	if err != nil {
		return nil, err
	}
	out := make([]byte, HeaderSize, HeaderSize+len(records)/2+64)
	if out, err = compress.CompressLevel(codec, level, out, records); err != nil {
		return nil, err
	}
	rb := *h
	rb.Length = int32(len(out) - LengthPrefix)
	rb.Attributes = h.Attributes&^AttrCompressionMask | int16(codec)
	rb.Records = nil
	rb.AppendTo(out[:0]) // the header only: it fits the HeaderSize bytes reserved above
	UpdateCRC(out)
	return out, nil
}
