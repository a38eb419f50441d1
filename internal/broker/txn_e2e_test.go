package broker_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

// A kgo transactional producer commits one transaction and aborts another; read_committed
// sees only the committed one, read_uncommitted sees both.
func TestKgoTransactionsCommitAndAbort(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := ctxT(t)
	if _, err := kadm.NewClient(newClient(t, tb.Addr)).CreateTopic(ctx, 1, 1, nil, "tx-out"); err != nil {
		t.Fatal(err)
	}
	p := newClient(t, tb.Addr, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("tx-out"))
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 10; j++ {
			if err := p.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("t%d-%d", i, j))).FirstErr(); err != nil {
				t.Fatalf("produce in txn %d: %v", i, err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end txn %d: %v", i, err)
		}
	}
	committed := readValues(t, tb.Addr, "tx-out", true)
	if len(committed) != 20 || committed[0] != "t0-0" || committed[10] != "t2-0" {
		t.Fatalf("read_committed saw %d records %v, want t0-* and t2-*", len(committed), committed)
	}
	if all := readValues(t, tb.Addr, "tx-out", false); len(all) != 30 {
		t.Fatalf("read_uncommitted saw %d records, want 30", len(all))
	}
}

// A second producer with the same transactional id fences the first: the first's open
// transaction is aborted and its later writes fail.
func TestKgoZombieFencing(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := ctxT(t)
	if _, err := kadm.NewClient(newClient(t, tb.Addr)).CreateTopic(ctx, 1, 1, nil, "fence"); err != nil {
		t.Fatal(err)
	}
	zombie := newClient(t, tb.Addr, kgo.TransactionalID("fence-id"), kgo.DefaultProduceTopic("fence"))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, tb.Addr, kgo.TransactionalID("fence-id"), kgo.DefaultProduceTopic("fence"))
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ProduceSync(ctx, kgo.StringRecord("fresh-1")).FirstErr(); err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
	if err == nil {
		err = zombie.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie's write after fencing: %v, want a fencing error", err)
	}
	if got := readValues(t, tb.Addr, "fence", true); len(got) != 1 || got[0] != "fresh-1" {
		t.Fatalf("read_committed: %v, want [fresh-1]", got)
	}
}
