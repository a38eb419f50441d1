// Package sharepipeline is a runnable example of exactly-once consume-transform-produce on a
// share group with transactional share acknowledgements (KIP-1289), written against
// exactq's Go client. cmd/ holds the program; the logic lives here so a test can run it
// against a real broker.
//
// Each round: poll records from the share group, transform them, and in one producer
// transaction write the outputs and stage the records' acknowledgements
// (SendShareAcksToTransaction). Commit makes the outputs visible and the inputs
// acknowledged together; abort (or a crash) leaves the outputs invisible and the inputs are
// delivered again. With Output empty the program is consume-only: the transaction holds
// only the acknowledgements.
package sharepipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/exactq/exactq/client"
)

// Config configures a pipeline.
type Config struct {
	Brokers         []string
	Group           string
	Input           string
	Output          string // empty: consume-only (acknowledgements only)
	TransactionalID string
	// Transform maps an input value to an output value (default: upper case).
	Transform func([]byte) []byte
	// Rounds stops after that many committed transactions (0: until ctx ends).
	Rounds int
	// AbortRound, if > 0, aborts that round's transaction once, to show redelivery.
	AbortRound int
	// OnCommit is called after each committed round with the inputs it acknowledged.
	OnCommit func(inputs []*client.Record)
}

// Run runs the pipeline until ctx ends or Rounds transactions committed.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Transform == nil {
		cfg.Transform = func(v []byte) []byte { return []byte(strings.ToUpper(string(v))) }
	}
	consumer, err := client.NewShareConsumer(client.ShareConsumerConfig{
		Brokers: cfg.Brokers, Group: cfg.Group, Topics: []string{cfg.Input}, AckMode: client.AckExplicit,
	})
	if err != nil {
		return err
	}
	defer consumer.Close(context.WithoutCancel(ctx))
	producer, err := client.NewProducer(client.ProducerConfig{Brokers: cfg.Brokers, TransactionalID: cfg.TransactionalID})
	if err != nil {
		return err
	}
	defer producer.Close()
	if err := producer.InitTransactions(ctx); err != nil {
		return fmt.Errorf("init transactions: %w", err)
	}

	committed, round := 0, 0
	for cfg.Rounds == 0 || committed < cfg.Rounds {
		records, err := consumer.Poll(ctx)
		if err != nil {
			return err
		}
		if len(records) == 0 {
			continue
		}
		round++
		if err := producer.BeginTransaction(ctx); err != nil {
			return err
		}
		if cfg.Output != "" {
			for _, r := range records {
				out := &client.Record{Topic: cfg.Output, Key: r.Key, Value: cfg.Transform(r.Value)}
				producer.Produce(ctx, out, nil)
			}
		}
		// The acknowledgements go with the transaction instead of the normal ack path.
		for _, r := range records {
			if err := consumer.Acknowledge(r, client.AckAccept); err != nil {
				return err
			}
		}
		acks, err := consumer.AcknowledgementsForTransaction()
		if err != nil {
			return err
		}
		if err := producer.SendShareAcksToTransaction(ctx, acks, consumer.GroupMetadata()); err != nil {
			// Fenced member, lost lock, ...: the transaction cannot commit. Abort; the inputs
			// come back and are processed again.
			if abortErr := producer.AbortTransaction(ctx); abortErr != nil {
				return errors.Join(err, abortErr)
			}
			continue
		}
		if round == cfg.AbortRound {
			if err := producer.AbortTransaction(ctx); err != nil {
				return err
			}
			continue
		}
		if err := producer.CommitTransaction(ctx); err != nil {
			if errors.Is(err, client.ErrTransactionAbortable) {
				if abortErr := producer.AbortTransaction(ctx); abortErr != nil {
					return errors.Join(err, abortErr)
				}
				continue
			}
			return err
		}
		committed++
		if cfg.OnCommit != nil {
			cfg.OnCommit(records)
		}
	}
	return nil
}
