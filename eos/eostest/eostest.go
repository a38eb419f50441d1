// Package eostest holds what the tests of exactly-once pipelines (package eos and the eos
// examples) share: an in-process broker tuned for share groups, input topics, and the
// two checks that say a run was exactly once: every expected output is in the committed
// (read_committed) output exactly once, and the share group holds nothing any more (no
// record AVAILABLE, ACQUIRED or TX_PENDING).
package eostest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Timeout bounds each wait of these helpers.
const Timeout = 60 * time.Second

// Start starts a test broker for share-group pipelines: fast heartbeats and assignment,
// short record locks and session timeouts (so that what a crashed member held comes back
// within seconds). opts are applied after these.
func Start(t testing.TB, opts ...testbroker.Option) *testbroker.Broker {
	t.Helper()
	base := testbroker.WithConfig(map[string]string{
		"group.share.heartbeat.interval.ms":       "200",
		"group.share.min.heartbeat.interval.ms":   "200",
		"group.share.assignment.interval.ms":      "0",
		"group.share.session.timeout.ms":          "3000",
		"group.share.min.session.timeout.ms":      "1000",
		"group.share.record.lock.duration.ms":     "5000",
		"group.share.min.record.lock.duration.ms": "1000",
	})
	return testbroker.Start(t, append([]testbroker.Option{base}, opts...)...)
}

// TwoPhaseCommit lets producers take part in two-phase commit (KIP-939), which the
// checkpoint lifecycle needs.
func TwoPhaseCommit() testbroker.Option {
	return testbroker.WithConfig(map[string]string{"transaction.two.phase.commit.enable": "true"})
}

// Context is a context that ends with the test, or after Timeout.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Client is a kgo client of addr with opts, closed with the test.
func Client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin is an admin client closed with the test.
func Admin(t testing.TB, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(Client(t, addr))
}

// CreateTopic creates topic with partitions partitions.
func CreateTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	CreateTopicWithConfig(t, addr, topic, partitions, nil)
}

// CreateTopicWithConfig creates topic with partitions partitions and topic configs.
func CreateTopicWithConfig(t testing.TB, addr, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kmsg.StringPtr(v)
	}
	resp, err := Admin(t, addr).CreateTopic(Context(t), partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// ReadFromEarliest makes group start at the beginning of its topics
// (share.auto.offset.reset=earliest), so it reads records produced before it joined.
func ReadFromEarliest(t testing.TB, addr, group string) {
	t.Helper()
	SetGroupConfig(t, addr, group, "share.auto.offset.reset", "earliest")
}

// SetGroupConfig sets one dynamic config of group (IncrementalAlterConfigs; kadm has no
// call for group configs).
func SetGroupConfig(t testing.TB, addr, group, name, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = name, kmsg.StringPtr(value) // Op 0 is SET
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(Context(t), Client(t, addr))
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("%s on %s: %v", name, group, err)
	}
}

// ShareOffset is partition part of topic as group's share partition sees it: its start
// offset and lag (DescribeShareGroupOffsets).
func ShareOffset(ctx context.Context, adm *kadm.Client, group, topic string, part int32) (kadm.ShareOffset, error) {
	ds, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return kadm.ShareOffset{}, err
	}
	d, ok := ds[group]
	if !ok {
		return kadm.ShareOffset{}, fmt.Errorf("group %s not described", group)
	}
	if d.Err != nil {
		return kadm.ShareOffset{}, d.Err
	}
	so, ok := d.Offsets[topic][part]
	if !ok {
		return kadm.ShareOffset{}, fmt.Errorf("%s[%d] not in group %s", topic, part, group)
	}
	return so, so.Err
}

// Inputs returns the values Produce writes: "in-00000", "in-00001", ...
func Inputs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("in-%05d", i)
	}
	return out
}

// Produce writes values to topic, round robin over its partitions, and waits for them.
func Produce(t testing.TB, addr, topic string, partitions int32, values []string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(v)}
	}
	ProduceRecords(t, addr, recs)
}

// ProduceRecords writes recs (each to its Topic and Partition) and waits for them.
func ProduceRecords(t testing.TB, addr string, recs []*kgo.Record) {
	t.Helper()
	if err := producer(t, addr).ProduceSync(Context(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// producer writes each record to the partition it names.
func producer(t testing.TB, addr string) *kgo.Client {
	t.Helper()
	return Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
}

// endMarker is written after the outputs to find where reading may stop.
const endMarker = "eostest-end"

// Committed reads topic with read_committed and counts each value. Call it once the
// pipeline stopped: it writes a marker at the end of every partition and reads up to it.
// The marker is only readable once every transaction before it is resolved (the last
// stable offset holds it back), so nothing committed earlier can be missed.
func Committed(t testing.TB, addr, topic string, partitions int32) map[string]int {
	t.Helper()
	ctx := Context(t)
	p := producer(t, addr)
	for part := range partitions {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte(endMarker)}).FirstErr(); err != nil {
			t.Fatalf("end marker: %v", err)
		}
	}
	assign := map[int32]kgo.Offset{}
	for part := range partitions {
		assign[part] = kgo.NewOffset().AtStart()
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[string]int{}
	for ended := 0; ended < int(partitions); {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s read_committed: %v (%d of %d partitions read to the end)", topic, err, ended, partitions)
		}
		fs.EachError(func(topic string, part int32, err error) {
			t.Fatalf("read %s[%d] read_committed: %v", topic, part, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == endMarker {
				ended++
				return
			}
			got[string(r.Value)]++
		})
	}
	return got
}

// ExactlyOnce fails the test unless got holds each of want once and nothing else.
func ExactlyOnce(t testing.TB, got map[string]int, want []string) {
	t.Helper()
	missing, extra := 0, map[string]int{}
	for k, n := range got {
		extra[k] = n
	}
	var dup []string
	for _, w := range want {
		switch got[w] {
		case 0:
			missing++
		case 1:
		default:
			dup = append(dup, fmt.Sprintf("%s x%d", w, got[w]))
		}
		delete(extra, w)
	}
	if missing > 0 || len(dup) > 0 || len(extra) > 0 {
		t.Fatalf("committed output: %d of %d missing, duplicated %v, unexpected %v", missing, len(want), first(dup, 10), first(slices.Sorted(maps.Keys(extra)), 10))
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// WaitDrained waits until group has finished every record of topic: per partition the
// share-partition start offset is the log end offset and the lag is 0, which means that
// no record is AVAILABLE, ACQUIRED or TX_PENDING any more (the start offset only moves
// past ACKNOWLEDGED and ARCHIVED records). Markers are written after a commit returns,
// hence the wait.
func WaitDrained(t testing.TB, addr, group, topic string, partitions int32) {
	t.Helper()
	ctx := Context(t)
	adm := Admin(t, addr)
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	var last string
	for ctx.Err() == nil {
		drained := true
		last = ""
		for part := range partitions {
			end, _ := listed.Lookup(topic, part)
			so, err := ShareOffset(ctx, adm, group, topic, part)
			last += fmt.Sprintf(" %s[%d]: start %d lag %d end %d (%v);", topic, part, so.StartOffset, so.Lag, end.Offset, err)
			if err != nil || so.StartOffset != end.Offset || so.Lag != 0 {
				drained = false
			}
		}
		if drained {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s not drained:%s", group, last)
}

// RecordStates counts the records of group's live share partitions on b by state
// (AVAILABLE, ACQUIRED, TX_PENDING, ...), from the share-partition start offset on.
func RecordStates(b *testbroker.Broker, group string) map[string]int64 {
	out := map[string]int64{}
	for _, p := range b.Broker.DescribeShareGroupState(group) {
		for _, r := range p.State.Window.Records {
			out[r.State.String()] += r.LastOffset - r.FirstOffset + 1
		}
	}
	return out
}

// WaitNoneHeld waits until no record of group is ACQUIRED or TX_PENDING: every input a
// member held was given back or finished. Aborts resolve staged records with markers
// written after EndTxn returns, hence the wait.
func WaitNoneHeld(t testing.TB, b *testbroker.Broker, group string) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		st := RecordStates(b, group)
		if st[sharepartition.Acquired.String()] == 0 && st[sharepartition.TxPending.String()] == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s still holds records: %v", group, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
