package compat

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestJavaConsumerNeverMeetsABadBatch (issue #17 finding 3, acceptance 3): a producer sends
// CRC-valid uncompressed v2 batches whose records are malformed in every way Kafka's
// LogValidator refuses, between valid records. Each must be refused, and an unmodified
// Java KafkaConsumer 4.4 must then read the partition from start to end without an
// exception and see exactly the valid records. Before validation covered uncompressed
// batches they were stored and served, and the Java consumer threw on every poll at the
// first of them.
func TestJavaConsumerNeverMeetsABadBatch(t *testing.T) {
	java, cp, dir := buildJava(t)
	tb := testbroker.Start(t)
	const topic = "hostile-batches"
	adm := newAdmin(t, tb.Addr)
	createTopic(t, adm, topic, 1, nil)
	md, err := adm.Metadata(ctxFor(t, 30*time.Second), topic)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	topicID := md.Topics[topic].ID
	cl := newClient(t, tb.Addr, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())

	var want []string
	produceValid := func() {
		v := fmt.Sprintf("valid-%02d", len(want))
		if err := cl.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		want = append(want, v)
	}
	produceValid()
	for _, c := range malformedBatches() {
		code := produceRaw(t, cl, topic, topicID, c.batch)
		if code != kerr.CorruptMessage.Code && code != kerr.InvalidRecord.Code {
			t.Errorf("%s: produce answered error code %d (%v), want CORRUPT_MESSAGE or INVALID_RECORD", c.name, code, kerr.ErrorForCode(code))
		}
		produceValid()
	}

	out, err := runBounded(3*time.Minute, dir, java, "-XX:+UseSerialGC", "-Xmx256m", "-cp", cp, "exactq.compat.ReadAll", tb.Addr, topic, "0")
	if err != nil {
		t.Fatalf("Java KafkaConsumer could not read the partition: %v\n%s", err, tail(out))
	}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "RECORD" {
			got = append(got, f[2])
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Java consumer read %v, want exactly the valid records %v", got, want)
	}
}

type malformedBatch struct {
	name  string
	batch []byte
}

// malformedBatches are uncompressed v2 batches with a correct CRC and a header that is
// sane on its own; what is wrong is inside the records or between the header and them.
func malformedBatches() []malformedBatch {
	good := rawRecord(0, []byte("k"), []byte("v"))
	return []malformedBatch{
		{"negative key length", rawBatch(1, 0, recordWithLengths(0, -7, 1))},
		{"negative record length", rawBatch(1, 0, binary.AppendVarint(nil, -3))},
		{"garbage record bytes", rawBatch(1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0x7f, 0x01, 0x02})},
		{"more records than the count", rawBatch(1, 0, append(append([]byte(nil), good...), rawRecord(1, []byte("k"), []byte("v"))...))},
		{"fewer records than the count", rawBatch(3, 2, good)},
		{"a count with no record bytes", rawBatch(5, 4, nil)},
		{"value longer than its record", rawBatch(1, 0, recordWithLengths(0, 1, 500))},
		{"offset range lies about the count", rawBatch(1, 999_999_999, good)},
	}
}

// rawRecord encodes one v2 record (length, attributes, timestamp delta, offset delta, key,
// value, no headers).
func rawRecord(offsetDelta int64, key, value []byte) []byte {
	var body []byte
	body = append(body, 0)                        // attributes
	body = binary.AppendVarint(body, 0)           // timestamp delta
	body = binary.AppendVarint(body, offsetDelta) // offset delta
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // headers
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// recordWithLengths encodes a record whose length prefix matches the bytes that follow but
// whose key and value lengths claim keyLen and valueLen bytes of which only one is present.
func recordWithLengths(offsetDelta, keyLen, valueLen int64) []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, 0)
	body = binary.AppendVarint(body, offsetDelta)
	body = binary.AppendVarint(body, keyLen)
	body = append(body, 'k')
	body = binary.AppendVarint(body, valueLen)
	body = append(body, 'v')
	body = binary.AppendVarint(body, 0)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// rawBatch wraps records in a v2 batch header claiming count records over lastOffsetDelta,
// without a producer id, with its length and CRC-32C right.
func rawBatch(count, lastOffsetDelta int32, records []byte) []byte {
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: lastOffsetDelta,
		FirstTimestamp:  now,
		MaxTimestamp:    now,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      count,
		Records:         records,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12)) // length: everything after it
	const attributesAt = 21                                  // base offset 8, length 4, leader epoch 4, magic 1, crc 4
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[attributesAt:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// produceRaw sends one batch to partition 0 of topic (named by name and id, so any Produce
// version kgo negotiates addresses it), as an acks=all ProduceRequest, and
// returns the partition's error code.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, topicID [16]byte, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic     // up to v12
	rt.TopicID = topicID // v13 names topics by id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t, 30*time.Second), cl.Broker(1))
	if err != nil {
		t.Fatalf("produce request: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response has %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}
