package sharepartition

// AckBatch is one acknowledgement batch of ShareFetch, ShareAcknowledge or
// TxnShareAcknowledge: a range of offsets and either one type for the whole
// range or one type per offset.
type AckBatch struct {
	FirstOffset, LastOffset int64
	Types                   []AckType
}

func (ab *AckBatch) typeAt(o int64) AckType {
	if len(ab.Types) == 1 {
		return ab.Types[0]
	}
	return ab.Types[o-ab.FirstOffset]
}

// typeRuns calls f for each stretch of [lo, hi] (inside ab) that ab gives one
// type: once when ab has one type for the whole range, whatever its span; else
// at most once per listed type, which the request's bytes bound.
func (ab *AckBatch) typeRuns(lo, hi int64, f func(lo, hi int64, t AckType)) {
	if len(ab.Types) == 1 {
		f(lo, hi, ab.Types[0])
		return
	}
	for o := lo; o <= hi; {
		t, end := ab.typeAt(o), o
		for end < hi && ab.typeAt(end+1) == t {
			end++
		}
		f(o, end, t)
		o = end + 1
	}
}

// ValidateAckBatches applies the request-level checks Kafka does in
// KafkaApis.validateAcknowledgementBatches before a partition sees the acks;
// any failure is INVALID_REQUEST for the partition and nothing is applied:
// first <= last; batches ascending, each starting at or after the previous
// one's last offset (Kafka compares with <, so a batch may start on the
// previous last offset; the state check then rejects the second touch); a
// non-empty type list of one entry or one per offset; types within 0..3, or
// 0..4 when renewSupported (request version 2); RENEW only with isRenewAck.
func ValidateAckBatches(batches []AckBatch, renewSupported, isRenewAck bool) error {
	maxType := AckReject
	if renewSupported {
		maxType = AckRenew
	}
	prevLast := int64(-1)
	for i := range batches {
		ab := &batches[i]
		switch {
		case ab.FirstOffset > ab.LastOffset:
			return errInvalidRequest("acknowledgement batch %d-%d: first offset after last offset", ab.FirstOffset, ab.LastOffset)
		case ab.FirstOffset < prevLast:
			return errInvalidRequest("acknowledgement batch %d-%d overlaps or precedes offset %d", ab.FirstOffset, ab.LastOffset, prevLast)
		case len(ab.Types) == 0:
			return errInvalidRequest("acknowledgement batch %d-%d has no acknowledge types", ab.FirstOffset, ab.LastOffset)
		case len(ab.Types) > 1 && int64(len(ab.Types)) != ab.LastOffset-ab.FirstOffset+1:
			return errInvalidRequest("acknowledgement batch %d-%d has %d acknowledge types", ab.FirstOffset, ab.LastOffset, len(ab.Types))
		}
		for _, t := range ab.Types {
			if t < 0 || t > maxType {
				return errInvalidRequest("acknowledgement batch %d-%d: invalid acknowledge type %d", ab.FirstOffset, ab.LastOffset, t)
			}
			if t == AckRenew && !isRenewAck {
				return errInvalidRequest("acknowledgement batch %d-%d: RENEW without IsRenewAck", ab.FirstOffset, ab.LastOffset)
			}
		}
		prevLast = ab.LastOffset
	}
	return nil
}

// segment is the part of one acknowledgement batch that falls in one cached
// in-flight batch, at or above the SPSO.
type segment struct {
	ab     *AckBatch
	b      *batch
	lo, hi int64
	whole  bool // the whole cached batch, one type, batch-level state
}

// segments resolves the acknowledgement batches against the cache with
// Kafka's range rules (fetchSubMapForAcknowledgementBatch): a batch wholly
// below the SPSO is skipped (those records are already terminal); a batch
// whose first offset has no cached batch at or before it is
// INVALID_RECORD_STATE; a batch reaching past the last cached batch it
// touches is INVALID_REQUEST. Offsets between cached batches are ignored.
func (sp *SharePartition) segments(batches []AckBatch) ([]segment, error) {
	var segs []segment
	for k := range batches {
		ab := &batches[k]
		if ab.LastOffset < sp.spso {
			continue
		}
		fi := sp.floorIdx(ab.FirstOffset)
		if fi < 0 {
			if ab.FirstOffset < sp.spso && sp.spso <= ab.LastOffset {
				fi = sp.floorIdx(sp.spso)
			}
			if fi < 0 {
				return nil, errInvalidRecordState("offsets %d-%d are not in the in-flight records", ab.FirstOffset, ab.LastOffset)
			}
		}
		li := sp.floorIdx(ab.LastOffset)
		if last := sp.batches[li].last; last < ab.FirstOffset {
			return nil, errInvalidRequest("first offset %d is past the acquired records", ab.FirstOffset)
		} else if ab.LastOffset > last {
			return nil, errInvalidRequest("last offset %d is past the acquired records", ab.LastOffset)
		}
		for i := fi; i <= li; i++ {
			b := sp.batches[i]
			lo, hi := max(ab.FirstOffset, b.first, sp.spso), min(ab.LastOffset, b.last)
			if lo > hi {
				continue
			}
			whole := b.uniform() && len(ab.Types) == 1 && lo == b.first && hi == b.last
			segs = append(segs, segment{ab: ab, b: b, lo: lo, hi: hi, whole: whole})
		}
	}
	return segs, nil
}

// checkOwned verifies that every record of the segments is ACQUIRED by member
// and that no offset is changed twice (the overlap ValidateAckBatches lets
// through). It changes nothing, so a failing request leaves no trace (Kafka
// rolls back every transition of the request).
func (sp *SharePartition) checkOwned(member string, segs []segment) error {
	changed := int64(-1) // last offset whose state an earlier batch changes
	for _, s := range segs {
		b := s.b
		if b.uniform() {
			if b.rec.member == "" || b.rec.state != Acquired {
				return errInvalidRecordState("offsets %d-%d are not acquired (state %v)", b.first, b.last, b.rec.state)
			}
			if b.rec.member != member {
				return errInvalidRecordState("member %q is not the owner of offsets %d-%d", member, b.first, b.last)
			}
		} else if b.runs != nil {
			for _, r := range b.overlapping(s.lo, s.hi) {
				if r.rec.state != Acquired {
					return errInvalidRecordState("offset %d is not acquired (state %v)", max(r.first, s.lo), r.rec.state)
				}
				if r.rec.member != member {
					return errInvalidRecordState("member %q is not the owner of offset %d", member, max(r.first, s.lo))
				}
			}
		} else {
			var err error
			b.each(s.lo, s.hi, func(first, _ int64, r *record) bool {
				switch {
				case r.state != Acquired:
					err = errInvalidRecordState("offset %d is not acquired (state %v)", first, r.state)
				case r.member != member:
					err = errInvalidRecordState("member %q is not the owner of offset %d", member, first)
				}
				return err == nil
			})
			if err != nil {
				return err
			}
		}
		if s.lo <= changed {
			return errInvalidRecordState("offset %d is acknowledged twice", s.lo)
		}
		if len(s.ab.Types) == 1 { // no loop over a span the client claims
			if s.ab.Types[0] != AckRenew {
				changed = s.hi
			}
			continue
		}
		for o := s.hi; o >= s.lo; o-- { // one type per offset: bounded by the request's bytes
			if s.ab.typeAt(o) != AckRenew {
				changed = o
				break
			}
		}
	}
	return nil
}

// Acknowledge applies a member's acknowledgements (Kafka's
// SharePartition.acknowledge, kip-932.md 2.7-2.8): ACCEPT → ACKNOWLEDGED,
// RELEASE → AVAILABLE (ARCHIVED at the delivery limit), REJECT and gap →
// ARCHIVED, RENEW re-arms the lock for the full duration without a state
// change and without anything to persist. Every offset must be ACQUIRED by
// member, else INVALID_RECORD_STATE; malformed batches are INVALID_REQUEST;
// RENEW while share.renew.acknowledge.enable is off is INVALID_RECORD_STATE.
// On error nothing changes. The returned Update must be durable before the
// acknowledgement is answered.
func (sp *SharePartition) Acknowledge(nowMs int64, member string, batches []AckBatch) (Update, error) {
	var c changes
	if err := ValidateAckBatches(batches, true, true); err != nil {
		return sp.update(&c), err
	}
	if !sp.cfg.RenewEnabled {
		for i := range batches {
			for _, t := range batches[i].Types {
				if t == AckRenew {
					return sp.update(&c), errInvalidRecordState("renewing acquisition locks is not enabled for the group")
				}
			}
		}
	}
	segs, err := sp.segments(batches)
	if err == nil {
		err = sp.checkOwned(member, segs)
	}
	if err != nil {
		return sp.update(&c), err
	}
	sp.eachAcked(segs, func(b *batch, r *record, first, n int64, t AckType) {
		sp.ackRecord(nowMs, b, r, first, n, t, &c)
	})
	return sp.update(&c), nil
}

// eachAcked calls f for each piece of the segments sharing one record and one
// acknowledgement type: the whole batch while it has batch-level state, else its
// runs, carved at the segment's edges and where the type changes. f must not
// carve.
func (sp *SharePartition) eachAcked(segs []segment, f func(b *batch, r *record, first, n int64, t AckType)) {
	for _, s := range segs {
		if s.whole {
			f(s.b, &s.b.rec, s.b.first, s.b.len(), s.ab.Types[0])
			continue
		}
		s.ab.typeRuns(s.lo, s.hi, func(lo, hi int64, t AckType) {
			rs := sp.carve(s.b, lo, hi)
			for i := range rs {
				f(s.b, &rs[i].rec, rs[i].first, rs[i].len(), t)
			}
		})
	}
}

// ackRecord applies one acknowledgement type to n ACQUIRED records sharing r.
func (sp *SharePartition) ackRecord(nowMs int64, b *batch, r *record, first, n int64, t AckType, c *changes) {
	switch t {
	case AckRenew:
		r.deadlineMs = nowMs + sp.cfg.RecordLockDurationMs
		sp.arm(b, r.deadlineMs)
		sp.counters.Renewed += n
		return
	case AckAccept:
		if !sp.setState(r, first, n, Acknowledged, false) {
			return
		}
		sp.counters.Acknowledged += n
		sp.complete += n
	case AckRelease:
		if !sp.releaseRecord(r, first, n) {
			return
		}
		sp.counters.Released += n
	case AckReject, AckGap:
		if !sp.setState(r, first, n, Archived, false) {
			return
		}
		if t == AckReject {
			sp.counters.Rejected += n
		}
		sp.counters.Archived += n
		sp.complete += n
	}
	c.add(first, first+n-1, r)
}
