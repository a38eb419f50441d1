package txn

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-939 two-phase commit: InitProducerId v6 with Enable2Pc and KeepPreparedTxn.

var none = handle{-1, -1}

// twoPCOngoing inits id as a two-phase participant and opens a transaction on tp0 and tp1.
func twoPCOngoing(t *testing.T, e *env, id string) handle {
	t.Helper()
	h, ongoing, code := e.init6(id, 60000, true, false, -1, -1)
	if code != 0 || ongoing != none {
		t.Fatalf("init: %d (ongoing %v)", code, ongoing)
	}
	if c := e.c.VerifyOrAdd(ctx, id, h.pid, h.epoch, "t", 0, true); c != 0 {
		t.Fatalf("add: %d", c)
	}
	if c := e.add1(id, h.pid, h.epoch, tp1); c != 0 {
		t.Fatalf("add: %d", c)
	}
	return h
}

// Enable2Pc needs transaction.two.phase.commit.enable (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// otherwise, as Kafka); KeepPreparedTxn alone does not.
func TestTwoPhaseDisabled(t *testing.T) {
	e := newEnv(t, 1)
	if _, _, c := e.init6("x", 60000, true, false, -1, -1); c != codeTxnIDAuthorizationFailed {
		t.Fatalf("Enable2Pc with 2PC off: %d", c)
	}
	if _, ok := e.c.core.entries["x"]; ok {
		t.Fatal("refused Enable2Pc created the id")
	}
	if _, _, c := e.init6("x", 60000, true, true, -1, -1); c != codeTxnIDAuthorizationFailed {
		t.Fatalf("Enable2Pc+keep with 2PC off: %d", c)
	}
	h, ongoing, c := e.init6("x", 60000, false, true, -1, -1)
	if c != 0 || ongoing != none || h.epoch != 0 {
		t.Fatalf("keep without 2PC: %v %v %d", h, ongoing, c)
	}
}

// A two-phase transaction is stored with timeout MaxInt32 (the request's timeout is not
// checked against transaction.max.timeout.ms) and is never aborted on timeout, also not
// after a restart and hours of (fake) time.
func TestTwoPhaseNeverTimesOut(t *testing.T) {
	e := newEnv2PC(t, 1)
	h, _, c := e.init6("x", 999999999, true, false, -1, -1) // above transaction.max.timeout.ms
	if c != 0 {
		t.Fatalf("init: %d", c)
	}
	if m, _, _ := e.meta("x"); m.TimeoutMs != math.MaxInt32 || !m.IsTwoPhase() {
		t.Fatalf("timeout %d", m.TimeoutMs)
	}
	if _, _, c := e.init6("y", 999999999, false, false, -1, -1); c != codeInvalidTxnTimeout {
		t.Fatalf("non-2PC timeout above the max: %d", c)
	}
	if c := e.add1("x", h.pid, h.epoch, tp0); c != 0 {
		t.Fatal(c)
	}
	for i := 0; i < 5; i++ {
		e.tick(time.Hour)
	}
	e.restart()
	for i := 0; i < 5; i++ {
		e.tick(24 * time.Hour)
	}
	m, _, _ := e.meta("x")
	if m.State != Ongoing || m.TimeoutMs != math.MaxInt32 || len(e.b.markers()) != 0 {
		t.Fatalf("after 5 days: %+v, markers %v", m, e.b.markers())
	}
	s := e.c.DescribeTransactions(ctx, 0, &kmsg.DescribeTransactionsRequest{TransactionalIDs: []string{"x"}}).TransactionStates[0]
	if s.TimeoutMillis != math.MaxInt32 || s.State != "Ongoing" {
		t.Fatalf("describe: %+v", s)
	}
	// The producer still commits it.
	if c, _, _ := e.end(5, "x", h.pid, h.epoch, true); c != 0 || e.state("x") != CompleteCommit {
		t.Fatalf("commit: %d %v", c, e.state("x"))
	}
}

// KeepPreparedTxn on an Ongoing transaction bumps the epoch (durably), keeps the
// transaction and its partitions, answers the old pair as ongoing, and fences the old
// producer everywhere; the new producer can only end it, and its end resolves the
// partitions written under the old epoch. A restart keeps all of it.
func TestKeepPreparedTransaction(t *testing.T) {
	e := newEnv2PC(t, 1)
	old := twoPCOngoing(t, e, "x")
	h, ongoing, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing != old || h != (handle{old.pid, old.epoch + 1}) {
		t.Fatalf("keep: %v ongoing %v code %d (old %v)", h, ongoing, c, old)
	}
	check := func(what string) {
		t.Helper()
		m, pending, _ := e.meta("x")
		if m.State != Ongoing || pending != noState || !slices.Equal(m.Partitions, []TopicPartition{tp0, tp1}) ||
			!m.Kept || m.KeptProducerID != old.pid || m.KeptProducerEpoch != old.epoch || m.ProducerEpoch != h.epoch {
			t.Fatalf("%s: %+v", what, m)
		}
	}
	check("after keep")
	logged := e.logged("x")
	if last := logged[len(logged)-1]; !last.Kept || last.ProducerEpoch != h.epoch || last.State != Ongoing {
		t.Fatalf("keep not durable: %+v", last)
	}
	// The old producer is fenced on every path.
	if c := e.add1("x", old.pid, old.epoch, tp("t", 9)); c != codeProducerFenced {
		t.Fatalf("old add: %d", c)
	}
	for _, add := range []bool{false, true} {
		if c := e.c.VerifyOrAdd(ctx, "x", old.pid, old.epoch, "t", 0, add); c != codeInvalidProducerEpoch {
			t.Fatalf("old produce (add %v): %d", add, c)
		}
	}
	for _, v := range []int16{3, 5} {
		if c, _, _ := e.end(v, "x", old.pid, old.epoch, true); c != codeProducerFenced {
			t.Fatalf("old EndTxn v%d: %d", v, c)
		}
	}
	// The new producer cannot extend the kept transaction.
	if c := e.add1("x", h.pid, h.epoch, tp("t", 9)); c != codeInvalidTxnState {
		t.Fatalf("new add: %d", c)
	}
	if c := e.c.VerifyOrAdd(ctx, "x", h.pid, h.epoch, "t", 0, true); c != codeInvalidTxnState {
		t.Fatalf("new produce: %d", c)
	}
	// A KIP-360 bump by the old producer cannot abort it either.
	if _, _, c := e.initV(5, "x", 60000, old.pid, old.epoch); c != codeProducerFenced {
		t.Fatalf("old KIP-360 init: %d", c)
	}
	e.restart()
	check("after restart")
	e.tick(time.Hour)
	check("after an hour")

	// A second recovery keeps it again and still reports the original pair.
	h2, ongoing2, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing2 != old || h2 != (handle{old.pid, old.epoch + 2}) {
		t.Fatalf("second keep: %v %v %d", h2, ongoing2, c)
	}
	if c, _, _ := e.end(5, "x", h.pid, h.epoch, true); c != codeProducerFenced {
		t.Fatalf("first keeper's commit: %d", c)
	}
	c, pid, epoch := e.end(5, "x", h2.pid, h2.epoch, true)
	if c != 0 || pid != old.pid || epoch != h2.epoch+1 {
		t.Fatalf("commit: %d %d/%d", c, pid, epoch)
	}
	ms := e.b.markers()
	if len(ms) != 2 {
		t.Fatalf("markers %+v", ms)
	}
	for _, mk := range ms {
		if !mk.Commit || mk.PID != old.pid || mk.Epoch != h2.epoch+1 || mk.Epoch < old.epoch {
			t.Fatalf("marker %+v", mk)
		}
	}
	m, _, _ := e.meta("x")
	if m.State != CompleteCommit || m.Kept || m.ProducerEpoch != h2.epoch+1 {
		t.Fatalf("after commit %+v", m)
	}
	// Retry of the commit succeeds; the old producer stays fenced.
	if c, _, e2 := e.end(5, "x", h2.pid, h2.epoch, true); c != 0 || e2 != h2.epoch+1 {
		t.Fatalf("commit retry: %d %d", c, e2)
	}
	if c, _, _ := e.end(5, "x", old.pid, old.epoch, true); c != codeProducerFenced {
		t.Fatalf("old commit after: %d", c)
	}
}

// KeepPreparedTxn on an idle id is an ordinary InitProducerId (ongoing -1); while a
// decision is being completed it is CONCURRENT_TRANSACTIONS.
func TestKeepPreparedTransactionOtherStates(t *testing.T) {
	e := newEnv2PC(t, 1)
	h, ongoing, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing != none || h.epoch != 0 {
		t.Fatalf("new id: %v %v %d", h, ongoing, c)
	}
	h2, ongoing, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing != none || h2 != (handle{h.pid, 1}) || e.state("x") != Empty {
		t.Fatalf("empty: %v %v %d", h2, ongoing, c)
	}
	e.add1("x", h2.pid, h2.epoch, tp0)
	e.b.setFail(func(TopicPartition) error { return errDisk })
	if c, _, _ := e.end(5, "x", h2.pid, h2.epoch, true); c != 0 {
		t.Fatal(c)
	}
	if _, _, c := e.init6("x", 60000, true, true, -1, -1); c != codeConcurrentTxns {
		t.Fatalf("keep in PrepareCommit: %d", c)
	}
	e.b.setFail(nil)
	e.tick(time.Second)
	h3, ongoing, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing != none || h3 != (handle{h.pid, 3}) || e.state("x") != Empty {
		t.Fatalf("complete: %v %v %d", h3, ongoing, c)
	}
}

// InitProducerId without KeepPreparedTxn aborts a two-phase transaction, kept or not, as
// Kafka aborts any open transaction; the abort resolves the old epoch's partitions.
func TestInitWithoutKeepAbortsTwoPhase(t *testing.T) {
	e := newEnv2PC(t, 1)
	old := twoPCOngoing(t, e, "x")
	kept, _, _ := e.init6("x", 60000, true, true, -1, -1)
	if _, _, c := e.init6("x", 60000, true, false, -1, -1); c != codeConcurrentTxns {
		t.Fatalf("fencing init: %d", c)
	}
	e.tick(time.Second)
	if s := e.state("x"); s != CompleteAbort {
		t.Fatalf("state %v", s)
	}
	for _, mk := range e.b.markers() {
		if mk.Commit || mk.PID != old.pid || mk.Epoch != kept.epoch+1 {
			t.Fatalf("marker %+v", mk)
		}
	}
	h, ongoing, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing != none || h != (handle{old.pid, kept.epoch + 2}) {
		t.Fatalf("retry: %v %v %d", h, ongoing, c)
	}
}

// KeepPreparedTxn without Enable2Pc keeps the transaction too, but it then has the
// request's (bounded) timeout, counted from the keep.
func TestKeepWithoutTwoPhaseRestartsTimeout(t *testing.T) {
	e := newEnv(t, 1)
	pid, epoch := setup(t, e, Ongoing) // timeout 60 s
	e.tick(50 * time.Second)
	h, ongoing, c := e.init6("x", 30000, false, true, -1, -1)
	if c != 0 || ongoing != (handle{pid, epoch}) || h != (handle{pid, epoch + 1}) {
		t.Fatalf("keep: %v %v %d", h, ongoing, c)
	}
	if _, _, c := e.init6("x", 99999999, false, true, -1, -1); c != codeInvalidTxnTimeout {
		t.Fatalf("keep with a timeout above the max: %d", c)
	}
	e.tick(25 * time.Second) // 75 s after the start, 25 s after the keep
	if s := e.state("x"); s != Ongoing {
		t.Fatalf("state %v", s)
	}
	e.tick(10 * time.Second)
	if s := e.state("x"); s != CompleteAbort {
		t.Fatalf("state %v", s)
	}
	for _, mk := range e.b.markers() {
		if mk.Commit || mk.PID != pid || mk.Epoch != epoch+2 {
			t.Fatalf("marker %+v", mk)
		}
	}
}

// A keep at an exhausted epoch gives the new producer a fresh producer id: the kept
// transaction's markers then go to its own producer id at the maximum epoch, the old
// producer is fenced (PRODUCER_FENCED, not INVALID_PRODUCER_ID_MAPPING) and the new one
// continues with its producer id at the next epoch.
func TestKeepAtExhaustedEpochRotates(t *testing.T) {
	e := newEnv2PC(t, 1)
	h0, _, _ := e.init6("x", 60000, true, false, -1, -1)
	e.c.core.entries["x"].meta.ProducerEpoch = maxEpoch - 1
	old := handle{h0.pid, maxEpoch - 1}
	if c := e.add1("x", old.pid, old.epoch, tp0, tp1); c != 0 {
		t.Fatal(c)
	}
	h, ongoing, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing != old || h.pid == old.pid || h.epoch != 0 {
		t.Fatalf("keep: %v %v %d", h, ongoing, c)
	}
	if c := e.add1("x", old.pid, old.epoch, tp0); c != codeProducerFenced {
		t.Fatalf("old add: %d", c)
	}
	if c := e.c.VerifyOrAdd(ctx, "x", old.pid, old.epoch, "t", 0, true); c != codeInvalidProducerEpoch {
		t.Fatalf("old produce: %d", c)
	}
	for _, v := range []int16{3, 5} {
		if c, _, _ := e.end(v, "x", old.pid, old.epoch, true); c != codeProducerFenced {
			t.Fatalf("old EndTxn v%d: %d", v, c)
		}
	}
	e.restart()
	h2, ongoing, c := e.init6("x", 60000, true, true, -1, -1)
	if c != 0 || ongoing != old || h2 != (handle{h.pid, 1}) {
		t.Fatalf("second keep after restart: %v %v %d", h2, ongoing, c)
	}
	if c, _, _ := e.end(5, "x", h.pid, h.epoch, false); c != codeProducerFenced {
		t.Fatalf("first keeper's abort: %d", c)
	}
	c, pid, epoch := e.end(5, "x", h2.pid, h2.epoch, true)
	if c != 0 || pid != h.pid || epoch != 2 {
		t.Fatalf("commit: %d %d/%d", c, pid, epoch)
	}
	for _, mk := range e.b.markers() {
		if !mk.Commit || mk.PID != old.pid || mk.Epoch != maxEpoch {
			t.Fatalf("marker %+v", mk)
		}
	}
	m, _, _ := e.meta("x")
	if m.State != CompleteCommit || m.ProducerID != h.pid || m.ProducerEpoch != 2 || m.Kept {
		t.Fatalf("after commit %+v", m)
	}
	if c, p, ep := e.end(5, "x", h2.pid, h2.epoch, true); c != 0 || p != h.pid || ep != 2 {
		t.Fatalf("commit retry: %d %d/%d", c, p, ep)
	}
	e.restart()
	if m, _, _ := e.meta("x"); m.ProducerID != h.pid || m.ProducerEpoch != 2 {
		t.Fatalf("after restart %+v", m)
	}
	// The next transaction works as usual.
	if c := e.c.VerifyOrAdd(ctx, "x", h.pid, 2, "t", 0, true); c != 0 {
		t.Fatalf("next transaction: %d", c)
	}
}

// A rotated kept transaction aborted by a timeout (kept without Enable2Pc) or by a plain
// InitProducerId also sends its markers for its own producer id at the maximum epoch.
func TestKeptRotatedAbort(t *testing.T) {
	e := newEnv(t, 1)
	h0, _, _ := e.init("x", 60000)
	e.c.core.entries["x"].meta.ProducerEpoch = maxEpoch - 1
	e.add1("x", h0, maxEpoch-1, tp0)
	h, _, c := e.init6("x", 1000, false, true, -1, -1)
	if c != 0 || h.pid == h0 {
		t.Fatalf("keep: %v %d", h, c)
	}
	e.tick(11 * time.Second)
	m, _, _ := e.meta("x")
	if m.State != CompleteAbort || m.ProducerID != h.pid || m.ProducerEpoch != 1 {
		t.Fatalf("after timeout %+v", m)
	}
	ms := e.b.markers()
	if len(ms) != 1 || ms[0].Commit || ms[0].PID != h0 || ms[0].Epoch != maxEpoch {
		t.Fatalf("markers %+v", ms)
	}
}
