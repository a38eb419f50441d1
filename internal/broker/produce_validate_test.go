package broker_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/alloctest"
	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/testbroker"
)

// patched returns a copy of b with the int32 at off set to v and the CRC fixed, so only
// the broker's record checks can tell the batch is wrong.
func patched(b []byte, off int, v int32) []byte {
	out := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(out[off:], uint32(v))
	batch.UpdateCRC(out)
	return out
}

// TestProduceRefusesLyingUncompressedBatches is #17 findings 1 and 3 over TCP: CRC-valid
// uncompressed batches whose records do not match their header were stored and served
// (a share consumer then acquired a billion offsets; Java's KafkaConsumer threw on every
// poll). Kafka answers INVALID_RECORD and stores nothing; so must we.
func TestProduceRefusesLyingUncompressedBatches(t *testing.T) {
	_, cl := setupTopic(t)
	const lastOffsetDeltaAt, countAt = 23, 57
	one := rawBatch(t, -1, -1, -1, 1)
	three := rawBatch(t, -1, -1, -1, 3)
	garbage := append([]byte(nil), three...)
	for i := batch.HeaderSize; i < len(garbage); i++ {
		garbage[i] = 0xff
	}
	batch.UpdateCRC(garbage)
	empty := patched(patched(one[:batch.HeaderSize], 8, batch.HeaderSize-batch.LengthPrefix), countAt, 3)
	empty = patched(empty, lastOffsetDeltaAt, 2)
	cases := map[string][]byte{
		"one record claiming a billion": patched(patched(one, countAt, 1_000_000_000), lastOffsetDeltaAt, 999_999_999),
		"last offset delta a billion":   patched(one, lastOffsetDeltaAt, 999_999_999),
		"fewer records than the count":  patched(patched(three, countAt, 4), lastOffsetDeltaAt, 3),
		"more records than the count":   patched(patched(three, countAt, 2), lastOffsetDeltaAt, 1),
		"garbage record bytes":          garbage,
		"a count with no record bytes":  empty,
	}
	for name, b := range cases {
		wantCode(t, name, produceRaw(t, cl, "t", -1, b).ErrorCode, kerr.InvalidRecord)
	}
	// Nothing of the above reached the log.
	res := produceRaw(t, cl, "t", -1, three)
	if res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: %v at %d", kerr.ErrorForCode(res.ErrorCode), res.BaseOffset)
	}
}

// zstdBomb is a CRC-valid batch of one well-formed record whose 64 MiB value of zeros
// compresses (as a zstd stream, declaring no content size, like zstd-jni's) to ~7 KiB.
func zstdBomb(t *testing.T) []byte {
	t.Helper()
	plain, err := batch.Encode(nil, batch.NoProducer(0, time.Now().UnixMilli()),
		[]kmsg.Record{{Value: make([]byte, 64<<20)}}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	var payload bytes.Buffer
	w, err := zstd.NewWriter(&payload, zstd.WithWindowSize(8<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain[batch.HeaderSize:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rb, err := batch.Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	rb.Attributes |= batch.CodecZstd
	rb.Records = payload.Bytes()
	rb.Length = int32(batch.HeaderSize - batch.LengthPrefix + payload.Len())
	b := rb.AppendTo(nil)
	batch.UpdateCRC(b)
	return b
}

// TestProduceDecompressionFlood is #17 finding 7 over TCP: eight connections sending zstd
// bombs at once. Each bomb was decompressed up to 64 MiB before it was refused (the
// broker reached 1.6 GB); now decompression stops at the topic's max.message.bytes
// (MESSAGE_TOO_LARGE) through a bounded window, so the broker allocates (measured) a few
// KiB per bomb, and a good compressed batch is still accepted after the flood.
func TestProduceDecompressionFlood(t *testing.T) {
	tb := testbroker.Start(t)
	admin := newClient(t, tb.Addr)
	if _, err := kadm.NewClient(admin).CreateTopic(ctxT(t), 1, 1,
		map[string]*string{"max.message.bytes": kadm.StringPtr("1048576")}, "t"); err != nil {
		t.Fatal(err)
	}
	bomb := zstdBomb(t)
	const conns, bombsPerConn = 8, 4
	clients := make([]*kgo.Client, conns)
	for i := range clients {
		clients[i] = newClient(t, tb.Addr)
	}
	codes := make(chan int16, 2*conns*bombsPerConn)
	flood := func() {
		var wg sync.WaitGroup
		for _, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range bombsPerConn {
					res, err := sendProduce(cl, "t", -1, bomb)
					if err != nil {
						res.ErrorCode = -1
					}
					codes <- res.ErrorCode
				}
			}()
		}
		wg.Wait()
	}
	flood() // connections, metadata and the decoders' pools warm up
	allocated := alloctest.Bytes(flood)
	close(codes)
	for code := range codes {
		wantCode(t, "bomb", code, kerr.MessageTooLarge)
	}
	perBomb := allocated / (conns * bombsPerConn)
	t.Logf("%d-byte bomb: %d bytes allocated per bomb (client and broker)", len(bomb), perBomb)
	// Warm, ~15-50 KB; a GC emptying the decoder pools mid-flood costs a decoder (up to
	// 8 MiB) again now and then. Before the fix: ~364 MB per bomb.
	if !alloctest.RaceEnabled && perBomb > 4<<20 {
		t.Fatalf("%d bytes allocated per bomb; the bomb holds 64 MiB, the limit is 1 MiB", perBomb)
	}
	good, err := batch.Encode(nil, batch.NoProducer(0, time.Now().UnixMilli()), []kmsg.Record{{Value: []byte("after the flood")}}, batch.CodecZstd)
	if err != nil {
		t.Fatal(err)
	}
	if res := produceRaw(t, admin, "t", -1, good); res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("good batch after the flood: %v at %d", kerr.ErrorForCode(res.ErrorCode), res.BaseOffset)
	}
}

// sendProduce sends one partition's records in a Produce request (safe from any
// goroutine, unlike produceRaw).
func sendProduce(cl *kgo.Client, topic string, acks int16, records []byte) (kmsg.ProduceResponseTopicPartition, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	// kgo sends Produce v13, which names topics by id.
	if md, err := kadm.NewClient(cl).Metadata(context.Background(), topic); err == nil {
		rt.TopicID = md.Topics[topic].ID
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		return kmsg.ProduceResponseTopicPartition{}, err
	}
	return resp.Topics[0].Partitions[0], nil
}

// TestProduceChecksEveryRecordTimestamp: with message.timestamp.before.max.ms of an hour,
// a batch whose header timestamps are now but whose middle record is two hours old was
// accepted (only the first and max timestamps were checked); Kafka checks every record
// (LogValidator.validateTimestamp) and answers INVALID_TIMESTAMP.
func TestProduceChecksEveryRecordTimestamp(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 1, 1,
		map[string]*string{"message.timestamp.before.max.ms": kadm.StringPtr("3600000")}, "t"); err != nil {
		t.Fatal(err)
	}
	recs := []kmsg.Record{{Value: []byte("a")}, {Value: []byte("b"), TimestampDelta64: -2 * 3_600_000}, {Value: []byte("c")}}
	b, err := batch.Encode(nil, batch.NoProducer(0, time.Now().UnixMilli()), recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "record two hours old", produceRaw(t, cl, "t", -1, b).ErrorCode, kerr.InvalidTimestamp)
	recs[1].TimestampDelta64 = -60_000
	b, _ = batch.Encode(nil, batch.NoProducer(0, time.Now().UnixMilli()), recs, batch.CodecNone)
	if res := produceRaw(t, cl, "t", -1, b); res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("in range: %v at %d", kerr.ErrorForCode(res.ErrorCode), res.BaseOffset)
	}
}
