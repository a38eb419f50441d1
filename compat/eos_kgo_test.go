package compat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

const (
	eosInputs    = 10000
	eosBatch     = 500 // records per transaction
	eosInTopic   = "eos-in"
	eosOutTopic  = "eos-out"
	eosGroup     = "eos-group"
	eosInParts   = 3
	eosOutParts  = 3
	eosSessionTO = 6 * time.Second
)

func eosInKey(i int) string { return fmt.Sprintf("in-%05d", i) }

// eosTransform is the pipeline's transformation: one output per input, keyed like it.
func eosTransform(v []byte) []byte { return []byte("T(" + strings.ToUpper(string(v)) + ")") }

// eosMember is one consume-transform-produce pipeline member: a kgo GroupTransactSession
// reading eos-in in group eos-group (read_committed) and writing one output per input to
// eos-out in transactions of up to eosBatch records.
type eosMember struct {
	t      *testing.T
	name   string
	sess   *kgo.GroupTransactSession
	dialer *killableDialer
	cancel context.CancelFunc

	// midTxn, if set, is called once per transaction after the first polled records were
	// produced and flushed (so they are in the log, uncommitted); it may block, and it
	// returns true to crash the member right there.
	midTxn func(batch int) (crash bool)
	// endAs decides how batch n ends (nil: TryCommit).
	endAs func(batch int) kgo.TransactionEndTry

	stop    atomic.Bool
	done    chan struct{}
	mu      sync.Mutex
	err     error
	batches []eosBatchResult
}

type eosBatchResult struct {
	batch     int
	keys      []string
	committed bool
	crashed   bool
}

func startEOSMember(t *testing.T, addr, name, txnID string, opts ...kgo.Opt) *eosMember {
	m := &eosMember{t: t, name: name, dialer: &killableDialer{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.WithContext(ctx),
		kgo.Dialer(m.dialer.dial),
		kgo.ConsumerGroup(eosGroup),
		kgo.ConsumeTopics(eosInTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(60 * time.Second), // only fencing may end the crashed member's transaction
		kgo.DefaultProduceTopic(eosOutTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.SessionTimeout(eosSessionTO),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(20 * time.Second),
	}
	base = append(base, kgoLogOpts(name)...)
	sess, err := kgo.NewGroupTransactSession(append(base, opts...)...)
	if err != nil {
		t.Fatalf("%s: NewGroupTransactSession: %v", name, err)
	}
	m.sess = sess
	return m
}

func (m *eosMember) run() {
	go func() {
		defer close(m.done)
		crashed := m.loop()
		if crashed {
			// The connections are already cut and every dial fails; cancelling the
			// client's context makes Close give up on LeaveGroup at once.
			m.cancel()
		}
		m.sess.Close()
		m.cancel()
	}()
}

func (m *eosMember) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = fmt.Errorf("%s: %w", m.name, err)
	}
}

func (m *eosMember) failed() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *eosMember) results() []eosBatchResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]eosBatchResult(nil), m.batches...)
}

// poll returns up to max records, waiting at most d.
func (m *eosMember) poll(d time.Duration, max int) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := m.sess.PollRecords(ctx, max)
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
			continue
		}
		return nil, fmt.Errorf("poll: %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
	}
	return fs.Records(), nil
}

// loop runs transactions until stopped; it returns true if the member crashed.
func (m *eosMember) loop() (crashed bool) {
	var (
		batch   int
		prodMu  sync.Mutex
		prodErr error
	)
	for !m.stop.Load() {
		recs, err := m.poll(300*time.Millisecond, eosBatch)
		if err != nil {
			m.fail(err)
			return false
		}
		if len(recs) == 0 {
			continue
		}
		if err := m.sess.Begin(); err != nil {
			m.fail(fmt.Errorf("Begin: %w", err))
			return false
		}
		batch++
		res := eosBatchResult{batch: batch}
		prodErr = nil
		produce := func(rs []*kgo.Record) {
			for _, r := range rs {
				res.keys = append(res.keys, string(r.Key))
				out := &kgo.Record{
					Key:   r.Key,
					Value: eosTransform(r.Value),
					Headers: []kgo.RecordHeader{
						{Key: "src", Value: []byte(fmt.Sprintf("%d/%d", r.Partition, r.Offset))},
						{Key: "member", Value: []byte(m.name)},
					},
				}
				m.sess.Produce(context.Background(), out, func(_ *kgo.Record, err error) {
					if err != nil {
						prodMu.Lock()
						if prodErr == nil {
							prodErr = err
						}
						prodMu.Unlock()
					}
				})
			}
		}
		produce(recs)
		if m.midTxn != nil {
			if err := m.sess.Client().Flush(context.Background()); err != nil {
				m.fail(fmt.Errorf("flush: %w", err))
				return false
			}
			if m.midTxn(batch) {
				m.dialer.kill()
				res.crashed = true
				m.mu.Lock()
				m.batches = append(m.batches, res)
				m.mu.Unlock()
				return true
			}
		}
		for len(res.keys) < eosBatch {
			more, err := m.poll(200*time.Millisecond, eosBatch-len(res.keys))
			if err != nil {
				m.fail(err)
				return false
			}
			if len(more) == 0 {
				break
			}
			produce(more)
		}
		end := kgo.TryCommit
		if m.endAs != nil {
			end = m.endAs(batch)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		committed, err := m.sess.End(ctx, end)
		cancel()
		if err != nil {
			m.fail(fmt.Errorf("End batch %d (%d records): %w", batch, len(res.keys), err))
			return false
		}
		prodMu.Lock()
		perr := prodErr
		prodMu.Unlock()
		if committed && perr != nil {
			m.fail(fmt.Errorf("batch %d committed although a produce failed: %v", batch, perr))
			return false
		}
		res.committed = committed
		m.mu.Lock()
		m.batches = append(m.batches, res)
		m.mu.Unlock()
	}
	return false
}

// stopAndWait ends the member's loop (after its current transaction) and closes it.
func (m *eosMember) stopAndWait(t *testing.T) {
	t.Helper()
	m.stop.Store(true)
	select {
	case <-m.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not stop", m.name)
	}
}

// signal is a one-shot event.
type signal struct {
	once sync.Once
	ch   chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }
func (s *signal) fire()  { s.once.Do(func() { close(s.ch) }) }
func (s *signal) fired() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// waitSignal waits for s (at once, not at the next poll: the tests fault what s marks the
// middle of) or fails the test after d or once failed reports an error.
func waitSignal(t *testing.T, s *signal, d time.Duration, what string, failed func() error) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.ch:
			return
		case <-deadline.C:
			t.Fatalf("%s: did not happen within %v", what, d)
		case <-tick.C:
			if err := failed(); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
		}
	}
}

// TestKgoGroupTransactSessionEOS is acceptance test 1 of issue 3: a consume-transform-
// produce pipeline built on kgo's GroupTransactSession (classic group, read_committed,
// transactional producer, TxnOffsetCommit) processes 10k inputs in transactions of 500,
// through
//   - an injected abort (member A ends its 2nd transaction with TryAbort),
//   - a rebalance in the middle of a transaction (member B joins while A is half-way
//     through a transaction; A's session must abort it),
//   - a crash (member B's connections are cut half-way through a transaction, after its
//     records reached the log: no EndTxn, no LeaveGroup) and a replacement B2 with the
//     same transactional id, which fences B and gets B's transaction aborted, joining the
//     group once B's session expired.
//
// Then a read_committed reader of the output sees every input's output exactly once, a
// read_uncommitted reader also sees the aborted copies, and the group's committed offsets
// are the input end offsets.
func TestKgoGroupTransactSessionEOS(t *testing.T) {
	start := time.Now()
	// B's membership outlives its crash by its session timeout, Kafka's minimum (6 s,
	// group.min.session.timeout.ms). A shorter one needs that broker config, which exactq
	// refuses today (broker bug, reported: coordinator configs missing from topicconfig's
	// broker config table).
	tb := testbroker.Start(t)
	adm := newAdmin(t, tb.Addr)
	createTopic(t, adm, eosInTopic, eosInParts, nil)
	createTopic(t, adm, eosOutTopic, eosOutParts, nil)

	// The inputs: unique keys, idempotent producer.
	in := make([]*kgo.Record, eosInputs)
	inputs := map[string][]byte{}
	for i := range in {
		in[i] = &kgo.Record{Topic: eosInTopic, Key: []byte(eosInKey(i)), Value: []byte(fmt.Sprintf("payload-%05d-%s", i, strings.Repeat("x", i%13)))}
		inputs[eosInKey(i)] = in[i].Value
	}
	produceAll(t, ctxFor(t, time.Minute), newClient(t, tb.Addr, kgo.ProducerLinger(2*time.Millisecond)), in)
	inEnds := endOffsets(t, adm, eosInTopic)
	t.Logf("inputs produced: end offsets %v (%v)", inEnds, time.Since(start).Round(time.Millisecond))

	var members []*eosMember
	anyFailed := func() error {
		for _, m := range members {
			if err := m.failed(); err != nil {
				return err
			}
		}
		return nil
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.stop.Store(true)
		}
		for _, m := range members {
			select {
			case <-m.done:
			case <-time.After(60 * time.Second):
			}
		}
	})

	// Member A: aborts its 2nd transaction; in its 4th it stops half-way until member B has
	// joined and taken partitions from it.
	aMid, bJoined, aRevoked := newSignal(), newSignal(), newSignal()
	a := startEOSMember(t, tb.Addr, "A", "eos-tx-a",
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, rev map[string][]int32) {
			if len(rev[eosInTopic]) > 0 && aMid.fired() {
				aRevoked.fire()
			}
		}))
	a.endAs = func(batch int) kgo.TransactionEndTry {
		if batch == 2 {
			return kgo.TryAbort
		}
		return kgo.TryCommit
	}
	a.midTxn = func(batch int) bool {
		if batch == 4 {
			aMid.fire()
			// Blocks A's processing (not its heartbeats) until the rebalance happened.
			select {
			case <-bJoined.ch:
			case <-time.After(60 * time.Second):
			}
		}
		return false
	}
	members = append(members, a)
	a.run()
	waitSignal(t, aMid, 60*time.Second, "member A half-way through its 4th transaction", anyFailed)
	t.Logf("A is mid-transaction 4; starting B (%v)", time.Since(start).Round(time.Millisecond))

	// Member B joins: a rebalance while A's transaction is open. B crashes half-way
	// through its 2nd transaction.
	bMid, bCrash := newSignal(), newSignal()
	b := startEOSMember(t, tb.Addr, "B", "eos-tx-b",
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, as map[string][]int32) {
			if len(as[eosInTopic]) > 0 {
				bJoined.fire()
			}
		}))
	b.midTxn = func(batch int) bool {
		if batch == 2 {
			bMid.fire()
			<-bCrash.ch
			return true
		}
		return false
	}
	members = append(members, b)
	b.run()
	waitSignal(t, bJoined, 60*time.Second, "member B assigned partitions", anyFailed)
	waitSignal(t, aRevoked, 30*time.Second, "member A revoked partitions mid-transaction", anyFailed)
	t.Logf("rebalance done: B has partitions, A revoked some mid-transaction (%v)", time.Since(start).Round(time.Millisecond))

	waitSignal(t, bMid, 60*time.Second, "member B half-way through its 2nd transaction", anyFailed)
	txb := describeTxn(t, adm, "eos-tx-b")
	if txb.State != "Ongoing" || len(txb.Topics[eosOutTopic]) == 0 {
		t.Fatalf("B mid-transaction: DescribeTransactions eos-tx-b = state %q topics %v, want Ongoing on %s", txb.State, txb.Topics, eosOutTopic)
	}
	bCrash.fire()
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatal("crashed member B's client did not close")
	}
	// Nothing of B's reached the broker after the crash: its transaction is still open.
	if tx := describeTxn(t, adm, "eos-tx-b"); tx.State != "Ongoing" || tx.ProducerEpoch != txb.ProducerEpoch {
		t.Fatalf("after B's crash: eos-tx-b state %q epoch %d, want still Ongoing at epoch %d (a crash sends no EndTxn)", tx.State, tx.ProducerEpoch, txb.ProducerEpoch)
	}
	t.Logf("B crashed mid-transaction (pid %d epoch %d); starting B2 with the same transactional id (%v)", txb.ProducerID, txb.ProducerEpoch, time.Since(start).Round(time.Millisecond))

	b2 := startEOSMember(t, tb.Addr, "B2", "eos-tx-b")
	members = append(members, b2)
	b2.run()

	waitGroupCaughtUp(t, adm, eosGroup, eosInTopic, inEnds, 120*time.Second, anyFailed)
	t.Logf("group caught up with the inputs (%v)", time.Since(start).Round(time.Millisecond))
	for _, m := range []*eosMember{a, b2} {
		m.stopAndWait(t)
	}
	if err := anyFailed(); err != nil {
		t.Fatal(err)
	}

	// B's transaction was aborted by B2's InitProducerId (fencing), not left hanging.
	if tx := describeTxn(t, adm, "eos-tx-b"); tx.ProducerEpoch <= txb.ProducerEpoch && tx.ProducerID == txb.ProducerID {
		t.Fatalf("eos-tx-b after B2: pid %d epoch %d, want B (pid %d epoch %d) fenced by a bumped epoch", tx.ProducerID, tx.ProducerEpoch, txb.ProducerID, txb.ProducerEpoch)
	}

	// What the members did.
	var aborted, crashedKeys []string
	commits := 0
	for _, m := range members {
		for _, r := range m.results() {
			switch {
			case r.crashed:
				crashedKeys = append(crashedKeys, r.keys...)
			case r.committed:
				commits++
			default:
				aborted = append(aborted, r.keys...)
			}
		}
		t.Logf("member %s: %d transactions", m.name, len(m.results()))
	}
	ra := a.results()
	if len(ra) < 4 || ra[1].committed || ra[3].committed {
		t.Fatalf("member A's transactions 2 (injected abort) and 4 (rebalance mid-transaction) must have aborted; A's results: %v", summarize(ra))
	}
	if len(crashedKeys) == 0 || len(b2.results()) == 0 {
		t.Fatalf("B crashed with %d records in its open transaction and B2 ran %d transactions; want both > 0", len(crashedKeys), len(b2.results()))
	}

	// The group committed exactly the inputs.
	got, err := groupOffsets(t, adm, eosGroup, eosInTopic)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range inEnds {
		if got[p] != e {
			t.Fatalf("group committed offsets %v, want the input end offsets %v", got, inEnds)
		}
	}

	// read_committed: every input's output exactly once.
	stableOutput(t, adm, eosOutTopic)
	committed := readAllRecords(t, tb.Addr, eosOutTopic, true)
	seen := map[string]int{}
	for _, r := range committed {
		k := string(r.Key)
		seen[k]++
		v, ok := inputs[k]
		if !ok {
			t.Fatalf("read_committed output record %d@%d has key %q that is no input", r.Partition, r.Offset, k)
		}
		if want := eosTransform(v); string(r.Value) != string(want) {
			t.Fatalf("output for %s is %q, want %q", k, r.Value, want)
		}
		if !r.Attrs.IsTransactional() {
			t.Fatalf("output %d@%d is not in a transactional batch", r.Partition, r.Offset)
		}
	}
	var missing, dup []string
	for k := range inputs {
		switch seen[k] {
		case 1:
		case 0:
			missing = append(missing, k)
		default:
			dup = append(dup, fmt.Sprintf("%s×%d", k, seen[k]))
		}
	}
	if len(missing) > 0 || len(dup) > 0 || len(committed) != eosInputs {
		t.Fatalf("read_committed saw %d outputs for %d inputs: %d missing (e.g. %v), %d duplicated (e.g. %v)",
			len(committed), eosInputs, len(missing), first(missing, 5), len(dup), first(dup, 5))
	}

	// read_uncommitted: the aborted copies too.
	all := readAllRecords(t, tb.Addr, eosOutTopic, false)
	allSeen := map[string]int{}
	for _, r := range all {
		allSeen[string(r.Key)]++
	}
	for _, k := range append(append([]string(nil), aborted...), crashedKeys...) {
		if allSeen[k] < 2 {
			t.Fatalf("read_uncommitted sees %s %d times; it was in an aborted transaction and then committed, want ≥ 2", k, allSeen[k])
		}
	}
	if len(all) < eosInputs+len(aborted)+len(crashedKeys) {
		t.Fatalf("read_uncommitted saw %d records, want ≥ %d inputs + %d aborted + %d in the crashed transaction", len(all), eosInputs, len(aborted), len(crashedKeys))
	}
	t.Logf("%d committed transactions; %d outputs aborted by abort/rebalance, %d by the crash's fencing; read_committed %d, read_uncommitted %d (%v)",
		commits, len(aborted), len(crashedKeys), len(committed), len(all), time.Since(start).Round(time.Millisecond))
}

func describeTxn(t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := adm.DescribeTransactions(ctxFor(t, 10*time.Second), id)
	if err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, err)
	}
	d, err := ds.On(id, nil)
	if err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, err)
	}
	if d.Err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, d.Err)
	}
	return d
}

func summarize(rs []eosBatchResult) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "[#%d %d recs committed=%v crashed=%v] ", r.batch, len(r.keys), r.committed, r.crashed)
	}
	return b.String()
}

func first[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// hangingCleanupIntervalMs is the coordinator's timed-out-transaction sweep interval the
// hanging-transaction test asks for (Kafka's default is 10 s).
const hangingCleanupIntervalMs = 200

// TestKgoHangingTransactionAborted is acceptance test 4 of issue 3 with a short sweep
// interval (transaction.abort.timed.out.transaction.cleanup.interval.ms=200).
func TestKgoHangingTransactionAborted(t *testing.T) {
	cfg := map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": fmt.Sprint(hangingCleanupIntervalMs)}
	testHangingTransaction(t, testbroker.Start(t, testbroker.WithConfig(cfg)), 5*time.Second)
}

// testHangingTransaction: a kgo transactional producer (transaction timeout 1 s) begins,
// writes and disappears (its connections are cut: no EndTxn, no abort on Close), and another
// transactional producer then commits a record to the same partition. While the first
// transaction is open, ListTransactions and DescribeProducers show it and the last stable
// offset is stuck at its first record, so a read_committed consumer cannot read the later
// committed record. The coordinator must abort it once its timeout passed (within
// abortWithin of it), bumping the epoch; then the LSO reaches the high watermark, the
// read_committed consumer reads the later record (and never the hanging ones), and the
// listings no longer show an open transaction.
func testHangingTransaction(t *testing.T, tb *testbroker.Broker, abortWithin time.Duration) {
	const topic, txnID, timeout = "hang", "hang-tx", time.Second
	adm := newAdmin(t, tb.Addr)
	createTopic(t, adm, topic, 1, nil)

	// A read_committed consumer running from the start.
	reader := newClient(t, tb.Addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)

	dialer := &killableDialer{}
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	hanging := newClient(t, tb.Addr, append([]kgo.Opt{
		kgo.WithContext(pctx),
		kgo.Dialer(dialer.dial),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(timeout),
		kgo.DefaultProduceTopic(topic),
	}, kgoLogOpts("hanging")...)...)
	ctx := ctxFor(t, time.Minute)
	began := time.Now()
	if err := hanging.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var hangRecs []*kgo.Record
	for i := 0; i < 3; i++ {
		r := &kgo.Record{Value: []byte(fmt.Sprintf("hanging-%d", i))}
		if err := hanging.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("hanging producer: %v", err)
		}
		hangRecs = append(hangRecs, r)
	}
	// The producer disappears: nothing more reaches the broker, Close cannot abort.
	dialer.kill()
	pcancel()
	hanging.Close()
	pid, epoch := hangRecs[0].ProducerID, hangRecs[0].ProducerEpoch

	later := newClient(t, tb.Addr, kgo.TransactionalID("hang-later"), kgo.DefaultProduceTopic(topic))
	if err := later.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	lateRec := &kgo.Record{Value: []byte("later-committed")}
	if err := later.ProduceSync(ctx, lateRec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := later.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	// Before the timeout: the open transaction is visible, and it holds the LSO back.
	// (These run within milliseconds of the produce; the timeout is 1 s.)
	open, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatalf("ListTransactions: %v", err)
	}
	if l, ok := open[txnID]; !ok || l.ProducerID != pid {
		t.Fatalf("ListTransactions(Ongoing) %v s after the hanging producer began: %+v, want %s with producer id %d", time.Since(began).Seconds(), open, txnID, pid)
	}
	dp := describeProducer(t, adm, topic, pid)
	if dp == nil || dp.CurrentTxnStartOffset != hangRecs[0].Offset || dp.ProducerEpoch != epoch {
		t.Fatalf("DescribeProducers %s[0] %v s after the hanging producer began: %+v, want producer %d epoch %d with current transaction start offset %d", topic, time.Since(began).Seconds(), dp, pid, epoch, hangRecs[0].Offset)
	}
	if lso := lastStable(t, adm, topic); lso != hangRecs[0].Offset && time.Since(began) < timeout {
		t.Fatalf("last stable offset %d while the transaction starting at %d is open", lso, hangRecs[0].Offset)
	}

	// The coordinator aborts it after its timeout; the reader then advances past it.
	var got *kgo.Record
	rctx := ctxFor(t, timeout+abortWithin)
	for got == nil {
		fs := reader.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read_committed consumer still stuck %v after a transaction with timeout %v began: LSO %d, transaction %+v",
				time.Since(began).Round(time.Millisecond), timeout, lastStable(t, adm, topic), describeTxn(t, adm, txnID))
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("read_committed fetch: %v", fe.Err)
		}
		for _, r := range fs.Records() {
			if string(r.Value) != "later-committed" {
				t.Fatalf("read_committed consumer got %q at %d: a record of the aborted transaction", r.Value, r.Offset)
			}
			got = r
		}
	}
	if el := time.Since(began); el < timeout {
		t.Fatalf("the transaction was ended %v after it began, before its %v timeout", el, timeout)
	}
	if got.Offset != lateRec.Offset {
		t.Fatalf("read_committed got the later record at %d, the producer was told %d", got.Offset, lateRec.Offset)
	}
	t.Logf("hanging transaction aborted; read_committed advanced past it %v after it began", time.Since(began).Round(time.Millisecond))

	// After: aborted with a bumped epoch, no open transaction anywhere.
	// The markers are written before the coordinator records CompleteAbort, so the state
	// may still read PrepareAbort for a moment after the LSO moved.
	eventually(t, 10*time.Second, txnID+" completes its abort", func() error {
		tx := describeTxn(t, adm, txnID)
		if tx.State != "CompleteAbort" {
			return fmt.Errorf("state %q", tx.State)
		}
		if tx.ProducerID != pid || tx.ProducerEpoch <= epoch {
			t.Fatalf("after the timeout: %s is %q pid %d epoch %d, want pid %d and an epoch above %d (Kafka fences a timed-out producer)", txnID, tx.State, tx.ProducerID, tx.ProducerEpoch, pid, epoch)
		}
		return nil
	})
	open, err = adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatalf("ListTransactions: %v", err)
	}
	if _, ok := open[txnID]; ok {
		t.Fatalf("ListTransactions(Ongoing) still lists %s after its abort", txnID)
	}
	if dp := describeProducer(t, adm, topic, pid); dp != nil && dp.CurrentTxnStartOffset != -1 {
		t.Fatalf("DescribeProducers after the abort: %+v, want no current transaction (-1)", dp)
	}
	if lso, hw := lastStable(t, adm, topic), endOffsets(t, adm, topic)[0]; lso != hw {
		t.Fatalf("after the abort: LSO %d, high watermark %d", lso, hw)
	}
	committed := readAllRecords(t, tb.Addr, topic, true)
	if len(committed) != 1 || string(committed[0].Value) != "later-committed" {
		t.Fatalf("read_committed reads %d records, want only later-committed", len(committed))
	}
	if all := readAllRecords(t, tb.Addr, topic, false); len(all) != 4 {
		t.Fatalf("read_uncommitted reads %d records, want the 3 aborted and the committed one", len(all))
	}
}

func describeProducer(t *testing.T, adm *kadm.Client, topic string, pid int64) *kadm.DescribedProducer {
	t.Helper()
	ds, err := adm.DescribeProducers(ctxFor(t, 10*time.Second), kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("DescribeProducers: %v", err)
	}
	p, ok := ds[topic].Partitions[0]
	if !ok || p.Err != nil {
		t.Fatalf("DescribeProducers %s[0]: %+v", topic, p)
	}
	if d, ok := p.ActiveProducers[pid]; ok {
		return &d
	}
	return nil
}

func lastStable(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	lo, err := adm.ListCommittedOffsets(ctxFor(t, 10*time.Second), topic)
	if err != nil || lo.Error() != nil {
		t.Fatalf("ListOffsets read_committed %s: %v %v", topic, err, lo.Error())
	}
	o, _ := lo.Lookup(topic, 0)
	return o.Offset
}
