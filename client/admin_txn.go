package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TransactionFilter narrows ListTransactions. Zero fields match everything.
type TransactionFilter struct {
	// States are transaction states ("Empty", "Ongoing", "PrepareCommit",
	// "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence").
	States      []string
	ProducerIDs []int64
	// OpenLongerThan keeps transactions running for longer than this (ListTransactions
	// v1+; brokers without it ignore the filter).
	OpenLongerThan time.Duration
	// IDPattern is a regular expression transactional ids must match in full
	// (ListTransactions v2+; brokers without it ignore the filter).
	IDPattern string
}

// ListedTransaction is one transactional id of ListTransactions.
type ListedTransaction struct {
	TransactionalID string
	Coordinator     int32
	ProducerID      int64
	State           string
}

// ErrUnknownTransactionState is returned (naming the states) by ListTransactions when a
// broker does not know a state of the filter.
var ErrUnknownTransactionState = errors.New("client: unknown transaction state")

// ListTransactions lists the transactional ids every broker coordinates, sorted by id. A
// broker that fails contributes an error naming it; the ids of the others are still
// returned.
func (a *Admin) ListTransactions(ctx context.Context, filter TransactionFilter) ([]ListedTransaction, error) {
	brokers, err := a.allBrokers(ctx)
	if err != nil {
		return nil, err
	}
	var out []ListedTransaction
	var errs []error
	unknown := map[string]bool{}
	for _, id := range brokers {
		req := kmsg.NewPtrListTransactionsRequest()
		req.StateFilters, req.ProducerIDFilters = filter.States, filter.ProducerIDs
		req.DurationFilterMillis = -1
		if filter.OpenLongerThan > 0 {
			req.DurationFilterMillis = filter.OpenLongerThan.Milliseconds()
		}
		if filter.IDPattern != "" {
			req.TransactionalIDPattern = kmsg.StringPtr(filter.IDPattern)
		}
		resp, err := a.cl.do(ctx, broker(id), req)
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.ListTransactionsResponse).ErrorCode)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
			continue
		}
		r := resp.(*kmsg.ListTransactionsResponse)
		for _, s := range r.UnknownStateFilters {
			unknown[s] = true
		}
		for _, s := range r.TransactionStates {
			out = append(out, ListedTransaction{TransactionalID: s.TransactionalID, Coordinator: id, ProducerID: s.ProducerID, State: s.TransactionState})
		}
	}
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("%w: %q", ErrUnknownTransactionState, mapKeys(unknown)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out, errors.Join(errs...)
}

// TransactionDescription is one transactional id of DescribeTransactions.
type TransactionDescription struct {
	TransactionalID string
	Coordinator     int32
	State           string
	ProducerID      int64
	ProducerEpoch   int16
	Timeout         time.Duration
	// StartTime is when the current transaction started; zero when none is open.
	StartTime time.Time
	// Partitions are the partitions in the current transaction, sorted.
	Partitions []TopicPartition
	// Err is kerr.TransactionalIDNotFound for an id the coordinator does not know.
	Err error
}

// DescribeTransactions describes transactional ids, each asked of its coordinator, in the
// order given.
func (a *Admin) DescribeTransactions(ctx context.Context, ids ...string) ([]TransactionDescription, error) {
	got := map[string]TransactionDescription{}
	errs := a.byCoordinator(ctx, coordinatorTxn, ids, func(ctx context.Context, node int32, keys []string) (map[string]error, error) {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = keys
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		res := map[string]error{}
		for _, s := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			d := TransactionDescription{
				TransactionalID: s.TransactionalID, Coordinator: node, State: s.State,
				ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch,
				Timeout: time.Duration(s.TimeoutMillis) * time.Millisecond,
				Err:     kerr.ErrorForCode(s.ErrorCode),
			}
			if s.StartTimestamp >= 0 {
				d.StartTime = time.UnixMilli(s.StartTimestamp)
			}
			for _, t := range s.Topics {
				for _, p := range t.Partitions {
					d.Partitions = append(d.Partitions, TopicPartition{t.Topic, p})
				}
			}
			d.Partitions = sortTPs(d.Partitions)
			got[s.TransactionalID], res[s.TransactionalID] = d, d.Err
		}
		return res, nil
	})
	return groupResults(ids, errs, func(id string, err error) TransactionDescription {
		d, ok := got[id]
		if !ok {
			d = TransactionDescription{TransactionalID: id, Coordinator: -1, ProducerID: -1, ProducerEpoch: -1}
		}
		d.Err = err
		return d
	})
}

// ActiveProducer is one idempotent or transactional producer a partition leader keeps
// state for.
type ActiveProducer struct {
	ProducerID       int64
	ProducerEpoch    int32
	LastSequence     int32 // -1 when unknown
	LastTimestamp    time.Time
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of the producer's open transaction on the
	// partition, -1 when it has none.
	TxnStartOffset int64
}

// PartitionProducers is one partition's DescribeProducers answer.
type PartitionProducers struct {
	Producers []ActiveProducer // sorted by producer id
	Err       error
}

// DescribeProducers asks each partition's leader for its active producers (KIP-664), the
// way to find the producer of a hanging transaction.
func (a *Admin) DescribeProducers(ctx context.Context, partitions ...TopicPartition) (map[TopicPartition]PartitionProducers, error) {
	out := make(map[TopicPartition]PartitionProducers, len(partitions))
	missing := map[TopicPartition]ListedOffset{}
	byLeader, err := groupByLeader(ctx, a.cl, partitions, missing)
	if err != nil {
		return nil, err
	}
	for tp, m := range missing {
		out[tp] = PartitionProducers{Err: m.Err}
	}
	for leader, tps := range byLeader {
		req := kmsg.NewPtrDescribeProducersRequest()
		for _, tp := range sortTPs(tps) {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, tp.Partition)
		}
		resp, err := a.cl.do(ctx, broker(leader), req)
		if err != nil {
			for _, tp := range tps {
				out[tp] = PartitionProducers{Err: err}
			}
			continue
		}
		for _, t := range resp.(*kmsg.DescribeProducersResponse).Topics {
			for _, p := range t.Partitions {
				pp := PartitionProducers{Err: kerrWithMessage(p.ErrorCode, p.ErrorMessage)}
				for _, ap := range p.ActiveProducers {
					pp.Producers = append(pp.Producers, ActiveProducer{
						ProducerID: ap.ProducerID, ProducerEpoch: ap.ProducerEpoch, LastSequence: ap.LastSequence,
						LastTimestamp: time.UnixMilli(ap.LastTimestamp), CoordinatorEpoch: ap.CoordinatorEpoch,
						TxnStartOffset: ap.CurrentTxnStartOffset,
					})
				}
				sort.Slice(pp.Producers, func(i, j int) bool { return pp.Producers[i].ProducerID < pp.Producers[j].ProducerID })
				out[TopicPartition{t.Topic, p.Partition}] = pp
			}
		}
	}
	return out, firstErr(out, func(p PartitionProducers) error { return p.Err })
}
