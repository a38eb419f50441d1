package twopc_test

import (
	"context"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/kgoext/twopc"
)

// A participant in an external two-phase commit: the external coordinator (here a
// database standing behind loadDecision and storeVote) stores the prepared state with its
// decision; after a crash the restarted participant completes what the decision says.
func Example() {
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"), kgo.MaxVersions(twopc.Versions()))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	p, err := twopc.NewProducer(cl, "payments-1")
	if err != nil {
		log.Fatal(err)
	}

	// On every start: settle what an earlier instance prepared, as the decision says.
	if _, found, err := p.RecoverPreparedTransaction(ctx); err != nil {
		log.Fatal(err)
	} else if found {
		decided, err := twopc.ParsePreparedTxnState(loadDecision())
		if err != nil {
			log.Fatal(err)
		}
		if _, err := p.CompleteTransaction(ctx, decided); err != nil {
			log.Fatal(err)
		}
	}

	if err := p.BeginTransaction(); err != nil {
		log.Fatal(err)
	}
	p.Produce(ctx, &kgo.Record{Topic: "payments", Value: []byte("42 EUR")}, nil)
	st, err := p.PrepareTransaction(ctx) // phase one: the vote is yes
	if err != nil {
		_ = p.AbortTransaction(ctx) // phase one failed: the vote is no
		log.Fatal(err)
	}
	storeVote(st.String()) // the coordinator decides commit and stores st with it
	if err := p.CommitTransaction(ctx); err != nil {
		log.Fatal(err) // a restart recovers and completes it
	}
}

func loadDecision() string { return "" }
func storeVote(string)     {}
