package client

import (
	"context"
	"errors"
	"testing"
)

// PreparedTxnState's text form is Java's PreparedTxnState: "producerId:epoch", "" for none.
func TestPreparedTxnStateText(t *testing.T) {
	for _, c := range []struct {
		s    PreparedTxnState
		text string
		zero bool
	}{
		{PreparedTxnState{ProducerID: 42, Epoch: 7}, "42:7", false},
		{PreparedTxnState{ProducerID: 1, Epoch: 0}, "1:0", false},
		{PreparedTxnState{ProducerID: 9223372036854775807, Epoch: 32767}, "9223372036854775807:32767", false},
		{PreparedTxnState{ProducerID: -1, Epoch: -1}, "", true},
		{PreparedTxnState{}, "", true},
	} {
		if got := c.s.String(); got != c.text {
			t.Errorf("%#v.String() = %q, want %q", c.s, got, c.text)
		}
		if c.s.IsZero() != c.zero {
			t.Errorf("%#v.IsZero() = %v", c.s, !c.zero)
		}
		back, err := ParsePreparedTxnState(c.text)
		if err != nil || back.String() != c.text || back.IsZero() != c.zero {
			t.Errorf("parse %q: %#v %v", c.text, back, err)
		}
	}
	if s, err := ParsePreparedTxnState(""); err != nil || s != (PreparedTxnState{-1, -1}) {
		t.Errorf("empty: %#v %v", s, err)
	}
	for _, bad := range []string{":", "1", "1:", ":1", "1:2:3", "a:1", "1:b", "-1:0", "0:-1", "1:32768", " 1:2"} {
		if s, err := ParsePreparedTxnState(bad); err == nil {
			t.Errorf("%q parsed as %#v", bad, s)
		}
	}
}

// The 2PC methods refuse what they cannot do without a broker round trip.
func TestTwoPCLocalErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := NewProducer(ProducerConfig{Brokers: []string{"127.0.0.1:1"}, Enable2PC: true}); err == nil {
		t.Fatal("Enable2PC without a TransactionalID accepted")
	}
	plain, err := NewProducer(ProducerConfig{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.PrepareTransaction(ctx); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("prepare, not transactional: %v", err)
	}
	if _, _, err := plain.RecoverPreparedTransaction(ctx); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("recover, not transactional: %v", err)
	}
	if _, ok := plain.PreparedState(); ok {
		t.Fatal("PreparedState of a plain producer")
	}
	p, err := NewProducer(ProducerConfig{Brokers: []string{"127.0.0.1:1"}, TransactionalID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.PrepareTransaction(ctx); !errors.Is(err, Err2PCDisabled) {
		t.Fatalf("prepare without Enable2PC: %v", err)
	}
	if _, err := p.CompleteTransaction(ctx, PreparedTxnState{ProducerID: 1}); !errors.Is(err, ErrNotPrepared) {
		t.Fatalf("complete without a prepared transaction: %v", err)
	}
	q, err := NewProducer(ProducerConfig{Brokers: []string{"127.0.0.1:1"}, TransactionalID: "y", Enable2PC: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.PrepareTransaction(ctx); !errors.Is(err, ErrNoTransaction) {
		t.Fatalf("prepare outside a transaction: %v", err)
	}
}
