package kgoext

// Acknowledgements: recording them, piggybacking, ShareAcknowledge, handing them to a
// transaction.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Acknowledge records the outcome of a record this consumer delivered (explicit mode). The
// acknowledgement is sent with the next Poll, CommitSync, CommitAsync or Close, or taken by
// AcknowledgementsForTransaction. AckRenew extends the record's lock; it still needs a
// terminal type later. A terminal type is final: acknowledging the record again returns
// ErrNotDelivered.
func (c *ShareConsumer) Acknowledge(r *kgo.Record, t AckType) error {
	if t < AckAccept || t > AckRenew {
		return fmt.Errorf("kgoext: cannot acknowledge with %s", t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if !c.cfg.explicit {
		return ErrImplicitMode
	}
	tp := TopicPartition{r.Topic, r.Partition}
	h := c.delivered[tp][r.Offset]
	if h == nil {
		return fmt.Errorf("%w: %s[%d] offset %d", ErrNotDelivered, tp.Topic, tp.Partition, r.Offset)
	}
	if t == AckRenew {
		h.renewed = true
	} else {
		delete(c.delivered[tp], r.Offset)
		if len(c.delivered[tp]) == 0 {
			delete(c.delivered, tp)
		}
	}
	c.addPendingLocked(h.leader, tp, r.Offset, t)
	return nil
}

// ackDeliveredLocked acknowledges every delivered record with t (RENEWed ones included).
func (c *ShareConsumer) ackDeliveredLocked(t AckType) {
	for tp, m := range c.delivered {
		for off, h := range m {
			c.addPendingLocked(h.leader, tp, off, t)
		}
	}
	c.delivered = map[TopicPartition]map[int64]*heldRec{}
}

func (c *ShareConsumer) addPendingLocked(leader int32, tp TopicPartition, off int64, t AckType) {
	byTP := c.pending[leader]
	if byTP == nil {
		byTP = map[TopicPartition]map[int64]AckType{}
		c.pending[leader] = byTP
	}
	m := byTP[tp]
	if m == nil {
		m = map[int64]AckType{}
		byTP[tp] = m
	}
	m[off] = t
}

// takeLocked removes and returns leader's pending acks of the partitions keep accepts.
func (c *ShareConsumer) takeLocked(leader int32, keep func(TopicPartition, map[int64]AckType) bool) map[TopicPartition]map[int64]AckType {
	byTP := c.pending[leader]
	var out map[TopicPartition]map[int64]AckType
	for tp, m := range byTP {
		if keep != nil && !keep(tp, m) {
			continue
		}
		if out == nil {
			out = map[TopicPartition]map[int64]AckType{}
		}
		out[tp] = m
		delete(byTP, tp)
	}
	if len(byTP) == 0 {
		delete(c.pending, leader)
	}
	return out
}

// requeue puts acks that were not applied back, unless newer ones for the same offsets
// were recorded meanwhile.
func (c *ShareConsumer) requeue(leader int32, acks map[TopicPartition]map[int64]AckType) {
	if len(acks) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, m := range acks {
		for off, t := range m {
			if _, newer := c.pending[leader][tp][off]; !newer {
				c.addPendingLocked(leader, tp, off, t)
			}
		}
	}
}

func hasType(m map[int64]AckType, t AckType) bool {
	for _, x := range m {
		if x == t {
			return true
		}
	}
	return false
}

// ackDone reports the outcome of sent acks to OnAcknowledged: per partition the error in
// errs, or all (when not nil). It returns the per-partition results.
func (c *ShareConsumer) ackDone(_ int32, acks map[TopicPartition]map[int64]AckType, errs map[TopicPartition]error, all error) map[TopicPartition]error {
	if len(acks) == 0 {
		return nil
	}
	out := make(map[TopicPartition]error, len(acks))
	results := make([]AckResult, 0, len(acks))
	for _, tp := range sortedSet(acks) {
		err := all
		if err == nil {
			err = errs[tp]
		}
		out[tp] = err
		offs := make([]int64, 0, len(acks[tp]))
		for o := range acks[tp] {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		results = append(results, AckResult{Partition: tp, Offsets: offs, Err: err})
	}
	if cb := c.cfg.onAcknowledged; cb != nil {
		c.cbMu.Lock()
		cb(results)
		c.cbMu.Unlock()
	}
	return out
}

// sendSideAcks sends, as ShareAcknowledge, the pending acks a fetch cannot carry: those
// with RENEW, and those of partitions this member no longer fetches from that leader.
func (c *ShareConsumer) sendSideAcks(ctx context.Context) error {
	c.mu.Lock()
	var leaders []int32
	for l, byTP := range c.pending {
		for tp, m := range byTP {
			if hasType(m, AckRenew) || !c.assigned[tp] || c.meta.leader(tp) != l {
				leaders = append(leaders, l)
				break
			}
		}
	}
	c.mu.Unlock()
	for _, l := range leaders {
		if _, err := c.acknowledge(ctx, l, false); err != nil {
			return err
		}
	}
	return nil
}

// acknowledge sends every pending ack of leader in one ShareAcknowledge (closing: with
// epoch -1, which ends the session and releases whatever the member still holds there).
// It returns the per-partition outcome; the error is for ctx and session acquisition only.
func (c *ShareConsumer) acknowledge(ctx context.Context, leader int32, closing bool) (map[TopicPartition]error, error) {
	s, err := c.acquire(ctx, leader)
	if err != nil {
		return nil, err
	}
	defer s.release()
	c.mu.Lock()
	acks := c.takeLocked(leader, nil)
	c.mu.Unlock()
	return c.acknowledgeHeld(ctx, s, leader, acks, closing)
}

// acknowledgeHeld sends acks on s (held), opening the session first when it has none.
func (c *ShareConsumer) acknowledgeHeld(ctx context.Context, s *shareSession, leader int32, acks map[TopicPartition]map[int64]AckType, closing bool) (map[TopicPartition]error, error) {
	if len(acks) == 0 && (!closing || s.epoch == 0) {
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		if s.epoch == 0 {
			if err := c.openSession(ctx, s, leader); err != nil {
				if ctx.Err() != nil {
					c.requeue(leader, acks)
					return nil, ctx.Err()
				}
				return c.ackDone(leader, acks, nil, err), nil
			}
		}
		c.mu.Lock()
		ids := c.topicIDsLocked()
		c.mu.Unlock()
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.memberID)
		req.ShareSessionEpoch = s.epoch
		if closing {
			req.ShareSessionEpoch = -1
		}
		for _, tp := range sortedSet(acks) {
			id, ok := ids[tp.Topic]
			if !ok {
				continue
			}
			var rt *kmsg.ShareAcknowledgeRequestTopic
			for i := range req.Topics {
				if req.Topics[i].TopicID == id {
					rt = &req.Topics[i]
				}
			}
			if rt == nil {
				req.Topics = append(req.Topics, kmsg.NewShareAcknowledgeRequestTopic())
				rt = &req.Topics[len(req.Topics)-1]
				rt.TopicID = id
			}
			rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
			rp.Partition = tp.Partition
			for _, b := range ackBatches(acks[tp]) {
				kb := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
				kb.FirstOffset, kb.LastOffset, kb.AcknowledgeTypes = b.FirstOffset, b.LastOffset, wireTypes(b.Types)
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kb)
			}
			rt.Partitions = append(rt.Partitions, rp)
			if hasType(acks[tp], AckRenew) {
				req.IsRenewAck = true
			}
		}
		if req.IsRenewAck {
			if v, err := c.shareAckVersion(ctx, leader); err == nil && v < 2 {
				return c.ackDone(leader, acks, nil, fmt.Errorf("kgoext: RENEW needs ShareAcknowledge v2: %w", kerr.UnsupportedVersion)), nil
			}
		}
		resp, err := c.cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			s.reset()
			if ctx.Err() != nil {
				return c.ackDone(leader, acks, nil, err), ctx.Err()
			}
			return c.ackDone(leader, acks, nil, fmt.Errorf("%w: %w", ErrShareSessionLost, err)), nil
		}
		r := resp.(*kmsg.ShareAcknowledgeResponse)
		if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
			if (errors.Is(err, kerr.ShareSessionNotFound) || errors.Is(err, kerr.InvalidShareSessionEpoch)) && attempt == 0 && !closing {
				s.reset() // nothing was applied: open a new session and send again
				continue
			}
			s.reset()
			return c.ackDone(leader, acks, nil, fmt.Errorf("kgoext: ShareAcknowledge to broker %d: %w", leader, err)), nil
		}
		if closing {
			s.reset()
		} else {
			s.advance()
		}
		names := c.namesSnapshot()
		errs := map[TopicPartition]error{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				errs[TopicPartition{names[t.TopicID], p.Partition}] = kerrWithMessage(p.ErrorCode, p.ErrorMessage)
			}
		}
		return c.ackDone(leader, acks, errs, nil), nil
	}
}

// shareAckVersion is the highest ShareAcknowledge version leader serves, asked once per
// broker with ApiVersions: kgo would send RENEW to a broker below v2 as v1, which has no
// IsRenewAck field, and the renewal would silently become nothing.
func (c *ShareConsumer) shareAckVersion(ctx context.Context, leader int32) (int16, error) {
	c.mu.Lock()
	v, ok := c.ackVersion[leader]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	// v3+ needs a software name and version (INVALID_REQUEST otherwise).
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kgoext", "1"
	resp, err := c.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return 0, fmt.Errorf("kgoext: ApiVersions from broker %d: %w", leader, err)
	}
	v = -1
	for _, k := range r.ApiKeys {
		if k.ApiKey == kmsg.ShareAcknowledge.Int16() {
			v = k.MaxVersion
		}
	}
	c.mu.Lock()
	c.ackVersion[leader] = v
	c.mu.Unlock()
	return v, nil
}

// openSession opens an empty share session on leader (s held): acks need epoch > 0.
func (c *ShareConsumer) openSession(ctx context.Context, s *shareSession, leader int32) error {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.memberID)
	req.ShareSessionEpoch = 0
	resp, err := c.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrShareSessionLost, err)
	}
	r := resp.(*kmsg.ShareFetchResponse)
	if err := kerrWithMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("kgoext: opening a share session on broker %d: %w", leader, err)
	}
	s.parts = map[TopicPartition]bool{}
	s.epoch = 1
	return nil
}

// CommitSync sends every acknowledgement not sent yet (in implicit mode, first accepting
// every delivered record) in ShareAcknowledge requests, one per leader, and waits for the
// answers. It returns the outcome per partition acknowledged, and an error joining the
// failed ones (nil when all succeeded).
func (c *ShareConsumer) CommitSync(ctx context.Context) (map[TopicPartition]error, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	}
	taken := map[int32]map[TopicPartition]map[int64]AckType{}
	for l := range c.pending {
		taken[l] = c.takeLocked(l, nil)
	}
	c.mu.Unlock()
	return c.commit(ctx, taken)
}

// CommitAsync is CommitSync in the background: the acknowledgements are taken now and
// sent by another goroutine; done (may be nil) gets CommitSync's results. OnAcknowledged
// is called as well.
func (c *ShareConsumer) CommitAsync(done func(map[TopicPartition]error, error)) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if done != nil {
			done(nil, ErrClosed)
		}
		return
	}
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	}
	taken := map[int32]map[TopicPartition]map[int64]AckType{}
	for l := range c.pending {
		taken[l] = c.takeLocked(l, nil)
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		res, err := c.commit(c.ctx, taken)
		if done != nil {
			done(res, err)
		}
	}()
}

func (c *ShareConsumer) commit(ctx context.Context, taken map[int32]map[TopicPartition]map[int64]AckType) (map[TopicPartition]error, error) {
	var mu sync.Mutex
	out := map[TopicPartition]error{}
	var ctxErr error
	var wg sync.WaitGroup
	for l, acks := range taken {
		if len(acks) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.acquire(ctx, l)
			var res map[TopicPartition]error
			if err == nil {
				res, err = c.acknowledgeHeld(ctx, s, l, acks, false)
				s.release()
			} else {
				c.requeue(l, acks)
			}
			mu.Lock()
			defer mu.Unlock()
			for tp, e := range res {
				out[tp] = e
			}
			if err != nil {
				ctxErr = err
			}
		}()
	}
	wg.Wait()
	if ctxErr != nil {
		return out, ctxErr
	}
	var errs []error
	for _, tp := range sortedSet(out) {
		if out[tp] != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, out[tp]))
		}
	}
	return out, errors.Join(errs...)
}

// ReleaseAcknowledgements gives back records whose acknowledgements
// AcknowledgementsForTransaction drained but that will not be staged (the caller abandons
// the transaction before SendShareAcksToTransaction): every offset in acks is queued as
// RELEASE and sent like any other acknowledgement (piggybacked on the next poll, or by
// CommitSync or Close), so the records are delivered again at once rather than when their
// acquisition locks expire. Gap offsets (type 0) hold no record and are skipped. Records
// whose acknowledgements were staged must not be released: abort the transaction instead.
func (c *ShareConsumer) ReleaseAcknowledgements(acks TxnAcks) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	for tp, bs := range acks {
		leader := c.meta.leader(tp)
		if leader < 0 {
			return fmt.Errorf("kgoext: no leader known for %s[%d]: its records are released when their locks expire", tp.Topic, tp.Partition)
		}
		for _, b := range bs {
			for off := b.FirstOffset; off <= b.LastOffset; off++ {
				if b.typeAt(off) != AckGap {
					c.addPendingLocked(leader, tp, off, AckRelease)
				}
			}
		}
	}
	return nil
}

// AcknowledgementsForTransaction takes every acknowledgement not sent yet (in implicit
// mode, first accepting every delivered record) out of the normal path, for
// SendShareAcksToTransaction: they will not be sent by Poll, CommitSync or Close.
// Gaps come along as AckGap. When a RELEASE or RENEW is among them it returns
// ErrAckNotTransactional and takes nothing. Unacknowledged records stay in flight; a
// second call right after returns no acknowledgements.
func (c *ShareConsumer) AcknowledgementsForTransaction() (TxnAcks, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if !c.cfg.explicit {
		c.ackDeliveredLocked(AckAccept)
	}
	merged := map[TopicPartition]map[int64]AckType{}
	for _, byTP := range c.pending {
		for tp, m := range byTP {
			for off, t := range m {
				if t == AckRelease || t == AckRenew {
					return nil, fmt.Errorf("%w: %s at %s[%d] offset %d", ErrAckNotTransactional, t, tp.Topic, tp.Partition, off)
				}
				if merged[tp] == nil {
					merged[tp] = map[int64]AckType{}
				}
				merged[tp][off] = t
			}
		}
	}
	c.pending = map[int32]map[TopicPartition]map[int64]AckType{}
	out := make(TxnAcks, len(merged))
	for tp, m := range merged {
		out[tp] = ackBatches(m)
	}
	return out, nil
}
