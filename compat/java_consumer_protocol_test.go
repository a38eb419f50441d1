package compat

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestJavaConsumerProtocol is the Java half of issue 16's acceptance test 1: kafka-clients
// 4.4.0 with group.protocol=consumer (KIP-848) against exactq (compat/java
// ConsumerProtocol.java): three KafkaConsumers subscribe and split a six-partition topic,
// commit what they consume, describeConsumerGroups reports a CONSUMER group of three, a
// closing consumer's partitions move to the other two; then EosPipeline's transactional
// pipeline (sendOffsetsToTransaction with the consumer's member id and epoch) runs in a
// consumer-protocol group. From Go: both groups' committed offsets are the end offsets and
// read_committed sees every pipeline output exactly once.
func TestJavaConsumerProtocol(t *testing.T) {
	buildJava(t) // skips without Java, before a broker starts
	// A 500 ms heartbeat interval (Kafka's floor is 5 s) keeps the rebalances short.
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500"}))
	adm := newAdmin(t, tb.Addr)
	const topic, group, n, parts = "java-848", "java-848-group", 3000, 6
	const in, out, eosGroup, txnID, eosN, abortAt = "java-848-eos-in", "java-848-eos-out", "java-848-eos", "java-848-tx", 2000, 3
	createTopic(t, adm, topic, parts, nil)
	createTopic(t, adm, in, 3, nil)
	createTopic(t, adm, out, 3, nil)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmtKey(i)), Value: []byte(fmt.Sprintf("v-%05d", i))})
	}
	for i := range eosN {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("jin-%05d", i)), Value: []byte(fmt.Sprintf("jv-%05d", i))})
	}
	produceAll(t, ctxFor(t, time.Minute), newClient(t, tb.Addr), recs)

	runJava(t, 5*time.Minute, "512m", "ConsumerProtocol", "OK: Java consumer protocol",
		tb.Addr, topic, group, strconv.Itoa(n), strconv.Itoa(parts), in, out, eosGroup, txnID, strconv.Itoa(eosN), strconv.Itoa(abortAt))

	for _, g := range []struct{ group, topic string }{{group, topic}, {eosGroup, in}} {
		ends := endOffsets(t, adm, g.topic)
		got, err := groupOffsets(t, adm, g.group, g.topic)
		if err != nil {
			t.Fatal(err)
		}
		for p, e := range ends {
			if got[p] != e {
				t.Fatalf("group %s committed %v, want the end offsets %v", g.group, got, ends)
			}
		}
	}
	stableOutput(t, adm, out)
	seen := map[string]int{}
	for _, r := range readAllRecords(t, tb.Addr, out, true) {
		seen[string(r.Key)]++
	}
	if len(seen) != eosN {
		t.Fatalf("read_committed sees outputs for %d inputs, want %d", len(seen), eosN)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("read_committed sees the output %s %d times, want once", k, c)
		}
	}
}
