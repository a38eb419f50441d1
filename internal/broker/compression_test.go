package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/testbroker"
)

// createCompressedTopic creates a one-partition topic with compression.type set.
func createCompressedTopic(t *testing.T, cl *kgo.Client, topic, compressionType string, extra ...string) {
	t.Helper()
	cfg := map[string]*string{"compression.type": kadm.StringPtr(compressionType)}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i]] = kadm.StringPtr(extra[i+1])
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 1, 1, cfg, topic); err != nil {
		t.Fatal(err)
	}
}

// fetchStoredBatches reads partition 0 of topic from offset 0 with a raw Fetch and returns
// the batches exactly as the broker serves them.
func fetchStoredBatches(t *testing.T, cl *kgo.Client, topic string) [][]byte {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(ctxT(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 16 << 20
	req.IsolationLevel = 0
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, md.Topics[topic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 16 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	batches, err := batch.Split(p.RecordBatches)
	if err != nil {
		t.Fatal(err)
	}
	return batches
}

// storedRecord is what a consumer reads of one record, offsets and timestamps absolute.
type storedRecord struct {
	offset, timestampMs int64
	key, value          string
	headers             string
}

// decodeStored parses stored batches into their header and records.
func decodeStored(t *testing.T, batches [][]byte) ([]kmsg.RecordBatch, []storedRecord) {
	t.Helper()
	var hs []kmsg.RecordBatch
	var out []storedRecord
	for _, b := range batches {
		h, err := batch.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		if h.Attributes&batch.AttrControl != 0 {
			continue
		}
		recs, err := batch.Records(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var hdrs string
			for _, hd := range r.Headers {
				hdrs += hd.Key + "=" + string(hd.Value) + ";"
			}
			out = append(out, storedRecord{offset: h.FirstOffset + int64(r.OffsetDelta), timestampMs: h.FirstTimestamp + r.TimestampDelta64,
				key: string(r.Key), value: string(r.Value), headers: hdrs})
		}
	}
	return hs, out
}

// testRecords are records with keys, values, headers and distinct timestamps.
func testRecords(topic string, n int, baseMs int64) []*kgo.Record {
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("k", i)),
			Value:     bytes.Repeat([]byte(fmt.Sprint("value ", i, " ")), 20),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}},
			Timestamp: time.UnixMilli(baseMs + int64(i)*7)})
	}
	return recs
}

func codecOf(h kmsg.RecordBatch) int8 { return int8(h.Attributes & batch.AttrCompressionMask) }

// TestTopicCompressionTypeRecompresses: compression.type=zstd was accepted and described
// but batches were stored with the producer's codec. Kafka (LogValidator) recompresses a
// batch whose codec differs from the topic's, keeping producer id, epoch, sequence,
// timestamps and offsets. A gzip and an uncompressed idempotent producer write the same
// records to a producer topic and a zstd topic: the zstd topic's batches say zstd, and
// everything but the codec (header fields and records) equals the producer topic's.
// Failed before the fix (the stored codec was gzip / none).
func TestTopicCompressionTypeRecompresses(t *testing.T) {
	tb := testbroker.Start(t)
	admin := newClient(t, tb.Addr)
	createCompressedTopic(t, admin, "asis", "producer")
	createCompressedTopic(t, admin, "z", "zstd")
	baseMs := time.Now().Add(-time.Minute).UnixMilli()
	for i, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.NoCompression()} {
		cl := newClient(t, tb.Addr, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(50*time.Millisecond))
		for _, topic := range []string{"asis", "z"} {
			// Two batches per producer, the second continuing the first's sequence.
			for j := 0; j < 2; j++ {
				if err := cl.ProduceSync(ctxT(t), testRecords(topic, 10, baseMs+int64(i*1000+j*100))...).FirstErr(); err != nil {
					t.Fatalf("%s produce %d: %v", topic, j, err)
				}
			}
		}
	}
	asisH, asisRecs := decodeStored(t, fetchStoredBatches(t, admin, "asis"))
	zH, zRecs := decodeStored(t, fetchStoredBatches(t, admin, "z"))
	if len(zH) != 4 || len(asisH) != 4 {
		t.Fatalf("batches: %d in z, %d in asis, want 4 each", len(zH), len(asisH))
	}
	for i := range zH {
		if got := codecOf(zH[i]); got != batch.CodecZstd {
			t.Errorf("z batch %d stored with codec %d, want zstd (%d)", i, got, batch.CodecZstd)
		}
		want, got := asisH[i], zH[i]
		if want.ProducerID < 0 || got.ProducerID != want.ProducerID || got.ProducerEpoch != want.ProducerEpoch ||
			got.FirstSequence != want.FirstSequence || got.FirstOffset != want.FirstOffset ||
			got.LastOffsetDelta != want.LastOffsetDelta || got.NumRecords != want.NumRecords ||
			got.FirstTimestamp != want.FirstTimestamp || got.MaxTimestamp != want.MaxTimestamp ||
			got.Attributes&^batch.AttrCompressionMask != want.Attributes&^batch.AttrCompressionMask {
			t.Errorf("z batch %d header %+v, want as producer topic's %+v (codec aside)", i, got, want)
		}
	}
	if codecOf(asisH[0]) != batch.CodecGzip || codecOf(asisH[2]) != batch.CodecNone {
		t.Errorf("producer topic codecs %d, %d: want gzip then none, as sent", codecOf(asisH[0]), codecOf(asisH[2]))
	}
	if len(zRecs) != 40 || fmt.Sprint(zRecs) != fmt.Sprint(asisRecs) {
		t.Errorf("z records differ from the producer topic's:\n got %v\nwant %v", zRecs, asisRecs)
	}
	// A consumer reads them back as produced.
	got := consumeAll(t, tb.Addr, "z", 40)[0]
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Key) != zRecs[i].key || r.Timestamp.UnixMilli() != zRecs[i].timestampMs {
			t.Fatalf("consumed record %d: offset %d key %q ts %d, want %+v", i, r.Offset, r.Key, r.Timestamp.UnixMilli(), zRecs[i])
		}
	}
}

// rawCodecBatch encodes n records into one batch with codec, without a producer.
func rawCodecBatch(t *testing.T, codec int8, value []byte, n int) []byte {
	t.Helper()
	h := batch.NoProducer(0, time.Now().UnixMilli())
	var recs []kmsg.Record
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.Key = []byte(fmt.Sprint("k", i))
		r.Value = value
		r.TimestampDelta64 = int64(i)
		recs = append(recs, r)
	}
	b, err := batch.Encode(nil, h, recs, codec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTopicCompressionTypeUncompressedAndAsIs: compression.type=uncompressed stores an lz4
// batch uncompressed (failed before the fix: stored lz4); producer, and a topic codec
// equal to the batch's, store the batch's bytes unchanged (only the base offset and leader
// epoch, outside the CRC, are the broker's).
func TestTopicCompressionTypeUncompressedAndAsIs(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	createCompressedTopic(t, cl, "none", "uncompressed")
	createCompressedTopic(t, cl, "asis", "producer")
	createCompressedTopic(t, cl, "gz", "gzip")
	value := bytes.Repeat([]byte("abc"), 100)

	sent := rawCodecBatch(t, batch.CodecLZ4, value, 5)
	wantNoError(t, "lz4 to uncompressed topic", produceRaw(t, cl, "none", -1, sent).ErrorCode)
	stored := fetchStoredBatches(t, cl, "none")
	hs, recs := decodeStored(t, stored)
	_, sentRecs := decodeStored(t, [][]byte{sent})
	if len(hs) != 1 || codecOf(hs[0]) != batch.CodecNone {
		t.Fatalf("uncompressed topic stored %d batches, codec %d; want one uncompressed", len(hs), codecOf(hs[0]))
	}
	if fmt.Sprint(recs) != fmt.Sprint(sentRecs) {
		t.Errorf("records changed:\n got %v\nwant %v", recs, sentRecs)
	}

	for _, topic := range []string{"asis", "gz"} {
		sent := rawCodecBatch(t, batch.CodecGzip, value, 5)
		wantNoError(t, "gzip to "+topic, produceRaw(t, cl, topic, -1, sent).ErrorCode)
		stored := fetchStoredBatches(t, cl, topic)
		if len(stored) != 1 || !bytes.Equal(stored[0][16:], sent[16:]) {
			t.Errorf("%s: stored batch differs from the one sent (from the magic byte on)", topic)
		}
	}
}

// TestRecompressedBatchOverMaxMessageBytes: records that fit max.message.bytes compressed
// can outgrow it stored uncompressed; Kafka refuses the batch after recompression
// (RecordTooLargeException: MESSAGE_TOO_LARGE).
func TestRecompressedBatchOverMaxMessageBytes(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	createCompressedTopic(t, cl, "none", "uncompressed", "max.message.bytes", "2000")
	// One record of ~1960 bytes: within the limit decompressed, 61 header bytes over it stored.
	sent := rawCodecBatch(t, batch.CodecGzip, bytes.Repeat([]byte{'x'}, 1950), 1)
	wantCode(t, "recompressed over max.message.bytes", produceRaw(t, cl, "none", -1, sent).ErrorCode, kerr.MessageTooLarge)
	wantNoError(t, "small batch", produceRaw(t, cl, "none", -1, rawCodecBatch(t, batch.CodecGzip, []byte("v"), 3)).ErrorCode)
}

// TestIdempotentRetryAcrossRecompression: a retried idempotent batch is still recognised
// as a duplicate when the topic recompresses it (the producer state keeps the sequence,
// not the bytes): the retry gets the first attempt's offset and nothing is appended.
func TestIdempotentRetryAcrossRecompression(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	createCompressedTopic(t, cl, "z", "zstd")
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionTimeoutMillis = -1
	ir, err := init.RequestWith(ctxT(t), cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(ir.ErrorCode))
	}
	b0 := rawBatch(t, ir.ProducerID, ir.ProducerEpoch, 0, 3)
	first := produceRaw(t, cl, "z", -1, b0)
	retry := produceRaw(t, cl, "z", -1, b0)
	next := produceRaw(t, cl, "z", -1, rawBatch(t, ir.ProducerID, ir.ProducerEpoch, 3, 2))
	wantNoError(t, "first", first.ErrorCode)
	wantNoError(t, "retry", retry.ErrorCode)
	wantNoError(t, "next sequence", next.ErrorCode)
	if retry.BaseOffset != first.BaseOffset || next.BaseOffset != 3 {
		t.Errorf("offsets: first %d retry %d next %d, want 0 0 3", first.BaseOffset, retry.BaseOffset, next.BaseOffset)
	}
	wantCode(t, "sequence gap", produceRaw(t, cl, "z", -1, rawBatch(t, ir.ProducerID, ir.ProducerEpoch, 9, 1)).ErrorCode, kerr.OutOfOrderSequenceNumber)
	hs, _ := decodeStored(t, fetchStoredBatches(t, cl, "z"))
	if len(hs) != 2 || codecOf(hs[0]) != batch.CodecZstd || hs[1].FirstSequence != 3 {
		t.Errorf("stored %d batches (%+v), want 2 zstd ones with sequences 0 and 3", len(hs), hs)
	}
}

// TestTransactionsAcrossRecompression: a transactional gzip producer on a zstd topic
// commits, aborts and commits again; the stored data batches are zstd and transactional,
// the markers uncompressed, and a read_committed consumer sees exactly the committed
// records.
func TestTransactionsAcrossRecompression(t *testing.T) {
	tb := testbroker.Start(t)
	admin := newClient(t, tb.Addr)
	createCompressedTopic(t, admin, "z", "zstd")
	cl := newClient(t, tb.Addr, kgo.TransactionalID("recompress"), kgo.ProducerBatchCompression(kgo.GzipCompression()))
	baseMs := time.Now().Add(-time.Minute).UnixMilli()
	for i, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := testRecords("z", 5, baseMs)
		for _, r := range recs {
			r.Value = []byte(fmt.Sprint("txn", i, " ", string(r.Key)))
			// Compressible, so kgo really sends gzip (it sends small batches uncompressed).
			r.Headers = []kgo.RecordHeader{{Key: "pad", Value: bytes.Repeat([]byte("pad"), 100)}}
		}
		if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctxT(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	hs, _ := decodeStored(t, fetchStoredBatches(t, admin, "z"))
	data := 0
	for i, h := range hs {
		if h.Attributes&batch.AttrTransactional == 0 {
			t.Errorf("batch %d not transactional", i)
		}
		if h.Attributes&batch.AttrControl != 0 {
			if codecOf(h) != batch.CodecNone {
				t.Errorf("marker %d recompressed to codec %d", i, codecOf(h))
			}
			continue
		}
		data++
		if h.ProducerID < 0 || h.ProducerEpoch < 0 {
			t.Errorf("data batch %d lost its producer: %+v", i, h)
		}
		if codecOf(h) != batch.CodecZstd {
			t.Errorf("data batch %d codec %d, want zstd", i, codecOf(h))
		}
	}
	if data != 3 {
		t.Errorf("%d data batches, want 3", data)
	}
	rc := newClient(t, tb.Addr, kgo.ConsumeTopics("z"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	defer cancel()
	for len(got) < 10 && ctx.Err() == nil {
		fs := rc.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	want := "[txn0 k0 txn0 k1 txn0 k2 txn0 k3 txn0 k4 txn2 k0 txn2 k1 txn2 k2 txn2 k3 txn2 k4]"
	if fmt.Sprint(got) != want {
		t.Errorf("read_committed saw %v, want %v", got, want)
	}
}

func wantNoError(t *testing.T, what string, code int16) {
	t.Helper()
	if code != 0 {
		t.Errorf("%s: error %v", what, kerr.ErrorForCode(code))
	}
}

// TestRecompressionLevels: compression.gzip.level and compression.zstd.level apply when
// the broker recompresses: gzip's header records level 1 (XFL 4) and 9 (XFL 2), and zstd
// level 19 stores fewer bytes than level 1. Failed before (the levels were not applied).
func TestRecompressionLevels(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	createCompressedTopic(t, cl, "gz1", "gzip", "compression.gzip.level", "1")
	createCompressedTopic(t, cl, "gz9", "gzip", "compression.gzip.level", "9")
	createCompressedTopic(t, cl, "zs1", "zstd", "compression.zstd.level", "1")
	createCompressedTopic(t, cl, "zs19", "zstd", "compression.zstd.level", "19")
	var value []byte
	for i := 0; len(value) < 40<<10; i++ {
		value = append(value, fmt.Sprintf("value %d of a level test, %x; ", i, i*7919)...)
	}
	stored := map[string][]byte{}
	for _, topic := range []string{"gz1", "gz9", "zs1", "zs19"} {
		wantNoError(t, topic, produceRaw(t, cl, topic, -1, rawCodecBatch(t, batch.CodecNone, value, 1)).ErrorCode)
		b := fetchStoredBatches(t, cl, topic)
		if len(b) != 1 {
			t.Fatalf("%s: %d batches", topic, len(b))
		}
		stored[topic] = b[0]
	}
	for topic, xfl := range map[string]byte{"gz1": 4, "gz9": 2} {
		if got := stored[topic][batch.HeaderSize+8]; got != xfl {
			t.Errorf("%s: gzip XFL %d, want %d", topic, got, xfl)
		}
	}
	if len(stored["zs19"]) >= len(stored["zs1"]) {
		t.Errorf("zstd level 19 stored %d bytes, level 1 %d: want fewer", len(stored["zs19"]), len(stored["zs1"]))
	}
}
