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

	"github.com/exactq/exactq/client"
	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/testbroker"
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

// Admin is an admin client closed with the test.
func Admin(t testing.TB, addr string) *client.Admin {
	t.Helper()
	a, err := client.NewAdmin(client.AdminConfig{Brokers: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// CreateTopic creates topic with partitions partitions.
func CreateTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	CreateTopicWithConfig(t, addr, topic, partitions, nil)
}

// CreateTopicWithConfig creates topic with partitions partitions and topic configs.
func CreateTopicWithConfig(t testing.TB, addr, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	_, err := Admin(t, addr).CreateTopics(Context(t), false, client.NewTopic{Name: topic, Partitions: partitions, ReplicationFactor: 1, Configs: configs})
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// ReadFromEarliest makes group start at the beginning of its topics
// (share.auto.offset.reset=earliest), so it reads records produced before it joined.
func ReadFromEarliest(t testing.TB, addr, group string) {
	t.Helper()
	_, err := Admin(t, addr).IncrementalAlterConfigs(Context(t), false, map[client.ConfigResource][]client.AlterConfig{
		{Type: client.GroupResource, Name: group}: {{Name: "share.auto.offset.reset", Op: client.OpSet, Value: "earliest"}},
	})
	if err != nil {
		t.Fatalf("share.auto.offset.reset on %s: %v", group, err)
	}
}

// SetGroupConfig sets one dynamic config of group.
func SetGroupConfig(t testing.TB, addr, group, name, value string) {
	t.Helper()
	_, err := Admin(t, addr).IncrementalAlterConfigs(Context(t), false, map[client.ConfigResource][]client.AlterConfig{
		{Type: client.GroupResource, Name: group}: {{Name: name, Op: client.OpSet, Value: value}},
	})
	if err != nil {
		t.Fatalf("%s on %s: %v", name, group, err)
	}
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
	recs := make([]*client.Record, len(values))
	for i, v := range values {
		recs[i] = &client.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(v)}
	}
	ProduceRecords(t, addr, recs)
}

// ProduceRecords writes recs (each to its Topic and Partition) and waits for them.
func ProduceRecords(t testing.TB, addr string, recs []*client.Record) {
	t.Helper()
	ctx := Context(t)
	p := producer(t, addr)
	errs := make(chan error, len(recs))
	for _, r := range recs {
		p.Produce(ctx, r, func(_ *client.Record, err error) { errs <- err })
	}
	for range recs {
		if err := <-errs; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func producer(t testing.TB, addr string) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.ProducerConfig{Brokers: []string{addr}, Partitioner: client.ManualPartitioner(), Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
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
		if err := p.ProduceSync(ctx, &client.Record{Topic: topic, Partition: part, Value: []byte(endMarker)}); err != nil {
			t.Fatalf("end marker: %v", err)
		}
	}
	c, err := client.NewConsumer(client.ConsumerConfig{Brokers: []string{addr}, IsolationLevel: client.ReadCommitted, FetchMaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	assign := map[client.TopicPartition]client.Offset{}
	for part := range partitions {
		assign[client.TopicPartition{Topic: topic, Partition: part}] = client.Earliest
	}
	c.Assign(assign)
	got := map[string]int{}
	for ended := 0; ended < int(partitions); {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("read %s read_committed: %v", topic, err)
		}
		for _, r := range recs {
			if string(r.Value) == endMarker {
				ended++
				continue
			}
			got[string(r.Value)]++
		}
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
	ends := map[client.TopicPartition]int64{}
	for part := range partitions {
		ends[client.TopicPartition{Topic: topic, Partition: part}] = -1 // latest
	}
	listed, err := adm.ListOffsets(ctx, client.ReadUncommitted, ends)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	var last string
	for ctx.Err() == nil {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group)
		last = fmt.Sprint(err)
		if err == nil {
			drained := true
			last = ""
			for tp, lo := range listed {
				so, ok := offs[tp]
				last += fmt.Sprintf(" %s[%d]: start %d lag %d end %d;", tp.Topic, tp.Partition, so.StartOffset, so.Lag, lo.Offset)
				if !ok || so.StartOffset != lo.Offset || so.Lag != 0 {
					drained = false
				}
			}
			if drained {
				return
			}
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
