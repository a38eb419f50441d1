package compat

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestJavaTwoPhaseCommit is KIP-939 with kafka-clients 4.4.0 (compat/java
// TwoPhaseCommit.java) against a broker with transaction.two.phase.commit.enable=true: a
// KafkaProducer with transaction.two.phase.commit.enable=true prepares a transaction
// (prepareTransaction) and is dropped without ending it; a second one recovers it with
// initTransactions(true) and completeTransaction(state) commits it; the same with a
// non-matching PreparedTxnState aborts it. Java's read_committed consumer and then kgo's
// see the committed records exactly once and none of the aborted ones.
//
// kafka-clients 4.4 keeps InitProducerId v6 behind its unstable-version flag, so the Java
// program unlocks it by reflection first (see TwoPhaseCommit.java).
func TestJavaTwoPhaseCommit(t *testing.T) {
	buildJava(t) // skips without Java, before a broker starts
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"transaction.two.phase.commit.enable": "true"}))
	adm := newAdmin(t, tb.Addr)
	const topic = "java-2pc"
	createTopic(t, adm, topic, 1, nil)

	runJava(t, 3*time.Minute, "256m", "TwoPhaseCommit", "OK: Java 2PC", tb.Addr, topic, "java-2pc-tx")

	stableOutput(t, adm, topic)
	var got []string
	for _, r := range readAllRecords(t, tb.Addr, topic, true) {
		got = append(got, string(r.Value))
	}
	sort.Strings(got)
	if want := "c-0 c-1 c-2 c-3 c-4 end"; strings.Join(got, " ") != want {
		t.Fatalf("kgo read_committed: %q, want %s", got, want)
	}
}
