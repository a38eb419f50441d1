package broker_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

// BenchmarkProduce measures the broker's produce path (request read and decode, batch
// validation, sequence check, append, fsync when on, response) over loopback without client
// batching: a raw client keeps produceBenchWindow Produce v13 requests in flight on one
// connection, as kgo does for an idempotent producer, each one batch of ~1 MiB of 1 KiB
// incompressible records (kgo's default batch size) with acks=all, to one partition. Only
// the batch's sequence number and CRC change between requests. MB/s counts batch bytes.
func BenchmarkProduce(b *testing.B) {
	for _, fsync := range []broker.FsyncPolicy{broker.FsyncNever, broker.FsyncAlways} {
		name := map[broker.FsyncPolicy]string{broker.FsyncNever: "never", broker.FsyncAlways: "always"}[fsync]
		b.Run("fsync="+name, func(b *testing.B) { benchProduce(b, fsync) })
	}
}

const (
	produceBenchWindow  = 5   // kgo: five requests in flight per broker when idempotent
	produceBenchRecords = 970 // 1 KiB records in a ~1 MB batch, as kgo fills 1000012 bytes
)

func benchProduce(b *testing.B, fsync broker.FsyncPolicy) {
	tb := testbroker.Start(b, testbroker.WithFsync(fsync))
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := b.Context()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "producebench"); err != nil {
		b.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "producebench")
	if err != nil {
		b.Fatal(err)
	}
	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.TransactionTimeoutMillis = 60000
	initResp, err := initReq.RequestWith(ctx, cl)
	if err != nil || initResp.ErrorCode != 0 {
		b.Fatalf("InitProducerId: %v %v", err, initResp)
	}

	// One batch, re-sequenced (and its CRC recomputed) for every request.
	value := make([]byte, 1024)
	_, _ = rand.Read(value)
	recs := make([]kmsg.Record, produceBenchRecords)
	for i := range recs {
		recs[i] = kmsg.Record{Value: value}
	}
	h := batch.NoProducer(0, time.Now().UnixMilli())
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = initResp.ProducerID, initResp.ProducerEpoch, 0
	raw, err := batch.Encode(nil, h, recs, batch.CodecNone)
	if err != nil {
		b.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(13)
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.TopicID = td["producebench"].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 0)
	at := bytes.Index(frame, raw) // random values: found once, where kmsg put it
	if at < 0 {
		b.Fatal("batch not found in the encoded request")
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	setSeq := func(corr int32, seq int32) {
		binary.BigEndian.PutUint32(frame[8:], uint32(corr))
		bb := frame[at : at+len(raw)]
		binary.BigEndian.PutUint32(bb[53:], uint32(seq)) // base sequence
		binary.BigEndian.PutUint32(bb[17:], crc32.Checksum(bb[21:], castagnoli))
	}

	nc, err := net.Dial("tcp", tb.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	errs := make(chan error, 1)
	responses := make(chan struct{}, produceBenchWindow)
	go func() { // reads responses, checks them, frees window slots
		br := bufio.NewReader(nc)
		var buf []byte
		for {
			var size [4]byte
			if _, err := io.ReadFull(br, size[:]); err != nil {
				errs <- err
				return
			}
			n := int(binary.BigEndian.Uint32(size[:]))
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			if _, err := io.ReadFull(br, buf[:n]); err != nil {
				errs <- err
				return
			}
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(13)
			if err := resp.ReadFrom(buf[5:n]); err != nil {
				errs <- err
				return
			}
			if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
				errs <- fmt.Errorf("produce error code %d", c)
				return
			}
			responses <- struct{}{}
		}
	}()
	for range produceBenchWindow {
		responses <- struct{}{}
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	b.ResetTimer()
	seq, sent := int32(0), 0
	for b.Loop() {
		select {
		case <-responses:
		case err := <-errs:
			b.Fatal(err)
		}
		setSeq(int32(sent), seq)
		if _, err := nc.Write(frame); err != nil {
			b.Fatal(err)
		}
		seq += produceBenchRecords
		sent++
	}
	for range produceBenchWindow {
		select {
		case <-responses:
		case err := <-errs:
			b.Fatal(err)
		}
	}
}
