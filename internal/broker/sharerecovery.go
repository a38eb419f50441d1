package broker

import (
	"context"
	"fmt"

	"github.com/exactq/exactq/internal/share"
	"github.com/exactq/exactq/internal/txn"
)

// txnOutcomes is the in-process transaction coordinator as the share layer asks it after
// a restart (share.TxnOutcomes).
type txnOutcomes struct{ c *txn.Coordinator }

func (o txnOutcomes) TxnOutcome(_ context.Context, pid int64, epoch int16) (share.TxnOutcome, error) {
	oc := o.c.TransactionOutcome(pid, epoch)
	return share.TxnOutcome{Decided: oc.Decided, Commit: oc.Commit, MarkerEpoch: oc.MarkerEpoch, Open: oc.Open}, nil
}

// resolveOrphanedStagings resolves, at start-up, the acknowledgements staged (TX_PENDING)
// in transactions that were decided while their marker never reached __share_group_state
// (share.Manager.ResolveOrphanedStagings): the transaction coordinator says how each
// ended, and the marker is written again through the ordinary marker path. Open broker
// calls it once the share stack and the transaction coordinator are loaded, before any
// request is served. A failure is logged: the stagings stay TX_PENDING, as before.
func (b *Broker) resolveOrphanedStagings() {
	b.coord.mu.Lock()
	s, c := b.coord.shares, b.coord.txns
	b.coord.mu.Unlock()
	if s == nil || c == nil {
		return
	}
	ctx := context.Background()
	write := func(ctx context.Context, statePartition int32, pid int64, epoch int16, commit bool) error {
		p := partitionOf(b.topics.get(shareGroupStateTopic), statePartition)
		if p == nil {
			return fmt.Errorf("%s-%d does not exist", shareGroupStateTopic, statePartition)
		}
		return b.applyShareStateMarker(ctx, p, pid, epoch, commit, c.CoordinatorEpoch())
	}
	rep, err := s.fetch.ResolveOrphanedStagings(ctx, txnOutcomes{c}, write)
	if err != nil {
		b.logger.Error("resolving staged share acknowledgements of decided transactions failed", "err", err)
	}
	if rep != (share.OrphanReport{}) {
		b.logger.Info("staged share acknowledgements checked with the transaction coordinator",
			"resolved", rep.Resolved, "open", rep.Open, "unknown", rep.Unknown)
	}
}
