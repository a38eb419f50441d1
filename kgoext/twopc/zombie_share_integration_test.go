package twopc_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/kgoext/twopc"
)

// TestZombieStagingFenced: the share-acknowledgement path of TestZombieFenced. Once a new
// instance recovered the transaction (KeepPreparedTxn bumps the epoch), the old instance's
// TxnShareAcknowledge is refused with PRODUCER_FENCED (ErrProducerFatal) and stages
// nothing: the recovered transaction commits only the output the old instance wrote
// before, and the inputs whose staging was refused are still to be delivered.
func TestZombieStagingFenced(t *testing.T) {
	const group = "sg-2pc-zs"
	s := newShareSetup(t, group, "tx-2pc-zs", 3, false)
	ctx := testCtx(t)
	if err := s.p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, s.b.Addr, "tx-2pc-zs")
	st, ok, err := p.RecoverPreparedTransaction(ctx)
	if err != nil || !ok {
		t.Fatalf("recover: %v %v %v", st, ok, err)
	}
	if err := s.p.SendShareAcksToTransaction(ctx, s.acks, s.md); !errors.Is(err, twopc.ErrProducerFatal) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie staging: %v, want ErrProducerFatal and PRODUCER_FENCED", err)
	}
	if committed, err := p.CompleteTransaction(ctx, st); err != nil || !committed {
		t.Fatalf("complete: %v %v", committed, err)
	}
	if got := readCommitted(t, s.b.Addr, "out"); len(got) != 1 || len(got["first"]) != 1 {
		t.Fatalf("committed outputs %v, want only the first", got)
	}
	// The old member's records are released by its close; a new member gets all three.
	closeConsumer(t, s.cons)
	if other := untilSentinel(t, s.b.Addr, group, "sentinel"); len(other) != len(s.recs) {
		t.Fatalf("after the fenced staging a new member got %d of the %d inputs before the sentinel", len(other), len(s.recs))
	}
}
