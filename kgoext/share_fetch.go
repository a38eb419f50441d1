package kgoext

// ShareFetch: polling, one fetch per leader, decoding the acquired records.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Poll returns the next records delivered to this member, with their DeliveryCount. It
// first completes the previous Poll's records: in implicit mode they are accepted; in
// explicit mode each must have been acknowledged (else ErrUnacknowledged). It waits until
// a fetch returns records, or ctx is done (ctx's error; fetches in flight go on and their
// records come with the next Poll).
func (c *ShareConsumer) Poll(ctx context.Context) ([]*kgo.Record, error) {
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
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	} else {
		for tp, m := range c.delivered {
			for off, h := range m {
				if !h.renewed {
					c.mu.Unlock()
					return nil, fmt.Errorf("%w (%s[%d] offset %d)", ErrUnacknowledged, tp.Topic, tp.Partition, off)
				}
			}
		}
	}
	c.mu.Unlock()

	if err := c.sendSideAcks(ctx); err != nil {
		return nil, err
	}
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
		needMeta := c.needMeta
		c.needMeta = false
		c.mu.Unlock()
		if needMeta {
			c.refreshMeta(ctx)
		}
		wake, timer := c.startFetches()
		select {
		case res := <-c.results:
			if timer != nil {
				timer.Stop()
			}
			if recs := c.handleResult(res, true); len(recs) > 0 {
				return recs, nil
			}
		case <-wake:
		case <-timerC(timer):
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil, ctx.Err()
		}
	}
}

func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// startFetches starts a ShareFetch to every leader of assigned partitions without one in
// flight. It returns the channel that signals an assignment change and, when some leader
// is unknown or backing off, a timer for the retry.
func (c *ShareConsumer) startFetches() (<-chan struct{}, *time.Timer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	var retry time.Duration
	leaders := map[int32]bool{}
	for tp := range c.assigned {
		l := c.meta.leader(tp)
		if l < 0 {
			c.needMeta = true
			retry = c.cfg.retryBackoff
			continue
		}
		leaders[l] = true
	}
	for l := range leaders {
		if c.inflight[l] {
			continue
		}
		if until := c.backoff[l]; now.Before(until) {
			if d := until.Sub(now); retry == 0 || d < retry {
				retry = d
			}
			continue
		}
		c.inflight[l] = true
		c.wg.Add(1)
		c.fetchWG.Add(1)
		go c.fetch(l, c.piggybackLocked(l))
	}
	var t *time.Timer
	if retry > 0 {
		t = time.NewTimer(retry)
	}
	return c.assignWake, t
}

// session returns the share session with leader (c.mu held).
func (c *ShareConsumer) sessionLocked(leader int32) *shareSession {
	s := c.sessions[leader]
	if s == nil {
		s = &shareSession{sem: make(chan struct{}, 1), parts: map[TopicPartition]bool{}}
		c.sessions[leader] = s
	}
	return s
}

func (c *ShareConsumer) acquire(ctx context.Context, leader int32) (*shareSession, error) {
	c.mu.Lock()
	s := c.sessionLocked(leader)
	c.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *shareSession) release() { <-s.sem }

// advance moves the session epoch after a successful request.
func (s *shareSession) advance() {
	if s.epoch == 1<<31-1 {
		s.epoch = 1
		return
	}
	s.epoch++
}

func (s *shareSession) reset() {
	s.epoch = 0
	s.parts = map[TopicPartition]bool{}
}

// piggybackLocked takes the acknowledgements a fetch to leader starting now carries: those
// of the partitions it fetches, unless a RENEW is among them (RENEW needs a request that
// does not fetch). They are taken here, when Poll starts the fetch, not when the fetch's
// goroutine gets the session: a fetch still in flight after its Poll returned must not
// carry acknowledgements recorded after that Poll, which AcknowledgementsForTransaction
// may yet take for a transaction (they would be applied outside it, and an abort of the
// transaction would leave its inputs acknowledged without their outputs).
func (c *ShareConsumer) piggybackLocked(leader int32) map[TopicPartition]map[int64]AckType {
	return c.takeLocked(leader, func(tp TopicPartition, m map[int64]AckType) bool {
		return c.assigned[tp] && c.meta.leader(tp) == leader && !hasType(m, AckRenew)
	})
}

// fetch runs one ShareFetch to leader carrying acks, and queues its result.
func (c *ShareConsumer) fetch(leader int32, acks map[TopicPartition]map[int64]AckType) {
	defer c.wg.Done()
	defer c.fetchWG.Done() // after the result is queued: Close drains it
	res := &shareFetchResult{leader: leader}
	defer func() {
		c.mu.Lock()
		delete(c.inflight, leader)
		c.mu.Unlock()
		select {
		case c.results <- res:
		case <-c.ctx.Done():
		}
	}()
	s, err := c.acquire(c.ctx, leader)
	if err != nil {
		c.requeue(leader, acks)
		res.err = err
		return
	}
	defer s.release()
	if s.epoch == 0 {
		// A new session's first request carries no acknowledgements: they wait for the
		// next fetch or CommitSync.
		c.requeue(leader, acks)
		acks = nil
	}

	c.mu.Lock()
	want := map[TopicPartition]bool{}
	for tp := range c.assigned {
		if c.meta.leader(tp) == leader {
			want[tp] = true
		}
	}
	ids := c.topicIDsLocked()
	c.mu.Unlock()

	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.memberID)
	req.ShareSessionEpoch = s.epoch
	req.MaxWaitMillis = int32(c.cfg.maxWait.Milliseconds())
	req.MinBytes, req.MaxBytes = c.cfg.minBytes, c.cfg.maxBytes
	req.MaxRecords, req.BatchSize = c.cfg.maxRecords, c.cfg.maxRecords
	list := map[TopicPartition]bool{}
	for tp := range want {
		if s.epoch == 0 || !s.parts[tp] {
			list[tp] = true
		}
	}
	for tp := range acks {
		list[tp] = true
	}
	var forget []TopicPartition
	if s.epoch > 0 {
		for tp := range s.parts {
			if !want[tp] {
				forget = append(forget, tp)
			}
		}
	}
	for _, tp := range sortedSet(list) {
		id, ok := ids[tp.Topic]
		if !ok {
			continue
		}
		rt := shareFetchTopic(req, id)
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = tp.Partition
		for _, b := range ackBatches(acks[tp]) {
			kb := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			kb.FirstOffset, kb.LastOffset, kb.AcknowledgeTypes = b.FirstOffset, b.LastOffset, wireTypes(b.Types)
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kb)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	for _, tp := range forget {
		id, ok := ids[tp.Topic]
		if !ok {
			continue
		}
		var ft *kmsg.ShareFetchRequestForgottenTopicsData
		for i := range req.ForgottenTopicsData {
			if req.ForgottenTopicsData[i].TopicID == id {
				ft = &req.ForgottenTopicsData[i]
			}
		}
		if ft == nil {
			req.ForgottenTopicsData = append(req.ForgottenTopicsData, kmsg.NewShareFetchRequestForgottenTopicsData())
			ft = &req.ForgottenTopicsData[len(req.ForgottenTopicsData)-1]
			ft.TopicID = id
		}
		ft.Partitions = append(ft.Partitions, tp.Partition)
	}

	resp, err := c.cl.Broker(int(leader)).Request(c.ctx, req)
	if err != nil {
		// The connection is gone, and with it the session and its locks.
		s.reset()
		c.ackDone(leader, acks, nil, fmt.Errorf("%w: %w", ErrShareSessionLost, err))
		c.failLeader(leader, err)
		res.err = err
		return
	}
	r := resp.(*kmsg.ShareFetchResponse)
	if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		s.reset()
		c.requeue(leader, acks) // nothing of the request was applied
		if !errors.Is(err, kerr.ShareSessionNotFound) && !errors.Is(err, kerr.InvalidShareSessionEpoch) {
			c.failLeader(leader, err)
			if !kerr.IsRetriable(err) {
				c.mu.Lock()
				c.pollErr = fmt.Errorf("kgoext: ShareFetch from broker %d: %w", leader, err)
				c.mu.Unlock()
			}
		}
		res.err = err
		return
	}
	if s.epoch == 0 {
		s.parts = map[TopicPartition]bool{}
	}
	for tp := range list {
		s.parts[tp] = true
	}
	for _, tp := range forget {
		delete(s.parts, tp)
	}
	s.advance()

	names := c.namesSnapshot()
	ackErrs := map[TopicPartition]error{}
	for _, t := range r.Topics {
		name, ok := names[t.TopicID]
		if !ok {
			continue
		}
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			tp := TopicPartition{name, rp.Partition}
			if _, acked := acks[tp]; acked {
				ackErrs[tp] = kerrWithMessage(rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage)
			}
			if err := kerrWithMessage(rp.ErrorCode, rp.ErrorMessage); err != nil {
				c.mu.Lock()
				if kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicID) {
					c.needMeta = true
				} else {
					c.pollErr = errors.Join(c.pollErr, fmt.Errorf("kgoext: ShareFetch %s[%d]: %w", tp.Topic, tp.Partition, err))
				}
				c.mu.Unlock()
			}
			recs, gaps, err := decodeShare(tp, rp.Records, rp.AcquiredRecords)
			if err != nil {
				c.mu.Lock()
				c.pollErr = errors.Join(c.pollErr, err)
				c.mu.Unlock()
			}
			res.recs = append(res.recs, recs...)
			if len(gaps) > 0 {
				if res.gaps == nil {
					res.gaps = map[TopicPartition][]int64{}
				}
				res.gaps[tp] = gaps
			}
		}
	}
	c.ackDone(leader, acks, ackErrs, nil)
}

func shareFetchTopic(req *kmsg.ShareFetchRequest, id [16]byte) *kmsg.ShareFetchRequestTopic {
	for i := range req.Topics {
		if req.Topics[i].TopicID == id {
			return &req.Topics[i]
		}
	}
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = id
	req.Topics = append(req.Topics, t)
	return &req.Topics[len(req.Topics)-1]
}

// failLeader backs off from a broker after a failed request and refreshes metadata.
func (c *ShareConsumer) failLeader(leader int32, _ error) {
	c.mu.Lock()
	c.backoff[leader] = time.Now().Add(c.cfg.retryBackoff)
	c.needMeta = true
	c.mu.Unlock()
}

// handleResult turns a fetch result into delivered records (deliver) or, on Close, into
// RELEASE acknowledgements (!deliver). Gaps become gap acknowledgements either way.
func (c *ShareConsumer) handleResult(res *shareFetchResult, deliver bool) []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, offs := range res.gaps {
		for _, o := range offs {
			c.addPendingLocked(res.leader, tp, o, AckGap)
		}
	}
	for _, r := range res.recs {
		tp := TopicPartition{r.Topic, r.Partition}
		if !deliver {
			c.addPendingLocked(res.leader, tp, r.Offset, AckRelease)
			continue
		}
		m := c.delivered[tp]
		if m == nil {
			m = map[int64]*heldRec{}
			c.delivered[tp] = m
		}
		m[r.Offset] = &heldRec{leader: res.leader}
	}
	if !deliver {
		return nil
	}
	return res.recs
}

type deliveryCountKey struct{}

// withDeliveryCount is the Context of a record delivered dc times.
func withDeliveryCount(dc int16) context.Context {
	return context.WithValue(context.Background(), deliveryCountKey{}, dc)
}

// DeliveryCount is how many times the share group delivered r (1 the first time), for a
// record a ShareConsumer returned; 0 for any other. (kgo's Record.DeliveryCount answers for
// kgo's own share consumer only.)
func DeliveryCount(r *kgo.Record) int16 {
	if r == nil || r.Context == nil {
		return 0
	}
	dc, _ := r.Context.Value(deliveryCountKey{}).(int16)
	return dc
}

// decodeShare returns the records of raw that lie in the acquired ranges, each with its
// delivery count, and the acquired offsets with no data record (gaps).
func decodeShare(tp TopicPartition, raw []byte, acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) ([]*kgo.Record, []int64, error) {
	if len(acquired) == 0 {
		return nil, nil, nil
	}
	count := func(off int64) (int16, bool) {
		for _, a := range acquired {
			if off >= a.FirstOffset && off <= a.LastOffset {
				return a.DeliveryCount, true
			}
		}
		return 0, false
	}
	var out []*kgo.Record
	seen := map[int64]bool{}
	var decodeErr error
	for len(raw) > 0 {
		n, err := batch.Size(raw)
		if err != nil || n > len(raw) {
			break
		}
		b := raw[:n]
		raw = raw[n:]
		h, err := batch.Parse(b)
		if err != nil {
			decodeErr = fmt.Errorf("kgoext: %s[%d] batch at offset %d: %w", tp.Topic, tp.Partition, batch.BaseOffset(b), err)
			break
		}
		if h.Attributes&batch.AttrControl != 0 {
			continue
		}
		recs, err := batch.DecodeRecords(&h, batch.DefaultMaxDecompressedBytes)
		if err != nil {
			decodeErr = fmt.Errorf("kgoext: %s[%d] batch at offset %d: %w", tp.Topic, tp.Partition, h.FirstOffset, err)
			break
		}
		logAppend := h.Attributes&batch.AttrTimestampType != 0
		for i := range recs {
			kr := &recs[i]
			off := h.FirstOffset + int64(kr.OffsetDelta)
			dc, ok := count(off)
			if !ok || seen[off] {
				continue
			}
			seen[off] = true
			ts := h.FirstTimestamp + kr.TimestampDelta64
			if logAppend {
				ts = h.MaxTimestamp
			}
			r := &kgo.Record{
				Topic: tp.Topic, Partition: tp.Partition, Key: kr.Key, Value: kr.Value,
				Timestamp: time.UnixMilli(ts), Offset: off, LeaderEpoch: h.PartitionLeaderEpoch,
				ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
				Context: withDeliveryCount(dc),
			}
			if len(kr.Headers) > 0 {
				r.Headers = make([]kgo.RecordHeader, len(kr.Headers))
				for j, hd := range kr.Headers {
					r.Headers[j] = kgo.RecordHeader{Key: hd.Key, Value: hd.Value}
				}
			}
			out = append(out, r)
		}
	}
	if decodeErr != nil {
		// Records that could not be decoded are left to their lock: no gap for them.
		return out, nil, decodeErr
	}
	var gaps []int64
	for _, a := range acquired {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			if !seen[o] {
				gaps = append(gaps, o)
			}
		}
	}
	return out, gaps, nil
}
