package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/exactq/exactq/internal/compress"
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
// Errors: ErrBadRecord (INVALID_RECORD) for malformed records, ErrCorrupt
// (CORRUPT_MESSAGE) for a payload that does not decompress, ErrTooLarge
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
	if err := checkCountFits(h, len(data)); err != nil {
		// Checked before allocating: a header cannot make us allocate more records
		// than its payload could possibly hold.
		return nil, err
	}
	out := make([]kmsg.Record, h.NumRecords)
	r := recordReader{buf: data}
	err = walkRecords(h, &r, func(i int, raw rawRecord) error {
		if err := out[i].ReadFrom(raw.bytes); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrBadRecord, i, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkCountFits refuses a record count that payloadBytes cannot hold.
func checkCountFits(h *kmsg.RecordBatch, payloadBytes int) error {
	if h.NumRecords < 0 || int(h.NumRecords) > payloadBytes/minRecordSize {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrBadRecord, h.NumRecords, payloadBytes)
	}
	return nil
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
	if err != nil {
		return nil, decompressError(err, maxDecompressedBytes)
	}
	return data, nil
}

// decompressError maps an error of package compress onto this package's errors.
func decompressError(err error, maxDecompressedBytes int) error {
	if errors.Is(err, compress.ErrTooLarge) {
		return fmt.Errorf("%w: records decompress to more than %d bytes", ErrTooLarge, maxDecompressedBytes)
	}
	return fmt.Errorf("%w: %v", ErrCorrupt, err)
}

// rawRecord is one record in wire form, found by walkRecords.
type rawRecord struct {
	bytes          []byte // the whole record, length prefix included; nil when streamed
	timestampDelta int64
	offsetDelta    int32
	hasKey         bool
}

// walkRecords checks the framing of every record r yields (the uncompressed payload of h):
// exactly NumRecords records, offset deltas strictly increasing in [0, LastOffsetDelta],
// nothing after the last record. It calls visit for each record and allocates nothing.
//
// These are the rules of Kafka's DefaultRecordBatch.RecordIterator and
// DefaultRecord.readFrom; Kafka throws org.apache.kafka.common.InvalidRecordException for
// each, which a produce answers as INVALID_RECORD: ErrBadRecord here.
func walkRecords(h *kmsg.RecordBatch, r *recordReader, visit func(i int, raw rawRecord) error) error {
	prev := int64(-1)
	for i := 0; i < int(h.NumRecords); i++ {
		raw, err := r.next()
		if err != nil {
			return r.failure(fmt.Errorf("%w: record %d of %d: %v", ErrBadRecord, i, h.NumRecords, err))
		}
		d := int64(raw.offsetDelta)
		if d <= prev || d > int64(h.LastOffsetDelta) {
			return fmt.Errorf("%w: record %d has offset delta %d after %d (last offset delta %d)",
				ErrBadRecord, i, d, prev, h.LastOffsetDelta)
		}
		prev = d
		if visit != nil {
			if err := visit(i, raw); err != nil {
				return err
			}
		}
	}
	if !r.atEnd() {
		return r.failure(fmt.Errorf("%w: bytes left after the %d declared records", ErrBadRecord, h.NumRecords))
	}
	return nil
}

var (
	errVarint    = errors.New("bad varint")
	errShort     = errors.New("record shorter than its fields")
	errLength    = errors.New("record length does not match its fields")
	errNegLength = errors.New("negative length")
)

// recordReader reads a batch's records payload with one parser for two sources: a slice
// (an uncompressed batch, or a payload decompressed whole), read in place, or a
// decompressing stream, read through a fixed window, so that validating a compressed batch
// never holds its decompressed records in memory.
type recordReader struct {
	buf    []byte    // buf[pos:] is read next; with src, a window of fixed capacity
	pos    int       // read position in buf
	base   int64     // stream offset of buf[0]
	src    io.Reader // nil: buf is the whole payload
	srcErr error     // first error src returned; io.EOF at its end
}

// offset is the stream offset of the next byte.
func (r *recordReader) offset() int64 { return r.base + int64(r.pos) }

// fill tries to have n unread bytes in buf, reading from src; it reports whether it does.
func (r *recordReader) fill(n int) bool {
	if len(r.buf)-r.pos >= n {
		return true
	}
	if r.src == nil || r.srcErr != nil {
		return false
	}
	// Move the unread bytes to the front and read behind them.
	unread := copy(r.buf[:cap(r.buf)], r.buf[r.pos:])
	r.base += int64(r.pos)
	r.buf, r.pos = r.buf[:unread], 0
	for len(r.buf) < n && r.srcErr == nil {
		k, err := r.src.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+k]
		if err != nil {
			r.srcErr = err
		} else if k == 0 {
			r.srcErr = io.ErrNoProgress // io.Reader may return 0, nil; a decoder must not forever
		}
	}
	return len(r.buf) >= n
}

// failure returns the source's own error (a payload that does not decompress, or that
// decompresses to more than the limit) if there is one: the records only looked malformed
// because the stream stopped.
func (r *recordReader) failure(framing error) error {
	if r.srcErr != nil && r.srcErr != io.EOF {
		return r.srcErr
	}
	return framing
}

// atEnd reports whether the payload has no bytes left.
func (r *recordReader) atEnd() bool {
	return !r.fill(1) && (r.src == nil || r.srcErr == io.EOF)
}

// varint reads a zigzag varint of at most maxLen bytes. One byte varints (most lengths
// and deltas) take the inlined fast path.
func (r *recordReader) varint(maxLen int) (int64, error) {
	if p := r.pos; p < len(r.buf) && r.buf[p] < 0x80 {
		r.pos = p + 1
		return int64(r.buf[p]>>1) ^ -int64(r.buf[p]&1), nil
	}
	return r.varintSlow(maxLen)
}

func (r *recordReader) varintSlow(maxLen int) (int64, error) {
	if p := r.pos; p+1 < len(r.buf) && r.buf[p+1] < 0x80 { // two bytes
		u := uint64(r.buf[p]&0x7f) | uint64(r.buf[p+1])<<7
		r.pos = p + 2
		return int64(u>>1) ^ -int64(u&1), nil
	}
	if r.src != nil {
		r.fill(binary.MaxVarintLen64)
	}
	v, n := binary.Varint(r.buf[r.pos:])
	switch {
	case n == 0:
		return 0, errShort
	case n < 0 || n > maxLen:
		return 0, errVarint
	}
	r.pos += n
	return v, nil
}

// varint32 reads a zigzag varint that must fit an int32 in at most 5 bytes (Kafka's
// ByteUtils.readVarint).
func (r *recordReader) varint32() (int32, error) {
	v, err := r.varint(5)
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, errVarint
	}
	return int32(v), err
}

// skip moves past n bytes.
func (r *recordReader) skip(n int) error {
	if n <= len(r.buf)-r.pos {
		r.pos += n
		return nil
	}
	for n > 0 {
		if !r.fill(1) {
			return errShort
		}
		k := min(n, len(r.buf)-r.pos)
		r.pos += k
		n -= k
	}
	return nil
}

// bytesField reads a varint length (-1: null) and skips that many bytes, which must end at
// or before end (the record's end offset).
func (r *recordReader) bytesField(end int64) (int32, error) {
	l, err := r.varint32()
	if err != nil {
		return 0, err
	}
	if l < -1 {
		return 0, errNegLength
	}
	if int64(max(l, 0)) > end-r.offset() {
		return 0, errShort
	}
	return l, r.skip(int(max(l, 0)))
}

// next reads one record, checking that its fields exactly fill its declared length, as
// Java's DefaultRecord.readFrom does. A record wholly in buf (every record of a slice, and
// of a stream every record that fits the window) is parsed in place by parseBody; only a
// record larger than the window is parsed field by field from the stream (nextStreamed).
func (r *recordReader) next() (rawRecord, error) {
	start := r.pos
	length, q := varintAt(r.buf, r.pos, 5)
	if q >= 0 && length == int64(int32(length)) {
		r.pos = q
	} else { // not a varint32, or (streamed) cut by the window's end
		l, err := r.varint32()
		if err != nil {
			return rawRecord{}, err
		}
		length = int64(l)
	}
	if length < 0 {
		return rawRecord{}, errNegLength
	}
	n := int(length)
	if n > len(r.buf)-r.pos {
		switch {
		case r.src == nil:
			return rawRecord{}, errShort
		case n > cap(r.buf):
			return r.nextStreamed(r.offset() + int64(n))
		case !r.fill(n):
			return rawRecord{}, errShort
		}
		start = -1 // the window moved
	}
	rec, err := parseBody(r.buf[r.pos : r.pos+n])
	r.pos += n
	if r.src == nil && start >= 0 {
		rec.bytes = r.buf[start:r.pos:r.pos]
	}
	return rec, err
}

// parseBody checks the fields of one record (after its length prefix) that fill body.
// Kafka reads a negative key, value or header value length as null; exactq refuses
// anything below -1, which no client writes and other readers (kmsg) may take differently.
func parseBody(b []byte) (rawRecord, error) {
	var rec rawRecord
	if len(b) < 1 {
		return rec, errShort
	}
	p := 1 // attributes (int8, unused)
	if rec.timestampDelta, p = varintAt(b, p, binary.MaxVarintLen64); p < 0 {
		return rec, errVarint
	}
	od, p := varintAt(b, p, 5)
	if p < 0 || od != int64(int32(od)) {
		return rec, errVarint
	}
	rec.offsetDelta = int32(od)
	keyLen, p, err := bytesAt(b, p)
	if err != nil {
		return rec, err
	}
	rec.hasKey = keyLen >= 0
	if _, p, err = bytesAt(b, p); err != nil { // value
		return rec, err
	}
	numHeaders, p := varintAt(b, p, 5)
	// Each header takes at least two bytes, so a count cannot claim more than that.
	if p < 0 || numHeaders < 0 || numHeaders > int64(len(b)-p)/2 {
		return rec, errShort
	}
	for range numHeaders {
		var kl int64
		if kl, p, err = bytesAt(b, p); err != nil {
			return rec, err
		}
		if kl < 0 { // header keys are non-null strings
			return rec, errNegLength
		}
		if _, p, err = bytesAt(b, p); err != nil {
			return rec, err
		}
	}
	if p != len(b) {
		return rec, errLength
	}
	return rec, nil
}

// varintAt reads the zigzag varint of at most maxLen bytes at b[p:]; it returns the
// position after it, or -1 if there is none.
func varintAt(b []byte, p, maxLen int) (int64, int) {
	if p < len(b) && b[p] < 0x80 { // one byte: most lengths and deltas
		return int64(b[p]>>1) ^ -int64(b[p]&1), p + 1
	}
	return varintAtSlow(b, p, maxLen)
}

func varintAtSlow(b []byte, p, maxLen int) (int64, int) {
	if p+1 < len(b) && b[p+1] < 0x80 { // two bytes: record lengths, values up to 8 KiB
		u := uint64(b[p]&0x7f) | uint64(b[p+1])<<7
		return int64(u>>1) ^ -int64(u&1), p + 2
	}
	if p >= len(b) {
		return 0, -1
	}
	v, n := binary.Varint(b[p:])
	if n <= 0 || n > maxLen {
		return 0, -1
	}
	return v, p + n
}

// bytesAt reads a varint32 length (-1: null) at b[p:] and steps over that many bytes.
func bytesAt(b []byte, p int) (int64, int, error) {
	l, q := varintAt(b, p, 5)
	switch {
	case q < 0 || l != int64(int32(l)):
		return 0, 0, errVarint
	case l < -1:
		return 0, 0, errNegLength
	case l > int64(len(b)-q):
		return 0, 0, errShort
	}
	return l, q + int(max(l, 0)), nil
}

// nextStreamed reads the fields of a record larger than the window from the stream, with
// the rules of parseBody; end is the stream offset where the record ends.
func (r *recordReader) nextStreamed(end int64) (rawRecord, error) {
	var rec rawRecord
	if err := r.skip(1); err != nil { // attributes
		return rec, err
	}
	var err error
	if rec.timestampDelta, err = r.varint(binary.MaxVarintLen64); err != nil {
		return rec, err
	}
	od, err := r.varint32()
	if err != nil {
		return rec, err
	}
	rec.offsetDelta = od
	keyLen, err := r.bytesField(end)
	if err != nil {
		return rec, err
	}
	rec.hasKey = keyLen >= 0
	if _, err := r.bytesField(end); err != nil { // value
		return rec, err
	}
	numHeaders, err := r.varint32()
	if err != nil {
		return rec, err
	}
	if numHeaders < 0 || int64(numHeaders) > (end-r.offset())/2 {
		return rec, errShort
	}
	for range numHeaders {
		kl, err := r.bytesField(end)
		if err != nil {
			return rec, err
		}
		if kl < 0 {
			return rec, errNegLength
		}
		if _, err := r.bytesField(end); err != nil {
			return rec, err
		}
	}
	if r.offset() != end {
		return rec, errLength
	}
	return rec, nil
}
