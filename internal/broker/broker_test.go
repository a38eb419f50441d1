package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := ctxT(t)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAll reads the topic from the start until n records arrived.
func consumeAll(t *testing.T, addr, topic string, n int) map[int32][]*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t)
	got := map[int32][]*kgo.Record{}
	total := 0
	for total < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			total++
		})
	}
	return got
}

func TestProduceConsumeSurvivesRestart(t *testing.T) {
	tb := testbroker.Start(t)
	adm := kadm.NewClient(newClient(t, tb.Addr))
	if _, err := adm.CreateTopic(ctxT(t), 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, tb.Addr, kgo.DefaultProduceTopic("orders"))
	produceN(t, prod, "orders", 3000)

	check := func() {
		got := consumeAll(t, tb.Addr, "orders", 3000)
		seen := map[string]bool{}
		for p, recs := range got {
			for i, r := range recs {
				if r.Offset != int64(i) {
					t.Fatalf("partition %d: record %d has offset %d", p, i, r.Offset)
				}
				if seen[string(r.Value)] {
					t.Fatalf("duplicate %s", r.Value)
				}
				seen[string(r.Value)] = true
			}
		}
		if len(seen) != 3000 {
			t.Fatalf("got %d distinct records, want 3000", len(seen))
		}
	}
	check()
	prod.Close()
	tb.Restart()
	check()
}

func TestAutoCreateAndDisabled(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr, kgo.AllowAutoTopicCreation())
	produceN(t, cl, "auto-made", 10)
	if got := consumeAll(t, tb.Addr, "auto-made", 10); len(got[0]) != 10 {
		t.Fatalf("auto-created topic holds %d records", len(got[0]))
	}

	off := testbroker.Start(t, testbroker.WithoutAutoCreate())
	adm := kadm.NewClient(newClient(t, off.Addr))
	md, err := adm.Metadata(ctxT(t), "nope")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(md.Topics["nope"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("metadata for unknown topic with auto-create off: %v", md.Topics["nope"].Err)
	}
}

func TestTopicAdmin(t *testing.T) {
	tb := testbroker.Start(t)
	adm := kadm.NewClient(newClient(t, tb.Addr))
	ctx := ctxT(t)

	cases := []struct {
		name  string
		parts int32
		rf    int16
		cfg   map[string]*string
		want  error
	}{
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"..", 1, 1, nil, kerr.InvalidTopicException},
		{"zero-parts", 0, 1, nil, kerr.InvalidPartitions},
		{"rf3", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"bad-config", 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, kerr.InvalidConfig},
		{"unknown-config", 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, kerr.InvalidConfig},
	}
	for _, c := range cases {
		resp, err := adm.CreateTopic(ctx, c.parts, c.rf, c.cfg, c.name)
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, c.want) {
			t.Errorf("create %q: got %v, want %v", c.name, err, c.want)
		}
	}

	// validate_only creates nothing.
	vresp, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "dry")
	if err != nil || vresp["dry"].Err != nil {
		t.Fatalf("validate-only: %v %v", err, vresp["dry"].Err)
	}
	if md, _ := adm.Metadata(ctx, "dry"); md.Topics["dry"].Err == nil {
		t.Fatal("validate-only created the topic")
	}

	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "t1"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := adm.CreateTopic(ctx, 2, 1, nil, "t1"); !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v", resp.Err)
	}
	if _, err := adm.CreatePartitions(ctx, 3, "t1"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, "t1")
	if err != nil || len(md.Topics["t1"].Partitions) != 5 {
		t.Fatalf("after create partitions: %v, %d partitions", err, len(md.Topics["t1"].Partitions))
	}

	tb.Restart()
	adm = kadm.NewClient(newClient(t, tb.Addr))
	md, err = adm.Metadata(ctx, "t1")
	if err != nil || len(md.Topics["t1"].Partitions) != 5 {
		t.Fatalf("after restart: %v, %d partitions", err, len(md.Topics["t1"].Partitions))
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	v, err := rc.On("t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range v.Configs {
		if c.Key == "retention.ms" {
			found = true
			if c.Value == nil || *c.Value != "60000" {
				t.Fatalf("retention.ms after restart = %v", c.MaybeValue())
			}
		}
	}
	if !found {
		t.Fatal("retention.ms not described")
	}

	dresp, err := adm.DeleteTopics(ctx, "t1")
	if err != nil || dresp["t1"].Err != nil {
		t.Fatalf("delete: %v %v", err, dresp["t1"].Err)
	}
	tb.Restart()
	adm = kadm.NewClient(newClient(t, tb.Addr))
	if md, _ := adm.Metadata(ctx, "t1"); !errors.Is(md.Topics["t1"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleted topic is back after restart: %v", md.Topics["t1"].Err)
	}
}

func TestListOffsetsAndDeleteRecords(t *testing.T) {
	tb := testbroker.Start(t)
	adm := kadm.NewClient(newClient(t, tb.Addr))
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "lo"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, tb.Addr)
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: "lo", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil || end["lo"][0].Offset != 10 {
		t.Fatalf("end offset: %v %+v", err, end["lo"][0])
	}
	at, err := adm.ListOffsetsAfterMilli(ctx, base.Add(4*time.Minute+time.Second).UnixMilli(), "lo")
	if err != nil || at["lo"][0].Offset != 5 {
		t.Fatalf("offset after 4m: %v %+v", err, at["lo"][0])
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3 // max timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	mx, err := req.RequestWith(ctx, cl)
	if err != nil || mx.Topics[0].Partitions[0].Offset != 9 {
		t.Fatalf("max timestamp offset: %v %+v", err, mx)
	}

	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "lo", Partition: 0, At: 4})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil || dr["lo"][0].Err != nil || dr["lo"][0].LowWatermark != 4 {
		t.Fatalf("delete records: %v %+v", err, dr["lo"][0])
	}
	tb.Restart()
	adm = kadm.NewClient(newClient(t, tb.Addr))
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil || start["lo"][0].Offset != 4 {
		t.Fatalf("start offset after restart: %v %+v", err, start["lo"][0])
	}
}

// DeleteRecords on a topic whose cleanup.policy is compact alone is refused with
// POLICY_VIOLATION, as Kafka does; compact,delete and delete allow it, and an altered
// policy applies to the next request.
func TestDeleteRecordsRefusedOnCompactedTopic(t *testing.T) {
	tb := testbroker.Start(t)
	adm := kadm.NewClient(newClient(t, tb.Addr))
	ctx := ctxT(t)
	policies := map[string]string{"only-compact": "compact", "compact-delete": "compact,delete", "only-delete": "delete"}
	for topic, policy := range policies {
		if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr(policy)}, topic); err != nil {
			t.Fatal(err)
		}
		produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic(topic)), topic, 10)
	}
	deleteBefore := func(topic string, at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
		dr, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		return dr[topic][0]
	}
	if got := deleteBefore("only-compact", 5); !errors.Is(got.Err, kerr.PolicyViolation) {
		t.Fatalf("compact topic: %+v, want POLICY_VIOLATION", got)
	}
	start, err := adm.ListStartOffsets(ctx, "only-compact")
	if err != nil || start["only-compact"][0].Offset != 0 {
		t.Fatalf("compact topic's start offset after the refusal: %v %+v", err, start["only-compact"][0])
	}
	for _, topic := range []string{"compact-delete", "only-delete"} {
		if got := deleteBefore(topic, 5); got.Err != nil || got.LowWatermark != 5 {
			t.Fatalf("%s (%s): %+v, want low watermark 5", topic, policies[topic], got)
		}
	}

	alter := []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact,delete")}}
	if _, err := adm.AlterTopicConfigs(ctx, alter, "only-compact"); err != nil {
		t.Fatal(err)
	}
	if got := deleteBefore("only-compact", 3); got.Err != nil || got.LowWatermark != 3 {
		t.Fatalf("after altering to compact,delete: %+v, want low watermark 3", got)
	}
}
