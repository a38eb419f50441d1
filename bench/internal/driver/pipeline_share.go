package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// prepareShareGroup sets the share group's configs before its first member joins:
// share.auto.offset.reset=earliest (the inputs are already there) and cfg.GroupConfigs.
func prepareShareGroup(ctx context.Context, cfg PipelineConfig) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := setGroupConfig(ctx, cl, cfg.Group, "share.auto.offset.reset", "earliest"); err != nil {
		return err
	}
	for k, v := range cfg.GroupConfigs {
		if err := setGroupConfig(ctx, cl, cfg.Group, k, v); err != nil {
			return err
		}
	}
	return nil
}

// shareStage is P5's baseline (PipelineShare), at-least-once: a kgo share consumer that
// accepts each input (Ack) once its output is handed to an idempotent kgo producer; a
// checkpoint flushes the producer, then the acknowledgements (FlushAcks), and fails on any
// produce or acknowledgement error.
type shareStage struct {
	cons, prod *kgo.Client
	output     string
	produceErr firstError
	ackErr     firstError
}

func newShareStage(ctx context.Context, cfg PipelineConfig) (*shareStage, error) {
	if err := prepareShareGroup(ctx, cfg); err != nil {
		return nil, err
	}
	s := &shareStage{output: cfg.Output}
	var err error
	s.cons, err = kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ShareGroup(cfg.Group), kgo.ConsumeTopics(cfg.Input),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) { s.ackErr.set(rs.Error()) }))
	if err != nil {
		return nil, err
	}
	s.prod, err = kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		s.cons.Close()
		return nil, err
	}
	return s, nil
}

func (s *shareStage) poll(ctx context.Context, deadline time.Time) ([]pipelineInput, error) {
	fs, now, err := pollFetches(ctx, deadline, s.cons.PollFetches)
	if err != nil {
		return nil, err
	}
	var ins []pipelineInput
	for it := fs.RecordIter(); !it.Done(); {
		r := it.Next()
		s.prod.Produce(ctx, outputRecord(s.output, r.Partition, r.Offset, r.Value), func(_ *kgo.Record, err error) { s.produceErr.set(err) })
		r.Ack(kgo.AckAccept)
		ins = append(ins, pipelineInput{polled: now, partition: r.Partition, offset: r.Offset, bytes: len(r.Value), redelivered: r.DeliveryCount() > 1})
	}
	return ins, nil
}

func (s *shareStage) commit(ctx context.Context) (bool, error) {
	if err := s.prod.Flush(ctx); err != nil {
		return false, err
	}
	if err := s.cons.FlushAcks(ctx); err != nil {
		return false, err
	}
	return true, errors.Join(s.produceErr.get("produce"), s.ackErr.get("acknowledgement"))
}

func (s *shareStage) close() {
	s.prod.Close()
	s.cons.Close()
}

// shareTxnStage is P5 (PipelineEOSShare) as the kgoext package doc writes it: a kgoext
// share consumer in explicit acknowledgement mode over a plain kgo client, and a
// transactional kgo client (kgoext.TransactionalOpts); each transaction holds the outputs
// and the inputs' ACCEPTs (AcknowledgementsForTransaction, SendShareAcksToTransaction:
// KIP-1289) and ends with kgoext.EndTransaction.
type shareTxnStage struct {
	transport *kgo.Client // the share consumer's connections
	cons      *kgoext.ShareConsumer
	txn       *kgo.Client
	output    string
	inTxn     bool
	md        kgoext.ShareGroupMetadata // as of the open transaction's first input
}

func newShareTxnStage(ctx context.Context, cfg PipelineConfig) (*shareTxnStage, error) {
	if err := prepareShareGroup(ctx, cfg); err != nil {
		return nil, err
	}
	txn, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.TransactionalID(cfg.TransactionalID),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // as P1: the values are random
	}, kgoext.TransactionalOpts()...)...)
	if err != nil {
		return nil, err
	}
	transport, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		txn.Close()
		return nil, err
	}
	cons, err := kgoext.NewShareConsumer(transport, cfg.Group, kgoext.ShareTopics(cfg.Input), kgoext.ExplicitAcks())
	if err != nil {
		transport.Close()
		txn.Close()
		return nil, err
	}
	return &shareTxnStage{transport: transport, cons: cons, txn: txn, output: cfg.Output}, nil
}

func (s *shareTxnStage) poll(ctx context.Context, deadline time.Time) ([]pipelineInput, error) {
	pctx, cancel := context.WithDeadline(ctx, deadline)
	recs, err := s.cons.Poll(pctx)
	cancel()
	now := time.Now()
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return nil, err
	}
	ins := make([]pipelineInput, 0, len(recs))
	for _, r := range recs {
		if !s.inTxn {
			if err := s.txn.BeginTransaction(); err != nil {
				return nil, fmt.Errorf("begin transaction: %w", err)
			}
			// The member metadata the transaction's acknowledgements are sent under.
			s.md, s.inTxn = s.cons.GroupMetadata(), true
		}
		// A failed output aborts the transaction (kgoext.EndTransaction).
		s.txn.Produce(ctx, outputRecord(s.output, r.Partition, r.Offset, r.Value), nil)
		if err := s.cons.Acknowledge(r, kgoext.AckAccept); err != nil {
			return nil, err
		}
		ins = append(ins, pipelineInput{polled: now, partition: r.Partition, offset: r.Offset, bytes: len(r.Value), redelivered: kgoext.DeliveryCount(r) > 1})
	}
	return ins, nil
}

// commit stages the acknowledgements and commits. A refused staging (ErrCommitFailed), a
// commit turned into an abort (ErrTransactionAborted) or an abortable coordinator error
// aborts: the inputs are delivered again. Any other error fails the run.
func (s *shareTxnStage) commit(ctx context.Context) (bool, error) {
	if !s.inTxn {
		return true, nil
	}
	s.inTxn = false
	acks, err := s.cons.AcknowledgementsForTransaction()
	if err == nil {
		err = kgoext.SendShareAcksToTransaction(ctx, s.txn, acks, s.md)
	}
	if err == nil {
		err = kgoext.EndTransaction(ctx, s.txn, kgo.TryCommit)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, kgoext.ErrTransactionAborted) {
			return false, nil
		}
	}
	if !errors.Is(err, kgoext.ErrCommitFailed) && !errors.Is(err, kerr.TransactionAbortable) && !errors.Is(err, kerr.OperationNotAttempted) {
		return false, err
	}
	if aerr := kgoext.EndTransaction(ctx, s.txn, kgo.TryAbort); aerr != nil {
		return false, errors.Join(err, aerr)
	}
	return false, nil
}

func (s *shareTxnStage) close() {
	_ = s.cons.Close(context.Background())
	s.transport.Close()
	s.txn.Close()
}
