package share

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/alloctest"
	"github.com/exactq/exactq/internal/batch"
)

// produceLying appends the batch of issue 17 finding 1: one record, CRC-valid,
// lastOffsetDelta claiming span-1 more offsets than it holds.
func (l *fakeLogs) produceLying(id [16]byte, p int32, span int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, _ := l.part(id, p)
	h := batch.NoProducer(fp.end, 0)
	b, err := batch.Encode(nil, h, records(1, "lie"), batch.CodecNone)
	if err != nil {
		panic(err)
	}
	binary.BigEndian.PutUint32(b[23:27], uint32(span-1))
	batch.UpdateCRC(b)
	fp.batches = append(fp.batches, fakeBatch{base: fp.end, last: fp.end + span - 1, data: b})
	fp.end += span
}

// The crash, through ShareFetch and ShareAcknowledge: a share consumer
// acquires the lying batch's 10^9 offsets, acknowledges offset 0 alone, and a
// second consumer fetches in record_limit mode. Each used to allocate ~40 GB.
func TestLyingBatchSpan(t *testing.T) {
	const span = 1_000_000_000
	const budgetBytes = 1 << 20
	e := newEnv(t)
	e.init(group, topicA, 0)
	e.fetch(fetchReq{member: "m1", epoch: 0, parts: []int32{0}})
	e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}})
	e.logs.produceLying(topicA, 0, span)
	e.logs.produce(topicA, 0, 1, 0)

	resp := e.fetch(fetchReq{member: "m1", epoch: 1})
	if got := acq(part(resp, topicA, 0)); len(got) != 1 || got[0] != (acquired{0, span - 1, 1}) {
		t.Fatalf("acquired %v, want the whole lying batch", got)
	}
	if n := alloctest.Bytes(func() {
		ar := e.ack(ackReq{member: "m1", epoch: 2, acks: acks{0: {ackBatch(0, 0, typeAccept)}}})
		wantCode(t, "ack of offset 0", ar.Topics[0].Partitions[0].ErrorCode, nil)
		e.settle()
	}); n > budgetBytes {
		t.Fatalf("acknowledging offset 0 allocated %d bytes", n)
	}
	if n := alloctest.Bytes(func() {
		ar := e.ack(ackReq{member: "m1", epoch: 3, acks: acks{0: {ackBatch(0, 1<<62, typeAccept)}}})
		wantCode(t, "ack of 0-2^62", ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)
	}); n > budgetBytes {
		t.Fatalf("acknowledging 0-2^62 allocated %d bytes", n)
	}
	// The lock expires: the rest of the batch comes back AVAILABLE and m2 takes 5 of
	// it in record_limit mode.
	e.advance(30 * time.Second)
	var got []acquired
	if n := alloctest.Bytes(func() {
		got = acq(part(e.fetch(fetchReq{member: "m2", epoch: 1, maxRecords: 5, mode: 1}), topicA, 0))
	}); n > budgetBytes {
		t.Fatalf("record_limit fetch allocated %d bytes", n)
	}
	if len(got) != 1 || got[0] != (acquired{1, 5, 2}) {
		t.Fatalf("record_limit acquired %v, want 1-5", got)
	}
	// Durable state stays a few ranges: a restart restores it at once.
	e.settle()
	e.restart()
	if n := alloctest.Bytes(func() {
		got = acq(part(e.fetch(fetchReq{member: "m2", epoch: 0, parts: []int32{0}, maxRecords: 5, mode: 1}), topicA, 0))
	}); n > budgetBytes {
		t.Fatalf("record_limit fetch after restart allocated %d bytes", n)
	}
	if len(got) != 1 || got[0] != (acquired{1, 5, 2}) {
		t.Fatalf("after restart record_limit acquired %v, want 1-5 (delivered once before)", got)
	}
}
