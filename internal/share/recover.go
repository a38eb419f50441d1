package share

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/exactq/exactq/internal/share/sharestate"
)

// TxnOutcome is what the transaction coordinator knows of the transaction a producer id
// ran at one epoch.
type TxnOutcome struct {
	// Decided: the transaction is over and no marker of it is still to be written. Commit
	// says how it ended; MarkerEpoch is the epoch its markers carried.
	Decided     bool
	Commit      bool
	MarkerEpoch int16
	// Open: the transaction still runs, or is decided with its markers still being
	// written; its marker will come. Neither Decided nor Open: the coordinator cannot
	// tell (the producer has run later transactions since, or its id expired).
	Open bool
}

// TxnOutcomes is the transaction coordinator as the share layer asks it. The broker wires
// its in-process coordinator (internal/txn); once coordinators live on other brokers this
// becomes a request.
type TxnOutcomes interface {
	TxnOutcome(ctx context.Context, producerID int64, producerEpoch int16) (TxnOutcome, error)
}

// MarkerWriter writes a transaction marker to a __share_group_state partition and
// resolves it, exactly as a WriteTxnMarkers from the coordinator does (the broker's
// marker path, which appends the control batch durably and calls ApplyMarker).
type MarkerWriter func(ctx context.Context, statePartition int32, producerID int64, epoch int16, commit bool) error

// OrphanReport counts the TX_PENDING records ResolveOrphanedStagings looked at.
type OrphanReport struct {
	Resolved int64 // resolved by a marker written here: their transaction was decided
	Open     int64 // left for the marker of a transaction still open or still being marked
	Unknown  int64 // left because the coordinator could not tell what became of their transaction
}

// ResolveOrphanedStagings finds acknowledgements staged (TX_PENDING) in the durable share
// state whose transaction is already decided, and resolves them. The broker calls it once
// after a restart, when the share-state store and the transaction coordinator are loaded
// and before it serves requests; from then on the Manager keeps outcomes and write and
// runs the same check while the broker runs (orphanLoop): every
// Config.OrphanCheckInterval, and soon after a share partition loads with TX_PENDING
// records. A staging is orphaned when the marker that should have resolved it never
// reached its __share_group_state partition's log, for instance when an OS crash under
// --fsync never lost that log's tail, marker included, while __transaction_state kept the
// decision, or when a marker was given up or lost on its way while the broker ran; nothing
// would ever resolve it, and it would hold its share partition's start offset for ever.
//
// For every staging (state partition, producer id, epoch), in epoch order per producer
// and partition, it asks outcomes. A decided transaction gets its marker written again on
// that partition (write), with its outcome and epoch, which resolves the staging as the
// lost marker would have: commit makes ACCEPT ACKNOWLEDGED and REJECT or gap ARCHIVED,
// abort makes the records AVAILABLE again (ARCHIVED at the delivery limit, D5). An open
// transaction is left to its own marker. When the coordinator cannot tell, the staging is
// left as it is and logged (once per staging): resolving it either way could lose an
// input or duplicate an output. A marker resolves every staging of its producer up to its
// epoch, so one is written only when no later staging of that producer on the partition
// is that low, and a producer's stagings after one left alone are left alone too.
//
// While the broker runs, stagings change between the listing and the write, so the
// marker is checked again where it applies (write's context carries the staged epoch to
// ApplyMarker, which asks the store for sharestate.Marker.Orphan): it is not appended if
// the staging was resolved meanwhile, and is refused if the producer has since staged in
// a later transaction that the marker's epoch would also resolve.
func (m *Manager) ResolveOrphanedStagings(ctx context.Context, outcomes TxnOutcomes, write MarkerWriter) (OrphanReport, error) {
	rep, err := m.resolveOrphans(ctx, outcomes, write)
	m.startOrphanRecovery(outcomes, write)
	return rep, err
}

// orphanStagedEpoch is the context key under which resolveOrphans tells ApplyMarker
// that the marker is an orphan's, and the epoch of the staging it is written for.
type orphanStagedEpoch struct{}

type stagingID struct {
	partition int32
	pid       int64
	epoch     int16
}

func (m *Manager) resolveOrphans(ctx context.Context, outcomes TxnOutcomes, write MarkerWriter) (OrphanReport, error) {
	m.orphans.pass.Lock()
	defer m.orphans.pass.Unlock()
	var rep OrphanReport
	var errs []error
	type txnKey struct {
		pid   int64
		epoch int16
	}
	asked := map[txnKey]TxnOutcome{}
	stagings := m.store.Stagings()
	warned := make(map[stagingID]bool)
	for i := 0; i < len(stagings); {
		j := i + 1
		for j < len(stagings) && stagings[j].Partition == stagings[i].Partition && stagings[j].ProducerID == stagings[i].ProducerID {
			j++
		}
		group := stagings[i:j]
		i = j
		for k, st := range group {
			rest := stagedRecords(group[k:])
			oc, ok := asked[txnKey{st.ProducerID, st.Epoch}]
			if !ok {
				var err error
				if oc, err = outcomes.TxnOutcome(ctx, st.ProducerID, st.Epoch); err != nil {
					errs = append(errs, fmt.Errorf("transaction of producer %d epoch %d: %w", st.ProducerID, st.Epoch, err))
					rep.Unknown += rest
					break
				}
				asked[txnKey{st.ProducerID, st.Epoch}] = oc
			}
			if oc.Open {
				rep.Open += rest
				break
			}
			later := k+1 < len(group) && group[k+1].Epoch <= oc.MarkerEpoch
			if !oc.Decided || later {
				id := stagingID{st.Partition, st.ProducerID, st.Epoch}
				warned[id] = true
				if !m.orphans.warned[id] {
					m.cfg.Logger.Warn("acknowledgements staged in a transaction whose outcome the coordinator cannot tell stay TX_PENDING",
						"state_partition", st.Partition, "producer_id", st.ProducerID, "producer_epoch", st.Epoch, "records", rest)
				}
				rep.Unknown += rest
				break
			}
			wctx := context.WithValue(ctx, orphanStagedEpoch{}, st.Epoch)
			if err := write(wctx, st.Partition, st.ProducerID, oc.MarkerEpoch, oc.Commit); err != nil {
				if errors.Is(err, sharestate.ErrLaterStaging) {
					rep.Open += rest // a later transaction staged meanwhile: the next check
					break
				}
				errs = append(errs, fmt.Errorf("marker for producer %d epoch %d on __share_group_state-%d: %w", st.ProducerID, oc.MarkerEpoch, st.Partition, err))
				rep.Unknown += rest
				break
			}
			m.cfg.Logger.Info("resolved acknowledgements staged in a transaction decided while its marker was lost",
				"state_partition", st.Partition, "producer_id", st.ProducerID, "producer_epoch", st.Epoch, "commit", oc.Commit, "records", st.Records)
			rep.Resolved += st.Records
		}
	}
	m.orphans.warned = warned // only the stagings still left alone: bounded by the stagings
	return rep, errors.Join(errs...)
}

// orphanRecovery is the Manager's running orphan check (ResolveOrphanedStagings).
type orphanRecovery struct {
	pass   sync.Mutex         // one check at a time; guards warned
	warned map[stagingID]bool // stagings already logged as left alone
	kick   chan struct{}      // a share partition loaded with TX_PENDING records (1 slot)
	once   sync.Once          // the loop starts once
	loop   sync.WaitGroup     // Close waits for it
}

// startOrphanRecovery starts orphanLoop with the coordinator and marker path the broker
// gave ResolveOrphanedStagings (the first call's).
func (m *Manager) startOrphanRecovery(outcomes TxnOutcomes, write MarkerWriter) {
	m.orphans.once.Do(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed {
			return
		}
		m.orphans.loop.Add(1)
		go m.orphanLoop(outcomes, write)
	})
}

// orphanLoop checks for orphaned stagings every Config.OrphanCheckInterval and when a
// share partition loads with TX_PENDING records, until Close. A check's marker writes are
// not cancelled by Close (their outcome must be known); Close waits for them.
func (m *Manager) orphanLoop(outcomes TxnOutcomes, write MarkerWriter) {
	defer m.orphans.loop.Done()
	for {
		t := m.cfg.NewTimer(m.cfg.OrphanCheckInterval)
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C():
		case <-m.orphans.kick:
			t.Stop()
		}
		rep, err := m.resolveOrphans(context.Background(), outcomes, write)
		if err != nil {
			m.cfg.Logger.Error("resolving staged share acknowledgements of decided transactions failed", "err", err)
		}
		if rep.Resolved > 0 {
			m.cfg.Logger.Info("staged share acknowledgements checked with the transaction coordinator",
				"resolved", rep.Resolved, "open", rep.Open, "unknown", rep.Unknown)
		}
	}
}

// kickOrphanCheck asks orphanLoop for a check now (non-blocking; a check already asked
// for covers this one).
func (m *Manager) kickOrphanCheck() {
	select {
	case m.orphans.kick <- struct{}{}:
	default:
	}
}

func stagedRecords(ss []sharestate.Staging) int64 {
	var n int64
	for _, s := range ss {
		n += s.Records
	}
	return n
}
