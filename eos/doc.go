// Package eos gives exactly-once processing from share groups (KIP-932 queues) without
// transaction plumbing, over exactq's client: the outputs written for a set of inputs and
// the share acknowledgements of those inputs commit or abort together, in one producer
// transaction (KIP-1289 transactional share acknowledgements).
//
// Runner is the common case: share consumer → ProcessFunc → output records, committed
// every N inputs or T milliseconds by each of W workers, with graceful shutdown and
// abort-and-redeliver on any failure:
//
//	r, err := eos.NewRunner(eos.RunnerConfig{
//		Brokers: brokers, Group: "orders", Topics: []string{"orders"},
//		TransactionalIDPrefix: "orders-enricher", Workers: 4,
//		Process: func(ctx context.Context, in *client.Record) (eos.Result, error) {
//			out, err := enrich(in.Value)
//			if errors.Is(err, errMalformed) {
//				return eos.Result{Reject: true}, nil // poison: archived, never redelivered
//			}
//			if err != nil {
//				return eos.Result{}, err // abort: the inputs come back
//			}
//			return eos.Result{Outputs: []*client.Record{{Topic: "enriched", Key: in.Key, Value: out}}}, nil
//		},
//	})
//	...
//	err = r.Run(ctx) // until ctx ends
//
// Errors are typed: match them with errors.Is against ErrInvalidConfig, ErrProcess,
// ErrProduce, ErrStage, ErrCommit, ErrFenced, ErrPermanent; the client's and Kafka's
// errors stay reachable behind them. See docs/exactly-once.md for which API to use when,
// and for what happens on a crash at each step.
package eos
