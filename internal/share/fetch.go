package share

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
)

// ShareFetch serves ShareFetch v1-v2 (KafkaApis.handleShareFetchRequest,
// SharePartitionManager.fetchMessages, DelayedShareFetch). It returns either the response
// or a func that produces it, which the broker runs in server.Reply.Wait (it returns when
// ctx ends). The func is returned when the answer depends on a store write (piggybacked
// acknowledgements, a session close) or on a long poll (nothing acquirable yet and
// MaxWaitMs > 0), and for SHARE_SESSION_LIMIT_REACHED, which Kafka delays by MaxWaitMs.
//
// Order of work: request checks; the share session; the piggybacked acknowledgements,
// applied in memory at once (so a RELEASE is redeliverable by this very fetch); the
// acquisition; then, in the wait, the acknowledgements' writes become durable, the long
// poll runs, and a session closed with epoch -1 releases the member's records.
//
// Where exactq answers earlier than Kafka's DelayedShareFetch (MaxWait is an upper bound;
// an early empty answer is always allowed): a fetch that carried acknowledgements and can
// acquire nothing is answered once they are durable, and a fetch that stalls on its own
// member's record locks is answered at once, then with a short backoff (stallWait).
func (m *Manager) ShareFetch(ctx context.Context, connID uint64, version int16, req *kmsg.ShareFetchRequest) (kmsg.Response, func() kmsg.Response) {
	req.Version = version
	resp := &FetchResponse{ShareFetchResponse: req.ResponseKind().(*kmsg.ShareFetchResponse)}
	fail := func(e *kerr.Error) (kmsg.Response, func() kmsg.Response) {
		resp.ErrorCode = e.Code
		resp.AcquisitionLockTimeoutMillis = 0
		resp.Topics = nil
		return resp, nil
	}
	if e := requestError(version, req.GroupID, req.MemberID); e != nil {
		return fail(e)
	}
	renew := version >= 2 && req.IsRenewAck
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		return fail(kerr.InvalidRequest) // KIP-1222: a renewing fetch fetches nothing
	}
	group, member := *req.GroupID, *req.MemberID
	key := sessionKey{group, member}
	gc := m.cfg.Groups(group)
	lockMs := int32(gc.partitionConfig().RecordLockDurationMs)

	var reqParts []tp
	hasAcks := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			reqParts = append(reqParts, tp{t.TopicID, p.Partition})
			if len(p.AcknowledgementBatches) > 0 {
				hasAcks = true
			}
		}
	}
	var forget []tp
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, tp{t.TopicID, p})
		}
	}

	m.mu.Lock()
	parts, dirty, serr := m.sessions.fetchContext(key, req.ShareSessionEpoch, connID, hasAcks, reqParts, forget)
	stalls := m.sessions.stallCount(key)
	m.mu.Unlock()
	if serr == kerr.ShareSessionLimitReached {
		// Kafka answers after MaxWaitMs (createIdleShareFetchTimerTask), so a client does
		// not spin on a full cache.
		return nil, func() kmsg.Response {
			m.sleep(ctx, m.maxWait(req.MaxWaitMillis))
			r, _ := fail(serr)
			return r
		}
	}
	if serr != nil {
		return fail(serr)
	}

	// Piggybacked acknowledgements: when any are present, every partition of the request
	// gets an acknowledgement result (Kafka's emptyAcknowledgements answer NONE).
	var acks []ackResult
	if hasAcks {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				acks = append(acks, m.acknowledge(group, member, tp{t.TopicID, p.Partition},
					fetchAckBatches(p.AcknowledgementBatches), version >= 2, renew))
			}
		}
	}

	final := req.ShareSessionEpoch == finalEpoch
	f := &fetch{
		m: m, ctx: ctx, group: group, member: member, gc: gc,
		epoch: req.ShareSessionEpoch, parts: parts,
		minBytes: req.MinBytes, maxBytes: req.MaxBytes, maxRecords: req.MaxRecords,
		batchSize: req.BatchSize, mode: sharepartition.BatchOptimized, stalls: stalls,
	}
	if version >= 2 && req.ShareAcquireMode == 1 {
		f.mode = sharepartition.RecordLimit
	}
	doFetch := !final && !renew && len(parts) > 0
	wait := m.maxWait(req.MaxWaitMillis)
	ready := true
	if doFetch {
		ready = f.attempt(wait <= 0)
		switch {
		case ready:
		case hasAcks:
			// The acknowledgement results are news: answer with what can be acquired now
			// (maybe nothing, maybe less than MinBytes) rather than hold them until MaxWait
			// as Kafka does; clients wait for them (kgo's FlushAcks does, and caps such a
			// fetch's MaxWait at 500 ms for that reason).
			ready = f.attempt(true)
		default:
			ready = f.stalledNow(wait)
		}
	}

	finish := func() kmsg.Response {
		m.settle(key, acks, final)
		resp.AcquisitionLockTimeoutMillis = lockMs
		initial := req.ShareSessionEpoch == initialEpoch
		stalled := f.cutShort && !f.acquired()
		sent := f.fill(resp, acks, dirty, initial)
		if !final {
			m.mu.Lock()
			m.sessions.responded(key, sent, stalled)
			m.mu.Unlock()
		}
		return resp
	}
	pending := final
	for i := range acks {
		if acks[i].w != nil {
			pending = true
		}
	}
	if ready && !pending {
		return finish(), nil
	}
	return nil, func() kmsg.Response {
		if !ready {
			f.longPoll(wait)
		}
		return finish()
	}
}

// FetchResponse is ShareFetch's response. The records of the partitions that carry some
// are not in the kmsg response (their Records fields are empty) but in Records, still where
// Logs.Read left them, so the broker can send them from its files. AppendTo encodes the
// whole response, copying them in.
type FetchResponse struct {
	*kmsg.ShareFetchResponse
	Records []PartitionRecords // in encoding order (topics, then their partitions)
}

// PartitionRecords are one partition's records in a FetchResponse.
type PartitionRecords struct {
	TopicID   [16]byte
	Partition int32
	Records   Records
	// Where the partition is: Topics[TopicIndex].Partitions[PartitionIndex].
	TopicIndex, PartitionIndex int
}

// AppendTo implements kmsg.Response: the response with every partition's records copied
// in. An unreadable read panics: the interface has no error.
func (r *FetchResponse) AppendTo(dst []byte) []byte {
	for i, pr := range r.Records {
		b, err := pr.Records.AppendTo(make([]byte, 0, pr.Records.Len()))
		if err != nil {
			panic(fmt.Sprintf("share fetch: reading records of partition %d: %v", pr.Partition, err))
		}
		*r.Field(i) = b
	}
	dst = r.ShareFetchResponse.AppendTo(dst)
	for i := range r.Records {
		*r.Field(i) = []byte{}
	}
	return dst
}

// Field returns the kmsg Records field of Records[i].
func (r *FetchResponse) Field(i int) *[]byte {
	pr := &r.Records[i]
	return &r.Topics[pr.TopicIndex].Partitions[pr.PartitionIndex].Records
}

// Release gives back every partition's records. Idempotent.
func (r *FetchResponse) Release() {
	for _, pr := range r.Records {
		pr.Records.Release()
	}
	r.Records = nil
}

// validMemberID is KafkaApis.isMemberIdValid.
func validMemberID(id *string) bool { return id != nil && *id != "" && len(*id) <= 36 }

// requestError is the top-level error of a ShareFetch or ShareAcknowledge that cannot be
// served at all (nil when it can): a version before 1 (KIP-932's early-access v0), no
// group id, or an invalid member id.
func requestError(version int16, groupID, memberID *string) *kerr.Error {
	switch {
	case version < 1:
		return kerr.UnsupportedVersion
	case groupID == nil || !validMemberID(memberID):
		return kerr.InvalidRequest
	}
	return nil
}

// settle is how a ShareFetch or ShareAcknowledge ends before it is answered: its
// acknowledgements' store writes become durable, then a request with the final epoch
// closes its session, releasing the member's remaining records.
func (m *Manager) settle(key sessionKey, acks []ackResult, final bool) {
	for i := range acks {
		acks[i].wait()
	}
	if final {
		m.closeSession(key, true)
	}
}

func (m *Manager) maxWait(ms int32) time.Duration {
	return min(time.Duration(max(ms, 0))*time.Millisecond, m.cfg.MaxWait)
}

// sleep waits d or until ctx ends, on the injected timer.
func (m *Manager) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := m.cfg.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// fetch is one ShareFetch's acquisition across its session's partitions.
type fetch struct {
	m             *Manager
	ctx           context.Context
	group, member string
	gc            GroupConfig
	epoch         int32
	parts         []tp

	minBytes, maxBytes    int32
	maxRecords, batchSize int32
	mode                  sharepartition.AcquireMode

	results map[tp]*partResult
	// ownLocks: the last pass found a partition at its record-lock limit where the member
	// itself holds acquired records (see stallWait).
	ownLocks bool
	stalls   int  // the session's consecutive answers cut short by stallWait before this one
	cutShort bool // this answer is cut short by stallWait
}

// partResult is one partition's part of the response.
type partResult struct {
	err      *kerr.Error
	records  Records // the batches holding acquired, set with acquired
	acquired []sharepartition.AcquiredRecords
	bytes    int64 // readable bytes (a pass without acquisition)
	ownLocks bool  // at the record-lock limit, and the member holds records here
}

// stallWait is how long a ShareFetch that can acquire nothing may wait for records when the
// member's own acquired records keep one of its session's partitions at the record-lock
// limit (share.partition.max.record.locks), instead of MaxWait. Nothing can be acquired
// there until acknowledgements free locks, and clients send acknowledgements on their next
// ShareFetch (kgo, and the Java client): while this fetch waits, the member's
// acknowledgements, the very thing that would free the locks, wait in the client. So the
// fetch is answered early, empty, which MaxWait (an upper bound) allows: at once the first
// time, then after 1, 2, 4, ... ms for the session's consecutive such answers (stalls),
// never later than MaxWait, so a member still processing its records costs a handful of
// requests, not a busy loop, and its acknowledgements wait at most about as long again
// as it has been processing.
func stallWait(stalls int, maxWait time.Duration) time.Duration {
	if stalls <= 0 {
		return 0
	}
	return min(time.Millisecond<<min(stalls-1, 30), maxWait)
}

// stalledNow tells whether a fetch that acquired nothing must be answered now because it
// stalls on its member's own record locks (stallWait); if so it makes the final attempt.
func (f *fetch) stalledNow(maxWait time.Duration) bool {
	if !f.ownLocks || stallWait(f.stalls, maxWait) > 0 {
		return false
	}
	f.cutShort = true
	return f.attempt(true)
}

// acquired reports whether the fetch acquired any records.
func (f *fetch) acquired() bool {
	for _, r := range f.results {
		if len(r.acquired) > 0 {
			return true
		}
	}
	return false
}

// attempt tries to acquire records on every partition of the session and reports
// whether the fetch can be answered: something was acquired, a partition failed, or this
// is the final attempt (no wait, or the long poll's time is up). With MinBytes > 1 the
// readable bytes are measured first and nothing is acquired until there are enough, as
// DelayedShareFetch does, so records are not held locked while the poll waits.
func (f *fetch) attempt(final bool) bool {
	if !final && f.minBytes > 1 {
		n, failed := f.pass(false)
		if n < int(f.minBytes) && !failed {
			return false
		}
	}
	n, failed := f.pass(true)
	return final || failed || n > 0
}

// pass reads every partition once; with acquire it acquires and fills f.results and
// returns the number of records acquired, else it returns the bytes readable.
func (f *fetch) pass(acquire bool) (int, bool) {
	nParts := len(f.parts)
	maxBytes := f.maxBytes
	if maxBytes <= 0 || maxBytes > f.m.cfg.MaxFetchBytes {
		maxBytes = f.m.cfg.MaxFetchBytes
	}
	perPartition := max(maxBytes/int32(max(nParts, 1)), 1) // Kafka's PartitionMaxBytesStrategy.UNIFORM
	budget := int(f.maxRecords)
	if acquire {
		f.results = make(map[tp]*partResult, nParts)
	}
	total, failed := 0, false
	f.ownLocks = false
	// Rotate by session epoch for fairness (Kafka's PartitionRotateStrategy).
	start := 0
	if nParts > 0 && f.epoch > 0 {
		start = int(f.epoch) % nParts
	}
	for i := range nParts {
		t := f.parts[(start+i)%nParts]
		r := f.partition(t, perPartition, budget, acquire)
		if r.err != nil {
			failed = true
		}
		f.ownLocks = f.ownLocks || r.ownLocks
		if acquire {
			f.results[t] = r
			for _, a := range r.acquired {
				// A range's span may be far larger than its records (compaction gaps, a
				// lying batch): clamp, so two such ranges cannot overflow the sums.
				n := int(min(a.LastOffset-a.FirstOffset+1, math.MaxInt32))
				budget -= n
				total += n
			}
		} else {
			total += int(r.bytes)
		}
	}
	return total, failed
}

// partition reads and (with acquire) acquires one partition.
func (f *fetch) partition(t tp, maxBytes int32, budget int, acquire bool) *partResult {
	m := f.m
	if _, ok := m.logs.TopicName(t.topicID); !ok {
		return &partResult{err: kerr.UnknownTopicID}
	}
	if acquire && budget <= 0 {
		return &partResult{}
	}
	key := sharestate.Key{GroupID: f.group, TopicID: t.topicID, Partition: t.partition}
	p, err := m.lockedPartition(key)
	if err != nil {
		return &partResult{err: asKerr(err)}
	}
	defer p.mu.Unlock()
	sp := p.sp
	if pc := f.gc.partitionConfig(); pc != sp.Config() {
		if err := sp.SetConfig(pc); err != nil {
			m.cfg.Logger.Warn("invalid share group config", "group", f.group, "err", err)
		}
	}
	if !sp.CanAcquire() {
		return &partResult{ownLocks: sp.Holds(f.member)}
	}
	offset := sp.NextFetchOffset()
	rc := f.gc.readCommitted()
	// Read no further than the acquisition can reach: clients ask for up to
	// fetch.max.bytes (kgo: 50 MiB) while a share fetch hands out at most a few thousand
	// records (MaxRecords, the free record locks).
	readTo := sp.FetchEnd(max(budget, 1))
	rr, err := m.logs.Read(t.topicID, t.partition, offset, maxBytes, readTo, rc)
	if err != nil {
		ke := logError(err)
		if ke == kerr.OffsetOutOfRange {
			// Retention moved the log start past the SPSO: move the SPSO and answer NONE
			// with no data; the client fetches again (Kafka's updateCacheAndOffsets).
			if start, lerr := m.logs.ListOffset(t.topicID, t.partition, -2); lerr == nil && start > sp.StartOffset() {
				sp.AdvanceLogStart(start)
				p.persistAndWake(sharepartition.Update{})
			}
			return &partResult{}
		}
		return &partResult{err: ke}
	}
	if rr.LogStartOffset > sp.StartOffset() {
		sp.AdvanceLogStart(rr.LogStartOffset)
		p.persistAndWake(sharepartition.Update{})
	}
	if rr.Records == nil {
		return &partResult{}
	}
	if !acquire {
		n := rr.Records.Len()
		rr.Records.Release()
		return &partResult{bytes: n}
	}
	read, err := rr.Records.Batches()
	if err != nil {
		rr.Records.Release()
		m.cfg.Logger.Error("share fetch: corrupt log read", "key", key.String(), "err", err)
		return &partResult{err: kerr.CorruptMessage}
	}
	fetched := make([]sharepartition.FetchedBatch, len(read))
	for i := range read {
		fetched[i] = read[i].FetchedBatch
	}
	batchSize := int(f.batchSize)
	if batchSize <= 0 {
		batchSize = budget
	}
	areq := sharepartition.AcquireRequest{
		Member:      f.member,
		FetchOffset: offset,
		Batches:     fetched,
		MaxRecords:  budget,
		BatchSize:   batchSize,
		Mode:        f.mode,
	}
	if rc {
		areq.Aborted = rr.Aborted
	}
	res := sp.Acquire(m.nowMs(), areq)
	// Acquisitions are not persisted; only records archived at the delivery limit are,
	// and nothing in this response depends on that write.
	p.persist(res.Update)
	from, to, ok := acquiredBytes(read, res.Records)
	if !ok { // nothing acquired (acquired offsets always lie in the read)
		rr.Records.Release()
		return &partResult{}
	}
	rr.Records.Slice(from, to)
	return &partResult{acquired: res.Records, records: rr.Records}
}

// longPoll waits until records can be acquired, the wait ends or ctx ends
// (DelayedShareFetch): it wakes when a partition's high watermark or LSO advances and when
// a share partition's records may have become acquirable (acknowledgement, release, lock
// expiry).
func (f *fetch) longPoll(wait time.Duration) {
	m := f.m
	ch := make(chan struct{}, 1)
	var cleanup []func()
	defer func() {
		for _, c := range cleanup {
			c()
		}
	}()
	for _, t := range f.parts {
		cleanup = append(cleanup, m.logs.Watch(t.topicID, t.partition, ch))
		key := sharestate.Key{GroupID: f.group, TopicID: t.topicID, Partition: t.partition}
		m.mu.Lock()
		p := m.parts[key]
		m.mu.Unlock()
		if p != nil {
			p.addWaiter(ch)
			cleanup = append(cleanup, func() { p.removeWaiter(ch) })
		}
	}
	timer := m.cfg.NewTimer(wait)
	defer timer.Stop()
	// A fetch that stalls on its member's own record locks is answered early (stallWait).
	var short Timer
	var shortC <-chan time.Time
	defer func() {
		if short != nil {
			short.Stop()
		}
	}()
	// notReady follows an attempt that acquired nothing: it reports whether to answer now,
	// and arms the early answer once the fetch stalls on its own locks.
	notReady := func() bool {
		if short != nil || !f.ownLocks {
			return false
		}
		if f.stalledNow(wait) {
			return true
		}
		if d := stallWait(f.stalls, wait); d < wait {
			short = m.cfg.NewTimer(d)
			shortC = short.C()
		}
		return false
	}
	// Something may have changed between the first attempt and the registration.
	if f.attempt(false) || notReady() {
		return
	}
	for {
		select {
		case <-ch:
			if f.attempt(false) || notReady() {
				return
			}
		case <-shortC:
			f.cutShort = true
			f.attempt(true)
			return
		case <-timer.C():
			f.attempt(true)
			return
		case <-f.ctx.Done():
			f.release()
			return
		}
	}
}

// release gives back the records of results that will not be sent.
func (f *fetch) release() {
	for _, r := range f.results {
		if r.records != nil {
			r.records.Release()
		}
	}
	f.results = nil
}

// fill writes the fetch and acknowledgement results into resp and returns the partitions
// it carried from the fetch, with whether each had an error, for the session. An initial
// (epoch 0) response lists every partition of the session; a later one only those with
// records, an error or a pending update. Partitions with only an acknowledgement result
// are added with ErrorCode NONE (KafkaApis.combineShareFetchAndShareAcknowledgeResponses).
func (f *fetch) fill(resp *FetchResponse, acks []ackResult, dirty map[tp]bool, initial bool) map[tp]bool {
	type entry struct {
		t       tp
		rp      kmsg.ShareFetchResponseTopicPartition
		records Records
	}
	var order []*entry
	idx := make(map[tp]*entry)
	get := func(t tp) *kmsg.ShareFetchResponseTopicPartition {
		if e := idx[t]; e != nil {
			return &e.rp
		}
		e := &entry{t: t, rp: kmsg.NewShareFetchResponseTopicPartition()}
		e.rp.Partition = t.partition
		e.rp.CurrentLeader.LeaderID, e.rp.CurrentLeader.LeaderEpoch = -1, -1 // gotcha G12
		e.rp.Records = []byte{}                                              // never null in v1+ (gotcha G1)
		e.rp.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{}
		idx[t] = e
		order = append(order, e)
		return &e.rp
	}
	sent := make(map[tp]bool)
	for _, t := range f.parts {
		r := f.results[t]
		if r == nil {
			r = &partResult{}
		}
		if !initial && r.err == nil && len(r.acquired) == 0 && !dirty[t] {
			continue
		}
		rp := get(t)
		if r.err != nil {
			rp.ErrorCode = r.err.Code
		}
		if len(r.acquired) > 0 {
			idx[t].records = r.records
			r.records = nil
			for _, a := range r.acquired {
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.FirstOffset, a.LastOffset, a.DeliveryCount
				rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
			}
		}
		sent[t] = r.err != nil
	}
	f.release() // what a later (incremental) response leaves out
	for i := range acks {
		a := &acks[i]
		rp := get(a.t)
		rp.AcknowledgeErrorCode = errCode(a.err)
		rp.AcknowledgeErrorMessage = errMessage(a.err)
	}
	topicIdx := make(map[[16]byte]int)
	for _, e := range order {
		ti, ok := topicIdx[e.t.topicID]
		if !ok {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = e.t.topicID
			resp.Topics = append(resp.Topics, rt)
			ti = len(resp.Topics) - 1
			topicIdx[e.t.topicID] = ti
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, e.rp)
		if e.records != nil {
			resp.Records = append(resp.Records, PartitionRecords{TopicID: e.t.topicID, Partition: e.t.partition,
				Records: e.records, TopicIndex: ti, PartitionIndex: len(resp.Topics[ti].Partitions) - 1})
		}
	}
	// Encoding order: a topic's partitions are grouped where the topic first appears.
	slices.SortStableFunc(resp.Records, func(a, b PartitionRecords) int { return cmp.Compare(a.TopicIndex, b.TopicIndex) })
	return sent
}

func asKerr(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.UnknownServerError
}

// DescribeBatch describes a stored record batch for Acquire from its header (batch.HeaderSize
// bytes; no CRC pass, the log validated the batch on append). b must hold the whole batch
// when it is a control batch (IsControlBatch): its marker tells ABORT for read_committed.
func DescribeBatch(b []byte) (sharepartition.FetchedBatch, error) {
	if len(b) < batch.HeaderSize {
		return sharepartition.FetchedBatch{}, batch.ErrCorrupt
	}
	base := int64(binary.BigEndian.Uint64(b[0:8]))
	attrs := int16(binary.BigEndian.Uint16(b[21:23]))
	lastDelta := int32(binary.BigEndian.Uint32(b[23:27]))
	fb := sharepartition.FetchedBatch{
		BaseOffset:    base,
		LastOffset:    base + int64(lastDelta),
		ProducerID:    int64(binary.BigEndian.Uint64(b[43:51])),
		Transactional: attrs&0x10 != 0,
		Control:       attrs&0x20 != 0,
	}
	if fb.Control {
		if BatchLen(b) > int64(len(b)) {
			return fb, batch.ErrCorrupt
		}
		if h, err := batch.Parse(b); err == nil {
			if mk, err := batch.ParseMarker(&h); err == nil {
				fb.AbortMarker = !mk.Commit
			}
		}
	}
	return fb, nil
}

// IsControlBatch reports whether the batch whose header starts b is a control batch.
func IsControlBatch(b []byte) bool { return binary.BigEndian.Uint16(b[21:23])&0x20 != 0 }

// BatchLen is the length of the stored batch whose header starts b (at least 12 bytes).
func BatchLen(b []byte) int64 { return 12 + int64(int32(binary.BigEndian.Uint32(b[8:12]))) }

// acquiredBytes returns the bytes of the read holding the acquired ranges, from the batch
// holding the first acquired offset to the one holding the last (Kafka's
// maybeSliceFetchRecords). Batches in between are sent whole even where another member
// holds them: clients keep only the offsets listed in AcquiredRecords.
func acquiredBytes(read []ReadBatch, acq []sharepartition.AcquiredRecords) (from, to int64, ok bool) {
	if len(acq) == 0 {
		return 0, 0, false
	}
	first, last := acq[0].FirstOffset, acq[0].LastOffset
	for _, a := range acq[1:] {
		first, last = min(first, a.FirstOffset), max(last, a.LastOffset)
	}
	lo, hi := -1, -1
	for i := range read {
		if read[i].LastOffset >= first && read[i].BaseOffset <= last {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo < 0 {
		return 0, 0, false
	}
	return read[lo].Pos, read[hi].Pos + read[hi].Len, true
}
