package eos

import (
	"context"
	"slices"
	"time"

	"github.com/exactq/exactq/kgoext"
	"github.com/exactq/exactq/kgoext/twopc"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnProducer is a member's transactional producer: a transactional kgo client for the
// Runner (kgoProducer), a KIP-939 two-phase-commit producer over a kgo client for the
// Checkpointer (twopcProducer, which kgo cannot be: its InitProducerId would abort the
// prepared transaction). The member drives either through these calls.
type txnProducer interface {
	begin() error
	produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	// flush waits until every produced record has its outcome.
	flush(ctx context.Context) error
	stage(ctx context.Context, acks kgoext.TxnAcks, md kgoext.ShareGroupMetadata) error
	commit(ctx context.Context) error
	abort(ctx context.Context) error
	close()
}

// fencingProducer is a producer that starts by registering its transactional id the plain
// way (InitProducerId): that fences every earlier instance and aborts the transaction such
// an instance left open, prepared or not. Only the Runner's kgoProducer is one. A
// Checkpointer's twopcProducer must never start so, since it would abort the prepared
// transaction of a checkpoint that may be durable: it starts in Checkpointer.Recover
// (RecoverPreparedTransaction, InitProducerId with keepPreparedTxn), which commits or
// aborts that transaction by the snapshot, and a fenced one is not replaced.
type fencingProducer interface {
	txnProducer
	init(ctx context.Context) error
}

// newClient is a kgo client of brokers with the user's options (TLS, SASL, dialer, ...)
// after the toolkit's own, so that the user's win where both set one.
func newClient(brokers []string, own []kgo.Opt, user []kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, own...)
	return kgo.NewClient(append(opts, user...)...)
}

// kgoProducer is a transactional kgo client with kgoext's hooks: kgo does the producing,
// the producer id and epoch and EndTxn; kgoext stages the share acknowledgements and ends
// the transactions that hold only those.
type kgoProducer struct{ cl *kgo.Client }

func newKgoProducer(brokers []string, txnID string, timeout time.Duration, user []kgo.Opt) (*kgoProducer, error) {
	own := append([]kgo.Opt{kgo.TransactionalID(txnID), kgo.TransactionTimeout(timeout)}, kgoext.TransactionalOpts()...)
	cl, err := newClient(brokers, own, user)
	if err != nil {
		return nil, err
	}
	return &kgoProducer{cl: cl}, nil
}

// init loads the producer id: for a transactional kgo client that is InitProducerId,
// which kgo otherwise sends lazily with the first record.
func (p *kgoProducer) init(ctx context.Context) error {
	_, _, err := p.cl.ProducerID(ctx)
	return err
}

func (p *kgoProducer) begin() error { return p.cl.BeginTransaction() }

func (p *kgoProducer) produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	p.cl.Produce(ctx, r, promise)
}

func (p *kgoProducer) flush(ctx context.Context) error { return p.cl.Flush(ctx) }

func (p *kgoProducer) stage(ctx context.Context, acks kgoext.TxnAcks, md kgoext.ShareGroupMetadata) error {
	return kgoext.SendShareAcksToTransaction(ctx, p.cl, acks, md)
}

// commit and abort go through kgoext.EndTransaction, which also ends consume-only
// transactions (kgo alone would leave them open) and turns a commit into an abort when
// a record of the transaction failed.
func (p *kgoProducer) commit(ctx context.Context) error {
	return kgoext.EndTransaction(ctx, p.cl, kgo.TryCommit)
}

func (p *kgoProducer) abort(ctx context.Context) error {
	return kgoext.EndTransaction(ctx, p.cl, kgo.TryAbort)
}

func (p *kgoProducer) close() { p.cl.Close() }

// twopcProducer is a two-phase-commit producer with the kgo client it sends through.
type twopcProducer struct {
	cl *kgo.Client
	p  *twopc.Producer
}

func newTwopcProducer(brokers []string, txnID string, user []kgo.Opt) (*twopcProducer, error) {
	// twopc.Versions lets the client send InitProducerId v6 and TxnShareAcknowledge.
	cl, err := newClient(brokers, []kgo.Opt{kgo.MaxVersions(twopc.Versions())}, user)
	if err != nil {
		return nil, err
	}
	p, err := twopc.NewProducer(cl, txnID)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &twopcProducer{cl: cl, p: p}, nil
}

func (p *twopcProducer) begin() error { return p.p.BeginTransaction() }
func (p *twopcProducer) produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	p.p.Produce(ctx, r, promise)
}
func (p *twopcProducer) flush(ctx context.Context) error { return p.p.Flush(ctx) }
func (p *twopcProducer) stage(ctx context.Context, acks kgoext.TxnAcks, md kgoext.ShareGroupMetadata) error {
	return p.p.SendShareAcksToTransaction(ctx, acks, md)
}
func (p *twopcProducer) commit(ctx context.Context) error { return p.p.CommitTransaction(ctx) }
func (p *twopcProducer) abort(ctx context.Context) error  { return p.p.AbortTransaction(ctx) }
func (p *twopcProducer) close()                           { p.cl.Close() }

// shareConsumer is an explicit-acknowledgement share consumer over its own kgo client: the
// consumer's long polls then share no connection with the producer, and replacing either
// leaves the other alone.
type shareConsumer struct {
	cl *kgo.Client
	*kgoext.ShareConsumer
}

// consumerConfig is what a member needs to build (and rebuild) its share consumer.
type consumerConfig struct {
	brokers    []string
	clientOpts []kgo.Opt
	group      string
	topics     []string
	maxRecords int32
}

func newShareConsumer(cfg consumerConfig) (*shareConsumer, error) {
	cl, err := newClient(cfg.brokers, nil, cfg.clientOpts)
	if err != nil {
		return nil, err
	}
	c, err := kgoext.NewShareConsumer(cl, cfg.group, kgoext.ShareTopics(slices.Clone(cfg.topics)...),
		kgoext.ExplicitAcks(), kgoext.ShareMaxRecords(cfg.maxRecords))
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &shareConsumer{cl: cl, ShareConsumer: c}, nil
}

// close leaves the group, then closes the client: its connections end, and with them any
// share session the leave could not close, which releases what the member still held.
func (c *shareConsumer) close(ctx context.Context) error {
	err := c.ShareConsumer.Close(ctx)
	c.cl.Close()
	return err
}
