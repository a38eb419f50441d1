package broker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/testbroker"
)

// createTopicsReq builds a CreateTopics request of the given topics and partition counts.
func createTopicsReq(validateOnly bool, topics map[string]int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = validateOnly
	req.TimeoutMillis = 30000
	for name, n := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, -1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func createPartitionsReq(counts ...any) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30000
	for i := 0; i < len(counts); i += 2 {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = counts[i].(string), int32(counts[i+1].(int))
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// autoCreateMetadata sends a Metadata request for names that allows auto-creation.
func autoCreateMetadata(t *testing.T, cl *kgo.Client, names ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// topicNames lists the broker's non-internal topics.
func topicNames(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	md, err := kadm.NewClient(cl).ListTopics(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return md.Names()
}

func partitionCount(t *testing.T, cl *kgo.Client, topic string) int {
	t.Helper()
	md, err := kadm.NewClient(cl).ListTopics(ctxT(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(md[topic].Partitions)
}

// Kafka's controller refuses a CreateTopics request that would create more than 10,000
// partitions in all, whole: every topic gets POLICY_VIOLATION, even with validateOnly.
func TestCreateTopicsOverTenThousandPartitionsIsRefusedWhole(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	for _, tc := range []struct {
		name         string
		validateOnly bool
		topics       map[string]int32
	}{
		{"one topic", false, map[string]int32{"big": 10001}},
		{"three topics", false, map[string]int32{"a": 4000, "b": 4000, "c": 2001}},
		{"validate only", true, map[string]int32{"a": 5000, "b": 5001}},
	} {
		resp, err := createTopicsReq(tc.validateOnly, tc.topics).RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != len(tc.topics) {
			t.Fatalf("%s: %d topics answered, want %d", tc.name, len(resp.Topics), len(tc.topics))
		}
		for _, st := range resp.Topics {
			if st.ErrorCode != kerr.PolicyViolation.Code || st.ErrorMessage == nil || *st.ErrorMessage != "Excessively large number of partitions per request." {
				t.Fatalf("%s: topic %s: code %d message %v, want POLICY_VIOLATION", tc.name, st.Topic, st.ErrorCode, st.ErrorMessage)
			}
		}
	}
	if names := topicNames(t, cl); len(names) != 0 {
		t.Fatalf("topics created: %v", names)
	}
	// Within the cap the request goes through.
	resp, err := createTopicsReq(false, map[string]int32{"a": 3, "b": 4}).RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range resp.Topics {
		if st.ErrorCode != 0 {
			t.Fatalf("topic %s: %v", st.Topic, kerr.ErrorForCode(st.ErrorCode))
		}
	}
}

// CreatePartitions shares one 10,000-partition budget across the request's topics, as
// Kafka's bounded record list does: the topic that would overflow it and every later one
// fail; the earlier ones are grown.
func TestCreatePartitionsOverTenThousandPerRequest(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	if _, err := createTopicsReq(false, map[string]int32{"a": 1, "b": 1, "c": 1}).RequestWith(ctxT(t), cl); err != nil {
		t.Fatal(err)
	}
	resp, err := createPartitionsReq("a", 3, "b", 10002, "c", 2).RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{0, kerr.PolicyViolation.Code, kerr.PolicyViolation.Code}
	for i, st := range resp.Topics {
		if st.ErrorCode != want[i] {
			t.Fatalf("topic %s: code %d, want %d", st.Topic, st.ErrorCode, want[i])
		}
	}
	for topic, n := range map[string]int{"a": 3, "b": 1, "c": 1} {
		if got := partitionCount(t, cl, topic); got != n {
			t.Fatalf("%s has %d partitions, want %d", topic, got, n)
		}
	}
}

// A Metadata request naming more unknown topics than one request may create (10,001 with
// num.partitions=1) creates none of them and answers each UNKNOWN_TOPIC_OR_PARTITION, as
// Kafka's broker does when the controller refuses its CreateTopics. Before the cap one such
// request created topics until the descriptors ran out.
func TestMetadataAutoCreateIsCappedPerRequest(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	metadata := func(names []string) *kmsg.MetadataResponse { return autoCreateMetadata(t, cl, names...) }
	var names []string
	for i := range 10001 {
		names = append(names, fmt.Sprintf("auto-%05d", i))
	}
	resp := metadata(append(names, "bad name!"))
	for _, mt := range resp.Topics {
		want := kerr.UnknownTopicOrPartition.Code
		if *mt.Topic == "bad name!" {
			want = kerr.InvalidTopicException.Code
		}
		if mt.ErrorCode != want {
			t.Fatalf("%s: code %d, want %d", *mt.Topic, mt.ErrorCode, want)
		}
	}
	if got := topicNames(t, cl); len(got) != 0 {
		t.Fatalf("%d topics created, e.g. %s", len(got), got[0])
	}
	// Within the cap, auto-creation works as before.
	resp = metadata(names[:3])
	for _, mt := range resp.Topics {
		if mt.ErrorCode != 0 || len(mt.Partitions) != 1 {
			t.Fatalf("%s: code %d, %d partitions", *mt.Topic, mt.ErrorCode, len(mt.Partitions))
		}
	}
}

// max.broker.partitions refuses topics and partitions past it with POLICY_VIOLATION and a
// message naming the limit; auto-creation past it answers UNKNOWN_TOPIC_OR_PARTITION and
// creates nothing. Deleting a topic frees its partitions, a restart counts them again, and
// the internal topics the broker creates for itself are not refused.
func TestMaxBrokerPartitions(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"max.broker.partitions": "20"}))
	cl := newClient(t, tb.Addr)
	adm := kadm.NewClient(cl)
	refused := func(what string, code int16, msg *string) {
		t.Helper()
		if code != kerr.PolicyViolation.Code || msg == nil || !strings.Contains(*msg, "limit of 20 partitions (max.broker.partitions)") {
			t.Fatalf("%s: code %d message %v, want POLICY_VIOLATION naming max.broker.partitions", what, code, msg)
		}
	}
	create := func(name string, n int32) (int16, *string) {
		t.Helper()
		resp, err := createTopicsReq(false, map[string]int32{name: n}).RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage
	}
	if code, msg := create("a", 12); code != 0 {
		t.Fatalf("create a: %d %v", code, *msg)
	}
	code, msg := create("b", 9)
	refused("create b", code, msg)
	resp, err := createPartitionsReq("a", 21).RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	refused("grow a", resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
	if code, msg := create("b", 8); code != 0 {
		t.Fatalf("create b within the limit: %d %v", code, *msg)
	}

	// Full: auto-creation creates nothing; the offsets topic still comes up for a group.
	if mresp := autoCreateMetadata(t, cl, "auto"); mresp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("auto-create past the limit: code %d", mresp.Topics[0].ErrorCode)
	}
	if _, err := adm.CommitOffsets(ctxT(t), "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "a", Partition: 0, Offset: 1})); err != nil {
		t.Fatalf("commit creating __consumer_offsets at the limit: %v", err)
	}

	// A restart counts the partitions it loads (the offsets topic's included).
	tb.Restart()
	code, msg = create("c", 1)
	refused("create c after restart", code, msg)
	if _, err := adm.DeleteTopic(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	if code, msg := create("c", 7); code != 0 {
		t.Fatalf("create c after deleting a: %d %v", code, *msg)
	}
	if names := topicNames(t, cl); strings.Join(names, ",") != "b,c" {
		t.Fatalf("topics %v, want b,c", names)
	}
}

// fetchMaxBytesSetup makes topic "fmb": partitions 0-3 hold 200 KiB each in ~16 KiB
// batches, partition 4 one 100 KiB batch.
func fetchMaxBytesSetup(t *testing.T, addr string) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10))
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 5, 1, nil, "fmb"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range int32(4) {
		for range 200 {
			recs = append(recs, &kgo.Record{Topic: "fmb", Partition: p, Value: make([]byte, 1000)})
		}
	}
	if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	big := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := big.ProduceSync(ctxT(t), &kgo.Record{Topic: "fmb", Partition: 4, Value: make([]byte, 100<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A Fetch asking for 2 GiB gets at most the broker's fetch.max.bytes (here 64 KiB) of
// records, whole batches, as Kafka bounds it by min(MaxBytes, fetch.max.bytes); a first
// batch larger than that still goes out (KIP-74). Before the bound the response carried
// everything, 800 KiB here and 2 GiB in the report.
func TestFetchMaxBytesBoundsTheResponse(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"fetch.max.bytes": "65536"}))
	fetchMaxBytesSetup(t, tb.Addr)
	cl := newClient(t, tb.Addr)
	td, err := kadm.NewClient(cl).ListTopics(ctxT(t), "fmb")
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(parts ...int32) (total int, batches int) {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.SessionEpoch, req.MaxBytes = -1, -1, 1<<31-1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "fmb", td["fmb"].ID
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<31-1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			bs, err := batch.Split(rp.RecordBatches)
			if err != nil {
				t.Fatalf("partition %d: %v", rp.Partition, err)
			}
			total += len(rp.RecordBatches)
			batches += len(bs)
		}
		return total, batches
	}
	if total, batches := fetch(0, 1, 2, 3); total > 65536 || batches == 0 {
		t.Fatalf("fetch of 800 KiB with MaxBytes 2 GiB: %d bytes in %d batches, want at most fetch.max.bytes 65536", total, batches)
	}
	if total, batches := fetch(4, 0); batches != 1 || total < 100<<10 {
		t.Fatalf("first batch of 100 KiB over fetch.max.bytes: %d bytes in %d batches, want that one batch alone", total, batches)
	}
}

// ShareFetch keeps its bounds under fetch.max.bytes: min(MaxBytes, fetch.max.bytes) split
// evenly over the partitions (Kafka's UNIFORM strategy), each read returning at least one
// whole batch. With fetch.max.bytes 64 KiB and 64 KiB batches that is one batch per
// partition, not the 1 MiB per partition read cap a 50 MiB MaxBytes gave before.
func TestShareFetchHonoursFetchMaxBytes(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"fetch.max.bytes": "65536", "group.share.assignment.interval.ms": "0"}))
	cl := shareWireSetup(t, tb)
	if code := alterGroupConfig(t, cl, "fmb", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("alter group config: %d", code)
	}
	m := joinShareGroup(t, cl, "fmb", "sq", "member-fmb")
	req := rawShareFetch(m, 1, 5000, 0, 1000, nil)
	req.MaxBytes = 1<<31 - 1
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v %v", err, resp)
	}
	total := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			total += len(rp.Records)
		}
	}
	if total == 0 || total > 2*(64<<10)+4096 {
		t.Fatalf("share fetch with MaxBytes 2 GiB under fetch.max.bytes 64 KiB: %d record bytes, want one batch per partition", total)
	}
}
