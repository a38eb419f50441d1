package broker_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

// rawBatch encodes one uncompressed batch of n records for producer pid/epoch/seq (pid -1:
// none).
func rawBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	h := batch.NoProducer(0, time.Now().UnixMilli())
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, epoch, seq
	var recs []kmsg.Record
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = []byte("value")
		recs = append(recs, r)
	}
	b, err := batch.Encode(nil, h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceRaw(t *testing.T, cl *kgo.Client, topic string, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	res, err := sendProduce(cl, topic, acks, records)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return res
}

func setupTopic(t *testing.T, opts ...testbroker.Option) (*testbroker.Broker, *kgo.Client) {
	t.Helper()
	tb := testbroker.Start(t, opts...)
	cl := newClient(t, tb.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 1, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("2000")}, "t"); err != nil {
		t.Fatal(err)
	}
	return tb, cl
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != want.Code {
		t.Errorf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func TestProduceRejectsBadBatches(t *testing.T) {
	tb, cl := setupTopic(t)
	good := rawBatch(t, -1, -1, -1, 3)

	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	wantCode(t, "bad CRC", produceRaw(t, cl, "t", -1, badCRC).ErrorCode, kerr.CorruptMessage)

	wantCode(t, "two batches", produceRaw(t, cl, "t", -1, append(append([]byte(nil), good...), good...)).ErrorCode, kerr.InvalidRecord)

	magic1 := append([]byte(nil), good...)
	magic1[16] = 1
	wantCode(t, "magic 1", produceRaw(t, cl, "t", -1, magic1).ErrorCode, kerr.InvalidRecord)

	wantCode(t, "truncated", produceRaw(t, cl, "t", -1, good[:len(good)-5]).ErrorCode, kerr.CorruptMessage)

	wantCode(t, "over max.message.bytes", produceRaw(t, cl, "t", -1, rawBatch(t, -1, -1, -1, 200)).ErrorCode, kerr.MessageTooLarge)

	wantCode(t, "unknown topic", produceRaw(t, cl, "nope", -1, good).ErrorCode, kerr.UnknownTopicID)

	// kgo rewrites acks, so acks=2 goes over a bare connection.
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 2
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = good
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip(t, tb.Addr, req).(*kmsg.ProduceResponse)
	wantCode(t, "acks=2", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequiredAcks)

	// Nothing of the above reached the log; a good batch lands at offset 0.
	res := produceRaw(t, cl, "t", -1, good)
	if res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: %v at %d", kerr.ErrorForCode(res.ErrorCode), res.BaseOffset)
	}
}

func TestIdempotentProduceSurvivesRestart(t *testing.T) {
	tb, cl := setupTopic(t)
	ctx := ctxT(t)
	initReq := kmsg.NewPtrInitProducerIDRequest()
	initResp, err := initReq.RequestWith(ctx, cl)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch

	first := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 0, 5))
	if first.ErrorCode != 0 || first.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", first)
	}
	second := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 5, 5))
	if second.ErrorCode != 0 || second.BaseOffset != 5 {
		t.Fatalf("second batch: %+v", second)
	}
	tb.Restart()
	cl = newClient(t, tb.Addr)

	// A retry of a batch already written is answered with its original offset.
	retry := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 0, 5))
	if retry.ErrorCode != 0 || retry.BaseOffset != 0 {
		t.Fatalf("retry after restart: %v at %d, want success at 0", kerr.ErrorForCode(retry.ErrorCode), retry.BaseOffset)
	}
	wantCode(t, "sequence gap", produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 20, 5)).ErrorCode, kerr.OutOfOrderSequenceNumber)
	bumped := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch+1, 0, 1))
	if bumped.ErrorCode != 0 || bumped.BaseOffset != 10 {
		t.Fatalf("new epoch from sequence 0: %+v", bumped)
	}
	wantCode(t, "old epoch", produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 10, 1)).ErrorCode, kerr.InvalidProducerEpoch)

	end, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	if err != nil || end["t"][0].Offset != 11 {
		t.Fatalf("log end offset %+v, want 11 (no duplicates written)", end["t"][0])
	}

	// Producer ids are never reissued after a restart.
	again, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || again.ProducerID == pid {
		t.Fatalf("producer id after restart: %v %d (first was %d)", err, again.ProducerID, pid)
	}
}

// An acks=0 produce that fails gets no response; Kafka closes the connection instead, the
// only signal such a client can see.
func TestAcksZeroErrorClosesConnection(t *testing.T) {
	tb, _ := setupTopic(t)
	conn, err := net.Dial("tcp", tb.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 0
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "nope"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = rawBatch(t, -1, -1, -1, 1)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(make([]byte, 16))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read after failed acks=0 produce: n=%d err=%v, want EOF", n, err)
	}
}

// roundTrip sends one request on a fresh connection, at the version set on req, and decodes
// the response.
func roundTrip(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 7)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("read response size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != 7 {
		t.Fatalf("correlation id %d, want 7", got)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty tagged fields of response header v1
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	return resp
}

// A snapshot from an earlier clean shutdown plus the log written after it must give the
// same producer state as a full replay: this is the state after a crash that followed a
// clean restart.
func TestProducerStateFromStaleSnapshot(t *testing.T) {
	tb, cl := setupTopic(t)
	ctx := ctxT(t)
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, initResp)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch
	if r := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 0, 5)); r.ErrorCode != 0 {
		t.Fatalf("first batch: %+v", r)
	}
	tb.Restart() // clean: writes a snapshot covering the first batch
	snapPath := filepath.Join(tb.DataDir, "t-0", "producer-state.snapshot")
	stale, err := os.ReadFile(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	cl = newClient(t, tb.Addr)
	if r := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 5, 5)); r.ErrorCode != 0 || r.BaseOffset != 5 {
		t.Fatalf("second batch: %+v", r)
	}
	tb.Stop()
	if err := os.WriteFile(snapPath, stale, 0o644); err != nil {
		t.Fatal(err)
	}
	tb.Restart()
	cl = newClient(t, tb.Addr)
	if r := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 5, 5)); r.ErrorCode != 0 || r.BaseOffset != 5 {
		t.Fatalf("retry of the batch after the snapshot: %v at %d, want duplicate at 5", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	if r := produceRaw(t, cl, "t", -1, rawBatch(t, pid, epoch, 10, 1)); r.ErrorCode != 0 || r.BaseOffset != 10 {
		t.Fatalf("next batch: %v at %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
}

func TestCompactedTopicRequiresKeys(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "c"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "keyless record on compacted topic", produceRaw(t, cl, "c", -1, rawBatch(t, -1, -1, -1, 1)).ErrorCode, kerr.InvalidRecord)
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "c", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed record: %v", err)
	}
}

func TestDescribeProducersShowsOpenTransaction(t *testing.T) {
	tb, cl := setupTopic(t)
	broker.AcceptAllTransactionsForTest(tb.Broker)
	ctx := ctxT(t)
	ir, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	produceTxn(t, cl, "t", txnBatch(t, ir.ProducerID, ir.ProducerEpoch, 0, "x", "y"))
	states, err := kadm.NewClient(cl).DescribeProducers(ctx, kadm.TopicsSet{"t": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ps := states["t"].Partitions[0]
	if ps.Err != nil || len(ps.ActiveProducers) != 1 {
		t.Fatalf("describe producers: %+v", ps)
	}
	for _, p := range ps.ActiveProducers {
		if p.ProducerID != ir.ProducerID || p.LastSequence != 1 || p.CurrentTxnStartOffset != 0 {
			t.Fatalf("producer %+v, want id %d, last sequence 1, open transaction at 0", p, ir.ProducerID)
		}
	}
}
