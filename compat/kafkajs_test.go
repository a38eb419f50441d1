package compat

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestKafkajs runs kafkajs 2.2.4 (pure JavaScript, installed with npm by nodeWithKafkajs;
// it sends old request versions: Produce v7, Fetch v11) against one exactq broker, each
// subtest a script of compat/node on its own topic:
//   - admin: createTopics with a config, fetchTopicMetadata, describeConfigs of the topic
//     and the broker, createPartitions, deleteTopics
//   - produce-consume: an idempotent producer; a consumer group reads every message once at
//     the offset its send reported and commits; the group's next consumer reads only what
//     came after
//   - transactions: commit, abort and sendOffsets; a read_committed consumer never sees the
//     aborted messages, a read_uncommitted one does
func TestKafkajs(t *testing.T) {
	node, modules := nodeWithKafkajs(t) // skips without node, before a broker starts
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	script := func(t *testing.T, name, ok string, args ...string) {
		t.Helper()
		runScript(t, 2*time.Minute, []string{"NODE_PATH=" + modules}, node, "node", name, ok, append([]string{tb.Addr}, args...)...)
	}

	t.Run("admin", func(t *testing.T) {
		script(t, "admin.js", "OK: kafkajs admin", "js-admin")
	})

	t.Run("produce-consume", func(t *testing.T) {
		const topic, group = "js-produce", "js-group"
		createTopic(t, adm, topic, 3, nil)
		script(t, "produce_consume.js", "OK: kafkajs produce and consume", topic, group, "2000")
		ends := endOffsets(t, adm, topic)
		got, err := groupOffsets(t, adm, group, topic)
		if err != nil || !maps.Equal(got, ends) {
			t.Fatalf("group %s committed %v (%v), want the end offsets %v", group, got, err, ends)
		}
	})

	t.Run("transactions", func(t *testing.T) {
		const topic, group = "js-txn", "js-txn-group"
		createTopic(t, adm, topic, 1, nil)
		script(t, "transactions.js", "OK: kafkajs transactions", topic, group)
		stableOutput(t, adm, topic)
		var values []string
		for _, r := range readAllRecords(t, tb.Addr, topic, true) {
			values = append(values, string(r.Value))
		}
		if len(values) != 60 || slices.ContainsFunc(values, func(v string) bool { return len(v) > 8 && v[:8] == "aborted-" }) {
			t.Fatalf("read_committed from Go: %d records %v, want the 60 committed ones", len(values), values)
		}
	})
}
