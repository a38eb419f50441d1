package twopc

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit versions: v5 tells the group coordinator the producer speaks
// transactions v2 (KIP-890: no AddOffsetsToTxn first); v6 names topics by id.
const (
	tv1MaxTxnOffsetCommit = 4
	tv2MaxTxnOffsetCommit = 5
)

// GroupMetadata identifies the consumer group member whose offsets go into the
// transaction (KIP-447): the group coordinator refuses them when the member's generation
// is no longer current, which fences a consumer that lost its partitions. With kgo,
// MemberID and Generation are (*kgo.Client).GroupMetadata().
type GroupMetadata struct {
	Group      string
	MemberID   string // "" when unknown (no member check)
	Generation int32  // -1 when unknown (no generation check)
	// InstanceID is the static member id (kgo.InstanceID), "" for a dynamic member.
	InstanceID string
}

// SendOffsetsToTransaction commits consumer group offsets (the next offset to consume per
// partition, as (*kgo.Client).UncommittedOffsets returns them) as part of the open
// transaction: they become the group's committed offsets if and only if the transaction
// commits, prepared or not. Under transactions v1 it first adds the group to the
// transaction (AddOffsetsToTxn).
//
// Errors: ErrTransactionAbortable wrapping the group's refusal (UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID: this member lost its partitions), ErrProducerFatal
// (fenced), ErrNoTransaction or ErrTransactionPrepared, or a ctx or transport error (the
// call may be repeated).
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, g GroupMetadata) error {
	if g.Group == "" {
		return errors.New("twopc: SendOffsetsToTransaction without a group")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.txn.openErr(); err != nil {
		return err
	}
	if !p.txn.v2 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID = p.txnID
		req.ProducerID, req.ProducerEpoch = p.id.id, p.id.epoch
		req.Group = g.Group
		_, err := p.coord.request(ctx, req, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode })
		p.txn.started = true // whatever the answer, the coordinator may have the group now
		if err != nil {
			return p.offsetsFailed(fmt.Errorf("twopc: AddOffsetsToTxn %q group %q: %w", p.txnID, g.Group, err))
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	// Under v2 the group coordinator adds its partition to the transaction.
	p.txn.started = true
	return p.offsetsFailed(p.txnOffsetCommit(ctx, offsets, g))
}

// offsetsFailed classifies an error of staging offsets: a broker's answer dooms the
// transaction (or the producer, when fenced); ctx and transport errors are returned as
// they are.
func (p *Producer) offsetsFailed(err error) error {
	if err == nil || !isKafkaErr(err) {
		return err
	}
	return p.txn.fail(err)
}

// txnOffsetCommit writes offsets to the group coordinator, staged in the transaction. A
// partition answered with a coordinator error sends the whole request again (staging the
// same offsets twice is harmless).
func (p *Producer) txnOffsetCommit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, g GroupMetadata) error {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = p.txnID
	req.Group = g.Group
	req.ProducerID, req.ProducerEpoch = p.id.id, p.id.epoch
	req.Generation, req.MemberID = g.Generation, g.MemberID
	if g.InstanceID != "" {
		req.InstanceID = kmsg.StringPtr(g.InstanceID)
	}
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = t
		parts := make([]int32, 0, len(offsets[t]))
		for part := range offsets[t] {
			parts = append(parts, part)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, part := range parts {
			o := offsets[t][part]
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = part, o.Offset, o.Epoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	max := int16(tv2MaxTxnOffsetCommit)
	if !p.txn.v2 {
		max = tv1MaxTxnOffsetCommit
	}
	group := p.newCoordinator(groupCoordinator, g.Group)
	resp, err := group.request(ctx, &capped{Request: req, max: max}, func(r kmsg.Response) int16 {
		for _, rt := range r.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && (retriableCoordinatorErr(err) || errors.Is(err, kerr.ConcurrentTransactions)) {
					return rp.ErrorCode
				}
			}
		}
		return 0
	})
	if err != nil {
		return fmt.Errorf("twopc: TxnOffsetCommit %q group %q: %w", p.txnID, g.Group, err)
	}
	var errs []error
	for _, rt := range resp.(*kmsg.TxnOffsetCommitResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", rt.Topic, rp.Partition, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("twopc: TxnOffsetCommit %q group %q: %w", p.txnID, g.Group, errors.Join(errs...))
	}
	return nil
}
