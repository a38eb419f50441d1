package batch

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/exactq/exactq/internal/compress"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// More errors of the produce path; KafkaCode maps each to its Kafka error code.
var (
	// ErrTooLarge: the batch exceeds max.message.bytes, or its records decompress to more
	// than the limit. MESSAGE_TOO_LARGE (Kafka: RecordTooLargeException from
	// UnifiedLog.analyzeAndValidateRecords). Not retriable, which is what we want for a
	// decompression bomb; CORRUPT_MESSAGE would make Java producers retry it.
	ErrTooLarge = errors.New("batch: record batch too large")
	// ErrControl: a client sent a control batch. INVALID_RECORD (Kafka:
	// LogValidator.validateBatch, "Clients are not allowed to write control records").
	ErrControl = errors.New("batch: clients may not write control batches")
	// ErrTooManyRecords: more records than ValidateOptions.MaxRecords. INVALID_RECORD.
	ErrTooManyRecords = errors.New("batch: too many records in batch")
	// ErrNoKey: a record without key sent to a compacted topic. INVALID_RECORD (Kafka:
	// LogValidator.validateKey).
	ErrNoKey = errors.New("batch: compacted topic record without key")
	// ErrBadRecord: the records of a batch do not parse as its header declares them
	// (framing, count, offset deltas, bytes left over). INVALID_RECORD: Kafka 4.4's
	// DefaultRecord.readFrom and DefaultRecordBatch.RecordIterator throw
	// org.apache.kafka.common.InvalidRecordException, which Errors.forException maps to
	// INVALID_RECORD (87); it is not retriable, and resending the same bytes cannot help.
	ErrBadRecord = errors.New("batch: malformed records")
	// ErrBusy: a compressed batch waited its whole bounded wait for decompression budget
	// (ValidateOptions.Budget). REQUEST_TIMED_OUT: retriable, the producer sends again.
	// Kafka has no such budget (it decompresses as a stream, unbounded in CPU).
	ErrBusy = errors.New("batch: decompression budget exhausted")
	// ErrTimestamp: a record's timestamp is outside the topic's
	// message.timestamp.before/after.max.ms. INVALID_TIMESTAMP (Kafka:
	// LogValidator.validateTimestamp).
	ErrTimestamp = errors.New("batch: record timestamp out of range")
)

// ValidateOptions are the per-topic limits of the produce path. Zero values disable a
// check (MaxDecompressedBytes falls back to DefaultMaxDecompressedBytes).
type ValidateOptions struct {
	// MaxBatchBytes is the topic's max.message.bytes: the largest batch, header
	// included, in its compressed wire form (Kafka compares batch.sizeInBytes()).
	MaxBatchBytes int
	// MaxRecords bounds NumRecords. Kafka has no such limit; exactq's in-flight share
	// state is sized per record, so a broker may want one.
	MaxRecords int
	// MaxDecompressedBytes bounds the decompressed records of a compressed batch.
	MaxDecompressedBytes int
	// Compacted requires every record to have a key (cleanup.policy=compact).
	Compacted bool
	// Timestamps applies the topic's message.timestamp.before/after.max.ms to every
	// record of a CreateTime batch.
	Timestamps TimestampRule
	// Budget, when set, is the broker-wide budget for decompression memory: a compressed
	// batch reserves what its decoder and window may hold before it is decompressed,
	// waiting (bounded) when the budget is taken; ErrBusy after the wait.
	Budget *compress.Budget
}

// TimestampRule is Kafka's LogValidator.validateTimestamp for CreateTime topics: a record
// whose timestamp (the batch's first timestamp plus its delta) is more than BeforeMaxMs
// before NowMs or AfterMaxMs after it is refused (ErrTimestamp); records without a
// timestamp (-1) and LogAppendTime batches are not checked.
type TimestampRule struct {
	Check                          bool
	NowMs, BeforeMaxMs, AfterMaxMs int64
}

// Validate checks one batch a client produced, before it is appended: Parse (length,
// magic, CRC, header sanity), the checks of Kafka's LogValidator.validateBatch for client
// appends, and the framing of every record, compressed or not, as Kafka's
// DefaultRecordBatch iterator and DefaultRecord.readFrom check it (see walkRecords). The
// CRC covers only the bytes as sent, so walking the records is the only way to know a
// consumer can parse them: a batch that passes Validate reads back with exactly
// NumRecords records. It allocates nothing for uncompressed batches.
//
// Divergences from Kafka: Kafka rewrites a compressed batch whose inner offset deltas are
// not 0..n-1 (old clients) and ignores the deltas of an uncompressed one; exactq stores
// batches as received and serves those deltas, so it refuses such a batch (ErrBadRecord).
// No current client (Java, librdkafka, franz-go, sarama) writes one.
func Validate(b []byte, opts ValidateOptions) (kmsg.RecordBatch, error) {
	if opts.MaxBatchBytes > 0 && len(b) > opts.MaxBatchBytes {
		return kmsg.RecordBatch{}, fmt.Errorf("%w: %d bytes, max.message.bytes is %d", ErrTooLarge, len(b), opts.MaxBatchBytes)
	}
	h, err := Parse(b)
	if err != nil {
		return h, err
	}
	if h.Attributes&AttrControl != 0 {
		return h, ErrControl
	}
	// Kafka: "Invalid reported count" and "Inconsistent batch offset range and count".
	if h.NumRecords <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.NumRecords) {
		return h, fmt.Errorf("%w: %d records with last offset delta %d", ErrInvalidBatch, h.NumRecords, h.LastOffsetDelta)
	}
	if opts.MaxRecords > 0 && int(h.NumRecords) > opts.MaxRecords {
		return h, fmt.Errorf("%w: %d > %d", ErrTooManyRecords, h.NumRecords, opts.MaxRecords)
	}
	// Kafka: "Invalid sequence number in record batch with producerId". A transactional
	// batch without a producer id cannot be tied to any transaction either.
	if h.ProducerID >= 0 && h.FirstSequence < 0 {
		return h, fmt.Errorf("%w: sequence %d with producer id %d", ErrInvalidBatch, h.FirstSequence, h.ProducerID)
	}
	if h.ProducerID < 0 && h.Attributes&AttrTransactional != 0 {
		return h, fmt.Errorf("%w: transactional batch without producer id", ErrInvalidBatch)
	}
	return h, validateRecords(&h, opts)
}

// validateRecords walks every record of a header-valid batch: in place for an
// uncompressed one, through a window of streamWindowBytes for a compressed one (the
// decompressed records are never held whole), with the same parser.
func validateRecords(h *kmsg.RecordBatch, opts ValidateOptions) error {
	rules := newRecordRules(h, opts)
	var visit func(int, rawRecord) error
	if !rules.none() {
		visit = rules.check
	}
	codec := int8(h.Attributes & AttrCompressionMask)
	if codec == CodecNone {
		if err := checkCountFits(h, len(h.Records)); err != nil {
			return err
		}
		r := recordReader{buf: h.Records}
		return walkRecords(h, &r, visit)
	}
	if codec > CodecZstd {
		return fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
	}
	limit := opts.MaxDecompressedBytes
	if limit <= 0 {
		limit = DefaultMaxDecompressedBytes
	}
	// A count that records of at most limit bytes cannot reach is refused unread.
	if err := checkCountFits(h, limit); err != nil {
		return err
	}
	if opts.Budget != nil {
		reserved, err := opts.Budget.Acquire(int64(compress.MemoryBound(codec, h.Records, limit) + streamWindowBytes))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBusy, err)
		}
		defer opts.Budget.Release(reserved)
	}
	zr, err := compress.NewReader(codec, h.Records, limit)
	if err != nil {
		return decompressError(err, limit)
	}
	defer zr.Close()
	r := recordReader{buf: nil, src: zr}
	if whole, ok := zr.Whole(); ok {
		r = recordReader{buf: whole} // already decoded whole: read it in place
	} else if len(h.Records) == 0 {
		r = recordReader{} // nothing to decompress: no window (the count check refuses it)
	} else {
		win := streamWindows.Get().(*[]byte)
		defer streamWindows.Put(win)
		r.buf = (*win)[:0]
	}
	err = walkRecords(h, &r, visit)
	if errors.Is(err, compress.ErrTooLarge) || errors.Is(err, compress.ErrCorrupt) || errors.Is(err, io.ErrNoProgress) {
		return decompressError(err, limit)
	}
	return err
}

// streamWindowBytes is the window a compressed batch's records are validated through:
// a record that fits it is parsed in place, a larger one streamed field by field.
const streamWindowBytes = 64 << 10

var streamWindows = sync.Pool{New: func() any {
	b := make([]byte, 0, streamWindowBytes)
	return &b
}}

// recordRules are the per-record checks of Kafka's LogValidator.validateRecord that a
// ValidateOptions asks for.
type recordRules struct {
	compacted    bool
	ts           TimestampRule
	firstStampMs int64
}

func newRecordRules(h *kmsg.RecordBatch, opts ValidateOptions) recordRules {
	r := recordRules{compacted: opts.Compacted, ts: opts.Timestamps, firstStampMs: h.FirstTimestamp}
	r.ts.Check = r.ts.Check && h.Attributes&AttrTimestampType == 0
	return r
}

func (c *recordRules) none() bool { return !c.compacted && !c.ts.Check }

func (c *recordRules) check(i int, r rawRecord) error {
	// validateKey: compacted topics need a key.
	if c.compacted && !r.hasKey {
		return fmt.Errorf("%w: record %d", ErrNoKey, i)
	}
	// validateTimestamp, with Java's wrapping arithmetic.
	if t := c.firstStampMs + r.timestampDelta; c.ts.Check && t != -1 {
		if diff := c.ts.NowMs - t; diff > c.ts.BeforeMaxMs || -diff > c.ts.AfterMaxMs {
			return fmt.Errorf("%w: timestamp %d of record %d is out of range; the timestamp should be within [%d, %d]",
				ErrTimestamp, t, i, c.ts.NowMs-c.ts.BeforeMaxMs, c.ts.NowMs+c.ts.AfterMaxMs)
		}
	}
	return nil
}

// KafkaCode returns the Kafka error code for an error of this package (0 for nil).
// Unknown errors map to UNKNOWN_SERVER_ERROR (-1).
//
//	ErrTooLarge                         MESSAGE_TOO_LARGE (10)
//	ErrCorrupt, ErrCRC, ErrTruncated    CORRUPT_MESSAGE (2)
//	ErrMagic                            UNSUPPORTED_FOR_MESSAGE_FORMAT (43)
//	ErrInvalidBatch, ErrControl,
//	ErrTooManyRecords, ErrNoKey,
//	ErrBadRecord                        INVALID_RECORD (87)
//	ErrBusy                             REQUEST_TIMED_OUT (7)
//	ErrTimestamp                        INVALID_TIMESTAMP (32)
func KafkaCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrCRC), errors.Is(err, ErrTruncated):
		return kerr.CorruptMessage.Code
	case errors.Is(err, ErrBusy):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, ErrTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, ErrMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, ErrInvalidBatch), errors.Is(err, ErrControl),
		errors.Is(err, ErrTooManyRecords), errors.Is(err, ErrNoKey), errors.Is(err, ErrBadRecord):
		return kerr.InvalidRecord.Code
	}
	return kerr.UnknownServerError.Code
}
