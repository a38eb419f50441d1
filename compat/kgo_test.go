package compat

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// kgoCodecs are the codecs franz-go can produce with, by name, with the batch attribute
// value Kafka stores for each.
var kgoCodecs = []struct {
	name  string
	codec kgo.CompressionCodec
	attr  uint8
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// produced is what the producer learned about one record: where the broker put it.
type produced struct {
	rec *kgo.Record
	err error
}

// produceAll produces records through cl and waits for every promise; it fails the test
// on any produce error.
func produceAll(t *testing.T, ctx context.Context, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	wg.Add(len(recs))
	for _, r := range recs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("record %s: %w", r.Key, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d records failed to produce; first: %v", len(errs), len(recs), errs[0])
	}
}

// consumeExactly reads from topic's partitions (each from its start) with a directly
// assigned kgo consumer until want records arrived, failing on fetch errors or deadline.
// It then polls once more without blocking and fails if anything extra shows up.
func consumeExactly(t *testing.T, addr, topic string, partitions int32, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, addr, append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	ctx := ctxFor(t, 90*time.Second)
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", len(got), want)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch error on %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != want {
		t.Fatalf("consumed %d records, want exactly %d", len(got), want)
	}
	// Nothing beyond what was produced: the high watermark already says so, check it too.
	fs := cl.PollRecords(ctxDone(), 0)
	if extra := fs.Records(); len(extra) > 0 {
		t.Fatalf("consumed %d records beyond the %d produced; first at %s[%d]@%d", len(extra), want, extra[0].Topic, extra[0].Partition, extra[0].Offset)
	}
	return got
}

// ctxDone is an already-cancelled context: a poll with it returns only what is buffered.
func ctxDone() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// verifyRoundTrip checks that consumed is exactly sent: same keys, values, headers and
// timestamps at the partition and offset the producer was told, per-partition offsets
// contiguous from 0 and in order, nothing missing or duplicated, and batches stored with
// the producer's codec.
func verifyRoundTrip(t *testing.T, sent, consumed []*kgo.Record, partitions int32, codecAttr uint8) {
	t.Helper()
	type pos struct {
		p int32
		o int64
	}
	byPos := make(map[pos]*kgo.Record, len(sent))
	perPart := map[int32]int{}
	for _, r := range sent {
		k := pos{r.Partition, r.Offset}
		if prev, dup := byPos[k]; dup {
			t.Fatalf("producer was told two records share %d@%d: %s and %s", k.p, k.o, prev.Key, r.Key)
		}
		byPos[k] = r
		perPart[r.Partition]++
	}
	for p := int32(0); p < partitions; p++ {
		if perPart[p] == 0 {
			t.Errorf("partition %d got no records; keyed records should spread over all %d partitions", p, partitions)
		}
	}
	next := map[int32]int64{}
	seen := map[pos]bool{}
	compressed := 0
	for _, c := range consumed {
		if c.Offset != next[c.Partition] {
			t.Fatalf("partition %d: consumed offset %d, want %d (offsets must be contiguous and in order)", c.Partition, c.Offset, next[c.Partition])
		}
		next[c.Partition]++
		k := pos{c.Partition, c.Offset}
		if seen[k] {
			t.Fatalf("consumed %d@%d twice", k.p, k.o)
		}
		seen[k] = true
		s, ok := byPos[k]
		if !ok {
			t.Fatalf("consumed %d@%d (key %q) that the producer never got acknowledged there", k.p, k.o, c.Key)
		}
		if !bytes.Equal(c.Key, s.Key) || !bytes.Equal(c.Value, s.Value) {
			t.Fatalf("%d@%d: got key %q value %.40q..., want key %q value %.40q...", k.p, k.o, c.Key, c.Value, s.Key, s.Value)
		}
		if len(c.Headers) != len(s.Headers) {
			t.Fatalf("%d@%d: got %d headers, want %d", k.p, k.o, len(c.Headers), len(s.Headers))
		}
		for i := range s.Headers {
			if c.Headers[i].Key != s.Headers[i].Key || !bytes.Equal(c.Headers[i].Value, s.Headers[i].Value) {
				t.Fatalf("%d@%d header %d: got %q=%q, want %q=%q", k.p, k.o, i, c.Headers[i].Key, c.Headers[i].Value, s.Headers[i].Key, s.Headers[i].Value)
			}
		}
		if c.Timestamp.UnixMilli() != s.Timestamp.UnixMilli() {
			t.Fatalf("%d@%d: timestamp %d, want the producer's CreateTime %d", k.p, k.o, c.Timestamp.UnixMilli(), s.Timestamp.UnixMilli())
		}
		if got := c.Attrs.CompressionType(); got != 0 {
			if got != codecAttr {
				t.Fatalf("%d@%d: stored with codec %d, producer used %d", k.p, k.o, got, codecAttr)
			}
			compressed++
		}
	}
	for p, n := range perPart {
		if next[p] != int64(n) {
			t.Errorf("partition %d: consumed up to offset %d, producer wrote %d records", p, next[p], n)
		}
	}
	if codecAttr != 0 && compressed == 0 {
		t.Errorf("no consumed batch carries codec %d: the broker must store batches as the producer compressed them", codecAttr)
	}
}

// keyedRecords makes n records for topic with keys, values and three headers each.
func keyedRecords(topic, tag string, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic: topic,
			Key:   []byte(fmtKey(i)),
			Value: []byte(fmtValue(tag, i)),
			Headers: []kgo.RecordHeader{
				{Key: "index", Value: []byte(strconv.Itoa(i))},
				{Key: "codec", Value: []byte(tag)},
				{Key: "empty", Value: []byte{}},
			},
		}
	}
	return recs
}

// TestKgoIdempotentRoundTrip: for each codec, an idempotent kgo producer writes 20k keyed
// records with headers to a 3-partition topic, and a directly assigned consumer reads back
// exactly those records at exactly the acknowledged offsets.
func TestKgoIdempotentRoundTrip(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const n, partitions = 20000, 3
	for _, c := range kgoCodecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "kgo-rt-" + c.name
			createTopic(t, adm, topic, partitions, nil)
			prod := newClient(t, tb.Addr,
				kgo.ProducerBatchCompression(c.codec),
				kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default and needs acks=all
				kgo.ProducerLinger(5*time.Millisecond),
			)
			sent := keyedRecords(topic, c.name, n)
			produceAll(t, ctxFor(t, 2*time.Minute), prod, sent)
			for _, r := range sent {
				if r.ProducerID < 0 {
					t.Fatalf("record %s was produced without a producer id: idempotence not in effect", r.Key)
				}
			}
			// Read-your-writes right after the ack is TestKgoAcksAllReadYourWrites; here
			// the end offsets only have to settle at exactly n.
			eventually(t, 30*time.Second, "end offsets sum to the records produced", func() error {
				ends := endOffsets(t, adm, topic)
				total := int64(0)
				for _, o := range ends {
					total += o
				}
				if total != n {
					return fmt.Errorf("end offsets %v sum to %d, want %d", ends, total, n)
				}
				return nil
			})
			got := consumeExactly(t, tb.Addr, topic, partitions, n)
			verifyRoundTrip(t, sent, got, partitions, c.attr)
		})
	}
}

// TestKgoAcksAllReadYourWrites: once an acks=all produce is acknowledged, ListOffsets
// (latest) and a fetch must already see the record. Kafka completes an acks=all produce
// only when the high watermark has reached the batch's end (DelayedProduce), so a
// producer that got its ack can tell a consumer "it's there" and be right.
func TestKgoAcksAllReadYourWrites(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const topic = "kgo-ryw"
	createTopic(t, adm, topic, 1, nil)
	prod := newClient(t, tb.Addr, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := ctxFor(t, time.Minute)
	for i := 0; i < 300; i++ {
		r := &kgo.Record{Value: []byte(strconv.Itoa(i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if hw := endOffsets(t, adm, topic)[0]; hw <= r.Offset {
			t.Fatalf("record %d acknowledged at offset %d with acks=all, but ListOffsets(latest) right after says %d", i, r.Offset, hw)
		}
	}
}

// TestKgoAcks: acks=1 and acks=0 (non-idempotent) producers; every record is readable.
// With acks=0 the producer learns no offsets, so the check is on content and order.
func TestKgoAcks(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	for _, tc := range []struct {
		name string
		acks kgo.Acks
	}{{"acks1", kgo.LeaderAck()}, {"acks0", kgo.NoAck()}} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "kgo-" + tc.name
			createTopic(t, adm, topic, 1, nil)
			prod := newClient(t, tb.Addr, kgo.RequiredAcks(tc.acks), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
			const n = 2000
			sent := keyedRecords(topic, tc.name, n)
			produceAll(t, ctxFor(t, time.Minute), prod, sent)
			if tc.name == "acks1" {
				for i, r := range sent {
					if r.Offset != int64(i) {
						t.Fatalf("acks=1 record %d acknowledged at offset %d, want %d", i, r.Offset, i)
					}
				}
			}
			// acks=0 has no response to wait for: wait for the high watermark instead.
			eventually(t, 30*time.Second, "all acks=0 records appended", func() error {
				if got := endOffsets(t, adm, topic)[0]; got != n {
					return fmt.Errorf("high watermark %d, want %d", got, n)
				}
				return nil
			})
			got := consumeExactly(t, tb.Addr, topic, 1, n)
			for i, c := range got {
				if c.Offset != int64(i) || string(c.Key) != fmtKey(i) || string(c.Value) != fmtValue(tc.name, i) {
					t.Fatalf("record %d: got %d@%d key %q, want offset %d key %q", i, c.Partition, c.Offset, c.Key, i, fmtKey(i))
				}
			}
		})
	}
}

// TestKgoMessageTooLarge: a batch over the topic's max.message.bytes is refused with
// MESSAGE_TOO_LARGE, surfaced to the producer, and nothing is appended; a small record
// to the same topic still succeeds afterwards.
func TestKgoMessageTooLarge(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const topic = "kgo-too-large"
	createTopic(t, adm, topic, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("1024")})
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idem), func(t *testing.T) {
			// No compression and incompressible bytes: the batch on the wire is really over 1024.
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordRetries(3), kgo.ProducerBatchCompression(kgo.NoCompression())}
			if !idem {
				opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
			}
			prod := newClient(t, tb.Addr, opts...)
			before := endOffsets(t, adm, topic)[0]
			big := &kgo.Record{Value: make([]byte, 4096)}
			if _, err := rand.Read(big.Value); err != nil {
				t.Fatal(err)
			}
			err := prod.ProduceSync(ctxFor(t, 30*time.Second), big).FirstErr()
			if !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("4096-byte record to a topic with max.message.bytes=1024: got error %v, want MESSAGE_TOO_LARGE", err)
			}
			if after := endOffsets(t, adm, topic)[0]; after != before {
				t.Fatalf("high watermark moved from %d to %d after a refused batch", before, after)
			}
			small := &kgo.Record{Value: []byte("fits")}
			if err := prod.ProduceSync(ctxFor(t, 30*time.Second), small).FirstErr(); err != nil {
				t.Fatalf("small record after a refused one: %v", err)
			}
			if small.Offset != before {
				t.Fatalf("small record at offset %d, want %d", small.Offset, before)
			}
		})
	}
}

// TestKgoOffsetOutOfRange: a consumer asking for an offset past the log end (or below the
// log start after DeleteRecords) is told OFFSET_OUT_OF_RANGE and resets as configured.
func TestKgoOffsetOutOfRange(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const topic = "kgo-oor"
	createTopic(t, adm, topic, 1, nil)
	prod := newClient(t, tb.Addr, kgo.DefaultProduceTopic(topic))
	const n = 10
	if err := prod.ProduceSync(ctxFor(t, 30*time.Second), keyedRecords(topic, "oor", n)...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	consumer := func(t *testing.T, start kgo.Offset, reset kgo.Offset) *kgo.Client {
		return newClient(t, tb.Addr,
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: start}}),
			kgo.ConsumeResetOffset(reset),
			kgo.FetchMaxWait(200*time.Millisecond),
		)
	}
	firstRecord := func(t *testing.T, cl *kgo.Client) *kgo.Record {
		t.Helper()
		ctx := ctxFor(t, 30*time.Second)
		for {
			fs := cl.PollRecords(ctx, 1)
			if ctx.Err() != nil {
				t.Fatal("no record before the deadline")
			}
			for _, fe := range fs.Errors() {
				t.Fatalf("fetch error: %v", fe.Err)
			}
			if rs := fs.Records(); len(rs) > 0 {
				return rs[0]
			}
		}
	}

	t.Run("past end, reset to start", func(t *testing.T) {
		r := firstRecord(t, consumer(t, kgo.NewOffset().At(1000), kgo.NewOffset().AtStart()))
		if r.Offset != 0 || string(r.Key) != fmtKey(0) {
			t.Fatalf("after reset to start got %d key %q, want offset 0 key %q", r.Offset, r.Key, fmtKey(0))
		}
	})
	t.Run("past end, no reset: error surfaced", func(t *testing.T) {
		cl := consumer(t, kgo.NoResetOffset().At(1000), kgo.NoResetOffset())
		ctx := ctxFor(t, 30*time.Second)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal("no OFFSET_OUT_OF_RANGE before the deadline")
			}
			if rs := fs.Records(); len(rs) > 0 {
				t.Fatalf("got record at offset %d from a consumer that must not reset", rs[0].Offset)
			}
			if errs := fs.Errors(); len(errs) > 0 {
				if !errors.Is(errs[0].Err, kerr.OffsetOutOfRange) {
					t.Fatalf("fetch at 1000 of a %d-record log: error %v, want OFFSET_OUT_OF_RANGE", n, errs[0].Err)
				}
				return
			}
		}
	})
	t.Run("below start after DeleteRecords", func(t *testing.T) {
		var os kadm.Offsets
		os.AddOffset(topic, 0, 5, -1)
		resp, err := adm.DeleteRecords(ctxFor(t, 30*time.Second), os)
		if err != nil {
			t.Fatalf("DeleteRecords: %v", err)
		}
		if err := resp.Error(); err != nil {
			t.Fatalf("DeleteRecords: %v", err)
		}
		if r, ok := resp.Lookup(topic, 0); !ok || r.LowWatermark != 5 {
			t.Fatalf("DeleteRecords low watermark: %+v, want 5", r)
		}
		so, err := adm.ListStartOffsets(ctxFor(t, 30*time.Second), topic)
		if err != nil || so.Error() != nil {
			t.Fatalf("ListStartOffsets: %v %v", err, so.Error())
		}
		if o, _ := so.Lookup(topic, 0); o.Offset != 5 {
			t.Fatalf("log start offset %d after DeleteRecords to 5", o.Offset)
		}
		r := firstRecord(t, consumer(t, kgo.NewOffset().At(2), kgo.NewOffset().AtStart()))
		if r.Offset != 5 || string(r.Key) != fmtKey(5) {
			t.Fatalf("fetch at 2 below log start 5: got %d key %q, want offset 5 key %q", r.Offset, r.Key, fmtKey(5))
		}
	})
	t.Run("past end, reset to end", func(t *testing.T) {
		cl := consumer(t, kgo.NewOffset().At(1000), kgo.NewOffset().AtEnd())
		// The consumer resets to the end (10) and only sees what is produced from now on.
		// Keep producing until it sees one: its reset may happen after our first produce.
		ctx := ctxFor(t, 30*time.Second)
		for i := 0; ; i++ {
			mark := &kgo.Record{Key: []byte("late"), Value: []byte(strconv.Itoa(i))}
			if err := prod.ProduceSync(ctx, mark).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollRecords(pctx, 1)
			cancel()
			if ctx.Err() != nil {
				t.Fatal("reset-to-end consumer saw nothing before the deadline")
			}
			for _, fe := range fs.Errors() {
				if !errors.Is(fe.Err, context.DeadlineExceeded) {
					t.Fatalf("fetch error: %v", fe.Err)
				}
			}
			if rs := fs.Records(); len(rs) > 0 {
				if string(rs[0].Key) != "late" || rs[0].Offset < n {
					t.Fatalf("reset to end delivered %d key %q, want a record produced after the reset (offset >= %d)", rs[0].Offset, rs[0].Key, n)
				}
				return
			}
		}
	})
}

// TestKadmTopicsAndConfigs: kadm create (with configs), describe, create partitions,
// config describe/alter (incremental and legacy), delete.
func TestKadmTopicsAndConfigs(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	ctx := ctxFor(t, time.Minute)
	const topic = "kadm-topic"

	createTopic(t, adm, topic, 3, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})
	resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	if err == nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("creating %s twice: got %v, want TOPIC_ALREADY_EXISTS", topic, resp.Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("bogus")}, "kadm-bad-config"); err == nil {
		t.Fatal("cleanup.policy=bogus accepted, want INVALID_CONFIG")
	} else if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("cleanup.policy=bogus: %v, want INVALID_CONFIG", err)
	}

	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %+v", topic, d)
	}
	if len(d.Partitions) != 3 {
		t.Fatalf("%s has %d partitions, want 3", topic, len(d.Partitions))
	}
	for _, p := range d.Partitions.Sorted() {
		if p.Err != nil || p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %d: leader %d replicas %v isr %v err %v, want leader 1 with itself as the only replica", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
		}
	}
	if d.ID == (kadm.TopicID{}) {
		t.Fatalf("%s has a zero topic id", topic)
	}

	configValue := func(name string) (string, kmsg.ConfigSource) {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatalf("DescribeTopicConfigs: %v", err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("DescribeTopicConfigs %s: %v %v", topic, err, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == name {
				return c.MaybeValue(), c.Source
			}
		}
		t.Fatalf("DescribeTopicConfigs %s lists no %s", topic, name)
		return "", 0
	}
	if v, src := configValue("retention.ms"); v != "3600000" || src != kmsg.ConfigSourceDynamicTopicConfig { // DYNAMIC_TOPIC_CONFIG
		t.Fatalf("retention.ms = %q (source %v), want 3600000 set on the topic", v, src)
	}
	if v, src := configValue("cleanup.policy"); v != "delete" || src == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy = %q (source %v), want the default delete", v, src)
	}

	// Incremental alter: set one, delete another back to its default.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1048576")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, topic)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	for _, r := range ar {
		if r.Err != nil {
			t.Fatalf("IncrementalAlterConfigs %s: %v %s", r.Name, r.Err, r.ErrMessage)
		}
	}
	if v, _ := configValue("segment.bytes"); v != "1048576" {
		t.Fatalf("segment.bytes = %q after incremental set, want 1048576", v)
	}
	if v, src := configValue("retention.ms"); v != "604800000" || src == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms = %q (source %v) after incremental delete, want the default 604800000", v, src)
	}
	// An invalid value is refused and changes nothing.
	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("not-a-number")}}, topic)
	if err == nil {
		err = ar[0].Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("segment.bytes=not-a-number: %v, want INVALID_CONFIG", err)
	}
	if v, _ := configValue("segment.bytes"); v != "1048576" {
		t.Fatalf("segment.bytes = %q after a refused alter, want it unchanged at 1048576", v)
	}
	// Legacy AlterConfigs replaces the whole set: segment.bytes goes back to default.
	ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("2048")}}, topic)
	if err != nil {
		t.Fatalf("AlterConfigs: %v", err)
	}
	for _, r := range ar {
		if r.Err != nil {
			t.Fatalf("AlterConfigs %s: %v %s", r.Name, r.Err, r.ErrMessage)
		}
	}
	if v, _ := configValue("max.message.bytes"); v != "2048" {
		t.Fatalf("max.message.bytes = %q after legacy alter, want 2048", v)
	}
	if v, src := configValue("segment.bytes"); v != "1073741824" || src == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("segment.bytes = %q (source %v) after legacy alter without it, want the default 1073741824", v, src)
	}

	// Create partitions: 3 -> 5, then a producer can write to partition 4.
	cp, err := adm.UpdatePartitions(ctx, 5, topic)
	if err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	if r, _ := cp.On(topic, nil); r.Err != nil {
		t.Fatalf("CreatePartitions: %v %s", r.Err, r.ErrMessage)
	}
	eventually(t, 10*time.Second, "5 partitions in metadata", func() error {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		if n := len(td[topic].Partitions); n != 5 {
			return fmt.Errorf("%d partitions", n)
		}
		return nil
	})
	prod := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: topic, Partition: 4, Value: []byte("p4")}
	if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil || r.Offset != 0 {
		t.Fatalf("produce to new partition 4: offset %d err %v", r.Offset, err)
	}

	// Delete: the topic disappears from metadata and can be created again, empty.
	dr, err := adm.DeleteTopics(ctx, topic)
	if err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	if r, _ := dr.On(topic, nil); r.Err != nil {
		t.Fatalf("DeleteTopics: %v %s", r.Err, r.ErrMessage)
	}
	eventually(t, 10*time.Second, topic+" gone from metadata", func() error {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		if td.Has(topic) {
			return errors.New("still listed")
		}
		return nil
	})
	if dr, err := adm.DeleteTopics(ctx, "kadm-never-existed"); err == nil {
		if r, _ := dr.On("kadm-never-existed", nil); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("deleting a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
		}
	} else if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleting a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	// A fresh client: kgo caches metadata briefly, and this one still remembers 5 partitions.
	adm2 := newAdmin(t, tb.Addr)
	createTopic(t, adm2, topic, 2, nil)
	if got := endOffsets(t, adm2, topic); len(got) != 2 || got[0] != 0 || got[1] != 0 {
		t.Fatalf("re-created %s has end offsets %v, want two empty partitions", topic, got)
	}

	// Cluster: one broker, a cluster id, this broker as controller.
	bm, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if len(bm.Brokers) != 1 || bm.Brokers[0].NodeID != 1 || bm.Cluster == "" {
		t.Fatalf("cluster metadata: brokers %+v cluster %q, want one broker with id 1 and a cluster id", bm.Brokers, bm.Cluster)
	}
}

// TestKgoAcrossRestart: records acknowledged before a broker restart are all there after
// it, and the same idempotent producer (same producer id, sequences continuing) keeps
// producing after reconnecting, with no gap or duplicate.
func TestKgoAcrossRestart(t *testing.T) {
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const topic, partitions, half = "kgo-restart", 3, 3000
	createTopic(t, adm, topic, partitions, nil)
	prod := newClient(t, tb.Addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	sent := keyedRecords(topic, "restart", 2*half)
	produceAll(t, ctxFor(t, time.Minute), prod, sent[:half])
	pid := sent[0].ProducerID

	tb.Restart()

	produceAll(t, ctxFor(t, time.Minute), prod, sent[half:])
	for _, r := range sent[half:] {
		if r.ProducerID != pid {
			t.Fatalf("record %s: producer id %d after restart, want the same %d (no reset of an idempotent producer that saw no error)", r.Key, r.ProducerID, pid)
		}
	}
	got := consumeExactly(t, tb.Addr, topic, partitions, len(sent))
	verifyRoundTrip(t, sent, got, partitions, 4)
}
