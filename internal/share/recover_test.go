package share

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/wire"
)

// txnOutcomes is a transaction coordinator's answers, changed by the test.
type txnOutcomes struct {
	mu  sync.Mutex
	ocs map[[2]int64]TxnOutcome // (producer id, epoch)
}

func (o *txnOutcomes) set(pid int64, epoch int16, oc TxnOutcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ocs == nil {
		o.ocs = map[[2]int64]TxnOutcome{}
	}
	o.ocs[[2]int64{pid, int64(epoch)}] = oc
}

func (o *txnOutcomes) TxnOutcome(_ context.Context, pid int64, epoch int16) (TxnOutcome, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ocs[[2]int64{pid, int64(epoch)}], nil
}

// markerWriter is the broker's marker path: the control batch appended, then ApplyMarker.
func (e *env) markerWriter() MarkerWriter {
	return func(ctx context.Context, part int32, pid int64, epoch int16, commit bool) error {
		return e.m.ApplyMarker(ctx, part, pid, epoch, commit, func(context.Context) error {
			e.mem.AppendMarker(pid, epoch, commit, 0)
			return nil
		})
	}
}

// fireTimer fires the Manager's next unfired timer of duration d, once it exists.
func (e *env) fireTimer(d time.Duration) {
	e.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); yield() {
		e.timersMu.Lock()
		for _, ft := range e.timers {
			if ft.d == d && !ft.stopped && !ft.fired {
				ft.fired = true
				e.timersMu.Unlock()
				ft.c <- e.clk.Now()
				return
			}
		}
		e.timersMu.Unlock()
	}
	e.t.Fatalf("no %v timer", d)
}

// waitPending waits (5 s at most) until the durable state holds want TX_PENDING records.
func (e *env) waitPending(what string, want int64) {
	e.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); yield() {
		if e.m.TxnStats().Pending == want {
			return
		}
	}
	e.t.Fatalf("%s: %d records TX_PENDING, want %d", what, e.m.TxnStats().Pending, want)
}

// An orphan made while the broker runs: acknowledgements are staged, the transaction
// coordinator decides the transaction, and the marker never reaches the state partition
// (given up or lost on its way). The start-up check found the transaction open; the
// running check, on its interval, finds it decided and writes the marker again, so the
// records resolve with the transaction's outcome, without a restart. Before, only the
// start-up check existed and the records stayed TX_PENDING until the next restart.
func TestOrphanResolvedWhileRunning(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "Commit", false: "Abort"}[commit], func(t *testing.T) {
			e, c := txnSetup(t, 6)
			oc := &txnOutcomes{}
			oc.set(7, 0, TxnOutcome{Open: true})
			e.stageOK(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 3, tAccept)}}})
			rep, err := e.m.ResolveOrphanedStagings(context.Background(), oc, e.markerWriter())
			if err != nil || rep != (OrphanReport{Open: 4}) {
				t.Fatalf("start-up check: %+v %v, want 4 records left open", rep, err)
			}
			// Decided (TV2: markers at epoch 1), the marker lost.
			oc.set(7, 0, TxnOutcome{Decided: true, Commit: commit, MarkerEpoch: 1})
			e.fireTimer(e.m.cfg.OrphanCheckInterval)
			e.waitPending("after the running check", 0)
			if commit {
				e.wantStates(rr(4, 5, sharepartition.Acquired, 1))
			} else {
				e.wantStates(rr(0, 3, sharepartition.Available, 1), rr(4, 5, sharepartition.Acquired, 1))
				if got := c.poll(); len(got) != 1 || got[0] != (acquired{0, 3, 2}) {
					t.Fatalf("after the abort m1 acquired %v, want 0-3 again", got)
				}
			}
		})
	}
}

// A share partition that loads with TX_PENDING records starts a check at once: its
// transaction may have been decided while it was not loaded.
func TestOrphanCheckedWhenPartitionLoads(t *testing.T) {
	e, _ := txnSetup(t, 6)
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 3, tAccept)}}})
	e.restart()
	oc := &txnOutcomes{}
	oc.set(7, 0, TxnOutcome{Open: true})
	if _, err := e.m.ResolveOrphanedStagings(context.Background(), oc, e.markerWriter()); err != nil {
		t.Fatal(err)
	}
	oc.set(7, 0, TxnOutcome{Decided: true, Commit: true, MarkerEpoch: 1})
	e.consumer("m2").poll() // loads topicA-0; no timer fired
	e.waitPending("after the load", 0)
}

// The marker written again is checked where it applies, since the partition ran on
// after the stagings were listed: one that would also resolve a later transaction's
// stagings is refused, and one whose staging was resolved meanwhile appends nothing.
func TestOrphanMarkerCheckedWhenApplied(t *testing.T) {
	e, _ := txnSetup(t, 6)
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 0, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(0, 1, tAccept)}}})
	e.stageOK(txnAck{member: "m1", pid: 7, epoch: 1, parts: map[int32][]wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{0: {tb(2, 3, tAccept)}}})
	appended := 0
	orphanMarker := func(staged, epoch int16) error {
		ctx := context.WithValue(context.Background(), orphanStagedEpoch{}, staged)
		return e.m.ApplyMarker(ctx, 0, 7, epoch, true, func(context.Context) error { appended++; return nil })
	}
	if err := orphanMarker(0, 1); !errors.Is(err, sharestate.ErrLaterStaging) || appended != 0 {
		t.Fatalf("marker epoch 1 for the epoch-0 staging with an epoch-1 staging present: %v, %d appended; want ErrLaterStaging, none", err, appended)
	}
	e.waitPending("after the refused marker", 4)
	e.marker(7, 2, true) // the later transaction's own marker resolves both
	e.waitPending("after the later marker", 0)
	if err := orphanMarker(0, 1); err != nil || appended != 0 {
		t.Fatalf("marker for a staging resolved meanwhile: %v, %d appended; want nil, none", err, appended)
	}
}
