package sharepartition

import "sort"

// AcquireMode is ShareFetch's ShareAcquireMode (KIP-1206).
type AcquireMode int8

const (
	BatchOptimized AcquireMode = 0 // MaxRecords is soft, ranges aligned on log batches of about BatchSize
	RecordLimit    AcquireMode = 1 // one range of at most MaxRecords records
)

// FetchedBatch describes one record batch the broker read from the log for
// this share partition: its offsets and, for read_committed, its
// transactional attributes. The records themselves never pass through here.
type FetchedBatch struct {
	BaseOffset, LastOffset int64
	ProducerID             int64
	Transactional          bool
	Control                bool
	AbortMarker            bool // a control batch holding an ABORT marker
}

// AbortedTxn is one entry of the log's aborted-transaction index for the
// fetched range, as a read_committed fetch returns it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// AcquireRequest is one share-fetch acquisition on this partition.
type AcquireRequest struct {
	Member      string
	FetchOffset int64          // the offset the log was read from (NextFetchOffset)
	Batches     []FetchedBatch // in offset order
	// Aborted is the aborted-transaction list of the read, set only under
	// share.isolation.level=read_committed: records of aborted transactions are
	// archived, never delivered (kip-932.md 2.10).
	Aborted    []AbortedTxn
	MaxRecords int // what is left of the request-wide MaxRecords
	BatchSize  int // preferred size of each acquired range (batch_optimized)
	Mode       AcquireMode
}

// AcquiredRecords is one range locked to the member, as ShareFetch reports it.
type AcquiredRecords struct {
	FirstOffset, LastOffset int64
	DeliveryCount           int16
}

// AcquireResult is the outcome of Acquire.
type AcquireResult struct {
	Records []AcquiredRecords
	Count   int // records acquired
	// LockDurationMs is the lock armed for them: ShareFetch's AcquisitionLockTimeoutMs.
	LockDurationMs int64
	Update         Update // non-empty only when records at the delivery limit were archived
}

// NextFetchOffset is the offset the broker should read the log from for the
// next acquisition: the first AVAILABLE record or acquirable gap in the window
// (re-delivery first), else the offset after the window.
func (sp *SharePartition) NextFetchOffset() int64 {
	if len(sp.batches) == 0 {
		return sp.nextOffset
	}
	next, found := sp.nextOffset, false
	if g, ok := sp.firstGap(); ok {
		next, found = g, true
	}
	if !sp.mayHaveAvailable {
		return next
	}
	for _, b := range sp.batches {
		if b.first >= next {
			break
		}
		if o, ok := b.firstAvailable(); ok {
			return min(o, next)
		}
	}
	if !found {
		sp.mayHaveAvailable = false
	}
	return next
}

func (b *batch) firstAvailable() (int64, bool) {
	if b.pk != nil {
		return b.findState(b.first, b.last, func(s State) bool { return s == Available })
	}
	if b.runs == nil {
		return b.first, b.rec.state == Available
	}
	for i := range b.runs {
		if b.runs[i].rec.state == Available {
			return b.runs[i].first, true
		}
	}
	return 0, false
}

// CanAcquire reports whether a fetch for this partition can acquire anything:
// there is something to re-deliver inside the window, or the window is below
// share.partition.max.record.locks (Kafka's canAcquireRecords).
func (sp *SharePartition) CanAcquire() bool {
	return sp.NextFetchOffset() != sp.nextOffset || sp.InFlightRecords() < sp.cfg.MaxInFlightRecords
}

// FetchEnd bounds the log read of an acquisition of at most maxRecords records:
// Acquire takes nothing from a batch whose base offset is at or past it, so a
// read of the batches from NextFetchOffset with base offsets below FetchEnd
// acquires exactly what a longer read would (on a log without compaction gaps;
// across a gap a longer read may acquire a whole batch more, MaxRecords being
// soft). Re-deliveries lie inside the window, below its end; new records are
// taken after it, at most min(maxRecords, free record locks) of them, rounded up
// to whole log batches.
func (sp *SharePartition) FetchEnd(maxRecords int) int64 {
	n := min(int64(max(maxRecords, 0)), sp.cfg.MaxInFlightRecords-sp.InFlightRecords())
	return sp.nextOffset + max(n, 0)
}

// Holds reports whether member has ACQUIRED records here: records only its own
// acknowledgement (or lock expiry) gives back.
func (sp *SharePartition) Holds(member string) bool {
	held := func(r *record) bool { return r.state == Acquired && r.member == member }
	for _, b := range sp.batches {
		if b.pk != nil {
			if b.settle(); b.pk != nil && !b.pk.anyOwner(held) {
				continue
			}
			found := false
			b.each(b.first, b.last, func(_, _ int64, r *record) bool { found = held(r); return !found })
			if found {
				return true
			}
			continue
		}
		if b.runs == nil {
			if held(&b.rec) {
				return true
			}
			continue
		}
		for i := range b.runs {
			if r := &b.runs[i].rec; r.state == Acquired && r.member == member {
				return true
			}
		}
	}
	return false
}

// Acquire locks fetched records to req.Member (Kafka's SharePartition.acquire,
// kip-932.md 2.4). AVAILABLE records inside the window are re-acquired (whole
// cached batches when the fetch covers them, else offset by offset); records
// after the window, and acquirable gaps, become new in-flight batches of about
// BatchSize records aligned on log batches (batch_optimized, MaxRecords soft)
// or one range of at most MaxRecords (record_limit; the rest of the log batch
// is cached AVAILABLE with delivery count 0). Each acquisition increments the
// delivery count and arms a lock until nowMs + RecordLockDurationMs. A record
// whose delivery count already reached the limit is archived instead of being
// delivered. The window never grows past MaxInFlightRecords.
func (sp *SharePartition) Acquire(nowMs int64, req AcquireRequest) AcquireResult {
	res := AcquireResult{LockDurationMs: sp.cfg.RecordLockDurationMs}
	var c changes
	if req.MaxRecords <= 0 || len(req.Batches) == 0 {
		res.Update = sp.update(&c)
		return res
	}
	firstBase := req.Batches[0].BaseOffset
	lastFetched := req.Batches[len(req.Batches)-1].LastOffset
	if lastFetched < sp.spso {
		res.Update = sp.update(&c)
		return res
	}
	maxN, lastTo := int64(req.MaxRecords), lastFetched
	if room := sp.cfg.MaxInFlightRecords - sp.InFlightRecords(); room < maxN {
		maxN = room
	}
	if maxN <= 0 {
		// At the record-lock cap only re-deliveries inside the window are allowed.
		speo := sp.nextOffset - 1
		if len(sp.batches) == 0 || req.FetchOffset > speo {
			res.Update = sp.update(&c)
			return res
		}
		maxN, lastTo = min(int64(req.MaxRecords), speo-req.FetchOffset+1), min(lastFetched, speo)
	}
	sp.archiveStale(req.FetchOffset, firstBase)

	a := acquisition{sp: sp, req: &req, nowMs: nowMs, max: maxN, firstBase: firstBase, lastTo: lastTo, c: &c, lastAcquired: -1}
	from := max(firstBase, sp.spso)
	cur := from
	for i := max(sp.floorIdx(from), 0); i < len(sp.batches) && a.n < a.max; i++ {
		b := sp.batches[i]
		if b.last < from {
			continue
		}
		if b.first > lastTo {
			break
		}
		if cur < b.first {
			a.uncached(cur, b.first-1)
			if a.n >= a.max {
				break
			}
		}
		a.cached(b)
		cur = b.last + 1
	}
	if a.n < a.max && cur <= lastTo {
		a.uncached(cur, lastTo)
	}
	if len(req.Aborted) > 0 && len(a.out) > 0 {
		a.out = sp.filterAborted(&req, a.out)
	}
	for _, r := range a.out {
		res.Count += int(r.LastOffset - r.FirstOffset + 1)
	}
	sp.counters.Acquired += int64(res.Count)
	res.Records = a.out
	if a.lastAcquired >= 0 && sp.gapActive() && a.lastAcquired+1 > sp.gapStart {
		sp.gapStart = a.lastAcquired + 1
	}
	if sp.gapActive() && sp.nextOffset-1 > sp.gapEnd {
		sp.gapStart, sp.gapEnd = 1, 0 // the window moved past the restored range
	}
	res.Update = sp.update(&c)
	return res
}

// acquisition is the working state of one Acquire call.
type acquisition struct {
	sp           *SharePartition
	req          *AcquireRequest
	nowMs        int64
	max          int64 // records this call may acquire
	n            int64 // records acquired so far
	firstBase    int64
	lastTo       int64
	out          []AcquiredRecords
	c            *changes
	lastAcquired int64
}

func (a *acquisition) emit(first, last int64, count int16, mergeable bool) {
	if n := len(a.out); mergeable && n > 0 {
		p := &a.out[n-1]
		if p.LastOffset+1 == first && p.DeliveryCount == count {
			p.LastOffset = last
			a.lastAcquired = last
			return
		}
	}
	a.out = append(a.out, AcquiredRecords{FirstOffset: first, LastOffset: last, DeliveryCount: count})
	a.lastAcquired = last
}

// take acquires r (AVAILABLE) for the member, or archives it at the delivery limit.
func (a *acquisition) take(b *batch, r *record, first, n int64) bool {
	sp := a.sp
	if r.count >= sp.cfg.DeliveryCountLimit {
		if sp.setState(r, first, n, Archived, false) {
			sp.counters.Archived += n
			sp.complete += n
			a.c.add(first, first+n-1, r)
		}
		return false
	}
	return sp.acquireRecord(b, r, first, n, a.req.Member, a.nowMs)
}

// acquireRecord moves n AVAILABLE records sharing r to ACQUIRED by member: delivery
// count +1, lock until nowMs + RecordLockDurationMs.
func (sp *SharePartition) acquireRecord(b *batch, r *record, first, n int64, member string, nowMs int64) bool {
	if !sp.setState(r, first, n, Acquired, false) {
		return false
	}
	r.member, r.count = member, r.count+1
	r.deadlineMs = nowMs + sp.cfg.RecordLockDurationMs
	sp.arm(b, r.deadlineMs)
	return true
}

// cached acquires from an existing in-flight batch.
func (a *acquisition) cached(b *batch) {
	remaining := a.max - a.n
	full := b.first >= a.firstBase && b.last <= a.lastTo
	if b.uniform() && full && !(a.req.Mode == RecordLimit && b.len() > remaining) {
		if b.rec.state == Available && a.take(b, &b.rec, b.first, b.len()) {
			a.emit(b.first, b.last, b.rec.count, false)
			a.n += b.len()
		}
		return
	}
	if b.uniform() && b.rec.state != Available {
		return
	}
	// Run by run: in record_limit mode the run where the limit falls is cut there.
	var got int64
	lo, hi := max(b.first, a.firstBase), min(b.last, a.lastTo)
	for o := lo; o <= hi && !(a.req.Mode == RecordLimit && got == remaining); {
		end, r := b.stretch(o, hi)
		if r.state != Available {
			o = end + 1
			continue
		} else if a.req.Mode == RecordLimit && r.count < a.sp.cfg.DeliveryCountLimit {
			// A run at the delivery limit is archived whole (take), however long.
			end = min(end, o+remaining-got-1)
		}
		cr := &a.sp.carve(b, o, end)[0]
		if a.take(b, &cr.rec, o, cr.len()) {
			a.emit(o, end, cr.rec.count, got > 0)
			got += cr.len()
		}
		o = end + 1
	}
	a.n += got
}

// uncached acquires the acquirable parts of [lo, hi], which no batch covers:
// acquirable gaps left by a restore, and offsets after the window.
func (a *acquisition) uncached(lo, hi int64) {
	sp := a.sp
	if sp.gapActive() {
		if glo, ghi := max(lo, sp.gapStart), min(hi, sp.gapEnd); glo <= ghi {
			a.fresh(glo, ghi)
		}
	}
	if lo = max(lo, sp.nextOffset); lo <= hi && a.n < a.max {
		a.fresh(lo, hi)
	}
}

// fresh creates new in-flight batches for [lo, hi] (Kafka's acquireNewBatchRecords).
func (a *acquisition) fresh(lo, hi int64) {
	sp := a.sp
	remaining := a.max - a.n
	last := hi
	if remaining < hi-lo+1 {
		last = min(hi, a.logBatchLast(lo+remaining-1))
	}
	if last > sp.nextOffset-1 {
		sp.nextOffset = last + 1
	}
	// New records enter the window AVAILABLE, as they are in the log, with delivery count
	// 0; the part this call takes is then acquired like any other AVAILABLE record.
	newBatch := func(first, last int64) *batch {
		b := &batch{first: first, last: last, rec: record{state: Available}}
		b.rec.clearOwner()
		sp.insert(b)
		return b
	}
	if a.req.Mode == RecordLimit {
		b := newBatch(lo, last)
		got := min(last-lo+1, remaining)
		taken := &b.rec
		if got < last-lo+1 {
			taken = &sp.carve(b, lo, lo+got-1)[0].rec
			sp.mayHaveAvailable = true // the rest of the log batch stays AVAILABLE
		}
		if sp.acquireRecord(b, taken, lo, got, a.req.Member, a.nowMs) {
			a.emit(lo, lo+got-1, 1, false)
			a.n += got
		}
		return
	}
	size := int64(a.req.BatchSize)
	if size <= 0 {
		size = last - lo + 1
	}
	take := func(first, last int64) {
		b := newBatch(first, last)
		if sp.acquireRecord(b, &b.rec, first, last-first+1, a.req.Member, a.nowMs) {
			a.emit(first, last, 1, false)
			a.n += last - first + 1
		}
	}
	cur := lo
	if last-lo+1 > size {
		for _, fb := range a.req.Batches {
			if fb.BaseOffset > last {
				break
			}
			if fb.BaseOffset > cur && fb.BaseOffset-cur >= size {
				take(cur, fb.BaseOffset-1)
				cur = fb.BaseOffset
			}
		}
	}
	take(cur, last)
}

// logBatchLast returns the last offset of the fetched log batch holding offset
// o (or the first one after it): MaxRecords is soft, whole log batches are acquired.
func (a *acquisition) logBatchLast(o int64) int64 {
	bs := a.req.Batches
	i := sort.Search(len(bs), func(i int) bool { return bs[i].LastOffset >= o })
	if i == len(bs) {
		return bs[len(bs)-1].LastOffset
	}
	return bs[i].LastOffset
}

// archiveStale archives AVAILABLE cached records in [fetchOffset, firstBase):
// the read skipped them, so compaction removed them (Kafka's
// maybeArchiveStaleBatches). Not persisted, as in Kafka.
func (sp *SharePartition) archiveStale(fetchOffset, firstBase int64) {
	if fetchOffset >= firstBase {
		return
	}
	sp.archiveAvailable(fetchOffset, firstBase-1)
}

// archiveAvailable archives the AVAILABLE records in [lo, hi].
func (sp *SharePartition) archiveAvailable(lo, hi int64) {
	for i := max(sp.floorIdx(lo), 0); i < len(sp.batches); i++ {
		b := sp.batches[i]
		if b.first > hi {
			break
		}
		if b.last < lo {
			continue
		}
		if b.uniform() && b.first >= lo && b.last <= hi {
			if b.rec.state == Available {
				sp.archive(&b.rec, b.first, b.len())
			}
			continue
		}
		if b.uniform() && b.rec.state != Available {
			continue
		}
		if b.pk != nil {
			if _, ok := b.findState(max(lo, b.first), min(hi, b.last), func(s State) bool { return s == Available }); !ok {
				continue
			}
		}
		rs := sp.carve(b, max(lo, b.first), min(hi, b.last))
		for i := range rs {
			if r := &rs[i]; r.rec.state == Available {
				sp.archive(&r.rec, r.first, r.len())
			}
		}
	}
}

// filterAborted archives acquired records that belong to aborted transactions
// and removes them from the result (Kafka's
// maybeFilterAbortedTransactionalAcquiredRecords). Not persisted, as in Kafka.
func (sp *SharePartition) filterAborted(req *AcquireRequest, out []AcquiredRecords) []AcquiredRecords {
	aborted := abortedRanges(req.Batches, req.Aborted)
	if len(aborted) == 0 {
		return out
	}
	var kept []AcquiredRecords
	for _, ar := range out {
		cur := ar.FirstOffset
		for _, ab := range aborted {
			lo, hi := max(ab[0], cur), min(ab[1], ar.LastOffset)
			if lo > hi {
				continue
			}
			if cur < lo {
				kept = append(kept, AcquiredRecords{cur, lo - 1, ar.DeliveryCount})
			}
			sp.archiveAcquired(lo, hi)
			cur = hi + 1
		}
		if cur <= ar.LastOffset {
			kept = append(kept, AcquiredRecords{cur, ar.LastOffset, ar.DeliveryCount})
		}
	}
	return kept
}

// archiveAcquired archives the (just acquired) records in [lo, hi].
func (sp *SharePartition) archiveAcquired(lo, hi int64) {
	for o := lo; o <= hi; {
		b := sp.find(o)
		if b == nil {
			o++
			continue
		}
		end := min(hi, b.last)
		if b.uniform() && o == b.first && end == b.last {
			sp.archive(&b.rec, o, b.len())
		} else {
			rs := sp.carve(b, o, end)
			for i := range rs {
				sp.archive(&rs[i].rec, rs[i].first, rs[i].len())
			}
		}
		o = end + 1
	}
}

// archive moves n records sharing r (AVAILABLE or ACQUIRED, at or above the SPSO) to
// ARCHIVED without persisting it, as Kafka's InFlightState.archive does.
func (sp *SharePartition) archive(r *record, first, n int64) {
	if sp.setState(r, first, n, Archived, false) {
		sp.counters.Archived += n
		sp.complete += n
	}
}

// abortedRanges returns the offset ranges of data batches of aborted
// transactions, with the consumer's read_committed rule: a producer's aborted
// transaction is open from its first offset until its ABORT marker.
func abortedRanges(batches []FetchedBatch, aborted []AbortedTxn) [][2]int64 {
	pending := append([]AbortedTxn(nil), aborted...)
	sort.Slice(pending, func(i, j int) bool { return pending[i].FirstOffset < pending[j].FirstOffset })
	open := map[int64]bool{}
	var out [][2]int64
	for _, fb := range batches {
		for len(pending) > 0 && pending[0].FirstOffset <= fb.LastOffset {
			open[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		if !fb.Transactional {
			continue
		}
		if fb.Control {
			if fb.AbortMarker {
				delete(open, fb.ProducerID)
			}
			continue
		}
		if open[fb.ProducerID] {
			out = append(out, [2]int64{fb.BaseOffset, fb.LastOffset})
		}
	}
	return out
}
