package compat

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

// confluentKafkaVersion is the confluent-kafka (librdkafka) the Python suite installs.
const confluentKafkaVersion = "2.16.1"

var confluentPython struct {
	once         sync.Once
	python, skip string
	err          string
}

// pythonWithConfluentKafka returns a Python interpreter of a virtual environment with
// confluent-kafka installed by pip, made once per machine in the user cache directory.
// It skips without python3.
func pythonWithConfluentKafka(t *testing.T) string {
	t.Helper()
	b := &confluentPython
	b.once.Do(func() {
		py, err := exec.LookPath("python3")
		if err != nil {
			b.skip = "the confluent-kafka suite needs python3 with venv and pip on PATH: " + err.Error()
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		venv := filepath.Join(cache, "exactq-compat", "confluent-kafka-"+confluentKafkaVersion)
		b.python = filepath.Join(venv, "bin", "python")
		if out, err := runBounded(time.Minute, "", b.python, "-c", "import confluent_kafka"); err == nil {
			return
		} else if _, statErr := os.Stat(b.python); statErr == nil {
			t.Logf("cached venv lacks confluent_kafka (%v): %s", err, tail(out))
		}
		if out, err := runBounded(2*time.Minute, "", py, "-m", "venv", venv); err != nil {
			b.err = fmt.Sprintf("python3 -m venv %s: %v\n%s", venv, err, tail(out))
			return
		}
		if out, err := runBounded(5*time.Minute, "", b.python, "-m", "pip", "install", "-q", "confluent-kafka=="+confluentKafkaVersion); err != nil {
			b.err = fmt.Sprintf("pip install confluent-kafka==%s: %v\n%s", confluentKafkaVersion, err, tail(out))
		}
	})
	if b.skip != "" {
		t.Skip(b.skip)
	}
	if b.err != "" {
		t.Fatal(b.err)
	}
	return b.python
}

// TestConfluentConsumerProtocol runs confluent-kafka (librdkafka) with
// group.protocol=consumer (KIP-848) against exactq (compat/python/consumer_protocol.py):
// three consumers subscribe, split a six-partition topic and commit what they consume; a
// closing consumer's partitions move to the other two. From Go: the group's committed
// offsets are the end offsets.
func TestConfluentConsumerProtocol(t *testing.T) {
	python := pythonWithConfluentKafka(t)
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500"}))
	adm := newAdmin(t, tb.Addr)
	const topic, group, n, parts = "py-848", "py-848-group", 3000, 6
	createTopic(t, adm, topic, parts, nil)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmtKey(i)), Value: []byte(fmt.Sprintf("v-%05d", i))})
	}
	produceAll(t, ctxFor(t, time.Minute), newClient(t, tb.Addr), recs)

	script, err := filepath.Abs(filepath.Join("python", "consumer_protocol.py"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := runBounded(3*time.Minute, "", python, script, tb.Addr, topic, group, strconv.Itoa(n), strconv.Itoa(parts))
	t.Logf("confluent-kafka:\n%s", tail(out))
	if err != nil {
		t.Fatalf("consumer_protocol.py: %v", err)
	}
	if !strings.Contains(out, "OK: confluent-kafka consumer protocol") {
		t.Fatal("consumer_protocol.py exited 0 without its OK line")
	}
	ends := endOffsets(t, adm, topic)
	got, err := groupOffsets(t, adm, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range ends {
		if got[p] != e {
			t.Fatalf("group %s committed %v, want the end offsets %v", group, got, ends)
		}
	}
}
