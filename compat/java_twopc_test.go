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
	java, cp, dir := buildJava(t)
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"transaction.two.phase.commit.enable": "true"}))
	adm := newAdmin(t, tb.Addr)
	const topic = "java-2pc"
	createTopic(t, adm, topic, 1, nil)

	start := time.Now()
	res, err := runBounded(3*time.Minute, dir, java, "-XX:+UseSerialGC", "-Xmx256m", "-cp", cp, "exactq.compat.TwoPhaseCommit",
		tb.Addr, topic, "java-2pc-tx")
	t.Logf("java TwoPhaseCommit (%v):\n%s", time.Since(start).Round(time.Millisecond), tail(res))
	if err != nil {
		fail := "(no FAIL line)"
		for _, l := range strings.Split(res, "\n") {
			if strings.HasPrefix(l, "FAIL:") {
				fail = l
				break
			}
		}
		t.Fatalf("Java 2PC against exactq: %v: %s", err, fail)
	}
	if !strings.Contains(res, "OK: Java 2PC") {
		t.Fatal("java TwoPhaseCommit exited 0 without its OK line")
	}

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
