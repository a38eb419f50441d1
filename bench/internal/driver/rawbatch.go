package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The v2 record batch header (magic 2), as Kafka's DefaultRecordBatch lays it out: the
// offsets of the fields the raw generator reads or checks. The CRC (Castagnoli) covers
// everything from the attributes to the end of the batch.
const (
	batchBaseOffset      = 0
	batchLengthOff       = 8
	batchMagicOff        = 16
	batchCRCOff          = 17
	batchAttributesOff   = 21
	batchLastDeltaOff    = 23
	batchProducerIDOff   = 43
	batchEpochOff        = 51
	batchBaseSeqOff      = 53
	batchNumRecordsOff   = 57
	batchHeaderBytes     = 61
	batchLengthFieldEnds = 12 // batchLength counts the bytes after this
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeBatch is a v2 record batch of n records, each a null key and value, with the CRC
// set: the batch the raw producer sends unchanged for every request (non-idempotent, so
// nothing in it depends on the request). Base offset 0, no producer id, no compression,
// every record stamped ts (ms); the broker assigns the offsets.
func encodeBatch(n int, value []byte, ts int64) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: value}
		// Length is a varint of what follows it: encode once with 0 (one byte) to learn it.
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(n), Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[batchLengthOff:], uint32(len(out)-batchLengthFieldEnds))
	binary.BigEndian.PutUint32(out[batchCRCOff:], crc32Castagnoli(out[batchAttributesOff:]))
	return out
}

// recordSize is the bytes one record of value takes in a batch at the largest offset
// delta a batch of n records has (varints grow with the delta).
func recordSize(value []byte, n int) int {
	r := kmsg.Record{OffsetDelta: int32(n), Value: value}
	r.Length = int32(len(r.AppendTo(nil)))
	return len(r.AppendTo(nil))
}

// batchView is a record batch header read from a Fetch answer without decoding records.
type batchView struct {
	base       int64
	lastDelta  int32
	numRecords int32
	size       int // whole batch, header included
}

func (b batchView) last() int64 { return b.base + int64(b.lastDelta) }

// errPartialBatch: the bytes end inside a batch (a Fetch answer may cut its last batch off).
var errPartialBatch = errors.New("partial batch")

// readBatch reads the batch at the start of buf; verifyCRC also checks its checksum. The
// answer holds magic 2 batches only (what both brokers write for magic 2 producers).
func readBatch(buf []byte, verifyCRC bool) (batchView, error) {
	if len(buf) < batchHeaderBytes {
		return batchView{}, errPartialBatch
	}
	length := int(int32(binary.BigEndian.Uint32(buf[batchLengthOff:])))
	size := length + batchLengthFieldEnds
	if length < batchHeaderBytes-batchLengthFieldEnds {
		return batchView{}, fmt.Errorf("batch length %d is below the v2 header's", length)
	}
	if len(buf) < size {
		return batchView{}, errPartialBatch
	}
	if m := buf[batchMagicOff]; m != 2 {
		return batchView{}, fmt.Errorf("batch magic %d, want 2", m)
	}
	v := batchView{
		base:       int64(binary.BigEndian.Uint64(buf[batchBaseOffset:])),
		lastDelta:  int32(binary.BigEndian.Uint32(buf[batchLastDeltaOff:])),
		numRecords: int32(binary.BigEndian.Uint32(buf[batchNumRecordsOff:])),
		size:       size,
	}
	if verifyCRC {
		want := binary.BigEndian.Uint32(buf[batchCRCOff:])
		if got := crc32Castagnoli(buf[batchAttributesOff:size]); got != want {
			return batchView{}, fmt.Errorf("batch at offset %d: CRC %08x, header says %08x", v.base, got, want)
		}
	}
	return v, nil
}

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// stampProducer sets an encoded batch's producer id and epoch (the CRC is set by
// stampSequence, which every send of an idempotent batch calls).
func stampProducer(b []byte, p producerID) {
	binary.BigEndian.PutUint64(b[batchProducerIDOff:], uint64(p.id))
	binary.BigEndian.PutUint16(b[batchEpochOff:], uint16(p.epoch))
}

// stampSequence sets an encoded batch's base sequence and recomputes its CRC: what an
// idempotent producer rewrites per request.
func stampSequence(b []byte, seq int32) {
	binary.BigEndian.PutUint32(b[batchBaseSeqOff:], uint32(seq))
	binary.BigEndian.PutUint32(b[batchCRCOff:], crc32Castagnoli(b[batchAttributesOff:]))
}
