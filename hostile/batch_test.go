package hostile

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/compress"
)

// rawBatch is a v2 record batch built field by field, so that a test can make it lie.
type rawBatch struct {
	lastOffsetDelta int32
	numRecords      int32
	codec           int8
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	records         []byte // the records section, before compression
}

// noProducer returns a batch of records without producer id (as acks=1 non-idempotent).
func noProducer(lastOffsetDelta, numRecords int32, records []byte) rawBatch {
	return rawBatch{lastOffsetDelta: lastOffsetDelta, numRecords: numRecords, producerID: -1,
		producerEpoch: -1, baseSequence: -1, records: records}
}

// bytes encodes the batch with a valid CRC.
func (rb rawBatch) bytes(t *testing.T) []byte {
	t.Helper()
	recs, err := compress.Compress(rb.codec, nil, rb.records)
	if err != nil {
		t.Fatal(err)
	}
	return rb.bytesCompressed(t, recs)
}

// bytesCompressed encodes the batch with recs as its (already compressed) records section.
func (rb rawBatch) bytesCompressed(t *testing.T, recs []byte) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	b := binary.BigEndian.AppendUint64(nil, 0)       // base offset
	b = binary.BigEndian.AppendUint32(b, 0)          // batch length, below
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // partition leader epoch
	b = append(b, 2)                                 // magic
	b = binary.BigEndian.AppendUint32(b, 0)          // crc, below
	b = binary.BigEndian.AppendUint16(b, uint16(rb.codec))
	b = binary.BigEndian.AppendUint32(b, uint32(rb.lastOffsetDelta))
	b = binary.BigEndian.AppendUint64(b, uint64(now)) // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(now)) // max timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(rb.producerID))
	b = binary.BigEndian.AppendUint16(b, uint16(rb.producerEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(rb.baseSequence))
	b = binary.BigEndian.AppendUint32(b, uint32(rb.numRecords))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	batch.UpdateCRC(b)
	return b
}

// record encodes one v2 record; keyLen and valueLen are written as given (a negative or
// lying length makes a malformed record), key and value bytes as given.
func record(offsetDelta int, keyLen int, key []byte, valueLen int, value []byte) []byte {
	var body []byte
	body = append(body, 0)              // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, int64(offsetDelta))
	body = binary.AppendVarint(body, int64(keyLen))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(valueLen))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // headers
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// goodRecords is n well-formed records with offset deltas 0..n-1.
func goodRecords(n int) []byte {
	var b []byte
	for i := range n {
		v := fmt.Appendf(nil, "good-%d", i)
		b = append(b, record(i, -1, nil, len(v), v)...)
	}
	return b
}

// produceRaw sends one Produce (acks=all) carrying rec for topic/partition on c and returns
// the partition's error code.
func produceRaw(t *testing.T, c *rawConn, topic string, partition int32, rec []byte) (int16, error) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, rec
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.roundTrip(req, 30*time.Second)
	if err != nil {
		return 0, err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("produce response without the partition: %+v", pr)
	}
	return pr.Topics[0].Partitions[0].ErrorCode, nil
}
