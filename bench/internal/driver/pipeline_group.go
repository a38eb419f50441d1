package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupTxnStage is P4 as kgo users write it: a GroupTransactSession (a consumer-group member
// reading read_committed and a transactional producer in one client) that commits each
// transaction's outputs with its inputs' offsets in End. On an abort (a rebalance, an
// abortable commit error) End aborts and rewinds the consumer to the committed offsets.
type groupTxnStage struct {
	s          *kgo.GroupTransactSession
	output     string
	inTxn      bool
	produceErr firstError
}

func newGroupTxnStage(cfg PipelineConfig) (*groupTxnStage, error) {
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Input),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // as P1: the values are random
	)
	if err != nil {
		return nil, err
	}
	return &groupTxnStage{s: s, output: cfg.Output}, nil
}

func (g *groupTxnStage) poll(ctx context.Context, deadline time.Time) ([]pipelineInput, error) {
	fs, now, err := pollFetches(ctx, deadline, g.s.PollFetches)
	if err != nil {
		return nil, err
	}
	var ins []pipelineInput
	for it := fs.RecordIter(); !it.Done(); {
		r := it.Next()
		if !g.inTxn {
			if err := g.s.Begin(); err != nil {
				return nil, fmt.Errorf("begin transaction: %w", err)
			}
			g.inTxn = true
		}
		g.s.Produce(ctx, outputRecord(g.output, r.Partition, r.Offset, r.Value), func(_ *kgo.Record, err error) { g.produceErr.set(err) })
		ins = append(ins, pipelineInput{polled: now, partition: r.Partition, offset: r.Offset, bytes: len(r.Value)})
	}
	return ins, nil
}

func (g *groupTxnStage) commit(ctx context.Context) (bool, error) {
	if !g.inTxn {
		return true, nil
	}
	g.inTxn = false
	// No record fails to produce in a healthy run: a failure voids the measurement.
	if err := g.produceErr.get("produce"); err != nil {
		_, _ = g.s.End(ctx, kgo.TryAbort)
		return false, err
	}
	committed, err := g.s.End(ctx, kgo.TryCommit)
	if err == nil {
		err = g.produceErr.get("produce") // failed while End flushed
	}
	return committed, err
}

func (g *groupTxnStage) close() { g.s.Close() }
