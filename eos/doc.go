// Package eos gives exactly-once processing from share groups (KIP-932 queues) without
// transaction plumbing, over franz-go's kgo client and package kgoext: the outputs written
// for a set of inputs and the share acknowledgements of those inputs commit or abort
// together, in one producer transaction (KIP-1289 transactional share acknowledgements).
//
// Each Runner worker is a kgoext.ShareConsumer over its own *kgo.Client and a
// transactional *kgo.Client built with kgoext.TransactionalOpts, ended with
// kgoext.EndTransaction (which also commits a transaction that holds only
// acknowledgements). A Checkpointer's producer is a kgoext/twopc.Producer, because a
// prepared transaction must survive a restart and kgo's InitProducerId would abort it.
// Records are *kgo.Record in and out; RunnerConfig.ClientOpts and
// CheckpointerConfig.ClientOpts are kgo options (TLS, SASL, dialer) for every client the
// toolkit makes.
//
// Runner is the common case: share consumer → ProcessFunc → output records, committed
// every N inputs or T milliseconds by each of W workers, with graceful shutdown and
// abort-and-redeliver on any failure:
//
//	r, err := eos.NewRunner(eos.RunnerConfig{
//		Brokers: brokers, Group: "orders", Topics: []string{"orders"},
//		TransactionalIDPrefix: "orders-enricher", Workers: 4,
//		Process: func(ctx context.Context, in *kgo.Record) (eos.Result, error) {
//			out, err := enrich(in.Value)
//			if errors.Is(err, errMalformed) {
//				return eos.Result{Reject: true}, nil // poison: archived, never redelivered
//			}
//			if err != nil {
//				return eos.Result{}, err // abort: the inputs come back
//			}
//			return eos.Result{Outputs: []*kgo.Record{{Topic: "enriched", Key: in.Key, Value: out}}}, nil
//		},
//	})
//	...
//	err = r.Run(ctx) // until ctx ends
//
// Errors are typed: match them with errors.Is against ErrInvalidConfig, ErrProcess,
// ErrProduce, ErrStage, ErrCommit, ErrCommitUnknown (a commit whose lost answer stayed
// unknown), ErrFenced, ErrPermanent; kgo's, kgoext's and Kafka's errors (kerr values) stay
// reachable behind them. How kgo's errors are sorted: a fenced
// producer (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING,
// twopc.ErrProducerFatal) adds ErrFenced and the runner replaces the producer;
// TRANSACTION_ABORTABLE, kgoext.ErrCommitFailed and kgoext.ErrTransactionAborted abort the
// transaction and the worker goes on; UNSUPPORTED_VERSION, a broker without the API, and
// authorization failures are ErrPermanent; anything else (transport, a busy coordinator
// past kgo's retries) is retried. See docs/exactly-once.md for which API to use when,
// and for what happens on a crash at each step.
package eos
