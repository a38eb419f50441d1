package compat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestJavaOnlineMigration runs KIP-848's online migration with two protocols from two
// clients in one group: two franz-go classic consumers (cooperative-sticky) share a
// six-partition topic; a kafka-clients 4.4.0 KafkaConsumer with group.protocol=consumer
// (compat/java MigrationMember.java) joins, and the group becomes a consumer group of two
// classic members and one consumer-protocol member, two partitions each; the Java consumer
// closes, and the group is classic again, its partitions back with the two. Every
// consumer commits what it polled before a rebalance goes on, so across both conversions
// every record is consumed exactly once (by Go or by Java) and the committed offsets end
// at the end of every partition. Kafka 4.4's kafka-consumer-groups --describe --members
// --verbose shows the mixed group: two members not upgraded, one upgraded.
func TestJavaOnlineMigration(t *testing.T) {
	buildJava(t) // skips without Java, before a broker starts
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500"}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := newAdmin(t, tb.Addr)
	const topic, group, parts, perPartition = "java-migrate", "java-migrate-group", 6, 100
	createTopic(t, adm, topic, parts, nil)
	producer := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	round := 0
	produce := func() {
		var rs []*kgo.Record
		for p := range int32(parts) {
			for i := range perPartition {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "r%d-p%d-%04d", round, p, i)})
			}
		}
		round++
		produceAll(t, ctx, producer, rs)
	}

	var mu sync.Mutex
	seen := map[string]int{} // by the Go consumers
	distinctGo := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	// goRound counts the distinct records of round r the Go consumers saw.
	goRound := func(r int) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for v := range seen {
			if strings.HasPrefix(v, fmt.Sprintf("r%d-", r)) {
				n++
			}
		}
		return n
	}
	var wg sync.WaitGroup
	startClassic := func() *kgo.Client {
		cl := newClient(t, tb.Addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.HeartbeatInterval(300*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				rs := fs.Records()
				mu.Lock()
				for _, r := range rs {
					seen[string(r.Value)]++
				}
				mu.Unlock()
				if len(rs) > 0 {
					if err := cl.CommitRecords(ctx, rs...); err != nil && ctx.Err() == nil {
						t.Errorf("commit: %v", err)
					}
				}
				cl.AllowRebalance()
			}
		}()
		return cl
	}
	classics := []*kgo.Client{startClassic(), startClassic()}
	defer func() {
		for _, cl := range classics {
			cl.Close()
		}
		wg.Wait()
	}()
	produce()
	eventually(t, time.Minute, "round 0 consumed by the classic group", func() error {
		if n := distinctGo(); n != parts*perPartition {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})

	dir := t.TempDir()
	stopFile, outFile := filepath.Join(dir, "stop"), filepath.Join(dir, "java-seen")
	// The Java consumer runs beside the test (runJava, which fails the test, must run on
	// the test's goroutine): its outcome is checked once it was told to stop.
	type outcome struct {
		out string
		err error
	}
	javaDone := make(chan outcome, 1)
	java, cp, jdir := buildJava(t)
	go func() {
		out, err := runBounded(3*time.Minute, jdir, java, "-XX:+UseSerialGC", "-Xmx256m", "-cp", cp,
			"exactq.compat.MigrationMember", tb.Addr, topic, group, stopFile, outFile)
		javaDone <- outcome{out, err}
	}()
	describe := func() (kmsg.ConsumerGroupDescribeResponseGroup, error) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, producer)
		if err != nil {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, err
		}
		return resp.Groups[0], nil
	}
	eventually(t, 2*time.Minute, "a consumer group of two classic members and the Java consumer, two partitions each", func() error {
		g, err := describe()
		if err != nil {
			return err
		}
		if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 3 {
			return fmt.Errorf("error %d, state %s, %d members", g.ErrorCode, g.State, len(g.Members))
		}
		types := map[int8]int{}
		for _, m := range g.Members {
			n := 0
			for _, tp := range m.Assignment.TopicPartitions {
				n += len(tp.Partitions)
			}
			if n != 2 {
				return fmt.Errorf("member %s (type %d) has %d partitions", m.MemberID, m.MemberType, n)
			}
			types[m.MemberType]++
		}
		if types[0] != 2 || types[1] != 1 {
			return fmt.Errorf("member types %v", types)
		}
		return nil
	})
	// Kafka 4.4's own tool sees the migration: the classic members not upgraded, the Java
	// consumer upgraded, each with its epoch and current and target assignment.
	toolJava, toolCP := kafkaToolsClasspath(t)
	members, err := runBounded(2*time.Minute, ".", toolJava, "-Xmx256m", "-cp", toolCP,
		"org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", tb.Addr,
		"--describe", "--group", group, "--members", "--verbose")
	if err != nil {
		t.Fatalf("kafka-consumer-groups --describe --members --verbose: %v\n%s", err, members)
	}
	upgraded := map[string]int{}
	for _, line := range strings.Split(members, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != group {
			continue
		}
		upgraded[f[len(f)-1]]++
		if !strings.HasPrefix(f[len(f)-4], topic+":") || f[len(f)-4] != f[len(f)-2] {
			t.Errorf("member line without a settled assignment: %q", line)
		}
	}
	if !strings.Contains(members, "UPGRADED") || upgraded["false"] != 2 || upgraded["true"] != 1 {
		t.Fatalf("kafka-consumer-groups --describe --members --verbose:\n%s", members)
	}
	produce()
	javaSeen := func() []string {
		b, err := os.ReadFile(outFile)
		if err != nil {
			return nil
		}
		return strings.Fields(string(b))
	}
	eventually(t, time.Minute, "round 1 consumed by Go and Java together", func() error {
		n := goRound(1)
		for _, v := range javaSeen() {
			if strings.HasPrefix(v, "r1-") {
				n++
			}
		}
		if n != parts*perPartition {
			return fmt.Errorf("%d records of round 1", n)
		}
		return nil
	})
	if err := os.WriteFile(stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o := <-javaDone; o.err != nil || !strings.Contains(o.out, "OK: migration member") {
		t.Fatalf("java MigrationMember: %v:\n%s", o.err, tail(o.out))
	}
	eventually(t, time.Minute, "the classic group again, stable with two members", func() error {
		d, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		g := d[group]
		if g.State != "Stable" || len(g.Members) != 2 || g.ProtocolType != "consumer" {
			return fmt.Errorf("state %s, %d members, error %v", g.State, len(g.Members), g.Err)
		}
		l, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		if gt := l[group].GroupType; gt != "classic" {
			return fmt.Errorf("group type %q", gt)
		}
		return nil
	})
	produce()
	eventually(t, time.Minute, "round 2 consumed by the classic group", func() error {
		if n := goRound(2); n != parts*perPartition {
			return fmt.Errorf("%d records of round 2", n)
		}
		return nil
	})
	eventually(t, time.Minute, "committed offsets at the end of every partition", func() error {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for p := range int32(parts) {
			if o, ok := offs.Lookup(topic, p); !ok || o.At != int64(round*perPartition) {
				return fmt.Errorf("partition %d at %d", p, o.At)
			}
		}
		return nil
	})
	counts := map[string]int{}
	mu.Lock()
	for v, n := range seen {
		counts[v] += n
	}
	mu.Unlock()
	byJava := javaSeen()
	for _, v := range byJava {
		counts[v]++
	}
	if len(byJava) == 0 {
		t.Fatal("the Java consumer consumed nothing")
	}
	if len(counts) != round*parts*perPartition {
		t.Fatalf("%d distinct records consumed, want %d", len(counts), round*parts*perPartition)
	}
	for v, n := range counts {
		if n != 1 {
			t.Fatalf("record %s consumed %d times", v, n)
		}
	}
	t.Logf("Java consumed %d records, Go %d", len(byJava), len(counts)-len(byJava))
}
