package sim

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/share/sharepartition"
)

// TestStageBelowStartOffset is bug B1, found by the simulation (seed 1 and most others):
// a stale member stages a record whose lock expired and which was then redelivered to
// another member and acknowledged there, so the SPSO moved past it. StageTxnAcks skips
// batches below the SPSO (segments, as Kafka's plain acknowledge does) and answers
// success with nothing staged; TxnShareAcknowledge then answers NONE, the producer
// commits, and the input has two committed outputs (kip-1289.md §6 case 8: "staging of
// the old copy fails; the transaction must abort"). A staging must be refused with
// INVALID_RECORD_STATE unless every offset is ACQUIRED by the member.
func TestStageBelowStartOffset(t *testing.T) {
	cfg := spConfig()
	sp, err := sharepartition.New(cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	batches := []sharepartition.FetchedBatch{{BaseOffset: 0, LastOffset: 0, ProducerID: -1}, {BaseOffset: 1, LastOffset: 1, ProducerID: -1}}
	acq := func(member string, now int64) {
		res := sp.Acquire(now, sharepartition.AcquireRequest{Member: member, FetchOffset: sp.NextFetchOffset(), Batches: batches, MaxRecords: 1, BatchSize: 1})
		if res.Count != 1 {
			t.Fatalf("%s acquired %d records", member, res.Count)
		}
	}
	accept := []sharepartition.AckBatch{{FirstOffset: 0, LastOffset: 0, Types: []sharepartition.AckType{sharepartition.AckAccept}}}
	acq("a", 0)                                                   // a acquires offset 0, then stalls
	sp.Tick(lockDurationMs)                                       // a's lock expires
	acq("b", lockDurationMs+1)                                    // redelivered to b
	if _, err := sp.StageTxnAcks("b", 7, 0, accept); err != nil { // b stages it in its transaction...
		t.Fatal(err)
	}
	sp.CompleteTxn(7, 1, true) // ...which commits: ACKNOWLEDGED, SPSO moves to 1
	if sp.StartOffset() != 1 {
		t.Fatalf("SPSO %d, want 1", sp.StartOffset())
	}
	acq("c", lockDurationMs+2) // offset 1 is in flight, so the window is not empty
	// a wakes up and stages its stale copy in its own transaction.
	// Bug B1 was that this answered success and staged nothing, so the stale member's
	// transaction committed a duplicate output. Should it come back, this must fail.
	_, err = sp.StageTxnAcks("a", 8, 0, accept)
	if !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("staging offset 0 below the SPSO 1: got %v, want INVALID_RECORD_STATE (bug B1)", err)
	}
	if got := sp.Counters().TxnStaged; got != 1 {
		t.Fatalf("%d offsets staged in all, want 1 (b's): the stale staging must stage nothing", got)
	}
}
