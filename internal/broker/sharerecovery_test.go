package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/wire"
)

// After a restart the TX_PENDING gauge counts the staged records of the durable state
// straight away, before any share fetch loads the share partition (it used to count only
// partitions loaded since start, so it read 0 until a consumer came back).
func TestTxPendingMetricRightAfterRestart(t *testing.T) {
	t.Parallel()
	e, _, p := stagedInputs(t, 10, "cf-restart-metric", cfRange{0, 0, 3, wire.AckAccept}, cfRange{0, 6, 7, wire.AckReject})

	e.tb.Restart()
	if loaded := e.tb.Broker.DescribeShareGroupState(cfGroup); len(loaded) != 0 {
		t.Fatalf("share partitions loaded right after the restart: %+v", loaded)
	}
	got := cfMetrics(t, e.tb)
	if got[cfPending] != 6 {
		t.Fatalf("%s right after the restart: %v, want the 6 staged records", cfPending, got[cfPending])
	}
	perPartition := "exactq_share_partition_tx_pending_records{group=" + cfGroup + ",partition=0,topic=" + cfIn + "}"
	if got[perPartition] != 6 {
		t.Fatalf("%s right after the restart: %v, want the 6 staged records", perPartition, got[perPartition])
	}
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit after the restart: %v", kerr.ErrorForCode(code))
	}
	cfEventually(t, cfPending+" = 0 after the commit", func() (bool, string) {
		got := cfMetrics(t, e.tb)[cfPending]
		return got == 0, fmt.Sprint(got)
	})
}

// A transaction that stages acknowledgements and is then decided, whose marker the
// __share_group_state partition loses (an OS crash under --fsync never can drop that
// log's tail, marker included, while __transaction_state keeps the decision): after the
// restart the transaction coordinator is asked about the staging and the records are
// resolved as the marker would have resolved them. Committed inputs are never delivered
// again; aborted ones are, with their delivery count kept. Before, they stayed TX_PENDING
// for ever and held the share-partition start offset.
func TestOrphanedStagingResolvedAfterRestart(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "Commit", false: "Abort"}[commit], func(t *testing.T) {
			t.Parallel()
			e, m, p := stagedInputs(t, 6, "cf-orphan", cfRange{0, 0, 2, wire.AckAccept}, cfRange{0, 3, 3, wire.AckReject})
			seg := stateSegment(t, e, m)
			staged := fileSize(t, seg)

			if code := cfEnd(p, commit); code != 0 {
				t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
			}
			cfEventually(t, "the marker resolved the staging", func() (bool, string) {
				got := cfMetrics(t, e.tb)[cfPending]
				return got == 0, fmt.Sprintf("%s %v", cfPending, got)
			})
			restartLosingTail(t, e, seg, staged)

			if got := cfMetrics(t, e.tb)[cfPending]; got != 0 {
				t.Fatalf("%s after the restart: %v, want 0 (nothing left TX_PENDING)", cfPending, got)
			}
			m = e.join(cfMember)
			// 4-5 were acquired, never staged: their acquisition was not persisted, so they
			// come back as if never delivered.
			if commit {
				// 0-2 ACKNOWLEDGED and 3 ARCHIVED: the start offset passes them.
				e.waitOffsets(0, 4, 2)
				cfWantAcquired(t, cfFetchUntil(m, 2), 4, 5, 1)
			} else {
				// Everything is delivered again; 0-3 keep the count of their one delivery.
				e.waitOffsets(0, 0, 6)
				if got := cfFmt(cfFetchUntil(m, 6)); got != "0-3@2 4-5@1" {
					t.Fatalf("acquired %s, want 0-3@2 4-5@1 (first-last@delivery count)", got)
				}
			}
			cfNothingDelivered(t, m)
		})
	}
}

// When the producer has ended a later transaction since the one whose marker was lost,
// the coordinator no longer knows how that one ended (it keeps each transactional id's
// latest transaction only): the staged records stay TX_PENDING, undelivered, rather
// than be resolved by a guess that could lose an input or duplicate an output.
func TestOrphanedStagingOfAnEarlierTransactionStays(t *testing.T) {
	t.Parallel()
	e, m, p := stagedInputs(t, 6, "cf-orphan-later", cfRange{0, 0, 3, wire.AckAccept})
	seg := stateSegment(t, e, m)
	staged := fileSize(t, seg)
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	cfProduceOutput(e, p, 0, "later") // a second transaction, on the output topic only
	if code := cfEnd(p, true); code != 0 {
		t.Fatalf("commit of the second transaction: %v", kerr.ErrorForCode(code))
	}
	if got := cfReadCommitted(e); len(got) != 1 {
		t.Fatalf("read_committed output %v, want the second transaction's record", cfValues(got))
	}
	restartLosingTail(t, e, seg, staged)

	if got := cfMetrics(t, e.tb)[cfPending]; got != 4 {
		t.Fatalf("%s after the restart: %v, want the 4 staged records left pending", cfPending, got)
	}
	m = e.join(cfMember)
	e.waitOffsets(0, 0, 6)
	cfWantAcquired(t, cfFetchUntil(m, 2), 4, 5, 1)
	cfNothingDelivered(t, m)
}

// restartLosingTail stops the broker, cuts the state partition segment seg back to size
// (what an OS crash under --fsync never can leave of a log's unsynced tail), starts the
// broker again and reconnects e's client.
func restartLosingTail(t *testing.T, e *cfEnv, seg string, size int64) {
	t.Helper()
	e.tb.Stop()
	if err := os.Truncate(seg, size); err != nil {
		t.Fatal(err)
	}
	e.tb.Restart()
	e.cl = newClient(t, e.tb.Addr) // the old connections died with the broker
}

// stagedInputs starts a broker with inputs records in cfIn partition 0, has cfMember
// acquire them all, and stages each range in its own TxnShareAcknowledge of one
// transaction of producer txnID, which it returns open.
func stagedInputs(t *testing.T, inputs int, txnID string, rs ...cfRange) (*cfEnv, *shareMember, *txnProducer) {
	t.Helper()
	e := cfStart(t, nil, nil, 1, inputs)
	m := e.join(cfMember)
	cfWantAcquired(t, cfFetch(m, 1000)[0], 0, int64(inputs-1), 1)
	p := cfInitProducer(e, txnID, 60000)
	for _, r := range rs {
		stageOK(t, cfStage(p, m, m.epoch, r))
	}
	return e, m, p
}

// stateSegment returns the active segment file of the __share_group_state partition that
// holds the share state of cfIn partition 0 for cfGroup.
func stateSegment(t *testing.T, e *cfEnv, m *shareMember) string {
	t.Helper()
	k := sharestate.Key{GroupID: cfGroup, TopicID: m.topicID, Partition: 0}
	dir := filepath.Join(e.tb.DataDir, fmt.Sprintf("__share_group_state-%d", sharestate.PartitionFor(k, 5)))
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
