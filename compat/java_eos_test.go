package compat

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestJavaEOSPipeline is the Java half of acceptance test 2 of issue 3: kafka-clients 4.4.0
// (KafkaConsumer with read_committed in a group + transactional KafkaProducer with
// sendOffsetsToTransaction(offsets, consumer.groupMetadata())) transforms 5k inputs that kgo
// produced, one transaction per poll of up to 200 records, with its 5th transaction aborted
// and redone after seeking back to the committed offsets (compat/java EosPipeline.java, which
// also checks its output with a read_committed KafkaConsumer). Then, from Go, kgo
// read_committed sees every input's output exactly once, read_uncommitted sees the aborted
// copies too, and the group's committed offsets are the input end offsets.
func TestJavaEOSPipeline(t *testing.T) {
	buildJava(t) // skips without Java, before a broker starts
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	const n, in, out, group, txnID, abortAt = 5000, "java-eos-in", "java-eos-out", "java-eos", "java-eos-tx", 5
	createTopic(t, adm, in, 3, nil)
	createTopic(t, adm, out, 3, nil)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("jin-%05d", i)), Value: []byte(fmt.Sprintf("jv-%05d", i))}
	}
	produceAll(t, ctxFor(t, time.Minute), newClient(t, tb.Addr), recs)
	inEnds := endOffsets(t, adm, in)

	res := runJava(t, 5*time.Minute, "512m", "EosPipeline", "OK: Java EOS pipeline",
		tb.Addr, in, out, group, txnID, strconv.Itoa(n), strconv.Itoa(abortAt))
	aborted := 0
	for _, l := range strings.Split(res, "\n") {
		if v, ok := strings.CutPrefix(l, "ABORTED "); ok {
			aborted, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if aborted == 0 {
		t.Fatal("java EosPipeline reports no aborted outputs")
	}

	got, err := groupOffsets(t, adm, group, in)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range inEnds {
		if got[p] != e {
			t.Fatalf("group %s committed %v, want the input end offsets %v", group, got, inEnds)
		}
	}
	stableOutput(t, adm, out)
	seen := map[string]int{}
	for _, r := range readAllRecords(t, tb.Addr, out, true) {
		k := strings.TrimPrefix(string(r.Key), "out-")
		if want := "J(jv-" + strings.TrimPrefix(k, "jin-") + ")"; string(r.Value) != want {
			t.Fatalf("output %d@%d: key %q value %q, want value %q", r.Partition, r.Offset, r.Key, r.Value, want)
		}
		seen[k]++
	}
	for _, r := range recs {
		if c := seen[string(r.Key)]; c != 1 {
			t.Fatalf("read_committed sees the output of %s %d times, want exactly once", r.Key, c)
		}
	}
	if len(seen) != n {
		t.Fatalf("read_committed sees outputs for %d keys, want %d", len(seen), n)
	}
	if all := readAllRecords(t, tb.Addr, out, false); len(all) != n+aborted {
		t.Fatalf("read_uncommitted reads %d outputs, want %d committed + %d aborted", len(all), n, aborted)
	}
}
