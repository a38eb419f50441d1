package share

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/wire"
)

// TxnShareAcknowledge serves TxnShareAcknowledge v0 (KIP-1289, kip-1289.md 4.2 and 5.1)
// on the share-partition leader: it stages the member's acknowledgements in the producer's
// transaction and answers once the staged state is durable. It blocks for the store
// writes (run it where a slow answer does not block the connection's other requests, as
// ShareAcknowledge's wait func is).
//
// Order of effects (decision D8):
//
//  1. Validate (INVALID_REQUEST at the top level: null TransactionalId, empty GroupId,
//     MemberId empty or longer than 36). Per partition: an unknown topic is
//     UNKNOWN_TOPIC_OR_PARTITION; malformed batches (first > last, not ascending or
//     overlapping, a type count that is neither 1 nor the range length) and any type
//     other than gap (0), ACCEPT (1) or REJECT (3) are INVALID_REQUEST (D3). Failed
//     partitions take no further part.
//  2. Member check: Config.TxnMemberCheck, if set (D7); its error is the top-level code.
//  3. register is called once with the distinct, sorted __share_group_state partitions
//     (store.PartitionFor) of the remaining share partitions, before any state changes;
//     a non-zero code is the top-level error and nothing is staged. It is not called
//     when no partition remains. A nil register registers nothing (tests).
//  4. Per share partition: load it (an unknown partition is UNKNOWN_TOPIC_OR_PARTITION),
//     StageTxnAcks (offsets not ACQUIRED by the member: INVALID_RECORD_STATE for that
//     partition only, nothing staged there; D10), and write the staged Update to the
//     store; all writes run concurrently.
//  5. Answer when every write is durable (D9). A write the store refused (nothing
//     written) is undone with UnstageTxnAcks, the records are ACQUIRED again with a
//     fresh lock, and the partition reports the error (INVALID_PRODUCER_EPOCH when the
//     transaction already ended, else the persister mapping). A write whose outcome is
//     unknown drops the partition, which reloads from the store.
func (m *Manager) TxnShareAcknowledge(ctx context.Context, req *wire.TxnShareAcknowledgeRequest, register func(ctx context.Context, stateParts []int32) int16) *wire.TxnShareAcknowledgeResponse {
	resp := &wire.TxnShareAcknowledgeResponse{APIKey: req.Key(), Version: req.Version}
	if req.TransactionalID == nil || req.GroupID == "" || !validMemberID(&req.MemberID) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	type entry struct {
		topic     [16]byte
		partition int32
		key       sharestate.Key
		batches   []sharepartition.AckBatch
		staged    int64
		err       error
		w         *write
		skip      bool // failed validation, or nothing to stage
	}
	var entries []*entry
	var stateParts []int32
	for _, t := range req.Topics {
		_, known := m.logs.TopicName(t.TopicID)
		for _, rp := range t.Partitions {
			e := &entry{topic: t.TopicID, partition: rp.PartitionIndex,
				key: sharestate.Key{GroupID: req.GroupID, TopicID: t.TopicID, Partition: rp.PartitionIndex}}
			entries = append(entries, e)
			e.batches = txnAckBatches(rp.AcknowledgementBatches)
			switch {
			case !known || rp.PartitionIndex < 0:
				e.err, e.skip = kerr.UnknownTopicOrPartition, true
			case validateTxnAckBatches(e.batches) != nil:
				e.err, e.skip = kerr.InvalidRequest, true
			case len(e.batches) == 0:
				e.skip = true
			default:
				stateParts = append(stateParts, m.store.PartitionFor(e.key))
			}
		}
	}
	if check := m.cfg.TxnMemberCheck; check != nil {
		if err := check(ctx, req.GroupID, req.MemberID, req.MemberEpoch); err != nil {
			resp.ErrorCode = errCode(err)
			return resp
		}
	}
	slices.Sort(stateParts)
	stateParts = slices.Compact(stateParts)
	if len(stateParts) > 0 && register != nil {
		if code := register(ctx, stateParts); code != 0 {
			resp.ErrorCode = code
			return resp
		}
	}
	pid, epoch, member := req.ProducerID, req.ProducerEpoch, req.MemberID
	for _, e := range entries {
		if e.skip {
			continue
		}
		p, err := m.lockedPartition(e.key)
		if err != nil {
			e.err = err
			continue
		}
		before := p.sp.TxPendingRecords()
		u, err := p.sp.StageTxnAcks(member, pid, epoch, e.batches)
		if err != nil {
			p.mu.Unlock()
			e.err = shareError(err)
			continue
		}
		staged := p.sp.TxPendingRecords() - before
		e.staged = staged
		batches := e.batches
		e.w = p.persistOr(u, func(werr error) (error, bool) {
			if errors.Is(werr, sharestate.ErrOutcomeUnknown) {
				return nil, false
			}
			// The store refused the write: nothing of it is durable. Put the records back
			// to ACQUIRED unless a marker resolved some of them meanwhile; then memory no
			// longer matches the store and the instance must be dropped.
			reverted := p.sp.UnstageTxnAcks(m.nowMs(), pid, epoch, batches)
			p.reportRefusals()
			if reverted != staged {
				return nil, false
			}
			p.m.timers.schedule(p)
			if errors.Is(werr, kerr.InvalidProducerEpoch) {
				return kerr.InvalidProducerEpoch, true
			}
			return persisterError(werr), true
		})
		p.mu.Unlock()
	}
	topicIdx := map[[16]byte]int{}
	for _, e := range entries {
		if err := e.w.wait(); err != nil {
			e.err = err
		} else if e.err == nil {
			m.txn.staged.Add(e.staged)
		}
		ti, ok := topicIdx[e.topic]
		if !ok {
			resp.Responses = append(resp.Responses, wire.TxnShareAcknowledgeResponseResponse{TopicID: e.topic})
			ti = len(resp.Responses) - 1
			topicIdx[e.topic] = ti
		}
		resp.Responses[ti].Partitions = append(resp.Responses[ti].Partitions, wire.TxnShareAcknowledgeResponseResponsePartition{
			PartitionIndex: e.partition,
			ErrorCode:      errCode(e.err),
			ErrorMessage:   errMessage(e.err),
		})
	}
	return resp
}

// validateTxnAckBatches is ShareAcknowledge's batch validation with the staging types
// only: gap, ACCEPT and REJECT (D3).
func validateTxnAckBatches(batches []sharepartition.AckBatch) error {
	if err := sharepartition.ValidateAckBatches(batches, false, false); err != nil {
		return err
	}
	for _, b := range batches {
		for _, t := range b.Types {
			if t != sharepartition.AckGap && t != sharepartition.AckAccept && t != sharepartition.AckReject {
				return kerr.InvalidRequest
			}
		}
	}
	return nil
}

func txnAckBatches(in []wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) []sharepartition.AckBatch {
	out := make([]sharepartition.AckBatch, len(in))
	for i, b := range in {
		out[i] = sharepartition.AckBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, Types: ackTypes(b.AcknowledgeTypes)}
	}
	return out
}

// ApplyMarker applies a transaction marker that the transaction coordinator sent to
// __share_group_state partition statePartition (WriteTxnMarkers; kip-1289.md 5.2-5.3).
// appendMarker must append the control batch to that partition and return once it is
// durable; it runs under the store partition's lock (store.ApplyMarker), so the marker
// and the store's own records are in the same order in memory as in the log. The store
// resolves its TX_PENDING batches staged by pid with an epoch <= epoch (D6): commit →
// the staged commit state, abort → AVAILABLE, or ARCHIVED when the delivery count had
// reached the limit at staging (D5). Then every live share partition among the changed
// keys resolves its in-memory records the same way (SharePartition.CompleteTxn) and long
// polls are woken. Answer the marker (with this error's code) only after it returns.
//
// Nothing more is written: the marker in the log is the durable resolution, and the
// in-memory resolution restates it, so there is no second write that could race a later
// Update (later Updates of the partition start from the resolved state). Share
// partitions that are not live get the resolution from the store when they load. A
// failed appendMarker resolves nothing and is returned; the coordinator retries.
func (m *Manager) ApplyMarker(ctx context.Context, statePartition int32, pid int64, epoch int16, commit bool, appendMarker func(ctx context.Context) error) error {
	var res sharestate.MarkerResult
	var err error
	if staged, ok := ctx.Value(orphanStagedEpoch{}).(int16); ok {
		// Written again by resolveOrphans for a staging whose marker was lost.
		res, err = m.store.ApplyOrphanMarker(ctx, statePartition, pid, epoch, commit, staged, appendMarker)
	} else {
		res, err = m.store.ApplyMarkerResult(ctx, statePartition, pid, epoch, commit, appendMarker)
	}
	if err != nil {
		return err
	}
	m.txn.committed.Add(res.Committed)
	m.txn.aborted.Add(res.Aborted)
	m.txn.archivedOnAbort.Add(res.ArchivedOnAbort)
	for _, k := range res.Keys {
		m.mu.Lock()
		p := m.parts[k]
		m.mu.Unlock()
		if p == nil {
			continue
		}
		p.mu.Lock()
		if !p.dropped && p.sp != nil {
			// Only keys the store changed: a staging whose write has not reached the
			// store stays TX_PENDING here, and its write is then refused (the marker
			// fenced the epoch) and unstaged, so memory and store agree.
			if _, n := p.sp.CompleteTxn(pid, epoch, commit); n > 0 {
				p.wake()
				p.m.timers.schedule(p)
			}
			p.reportRefusals()
		}
		p.mu.Unlock()
	}
	return nil
}

// TxnStats are the KIP-1289 counters of a Manager, for the broker's metrics. The
// cumulative ones count records since the Manager started.
type TxnStats struct {
	// Staged counts records moved to TX_PENDING whose staging was durable and answered
	// NONE.
	Staged int64
	// Committed and Aborted count TX_PENDING records resolved by COMMIT and ABORT
	// markers applied through ApplyMarker (live share partitions or not);
	// ArchivedOnAbort those of Aborted that were archived at the delivery limit (D5).
	Committed, Aborted, ArchivedOnAbort int64
	// Pending is the number of records currently TX_PENDING in the durable share state
	// (a gauge), loaded share partitions or not: it is right straight after a restart.
	// A staging counts once it is durable, which is when it is answered.
	Pending int64
}

// txnCounters are the Manager's cumulative KIP-1289 counters.
type txnCounters struct {
	staged, committed, aborted, archivedOnAbort atomic.Int64
}

// TxnStats returns the KIP-1289 counters.
func (m *Manager) TxnStats() TxnStats {
	return TxnStats{
		Staged:          m.txn.staged.Load(),
		Committed:       m.txn.committed.Load(),
		Aborted:         m.txn.aborted.Load(),
		ArchivedOnAbort: m.txn.archivedOnAbort.Load(),
		Pending:         m.store.TxPendingRecords(),
	}
}
