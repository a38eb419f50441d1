package twopc_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/kgoext/twopc"
)

// produceOuts produces "<prefix>-0".."<prefix>-<n-1>" to out in p's open transaction and
// returns the records (their offsets are set once they are written).
func produceOuts(t *testing.T, p *twopc.Producer, prefix string, n int) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	var recs []*kgo.Record
	for i := range n {
		r := &kgo.Record{Topic: "out", Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
		recs = append(recs, r)
		p.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Value, err)
			}
		})
	}
	return recs
}

// prepareAndCrash prepares a transaction holding n outputs, drops its producer without
// ending it and restarts the broker. It checks that the prepared transaction outlives
// transaction.max.timeout.ms (a normal transaction started after it is aborted by the
// broker meanwhile) and that its outputs stay invisible, and returns its state.
func prepareAndCrash(t *testing.T, addr string, restart func(), id string, n int) twopc.PreparedTxnState {
	t.Helper()
	ctx := testCtx(t)
	createTopics(t, addr, "out")
	p := newProducer(t, addr, id)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	recs := produceOuts(t, p, "out", n)
	st, err := p.PrepareTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Offset < 0 || r.ProducerID != st.ProducerID || r.ProducerEpoch != st.Epoch {
			t.Fatalf("prepared record %s: offset %d, producer %d/%d, want written by %v", r.Value, r.Offset, r.ProducerID, r.ProducerEpoch, st)
		}
	}
	if got, ok := p.PreparedState(); !ok || got != st || st.IsZero() {
		t.Fatalf("prepared %v, PreparedState %v %v", st, got, ok)
	}
	if res := p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("late")}); !errors.Is(res.FirstErr(), twopc.ErrTransactionPrepared) {
		t.Fatalf("produce while prepared: %v", res.FirstErr())
	}
	if err := p.BeginTransaction(); !errors.Is(err, twopc.ErrTransactionPrepared) {
		t.Fatalf("begin while prepared: %v", err)
	}
	if round, err := twopc.ParsePreparedTxnState(st.String()); err != nil || round != st {
		t.Fatalf("state %q parses to %v %v", st, round, err)
	}
	// p is dropped here: no EndTxn. The broker restarts.
	restart()

	// A plain kgo transaction with the shortest timeout, started now: once the broker
	// aborted it, the prepared transaction has been open longer than that timeout too.
	plain := newClient(t, addr, kgo.TransactionalID(id+"-plain"), kgo.TransactionTimeout(maxTimeout))
	if err := plain.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broker to abort the timed-out plain transaction", func() bool {
		return describe(t, addr, id+"-plain").State == "CompleteAbort"
	})
	d := describe(t, addr, id)
	if d.State != "Ongoing" || d.TimeoutMillis != math.MaxInt32 || d.ProducerID != st.ProducerID || d.ProducerEpoch != st.Epoch {
		t.Fatalf("prepared transaction after a restart and %v: %+v", maxTimeout, d)
	}
	if lso := lastStable(t, addr, "out"); lso != 0 {
		t.Fatalf("read_committed may read out[0] up to %d: the prepared outputs are visible", lso)
	}
	return st
}

// recoverAndComplete recovers the prepared transaction with a new producer on a new kgo
// client and completes it against want.
func recoverAndComplete(t *testing.T, addr, id string, st, want twopc.PreparedTxnState) *twopc.Producer {
	t.Helper()
	ctx := testCtx(t)
	p := newProducer(t, addr, id)
	got, ok, err := p.RecoverPreparedTransaction(ctx)
	if err != nil || !ok || got != st {
		t.Fatalf("recover: %v %v %v, want %v", got, ok, err, st)
	}
	if ps, ok := p.PreparedState(); !ok || ps != st {
		t.Fatalf("PreparedState after recover: %v %v", ps, ok)
	}
	if err := p.BeginTransaction(); !errors.Is(err, twopc.ErrTransactionPrepared) {
		t.Fatalf("begin while recovered: %v", err)
	}
	committed, err := p.CompleteTransaction(ctx, want)
	if err != nil || committed != (want == st) {
		t.Fatalf("complete(%v) of %v: committed %v, %v", want, st, committed, err)
	}
	if _, ok := p.PreparedState(); ok {
		t.Fatal("still prepared after CompleteTransaction")
	}
	if _, err := p.CompleteTransaction(ctx, want); !errors.Is(err, twopc.ErrNotPrepared) {
		t.Fatalf("second complete: %v", err)
	}
	return p
}

// commitOne runs a normal transaction with one output on p: the producer is usable.
func commitOne(t *testing.T, p *twopc.Producer, value string) {
	t.Helper()
	ctx := testCtx(t)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverCommit: a prepared transaction survives the loss of its producer, a broker
// restart and more than transaction.max.timeout.ms; a new instance recovers it and, with
// the stored state, commits it: a read_committed kgo consumer reads each output once.
func TestRecoverCommit(t *testing.T) {
	const id, n = "tx-2pc-c", 6
	b := startBroker(t, true)
	st := prepareAndCrash(t, b.Addr, b.Restart, id, n)
	p := recoverAndComplete(t, b.Addr, id, st, st)
	commitOne(t, p, "after")

	got := readCommitted(t, b.Addr, "out")
	if len(got) != n+1 || len(got["after"]) != 1 {
		t.Fatalf("committed outputs %v", got)
	}
	for i := range n {
		if offs := got[fmt.Sprintf("out-%d", i)]; len(offs) != 1 || offs[0] != int64(i) {
			t.Fatalf("out-%d read at %v, want once at %d", i, offs, i)
		}
	}
}

// TestRecoverAbort: the same, completed with a state that is not the prepared one (a
// later epoch, as a checkpoint that never completed would store): aborted, nothing of it
// readable.
func TestRecoverAbort(t *testing.T) {
	const id, n = "tx-2pc-a", 6
	b := startBroker(t, true)
	st := prepareAndCrash(t, b.Addr, b.Restart, id, n)
	want := twopc.PreparedTxnState{ProducerID: st.ProducerID, Epoch: st.Epoch + 1}
	p := recoverAndComplete(t, b.Addr, id, st, want)
	commitOne(t, p, "after")
	if got := readCommitted(t, b.Addr, "out"); len(got) != 1 || len(got["after"]) != 1 {
		t.Fatalf("aborted outputs readable: %v", got)
	}
}

// TestInitWithoutKeepAborts: what aborts a prepared transaction is an InitProducerId
// without KeepPreparedTxn: InitTransactions of a new instance, or a plain kgo
// transactional client with the same id (why this package exists).
func TestInitWithoutKeepAborts(t *testing.T) {
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopics(t, b.Addr, "out")
	prepare := func(id string) twopc.PreparedTxnState {
		p := newProducer(t, b.Addr, id)
		if err := p.InitTransactions(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produceOuts(t, p, id, 3)
		st, err := p.PrepareTransaction(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	prepare("tx-init")
	again := newProducer(t, b.Addr, "tx-init")
	if err := again.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.PreparedState(); ok {
		t.Fatal("InitTransactions kept the prepared transaction")
	}
	if _, err := again.CompleteTransaction(ctx, twopc.PreparedTxnState{}); !errors.Is(err, twopc.ErrNotPrepared) {
		t.Fatalf("complete after InitTransactions: %v", err)
	}
	if d := describe(t, b.Addr, "tx-init"); d.State == "Ongoing" {
		t.Fatalf("tx-init after InitTransactions: %+v", d)
	}

	prepare("tx-kgo")
	plain := newClient(t, b.Addr, kgo.TransactionalID("tx-kgo"), kgo.TransactionTimeout(maxTimeout))
	if err := plain.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("kgo")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The prepared records of both ids were aborted: only kgo's commit is readable.
	if got := readCommitted(t, b.Addr, "out"); len(got) != 1 || len(got["kgo"]) != 1 {
		t.Fatalf("read_committed read %v, want only kgo's own record", got)
	}
}

// TestReadCommittedSeesExactlyCommitted: commits and aborts, prepared or not, under
// transactions v2 and v1: a read_committed kgo consumer reads exactly the committed
// records, at the offsets their promises reported.
func TestReadCommittedSeesExactlyCommitted(t *testing.T) {
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			b := startBroker(t, true)
			ctx := testCtx(t)
			createTopics(t, b.Addr, "out")
			p := newProducer(t, b.Addr, "tx-rc")
			if v1 {
				twopc.ForceTransactionsV1(p)
			}
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if twopc.UsesTransactionsV2(p) == v1 {
				t.Fatalf("transactions v2 = %v", !v1)
			}
			want := map[string]int64{}
			for i, step := range []struct {
				prepare, commit bool
			}{{false, true}, {false, false}, {true, true}, {true, false}, {false, true}} {
				_, epoch := p.ProducerID()
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				recs := produceOuts(t, p, fmt.Sprintf("t%d", i), 3)
				// Written before the end: an abort must hide records the log has.
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if step.prepare {
					st, err := p.PrepareTransaction(ctx)
					if err != nil {
						t.Fatal(err)
					}
					want := st
					if !step.commit {
						want = twopc.PreparedTxnState{}
					}
					if committed, err := p.CompleteTransaction(ctx, want); err != nil || committed != step.commit {
						t.Fatalf("complete: %v %v", committed, err)
					}
				} else if step.commit {
					if err := p.CommitTransaction(ctx); err != nil {
						t.Fatal(err)
					}
				} else if err := p.AbortTransaction(ctx); err != nil {
					t.Fatal(err)
				}
				if step.commit {
					for _, r := range recs {
						want[string(r.Value)] = r.Offset
					}
				}
				// KIP-890: under v2 every EndTxn bumps the epoch, under v1 none does.
				if _, next := p.ProducerID(); (next != epoch) == v1 {
					t.Fatalf("epoch %d after the transaction, %d before (v1 %v)", next, epoch, v1)
				}
			}
			got := readCommitted(t, b.Addr, "out")
			if len(got) != len(want) {
				t.Fatalf("read %v, want %v", got, want)
			}
			for v, off := range want {
				if offs := got[v]; len(offs) != 1 || offs[0] != off {
					t.Fatalf("%s read at %v, want once at %d", v, offs, off)
				}
			}
		})
	}
}

// TestZombieFenced: once a new instance recovered the transaction, the old instance is
// fenced: its produce and its commit fail with ErrProducerFatal and PRODUCER_FENCED, and
// the recovered transaction holds only what the old instance wrote before.
func TestZombieFenced(t *testing.T) {
	const id = "tx-2pc-z"
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopics(t, b.Addr, "out")
	old := newProducer(t, b.Addr, id)
	if err := old.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, b.Addr, id)
	st, ok, err := p.RecoverPreparedTransaction(ctx)
	if err != nil || !ok {
		t.Fatalf("recover: %v %v %v", st, ok, err)
	}
	res := old.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("zombie")})
	if err := res.FirstErr(); !errors.Is(err, twopc.ErrProducerFatal) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie produce: %v", err)
	}
	if err := old.CommitTransaction(ctx); !errors.Is(err, twopc.ErrProducerFatal) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie commit: %v", err)
	}
	if committed, err := p.CompleteTransaction(ctx, st); err != nil || !committed {
		t.Fatalf("complete: %v %v", committed, err)
	}
	if got := readCommitted(t, b.Addr, "out"); len(got) != 1 || len(got["first"]) != 1 {
		t.Fatalf("committed outputs %v", got)
	}
	// Recovering when nothing is open leaves a ready producer.
	p2 := newProducer(t, b.Addr, id)
	if st, ok, err := p2.RecoverPreparedTransaction(ctx); err != nil || ok || !st.IsZero() {
		t.Fatalf("recover with nothing open: %v %v %v", st, ok, err)
	}
	if _, err := p2.CompleteTransaction(ctx, st); !errors.Is(err, twopc.ErrNotPrepared) {
		t.Fatalf("complete with nothing prepared: %v", err)
	}
	commitOne(t, p2, "second")
}

// TestDisabledOnBroker: against a broker without transaction.two.phase.commit.enable,
// InitTransactions fails with a typed, fatal error, and so does every later call.
func TestDisabledOnBroker(t *testing.T) {
	b := startBroker(t, false)
	ctx := testCtx(t)
	p := newProducer(t, b.Addr, "tx-2pc-off")
	err := p.InitTransactions(ctx)
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || !errors.Is(err, twopc.ErrProducerFatal) {
		t.Fatalf("InitTransactions: %v", err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, twopc.ErrProducerFatal) {
		t.Fatalf("begin after a fatal error: %v", err)
	}
}

// TestRecoverAcrossTransactionVersions: a transaction prepared under transactions v1 (a
// producer from before transaction.version 2 was finalized) is recovered and completed by
// a v2 producer: committed, its outputs are read once; aborted, none.
func TestRecoverAcrossTransactionVersions(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			b := startBroker(t, true)
			ctx := testCtx(t)
			createTopics(t, b.Addr, "out")
			p := newProducer(t, b.Addr, "tx-versions")
			twopc.ForceTransactionsV1(p)
			if err := p.InitTransactions(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			recs := produceOuts(t, p, "v1", 3)
			st, err := p.PrepareTransaction(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := st
			if !commit {
				want = twopc.PreparedTxnState{}
			}
			q := recoverAndComplete(t, b.Addr, "tx-versions", st, want)
			if !twopc.UsesTransactionsV2(q) {
				t.Fatal("the recovering producer does not use transactions v2")
			}
			commitOne(t, q, "after")
			values := []string{"after"}
			if commit {
				values = []string{string(recs[0].Value), string(recs[1].Value), string(recs[2].Value), "after"}
			}
			wantReadOnce(t, b.Addr, values...)
		})
	}
}

// TestClientVersionsDecideTransactionsV1: a kgo client whose MaxVersions stop Produce at
// v11 cannot speak transactions v2 whatever the broker finalized: the producer uses v1
// (AddPartitionsToTxn, no epoch bump) and its transactions commit.
func TestClientVersionsDecideTransactionsV1(t *testing.T) {
	b := startBroker(t, true)
	ctx := testCtx(t)
	createTopics(t, b.Addr, "out")
	vs := twopc.Versions()
	vs.SetMaxKeyVersion(0, 11)
	p, err := twopc.NewProducer(newClient(t, b.Addr, kgo.MaxVersions(vs)), "tx-capped")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if twopc.UsesTransactionsV2(p) {
		t.Fatal("transactions v2 with Produce capped at v11")
	}
	_, before := p.ProducerID()
	commitOne(t, p, "capped")
	if _, after := p.ProducerID(); after != before {
		t.Fatalf("epoch %d -> %d: bumped as under v2", before, after)
	}
	wantReadOnce(t, b.Addr, "capped")
}
