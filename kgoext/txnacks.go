package kgoext

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ErrCommitFailed means share acknowledgements could not be staged in the transaction
// (KIP-1289): the member was fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, ...) or a
// partition refused its offsets (INVALID_RECORD_STATE: not acquired by this member, lock
// expired, ...). Some partitions may be staged and others not, so the transaction must
// not commit: abort it (EndTransaction with kgo.TryAbort), which makes the staged records
// available again. The kerr error is wrapped as well.
var ErrCommitFailed = errors.New("kgoext: share acknowledgements not staged; abort the transaction")

// ProducerIdentity is what TxnShareAcknowledge carries of a transactional producer: its
// transactional id and its current producer id and epoch. SendShareAcksToTransaction reads
// it from a transactional *kgo.Client; a producer that manages its identity itself (a
// KIP-939 two-phase-commit producer, for one) passes it to SendShareAcks.
type ProducerIdentity struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
}

// Versions is kversion.Stable() plus TxnShareAcknowledge v0 at its default key: a *kgo.Client
// sends only the keys of its kgo.MaxVersions, so the client that sends share
// acknowledgements to transactions is built with kgo.MaxVersions(kgoext.Versions()).
func Versions() *kversion.Versions {
	return wire.TxnShareAcknowledgeVersions(wire.TxnShareAcknowledgeDefaultKey)
}

// shareAckRounds bounds the rounds of SendShareAcks that chase moved leaders.
const shareAckRounds = 5

// shareAckBackoff is the pause before resending after a busy coordinator or moved leader.
const shareAckBackoff = 100 * time.Millisecond

// SendShareAcksToTransaction stages acks in the transaction open on txn, a transactional
// *kgo.Client built with TransactionalHooks and kgo.MaxVersions(Versions()) (TransactionalOpts
// gives both). The producer id and epoch are read fresh from txn (kgo stores the epoch
// that KIP-890's EndTxn v5 bumped), so call it inside each transaction, after
// BeginTransaction. md is the share consumer's GroupMetadata, read when the records were
// acknowledged. End the transaction with EndTransaction (not txn.EndTransaction): a
// transaction holding only acknowledgements would otherwise never commit.
//
// Errors are SendShareAcks'; after an ErrCommitFailed, EndTransaction refuses to commit.
func SendShareAcksToTransaction(ctx context.Context, txn *kgo.Client, acks TxnAcks, md ShareGroupMetadata) error {
	h := hooksOf(txn)
	if h == nil {
		return ErrNoTransactionalHooks
	}
	id, ok := txnIDOf(txn)
	if !ok {
		return errors.New("kgoext: SendShareAcksToTransaction needs a client built with kgo.TransactionalID")
	}
	if acks.Len() == 0 {
		return nil
	}
	if err := sendsTxnShareAck(txn); err != nil {
		return err
	}
	pid, epoch, err := txn.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("kgoext: loading the producer id: %w", err)
	}
	registered, err := sendShareAcks(ctx, txn, ProducerIdentity{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch}, acks, md)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acksSent = h.acksSent || registered
	if errors.Is(err, ErrCommitFailed) && h.ackErr == nil {
		h.ackErr = err
	}
	return err
}

func txnIDOf(cl *kgo.Client) (string, bool) {
	vs := cl.OptValues(kgo.TransactionalID)
	if len(vs) != 2 {
		return "", false
	}
	id, _ := vs[0].(string)
	set, _ := vs[1].(bool)
	return id, set && id != ""
}

// SendShareAcks sends the TxnShareAcknowledge requests that stage acks in producer's
// transaction (KIP-1289): one request to the leader of each group of partitions, over
// transport (any *kgo.Client whose MaxVersions include TxnShareAcknowledge: Versions()).
// When the transaction commits, ACCEPTed records become ACKNOWLEDGED and REJECTed ones and
// gaps ARCHIVED; when it aborts they are delivered again. It is the form for producers
// that are not a transactional *kgo.Client; ending a transaction that holds only
// acknowledgements is then the caller's job (an EndTxn, as EndTransaction sends).
//
// It returns once every partition was staged durably. It resends while the transaction
// coordinator is busy or unreachable (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS: a top-level error means
// nothing was staged) and sends again to the new leader of partitions that answer
// NOT_LEADER_OR_FOLLOWER. Errors: ErrCommitFailed (abort the transaction; wraps the kerr
// error of each partition or of the member), a fencing of the producer itself
// (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, authorization:
// the kerr error wrapped, the producer is done), ErrAckNotTransactional (a RELEASE or RENEW:
// nothing sent), or a ctx or transport error (the call may be repeated; offsets an earlier
// attempt staged then fail with INVALID_RECORD_STATE, so the transaction aborts, which is
// safe). Empty acks send nothing.
func SendShareAcks(ctx context.Context, transport *kgo.Client, producer ProducerIdentity, acks TxnAcks, md ShareGroupMetadata) error {
	_, err := sendShareAcks(ctx, transport, producer, acks, md)
	return err
}

// sendShareAcks is SendShareAcks, also reporting whether a broker may have added share-state
// partitions to the transaction (it answered per partition, or did not answer): only then
// does the transaction exist at the coordinator and need an EndTxn.
func sendShareAcks(ctx context.Context, transport *kgo.Client, producer ProducerIdentity, acks TxnAcks, md ShareGroupMetadata) (registered bool, err error) {
	if md.GroupID == "" || md.MemberID == "" {
		return false, errors.New("kgoext: SendShareAcks needs the group id and member id")
	}
	if producer.TransactionalID == "" {
		return false, errors.New("kgoext: SendShareAcks needs the transactional id")
	}
	for tp, bs := range acks {
		if err := validateTxnBatches(tp, bs); err != nil {
			return false, err
		}
	}
	if acks.Len() == 0 {
		return false, nil
	}
	if err := sendsTxnShareAck(transport); err != nil {
		return false, err
	}
	meta := newMetaCache(transport)
	left := make(TxnAcks, len(acks))
	var topics []string
	for tp, bs := range acks {
		if len(bs) > 0 {
			left[tp] = bs
			topics = append(topics, tp.Topic)
		}
	}
	fresh := false
	for round := 0; ; round++ {
		if round == shareAckRounds {
			return registered, shareAckFailed(fmt.Errorf("kgoext: partitions kept moving leaders: %w", kerr.NotLeaderForPartition))
		}
		byLeader, err := shareAckLeaders(ctx, meta, topics, left, fresh)
		if err != nil {
			return registered, err
		}
		var (
			mu     sync.Mutex
			wg     sync.WaitGroup
			retry  = TxnAcks{}
			failed []error
			other  error
		)
		for leader, part := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := txnShareAck(ctx, transport, leader, producer, md, part)
				mu.Lock()
				defer mu.Unlock()
				registered = registered || res.registered
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
		if len(failed) > 0 {
			return registered, shareAckFailed(errors.Join(failed...))
		}
		if other != nil {
			return registered, other
		}
		if len(retry) == 0 {
			return registered, nil
		}
		left, fresh = retry, true // leaders moved: ask again, bypassing kgo's cache
		if err := sleepCtx(ctx, shareAckBackoff); err != nil {
			return registered, err
		}
	}
}

// sendsTxnShareAck checks that cl's MaxVersions let it send TxnShareAcknowledge: kgo
// refuses a key its MaxVersions lack.
func sendsTxnShareAck(cl *kgo.Client) error {
	if v, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions); v != nil {
		if _, ok := v.LookupMaxKeyVersion(wire.TxnShareAcknowledgeDefaultKey); !ok {
			return fmt.Errorf("kgoext: the client does not send TxnShareAcknowledge (key %d): build it with kgo.MaxVersions(kgoext.Versions()): %w",
				wire.TxnShareAcknowledgeDefaultKey, kerr.UnsupportedVersion)
		}
	}
	return nil
}

// isFatalTxnErr reports errors that end the producer, not just the transaction.
func isFatalTxnErr(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// shareAckFailed wraps err in ErrCommitFailed (fencing of the producer itself stays as is).
func shareAckFailed(err error) error {
	if isFatalTxnErr(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCommitFailed, err)
}

// shareAckPart is the part of a TxnShareAcknowledge for one leader.
type shareAckPart struct {
	tps  []TopicPartition
	ids  map[string][16]byte
	acks TxnAcks
}

// shareAckLeaders groups acks by the partitions' leaders, resolving topic ids.
func shareAckLeaders(ctx context.Context, meta *metaCache, topics []string, acks TxnAcks, fresh bool) (map[int32]*shareAckPart, error) {
	if err := meta.refresh(ctx, topics, fresh); err != nil {
		return nil, err
	}
	out := map[int32]*shareAckPart{}
	for _, tp := range sortedSet(acks) {
		tm, ok := meta.topic(tp.Topic)
		if !ok {
			return nil, fmt.Errorf("kgoext: %s: %w", tp.Topic, kerr.UnknownTopicOrPartition)
		}
		if tm.id == [16]byte{} {
			return nil, fmt.Errorf("kgoext: no topic id for %s (Metadata v10+ needed): %w", tp.Topic, kerr.UnsupportedVersion)
		}
		if tp.Partition < 0 || int(tp.Partition) >= len(tm.leaders) {
			return nil, fmt.Errorf("kgoext: %s[%d]: %w", tp.Topic, tp.Partition, kerr.UnknownTopicOrPartition)
		}
		leader := tm.leaders[tp.Partition]
		for try := 0; leader < 0 && try < 3; try++ {
			if err := sleepCtx(ctx, shareAckBackoff); err != nil {
				return nil, err
			}
			if err := meta.refresh(ctx, []string{tp.Topic}, true); err != nil {
				return nil, err
			}
			leader = meta.leader(tp)
		}
		if leader < 0 {
			return nil, fmt.Errorf("kgoext: %s[%d] has no leader: %w", tp.Topic, tp.Partition, kerr.LeaderNotAvailable)
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

// txnShareAckResult is one leader's answer: registered when the broker may have added the
// share-state partitions to the transaction (a per-partition answer, or none at all); retry
// holds partitions to send again (leader moved); failed the partition or member errors
// (abortable); err anything else (fatal, ctx, transport).
type txnShareAckResult struct {
	registered bool
	retry      map[TopicPartition]bool
	failed     []error
	err        error
}

// txnShareAck sends one TxnShareAcknowledge to leader, resending while the coordinator is
// busy: a top-level error means the broker staged nothing.
func txnShareAck(ctx context.Context, transport *kgo.Client, leader int32, producer ProducerIdentity, md ShareGroupMetadata, part *shareAckPart) txnShareAckResult {
	req := &wire.TxnShareAcknowledgeRequest{
		APIKey:          wire.TxnShareAcknowledgeDefaultKey,
		TransactionalID: kmsg.StringPtr(producer.TransactionalID),
		GroupID:         md.GroupID,
		ProducerID:      producer.ProducerID,
		ProducerEpoch:   producer.ProducerEpoch,
		MemberID:        md.MemberID,
		MemberEpoch:     md.MemberEpoch,
	}
	byID := map[[16]byte]string{}
	for _, tp := range part.tps {
		tid := part.ids[tp.Topic]
		if n := len(req.Topics); n == 0 || req.Topics[n-1].TopicID != tid {
			req.Topics = append(req.Topics, wire.TxnShareAcknowledgeRequestTopic{TopicID: tid})
		}
		rt := &req.Topics[len(req.Topics)-1]
		rp := wire.TxnShareAcknowledgeRequestTopicPartition{PartitionIndex: tp.Partition}
		for _, b := range part.acks[tp] {
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, wire.TxnShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
				FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, AcknowledgeTypes: wireTypes(b.Types),
			})
		}
		rt.Partitions = append(rt.Partitions, rp)
		byID[tid] = tp.Topic
	}
	for {
		resp, err := transport.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			// The request may have reached the broker: assume the partitions joined.
			return txnShareAckResult{registered: true, err: fmt.Errorf("kgoext: TxnShareAcknowledge to broker %d: %w", leader, err)}
		}
		r := resp.(*wire.TxnShareAcknowledgeResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			err = fmt.Errorf("kgoext: TxnShareAcknowledge to broker %d: %w", leader, err)
			switch {
			case isFatalTxnErr(err):
				return txnShareAckResult{err: err}
			case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.CoordinatorLoadInProgress),
				errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable),
				errors.Is(err, kerr.NotEnoughReplicas):
				// The broker registers every state partition in the transaction before it
				// stages anything, so a top-level error left nothing staged and the same
				// request may go again. NOT_ENOUGH_REPLICAS is how the registration
				// reports a transaction coordinator it could not reach.
				if werr := sleepCtx(ctx, shareAckBackoff); werr != nil {
					return txnShareAckResult{err: fmt.Errorf("%w (last error: %w)", werr, err)}
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
			for _, rp := range rt.Partitions {
				tp := TopicPartition{byID[rt.TopicID], rp.PartitionIndex}
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
