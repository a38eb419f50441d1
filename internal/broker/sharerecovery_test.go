package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/txnshare"
)

// After a restart the TX_PENDING gauge counts the staged records of the durable state
// straight away, before any share fetch loads the share partition (it used to count only
// partitions loaded since start, so it read 0 until a consumer came back).
func TestTxPendingMetricRightAfterRestart(t *testing.T) {
	t.Parallel()
	e, _, p := stagedInputs(t, 10, "cf-restart-metric", cfRange{0, 0, 3, txnshare.AckAccept}, cfRange{0, 6, 7, txnshare.AckReject})

	e.tb.Restart()
	if loaded := e.tb.Broker.DescribeShareGroupState(cfGroup); len(loaded) != 0 {
		t.Fatalf("share partitions loaded right after the restart: %+v", loaded)
	}
	if got := cfMetrics(t, e.tb)[cfPending]; got != 6 {
		t.Fatalf("%s right after the restart: %v, want the 6 staged records", cfPending, got)
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
			e, m, p := stagedInputs(t, 6, "cf-orphan", cfRange{0, 0, 2, txnshare.AckAccept}, cfRange{0, 3, 3, txnshare.AckReject})
			seg := stateSegment(t, e, m)
			staged := fileSize(t, seg)

			if code := cfEnd(p, commit); code != 0 {
				t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
			}
			cfEventually(t, "the marker resolved the staging", func() (bool, string) {
				got := cfMetrics(t, e.tb)[cfPending]
				return got == 0, fmt.Sprintf("%s %v", cfPending, got)
			})
			e.tb.Stop()
			if err := os.Truncate(seg, staged); err != nil { // the tail holding the marker is lost
				t.Fatal(err)
			}
			e.tb.Restart()

			if got := cfMetrics(t, e.tb)[cfPending]; got != 0 {
				t.Fatalf("%s after the restart: %v, want 0 (nothing left TX_PENDING)", cfPending, got)
			}
			e.cl = newClient(t, e.tb.Addr) // the old connections died with the broker
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
