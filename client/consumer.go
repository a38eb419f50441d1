package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerConfig configures a Consumer. The zero value of every field but Brokers selects
// its default.
type ConsumerConfig struct {
	Brokers []string
	Net     NetConfig

	IsolationLevel IsolationLevel
	// FetchMaxBytes bounds one fetch response (the broker may exceed it to return one
	// whole batch). Default 50 MiB.
	FetchMaxBytes int32
	// FetchMaxPartitionBytes bounds one partition in a fetch response. Default 1 MiB.
	FetchMaxPartitionBytes int32
	// FetchMaxWait is how long the broker may wait for FetchMinBytes. Default 500ms.
	FetchMaxWait time.Duration
	// FetchMinBytes is the data the broker waits for before answering. Default 1.
	FetchMinBytes int32
	// ResetOffset is where a partition restarts after OFFSET_OUT_OF_RANGE: Earliest
	// (default) or Latest. With ResetNone, Poll returns the error instead.
	ResetOffset Offset
	ResetNone   bool
	// DisableFetchSessions sends full fetches (no KIP-227 session).
	DisableFetchSessions bool

	// Group is the consumer group id; with it, Subscribe joins the group (classic
	// protocol) and the group assigns partitions. See group.go.
	Group string
	// GroupInstanceID makes the member static (KIP-345): a restart with the same id
	// within SessionTimeout gets its partitions back without a rebalance.
	GroupInstanceID string
	// SessionTimeout is how long the coordinator waits for a heartbeat before removing
	// the member. Default 45s.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the coordinator waits for every member to rejoin
	// during a rebalance (the time revocation callbacks may take). Default 60s.
	RebalanceTimeout time.Duration
	// HeartbeatInterval is the time between heartbeats. Default 3s.
	HeartbeatInterval time.Duration
	// Balancers are the assignors offered, in order of preference. The rebalance
	// protocol is cooperative when all of them support it. Default
	// CooperativeStickyBalancer().
	Balancers []Balancer
	// OnAssigned, OnRevoked and OnLost are called on the group's goroutine, with no
	// lock held, when partitions are assigned (positions are already set to the
	// committed offsets; the callback may Seek), revoked (after the auto commit of
	// their positions; commit here what auto commit does not), or lost (the member
	// fell out of the generation: do not commit, another member may own them). A
	// Poll running at the same time may still return records of a revoked partition.
	OnAssigned, OnRevoked, OnLost func(ctx context.Context, partitions []TopicPartition)
	// DisableAutoCommit turns off committing UncommittedOffsets every
	// AutoCommitInterval (default 5s), before revocation and on Close.
	DisableAutoCommit  bool
	AutoCommitInterval time.Duration
}

// Consumer defaults.
const (
	defaultFetchMaxBytes          = 50 << 20
	defaultFetchMaxPartitionBytes = 1 << 20
	defaultFetchMaxWait           = 500 * time.Millisecond
)

// ErrNotAssigned is returned by Seek for a partition that is not assigned.
var ErrNotAssigned = errors.New("client: partition not assigned")

// Consumer reads assigned partitions (no consumer group). Poll is meant to be called from
// one goroutine; Assign, Seek and Close may be called from others.
//
// Each partition leader gets at most one fetch in flight. Fetch results are applied only
// if the partition's position is still the one the fetch asked for, so a Seek while a
// fetch is in flight discards that fetch's records for the partition.
type Consumer struct {
	cfg ConsumerConfig
	cl  *cluster

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	results chan *fetchResult
	group   *groupMgr // nil without ConsumerConfig.Group

	mu       sync.Mutex
	parts    map[TopicPartition]*cpart
	sessions map[int32]*fetchSession
	inflight map[int32]bool
	backoff  map[int32]time.Time // per broker, after a failed fetch
	needMeta bool
	pollErr  error // surfaced by the next Poll
	closed   bool
}

// cpart is one assigned partition, guarded by Consumer.mu.
type cpart struct {
	tp TopicPartition
	// offset is the next offset to fetch; -1 while start is being resolved.
	offset int64
	start  Offset // Earliest or Latest while offset is -1
	hwm    int64
	lso    int64
}

type fetchResult struct {
	broker int32
	plan   fetchPlan
	sent   map[TopicPartition]int64 // every partition the fetch covers (plan + session)
	resp   *kmsg.FetchResponse
	err    error
}

// NewConsumer validates cfg; it connects on the first Poll.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	nc, err := newNetConfig(cfg.Brokers, cfg.Net)
	if err != nil {
		return nil, err
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = defaultFetchMaxBytes
	}
	if cfg.FetchMaxPartitionBytes <= 0 {
		cfg.FetchMaxPartitionBytes = defaultFetchMaxPartitionBytes
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = defaultFetchMaxWait
	}
	if cfg.FetchMinBytes <= 0 {
		cfg.FetchMinBytes = 1
	}
	switch cfg.ResetOffset {
	case 0:
		cfg.ResetOffset = Earliest
	case Earliest, Latest:
	default:
		return nil, fmt.Errorf("client: ResetOffset must be Earliest or Latest, not %d", cfg.ResetOffset)
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = defaultSessionTimeout
	}
	if cfg.RebalanceTimeout <= 0 {
		cfg.RebalanceTimeout = defaultRebalanceTimeout
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = defaultHeartbeatInterval
	}
	if cfg.AutoCommitInterval <= 0 {
		cfg.AutoCommitInterval = defaultAutoCommitInterval
	}
	if len(cfg.Balancers) == 0 {
		cfg.Balancers = []Balancer{CooperativeStickyBalancer()}
	}
	if cfg.GroupInstanceID != "" && cfg.Group == "" {
		return nil, errors.New("client: GroupInstanceID without Group")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{
		cfg:      cfg,
		cl:       newCluster(nc),
		ctx:      ctx,
		cancel:   cancel,
		results:  make(chan *fetchResult, 16),
		parts:    make(map[TopicPartition]*cpart),
		sessions: make(map[int32]*fetchSession),
		inflight: make(map[int32]bool),
		backoff:  make(map[int32]time.Time),
	}
	if cfg.Group != "" {
		c.group = newGroupMgr(c)
	}
	return c, nil
}

// Assign replaces the assignment: each partition starts at its Offset (exact, Earliest or
// Latest). Partitions already assigned keep their position unless listed again. Not for
// group members (Subscribe).
func (c *Consumer) Assign(assignment map[TopicPartition]Offset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range c.parts {
		if _, ok := assignment[tp]; !ok {
			delete(c.parts, tp)
		}
	}
	for tp, off := range assignment {
		c.parts[tp] = newCpart(tp, off)
	}
}

func newCpart(tp TopicPartition, off Offset) *cpart {
	cp := &cpart{tp: tp, offset: int64(off), hwm: -1, lso: -1}
	if off < 0 {
		cp.offset, cp.start = -1, off
	}
	return cp
}

// Seek moves an assigned partition to offset (exact, Earliest or Latest).
func (c *Consumer) Seek(tp TopicPartition, offset Offset) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.parts[tp]; !ok {
		return fmt.Errorf("%w: %s[%d]", ErrNotAssigned, tp.Topic, tp.Partition)
	}
	c.parts[tp] = newCpart(tp, offset)
	return nil
}

// Position returns the next offset Poll will return for tp, or -1 while it is being
// resolved.
func (c *Consumer) Position(tp TopicPartition) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.parts[tp]
	if !ok {
		return -1, fmt.Errorf("%w: %s[%d]", ErrNotAssigned, tp.Topic, tp.Partition)
	}
	return cp.offset, nil
}

// Poll returns the next records of the assigned partitions, in offset order per
// partition. It waits until a fetch response moves some partition's position forward, or
// ctx is done (then it returns ctx's error).
//
// Control batches, and with ReadCommitted the records of aborted transactions, are
// skipped, but they still move positions: a fetch that only skips such batches makes Poll
// return with no records (and a nil error) and Position past them. So a caller reading
// up to fixed end offsets (ListOffsets Latest) can compare Position with them after every
// Poll, without a timeout.

func (c *Consumer) Poll(ctx context.Context) ([]*Record, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if err := c.pollErr; err != nil {
			c.pollErr = nil
			c.mu.Unlock()
			return nil, err
		}
		c.mu.Unlock()

		if err := c.resolveStarts(ctx); err != nil {
			return nil, err
		}
		c.startFetches()
		select {
		case res := <-c.results:
			if recs, advanced := c.handleFetch(res); advanced {
				return recs, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// resolveStarts turns Earliest/Latest positions into offsets with ListOffsets.
func (c *Consumer) resolveStarts(ctx context.Context) error {
	c.mu.Lock()
	ts := make(map[TopicPartition]int64)
	for tp, cp := range c.parts {
		if cp.offset < 0 {
			ts[tp] = int64(cp.start)
		}
	}
	c.mu.Unlock()
	if len(ts) == 0 {
		return nil
	}
	listed, err := listOffsets(ctx, c.cl, c.cfg.IsolationLevel, ts)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil // retried on the next round; fetches for resolved partitions go on
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var fatal []error
	for tp, lo := range listed {
		cp, ok := c.parts[tp]
		if !ok || cp.offset >= 0 || int64(cp.start) != ts[tp] {
			continue // reassigned or seeked meanwhile
		}
		switch {
		case lo.Err == nil:
			cp.offset = lo.Offset
		case kerr.IsRetriable(lo.Err):
			c.needMeta = true
		default:
			fatal = append(fatal, fmt.Errorf("client: list offsets %s[%d]: %w", tp.Topic, tp.Partition, lo.Err))
		}
	}
	return errors.Join(fatal...)
}

// startFetches sends a fetch to every leader of a fetchable partition that has none in
// flight.
func (c *Consumer) startFetches() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.needMeta {
		c.needMeta = false
		topics := map[string]bool{}
		for tp := range c.parts {
			topics[tp.Topic] = true
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.ctx, c.cl.cfg.requestTimeout)
		_, _ = c.cl.refreshMetadata(ctx, mapKeys(topics))
		cancel()
		c.mu.Lock()
	}
	now := time.Now()
	want := make(map[int32]map[TopicPartition]int64)
	for tp, cp := range c.parts {
		if cp.offset < 0 {
			continue
		}
		leader := c.cl.leader(tp.Topic, tp.Partition)
		if leader < 0 {
			c.needMeta = true
			continue
		}
		if want[leader] == nil {
			want[leader] = make(map[TopicPartition]int64)
		}
		want[leader][tp] = cp.offset
	}
	for leader, parts := range want {
		if c.inflight[leader] || now.Before(c.backoff[leader]) {
			continue
		}
		s := c.sessions[leader]
		if s == nil {
			s = &fetchSession{disabled: c.cfg.DisableFetchSessions}
			c.sessions[leader] = s
		}
		plan := s.plan(parts)
		c.inflight[leader] = true
		c.wg.Add(1)
		go c.fetch(leader, plan, parts)
	}
	// Partitions on brokers in backoff or without a leader: make sure Poll wakes up.
	if len(c.inflight) == 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			_ = sleepCtx(c.ctx, c.cl.cfg.retryBackoff)
			select {
			case c.results <- &fetchResult{broker: -1}:
			case <-c.ctx.Done():
			}
		}()
		c.inflight[-1] = true
	}
}

// fetch runs one fetch request.
func (c *Consumer) fetch(leader int32, plan fetchPlan, sent map[TopicPartition]int64) {
	defer c.wg.Done()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(c.cfg.FetchMaxWait.Milliseconds())
	req.MinBytes = c.cfg.FetchMinBytes
	req.MaxBytes = c.cfg.FetchMaxBytes
	req.IsolationLevel = int8(c.cfg.IsolationLevel)
	req.SessionID, req.SessionEpoch = plan.sessionID, plan.epoch
	idx := map[string]int{}
	for _, tp := range sortedTPs(plan.include) {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(req.Topics)
			idx[tp.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = tp.Partition
		p.CurrentLeaderEpoch = -1
		p.LastFetchedEpoch = -1
		p.FetchOffset = plan.include[tp]
		p.LogStartOffset = -1
		p.PartitionMaxBytes = c.cfg.FetchMaxPartitionBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	forgot := map[string]int{}
	for _, tp := range plan.forget {
		i, ok := forgot[tp.Topic]
		if !ok {
			i = len(req.ForgottenTopics)
			forgot[tp.Topic] = i
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic = tp.Topic
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
	}
	res := &fetchResult{broker: leader, plan: plan, sent: sent}
	resp, err := c.cl.do(c.ctx, broker(leader), req)
	if err == nil {
		res.resp = resp.(*kmsg.FetchResponse)
		if res.resp.Version < 7 && !plan.full {
			err = errors.New("client: incremental fetch on a broker without sessions")
		}
	}
	res.err = err
	select {
	case c.results <- res:
	case <-c.ctx.Done():
	}
}

// handleFetch applies one fetch result and returns the records it yields and whether it
// moved some partition's position forward (with records, or past skipped batches only).
func (c *Consumer) handleFetch(res *fetchResult) (out []*Record, advanced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, res.broker)
	if res.broker < 0 {
		return nil, false
	}
	s := c.sessions[res.broker]
	if res.err != nil {
		s.reset()
		c.needMeta = true
		c.backoff[res.broker] = time.Now().Add(c.cl.cfg.retryBackoff)
		return nil, false
	}
	if err := kerr.ErrorForCode(res.resp.ErrorCode); err != nil {
		s.reset()
		if !errors.Is(err, kerr.FetchSessionIDNotFound) && !errors.Is(err, kerr.InvalidFetchSessionEpoch) {
			c.backoff[res.broker] = time.Now().Add(c.cl.cfg.retryBackoff)
			if !kerr.IsRetriable(err) {
				c.pollErr = fmt.Errorf("client: fetch from broker %d: %w", res.broker, err)
			}
		}
		return nil, false
	}
	s.succeeded(res.plan, res.resp.SessionID)

	var errs []error
	for _, t := range res.resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			tp := TopicPartition{t.Topic, rp.Partition}
			cp, ok := c.parts[tp]
			sentOff, wasSent := res.sent[tp]
			if !ok || !wasSent || cp.offset != sentOff {
				continue // unassigned or moved by Seek while the fetch was in flight
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				switch {
				case errors.Is(err, kerr.OffsetOutOfRange):
					if c.cfg.ResetNone {
						errs = append(errs, fmt.Errorf("client: %s[%d] offset %d: %w", tp.Topic, tp.Partition, cp.offset, err))
						continue
					}
					cp.offset, cp.start = -1, c.cfg.ResetOffset
				case kerr.IsRetriable(err):
					c.needMeta = true
				default:
					errs = append(errs, fmt.Errorf("client: fetch %s[%d]: %w", tp.Topic, tp.Partition, err))
				}
				continue
			}
			cp.hwm, cp.lso = rp.HighWatermark, rp.LastStableOffset
			recs, next, err := decodePartition(tp, cp.offset, rp.RecordBatches, rp.AbortedTransactions, c.cfg.IsolationLevel == ReadCommitted)
			out = append(out, recs...)
			if next > cp.offset {
				advanced = true
			}
			cp.offset = next
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		c.pollErr = errors.Join(errs...)
	}
	return out, advanced
}

// decodePartition decodes the batches of one partition's fetch answer, starting at
// fetchOffset. It returns the records at or after fetchOffset and the next offset to
// fetch. Records before fetchOffset in the first batch are dropped (a fetch returns whole
// batches); a trailing partial batch (the broker cuts at the size limit) is ignored;
// control batches are skipped but advance the offset. With readCommitted, batches of
// aborted transactions are skipped as in the Java consumer: an aborted transaction's
// producer is "aborted" from the transaction's first offset until its abort marker.
func decodePartition(tp TopicPartition, fetchOffset int64, raw []byte, aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction, readCommitted bool) ([]*Record, int64, error) {
	next := fetchOffset
	var out []*Record
	if readCommitted {
		aborted = append([]kmsg.FetchResponseTopicPartitionAbortedTransaction(nil), aborted...)
		sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	}
	abortedPIDs := map[int64]bool{}
	for len(raw) > 0 {
		n, err := batch.Size(raw)
		if err != nil || n > len(raw) {
			break // partial trailing batch
		}
		b := raw[:n]
		raw = raw[n:]
		h, err := batch.Parse(b)
		if err != nil {
			return out, next, fmt.Errorf("client: %s[%d] batch at offset %d: %w", tp.Topic, tp.Partition, batch.BaseOffset(b), err)
		}
		last := h.FirstOffset + int64(h.LastOffsetDelta)
		if last < next {
			continue
		}
		control := h.Attributes&batch.AttrControl != 0
		if readCommitted && h.ProducerID >= 0 {
			for len(aborted) > 0 && aborted[0].FirstOffset <= last {
				abortedPIDs[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
			if control {
				if m, err := batch.ParseMarker(&h); err == nil && !m.Commit {
					delete(abortedPIDs, h.ProducerID)
				}
			} else if h.Attributes&batch.AttrTransactional != 0 && abortedPIDs[h.ProducerID] {
				next = last + 1
				continue
			}
		}
		if control {
			next = last + 1
			continue
		}
		recs, err := batch.DecodeRecords(&h, batch.DefaultMaxDecompressedBytes)
		if err != nil {
			return out, next, fmt.Errorf("client: %s[%d] batch at offset %d: %w", tp.Topic, tp.Partition, h.FirstOffset, err)
		}
		logAppend := h.Attributes&batch.AttrTimestampType != 0
		for i := range recs {
			kr := &recs[i]
			off := h.FirstOffset + int64(kr.OffsetDelta)
			if off < next {
				continue
			}
			ts := h.FirstTimestamp + kr.TimestampDelta64
			if logAppend {
				ts = h.MaxTimestamp
			}
			r := &Record{
				Topic:       tp.Topic,
				Partition:   tp.Partition,
				Key:         kr.Key,
				Value:       kr.Value,
				Timestamp:   time.UnixMilli(ts),
				Offset:      off,
				LeaderEpoch: h.PartitionLeaderEpoch,
			}
			if len(kr.Headers) > 0 {
				r.Headers = make([]Header, len(kr.Headers))
				for j, hd := range kr.Headers {
					r.Headers[j] = Header{Key: hd.Key, Value: hd.Value}
				}
			}
			out = append(out, r)
		}
		next = last + 1
	}
	return out, next, nil
}

// Close stops fetching and closes the connections. A group member first revokes its
// partitions (auto-committing their positions unless disabled) and, unless static, leaves
// the group.
func (c *Consumer) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if c.group != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.cl.cfg.requestTimeout)
		c.group.leave(ctx)
		cancel()
	}
	c.cl.close()
}

func sortedTPs(m map[TopicPartition]int64) []TopicPartition {
	out := keys(m)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
