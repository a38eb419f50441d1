package compat

import (
	"bytes"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestConfluentKafka runs confluent-kafka 2.16 (librdkafka 2.16, Python; installed with pip
// into a virtual environment by pythonWithConfluentKafka) against one exactq broker, each
// subtest a script of compat/python on its own topics and groups:
//   - producer: an idempotent acks=all Producer; every record read back once, at the
//     partition and offset its delivery report gave
//   - classic-group: two Consumers of a classic group commit across the rebalance when the
//     second joins; no record read twice, the group's offsets end at the end offsets
//   - consumer-protocol: three Consumers with group.protocol=consumer (KIP-848) split a
//     topic and commit; a closing consumer's partitions move to the other two
//   - transactions: consume-transform-produce with send_offsets_to_transaction; an aborted
//     transaction's output is invisible to read_committed (and there for read_uncommitted)
//   - share-consumer: two ShareConsumers (KIP-932, explicit acknowledgement) receive every
//     record exactly once between them, and close
func TestConfluentKafka(t *testing.T) {
	python := pythonWithConfluentKafka(t) // skips without python3, before a broker starts
	cfg := maps.Clone(shareBrokerConfig)
	cfg["group.consumer.min.heartbeat.interval.ms"] = "500"
	cfg["group.consumer.heartbeat.interval.ms"] = "500"
	tb := testbroker.Start(t, testbroker.WithConfig(cfg))
	adm := newAdmin(t, tb.Addr)
	produce := newClient(t, tb.Addr, kgo.ProducerLinger(0))
	produceN := func(t *testing.T, topic string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmtKey(i)), Value: []byte(fmt.Sprintf("value-%06d", i))})
		}
		produceAll(t, ctxFor(t, time.Minute), produce, recs)
	}
	script := func(t *testing.T, name, ok string, args ...string) string {
		t.Helper()
		return runScript(t, 2*time.Minute, []string{"PYTHONDONTWRITEBYTECODE=1"}, python, "python", name, ok, append([]string{tb.Addr}, args...)...)
	}
	// committedAtEnd checks that group's committed offsets on topic are its end offsets.
	committedAtEnd := func(t *testing.T, group, topic string) {
		t.Helper()
		ends := endOffsets(t, adm, topic)
		got, err := groupOffsets(t, adm, group, topic)
		if err != nil || !maps.Equal(got, ends) {
			t.Fatalf("group %s committed %v (%v), want the end offsets %v", group, got, err, ends)
		}
	}

	t.Run("producer", func(t *testing.T) {
		const topic, parts, n = "py-produce", 3, 5000
		createTopic(t, adm, topic, parts, nil)
		script(t, "producer.py", "OK: confluent-kafka producer", topic, strconv.Itoa(parts), strconv.Itoa(n))
	})

	// groupScript runs a group script on its own topic and checks the group's commits.
	groupScript := func(subtest, name, ok, topic, group string, parts, n int) {
		t.Run(subtest, func(t *testing.T) {
			createTopic(t, adm, topic, int32(parts), nil)
			produceN(t, topic, n)
			script(t, name, ok, topic, group, strconv.Itoa(n), strconv.Itoa(parts))
			committedAtEnd(t, group, topic)
		})
	}
	groupScript("classic-group", "classic_group.py", "OK: confluent-kafka classic group", "py-classic", "py-classic-group", 4, 300)
	groupScript("consumer-protocol", "consumer_protocol.py", "OK: confluent-kafka consumer protocol", "py-848", "py-848-group", 6, 3000)

	t.Run("transactions", func(t *testing.T) {
		const in, out, group, n = "py-txn-in", "py-txn-out", "py-txn-group", 500
		createTopic(t, adm, in, 3, nil)
		createTopic(t, adm, out, 3, nil)
		produceN(t, in, n)
		script(t, "transactions.py", "OK: confluent-kafka transactions", in, out, group, strconv.Itoa(n))
		committedAtEnd(t, group, in)

		stableOutput(t, adm, out)
		committed := map[string]int{}
		for _, r := range readAllRecords(t, tb.Addr, out, true) {
			committed[string(r.Value)]++
		}
		for i := range n {
			if v := fmt.Sprintf("T:VALUE-%06d", i); committed[v] != 1 {
				t.Fatalf("read_committed output has %s %d times, want once", v, committed[v])
			}
		}
		if len(committed) != n {
			t.Fatalf("read_committed output has %d distinct values, want the %d transformed inputs (an aborted record visible?)", len(committed), n)
		}
		aborted := 0
		for _, r := range readAllRecords(t, tb.Addr, out, false) {
			if bytes.HasPrefix(r.Value, []byte("ABORTED:")) {
				aborted++
			}
		}
		if aborted == 0 {
			t.Fatal("read_uncommitted output has no record of the aborted transaction: the test did not abort anything")
		}
	})

	t.Run("share-consumer", func(t *testing.T) {
		const topic, group, n = "py-share", "py-share-group", 1000
		createTopic(t, adm, topic, 2, nil)
		produceN(t, topic, n)
		setGroupConfigs(t, produce, group, "share.auto.offset.reset", "earliest")
		script(t, "share_consumer.py", "OK: confluent-kafka share consumer", topic, group, strconv.Itoa(n))
	})
}
