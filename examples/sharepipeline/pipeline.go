// Package sharepipeline is a runnable example of exactly-once consume-transform-produce on
// a share group with transactional share acknowledgements (KIP-1289), written as a franz-go
// program: one transactional *kgo.Client, and kgoext for what kgo lacks (a share consumer
// that hands its acknowledgements to the transaction, the call that stages them, and the
// end of a transaction that holds only acknowledgements). cmd/share-eos is the program; the
// loop lives here so that a test and the KIP-1289 crash test run it against a real broker.
//
// Each round polls records from the share group, transforms them, and in one transaction
// produces the outputs and stages the inputs' acknowledgements. A commit makes the outputs
// visible to read_committed readers and the inputs ACKNOWLEDGED (or ARCHIVED) together; an
// abort, or a crash, discards the outputs and the inputs are delivered again. A round whose
// inputs are all rejected, or a pipeline without an output topic, produces nothing: its
// transaction is consume-only, and kgoext.EndTransaction ends it (kgo alone would not send
// its EndTxn).
package sharepipeline

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/kgoext"
)

// Config configures a pipeline.
type Config struct {
	Brokers         []string
	Group           string // the share group
	Input           string
	Output          string // empty: consume-only, every transaction holds only acknowledgements
	TransactionalID string // one per running instance
	// Transform returns an input's output value; false rejects the input (archived when
	// the transaction commits, no output). Default: the value in upper case.
	Transform func(*kgo.Record) ([]byte, bool)
	// BeforeCommit, if set, runs once a round's outputs are produced and its
	// acknowledgements staged; an error aborts the round's transaction (the place to tie
	// the commit to a check of something else).
	BeforeCommit func(inputs []*kgo.Record) error
	OnCommit     func(inputs []*kgo.Record)              // after each commit
	OnAbort      func(inputs []*kgo.Record, cause error) // after each abort; the inputs come back
	ClientOpts   []kgo.Opt                               // more options for the kgo client
	ShareOpts    []kgoext.ShareOpt                       // more options for the share consumer
}

// Pipeline is one running instance: a transactional kgo client and a share consumer over it.
type Pipeline struct {
	cfg  Config
	cl   *kgo.Client
	cons *kgoext.ShareConsumer
}

// Run runs a pipeline until ctx ends or an error that needs new clients.
func Run(ctx context.Context, cfg Config) error {
	p, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	err = p.Run(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	p.Close(cctx) // leaves the group; unacknowledged records go back to it
	return err
}

// New creates the clients. Its InitProducerId (kgo's ProducerID), as Java's
// initTransactions, fences an earlier instance with the same transactional id and aborts
// that instance's open transaction before this one consumes.
func New(ctx context.Context, cfg Config) (*Pipeline, error) {
	if cfg.Transform == nil {
		cfg.Transform = func(r *kgo.Record) ([]byte, bool) { return bytes.ToUpper(r.Value), true }
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.TransactionalID(cfg.TransactionalID)},
		kgoext.TransactionalOpts()...) // the hooks EndTransaction needs, and TxnShareAcknowledge
	cl, err := kgo.NewClient(append(opts, cfg.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	cons, err := kgoext.NewShareConsumer(cl, cfg.Group,
		append([]kgoext.ShareOpt{kgoext.ShareTopics(cfg.Input), kgoext.ExplicitAcks()}, cfg.ShareOpts...)...)
	if err != nil {
		cl.Close()
		return nil, err
	}
	p := &Pipeline{cfg: cfg, cl: cl, cons: cons}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		p.Close(ctx)
		return nil, err
	}
	return p, nil
}

// GroupMetadata is the share group member's identity.
func (p *Pipeline) GroupMetadata() kgoext.ShareGroupMetadata { return p.cons.GroupMetadata() }

// Close closes the consumer (ctx bounds its goodbye to the group) and the client.
func (p *Pipeline) Close(ctx context.Context) {
	_ = p.cons.Close(ctx)
	p.cl.Close()
}

// Run processes rounds until ctx ends or a round fails in a way that needs new clients.
func (p *Pipeline) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := p.round(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// round is one transaction: poll, produce the outputs, stage the acknowledgements, commit.
func (p *Pipeline) round(ctx context.Context) error {
	inputs, err := p.cons.Poll(ctx)
	if err != nil || len(inputs) == 0 {
		return err
	}
	if err := p.cl.BeginTransaction(); err != nil {
		return err
	}
	for _, r := range inputs {
		ack := kgoext.AckAccept
		if out, ok := p.cfg.Transform(r); !ok {
			ack = kgoext.AckReject
		} else if p.cfg.Output != "" {
			p.cl.Produce(ctx, &kgo.Record{Topic: p.cfg.Output, Key: r.Key, Value: out}, nil)
		}
		if err := p.cons.Acknowledge(r, ack); err != nil {
			return err
		}
	}
	// The acknowledgements leave the share consumer's own path and join the transaction.
	md := p.cons.GroupMetadata()
	acks, err := p.cons.AcknowledgementsForTransaction()
	if err == nil {
		err = kgoext.SendShareAcksToTransaction(ctx, p.cl, acks, md)
	}
	if err == nil && p.cfg.BeforeCommit != nil {
		err = p.cfg.BeforeCommit(inputs)
	}
	if err == nil {
		// Flushes the outputs; a failed output or staging turns the commit into an abort.
		err = kgoext.EndTransaction(ctx, p.cl, kgo.TryCommit)
		switch {
		case err == nil:
			if p.cfg.OnCommit != nil {
				p.cfg.OnCommit(inputs)
			}
			return nil
		case errors.Is(err, kgoext.ErrTransactionAborted):
			p.aborted(inputs, err)
			return nil
		case !errors.Is(err, kerr.TransactionAbortable) && !errors.Is(err, kerr.OperationNotAttempted):
			return err // fenced, or the outcome is unknown: only new clients can go on
		}
	}
	// Something failed before or in the commit: abort, which discards the outputs and
	// gives the inputs back (never commit after a failed staging).
	if aerr := kgoext.EndTransaction(ctx, p.cl, kgo.TryAbort); aerr != nil {
		return errors.Join(err, aerr)
	}
	p.aborted(inputs, err)
	return nil
}

func (p *Pipeline) aborted(inputs []*kgo.Record, cause error) {
	if p.cfg.OnAbort != nil {
		p.cfg.OnAbort(inputs, cause)
	}
}
