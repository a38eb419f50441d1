package compat

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/brokerproc"
)

var exactqBinary struct {
	once      sync.Once
	bin, fail string
}

// builtExactq is ./cmd/exactq built once per test process.
func builtExactq(t *testing.T) string {
	t.Helper()
	b := &exactqBinary
	b.once.Do(func() {
		bin, _, err := brokerproc.BuildTemp("exactq-compat-")
		if err != nil {
			b.fail = err.Error()
		}
		b.bin = bin // the directory goes with the machine's temp cleanup
	})
	if b.fail != "" {
		t.Fatal(b.fail)
	}
	return b.bin
}

// clusterTopic is the topic the three-process test spreads over the nodes.
const (
	clusterTopic      = "spread"
	clusterPartitions = 6
)

// Step 11's acceptance on three real processes: three `exactq serve` nodes started with
// --voters form one cluster (one cluster id, three brokers, a controller, as kgo and
// Kafka's Java admin tools see it); a topic of six partitions created through one node is
// placed over all three; kgo produces to every partition through its leader and reads
// every record back, and so do Java kafka-clients 4.4 (kafka-console-producer's
// KafkaProducer, idempotent and acks=all by default, and an assign()ed KafkaConsumer per
// partition) and kcat (librdkafka); the controller killed with SIGKILL leaves the others
// with a new controller and its partitions leaderless (LEADER_NOT_AVAILABLE: one replica,
// no failover before part 2) while the others keep serving; restarted, it leads its
// partitions again and every acknowledged record is there.
//
// Consumer groups work across the nodes (a kgo member and a Java one, their coordinator the
// leader of the group's __consumer_offsets partition; the committed offsets survive the
// restart); transactions and share groups do not yet (docs/architecture.md, step 13's
// note).
func TestThreeProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c, err := brokerproc.StartCluster(brokerproc.ClusterOptions{Binary: builtExactq(t), Dir: t.TempDir(), Nodes: 3,
		Args: []string{"--broker-heartbeat-interval", "500ms", "--broker-session-timeout", "3s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	adm := kadm.NewClient(newKgo(t, c.Client[1]))
	awaitCluster(t, ctx, adm, 3)
	created, err := adm.CreateTopic(ctx, clusterPartitions, 1, nil, clusterTopic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatalf("create %s through node 1: %v", clusterTopic, err)
	}
	leaders := leadersOf(t, ctx, adm)
	byNode := map[int32]int{}
	for _, l := range leaders {
		byNode[l]++
	}
	if len(byNode) != 3 {
		t.Fatalf("partition leaders %v: not spread over the three nodes", leaders)
	}
	// Java's admin side sees the same: three unfenced brokers, each partition's leader
	// (kafka-topics --describe asks DescribeTopicPartitions), and the quorum through a
	// broker (kafka-metadata-quorum --bootstrap-server: forwarded DescribeQuorum).
	versions := kafkaTool(t, "BrokerApiVersionsCommand", "--bootstrap-server", c.Client[0])
	for id := range 3 {
		if want := fmt.Sprintf("%s (id: %d rack: null isFenced: false)", c.Client[id], id); !strings.Contains(versions, want) {
			t.Fatalf("kafka-broker-api-versions: no %q in\n%s", want, tail(versions))
		}
	}
	described := kafkaTool(t, "TopicCommand", "--bootstrap-server", c.Client[2], "--describe", "--topic", clusterTopic)
	for p, l := range leaders {
		if want := fmt.Sprintf("Partition: %d\tLeader: %d\tReplicas: %d\t", p, l, l); !strings.Contains(described, want) {
			t.Fatalf("kafka-topics --describe: no %q in\n%s", want, tail(described))
		}
	}
	status := kafkaTool(t, "MetadataQuorumCommand", "--bootstrap-server", c.Client[1], "describe", "--status")
	if !strings.Contains(status, `"id": 0`) || !strings.Contains(status, `"id": 1`) || !strings.Contains(status, `"id": 2`) {
		t.Fatalf("kafka-metadata-quorum --bootstrap-server: not three voters in\n%s", tail(status))
	}

	// kgo, bootstrapped at node 0 only: it finds every leader from Metadata.
	want := map[int32][]string{}
	cl := newKgo(t, c.Client[0], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 60 {
		v := fmt.Sprintf("kgo-%d", i)
		p := int32(i % clusterPartitions)
		recs = append(recs, &kgo.Record{Topic: clusterTopic, Partition: p, Value: []byte(v)})
		want[p] = append(want[p], v)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kgo produce: %v", err)
	}
	// Java's producer, bootstrapped at node 2: keys spread the records over the partitions.
	var lines strings.Builder
	for i := range 120 {
		fmt.Fprintf(&lines, "k%d:java-%d\n", i, i)
	}
	consoleProduce(t, c.Client[2], lines.String())
	// kcat (librdkafka), bootstrapped at node 1: keyed lines over the partitions, and
	// every record of the topic read back through the leaders.
	kcat := kcatPath(t)
	runKcat(t, kcat, strings.Join(kcatLines("kcat", 60), "\n")+"\n", "-P", "-b", c.Client[1], "-t", clusterTopic, "-K:", "-X", "acks=all")
	if out := kcatConsume(t, kcat, c.Client[1], clusterTopic, 240, "%p %s\n"); strings.Count(out, "\n") != 240 {
		t.Fatalf("kcat read %d lines, want 240", strings.Count(out, "\n"))
	}
	got := readAll(t, ctx, c.Bootstrap())
	javaParts := 0
	for p := range int32(clusterPartitions) {
		if !containsAll(got[p], want[p]) {
			t.Fatalf("partition %d: %v, want kgo's %v among them", p, got[p], want[p])
		}
		if len(got[p]) > len(want[p]) {
			javaParts++
		}
	}
	total := 0
	for _, vs := range got {
		total += len(vs)
	}
	if total != 240 || javaParts < 3 {
		t.Fatalf("%d records over %d partitions with Java's and kcat's, want 240 over at least 3: %v", total, javaParts, got)
	}
	// Java's consumer reads every partition through its leader.
	for p := range int32(clusterPartitions) {
		out := runJava(t, 2*time.Minute, "256m", "ReadAll", "OK: read", c.Client[0], clusterTopic, fmt.Sprint(p))
		if n := strings.Count("\n"+out, "\nRECORD "); n != len(got[p]) {
			t.Fatalf("Java read %d records of partition %d, kgo %d", n, p, len(got[p]))
		}
	}

	// Consumer groups: a kgo member and Java ones (kafka-console-consumer, the classic
	// protocol and KIP-848's) each read the whole topic through the group's coordinator, which is the
	// leader of its __consumer_offsets partition, wherever that is.
	groupOffsets := groupConsume(t, ctx, c.Client[1], "kgo-group", total)
	consoleConsume(t, c.Client[2], "java-group", total)
	consoleConsume(t, c.Client[0], "java-group-kip848", total, "--consumer-property", "group.protocol=consumer")

	// kill -9 the controller: its partitions go leaderless once its session expires, the others
	// keep a controller and keep serving theirs.
	// The controller itself: the others must elect another, which fences it.
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := int(md.Controller)
	if victim < 0 || victim > 2 {
		t.Fatalf("controller %d", victim)
	}
	c.Kill(victim)
	adm0 := kadm.NewClient(newKgo(t, c.Bootstrap()))
	if err := await.Until(30*time.Second, 100*time.Millisecond, func() error {
		md, err := adm0.Metadata(ctx, clusterTopic)
		if err != nil {
			return err
		}
		if md.Controller < 0 || int(md.Controller) == victim {
			return fmt.Errorf("controller %d", md.Controller)
		}
		for _, p := range md.Topics[clusterTopic].Partitions {
			dead := int(leaders[p.Partition]) == victim
			switch {
			case dead && (p.Leader != -1 || p.Err != kerr.LeaderNotAvailable):
				return fmt.Errorf("partition %d of the killed node: leader %d, %v", p.Partition, p.Leader, p.Err)
			case !dead && (p.Leader != leaders[p.Partition] || p.Err != nil):
				return fmt.Errorf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("after killing node %d: %v", victim, err)
	}
	// exactq cluster status -b names the leaderless partitions and leaves the dead node out.
	survivor := (victim + 1) % 3
	out, err := exec.CommandContext(ctx, builtExactq(t), "cluster", "status", "-b", c.Client[survivor]).CombinedOutput()
	if err != nil {
		t.Fatalf("exactq cluster status: %v\n%s", err, out)
	}
	shown := string(out)
	for p, l := range leaders {
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^%s\s+%d\s+%d\s+%d\s+LEADER_NOT_AVAILABLE$`, clusterTopic, p, l, l))
		if (int(l) == victim) != row.MatchString(shown) {
			t.Fatalf("exactq cluster status after killing node %d: partition %d (led by %d) wrong in\n%s", victim, p, l, shown)
		}
	}
	_, brokers, _ := strings.Cut(shown, "\nBrokers:")
	brokers, _, _ = strings.Cut(brokers, "\nPartitions without a leader")
	if strings.Contains(brokers, c.Client[victim]) || strings.Count(brokers, "127.0.0.1:") != 2 {
		t.Fatalf("exactq cluster status after killing node %d, brokers:%s", victim, brokers)
	}
	more := newKgo(t, c.Bootstrap(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(clusterPartitions) {
		if int(leaders[p]) == victim {
			continue
		}
		v := fmt.Sprintf("after-kill-%d", p)
		if err := more.ProduceSync(ctx, &kgo.Record{Topic: clusterTopic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d (led by %d) with node %d down: %v", p, leaders[p], victim, err)
		}
		got[p] = append(got[p], v)
	}

	// Restarted, it leads its partitions again, with everything acknowledged.
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	if err := await.Until(30*time.Second, 100*time.Millisecond, func() error {
		md, err := adm0.Metadata(ctx, clusterTopic)
		if err != nil {
			return err
		}
		for _, p := range md.Topics[clusterTopic].Partitions {
			if p.Leader != leaders[p.Partition] || p.Err != nil {
				return fmt.Errorf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("after restarting node %d: %v", victim, err)
	}
	// The group's committed offsets are all there, wherever its coordinator was.
	if err := await.Until(30*time.Second, 200*time.Millisecond, func() error {
		fetched, err := adm0.FetchOffsets(ctx, "kgo-group")
		if err != nil {
			return err
		}
		if err := fetched.Error(); err != nil {
			return err
		}
		for p, want := range groupOffsets {
			if o, ok := fetched.Lookup(clusterTopic, p); !ok || o.At != want {
				return fmt.Errorf("partition %d: committed %+v, want %d", p, o, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("kgo-group's offsets after node %d's restart: %v", victim, err)
	}
	after := readAll(t, ctx, c.Bootstrap())
	for p := range int32(clusterPartitions) {
		if strings.Join(after[p], ",") != strings.Join(got[p], ",") {
			t.Fatalf("partition %d after the restart: %v, want %v", p, after[p], got[p])
		}
	}
}

func newKgo(t *testing.T, seeds string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(seeds, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// awaitCluster waits until Metadata names n brokers and a controller.
func awaitCluster(t *testing.T, ctx context.Context, adm *kadm.Client, n int) {
	t.Helper()
	if err := await.Until(30*time.Second, 100*time.Millisecond, func() error {
		md, err := adm.Metadata(ctx)
		if err != nil {
			return err
		}
		if len(md.Brokers) != n || md.Controller < 0 {
			return fmt.Errorf("brokers %v, controller %d", md.Brokers, md.Controller)
		}
		return nil
	}); err != nil {
		t.Fatalf("the cluster: %v", err)
	}
}

// leadersOf is each partition's leader, every one with a leader.
func leadersOf(t *testing.T, ctx context.Context, adm *kadm.Client) map[int32]int32 {
	t.Helper()
	out := map[int32]int32{}
	if err := await.Until(30*time.Second, 100*time.Millisecond, func() error {
		md, err := adm.Metadata(ctx, clusterTopic)
		if err != nil {
			return err
		}
		ps := md.Topics[clusterTopic].Partitions
		if len(ps) != clusterPartitions {
			return fmt.Errorf("%d partitions", len(ps))
		}
		for _, p := range ps {
			if p.Leader < 0 || p.Err != nil {
				return fmt.Errorf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
			}
			out[p.Partition] = p.Leader
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// readAll reads every partition of the topic from its start to its end with kgo
// (assigned partitions, no group) and returns the values by partition.
func readAll(t *testing.T, ctx context.Context, seeds string) map[int32][]string {
	t.Helper()
	adm := kadm.NewClient(newKgo(t, seeds))
	ends, err := adm.ListEndOffsets(ctx, clusterTopic)
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[string]map[int32]kgo.Offset{clusterTopic: {}}
	left := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of partition %d: %v", o.Partition, o.Err)
		}
		offsets[clusterTopic][o.Partition] = kgo.NewOffset().AtStart()
		left += int(o.Offset)
	})
	cl := newKgo(t, seeds, kgo.ConsumePartitions(offsets))
	got := map[int32][]string{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d records left to read: %v", left, ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			left--
		})
	}
	return got
}

func containsAll(have, want []string) bool {
	in := map[string]bool{}
	for _, v := range have {
		in[v] = true
	}
	for _, v := range want {
		if !in[v] {
			return false
		}
	}
	return true
}

// consoleProduce sends lines ("key:value") with Kafka 4.4's kafka-console-producer (its
// KafkaProducer: idempotent, acks=all) to the topic through bootstrap.
func consoleProduce(t *testing.T, bootstrap, lines string) {
	t.Helper()
	java, cp := kafkaToolsClasspath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, "-Xmx256m", "-cp", cp, "org.apache.kafka.tools.ConsoleProducer",
		"--bootstrap-server", bootstrap, "--topic", clusterTopic,
		"--property", "parse.key=true", "--property", "key.separator=:", "--producer-property", "acks=all")
	cmd.Stdin = strings.NewReader(lines)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil || strings.Contains(out.String(), "ERROR") {
		t.Fatalf("kafka-console-producer: %v\n%s", err, tail(out.String()))
	}
}

// groupConsume reads n records of the topic as the one member of group (kgo, the classic
// protocol), commits, and returns the committed offset of every partition.
func groupConsume(t *testing.T, ctx context.Context, seed, group string, n int) map[int32]int64 {
	t.Helper()
	cl := newKgo(t, seed, kgo.ConsumerGroup(group), kgo.ConsumeTopics(clusterTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ends := map[int32]int64{}
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records: %v", group, got, n, ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("group %s: fetch partition %d: %v", group, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			ends[r.Partition] = r.Offset + 1
			got++
		})
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s: commit: %v", group, err)
	}
	cl.Close() // leaves the group
	return ends
}

// consoleConsume reads n records of the topic with Kafka 4.4's kafka-console-consumer as a
// member of group (its KafkaConsumer, committing; the classic protocol unless extra says).
func consoleConsume(t *testing.T, bootstrap, group string, n int, extra ...string) {
	t.Helper()
	out := kafkaTool(t, "consumer.ConsoleConsumer", append([]string{"--bootstrap-server", bootstrap, "--topic", clusterTopic,
		"--group", group, "--from-beginning", "--max-messages", fmt.Sprint(n), "--timeout-ms", "60000"}, extra...)...)
	if !strings.Contains(out, fmt.Sprintf("Processed a total of %d messages", n)) {
		t.Fatalf("kafka-console-consumer --group %s did not read %d messages:\n%s", group, n, tail(out))
	}
}
