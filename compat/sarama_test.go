package compat

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/exactq/exactq/internal/testbroker"
)

// saramaVersions are the protocol versions sarama is told the cluster speaks: the newest
// sarama knows, its default (2.8, "full protocol coverage"), and the oldest with record
// headers and idempotence (0.11: Produce v3, Fetch v5).
var saramaVersions = []struct {
	name    string
	version sarama.KafkaVersion
}{
	{"max", sarama.MaxVersion},
	{"2.8", sarama.V2_8_0_0},
	{"0.11", sarama.V0_11_0_0},
}

var saramaCodecs = []struct {
	name  string
	codec sarama.CompressionCodec
	min   sarama.KafkaVersion // oldest protocol version that may carry the codec
}{
	{"none", sarama.CompressionNone, sarama.V0_11_0_0},
	{"gzip", sarama.CompressionGZIP, sarama.V0_11_0_0},
	{"snappy", sarama.CompressionSnappy, sarama.V0_11_0_0},
	{"lz4", sarama.CompressionLZ4, sarama.V0_11_0_0},
	{"zstd", sarama.CompressionZSTD, sarama.V2_1_0_0},
}

func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "exactq-compat-sarama"
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Net.ReadTimeout = 30 * time.Second
	cfg.Net.WriteTimeout = 30 * time.Second
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Admin.Timeout = 30 * time.Second
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	return cfg
}

func newSaramaAdmin(t *testing.T, addr string, v sarama.KafkaVersion) sarama.ClusterAdmin {
	t.Helper()
	adm, err := sarama.NewClusterAdmin([]string{addr}, saramaConfig(v))
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin (%s): %v", v, err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

// TestSaramaIdempotentRoundTrip: for each protocol version and codec, an idempotent
// SyncProducer (acks=all, one request in flight) writes 5k keyed records with headers
// across 3 partitions; sarama's partition consumers read back exactly those records at the
// offsets the producer was given.
func TestSaramaIdempotentRoundTrip(t *testing.T) {
	tb := testbroker.Start(t)
	const n, partitions = 5000, 3
	for _, sv := range saramaVersions {
		t.Run(sv.name, func(t *testing.T) {
			adm := newSaramaAdmin(t, tb.Addr, sv.version)
			for _, c := range saramaCodecs {
				if !sv.version.IsAtLeast(c.min) {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					topic := fmt.Sprintf("sarama-%s-%s", sv.name, c.name)
					if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
						t.Fatalf("CreateTopic %s: %v", topic, err)
					}
					sent := saramaProduce(t, tb.Addr, sv.version, c.codec, topic, n)
					saramaConsumeAndVerify(t, tb.Addr, sv.version, topic, partitions, sent)
				})
			}
		})
	}
}

// saramaProduce sends n records through an idempotent SyncProducer in batches and returns
// them with the partition and offset each was acknowledged at.
func saramaProduce(t *testing.T, addr string, v sarama.KafkaVersion, codec sarama.CompressionCodec, topic string, n int) []*sarama.ProducerMessage {
	t.Helper()
	cfg := saramaConfig(v)
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = codec
	cfg.Producer.Flush.Messages = 200
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("NewSyncProducer (%s): %v", v, err)
	}
	defer func() {
		if err := prod.Close(); err != nil {
			t.Errorf("close producer: %v", err)
		}
	}()
	msgs := make([]*sarama.ProducerMessage, n)
	base := time.Now().Add(-time.Hour).UnixMilli() // explicit CreateTimes, checked on the way back
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{
			Topic:     topic,
			Timestamp: time.UnixMilli(base + int64(i)),
			Key:       sarama.StringEncoder(fmtKey(i)),
			Value:     sarama.StringEncoder(fmtValue("sarama", i)),
			Headers: []sarama.RecordHeader{
				{Key: []byte("index"), Value: []byte(strconv.Itoa(i))},
				{Key: []byte("client"), Value: []byte("sarama")},
			},
		}
	}
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		if err := prod.SendMessages(msgs[i:min(i+chunk, n)]); err != nil {
			var perrs sarama.ProducerErrors
			if errors.As(err, &perrs) && len(perrs) > 0 {
				t.Fatalf("%d records failed to produce; first: %v", len(perrs), perrs[0].Err)
			}
			t.Fatalf("SendMessages: %v", err)
		}
	}
	return msgs
}

// saramaConsumeAndVerify reads every partition of topic from the oldest offset with
// sarama's partition consumer and checks it against sent.
func saramaConsumeAndVerify(t *testing.T, addr string, v sarama.KafkaVersion, topic string, partitions int32, sent []*sarama.ProducerMessage) {
	t.Helper()
	byPart := map[int32][]*sarama.ProducerMessage{}
	for _, m := range sent {
		byPart[m.Partition] = append(byPart[m.Partition], m)
	}
	cons, err := sarama.NewConsumer([]string{addr}, saramaConfig(v))
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer cons.Close()
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for p := int32(0); p < partitions; p++ {
		want := byPart[p]
		if len(want) == 0 {
			t.Errorf("partition %d got no records; keyed records should spread over all %d partitions", p, partitions)
			continue
		}
		// The producer was told offsets 0..len-1, in send order.
		for i, m := range want {
			if m.Offset != int64(i) {
				t.Fatalf("partition %d: record %d acknowledged at offset %d, want %d", p, i, m.Offset, i)
			}
		}
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition %s[%d]: %v", topic, p, err)
		}
		for i := 0; i < len(want); i++ {
			var got *sarama.ConsumerMessage
			select {
			case got = <-pc.Messages():
			case cerr := <-pc.Errors():
				pc.Close()
				t.Fatalf("consume %s[%d]: %v", topic, p, cerr)
			case <-deadline.C:
				pc.Close()
				t.Fatalf("partition %d: consumed %d of %d records before the deadline", p, i, len(want))
			}
			s := want[i]
			sk, _ := s.Key.Encode()
			sv, _ := s.Value.Encode()
			if got.Offset != int64(i) || !bytes.Equal(got.Key, sk) || !bytes.Equal(got.Value, sv) {
				pc.Close()
				t.Fatalf("partition %d record %d: got offset %d key %q, want offset %d key %q (value equal: %v)", p, i, got.Offset, got.Key, i, sk, bytes.Equal(got.Value, sv))
			}
			if len(got.Headers) != len(s.Headers) {
				pc.Close()
				t.Fatalf("partition %d offset %d: %d headers, want %d", p, i, len(got.Headers), len(s.Headers))
			}
			for h := range s.Headers {
				if !bytes.Equal(got.Headers[h].Key, s.Headers[h].Key) || !bytes.Equal(got.Headers[h].Value, s.Headers[h].Value) {
					pc.Close()
					t.Fatalf("partition %d offset %d header %d: got %q=%q, want %q=%q", p, i, h, got.Headers[h].Key, got.Headers[h].Value, s.Headers[h].Key, s.Headers[h].Value)
				}
			}
			if got.Timestamp.UnixMilli() != s.Timestamp.UnixMilli() {
				pc.Close()
				t.Fatalf("partition %d offset %d: timestamp %v, want the producer's %v", p, i, got.Timestamp, s.Timestamp)
			}
		}
		if hwm := pc.HighWaterMarkOffset(); hwm != int64(len(want)) {
			pc.Close()
			t.Fatalf("partition %d: high watermark %d after consuming, want %d", p, hwm, len(want))
		}
		if err := pc.Close(); err != nil {
			t.Fatalf("close partition consumer: %v", err)
		}
	}
}

// TestSaramaClusterAdmin: ClusterAdmin topic and config administration at the newest and
// the default protocol versions.
func TestSaramaClusterAdmin(t *testing.T) {
	tb := testbroker.Start(t)
	for _, sv := range saramaVersions[:2] {
		t.Run(sv.name, func(t *testing.T) {
			adm := newSaramaAdmin(t, tb.Addr, sv.version)
			topic := "sarama-admin-" + sv.name
			doomed := "sarama-doomed-" + sv.name
			retention := "86400000"
			detail := &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &retention}}
			if err := adm.CreateTopic(topic, detail, false); err != nil {
				t.Fatalf("CreateTopic: %v", err)
			}
			if err := adm.CreateTopic(topic, detail, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
				t.Fatalf("CreateTopic twice: %v, want %v", err, sarama.ErrTopicAlreadyExists)
			}
			if err := adm.CreateTopic(doomed, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
				t.Fatalf("CreateTopic %s: %v", doomed, err)
			}
			// validateOnly creates nothing.
			if err := adm.CreateTopic("sarama-validate-only", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, true); err != nil {
				t.Fatalf("CreateTopic validateOnly: %v", err)
			}

			topics, err := adm.ListTopics()
			if err != nil {
				t.Fatalf("ListTopics: %v", err)
			}
			d, ok := topics[topic]
			if !ok {
				t.Fatalf("ListTopics does not list %s: %v", topic, keys(topics))
			}
			if d.NumPartitions != 3 || d.ReplicationFactor != 1 {
				t.Fatalf("ListTopics %s: %d partitions, replication %d; want 3 and 1", topic, d.NumPartitions, d.ReplicationFactor)
			}
			if v := d.ConfigEntries["retention.ms"]; v == nil || *v != retention {
				t.Fatalf("ListTopics %s: retention.ms %v, want %s (set at create)", topic, v, retention)
			}
			if _, ok := topics[doomed]; !ok {
				t.Fatalf("ListTopics does not list %s", doomed)
			}
			if _, ok := topics["sarama-validate-only"]; ok {
				t.Fatal("a validateOnly CreateTopic created the topic")
			}

			entry := func(name string) sarama.ConfigEntry {
				t.Helper()
				entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
				if err != nil {
					t.Fatalf("DescribeConfig: %v", err)
				}
				for _, e := range entries {
					if e.Name == name {
						return e
					}
				}
				t.Fatalf("DescribeConfig %s lists no %s", topic, name)
				return sarama.ConfigEntry{}
			}
			if e := entry("retention.ms"); e.Value != retention || e.Default {
				t.Fatalf("retention.ms: %+v, want %s, not default", e, retention)
			}
			if e := entry("cleanup.policy"); e.Value != "delete" {
				t.Fatalf("cleanup.policy: %+v, want the default delete", e)
			}

			// Legacy AlterConfig replaces the topic's overrides.
			maxBytes := "524288"
			if err := adm.AlterConfig(sarama.TopicResource, topic, map[string]*string{"max.message.bytes": &maxBytes}, false); err != nil {
				t.Fatalf("AlterConfig: %v", err)
			}
			if e := entry("max.message.bytes"); e.Value != maxBytes {
				t.Fatalf("max.message.bytes after AlterConfig: %q, want %s", e.Value, maxBytes)
			}
			if e := entry("retention.ms"); e.Value != "604800000" {
				t.Fatalf("retention.ms after a legacy AlterConfig without it: %q, want the default 604800000", e.Value)
			}
			if sv.version.IsAtLeast(sarama.V2_3_0_0) {
				segBytes := "2097152"
				if err := adm.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
					"segment.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &segBytes},
				}, false); err != nil {
					t.Fatalf("IncrementalAlterConfig: %v", err)
				}
				if e := entry("segment.bytes"); e.Value != segBytes {
					t.Fatalf("segment.bytes after IncrementalAlterConfig: %q, want %s", e.Value, segBytes)
				}
				if e := entry("max.message.bytes"); e.Value != maxBytes {
					t.Fatalf("max.message.bytes after an incremental alter of another key: %q, want it kept at %s", e.Value, maxBytes)
				}
			}
			bad := "-5"
			if err := adm.AlterConfig(sarama.TopicResource, topic, map[string]*string{"segment.bytes": &bad}, false); err == nil {
				t.Fatal("segment.bytes=-5 accepted")
			}

			if err := adm.CreatePartitions(topic, 4, nil, false); err != nil {
				t.Fatalf("CreatePartitions to 4: %v", err)
			}
			md, err := adm.DescribeTopics([]string{topic})
			if err != nil || len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrNoError) {
				t.Fatalf("DescribeTopics: %v %+v", err, md)
			}
			if len(md[0].Partitions) != 4 {
				t.Fatalf("DescribeTopics after CreatePartitions: %d partitions, want 4", len(md[0].Partitions))
			}
			brokers, controller, err := adm.DescribeCluster()
			if err != nil || len(brokers) != 1 || brokers[0].ID() != 1 || controller != 1 {
				t.Fatalf("DescribeCluster: brokers %v controller %d err %v; want broker 1 as controller", brokers, controller, err)
			}

			if err := adm.DeleteTopic(doomed); err != nil {
				t.Fatalf("DeleteTopic: %v", err)
			}
			if err := adm.DeleteTopic(doomed); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				t.Fatalf("DeleteTopic of a deleted topic: %v, want %v", err, sarama.ErrUnknownTopicOrPartition)
			}
			topics, err = adm.ListTopics()
			if err != nil {
				t.Fatalf("ListTopics: %v", err)
			}
			if _, ok := topics[doomed]; ok {
				t.Fatalf("ListTopics still lists %s after DeleteTopic", doomed)
			}
			if _, ok := topics[topic]; !ok {
				t.Fatalf("ListTopics lost %s", topic)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
