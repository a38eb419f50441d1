package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/exactq/exactq/txnshare"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrCommitFailed means share acknowledgements could not be staged in the transaction
// (KIP-1289): the member was fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, ...) or a
// partition refused its offsets (INVALID_RECORD_STATE: not acquired by this member, lock
// expired, ...). Some partitions may be staged and others not, so the transaction cannot
// commit: the error also matches ErrTransactionAbortable; call AbortTransaction, which
// makes the staged records available again. The kerr error is wrapped as well.
var ErrCommitFailed = errors.New("client: share acknowledgements not staged; abort the transaction")

// SendShareAcksToTransaction stages share acknowledgements in the current transaction
// (KIP-1289): when the transaction commits, ACCEPTed records become ACKNOWLEDGED and
// REJECTed ones and gaps ARCHIVED; when it aborts they are delivered again. meta is the
// share consumer's ShareConsumer.GroupMetadata, read when the records were acknowledged.
//
// One TxnShareAcknowledge goes to the leader of each acknowledged partition (one request
// per leader). It returns once every partition was staged durably. Errors:
// ErrCommitFailed (with ErrTransactionAbortable: abort), ErrProducerFatal (fenced producer),
// ErrAckNotTransactional (a RELEASE or RENEW: nothing sent), or a ctx or transport error
// (the call may be repeated; offsets an earlier attempt staged then fail with
// INVALID_RECORD_STATE, so the transaction aborts, which is safe). A transaction that holds
// share acknowledgements ends with EndTxn even when it produced nothing (consume-only).
// Empty acks do nothing.
func (p *Producer) SendShareAcksToTransaction(ctx context.Context, acks TxnAcks, meta ShareGroupMetadata) error {
	t := p.txn
	if t == nil {
		return ErrNotTransactional
	}
	if meta.GroupID == "" || meta.MemberID == "" {
		return errors.New("client: SendShareAcksToTransaction needs the group id and member id")
	}
	for tp, bs := range acks {
		if err := validateTxnBatches(tp, bs); err != nil {
			return err
		}
	}
	t.opMu.Lock()
	defer t.opMu.Unlock()
	p.mu.Lock()
	if err := t.err(); err != nil {
		p.mu.Unlock()
		return err
	}
	if err := t.notOpenErr(); err != nil {
		p.mu.Unlock()
		return err
	}
	id := p.ids.cur
	p.mu.Unlock()
	if acks.Len() == 0 {
		return nil
	}

	left := make(TxnAcks, len(acks))
	for tp, bs := range acks {
		if len(bs) > 0 {
			left[tp] = bs
		}
	}
	for round := 0; ; round++ {
		if round == shareAckRounds {
			return p.shareAckFailed(fmt.Errorf("client: partitions kept moving leaders: %w", kerr.NotLeaderForPartition))
		}
		byLeader, err := p.shareAckLeaders(ctx, left)
		if err != nil {
			return err
		}
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			retry   = TxnAcks{}
			failed  []error
			other   error
			started bool
		)
		for leader, part := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := p.txnShareAck(ctx, leader, id, meta, part)
				mu.Lock()
				defer mu.Unlock()
				started = started || res.registered
				for tp := range res.retry {
					retry[tp] = left[tp]
				}
				failed = append(failed, res.failed...)
				if res.err != nil && other == nil {
					other = res.err
				}
			}()
		}
		wg.Wait()
		if started {
			p.mu.Lock()
			t.started = true // the __share_group_state partitions are in the transaction
			p.mu.Unlock()
		}
		if len(failed) > 0 {
			return p.shareAckFailed(errors.Join(failed...))
		}
		if other != nil {
			if isFatalTxnErr(other) {
				return p.txnFailed(other)
			}
			return other
		}
		if len(retry) == 0 {
			return nil
		}
		left = retry
		p.cl.mu.Lock()
		for tp := range left {
			delete(p.cl.topics, tp.Topic) // leaders moved: look again
		}
		p.cl.mu.Unlock()
		if err := sleepCtx(ctx, p.cl.cfg.retryBackoff); err != nil {
			return err
		}
	}
}

// shareAckRounds bounds the rounds of SendShareAcksToTransaction that chase moved leaders.
const shareAckRounds = 5

// shareAckFailed dooms the transaction with ErrCommitFailed wrapping err (fencing of the
// producer itself stays fatal).
func (p *Producer) shareAckFailed(err error) error {
	if isFatalTxnErr(err) {
		return p.txnFailed(err)
	}
	e := fmt.Errorf("%w: %w: %w", ErrCommitFailed, ErrTransactionAbortable, err)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.txn.fatal != nil {
		return p.txn.fatal
	}
	if p.txn.abortable == nil {
		p.txn.abortable = e
	}
	return e
}

// shareAckPart is the part of a TxnShareAcknowledge for one leader.
type shareAckPart struct {
	tps  []TopicPartition
	ids  map[string][16]byte
	acks TxnAcks
}

// shareAckLeaders groups acks by the partitions' leaders, resolving topic ids.
func (p *Producer) shareAckLeaders(ctx context.Context, acks TxnAcks) (map[int32]*shareAckPart, error) {
	out := map[int32]*shareAckPart{}
	for _, tp := range sortedSet(acks) {
		tm, err := p.topicMeta(ctx, tp.Topic)
		if err != nil {
			return nil, err
		}
		if tm.id == [16]byte{} {
			return nil, fmt.Errorf("client: no topic id for %s (Metadata v10+ needed): %w", tp.Topic, kerr.UnsupportedVersion)
		}
		if tp.Partition < 0 || int(tp.Partition) >= len(tm.partitions) {
			return nil, fmt.Errorf("client: %s[%d]: %w", tp.Topic, tp.Partition, kerr.UnknownTopicOrPartition)
		}
		leader := p.cl.leader(tp.Topic, tp.Partition)
		for try := 0; leader < 0 && try < 3; try++ {
			if err := sleepCtx(ctx, p.cl.cfg.retryBackoff); err != nil {
				return nil, err
			}
			if _, err := p.cl.refreshMetadata(ctx, []string{tp.Topic}); err != nil {
				return nil, err
			}
			leader = p.cl.leader(tp.Topic, tp.Partition)
		}
		if leader < 0 {
			return nil, fmt.Errorf("client: %s[%d] has no leader: %w", tp.Topic, tp.Partition, kerr.LeaderNotAvailable)
		}
		part := out[leader]
		if part == nil {
			part = &shareAckPart{ids: map[string][16]byte{}, acks: TxnAcks{}}
			out[leader] = part
		}
		part.tps = append(part.tps, tp)
		part.ids[tp.Topic] = tm.id
		part.acks[tp] = acks[tp]
	}
	return out, nil
}

// txnShareAckResult is one leader's answer: registered when the broker got as far as
// adding the state partitions to the transaction (a per-partition answer, or no answer at
// all); retry holds partitions to send again (leader moved); failed the partition or
// member errors (abortable); err anything else (fatal, ctx, transport).
type txnShareAckResult struct {
	registered bool
	retry      map[TopicPartition]bool
	failed     []error
	err        error
}

// txnShareAck sends one TxnShareAcknowledge to leader, resending while the coordinator is
// busy (CONCURRENT_TRANSACTIONS, a coordinator moving or loading): a top-level error means
// the broker staged nothing.
func (p *Producer) txnShareAck(ctx context.Context, leader int32, id producerID, meta ShareGroupMetadata, part *shareAckPart) txnShareAckResult {
	key := p.cfg.TxnShareAckAPIKey
	if key == 0 {
		key = txnshare.DefaultAPIKey
	}
	req := &txnshare.Request{
		APIKey:          key,
		TransactionalID: kmsg.StringPtr(p.txn.id),
		GroupID:         meta.GroupID,
		ProducerID:      id.id,
		ProducerEpoch:   id.epoch,
		MemberID:        meta.MemberID,
		MemberEpoch:     meta.MemberEpoch,
	}
	byID := map[[16]byte]TopicPartition{}
	for _, tp := range part.tps {
		tid := part.ids[tp.Topic]
		if n := len(req.Topics); n == 0 || req.Topics[n-1].TopicID != tid {
			req.Topics = append(req.Topics, txnshare.Topic{TopicID: tid})
		}
		rt := &req.Topics[len(req.Topics)-1]
		rp := txnshare.Partition{PartitionIndex: tp.Partition}
		for _, b := range part.acks[tp] {
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, txnshare.Batch{
				FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, AcknowledgeTypes: wireTypes(b.Types),
			})
		}
		rt.Partitions = append(rt.Partitions, rp)
		byID[tid] = TopicPartition{Topic: tp.Topic}
	}
	for {
		resp, err := p.cl.do(ctx, broker(leader), req)
		if err != nil {
			if errors.Is(err, kerr.UnsupportedVersion) {
				return txnShareAckResult{err: fmt.Errorf("client: broker %d does not serve TxnShareAcknowledge (key %d): %w", leader, key, err)}
			}
			// The request may have reached the broker: assume the partitions joined.
			return txnShareAckResult{registered: !errors.Is(err, ErrClosed), err: err}
		}
		r := resp.(*txnshare.Response)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			err = fmt.Errorf("client: TxnShareAcknowledge to broker %d: %w", leader, err)
			switch {
			case isFatalTxnErr(err):
				return txnShareAckResult{err: err}
			case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.CoordinatorLoadInProgress),
				errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable),
				errors.Is(err, kerr.NotEnoughReplicas):
				// A top-level error means the registration failed before anything was
				// staged (the broker registers every state partition first), so sending
				// the same request again is safe. NOT_ENOUGH_REPLICAS is how the
				// registration reports a transaction coordinator it could not reach.
				if werr := sleepCtx(ctx, p.cl.cfg.retryBackoff); werr != nil {
					return txnShareAckResult{err: fmt.Errorf("%w (last error: %v)", werr, err)}
				}
				continue
			default:
				// Member fencing, INVALID_REQUEST, authorization: nothing staged, and the
				// transaction cannot carry these acknowledgements.
				return txnShareAckResult{failed: []error{err}}
			}
		}
		res := txnShareAckResult{registered: true, retry: map[TopicPartition]bool{}}
		answered := map[TopicPartition]bool{}
		for _, rt := range r.Responses {
			name := byID[rt.TopicID].Topic
			for _, rp := range rt.Partitions {
				tp := TopicPartition{name, rp.PartitionIndex}
				answered[tp] = true
				err := kerrWithMessage(rp.ErrorCode, rp.ErrorMessage)
				switch {
				case err == nil:
				case errors.Is(err, kerr.NotLeaderForPartition):
					res.retry[tp] = true // nothing staged there: send to the new leader
				default:
					res.failed = append(res.failed, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
				}
			}
		}
		for _, tp := range part.tps {
			if !answered[tp] {
				res.failed = append(res.failed, fmt.Errorf("%s[%d]: no answer from broker %d: %w", tp.Topic, tp.Partition, leader, kerr.UnknownServerError))
			}
		}
		sort.Slice(res.failed, func(i, j int) bool { return res.failed[i].Error() < res.failed[j].Error() })
		return res
	}
}
