package broker_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/cluster/upgrade"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

// pipeline writes every request on one connection before reading any answer, then reads
// the answers in order: the broker handles a connection's requests one at a time, so each
// request sees what the ones before it did.
func pipeline(t *testing.T, addr string, reqs ...kmsg.Request) []kmsg.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var frames []byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipeline"))
	for i, r := range reqs {
		frames = append(frames, f.AppendRequest(nil, r, int32(i))...) // it sizes the whole buffer
	}
	if _, err := conn.Write(frames); err != nil {
		t.Fatal(err)
	}
	out := make([]kmsg.Response, len(reqs))
	for i, r := range reqs {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != int32(i) {
			t.Fatalf("correlation id %d, want %d", got, i)
		}
		body = body[4:]
		resp := r.ResponseKind()
		resp.SetVersion(r.GetVersion())
		if resp.IsFlexible() && r.Key() != 18 {
			body = body[1:] // empty tagged fields of response header v1
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("decode response %d (key %d): %v", i, r.Key(), err)
		}
		out[i] = resp
	}
	return out
}

func produceReq(topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func metadataReq(topic string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	return req
}

func listOffsetsReq(topic string, partition int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func producePartition(resp kmsg.Response) kmsg.ProduceResponseTopicPartition {
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// Every admin answer is applied on the broker before it is sent: requests pipelined on
// one connection right behind CreateTopics, IncrementalAlterConfigs, CreatePartitions and
// DeleteTopics see their effect (produce, metadata, describe configs), with no retry.
func TestAdminAnswerVisibleOnSameConnection(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithoutAutoCreate())
	const topic = "fresh"
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 3, 1
	create.Topics = append(create.Topics, ct)

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.SetVersion(1)
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "retention.ms", kmsg.StringPtr("1234567")
	ar.Configs = append(ar.Configs, ac)
	alter.Resources = append(alter.Resources, ar)

	describe := kmsg.NewPtrDescribeConfigsRequest()
	describe.SetVersion(4)
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"retention.ms"}
	describe.Resources = append(describe.Resources, dr)

	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.SetVersion(3)
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = topic, 5
	grow.Topics = append(grow.Topics, gt)
	grow.TimeoutMillis = 10000

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TopicNames = []string{topic}

	resps := pipeline(t, tb.Addr,
		create, produceReq(topic, 2, rawBatch(t, -1, -1, -1, 3)), metadataReq(topic),
		alter, describe,
		grow, produceReq(topic, 4, rawBatch(t, -1, -1, -1, 1)), metadataReq(topic),
		del, metadataReq(topic), produceReq(topic, 0, rawBatch(t, -1, -1, -1, 1)))

	if c := resps[0].(*kmsg.CreateTopicsResponse).Topics[0]; c.ErrorCode != 0 || c.NumPartitions != 3 {
		t.Fatalf("create: code %d, %d partitions", c.ErrorCode, c.NumPartitions)
	}
	if p := producePartition(resps[1]); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce right after create: code %d, base offset %d", p.ErrorCode, p.BaseOffset)
	}
	if m := resps[2].(*kmsg.MetadataResponse).Topics[0]; m.ErrorCode != 0 || len(m.Partitions) != 3 {
		t.Fatalf("metadata right after create: code %d, %d partitions", m.ErrorCode, len(m.Partitions))
	}
	if a := resps[3].(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; a.ErrorCode != 0 {
		t.Fatalf("alter: code %d", a.ErrorCode)
	}
	d := resps[4].(*kmsg.DescribeConfigsResponse).Resources[0]
	if d.ErrorCode != 0 || len(d.Configs) != 1 || d.Configs[0].Value == nil || *d.Configs[0].Value != "1234567" {
		t.Fatalf("describe right after alter: code %d, configs %+v", d.ErrorCode, d.Configs)
	}
	if g := resps[5].(*kmsg.CreatePartitionsResponse).Topics[0]; g.ErrorCode != 0 {
		t.Fatalf("create partitions: code %d", g.ErrorCode)
	}
	if p := producePartition(resps[6]); p.ErrorCode != 0 {
		t.Fatalf("produce to a new partition right after CreatePartitions: code %d", p.ErrorCode)
	}
	if m := resps[7].(*kmsg.MetadataResponse).Topics[0]; len(m.Partitions) != 5 {
		t.Fatalf("metadata right after CreatePartitions: %d partitions, want 5", len(m.Partitions))
	}
	if dt := resps[8].(*kmsg.DeleteTopicsResponse).Topics[0]; dt.ErrorCode != 0 {
		t.Fatalf("delete: code %d", dt.ErrorCode)
	}
	if m := resps[9].(*kmsg.MetadataResponse).Topics[0]; m.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata right after delete: code %d, want UNKNOWN_TOPIC_OR_PARTITION", m.ErrorCode)
	}
	if p := producePartition(resps[10]); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce right after delete: code %d, want UNKNOWN_TOPIC_OR_PARTITION", p.ErrorCode)
	}
	// The deleted topic's logs are gone by the time DeleteTopics was answered.
	if left := dataDirEntries(t, tb.DataDir, topic+"-"); len(left) != 0 {
		t.Fatalf("deleted topic's directories left: %v", left)
	}
}

// Metadata's auto-creation answers the new topic with its partitions, and the producer
// right behind it on the connection can write to it.
func TestAutoCreatedTopicServedAtOnce(t *testing.T) {
	tb := testbroker.Start(t)
	md := metadataReq("auto")
	md.AllowAutoTopicCreation = true
	resps := pipeline(t, tb.Addr, md, produceReq("auto", 0, rawBatch(t, -1, -1, -1, 1)))
	m := resps[0].(*kmsg.MetadataResponse).Topics[0]
	if m.ErrorCode != 0 || len(m.Partitions) == 0 || m.TopicID == [16]byte{} {
		t.Fatalf("auto-create: code %d, %d partitions, id %x", m.ErrorCode, len(m.Partitions), m.TopicID)
	}
	if p := producePartition(resps[1]); p.ErrorCode != 0 {
		t.Fatalf("produce after auto-create: code %d", p.ErrorCode)
	}
}

// A topic that reaches the metadata log without this broker's admin path (as one another
// node's controller created would) is opened by the publisher: its partitions take
// records, its config is in force, its directories carry its id; grown the same way it
// gets its new partition, and removed the same way its directories go.
func TestTopicFromTheLogAppearsOnTheBroker(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithoutAutoCreate())
	id := [16]byte{0x5e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	retention := "7654321"
	part := func(p int32) *wire.PartitionRecord {
		return &wire.PartitionRecord{PartitionID: p, TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
	}
	if err := broker.ProposeMetadataForTest(tb.Broker, &wire.TopicRecord{Name: "elsewhere", TopicID: id}, part(0), part(1),
		&wire.ConfigRecord{ResourceType: 2, ResourceName: "elsewhere", Name: "retention.ms", Value: &retention}); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "elsewhere", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	rc, err := kadm.NewClient(cl).DescribeTopicConfigs(ctxT(t), "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On("elsewhere", nil); err != nil || !hasConfig(c.Configs, "retention.ms", retention) {
		t.Fatalf("configs of the topic: %+v %v", c.Configs, err)
	}
	for p := range 2 {
		b, err := os.ReadFile(filepath.Join(tb.DataDir, "elsewhere-"+string(rune('0'+p)), upgrade.PartitionMetadataFile))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := upgrade.ParsePartitionMetadata(b); err != nil || got != id {
			t.Fatalf("partition %d's partition.metadata: %x %v", p, got, err)
		}
	}
	// A config changed in the log reaches the open partitions' describe at once.
	shorter := "1000"
	if err := broker.ProposeMetadataForTest(tb.Broker, part(2),
		&wire.ConfigRecord{ResourceType: 2, ResourceName: "elsewhere", Name: "retention.ms", Value: &shorter}); err != nil {
		t.Fatal(err)
	}
	if p := producePartition(pipeline(t, tb.Addr, produceReq("elsewhere", 2, rawBatch(t, -1, -1, -1, 1)))[0]); p.ErrorCode != 0 {
		t.Fatalf("produce to the partition added in the log: code %d", p.ErrorCode)
	}
	rc, err = kadm.NewClient(cl).DescribeTopicConfigs(ctxT(t), "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On("elsewhere", nil); err != nil || !hasConfig(c.Configs, "retention.ms", shorter) {
		t.Fatalf("configs after the change: %+v %v", c.Configs, err)
	}
	if err := broker.ProposeMetadataForTest(tb.Broker, &wire.RemoveTopicRecord{TopicID: id}); err != nil {
		t.Fatal(err)
	}
	if left := dataDirEntries(t, tb.DataDir, "elsewhere-"); len(left) != 0 {
		t.Fatalf("removed topic's directories left: %v", left)
	}
	if names := topicNames(t, cl); len(names) != 0 {
		t.Fatalf("topics after the removal: %v", names)
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// A committed topic whose partition log cannot be created (here a file sits where its
// directory goes) is in the image and offline on the broker: that partition answers
// KAFKA_STORAGE_ERROR to Produce, Fetch and ListOffsets and has no leader in Metadata,
// the others work; once the obstacle is gone the publisher opens it by itself.
func TestOfflinePartition(t *testing.T) {
	tb := testbroker.Start(t)
	blocker := filepath.Join(tb.DataDir, "part-2")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, tb.Addr)
	resp, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 4, 1, nil, "part")
	if err != nil || resp.Err != nil {
		t.Fatalf("create with a partition blocked: %v %v, want it created", err, resp.Err)
	}
	resps := pipeline(t, tb.Addr,
		produceReq("part", 2, rawBatch(t, -1, -1, -1, 1)), fetchReq(12, nil, "part", 2, 0), listOffsetsReq("part", 2),
		metadataReq("part"), produceReq("part", 1, rawBatch(t, -1, -1, -1, 1)))
	if p := producePartition(resps[0]); p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the offline partition: code %d, want KAFKA_STORAGE_ERROR", p.ErrorCode)
	}
	if p := resps[1].(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from the offline partition: code %d, want KAFKA_STORAGE_ERROR", p.ErrorCode)
	}
	if p := resps[2].(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("list offsets of the offline partition: code %d, want KAFKA_STORAGE_ERROR", p.ErrorCode)
	}
	m := resps[3].(*kmsg.MetadataResponse).Topics[0]
	if len(m.Partitions) != 4 {
		t.Fatalf("metadata: %d partitions, want 4", len(m.Partitions))
	}
	for _, p := range m.Partitions {
		offline := p.Partition == 2
		if offline != (p.Leader == -1) || offline != (p.ErrorCode == kerr.LeaderNotAvailable.Code) || offline != (len(p.OfflineReplicas) == 1) {
			t.Fatalf("metadata of partition %d: leader %d, code %d, offline replicas %v", p.Partition, p.Leader, p.ErrorCode, p.OfflineReplicas)
		}
	}
	if p := producePartition(resps[4]); p.ErrorCode != 0 {
		t.Fatalf("produce to a healthy partition of the topic: code %d", p.ErrorCode)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := produceOnceOnline(t, tb.Addr, "part", 2); err != nil {
		t.Fatalf("produce after the obstacle went: %v", err)
	}
	got := consumeAll(t, tb.Addr, "part", 2)
	if len(got[1]) != 1 || len(got[2]) != 1 {
		t.Fatalf("records per partition: %d in 1, %d in 2, want 1 each", len(got[1]), len(got[2]))
	}
}

// A partition offline at start-up (its directory cannot be made) does not stop the broker:
// it starts, serves the rest, and opens the partition once it can.
func TestOfflinePartitionAtStart(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 2, 1, nil, "restart"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	tb.Stop()
	dir := filepath.Join(tb.DataDir, "restart-1")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tb.Restart()
	resps := pipeline(t, tb.Addr, produceReq("restart", 1, rawBatch(t, -1, -1, -1, 1)), produceReq("restart", 0, rawBatch(t, -1, -1, -1, 1)))
	if p := producePartition(resps[0]); p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the partition offline at start: code %d, want KAFKA_STORAGE_ERROR", p.ErrorCode)
	}
	if p := producePartition(resps[1]); p.ErrorCode != 0 {
		t.Fatalf("produce to the other partition: code %d", p.ErrorCode)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := produceOnceOnline(t, tb.Addr, "restart", 1); err != nil {
		t.Fatalf("produce after the obstacle went: %v", err)
	}
}

// produceOnceOnline produces one record to an offline partition until the publisher's
// retry opens it: KAFKA_STORAGE_ERROR until then, any other error ends the wait.
func produceOnceOnline(t *testing.T, addr, topic string, partition int32) error {
	return await.Until(20*time.Second, 50*time.Millisecond, func() error {
		p := producePartition(pipeline(t, addr, produceReq(topic, partition, rawBatch(t, -1, -1, -1, 1)))[0])
		err := kerr.ErrorForCode(p.ErrorCode)
		if err != nil && !errors.Is(err, kerr.KafkaStorageError) {
			return await.Stop(err)
		}
		return err
	})
}

// Concurrent creations of one name through the broker: the controller decides them in
// turn against its latest image, so exactly one creates the topic and every other gets
// TOPIC_ALREADY_EXISTS.
func TestConcurrentCreatesOfOneName(t *testing.T) {
	tb := testbroker.Start(t)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cl := newClient(t, tb.Addr)
		wg.Go(func() {
			resp, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 3, 1, nil, "contended")
			if err == nil {
				err = resp.Err
			}
			errs[i] = err
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, kerr.TopicAlreadyExists):
			t.Fatalf("a concurrent create: %v", err)
		}
	}
	if created != 1 {
		t.Fatalf("%d of %d concurrent creates succeeded, want 1", created, n)
	}
	if left := dataDirEntries(t, tb.DataDir, "contended-"); len(left) != 3 {
		t.Fatalf("partition directories: %v, want 3", left)
	}
}
