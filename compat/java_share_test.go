package compat

import (
	"strconv"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
)

// shareBrokerConfig speeds share groups up for the interop suites: 200 ms heartbeats, no
// assignment pacing, and broker bounds low enough for a group record-lock duration of
// shareLockMs and a delivery count limit of 2.
var shareBrokerConfig = map[string]string{
	"group.share.heartbeat.interval.ms":       "200",
	"group.share.min.heartbeat.interval.ms":   "200",
	"group.share.assignment.interval.ms":      "0",
	"group.share.min.record.lock.duration.ms": "1000",
	"group.share.min.delivery.count.limit":    "2",
}

// shareLockMs is the group share.record.lock.duration.ms of the lock-expiry and RENEW checks.
const shareLockMs = 1000

// TestJavaShareConsumer is acceptance test 1 of issue 4: kafka-clients 4.4.0's
// KafkaShareConsumer and Admin against exactq (compat/java ShareInterop.java). Each check has
// its own topic and share group:
//   - multi: 3 implicit-mode consumers on one partition, 3000 records: each gets some, union
//     exactly all, no duplicates; describeShareGroups (3 members, partition assigned, STABLE)
//     and listShareGroupOffsets (start 3000, lag 0)
//   - release: explicit RELEASE comes back with deliveryCount 2 (lag 1 meanwhile)
//   - reject: explicit REJECT never comes back
//   - lock: an unacknowledged record goes to another consumer with deliveryCount 2 after the
//     group's 1 s share.record.lock.duration.ms; acquisitionLockTimeoutMs reports it
//   - limit: share.delivery.count.limit=2 archives a record RELEASEd twice
//   - renew: RENEW keeps a record away from another consumer for 3 lock durations and the
//     final ACCEPT succeeds
//   - record_limit: share.acquire.mode=record_limit never returns more than max.poll.records
//   - offsets: Admin alterShareGroupOffsets / deleteShareGroupOffsets (GroupNotEmptyException
//     with a member; per-partition and per-topic UnknownTopicOrPartitionException; the next
//     consumer starts at the altered offset, then from share.auto.offset.reset after the
//     delete) and deleteShareGroups
//   - features: describeFeatures and updateFeatures (kafka-features.sh): share.version 2 and
//     transaction.version 1 refused (InvalidUpdateVersionException), share.version 0 turns
//     share RPCs into UnsupportedVersionException, 1 turns them back on
func TestJavaShareConsumer(t *testing.T) {
	buildJava(t) // skips without Java, before a broker starts
	tb := testbroker.Start(t, testbroker.WithConfig(shareBrokerConfig))
	runJava(t, 3*time.Minute, "512m", "ShareInterop", "OK: Java share-group checks passed", tb.Addr, strconv.Itoa(shareLockMs))
}
