package compat

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/node/nodetest"
)

// kafkaTools is Apache Kafka 4.4's tools jar and its dependencies, resolved with Maven
// from kafkatools/pom.xml into the user cache directory the first time (CI: Maven Central
// must be reachable once); later runs only check the marker file.
var kafkaTools struct {
	once      sync.Once
	java, cp  string
	err, skip string
}

func kafkaToolsClasspath(t *testing.T) (java, cp string) {
	t.Helper()
	k := &kafkaTools
	k.once.Do(func() {
		mvn, errM := exec.LookPath("mvn")
		java, errJ := exec.LookPath("java")
		if errM != nil || errJ != nil {
			k.skip = fmt.Sprintf("Kafka's tools need mvn and java (JDK 17+) on PATH; mvn: %v, java: %v", errM, errJ)
			return
		}
		base, err := os.UserCacheDir()
		if err != nil {
			k.err = err.Error()
			return
		}
		cache := filepath.Join(base, "exactq-compat", "kafka-tools-4.4.0")
		libs := filepath.Join(cache, "libs")
		marker := filepath.Join(cache, "resolved")
		if _, err := os.Stat(marker); err != nil {
			pom, err := filepath.Abs(filepath.Join("kafkatools", "pom.xml"))
			if err != nil {
				k.err = err.Error()
				return
			}
			_ = os.RemoveAll(libs)
			out, err := runBounded(10*time.Minute, ".", mvn, "-B", "-q", "-f", pom, "dependency:copy-dependencies", "-DoutputDirectory="+libs)
			if err != nil {
				msg := "mvn dependency:copy-dependencies failed"
				if mavenNetworkTrouble.MatchString(out) {
					msg = "Maven could not download kafka-tools 4.4.0: Maven Central is unreachable and the cache is empty; this test cannot pass without them"
				}
				k.err = fmt.Sprintf("%s (%v):\n%s", msg, err, tail(out))
				return
			}
			if err := os.WriteFile(marker, []byte("4.4.0\n"), 0o644); err != nil {
				k.err = err.Error()
				return
			}
		}
		k.java, k.cp = java, filepath.Join(libs, "*")
	})
	if k.skip != "" {
		t.Skip(k.skip)
	}
	if k.err != "" {
		t.Fatal(k.err)
	}
	return k.java, k.cp
}

// metadataQuorum runs kafka-metadata-quorum (MetadataQuorumCommand) with args.
func metadataQuorum(t *testing.T, args ...string) string {
	t.Helper()
	java, cp := kafkaToolsClasspath(t)
	out, err := runBounded(2*time.Minute, ".", java, append([]string{"-Xmx256m", "-cp", cp,
		"org.apache.kafka.tools.MetadataQuorumCommand"}, args...)...)
	if err != nil {
		t.Fatalf("kafka-metadata-quorum %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
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
