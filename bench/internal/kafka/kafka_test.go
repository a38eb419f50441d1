package kafka_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/bench/internal/driver"
	"github.com/exactq/exactq/bench/internal/kafka"
)

func TestServerProperties(t *testing.T) {
	p := kafka.ServerProperties("/d", 9092, 9093)
	for k, want := range map[string]string{
		"process.roles":                    "broker,controller",
		"node.id":                          "1",
		"controller.quorum.voters":         "1@127.0.0.1:9093",
		"listeners":                        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"offsets.topic.replication.factor": "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"log.dirs":                                         "/d",
	} {
		if p[k] != want {
			t.Errorf("%s = %q, want %q", k, p[k], want)
		}
	}
	for k := range p {
		if strings.HasPrefix(k, "log.flush") {
			t.Errorf("%s set: the reference must keep Kafka's default (no fsync before acks)", k)
		}
	}
}

// TestSideBySideSmoke is the smoke version of the side-by-side run (what scripts/test.sh
// runs through the command line): it resolves Apache Kafka 4.4 with Maven (first run only),
// starts it and a freshly built exactq, runs every workload P1-P7 once per target at tiny
// sizes and fails unless each measured every target it applies to. It needs Java 17+,
// Maven and network access the first time, so it only runs with EXACTQ_KAFKA_SMOKE=1.
func TestSideBySideSmoke(t *testing.T) {
	if os.Getenv("EXACTQ_KAFKA_SMOKE") != "1" {
		t.Skip("set EXACTQ_KAFKA_SMOKE=1 to start Apache Kafka (needs java and mvn)")
	}
	start := time.Now()
	var out, errs bytes.Buffer
	code := driver.Main([]string{"-build", "-kafka", "-fsync", "always,never", "-smoke", "-tmp", t.TempDir(), "-out", t.TempDir(), "suite"}, &out, &errs)
	t.Logf("took %v\n%s", time.Since(start).Round(time.Second), out.String())
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs.String())
	}
	for _, want := range []string{"| P1 produce, 8 partitions | kafka-4.4 |", "| P3 share, 4 consumers | exactq fsync never |",
		"| P5 eos-share | exactq fsync always |", "| P7 restart | kafka-4.4 |", "## Targets"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestStart starts and stops Kafka once (EXACTQ_KAFKA_SMOKE=1 only).
func TestStart(t *testing.T) {
	if os.Getenv("EXACTQ_KAFKA_SMOKE") != "1" {
		t.Skip("set EXACTQ_KAFKA_SMOKE=1 to start Apache Kafka (needs java and mvn)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr, stop, err := kafka.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop() // idempotent
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("bootstrap %q", addr)
	}
}
