package sharepartition

// StageTxnAcks stages a member's acknowledgements into producer transaction
// (producerID, producerEpoch) (KIP-1289, kip-1289.md 5.1 step 5): every
// offset ACQUIRED by member moves to TX_PENDING, its lock is cancelled, and the
// producer id, epoch and ack type are kept with it; the owner is kept until
// the transaction resolves. Only ACCEPT, REJECT and gap may be staged; RELEASE
// and RENEW are INVALID_REQUEST (decision D3), as are malformed batches. An
// offset not ACQUIRED by member is INVALID_RECORD_STATE. On error nothing is
// staged. TX_PENDING is persisted: the returned Update must be durable before
// TxnShareAcknowledge is answered; if that write fails, call UnstageTxnAcks
// with the same batches (decision D8).
func (sp *SharePartition) StageTxnAcks(member string, producerID int64, producerEpoch int16, batches []AckBatch) (Update, error) {
	var c changes
	if err := ValidateAckBatches(batches, false, false); err != nil {
		return sp.update(&c), err
	}
	for i := range batches {
		for _, t := range batches[i].Types {
			if t != AckAccept && t != AckReject && t != AckGap {
				return sp.update(&c), errInvalidRequest("only ACCEPT, REJECT or gap acknowledgements can be staged in a transaction, not %v", t)
			}
		}
	}
	// Unlike a plain acknowledgement (Kafka skips offsets below the start offset), a
	// staging there must fail: those records were finished by someone else after this
	// member's lock expired, and staging "successfully" would let the transaction commit a
	// second output for an input already done (kip-1289.md §6 case 8; found by the
	// deterministic simulation, sim/TestStageBelowStartOffset).
	for i := range batches {
		if batches[i].FirstOffset < sp.spso {
			return sp.update(&c), errInvalidRecordState("offset %d is below the share-partition start offset %d: it was already acknowledged or archived", batches[i].FirstOffset, sp.spso)
		}
		// Offsets past the in-flight window were never acquired by anyone (decision D7:
		// INVALID_RECORD_STATE; a plain acknowledgement answers INVALID_REQUEST there, as
		// Kafka does, because it cannot have come from a fetch).
		if batches[i].LastOffset > sp.EndOffset() || len(sp.batches) == 0 {
			return sp.update(&c), errInvalidRecordState("offsets %d-%d are past the in-flight records (end %d): not acquired", batches[i].FirstOffset, batches[i].LastOffset, sp.EndOffset())
		}
	}
	segs, err := sp.segments(batches)
	if err == nil {
		err = sp.checkOwned(member, segs)
	}
	if err != nil {
		return sp.update(&c), err
	}
	stage := func(r *record, first, n int64, t AckType) {
		if !sp.setState(r, first, n, TxPending, false) {
			return
		}
		r.deadlineMs = 0
		r.stagedPID, r.stagedEpoch, r.stagedAck = producerID, producerEpoch, t
		r.abortArchive = r.count >= sp.cfg.DeliveryCountLimit
		sp.counters.TxnStaged += n
		c.add(first, first+n-1, r)
	}
	sp.eachAcked(segs, func(_ *batch, r *record, first, n int64, t AckType) { stage(r, first, n, t) })
	return sp.update(&c), nil
}

// UnstageTxnAcks reverts a staging whose durable write failed (kip-1289.md
// 5.1 step 6, case 14): the offsets of batches that are still TX_PENDING for
// (producerID, producerEpoch) go back to ACQUIRED by their member with a fresh
// lock until nowMs + RecordLockDurationMs. Nothing to persist: the failed
// write is the only place the staging reached. If the write's outcome is
// unknown, drop the partition and Restore it from the store instead. It
// returns the number of records reverted: fewer than were staged means some
// were resolved meanwhile (a marker raced the failed write), and the caller
// should drop the partition and restore it from the store, the truth.
func (sp *SharePartition) UnstageTxnAcks(nowMs int64, producerID int64, producerEpoch int16, batches []AckBatch) int64 {
	var reverted int64
	lockEnd := nowMs + sp.cfg.RecordLockDurationMs
	revert := func(b *batch, r *record, first, n int64) {
		if r.state != TxPending || r.stagedPID != producerID || r.stagedEpoch != producerEpoch {
			return
		}
		if !sp.setState(r, first, n, Acquired, true) {
			return
		}
		r.deadlineMs = lockEnd
		r.stagedPID, r.stagedEpoch, r.stagedAck = -1, -1, ackNone
		r.abortArchive = false
		reverted += n
		sp.counters.TxnStaged -= n
		sp.arm(b, lockEnd)
	}
	for k := range batches {
		ab := &batches[k]
		for i := max(sp.floorIdx(ab.FirstOffset), 0); i < len(sp.batches); i++ {
			b := sp.batches[i]
			if b.first > ab.LastOffset {
				break
			}
			lo, hi := max(ab.FirstOffset, b.first), min(ab.LastOffset, b.last)
			if lo > hi {
				continue
			}
			if b.uniform() && lo == b.first && hi == b.last {
				revert(b, &b.rec, b.first, b.len())
				continue
			}
			if b.uniform() && b.rec.state != TxPending {
				continue
			}
			if b.pk != nil {
				if _, ok := b.findState(lo, hi, func(s State) bool { return s == TxPending }); !ok {
					continue
				}
			}
			rs := sp.carve(b, lo, hi)
			for i := range rs {
				revert(b, &rs[i].rec, rs[i].first, rs[i].len())
			}
		}
	}
	sp.coalesceCarved()
	return reverted
}

// CompleteTxn applies a transaction marker for producerID that reached this
// share partition's __share_group_state partition (kip-1289.md 5.2-5.3,
// decision D6): every TX_PENDING record staged by producerID with a staged
// epoch <= markerEpoch is resolved. COMMIT: a staged ACCEPT becomes
// ACKNOWLEDGED, a staged REJECT or gap ARCHIVED. ABORT: the record becomes
// AVAILABLE for redelivery with its delivery count unchanged, except that a
// record whose delivery count had reached the limit when it was staged is
// ARCHIVED (decision D5: an aborted transaction counts like a RELEASE, so a
// poison record cannot loop forever through aborts; the target is fixed at
// staging, StateBatch.StagedAbortState, so a limit changed meanwhile does not
// make memory and the store disagree). Markers of other producers, lower
// epochs, or repeated markers change nothing. The share-state store resolves
// its copy from the marker itself (sharestate.Store.ApplyMarker), so the
// Update restates what is already durable and need not be written. It
// returns the number of records resolved.
func (sp *SharePartition) CompleteTxn(producerID int64, markerEpoch int16, commit bool) (Update, int64) {
	var c changes
	var resolved int64
	if sp.txPending == 0 {
		return sp.update(&c), 0
	}
	resolve := func(r *record, first, n int64) {
		if r.state != TxPending || r.stagedPID != producerID || r.stagedEpoch > markerEpoch {
			return
		}
		t := r.stagedAck
		to := Available
		switch {
		case commit:
			to = commitTarget(t)
		case r.abortArchive || first < sp.spso:
			to = Archived
		}
		if !sp.setState(r, first, n, to, false) {
			return
		}
		resolved += n
		switch {
		case commit:
			sp.counters.TxnCommitted += n
			sp.complete += n
			if to == Acknowledged {
				sp.counters.Acknowledged += n
			} else {
				if t == AckReject {
					sp.counters.Rejected += n
				}
				sp.counters.Archived += n
			}
		case to == Archived:
			sp.counters.TxnAborted += n
			sp.counters.ArchivedOnAbort += n
			sp.counters.Archived += n
			sp.complete += n
		default:
			sp.counters.TxnAborted += n
		}
		c.add(first, first+n-1, r)
	}
	staged := func(r *record) bool {
		return r.state == TxPending && r.stagedPID == producerID && r.stagedEpoch <= markerEpoch
	}
	for _, b := range sp.batches {
		if b.pk != nil {
			sp.changeMatching(b, staged, func(r *run) { resolve(&r.rec, r.first, r.len()) })
			continue
		}
		if b.runs == nil {
			resolve(&b.rec, b.first, b.len())
			continue
		}
		sp.touch(b)
		for i := range b.runs {
			resolve(&b.runs[i].rec, b.runs[i].first, b.runs[i].len())
		}
	}
	return sp.update(&c), resolved
}

// TxnProducers lists the producer ids with records TX_PENDING here, for
// operators and for the broker to check pending transactions after a restore.
func (sp *SharePartition) TxnProducers() []int64 {
	if sp.txPending == 0 {
		return nil
	}
	seen := map[int64]bool{}
	var out []int64
	note := func(r *record) {
		if r.state == TxPending && !seen[r.stagedPID] {
			seen[r.stagedPID] = true
			out = append(out, r.stagedPID)
		}
	}
	for _, b := range sp.batches {
		b.each(b.first, b.last, func(_, _ int64, r *record) bool {
			note(r)
			return true
		})
	}
	return out
}

// AdvanceLogStart moves the SPSO to a new log start offset (retention,
// DeleteRecords; Kafka's updateCacheAndOffsets, kip-932.md 2.9): records below
// it are gone from the log, so nothing below it can be delivered or resolved.
// Kafka archives AVAILABLE records there and lets ACQUIRED ones be archived
// when their lock ends; acks and stages below the SPSO are ignored either
// way, so exactq archives every non-terminal record below it at once. Not
// persisted, as in Kafka: the new SPSO travels with the next write.
func (sp *SharePartition) AdvanceLogStart(logStartOffset int64) {
	if logStartOffset <= sp.spso {
		return
	}
	for _, b := range sp.batches {
		if b.first >= logStartOffset {
			break
		}
		hi := min(b.last, logStartOffset-1)
		if b.uniform() && (hi == b.last || b.rec.state.Terminal()) {
			sp.archiveBelow(&b.rec, b.first, b.len())
			continue
		}
		if b.pk != nil {
			if _, ok := b.findState(max(b.first, sp.spso), hi, func(s State) bool { return !s.Terminal() }); !ok {
				continue
			}
		}
		rs := sp.carve(b, max(b.first, sp.spso), hi)
		for i := range rs {
			sp.archiveBelow(&rs[i].rec, rs[i].first, rs[i].len())
		}
	}
	sp.spso = logStartOffset
	if sp.nextOffset < sp.spso {
		sp.nextOffset = sp.spso
	}
	sp.complete = sp.countComplete()
	sp.advance()
}

func (sp *SharePartition) archiveBelow(r *record, first, n int64) {
	if !r.state.Terminal() && sp.setState(r, first, n, Archived, false) {
		sp.counters.Archived += n
	}
}
