package txn

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

// txnPartitions is one transaction of an AddPartitionsToTxn request, normalised over the
// v0-3 client form and the v4+ batched form.
type txnPartitions struct {
	id         string
	pid        int64
	epoch      int16
	verifyOnly bool
	tps        []TopicPartition // request order
}

// AddPartitionsToTxn serves both forms: v0-3 from clients (one transaction, transaction
// version 0/1) and v4+ from brokers (a batch; VerifyOnly checks without adding; an add is
// transaction version 2). It blocks until added partitions are durable.
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, version int16, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.Version = version
	var txns []txnPartitions
	if version < 4 {
		t := txnPartitions{id: req.TransactionalID, pid: req.ProducerID, epoch: req.ProducerEpoch}
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				t.tps = append(t.tps, TopicPartition{tp.Topic, p})
			}
		}
		txns = append(txns, t)
	} else {
		for _, rt := range req.Transactions {
			t := txnPartitions{id: rt.TransactionalID, pid: rt.ProducerID, epoch: rt.ProducerEpoch, verifyOnly: rt.VerifyOnly}
			for _, tp := range rt.Topics {
				for _, p := range tp.Partitions {
					t.tps = append(t.tps, TopicPartition{tp.Topic, p})
				}
			}
			txns = append(txns, t)
		}
	}
	tv := int16(0)
	if version > 3 {
		tv = 2
	}
	for _, t := range txns {
		codes := c.addTxn(ctx, version, tv, t)
		if version < 4 {
			resp.Topics = topicResultsV3(t.tps, codes)
			continue
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.id
		rt.Topics = topicResultsV4(t.tps, codes)
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}

// addTxn handles one transaction and returns a code per partition (in t.tps order).
func (c *Coordinator) addTxn(ctx context.Context, version, tv int16, t txnPartitions) []int16 {
	all := func(code int16) []int16 {
		code = fencedForVersion(code, version, 2)
		out := make([]int16, len(t.tps))
		for i := range out {
			out[i] = code
		}
		return out
	}
	// Any unknown partition fails the whole transaction's request: the others are
	// OPERATION_NOT_ATTEMPTED (KafkaApis.handleAddPartitionsToTxnRequest).
	missing := false
	codes := make([]int16, len(t.tps))
	for i, tp := range t.tps {
		if !c.b.PartitionExists(tp.Topic, tp.Partition) {
			codes[i] = codeUnknownTopicOrPartition
			missing = true
		}
	}
	if missing {
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = codeOperationNotAttempted
			}
		}
		return codes
	}
	if t.id != "" {
		if code := c.usable(t.id); code != 0 {
			return all(code)
		}
	}
	if t.verifyOnly {
		c.mu.Lock()
		code, per := c.core.verify(t.id, t.pid, t.epoch, t.tps)
		c.mu.Unlock()
		if code != 0 {
			return all(code)
		}
		return per
	}
	c.mu.Lock()
	code, tr := c.core.addPartitions(t.id, t.pid, t.epoch, t.tps, tv, c.nowMs())
	c.mu.Unlock()
	if code == 0 && tr != nil {
		code = c.persist(ctx, tr, false)
	}
	return all(code)
}

// topicResultsV3 groups the codes of tps by topic, in the order the topics come.
func topicResultsV3(tps []TopicPartition, codes []int16) []kmsg.AddPartitionsToTxnResponseTopic {
	var out []kmsg.AddPartitionsToTxnResponseTopic
	for i, tp := range tps {
		j := slices.IndexFunc(out, func(t kmsg.AddPartitionsToTxnResponseTopic) bool { return t.Topic == tp.Topic })
		if j < 0 {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = tp.Topic
			out = append(out, t)
			j = len(out) - 1
		}
		p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, codes[i]
		out[j].Partitions = append(out[j].Partitions, p)
	}
	return out
}

// topicResultsV4 is topicResultsV3 in the v4+ per-transaction form (the same fields under
// other kmsg type names).
func topicResultsV4(tps []TopicPartition, codes []int16) []kmsg.AddPartitionsToTxnResponseTransactionTopic {
	var out []kmsg.AddPartitionsToTxnResponseTransactionTopic
	for _, t := range topicResultsV3(tps, codes) {
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition(p))
		}
		out = append(out, rt)
	}
	return out
}

// AddOffsetsToTxn adds the group's __consumer_offsets partition to the transaction (always
// transaction version 0, as Kafka: TV2 clients still send it). It blocks until durable.
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, version int16, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.Version = version
	code := c.usable(req.TransactionalID)
	if req.TransactionalID == "" {
		code = codeInvalidRequest
	}
	if code == 0 {
		tp := c.groupPartition(req.Group)
		var tr *transit
		c.mu.Lock()
		code, tr = c.core.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []TopicPartition{tp}, 0, c.nowMs())
		c.mu.Unlock()
		if code == 0 && tr != nil {
			code = c.persist(ctx, tr, false)
		}
	}
	resp.ErrorCode = fencedForVersion(code, version, 2)
	return resp
}

// groupPartition is the __consumer_offsets partition of a group; without a configured
// mapping, Kafka's default of 50 partitions.
func (c *Coordinator) groupPartition(group string) TopicPartition {
	if c.cfg.GroupPartition != nil {
		return c.cfg.GroupPartition(group)
	}
	return TopicPartition{"__consumer_offsets", coordlog.PartitionFor(group, 50)}
}

// VerifyOrAdd is the produce path's check of a transactional batch (KIP-890). With add
// false (transaction version < 2, or produce < v12) it verifies that the partition is in
// the producer's ongoing transaction; with add true it adds it (implicitly, as
// AddPartitionsToTxn v5 from ReplicaManager would), waiting up to AddRetryBackoffMaxMs for
// a transaction that is still completing. It returns 0 or the error the produce must fail
// with, already translated as ReplicaManager and AddPartitionsToTxnManager do:
// PRODUCER_FENCED → INVALID_PRODUCER_EPOCH; coordinator unavailability (and, when
// verifying only, CONCURRENT_TRANSACTIONS) → NOT_ENOUGH_REPLICAS. A partition missing
// from the transaction gives TRANSACTION_ABORTABLE; pass the code through
// LegacyProduceError for produce versions ≤ 10.
func (c *Coordinator) VerifyOrAdd(ctx context.Context, transactionalID string, pid int64, epoch int16, topic string, partition int32, add bool) int16 {
	tp := TopicPartition{topic, partition}
	code := c.usable(transactionalID)
	if transactionalID == "" {
		code = codeInvalidRequest
	}
	if code == 0 && !add {
		c.mu.Lock()
		var per []int16
		code, per = c.core.verify(transactionalID, pid, epoch, []TopicPartition{tp})
		c.mu.Unlock()
		if code == 0 {
			code = per[0]
		}
	} else if code == 0 {
		code = c.addForProduce(ctx, transactionalID, pid, epoch, tp)
	}
	switch code {
	case codeProducerFenced:
		return codeInvalidProducerEpoch
	case codeNotCoordinator, codeCoordinatorNotAvailable, kerrCoordinatorLoadInProgress, kerrNetworkException:
		return codeNotEnoughReplicas
	case codeConcurrentTxns:
		if !add {
			return codeNotEnoughReplicas
		}
	}
	return code
}

func (c *Coordinator) addForProduce(ctx context.Context, id string, pid int64, epoch int16, tp TopicPartition) int16 {
	var deadline <-chan time.Time
	for {
		c.mu.Lock()
		code, tr := c.core.addPartitions(id, pid, epoch, []TopicPartition{tp}, 2, c.nowMs())
		changed := c.changed
		c.mu.Unlock()
		if code == 0 && tr != nil {
			return c.persist(ctx, tr, false)
		}
		if code != codeConcurrentTxns {
			return code
		}
		// The previous transaction is still writing markers (the producer sent its next
		// transaction's first batch right after EndTxn): wait for it to complete rather
		// than bounce the produce (ReplicaManager retries for the same reason).
		if deadline == nil {
			deadline = c.cfg.After(time.Duration(c.cfg.AddRetryBackoffMaxMs) * time.Millisecond)
		}
		select {
		case <-changed:
		case <-deadline:
			return codeConcurrentTxns
		case <-ctx.Done():
			return codeConcurrentTxns
		}
	}
}
