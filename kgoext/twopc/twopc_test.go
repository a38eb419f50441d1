package twopc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/exactq/exactq/kgoext/twopc"
)

// PreparedTxnState's text form is Java's PreparedTxnState: "producerId:epoch", "" for none.
func TestPreparedTxnStateText(t *testing.T) {
	for _, c := range []struct {
		s    twopc.PreparedTxnState
		text string
		zero bool
	}{
		{twopc.PreparedTxnState{ProducerID: 42, Epoch: 7}, "42:7", false},
		{twopc.PreparedTxnState{ProducerID: 1, Epoch: 0}, "1:0", false},
		{twopc.PreparedTxnState{ProducerID: 9223372036854775807, Epoch: 32767}, "9223372036854775807:32767", false},
		{twopc.PreparedTxnState{ProducerID: -1, Epoch: -1}, "", true},
		{twopc.PreparedTxnState{}, "", true},
	} {
		if got := c.s.String(); got != c.text {
			t.Errorf("%#v.String() = %q, want %q", c.s, got, c.text)
		}
		if c.s.IsZero() != c.zero {
			t.Errorf("%#v.IsZero() = %v", c.s, !c.zero)
		}
		back, err := twopc.ParsePreparedTxnState(c.text)
		if err != nil || back.String() != c.text || back.IsZero() != c.zero {
			t.Errorf("parse %q: %#v %v", c.text, back, err)
		}
	}
	if s, err := twopc.ParsePreparedTxnState(""); err != nil || s != (twopc.PreparedTxnState{ProducerID: -1, Epoch: -1}) {
		t.Errorf("empty: %#v %v", s, err)
	}
	for _, bad := range []string{":", "1", "1:", ":1", "1:2:3", "a:1", "1:b", "-1:0", "0:-1", "1:32768", " 1:2"} {
		if s, err := twopc.ParsePreparedTxnState(bad); err == nil {
			t.Errorf("%q parsed as %#v", bad, s)
		}
	}
}

// NewProducer refuses a kgo client that would break two-phase commit, and the
// transaction methods refuse what needs InitTransactions or a transaction first, without
// a broker.
func TestLocalErrors(t *testing.T) {
	ctx := context.Background()
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	if _, err := twopc.NewProducer(client(kgo.MaxVersions(twopc.Versions())), ""); err == nil {
		t.Error("empty transactional id accepted")
	}
	if _, err := twopc.NewProducer(client(), "x"); err == nil {
		t.Error("a client whose MaxVersions stop InitProducerId at v5 accepted")
	}
	if _, err := twopc.NewProducer(client(kgo.MaxVersions(twopc.Versions()), kgo.TransactionalID("x")), "x"); err == nil {
		t.Error("a kgo client transactional with the same id accepted")
	}
	if v, _ := twopc.Versions().LookupMaxKeyVersion(22); v != 6 {
		t.Errorf("Versions: InitProducerId v%d", v)
	}
	if twopc.Versions().Equal(kversion.Stable()) {
		t.Error("Versions is kversion.Stable(): no version raised")
	}
	p, err := twopc.NewProducer(client(kgo.MaxVersions(twopc.Versions())), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err == nil {
		t.Error("BeginTransaction before InitTransactions accepted")
	}
	if _, err := p.PrepareTransaction(ctx); !errors.Is(err, twopc.ErrNoTransaction) {
		t.Errorf("prepare outside a transaction: %v", err)
	}
	if _, err := p.CompleteTransaction(ctx, twopc.PreparedTxnState{ProducerID: 1}); !errors.Is(err, twopc.ErrNotPrepared) {
		t.Errorf("complete without a prepared transaction: %v", err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, twopc.ErrNoTransaction) {
		t.Errorf("commit outside a transaction: %v", err)
	}
	if res := p.ProduceSync(ctx, &kgo.Record{Topic: "t"}); !errors.Is(res.FirstErr(), twopc.ErrNoTransaction) {
		t.Errorf("produce outside a transaction: %v", res.FirstErr())
	}
	if id, epoch := p.ProducerID(); id != -1 || epoch != -1 {
		t.Errorf("producer id before InitTransactions: %d/%d", id, epoch)
	}

	// A closed kgo client ends the call at once instead of being retried until ctx ends.
	closed := client(kgo.MaxVersions(twopc.Versions()))
	q, err := twopc.NewProducer(closed, "y")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := q.InitTransactions(short); !errors.Is(err, kgo.ErrClientClosed) {
		t.Errorf("InitTransactions on a closed client: %v", err)
	}
}
