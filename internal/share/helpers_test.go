package share

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/coordlog"
	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
	"github.com/exactq/exactq/internal/testclock"
)

// fakeLogs is the only double: partition logs in memory, holding real record batches
// made with batch.Encode, with a high watermark, a last stable offset, an aborted index
// and watchers, as the broker's partitions have.
type fakeLogs struct {
	mu          sync.Mutex
	topics      map[[16]byte]*fakeTopic
	outstanding atomic.Int64 // reads not released
}

type fakeTopic struct {
	name  string
	parts []*fakePart
}

type fakeBatch struct {
	base, last int64
	tsMs       int64
	data       []byte
}

type fakePart struct {
	batches  []fakeBatch
	end      int64
	start    int64
	openTxn  map[int64]int64 // producer id -> first offset of its open transaction
	aborted  []abortedRange
	watchers map[chan struct{}]struct{}
}

type abortedRange struct {
	pid         int64
	first, last int64
}

func newFakeLogs() *fakeLogs { return &fakeLogs{topics: make(map[[16]byte]*fakeTopic)} }

func (l *fakeLogs) createTopic(name string, id [16]byte, partitions int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &fakeTopic{name: name}
	for range partitions {
		t.parts = append(t.parts, &fakePart{openTxn: make(map[int64]int64), watchers: make(map[chan struct{}]struct{})})
	}
	l.topics[id] = t
}

func (l *fakeLogs) deleteTopic(id [16]byte) {
	l.mu.Lock()
	delete(l.topics, id)
	l.mu.Unlock()
}

func (l *fakeLogs) part(id [16]byte, p int32) (*fakePart, error) {
	t := l.topics[id]
	if t == nil {
		return nil, kerr.UnknownTopicID
	}
	if p < 0 || int(p) >= len(t.parts) {
		return nil, kerr.UnknownTopicOrPartition
	}
	return t.parts[p], nil
}

// lso is the first offset of an open transaction, else the end (the high watermark).
func (fp *fakePart) lso() int64 {
	lso := fp.end
	for _, first := range fp.openTxn {
		lso = min(lso, first)
	}
	return lso
}

func (fp *fakePart) appendBatch(h batch.Header, records []kmsg.Record) {
	h.BaseOffset = fp.end
	b, err := batch.Encode(nil, h, records, batch.CodecNone)
	if err != nil {
		panic(err)
	}
	last := fp.end + int64(len(records)) - 1
	fp.batches = append(fp.batches, fakeBatch{base: fp.end, last: last, tsMs: h.FirstTimestamp, data: b})
	fp.end = last + 1
	for ch := range fp.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func records(n int, prefix string) []kmsg.Record {
	rs := make([]kmsg.Record, n)
	for i := range rs {
		rs[i] = kmsg.Record{Key: []byte(fmt.Sprintf("%s-k%d", prefix, i)), Value: []byte(fmt.Sprintf("%s-v%d", prefix, i))}
	}
	return rs
}

// produce appends n single-record batches (as the FAR tests' producer does).
func (l *fakeLogs) produce(id [16]byte, p int32, n int, tsMs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.part(id, p)
	if err != nil {
		panic(err)
	}
	for i := range n {
		fp.appendBatch(batch.NoProducer(0, tsMs), records(1, fmt.Sprint(fp.end+int64(i))))
	}
}

// produceBatch appends one batch of n records.
func (l *fakeLogs) produceBatch(id [16]byte, p int32, n int, tsMs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, _ := l.part(id, p)
	fp.appendBatch(batch.NoProducer(0, tsMs), records(n, fmt.Sprint(fp.end)))
}

// produceTxn appends one transactional batch of n records for pid.
func (l *fakeLogs) produceTxn(id [16]byte, p int32, pid int64, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, _ := l.part(id, p)
	if _, ok := fp.openTxn[pid]; !ok {
		fp.openTxn[pid] = fp.end
	}
	h := batch.Header{PartitionLeaderEpoch: -1, Attributes: 0x10, ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0}
	fp.appendBatch(h, records(n, fmt.Sprint(fp.end)))
}

// endTxn writes pid's marker.
func (l *fakeLogs) endTxn(id [16]byte, p int32, pid int64, commit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, _ := l.part(id, p)
	first := fp.openTxn[pid]
	delete(fp.openTxn, pid)
	b := batch.ControlBatch(pid, 0, commit, 0, 0)
	batch.SetBaseOffset(b, fp.end)
	fp.batches = append(fp.batches, fakeBatch{base: fp.end, last: fp.end, data: b})
	if !commit {
		fp.aborted = append(fp.aborted, abortedRange{pid: pid, first: first, last: fp.end})
	}
	fp.end++
	for ch := range fp.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// deleteRecords moves the log start (retention, DeleteRecords).
func (l *fakeLogs) deleteRecords(id [16]byte, p int32, start int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, _ := l.part(id, p)
	fp.start = start
	for len(fp.batches) > 0 && fp.batches[0].last < start {
		fp.batches = fp.batches[1:]
	}
}

func (l *fakeLogs) Read(id [16]byte, p int32, offset int64, maxBytes int32, maxOffset int64, readCommitted bool) (ReadResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.part(id, p)
	if err != nil {
		return ReadResult{}, err
	}
	rr := ReadResult{HighWatermark: fp.end, LastStableOffset: fp.lso(), LogStartOffset: fp.start}
	if offset < fp.start || offset > fp.end {
		return rr, kerr.OffsetOutOfRange
	}
	upTo := fp.end
	if readCommitted {
		upTo = rr.LastStableOffset
	}
	upTo = min(upTo, maxOffset)
	var lastRead int64 = -1
	var data []byte
	for _, b := range fp.batches {
		if b.last < offset || b.base >= upTo {
			continue
		}
		if len(data) > 0 && len(data)+len(b.data) > int(maxBytes) {
			break
		}
		data = append(data, b.data...)
		lastRead = b.last
	}
	if readCommitted && lastRead >= 0 {
		for _, a := range fp.aborted {
			if a.first <= lastRead && a.last >= offset {
				rr.Aborted = append(rr.Aborted, sharepartition.AbortedTxn{ProducerID: a.pid, FirstOffset: a.first})
			}
		}
	}
	if len(data) > 0 {
		l.outstanding.Add(1)
		rr.Records = &memRecords{b: data, outstanding: &l.outstanding}
	}
	return rr, nil
}

// memRecords are the fake's Records: the bytes read, with a count of reads not yet
// released (every read must end released, directly or through its response).
type memRecords struct {
	b           []byte
	released    bool
	outstanding *atomic.Int64
}

func (r *memRecords) Len() int64 { return int64(len(r.b)) }

func (r *memRecords) Batches() ([]ReadBatch, error) {
	var out []ReadBatch
	for pos := int64(0); pos < int64(len(r.b)); {
		rest := r.b[pos:]
		if len(rest) < batch.HeaderSize {
			return nil, batch.ErrCorrupt
		}
		n := BatchLen(rest)
		if n < batch.HeaderSize || n > int64(len(rest)) {
			return nil, batch.ErrCorrupt
		}
		fb, err := DescribeBatch(rest[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, ReadBatch{FetchedBatch: fb, Pos: pos, Len: n})
		pos += n
	}
	return out, nil
}

func (r *memRecords) Slice(from, to int64) { r.b = r.b[from:to] }

func (r *memRecords) AppendTo(dst []byte) ([]byte, error) { return append(dst, r.b...), nil }

func (r *memRecords) Release() {
	if r.released {
		panic("memRecords released twice")
	}
	r.released = true
	r.outstanding.Add(-1)
}

// sfr returns a ShareFetch response as the client decodes it: records copied in, the
// reads released.
func sfr(r kmsg.Response) *kmsg.ShareFetchResponse {
	switch resp := r.(type) {
	case *FetchResponse:
		for i, pr := range resp.Records {
			if i > 0 {
				prev := resp.Records[i-1]
				if prev.TopicIndex > pr.TopicIndex || prev.TopicIndex == pr.TopicIndex && prev.PartitionIndex >= pr.PartitionIndex {
					panic(fmt.Sprintf("FetchResponse.Records not in encoding order: %+v", resp.Records))
				}
			}
			if rp := resp.Topics[pr.TopicIndex].Partitions[pr.PartitionIndex]; rp.Partition != pr.Partition ||
				resp.Topics[pr.TopicIndex].TopicID != pr.TopicID {
				panic(fmt.Sprintf("FetchResponse.Records[%d] points at another partition", i))
			}
			b, _ := pr.Records.AppendTo(nil)
			*resp.Field(i) = b
		}
		resp.Release()
		return resp.ShareFetchResponse
	case *kmsg.ShareFetchResponse:
		return resp
	}
	panic(fmt.Sprintf("not a ShareFetch response: %T", r))
}

func (l *fakeLogs) Watch(id [16]byte, p int32, ch chan struct{}) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.part(id, p)
	if err != nil {
		return func() {}
	}
	fp.watchers[ch] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(fp.watchers, ch)
		l.mu.Unlock()
	}
}

func (l *fakeLogs) watchers(id [16]byte, p int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, _ := l.part(id, p)
	return len(fp.watchers)
}

func (l *fakeLogs) ListOffset(id [16]byte, p int32, ts int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fp, err := l.part(id, p)
	if err != nil {
		return 0, err
	}
	switch ts {
	case -2:
		return fp.start, nil
	case -1:
		return fp.end, nil
	}
	for _, b := range fp.batches {
		if b.tsMs >= ts {
			return b.base, nil
		}
	}
	return -1, nil
}

func (l *fakeLogs) TopicName(id [16]byte) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.topics[id]
	if t == nil {
		return "", false
	}
	return t.name, true
}

// fakeTimer is a timer the test fires by hand.
type fakeTimer struct {
	c       chan time.Time
	d       time.Duration
	stopped bool
	fired   bool // by fireTimer
}

func (f *fakeTimer) C() <-chan time.Time { return f.c }
func (f *fakeTimer) Stop() bool          { f.stopped = true; return true }

// env is a Manager over the fake logs and a real share-state store on coordlog.Memory,
// with a fake clock.
type env struct {
	t      *testing.T
	logs   *fakeLogs
	mem    *coordlog.Memory
	store  *sharestate.Store
	m      *Manager
	clk    *testclock.Clock
	groups map[string]GroupConfig
	maxSes int

	timersMu sync.Mutex
	timers   []*fakeTimer
}

var (
	topicA = [16]byte{0xa}
	topicB = [16]byte{0xb}
)

const group = "g1"

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, logs: newFakeLogs(), mem: coordlog.NewMemory(0), clk: testclock.New(), groups: map[string]GroupConfig{}}
	e.logs.createTopic("a", topicA, 3)
	e.logs.createTopic("b", topicB, 1)
	e.start()
	t.Cleanup(func() {
		e.m.Close()
		if n := e.logs.outstanding.Load(); n != 0 {
			t.Errorf("%d log reads never released", n)
		}
	})
	return e
}

// start (re)creates the store and the manager over the same log: a broker restart.
func (e *env) start() {
	e.t.Helper()
	st, err := sharestate.New(sharestate.Config{NumPartitions: 1, Now: func() time.Time { return e.clk.Now() }}, []coordlog.Partition{e.mem})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	e.m = NewManager(Config{
		Groups: func(g string) GroupConfig {
			if c, ok := e.groups[g]; ok {
				return c
			}
			return DefaultGroupConfig()
		},
		MaxShareSessions: e.maxSes,
		Now:              func() time.Time { return e.clk.Now() },
		NewTimer: func(d time.Duration) Timer {
			ft := &fakeTimer{c: make(chan time.Time, 1), d: d}
			e.timersMu.Lock()
			e.timers = append(e.timers, ft)
			e.timersMu.Unlock()
			return ft
		},
		ManualTick: true,
	}, e.logs, st)
}

func (e *env) restart() {
	e.t.Helper()
	e.m.Close()
	e.store.Close()
	e.start()
}

// init initializes a share partition as the group coordinator does, with the group's
// share.auto.offset.reset applied to start offset -1.
func (e *env) init(g string, topic [16]byte, p int32) {
	e.t.Helper()
	if err := e.m.InitializeShareState(context.Background(), g, topic, p, 0, -1); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) advance(d time.Duration) {
	e.clk.Advance(d)
	e.m.Tick()
}

// yield lets other goroutines run while a test waits for one to reach a point it cannot
// signal (a long poll registering its watches): no sleeping.
func yield() { runtime.Gosched() }

type sharestateKey = sharestate.Key

// settle waits for the writes started by calls that do not wait (MemberRemoved,
// ConnClosed).
func (e *env) settle() { e.m.writes.Wait() }

// fetchReq builds a ShareFetch.
type fetchReq struct {
	group, member string
	epoch         int32
	topic         [16]byte
	parts         []int32
	acks          map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	forget        []int32
	maxRecords    int32
	batchSize     int32
	maxWaitMs     int32
	minBytes      int32
	mode          int8
	renew         bool
	version       int16
	conn          uint64
}

func ackBatch(first, last int64, types ...int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, types
	return b
}

func (r fetchReq) build() *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	g, m := r.group, r.member
	if g == "" {
		g = group
	}
	req.GroupID, req.MemberID = &g, &m
	req.ShareSessionEpoch = r.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = r.maxWaitMs, r.minBytes, 1<<20
	req.MaxRecords, req.BatchSize = 500, 500
	if r.maxRecords != 0 {
		req.MaxRecords = r.maxRecords
	}
	if r.batchSize != 0 {
		req.BatchSize = r.batchSize
	}
	req.ShareAcquireMode = r.mode
	req.IsRenewAck = r.renew
	if r.renew {
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 0, 0, 0, 0, 0
	}
	topic := r.topic
	if topic == ([16]byte{}) {
		topic = topicA
	}
	ps := r.parts
	for p := range r.acks {
		found := false
		for _, x := range ps {
			found = found || x == p
		}
		if !found {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = topic
		for _, p := range ps {
			rp := kmsg.NewShareFetchRequestTopicPartition()
			rp.Partition = p
			rp.AcknowledgementBatches = r.acks[p]
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(r.forget) > 0 {
		ft := kmsg.NewShareFetchRequestForgottenTopicsData()
		ft.TopicID, ft.Partitions = topic, r.forget
		req.ForgottenTopicsData = append(req.ForgottenTopicsData, ft)
	}
	return req
}

func (e *env) fetch(r fetchReq) *kmsg.ShareFetchResponse {
	e.t.Helper()
	v := r.version
	if v == 0 {
		v = 2
	}
	resp, wait := e.m.ShareFetch(context.Background(), r.conn, v, r.build())
	if wait != nil {
		if resp != nil {
			e.t.Fatal("ShareFetch returned both a response and a wait")
		}
		resp = wait()
	}
	return sfr(resp)
}

type ackReq struct {
	group, member string
	epoch         int32
	topic         [16]byte
	acks          map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	renew         bool
	version       int16
}

func (e *env) ack(r ackReq) *kmsg.ShareAcknowledgeResponse {
	e.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	g, m := r.group, r.member
	if g == "" {
		g = group
	}
	req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = &g, &m, r.epoch, r.renew
	topic := r.topic
	if topic == ([16]byte{}) {
		topic = topicA
	}
	if len(r.acks) > 0 {
		rt := kmsg.NewShareAcknowledgeRequestTopic()
		rt.TopicID = topic
		var ps []int32
		for p := range r.acks {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
			rp.Partition = p
			for _, b := range r.acks[p] {
				ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
				ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	v := r.version
	if v == 0 {
		v = 2
	}
	resp, wait := e.m.ShareAcknowledge(context.Background(), 0, v, req)
	if wait != nil {
		resp = wait()
	}
	return resp.(*kmsg.ShareAcknowledgeResponse)
}

// acquired is one AcquiredRecords entry, for comparisons.
type acquired struct {
	first, last int64
	count       int16
}

// part returns the response's partition p of topic (nil when absent).
func part(resp *kmsg.ShareFetchResponse, topic [16]byte, p int32) *kmsg.ShareFetchResponseTopicPartition {
	for i := range resp.Topics {
		if resp.Topics[i].TopicID != topic {
			continue
		}
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].Partition == p {
				return &resp.Topics[i].Partitions[j]
			}
		}
	}
	return nil
}

func acq(rp *kmsg.ShareFetchResponseTopicPartition) []acquired {
	if rp == nil {
		return nil
	}
	var out []acquired
	for _, a := range rp.AcquiredRecords {
		out = append(out, acquired{a.FirstOffset, a.LastOffset, a.DeliveryCount})
	}
	return out
}

func (e *env) wantAcquired(resp *kmsg.ShareFetchResponse, topic [16]byte, p int32, want ...acquired) {
	e.t.Helper()
	if resp.ErrorCode != 0 {
		e.t.Fatalf("top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	rp := part(resp, topic, p)
	got := acq(rp)
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("acquired on %x/%d = %v, want %v", topic[0], p, got, want)
	}
	if rp != nil && rp.ErrorCode != 0 {
		e.t.Fatalf("partition error %v", kerr.ErrorForCode(rp.ErrorCode))
	}
	if rp != nil && len(want) > 0 {
		e.checkRecords(rp)
	}
}

// checkRecords verifies that the response's batches cover every acquired offset and
// parse as the batches stored.
func (e *env) checkRecords(rp *kmsg.ShareFetchResponseTopicPartition) {
	e.t.Helper()
	bs, err := batch.Split(rp.Records)
	if err != nil {
		e.t.Fatalf("records: %v", err)
	}
	have := map[int64]bool{}
	for _, b := range bs {
		h, err := batch.Parse(b)
		if err != nil {
			e.t.Fatalf("batch: %v", err)
		}
		for o := h.FirstOffset; o <= h.FirstOffset+int64(h.LastOffsetDelta); o++ {
			have[o] = true
		}
	}
	for _, a := range rp.AcquiredRecords {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			if !have[o] {
				e.t.Fatalf("acquired offset %d not in the records", o)
			}
		}
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	wc := int16(0)
	if want != nil {
		wc = want.Code
	}
	if got != wc {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(wc))
	}
}
