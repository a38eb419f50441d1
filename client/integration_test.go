package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Integration tests against exactq's in-process broker (internal/testbroker).

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newTestAdmin(t *testing.T, addr string) *Admin {
	t.Helper()
	a, err := NewAdmin(AdminConfig{Brokers: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func createTopic(t *testing.T, a *Admin, name string, partitions int32) {
	t.Helper()
	if _, err := a.CreateTopics(testCtx(t), false, NewTopic{Name: name, Partitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

func TestIntegrationAdminTopicLifecycle(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithoutAutoCreate())
	a := newTestAdmin(t, b.Addr)
	ctx := testCtx(t)

	// Validate-only creates nothing.
	if _, err := a.CreateTopics(ctx, true, NewTopic{Name: "life", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatalf("validate-only: %v", err)
	}
	if names, _ := a.ListTopics(ctx); contains(names, "life") {
		t.Fatal("validate-only created the topic")
	}
	res, err := a.CreateTopics(ctx, false, NewTopic{Name: "life", Partitions: 2, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "3600000"}})
	if err != nil || len(res) != 1 || res[0].ID == [16]byte{} {
		t.Fatalf("create: %+v, %v", res, err)
	}
	if _, err := a.CreateTopics(ctx, false, NewTopic{Name: "life", Partitions: 2, ReplicationFactor: 1}); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create twice: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	names, err := a.ListTopics(ctx)
	if err != nil || !contains(names, "life") {
		t.Fatalf("list: %v, %v", names, err)
	}
	details, err := a.DescribeTopics(ctx, "life")
	if err != nil || len(details) != 1 || len(details[0].Partitions) != 2 || details[0].Partitions[0].Leader < 0 {
		t.Fatalf("describe: %+v, %v", details, err)
	}
	if _, err := a.DescribeTopics(ctx, "nope"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("describe unknown: %v", err)
	}

	// Configs: describe, alter incrementally, describe again.
	topicRes := ConfigResource{Type: TopicResource, Name: "life"}
	if v := configValue(t, a, topicRes, "retention.ms"); v != "3600000" {
		t.Fatalf("retention.ms = %q", v)
	}
	if _, err := a.IncrementalAlterConfigs(ctx, false, map[ConfigResource][]AlterConfig{
		topicRes: {{Name: "retention.ms", Op: OpSet, Value: "7200000"}, {Name: "cleanup.policy", Op: OpSet, Value: "compact"}},
	}); err != nil {
		t.Fatalf("alter: %v", err)
	}
	if v := configValue(t, a, topicRes, "retention.ms"); v != "7200000" {
		t.Fatalf("after alter retention.ms = %q", v)
	}
	if _, err := a.IncrementalAlterConfigs(ctx, false, map[ConfigResource][]AlterConfig{
		topicRes: {{Name: "retention.ms", Op: OpDelete}},
	}); err != nil {
		t.Fatalf("alter delete: %v", err)
	}
	if _, err := a.IncrementalAlterConfigs(ctx, false, map[ConfigResource][]AlterConfig{
		topicRes: {{Name: "no.such.config", Op: OpSet, Value: "1"}},
	}); err == nil {
		t.Fatal("unknown config accepted")
	}

	// Partitions.
	if _, err := a.CreatePartitions(ctx, false, map[string]int32{"life": 4}); err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	if details, _ = a.DescribeTopics(ctx, "life"); len(details[0].Partitions) != 4 {
		t.Fatalf("partitions after CreatePartitions: %d", len(details[0].Partitions))
	}
	if _, err := a.CreatePartitions(ctx, false, map[string]int32{"life": 2}); !errors.Is(err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking: %v, want INVALID_PARTITIONS", err)
	}

	// Cluster.
	info, err := a.DescribeCluster(ctx)
	if err != nil || len(info.Brokers) != 1 || info.Brokers[0].Addr() != b.Addr {
		t.Fatalf("describe cluster: %+v, %v", info, err)
	}

	// Delete.
	if _, err := a.DeleteTopics(ctx, "life"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := a.DeleteTopics(ctx, "life"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete twice: %v", err)
	}
	if names, _ := a.ListTopics(ctx); contains(names, "life") {
		t.Fatal("topic still listed after delete")
	}
}

func configValue(t *testing.T, a *Admin, r ConfigResource, name string) string {
	t.Helper()
	rcs, err := a.DescribeConfigs(testCtx(t), r)
	if err != nil || len(rcs) != 1 {
		t.Fatalf("describe configs: %+v, %v", rcs, err)
	}
	for _, c := range rcs[0].Configs {
		if c.Name == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// testRecord is record i of a produce/consume round trip.
func testRecord(topic string, i int) *Record {
	r := &Record{
		Topic:   topic,
		Key:     []byte(fmt.Sprintf("key-%d", i%997)),
		Value:   bytes.Repeat([]byte(fmt.Sprintf("value-%d;", i)), 1+i%5),
		Headers: []Header{{Key: "i", Value: []byte(fmt.Sprint(i))}, {Key: "dup", Value: nil}},
	}
	if i%101 == 0 {
		r.Key = nil // unkeyed: sticky partitioning
	}
	return r
}

// TestIntegrationRoundTripEveryCodec produces 20k records with keys, values and headers to
// 3 partitions with each codec, then reads them back with our consumer (sessions on) and
// with franz-go's kgo (an independent implementation), comparing per-partition order.
func TestIntegrationRoundTripEveryCodec(t *testing.T) {
	const n = 20000
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	for _, codec := range []Compression{NoCompression, Gzip, Snappy, LZ4, Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			topic := "rt-" + codec.String()
			createTopic(t, a, topic, 3)
			ctx := testCtx(t)
			p, err := NewProducer(ProducerConfig{Brokers: []string{b.Addr}, Compression: codec, Linger: 2 * time.Millisecond, BatchMaxBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			want := map[int32][]*Record{}
			var mu sync.Mutex
			var perr error
			for i := 0; i < n; i++ {
				p.Produce(ctx, testRecord(topic, i), func(r *Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						perr = err
						return
					}
					want[r.Partition] = append(want[r.Partition], r)
				})
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if perr != nil {
				t.Fatalf("produce: %v", perr)
			}
			for part, rs := range want {
				for i, r := range rs {
					if r.Offset != int64(i) {
						t.Fatalf("partition %d record %d acked at offset %d", part, i, r.Offset)
					}
					if r.Key != nil && KeyPartition(r.Key, 3) != part {
						t.Fatalf("key %q went to partition %d", r.Key, part)
					}
				}
			}

			got := consumeAll(t, b.Addr, topic, 3, n, ConsumerConfig{})
			comparePartitions(t, "exactq consumer", want, got)
			comparePartitions(t, "kgo consumer", want, consumeWithKgo(t, b.Addr, topic, n))
		})
	}
}

// consumeAll reads n records from partitions [0, nparts) of topic from the start.
func consumeAll(t *testing.T, addr, topic string, nparts int32, n int, cfg ConsumerConfig) map[int32][]*Record {
	t.Helper()
	cfg.Brokers = []string{addr}
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	assign := map[TopicPartition]Offset{}
	for p := int32(0); p < nparts; p++ {
		assign[TopicPartition{topic, p}] = Earliest
	}
	c.Assign(assign)
	got := map[int32][]*Record{}
	ctx := testCtx(t)
	for total := 0; total < n; {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", total, err)
		}
		for _, r := range recs {
			got[r.Partition] = append(got[r.Partition], r)
		}
		total += len(recs)
	}
	return got
}

func consumeWithKgo(t *testing.T, addr, topic string, n int) map[int32][]*Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]*Record{}
	ctx := testCtx(t)
	for total := 0; total < n; {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("kgo poll: %v", errs)
		}
		fs.EachRecord(func(kr *kgo.Record) {
			r := &Record{Topic: kr.Topic, Partition: kr.Partition, Key: kr.Key, Value: kr.Value, Offset: kr.Offset, Timestamp: kr.Timestamp}
			for _, h := range kr.Headers {
				r.Headers = append(r.Headers, Header{Key: h.Key, Value: h.Value})
			}
			got[kr.Partition] = append(got[kr.Partition], r)
			total++
		})
	}
	return got
}

func comparePartitions(t *testing.T, who string, want, got map[int32][]*Record) {
	t.Helper()
	for part, ws := range want {
		gs := got[part]
		if len(gs) != len(ws) {
			t.Fatalf("%s: partition %d has %d records, want %d", who, part, len(gs), len(ws))
		}
		for i := range ws {
			w, g := ws[i], gs[i]
			if !bytes.Equal(w.Key, g.Key) || (w.Key == nil) != (g.Key == nil) || !bytes.Equal(w.Value, g.Value) ||
				g.Offset != int64(i) || g.Timestamp.UnixMilli() != w.Timestamp.UnixMilli() || len(g.Headers) != len(w.Headers) {
				t.Fatalf("%s: partition %d record %d: got %+v, want %+v", who, part, i, g, w)
			}
			for j := range w.Headers {
				if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
					t.Fatalf("%s: partition %d record %d header %d differs", who, part, i, j)
				}
			}
		}
	}
}

// TestIntegrationConsumerSeekAndOffsets covers ListOffsets, Seek into the middle of a
// batch, Latest, DeleteRecords and the OFFSET_OUT_OF_RANGE reset.
func TestIntegrationConsumerSeekAndOffsets(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "seek", 1)
	ctx := testCtx(t)
	p, err := NewProducer(ProducerConfig{Brokers: []string{b.Addr}, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < 100; i++ {
		p.Produce(ctx, &Record{Topic: "seek", Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := p.Flush(ctx); err != nil { // one batch of 100: Linger holds them together
		t.Fatal(err)
	}
	tp := TopicPartition{"seek", 0}
	offs, err := a.ListOffsets(ctx, ReadUncommitted, map[TopicPartition]int64{tp: int64(Latest)})
	if err != nil || offs[tp].Offset != 100 {
		t.Fatalf("latest: %+v, %v", offs, err)
	}

	c, err := NewConsumer(ConsumerConfig{Brokers: []string{b.Addr}, FetchMaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Assign(map[TopicPartition]Offset{tp: 42})
	recs, err := c.Poll(ctx)
	if err != nil || len(recs) == 0 || recs[0].Offset != 42 || string(recs[0].Value) != "42" {
		t.Fatalf("poll from 42: first %+v, %v", first(recs), err)
	}
	if err := c.Seek(tp, 7); err != nil {
		t.Fatal(err)
	}
	recs, err = c.Poll(ctx)
	if err != nil || recs[0].Offset != 7 || len(recs) != 93 {
		t.Fatalf("poll after seek to 7: %d records, first %+v, %v", len(recs), first(recs), err)
	}

	// Records deleted below 50: a consumer at 10 is out of range and resets to Earliest.
	res, err := a.DeleteRecords(ctx, map[TopicPartition]int64{tp: 50})
	if err != nil || res[tp].LowWatermark != 50 {
		t.Fatalf("delete records: %+v, %v", res, err)
	}
	offs, _ = a.ListOffsets(ctx, ReadUncommitted, map[TopicPartition]int64{tp: int64(Earliest)})
	if offs[tp].Offset != 50 {
		t.Fatalf("earliest after delete: %+v", offs[tp])
	}
	_ = c.Seek(tp, 10)
	recs, err = c.Poll(ctx)
	if err != nil || recs[0].Offset != 50 {
		t.Fatalf("poll after out-of-range: first %+v, %v", first(recs), err)
	}

	strict, err := NewConsumer(ConsumerConfig{Brokers: []string{b.Addr}, ResetNone: true})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	strict.Assign(map[TopicPartition]Offset{tp: 10})
	if _, err := strict.Poll(ctx); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("ResetNone: %v, want OFFSET_OUT_OF_RANGE", err)
	}
}

func first(rs []*Record) *Record {
	if len(rs) == 0 {
		return nil
	}
	return rs[0]
}

// TestIntegrationIdempotentRetriesAfterRestart restarts the broker while records are in
// flight: the producer reconnects and resends with the same sequences, and the log ends up
// with every record exactly once and in order.
func TestIntegrationIdempotentRetriesAfterRestart(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "idem", 1)
	ctx := testCtx(t)
	p, err := NewProducer(ProducerConfig{Brokers: []string{b.Addr}, BatchMaxBytes: 1 << 10, Net: NetConfig{RetryBackoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 5000
	var mu sync.Mutex
	var perr error
	for i := 0; i < n; i++ {
		if i == n/2 {
			b.Restart()
		}
		p.Produce(ctx, &Record{Topic: "idem", Value: []byte(fmt.Sprintf("%06d", i))}, func(_ *Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && perr == nil {
				perr = err
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}
	got := consumeAll(t, b.Addr, "idem", 1, n, ConsumerConfig{})
	if len(got[0]) != n {
		t.Fatalf("%d records, want %d", len(got[0]), n)
	}
	for i, r := range got[0] {
		if string(r.Value) != fmt.Sprintf("%06d", i) {
			var seq []string
			for j := max(0, i-3); j < min(len(got[0]), i+60); j++ {
				seq = append(seq, fmt.Sprintf("%d:%s", got[0][j].Offset, got[0][j].Value))
			}
			t.Logf("around: %v", seq)
			t.Fatalf("record %d is %q: duplicates or reordering", i, r.Value)
		}
	}
}

// TestIntegrationFetchSessions checks that the consumer really runs an incremental fetch
// session with the broker, and that sessionless full fetches read the same records.
func TestIntegrationFetchSessions(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "sess", 3)
	ctx := testCtx(t)
	p, err := NewProducer(ProducerConfig{Brokers: []string{b.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < 3000; i++ {
		p.Produce(ctx, testRecord("sess", i), nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	c, err := NewConsumer(ConsumerConfig{Brokers: []string{b.Addr}, FetchMaxPartitionBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Assign(map[TopicPartition]Offset{{"sess", 0}: Earliest, {"sess", 1}: Earliest, {"sess", 2}: Earliest})
	total := 0
	for total < 3000 {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += len(recs)
	}
	c.mu.Lock()
	s := c.sessions[1]
	id, epoch := s.id, s.epoch
	c.mu.Unlock()
	if id == 0 || epoch < 2 {
		t.Fatalf("session id %d epoch %d: the consumer did not use an incremental session", id, epoch)
	}

	got := consumeAll(t, b.Addr, "sess", 3, 3000, ConsumerConfig{DisableFetchSessions: true})
	withSessions := consumeAll(t, b.Addr, "sess", 3, 3000, ConsumerConfig{FetchMaxPartitionBytes: 4 << 10})
	comparePartitions(t, "sessionless vs session", withSessions, got)
}

// BenchmarkProducerThroughput produces records with 100-byte values to a 3-partition
// topic of the in-process broker (fsync per group commit, as configured by testbroker).
func BenchmarkProducerThroughput(b *testing.B) {
	for _, bc := range []struct {
		name  string
		codec Compression
		size  int
	}{
		{"none-100B", NoCompression, 100},
		{"lz4-100B", LZ4, 100},
		{"zstd-100B", Zstd, 100},
		{"none-1KiB", NoCompression, 1024},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tb := testbroker.Start(b)
			a, err := NewAdmin(AdminConfig{Brokers: []string{tb.Addr}})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			ctx := context.Background()
			if _, err := a.CreateTopics(ctx, false, NewTopic{Name: "bench", Partitions: 3, ReplicationFactor: 1}); err != nil {
				b.Fatal(err)
			}
			p, err := NewProducer(ProducerConfig{Brokers: []string{tb.Addr}, Compression: bc.codec, Linger: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			value := bytes.Repeat([]byte("0123456789abcdef"), bc.size/16+1)[:bc.size]
			if err := p.ProduceSync(ctx, &Record{Topic: "bench", Value: value}); err != nil {
				b.Fatal(err)
			}
			var failed error
			var mu sync.Mutex
			cb := func(_ *Record, err error) {
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
			b.SetBytes(int64(bc.size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.Produce(ctx, &Record{Topic: "bench", Key: []byte(fmt.Sprint(i)), Value: value}, cb)
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if failed != nil {
				b.Fatal(failed)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
