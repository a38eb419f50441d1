package compat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/cluster/node/nodetest"
	"github.com/exactq/exactq/internal/testbroker"
)

// kafkaTools is Apache Kafka 4.4's tools jar and its dependencies, resolved with Maven
// from kafkatools/pom.xml into the cache directory the first time (CI: Maven Central must be
// reachable once); later runs only check the marker file.
var kafkaTools install[[2]string] // java, class path

func kafkaToolsClasspath(t *testing.T) (java, cp string) {
	t.Helper()
	got := kafkaTools.need(t, func() ([2]string, error) {
		mvn, java, err := mavenAndJava("Kafka's tools")
		if err != nil {
			return [2]string{}, err
		}
		cache := cacheDir("kafka-tools-4.4.0")
		libs := filepath.Join(cache, "libs")
		marker := filepath.Join(cache, "resolved")
		if _, err := os.Stat(marker); err == nil {
			return [2]string{java, filepath.Join(libs, "*")}, nil
		}
		pom, err := filepath.Abs(filepath.Join("kafkatools", "pom.xml"))
		if err != nil {
			return [2]string{}, err
		}
		_ = os.RemoveAll(libs)
		if err := runMaven(mvn, ".", "kafka-tools 4.4.0", "-f", pom, "dependency:copy-dependencies", "-DoutputDirectory="+libs); err != nil {
			return [2]string{}, err
		}
		return [2]string{java, filepath.Join(libs, "*")}, os.WriteFile(marker, []byte("4.4.0\n"), 0o644)
	})
	return got[0], got[1]
}

// runKafkaTool runs Kafka 4.4's tool org.apache.kafka.tools.<class> (the main class its
// kafka-*.sh script starts) with args and returns its combined output.
func runKafkaTool(t *testing.T, class string, args ...string) (string, error) {
	t.Helper()
	java, cp := kafkaToolsClasspath(t)
	return runBounded(2*time.Minute, ".", java, append([]string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
		"org.apache.kafka.tools." + class}, args...)...)
}

// kafkaTool is runKafkaTool that fails the test when the tool exits non-zero.
func kafkaTool(t *testing.T, class string, args ...string) string {
	t.Helper()
	out, err := runKafkaTool(t, class, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", class, strings.Join(args, " "), err, tail(out))
	}
	return out
}

// metadataQuorum runs kafka-metadata-quorum (MetadataQuorumCommand) with args.
func metadataQuorum(t *testing.T, args ...string) string {
	t.Helper()
	return kafkaTool(t, "MetadataQuorumCommand", args...)
}

// Apache Kafka's kafka-metadata-quorum describes a three-node exactq quorum through one
// controller listener (--bootstrap-controller, as against KRaft controllers): --status
// names the leader, its epoch, the high watermark and the three voters with their
// endpoints; --replication lists each voter with its log end offset and lag, the leader
// first.
func TestKafkaMetadataQuorumTool(t *testing.T) {
	q := nodetest.Start(t, 3)
	voters := q.Voters
	lead, term := q.Leader()
	// A follower's listener: the tool finds the leader by itself.
	bootstrap := voters[(lead+1)%3]

	status := metadataQuorum(t, "--bootstrap-controller", bootstrap, "describe", "--status")
	for _, want := range []string{
		fmt.Sprintf(`(?m)^LeaderId:\s+%d$`, lead),
		fmt.Sprintf(`(?m)^LeaderEpoch:\s+%d$`, term),
		`(?m)^HighWatermark:\s+[1-9][0-9]*$`,
		`(?m)^CurrentObservers:\s+\[\]$`,
	} {
		if !regexp.MustCompile(want).MatchString(status) {
			t.Fatalf("describe --status lacks %s:\n%s", want, status)
		}
	}
	for id, addr := range voters {
		if !strings.Contains(status, fmt.Sprintf(`"id": %d,`, id)) || !strings.Contains(status, addr) {
			t.Fatalf("describe --status lacks voter %d at %s:\n%s", id, addr, status)
		}
	}

	// Followers acknowledge the commit with the next heartbeats; lag 0 for all three.
	var rep string
	err := await.Until(30*time.Second, 200*time.Millisecond, func() error {
		rep = metadataQuorum(t, "--bootstrap-controller", bootstrap, "describe", "--replication")
		rows := regexp.MustCompile(`(?m)^(\d+)\s+\S+\s+(\d+)\s+(\d+)\s+.*\s(Leader|Follower)\s*$`).FindAllStringSubmatch(rep, -1)
		if len(rows) != 3 {
			return fmt.Errorf("%d rows", len(rows))
		}
		if rows[0][1] != fmt.Sprint(lead) || rows[0][4] != "Leader" {
			return fmt.Errorf("first row %q, want leader %d", rows[0][0], lead)
		}
		for _, r := range rows {
			if r[3] != "0" {
				return fmt.Errorf("row %q lags", r[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("describe --replication: %v\n%s", err, rep)
	}
	t.Logf("describe --status:\n%s\ndescribe --replication:\n%s", status, rep)
}

// kafka-metadata-quorum add-controller, given a joining exactq node's configuration (node
// id, controller listener, a metadata directory whose meta.properties has its directory
// id, as Kafka's tool reads them), makes it a voter through a follower's listener;
// remove-controller takes it out again.
func TestKafkaMetadataQuorumAddRemoveController(t *testing.T) {
	q := nodetest.Start(t, 3)
	lead, _ := q.Leader()
	bootstrap := q.Addrs[(lead+1)%3]
	joiner := q.Join()
	dir := nodetest.DirectoryID(joiner)
	dirText := base64.RawURLEncoding.EncodeToString(dir[:])

	conf := t.TempDir()
	metaDir := filepath.Join(conf, "metadata")
	if err := os.Mkdir(metaDir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf("version=1\ncluster.id=exactq-test-cluster\nnode.id=%d\ndirectory.id=%s\n", joiner, dirText)
	props := fmt.Sprintf("node.id=%d\nprocess.roles=broker,controller\ncontroller.listener.names=CONTROLLER\nlisteners=CONTROLLER://%s\nmetadata.log.dir=%s\n",
		joiner, q.Addrs[joiner], metaDir)
	propsPath := filepath.Join(conf, "controller.properties")
	if err := os.WriteFile(filepath.Join(metaDir, "meta.properties"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}

	out := metadataQuorum(t, "--bootstrap-controller", bootstrap, "--command-config", propsPath, "add-controller")
	if want := fmt.Sprintf("Added controller %d with directory id %s", joiner, dirText); !strings.Contains(out, want) {
		t.Fatalf("add-controller printed:\n%s\nwant %q", out, want)
	}
	status := metadataQuorum(t, "--bootstrap-controller", bootstrap, "describe", "--status")
	if want := fmt.Sprintf(`{"id": %d, "directoryId": "%s", "endpoints": ["CONTROLLER://%s"]}`, joiner, dirText, q.Addrs[joiner]); !strings.Contains(status, want) {
		t.Fatalf("describe --status after add-controller lacks %s:\n%s", want, status)
	}

	out = metadataQuorum(t, "--bootstrap-controller", bootstrap, "remove-controller", "--controller-id", fmt.Sprint(joiner), "--controller-directory-id", dirText)
	if want := fmt.Sprintf("Removed KRaft controller %d with directory id %s", joiner, dirText); !strings.Contains(out, want) {
		t.Fatalf("remove-controller printed:\n%s\nwant %q", out, want)
	}
	status = metadataQuorum(t, "--bootstrap-controller", bootstrap, "describe", "--status")
	if strings.Contains(status, fmt.Sprintf(`"id": %d,`, joiner)) {
		t.Fatalf("describe --status after remove-controller still has node %d:\n%s", joiner, status)
	}
}

// toolWait bounds every wait of the Kafka tools suite for a condition another party makes
// true (a member joining or leaving, a deletion reaching the metadata).
const toolWait = 20 * time.Second

// toolRows returns the whitespace-separated fields of every line of a tool's table whose
// first field is first (a group, a topic, a transactional id), in order.
func toolRows(out, first string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			rows = append(rows, f)
		}
	}
	return rows
}

// toolColumn returns the field of row under the header column of the table in out (the
// first line whose first field is the header's first field).
func toolColumn(t *testing.T, out, header0, column string, row []string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		h := strings.Fields(l)
		if len(h) == 0 || h[0] != header0 {
			continue
		}
		if i := slices.Index(h, column); i >= 0 && i < len(row) {
			return row[i]
		}
		break
	}
	t.Fatalf("no column %s for row %q in:\n%s", column, row, out)
	return ""
}

// mustContain fails the test unless out has every one of the regular expressions want.
func mustContain(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Fatalf("%s lacks %s:\n%s", what, w, out)
		}
	}
}

// awaitEmpty polls a group tool's --describe --state (kafka-consumer-groups or
// kafka-share-groups) until group is Empty, after its last member left.
func awaitEmpty(t *testing.T, tool func(args ...string) string, group string) {
	t.Helper()
	eventually(t, toolWait, "group "+group+" empty after its member left", func() error {
		out := tool("--describe", "--group", group, "--state")
		if rows := toolRows(out, group); len(rows) != 1 || toolColumn(t, out, "GROUP", "STATE", rows[0]) != "Empty" {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
}

// TestKafkaTools runs Apache Kafka 4.4's own command-line tools, each as the Java main
// class its shell script starts, against one exactq broker, and checks the parts of their
// output a user reads.
func TestKafkaTools(t *testing.T) {
	kafkaToolsClasspath(t) // skips without Java, before a broker starts
	cfg := map[string]string{"message.max.bytes": "2000000"}
	for k, v := range shareBrokerConfig {
		cfg[k] = v
	}
	tb := testbroker.Start(t, testbroker.WithConfig(cfg))
	boot := []string{"--bootstrap-server", tb.Addr}
	tool := func(t *testing.T, class string, args ...string) string {
		t.Helper()
		return kafkaTool(t, class, append(slices.Clone(boot), args...)...)
	}
	produce := newClient(t, tb.Addr, kgo.ProducerLinger(0))
	produceN := func(t *testing.T, topic string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmtKey(i)), Value: []byte(fmt.Sprintf("%s-%03d", topic, i))})
		}
		produceAll(t, ctxFor(t, toolWait), produce, recs)
	}

	t.Run("kafka-topics", func(t *testing.T) {
		const topic = "tools-topic"
		topics := func(args ...string) string { return tool(t, "TopicCommand", args...) }
		mustContain(t, "--create", topics("--create", "--topic", topic, "--partitions", "3", "--config", "cleanup.policy=compact"),
			`Created topic tools-topic\.`)
		describe := func(partitions int) {
			t.Helper()
			out := topics("--describe", "--topic", topic)
			head := regexp.MustCompile(`(?m)^Topic: tools-topic\s+TopicId: \S{22}\s+PartitionCount: (\d+)\s+ReplicationFactor: 1\s+Configs: (\S*)$`).FindStringSubmatch(out)
			// The configs not at their defaults: the topic's own and the broker's static one.
			var configs []string
			if head != nil {
				configs = strings.Split(head[2], ",")
			}
			if head == nil || head[1] != strconv.Itoa(partitions) || len(configs) != 2 ||
				!slices.Contains(configs, "cleanup.policy=compact") || !slices.Contains(configs, "max.message.bytes=2000000") {
				t.Fatalf("--describe, want %d partitions and configs cleanup.policy=compact and max.message.bytes=2000000:\n%s", partitions, out)
			}
			for p := range partitions {
				mustContain(t, "--describe", out, fmt.Sprintf(`(?m)^\s+Topic: tools-topic\s+Partition: %d\s+Leader: 1\s+Replicas: 1\s+Isr: 1\b`, p))
			}
			if n := strings.Count(out, "Partition: "); n != partitions {
				t.Fatalf("--describe lists %d partitions, want %d:\n%s", n, partitions, out)
			}
		}
		describe(3)
		topics("--alter", "--topic", topic, "--partitions", "5")
		describe(5)
		if list := topics("--list"); !slices.Contains(strings.Fields(list), topic) {
			t.Fatalf("--list lacks %s:\n%s", topic, list)
		}
		topics("--delete", "--topic", topic)
		eventually(t, toolWait, "kafka-topics --list without the deleted topic", func() error {
			if list := topics("--list"); slices.Contains(strings.Fields(list), topic) {
				return fmt.Errorf("--list: %s", list)
			}
			return nil
		})
		out, err := runKafkaTool(t, "TopicCommand", append(slices.Clone(boot), "--describe", "--topic", topic)...)
		if err == nil || !strings.Contains(out, "Topic 'tools-topic' does not exist") {
			t.Fatalf("--describe of the deleted topic: %v\n%s", err, out)
		}
	})

	t.Run("kafka-configs", func(t *testing.T) {
		const topic, group = "tools-configs", "tools-configs-group"
		configs := func(args ...string) string { return tool(t, "ConfigCommand", args...) }
		tool(t, "TopicCommand", "--create", "--topic", topic, "--partitions", "1")
		entity := []string{"--entity-type", "topics", "--entity-name", topic}
		mustContain(t, "--alter --add-config", configs(append(entity, "--alter", "--add-config", "retention.ms=3600000,max.message.bytes=3000000")...),
			`Completed updating config for topic tools-configs\.`)
		mustContain(t, "topic --describe", configs(append(entity, "--describe")...),
			`Dynamic configs for topic tools-configs are:`,
			`(?m)^  retention.ms=3600000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:retention.ms=3600000[,}]`,
			`(?m)^  max.message.bytes=3000000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:max.message.bytes=3000000, STATIC_BROKER_CONFIG:message.max.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588\}$`)
		configs(append(entity, "--alter", "--delete-config", "max.message.bytes,retention.ms")...)
		out := configs(append(entity, "--describe", "--all")...)
		mustContain(t, "topic --describe --all", out,
			`All configs for topic tools-configs are:`,
			`(?m)^  max.message.bytes=2000000 sensitive=false synonyms=\{STATIC_BROKER_CONFIG:message.max.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588\}$`,
			`(?m)^  cleanup.policy=delete sensitive=false synonyms=\{DEFAULT_CONFIG:log.cleanup.policy=delete\}$`,
			`(?m)^  retention.ms=604800000 sensitive=false `)
		if strings.Contains(out, "DYNAMIC_TOPIC_CONFIG") {
			t.Fatalf("--delete-config left a dynamic config:\n%s", out)
		}

		broker := []string{"--entity-type", "brokers", "--entity-name", "1"}
		mustContain(t, "broker --describe", configs(append(broker, "--describe")...), `Dynamic configs for broker 1 are:`)
		mustContain(t, "broker --describe --all", configs(append(broker, "--describe", "--all")...),
			`All configs for broker 1 are:`,
			`(?m)^  message.max.bytes=2000000 sensitive=false synonyms=\{STATIC_BROKER_CONFIG:message.max.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588\}$`,
			`(?m)^  log.retention.hours=168 sensitive=false synonyms=\{DEFAULT_CONFIG:log.retention.hours=168\}$`,
			`(?m)^  group.share.heartbeat.interval.ms=200 sensitive=false `)

		grp := []string{"--entity-type", "groups", "--entity-name", group}
		mustContain(t, "group --alter", configs(append(grp, "--alter", "--add-config", "consumer.session.timeout.ms=50000,share.record.lock.duration.ms=15000")...),
			`Completed updating config for group tools-configs-group\.`)
		mustContain(t, "group --describe", configs(append(grp, "--describe")...),
			`Dynamic configs for group tools-configs-group are:`,
			`(?m)^  consumer.session.timeout.ms=50000 sensitive=false `,
			`(?m)^  share.record.lock.duration.ms=15000 sensitive=false `)
		configs(append(grp, "--alter", "--delete-config", "share.record.lock.duration.ms")...)
		out = configs(append(grp, "--describe", "--all")...)
		mustContain(t, "group --describe --all", out,
			`(?m)^  consumer.session.timeout.ms=50000 sensitive=false `,
			`(?m)^  share.record.lock.duration.ms=30000 sensitive=false `,
			`(?m)^  share.auto.offset.reset=latest sensitive=false `)
	})

	t.Run("kafka-consumer-groups", func(t *testing.T) {
		const topic, group, n = "tools-cg", "tools-cg-group", 30
		groups := func(args ...string) string { return tool(t, "consumer.group.ConsumerGroupCommand", args...) }
		createTopic(t, newAdmin(t, tb.Addr), topic, 3, nil)
		produceN(t, topic, n)
		member := newClient(t, tb.Addr, kgo.ClientID("tools-cg-member"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
		ctx := ctxFor(t, toolWait)
		for got := 0; got < n; {
			fs := member.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("group member poll after %d of %d records: %v", got, n, err)
			}
			got += fs.NumRecords()
		}
		if err := member.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		ends := endOffsets(t, newAdmin(t, tb.Addr), topic)

		if list := groups("--list"); !slices.Contains(strings.Fields(list), group) {
			t.Fatalf("--list lacks %s:\n%s", group, list)
		}
		out := groups("--describe", "--group", group, "--offsets")
		rows := toolRows(out, group)
		if len(rows) != 3 {
			t.Fatalf("--describe: %d rows, want one per partition:\n%s", len(rows), out)
		}
		for _, r := range rows {
			p, _ := strconv.Atoi(toolColumn(t, out, "GROUP", "PARTITION", r))
			end := strconv.FormatInt(ends[int32(p)], 10)
			if toolColumn(t, out, "GROUP", "CURRENT-OFFSET", r) != end || toolColumn(t, out, "GROUP", "LOG-END-OFFSET", r) != end ||
				toolColumn(t, out, "GROUP", "LAG", r) != "0" || toolColumn(t, out, "GROUP", "CLIENT-ID", r) != "tools-cg-member" ||
				toolColumn(t, out, "GROUP", "CONSUMER-ID", r) == "-" {
				t.Fatalf("--describe row %q, want the member's committed end offset %s and lag 0:\n%s", r, end, out)
			}
		}
		out = groups("--describe", "--group", group, "--members")
		if rows := toolRows(out, group); len(rows) != 1 || toolColumn(t, out, "GROUP", "CLIENT-ID", rows[0]) != "tools-cg-member" ||
			toolColumn(t, out, "GROUP", "#PARTITIONS", rows[0]) != "3" {
			t.Fatalf("--describe --members, want the one member with 3 partitions:\n%s", out)
		}
		out = groups("--describe", "--group", group, "--state")
		if rows := toolRows(out, group); len(rows) != 1 || toolColumn(t, out, "GROUP", "STATE", rows[0]) != "Stable" ||
			toolColumn(t, out, "GROUP", "#MEMBERS", rows[0]) != "1" || toolColumn(t, out, "GROUP", "ASSIGNMENT-STRATEGY", rows[0]) == "-" {
			t.Fatalf("--describe --state, want Stable with 1 member:\n%s", out)
		}
		// Offsets of a group with members cannot be reset.
		reset := []string{"--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"}
		mustContain(t, "--reset-offsets of an active group", groups(reset...),
			`Assignments can only be reset if the group 'tools-cg-group' is inactive, but the current state is Stable\.`)

		member.Close() // leaves the group
		awaitEmpty(t, groups, group)
		out = groups(reset...)
		if rows := toolRows(out, group); len(rows) != 3 || slices.ContainsFunc(rows, func(r []string) bool { return toolColumn(t, out, "GROUP", "NEW-OFFSET", r) != "0" }) {
			t.Fatalf("--reset-offsets --to-earliest --execute, want NEW-OFFSET 0 for the 3 partitions:\n%s", out)
		}
		groups("--reset-offsets", "--group", group, "--topic", topic+":0", "--to-offset", "2", "--execute")
		got, err := groupOffsets(t, newAdmin(t, tb.Addr), group, topic)
		if err != nil || got[0] != min(2, ends[0]) || got[1] != 0 || got[2] != 0 {
			t.Fatalf("committed offsets after the resets: %v (%v), want partition 0 at %d and the others at 0", got, err, min(2, ends[0]))
		}
		out = groups("--describe", "--group", group)
		mustContain(t, "--describe of the empty group", out, `Consumer group 'tools-cg-group' has no active members\.`)
		for _, r := range toolRows(out, group) {
			p, _ := strconv.Atoi(toolColumn(t, out, "GROUP", "PARTITION", r))
			if lag := toolColumn(t, out, "GROUP", "LAG", r); lag != strconv.FormatInt(ends[int32(p)]-got[int32(p)], 10) {
				t.Fatalf("--describe after the reset: partition %d lag %s, want %d:\n%s", p, lag, ends[int32(p)]-got[int32(p)], out)
			}
		}
		mustContain(t, "--delete", groups("--delete", "--group", group),
			`Deletion of requested consumer groups \('tools-cg-group'\) was successful\.`)
		if list := groups("--list"); slices.Contains(strings.Fields(list), group) {
			t.Fatalf("--list after --delete still has %s:\n%s", group, list)
		}
	})

	t.Run("kafka-share-groups", func(t *testing.T) {
		const topic, group, n = "tools-sg", "tools-sg-group", 40
		share := func(args ...string) string { return tool(t, "consumer.group.ShareGroupCommand", args...) }
		createTopic(t, newAdmin(t, tb.Addr), topic, 2, nil)
		produceN(t, topic, n)
		ends := endOffsets(t, newAdmin(t, tb.Addr), topic)
		tool(t, "ConfigCommand", "--entity-type", "groups", "--entity-name", group, "--alter", "--add-config", "share.auto.offset.reset=earliest")

		// kafka-console-share-consumer reads every record once and acknowledges it.
		out := tool(t, "consumer.ConsoleShareConsumer", "--topic", topic, "--group", group, "--max-messages", strconv.Itoa(n),
			"--timeout-ms", "15000", "--consumer-property", "client.id=tools-console-share")
		mustContain(t, "kafka-console-share-consumer", out, fmt.Sprintf(`Processed a total of %d messages`, n))
		for i := range n {
			if c := strings.Count(out, fmt.Sprintf("%s-%03d\n", topic, i)); c != 1 {
				t.Fatalf("kafka-console-share-consumer printed record %d %d times:\n%s", i, c, tail(out))
			}
		}

		if list := share("--list"); !slices.Contains(strings.Fields(list), group) {
			t.Fatalf("--list lacks %s:\n%s", group, list)
		}
		offsets := func(what string, want func(p int32) (start, lag int64)) {
			t.Helper()
			for _, args := range [][]string{{"--describe", "--group", group}, {"--describe", "--group", group, "--offsets"}} {
				out := share(args...)
				rows := toolRows(out, group)
				if len(rows) != len(ends) {
					t.Fatalf("%s: %s: %d rows, want %d:\n%s", what, strings.Join(args, " "), len(rows), len(ends), out)
				}
				for _, r := range rows {
					p, _ := strconv.Atoi(toolColumn(t, out, "GROUP", "PARTITION", r))
					start, lag := want(int32(p))
					if toolColumn(t, out, "GROUP", "START-OFFSET", r) != fmt.Sprint(start) || toolColumn(t, out, "GROUP", "LAG", r) != fmt.Sprint(lag) {
						t.Fatalf("%s: %s: row %q, want start offset %d and lag %d:\n%s", what, strings.Join(args, " "), r, start, lag, out)
					}
				}
			}
		}
		offsets("after the console share consumer", func(p int32) (int64, int64) { return ends[p], 0 })

		// A member (kgo's share consumer) shows with its assignment; the group cannot be
		// reset or deleted while it is there.
		member := newShareCl(t, tb.Addr, group, topic, "tools-sg-member")
		members := []string{"--describe", "--group", group, "--members"}
		eventually(t, toolWait, "the member assigned both partitions", func() error {
			member.PollFetches(ctxFor(t, 300*time.Millisecond))
			out := share(members...)
			rows := toolRows(out, group)
			if len(rows) != 1 || toolColumn(t, out, "GROUP", "CLIENT-ID", rows[0]) != "exactq-tools-sg-member" ||
				toolColumn(t, out, "GROUP", "#PARTITIONS", rows[0]) != "2" || toolColumn(t, out, "GROUP", "ASSIGNMENT", rows[0]) != topic+":0,1" {
				return fmt.Errorf("%s", out)
			}
			return nil
		})
		out = share("--describe", "--group", group, "--state")
		if rows := toolRows(out, group); len(rows) != 1 || toolColumn(t, out, "GROUP", "STATE", rows[0]) != "Stable" || toolColumn(t, out, "GROUP", "#MEMBERS", rows[0]) != "1" {
			t.Fatalf("--describe --state with a member, want Stable with 1 member:\n%s", out)
		}
		reset := []string{"--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"}
		out, err := runKafkaTool(t, "consumer.group.ShareGroupCommand", append(slices.Clone(boot), reset...)...)
		if err == nil || !strings.Contains(out, "Share group 'tools-sg-group' is not empty.") {
			t.Fatalf("--reset-offsets with a member: %v, want it refused:\n%s", err, out)
		}
		member.Close()
		awaitEmpty(t, share, group)
		out = share(reset...)
		if rows := toolRows(out, group); len(rows) != len(ends) || slices.ContainsFunc(rows, func(r []string) bool { return toolColumn(t, out, "GROUP", "NEW-OFFSET", r) != "0" }) {
			t.Fatalf("--reset-offsets --to-earliest --execute, want NEW-OFFSET 0 for every partition:\n%s", out)
		}
		offsets("after --reset-offsets --to-earliest", func(p int32) (int64, int64) { return 0, ends[p] })
		mustContain(t, "--delete", share("--delete", "--group", group),
			`Deletion of requested share groups \('tools-sg-group'\) was successful\.`)
		if list := share("--list"); slices.Contains(strings.Fields(list), group) {
			t.Fatalf("--list after --delete still has %s:\n%s", group, list)
		}
	})

	t.Run("kafka-transactions", func(t *testing.T) {
		const topic, txnID = "tools-txn", "tools-txn-id"
		txns := func(args ...string) string { return tool(t, "TransactionsCommand", args...) }
		createTopic(t, newAdmin(t, tb.Addr), topic, 1, nil)
		producer := newClient(t, tb.Addr, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Value: []byte("open")}
		if err := producer.ProduceSync(ctxFor(t, toolWait), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pid := strconv.FormatInt(rec.ProducerID, 10)

		out := txns("list")
		if rows := toolRows(out, txnID); len(rows) != 1 || rows[0][2] != pid || rows[0][3] != "Ongoing" {
			t.Fatalf("list, want %s (producer %s) Ongoing:\n%s", txnID, pid, out)
		}
		out = txns("describe", "--transactional-id", txnID)
		if rows := toolRows(out, "1"); len(rows) != 1 || rows[0][1] != txnID || rows[0][2] != pid || rows[0][4] != "Ongoing" || rows[0][len(rows[0])-1] != topic+"-0" {
			t.Fatalf("describe, want coordinator 1, producer %s, Ongoing on %s-0:\n%s", pid, topic, out)
		}
		out = txns("describe-producers", "--topic", topic, "--partition", "0")
		if rows := toolRows(out, pid); len(rows) != 1 || rows[0][len(rows[0])-1] != "0" {
			t.Fatalf("describe-producers, want producer %s with its transaction started at offset 0:\n%s", pid, out)
		}
		// The open transaction is a candidate (--max-transaction-timeout 0) but the
		// coordinator knows its partition: not hanging.
		for _, scope := range [][]string{{"--broker-id", "1"}, {"--topic", topic}} {
			out = txns(append([]string{"find-hanging", "--max-transaction-timeout", "0"}, scope...)...)
			mustContain(t, "find-hanging", out, `(?m)^Topic\s+Partition\s+ProducerId\s+ProducerEpoch\s+CoordinatorEpoch\s+StartOffset\s+LastTimestamp\s+Duration\(min\)\s*$`)
			if strings.Contains(out, topic) {
				t.Fatalf("find-hanging %s lists the open, known transaction:\n%s", strings.Join(scope, " "), out)
			}
		}

		if err := producer.EndTransaction(ctxFor(t, toolWait), kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		eventually(t, toolWait, "kafka-transactions list showing the commit", func() error {
			out := txns("list")
			if rows := toolRows(out, txnID); len(rows) != 1 || rows[0][3] != "CompleteCommit" {
				return fmt.Errorf("%s", out)
			}
			return nil
		})
		out = txns("describe-producers", "--topic", topic, "--partition", "0")
		if rows := toolRows(out, pid); len(rows) != 1 || rows[0][len(rows[0])-1] != "None" {
			t.Fatalf("describe-producers after the commit, want producer %s with no open transaction:\n%s", pid, out)
		}
		out, err := runKafkaTool(t, "TransactionsCommand", append(slices.Clone(boot), "describe", "--transactional-id", "tools-no-such-id")...)
		if err == nil || !strings.Contains(out, "the ID could not be found") {
			t.Fatalf("describe of an unknown transactional id: %v\n%s", err, out)
		}
	})

	t.Run("kafka-transactions abort", func(t *testing.T) {
		const topic, txnID = "tools-hanging", "tools-hanging-id"
		adm := newAdmin(t, tb.Addr)
		createTopic(t, adm, topic, 1, nil)
		pid, epoch := beginTransactionNeverEnded(t, tb.Addr, txnID, topic, "hanging")
		lastStable := func() int64 {
			t.Helper()
			o, err := adm.ListCommittedOffsets(ctxFor(t, toolWait), topic)
			if err != nil || o[topic][0].Err != nil {
				t.Fatalf("last stable offset: %v %+v", err, o[topic][0])
			}
			return o[topic][0].Offset
		}
		if got := lastStable(); got != 0 {
			t.Fatalf("last stable offset with the transaction open: %d, want 0", got)
		}
		out := tool(t, "TransactionsCommand", "describe-producers", "--topic", topic, "--partition", "0")
		if rows := toolRows(out, strconv.FormatInt(pid, 10)); len(rows) != 1 || rows[0][1] != strconv.Itoa(int(epoch)) || rows[0][len(rows[0])-1] != "0" {
			t.Fatalf("describe-producers, want producer %d epoch %d with a transaction from offset 0:\n%s", pid, epoch, out)
		}

		tool(t, "TransactionsCommand", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
		if got := lastStable(); got != 2 { // the record and the abort marker
			t.Fatalf("last stable offset after kafka-transactions abort: %d, want 2", got)
		}
		out = tool(t, "TransactionsCommand", "describe-producers", "--topic", topic, "--partition", "0")
		if rows := toolRows(out, strconv.FormatInt(pid, 10)); len(rows) != 1 || rows[0][len(rows[0])-1] != "None" {
			t.Fatalf("describe-producers after the abort, want no open transaction:\n%s", out)
		}
		// read_committed now reads past the aborted records to one produced after them.
		produceN(t, topic, 1)
		got := consumeExactly(t, tb.Addr, topic, 1, 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		if string(got[0].Value) != topic+"-000" || got[0].Offset != 2 {
			t.Fatalf("read_committed after the abort read %q at %d, want %s-000 at 2", got[0].Value, got[0].Offset, topic)
		}
	})

	t.Run("kafka-log-dirs", func(t *testing.T) {
		const topic = "tools-logdirs"
		createTopic(t, newAdmin(t, tb.Addr), topic, 2, nil)
		produceN(t, topic, 300)
		out := tool(t, "LogDirsCommand", "--describe", "--topic-list", topic)
		mustContain(t, "--describe", out, `(?m)^Received log directory information from brokers 1$`)
		var report struct {
			Brokers []struct {
				Broker  int
				LogDirs []struct {
					LogDir     string
					Error      *string
					Partitions []struct {
						Partition string
						Size      int64
						OffsetLag int64
						IsFuture  bool
					}
				}
			}
		}
		jsonLine := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
		if err := json.Unmarshal([]byte(jsonLine), &report); err != nil || len(report.Brokers) != 1 || len(report.Brokers[0].LogDirs) != 1 {
			t.Fatalf("--describe, want one broker with one log dir: %v\n%s", err, out)
		}
		dir := report.Brokers[0].LogDirs[0]
		if abs, _ := filepath.Abs(tb.DataDir); dir.LogDir != abs || dir.Error != nil || len(dir.Partitions) != 2 {
			t.Fatalf("--describe, want %s without error and the topic's 2 partitions:\n%s", abs, out)
		}
		for _, p := range dir.Partitions {
			segments, _ := filepath.Glob(filepath.Join(tb.DataDir, p.Partition, "*.log"))
			var onDisk int64
			for _, seg := range segments {
				if fi, err := os.Stat(seg); err == nil {
					onDisk += fi.Size()
				}
			}
			if !strings.HasPrefix(p.Partition, topic+"-") || p.Size != onDisk || p.Size == 0 || p.OffsetLag != 0 || p.IsFuture {
				t.Fatalf("--describe: %s has size %d (on disk %d), lag %d, future %v:\n%s", p.Partition, p.Size, onDisk, p.OffsetLag, p.IsFuture, out)
			}
		}
	})

	t.Run("kafka-features", func(t *testing.T) {
		out := tool(t, "FeatureCommand", "describe")
		for _, f := range []string{`share\.version`, `transaction\.version`} {
			mustContain(t, "describe", out, `(?m)^Feature: `+f+`\s+SupportedMinVersion: 0\s+SupportedMaxVersion: [1-9]\s+FinalizedVersionLevel: [1-9]\s+Epoch: \d+\s*$`)
		}
	})
}

// beginTransactionNeverEnded starts a transaction with raw requests, as a producer that
// hangs or dies would (InitProducerId, then one transactional batch the coordinator adds
// the partition for, KIP-890), and never ends it. It returns the producer id and epoch.
func beginTransactionNeverEnded(t *testing.T, addr, txnID, topic, value string) (int64, int16) {
	t.Helper()
	ctx := ctxFor(t, toolWait)
	cl := newClient(t, addr)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &txnID
	init.TransactionTimeoutMillis = 600_000 // the coordinator must not abort it itself meanwhile
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %+v", err, ir)
	}
	h := batch.NoProducer(0, time.Now().UnixMilli())
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = ir.ProducerID, ir.ProducerEpoch, 0
	h.Attributes = batch.AttrTransactional
	rec := kmsg.NewRecord()
	rec.Value = []byte(value)
	raw, err := batch.Encode(nil, h, []kmsg.Record{rec}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis, produce.TransactionID = -1, 5000, &txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	produce.Topics = append(produce.Topics, rt)
	pr, err := produce.RequestWith(ctx, cl)
	if err != nil || pr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("transactional produce: %v %+v", err, pr)
	}
	return ir.ProducerID, ir.ProducerEpoch
}
