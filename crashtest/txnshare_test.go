package crashtest

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/examples/sharepipeline"
	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/kgoext"
)

// flagTxnShareCycles is the number of kill/restart cycles of TestTxnShareAckCrashCycles. The
// CI default (20) takes well under a minute; the documented long run:
//
//	go test ./crashtest/ -run TestTxnShareAckCrashCycles -txnshare-cycles 1000 -timeout 3h -v
//	EXACTQ_TXNSHARE_CYCLES=1000 go test ./crashtest/ -run TestTxnShareAckCrashCycles -timeout 3h
var flagTxnShareCycles = flag.Int("txnshare-cycles", envInt("EXACTQ_TXNSHARE_CYCLES", 20), "kill/restart cycles of TestTxnShareAckCrashCycles (env EXACTQ_TXNSHARE_CYCLES)")

const (
	tsaIn      = "tsa-in"
	tsaOut     = "tsa-out"
	tsaGroup   = "tsa-pipeline"
	tsaWorkers = 2
	// tsaChunk inputs are appended at the start of every cycle (at least tsaMinInputs in all).
	tsaChunk     = 150
	tsaMinInputs = 3000
	// tsaTxnTimeout is the pipeline producers' transaction timeout: a transaction nobody
	// ends (its producer died with the broker and was replaced under a new transactional
	// id) is aborted by the coordinator that long after it began, plus one abort scan.
	tsaTxnTimeout = 2 * time.Second
	// tsaDeliveryLimit is the group's share.delivery.count.limit (the broker's maximum):
	// a record whose transaction aborts at the limit is archived without output (spec
	// rule), which the kills must not cause; the test reports it separately if they do.
	tsaDeliveryLimit = 10
	// tsaDeliveryTimeout bounds how long a producer retries a record (the broker down), so
	// that a transaction whose records cannot be written fails and is aborted.
	tsaDeliveryTimeout = 2 * time.Second
)

// tsaRejected says which inputs the pipeline REJECTs (no output).
func tsaRejected(id int) bool { return id%7 == 0 }

// tsaPhase is where a kill is aimed in a worker's transaction.
type tsaPhase int

const (
	tsaAny       tsaPhase = iota // wherever the seeded delay ends
	tsaStaged                    // right after SendShareAcksToTransaction returned (TX_PENDING durable, not committed)
	tsaCommit                    // inside the commit (kgoext.EndTransaction)
	tsaCommitted                 // right after a commit returned
)

func (p tsaPhase) String() string { return [...]string{"any", "staged", "commit", "committed"}[p] }

// tsaPipeline runs tsaWorkers instances of the example pipeline, package
// examples/sharepipeline (the program of #11's acceptance 2), from tsa-in to tsa-out. Each
// instance is a kgoext.ShareConsumer (explicit mode) over a transactional kgo client; a round
// polls, produces one output per input (value: the input id) except for REJECTed inputs,
// stages the acknowledgements with SendShareAcksToTransaction and commits with
// kgoext.EndTransaction, aborting when a step fails. When the pipeline returns an error the
// worker closes it and starts a new instance, whose InitProducerId fences the old producer
// and aborts its transaction, as a restarted process would.
type tsaPipeline struct {
	addr    string
	gen     int // transactional ids are tsa-w<worker>-<gen>
	ctx     context.Context
	cancel  context.CancelFunc
	crashed atomic.Bool // the workers die as if their process did: nothing more is sent
	wg      sync.WaitGroup

	committed, aborted, resets atomic.Int64
	waiter                     atomic.Pointer[tsaWaiter]

	mu       sync.Mutex
	maxCount map[int]int16 // highest delivery count seen per input id
	// commits lists, per input id, the transactions whose commit returned success with
	// its acknowledgement (for the diagnosis of a duplicate).
	commits map[int][]string
	cycle   atomic.Int64   // the test's cycle, for the commits notes
	errs    *errTally      // shared with the pipelines this one replaced
	live    []*tsaInstance // per worker, for crash
	// retired holds the member ids of share consumers closed or abandoned since the last
	// broker restart (see expireRetired).
	retired []string
}

type tsaWaiter struct {
	phase tsaPhase
	ch    chan struct{}
	once  sync.Once
}

// tsaInstance is one worker's running instance of the example pipeline.
type tsaInstance struct {
	txnID string
	pipe  *sharepipeline.Pipeline
	once  sync.Once
}

// close closes the pipeline's clients once; ctx bounds the consumer's goodbye (cancelled:
// nothing is sent). Closing the transactional client fails its buffered records and ends
// nothing.
func (c *tsaInstance) close(ctx context.Context) { c.once.Do(func() { c.pipe.Close(ctx) }) }

func startTSAPipeline(addr string, gen int, old *tsaPipeline) *tsaPipeline {
	ctx, cancel := context.WithCancel(context.Background())
	p := &tsaPipeline{addr: addr, gen: gen, ctx: ctx, cancel: cancel,
		maxCount: map[int]int16{}, errs: newErrTally(), live: make([]*tsaInstance, tsaWorkers), commits: map[int][]string{}}
	if old != nil {
		p.commits = old.commits
		p.cycle.Store(old.cycle.Load())
		p.committed.Store(old.committed.Load())
		p.aborted.Store(old.aborted.Load())
		p.resets.Store(old.resets.Load())
		p.maxCount, p.errs = old.maxCount, old.errs
		p.retired = old.retired
	}
	for w := range tsaWorkers {
		p.wg.Add(1)
		go p.run(w)
	}
	return p
}

func (p *tsaPipeline) noteErr(where string, err error) { p.errs.add(where, err, 400) }

func (p *tsaPipeline) enter(phase tsaPhase) {
	if w := p.waiter.Load(); w != nil && w.phase == phase {
		w.once.Do(func() { close(w.ch) })
	}
}

// awaitPhase waits until a worker next enters phase.
func (p *tsaPipeline) awaitPhase(phase tsaPhase, timeout time.Duration) bool {
	w := &tsaWaiter{phase: phase, ch: make(chan struct{})}
	p.waiter.Store(w)
	defer p.waiter.CompareAndSwap(w, nil)
	select {
	case <-w.ch:
		return true
	case <-time.After(timeout):
		return false
	}
}

// crash stops the workers as if their process died with the broker: clients closed with
// a cancelled context, so nothing more reaches any broker.
func (p *tsaPipeline) crash() {
	p.crashed.Store(true)
	p.cancel()
	dead, stop := context.WithCancel(context.Background())
	stop()
	p.mu.Lock()
	live := append([]*tsaInstance(nil), p.live...)
	p.mu.Unlock()
	for _, c := range live {
		if c != nil {
			c.close(dead)
		}
	}
	p.wg.Wait()
}

// retire notes c's share-group member as gone.
func (p *tsaPipeline) retire(c *tsaInstance) {
	p.mu.Lock()
	p.retired = append(p.retired, c.pipe.GroupMetadata().MemberID)
	p.mu.Unlock()
}

// expireRetired removes the members of retired consumers from the share group, standing
// in for their session timeout. A consumer whose goodbye could not reach the broker (it
// was down, or the process "crashed") stays a member until its session times out, and a
// coordinator that loads the group after a restart starts every member's session anew:
// with a restart every second or so, no abandoned member would ever expire and the group
// would fill up (GROUP_MAX_SIZE_REACHED) after a few hundred cycles, which is the test's
// compressed timescale, not a broker fault. Members that already left answer
// UNKNOWN_MEMBER_ID (GROUP_ID_NOT_FOUND before any member joined), which is ignored.
func (p *tsaPipeline) expireRetired(t *testing.T, raw *kgo.Client) {
	p.mu.Lock()
	ids := p.retired
	p.retired = nil
	p.mu.Unlock()
	for _, id := range ids {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = tsaGroup, id, -1
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, raw)
		cancel()
		if err != nil {
			t.Fatalf("leave for retired member %s: %v", id, err)
		}
		if code := resp.ErrorCode; code != 0 && code != kerr.UnknownMemberID.Code && code != kerr.GroupIDNotFound.Code {
			t.Fatalf("leave for retired member %s: %v", id, kerr.ErrorForCode(code))
		}
	}
}

// stop ends the workers cleanly (the broker is up).
func (p *tsaPipeline) stop() {
	p.cancel()
	p.wg.Wait()
}

// newInstance starts worker w's pipeline; its InitProducerId fences the instance that had
// the transactional id before.
func (p *tsaPipeline) newInstance(w int) (*tsaInstance, error) {
	c := &tsaInstance{txnID: fmt.Sprintf("tsa-w%d-%d", w, p.gen)}
	cfg := sharepipeline.Config{
		Brokers: []string{p.addr}, Group: tsaGroup, Input: tsaIn, Output: tsaOut, TransactionalID: c.txnID,
		Transform: p.transform,
		BeforeCommit: func([]*kgo.Record) error { // the acknowledgements are staged (TX_PENDING), the commit is next
			p.enter(tsaStaged)
			p.enter(tsaCommit)
			return nil
		},
		OnCommit: func(inputs []*kgo.Record) { p.noteCommit(c, inputs) },
		OnAbort: func(_ []*kgo.Record, cause error) {
			if p.ctx.Err() == nil {
				p.noteErr("aborted", cause)
			}
			p.aborted.Add(1)
		},
		ClientOpts: []kgo.Opt{
			kgo.AlwaysRetryEOF(), // the connections die with each kill
			kgo.TransactionTimeout(tsaTxnTimeout),
			kgo.RecordDeliveryTimeout(tsaDeliveryTimeout),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		},
		ShareOpts: []kgoext.ShareOpt{kgoext.ShareMaxRecords(50), kgoext.ShareMaxWait(100 * time.Millisecond)},
	}
	ictx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	pipe, err := sharepipeline.New(ictx, cfg)
	if err != nil {
		return nil, err
	}
	c.pipe = pipe
	p.mu.Lock()
	p.live[w] = c
	p.mu.Unlock()
	return c, nil
}

// transform passes an input id on as its output, or rejects it (tsaRejected).
func (p *tsaPipeline) transform(r *kgo.Record) ([]byte, bool) {
	id, err := strconv.Atoi(string(r.Value))
	if err != nil {
		p.noteErr("input", fmt.Errorf("offset %d: value %q", r.Offset, r.Value))
		return nil, false
	}
	p.mu.Lock()
	p.maxCount[id] = max(p.maxCount[id], kgoext.DeliveryCount(r))
	p.mu.Unlock()
	return r.Value, !tsaRejected(id)
}

// noteCommit counts a committed transaction of c and notes it for each of its inputs.
func (p *tsaPipeline) noteCommit(c *tsaInstance, inputs []*kgo.Record) {
	k := p.committed.Add(1)
	md := c.pipe.GroupMetadata()
	note := fmt.Sprintf("txn %d of %s (cycle %d, member %s epoch %d, inputs %s..%s)", k, c.txnID, p.cycle.Load(),
		md.MemberID[:8], md.MemberEpoch, inputs[0].Value, inputs[len(inputs)-1].Value)
	p.mu.Lock()
	for _, r := range inputs {
		id, _ := strconv.Atoi(string(r.Value))
		p.commits[id] = append(p.commits[id], note)
	}
	p.mu.Unlock()
	p.enter(tsaCommitted)
}

// run keeps worker w's pipeline running until the test stops or crashes the workers.
func (p *tsaPipeline) run(w int) {
	defer p.wg.Done()
	for p.ctx.Err() == nil {
		c, err := p.newInstance(w)
		if err != nil {
			if p.ctx.Err() == nil {
				p.noteErr("new pipeline", err)
				time.Sleep(50 * time.Millisecond) // paces the retries while the broker restarts
			}
			continue
		}
		err = c.pipe.Run(p.ctx)
		if p.ctx.Err() == nil {
			p.noteErr("pipeline", err)
			p.resets.Add(1)
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if p.crashed.Load() {
			cancel() // a dead process says no goodbye
		}
		if p.crashed.Load() || p.ctx.Err() == nil {
			p.retire(c)
		}
		c.close(cctx)
		cancel()
	}
}

// TestTxnShareAckCrashCycles is the guarantee-matrix crash test of transactional share
// acknowledgements (KIP-1289, acceptance 2; #11 acceptance 2). Two workers run the example
// pipeline of examples/sharepipeline (a kgoext.ShareConsumer over a transactional kgo
// client each) from tsa-in (one partition, shared by both) to tsa-out: one output per
// input, carrying the input id, in the same transaction as the input's ACCEPT; inputs whose
// id is divisible by 7 are REJECTed in the transaction and get no output (a transaction of
// only those is consume-only). Every cycle appends tsaChunk inputs and SIGKILLs the broker
// at a seeded moment: after a delay, or aimed at a worker's transaction (just after the
// acknowledgements were staged as TX_PENDING, inside the commit, just after a commit). The
// broker restarts on the same port and data directory; the workers either survive (their
// clients retry; the pipeline aborts what fails, and when it gives up the worker starts a
// new instance, whose InitProducerId fences the old one) or die with the broker and are
// restarted, under the same transactional ids (fencing aborts the open transactions) or
// new ones (nobody ends the old transactions: the coordinator aborts them at their
// timeout).
//
// After each restart the cycle waits until the share group is drained: start offset at the
// input's end and lag 0 (no record AVAILABLE, ACQUIRED or stuck TX_PENDING), within the
// transaction timeout plus slack. At the end, with every transaction decided, it checks that
// each input's output is in the read_committed output exactly once and none for rejected
// inputs, that read_committed returns exactly what the COMMIT markers commit (no aborted
// output visible), and that the broker logged no level=ERROR line.
func TestTxnShareAckCrashCycles(t *testing.T) {
	cycles := *flagTxnShareCycles
	if testing.Short() {
		cycles = min(cycles, 5)
	}
	chunk := max(tsaChunk, (tsaMinInputs+cycles-1)/cycles)
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 4))
	sb := newShareBroker(t, "")
	addr := sb.b.Addr
	adm := newAdmin(t, addr)
	raw := newRawClient(t, addr)
	createTopic(t, addr, tsaIn, 1, nil)
	createTopic(t, addr, tsaOut, 1, nil)
	setGroupConfig(t, raw, tsaGroup, "share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", "5000", "share.delivery.count.limit", strconv.Itoa(tsaDeliveryLimit))

	gen := 0
	pl := startTSAPipeline(addr, gen, nil)
	defer func() { pl.crash() }()
	testStart := time.Now()
	n := 0 // inputs so far
	var modes [3]int
	var phases [4]int
	var maxDrain time.Duration // from the kill to the drained group
	for c := range cycles {
		// Append the cycle's inputs, in batches of seeded sizes (the share fetch aligns
		// acquisitions to log batches, so small batches make small transactions).
		values := make([]string, chunk)
		for i := range values {
			values[i] = strconv.Itoa(n + i)
		}
		produceInputs(t, addr, tsaIn, rng, values, 20)
		n += chunk

		phase := tsaPhase(rng.IntN(4))
		delay := time.Duration(rng.IntN(60_000)) * time.Microsecond
		switch phase {
		case tsaStaged:
			delay = 0
		case tsaCommit, tsaCommitted:
			delay = time.Duration(rng.IntN(3_000)) * time.Microsecond
		}
		mode := rng.IntN(3) // 0 survive, 1 crash + same ids (fencing), 2 crash + new ids (timeout)
		phases[phase]++
		modes[mode]++
		before := pl.committed.Load()
		pl.cycle.Store(int64(c))
		note := phase.String()
		if phase != tsaAny && !pl.awaitPhase(phase, 10*time.Second) {
			note += "(not reached)"
		}
		time.Sleep(delay) // the fault's timing, drawn from the seed
		sb.kill()
		killedAt := time.Now()
		var crashTook time.Duration
		if mode > 0 {
			pl.crash()
			crashTook = time.Since(killedAt)
			if mode == 2 {
				gen++
			}
		}
		sb.start(addr)
		pl.expireRetired(t, raw)
		if mode > 0 {
			pl = startTSAPipeline(addr, gen, pl)
			pl.cycle.Store(int64(c))
		}

		// The pipeline drains everything: nothing AVAILABLE, ACQUIRED or TX_PENDING is left.
		st, lag, took := awaitShareDrained(t, adm, tsaGroup, tsaIn, int64(n), 10*time.Second+tsaTxnTimeout+eosAbortScan)
		maxDrain = max(maxDrain, time.Since(killedAt))
		if st != int64(n) || lag != 0 {
			t.Fatalf("cycle %d: share start offset %d lag %d %v after the restart, want %d and 0; pipeline errors: %s\nlast broker log lines:\n%s",
				c, st, lag, took.Round(time.Millisecond), n, pl.errs, sb.b.Logs())
		}
		checkLog(t, c, sb.logs)
		t.Logf("cycle %2d kill@%-9s+%5.1fms %-14s (stopped in %4dms) drained in %5dms: %5d inputs, txns +%3d committed, %d aborted and %d client resets so far",
			c, note, float64(delay.Microseconds())/1000, [...]string{"survive", "crash+fence", "crash+timeout"}[mode], crashTook.Milliseconds(),
			time.Since(killedAt).Milliseconds(), n, pl.committed.Load()-before, pl.aborted.Load(), pl.resets.Load())
		if t.Failed() {
			t.Fatalf("cycle %d failed; pipeline errors: %s", c, pl.errs)
		}
	}
	pl.stop()

	// Every transaction decided: none open, the output's last stable offset at its end.
	hwm := awaitTxnsDecided(t, adm, tsaOut, 10*time.Second+tsaTxnTimeout)
	checkTSAOutput(t, addr, n, hwm, pl)
	if st, lag := shareOffsets(t, adm, tsaGroup, tsaIn); st != int64(n) || lag != 0 {
		t.Errorf("final: share start offset %d lag %d, want %d and 0", st, lag, n)
	}
	pl.mu.Lock()
	var deepest int16
	for _, cnt := range pl.maxCount {
		deepest = max(deepest, cnt)
	}
	pl.mu.Unlock()
	t.Logf("%d cycles (kills at %v; survive %d, crash+fence %d, crash+timeout %d) in %v: %d inputs, %d transactions committed, %d aborted, %d client resets, highest delivery count %d, slowest kill-to-drained %v",
		cycles, tsaPhaseCounts(phases[:]), modes[0], modes[1], modes[2], time.Since(testStart).Round(time.Millisecond),
		n, pl.committed.Load(), pl.aborted.Load(), pl.resets.Load(), deepest, maxDrain.Round(time.Millisecond))
	t.Logf("pipeline client errors: %s", pl.errs)
	checkLog(t, -1, sb.logs)
	if code, took, err := sb.b.Terminate(termTimeout); err != nil || code != 0 {
		t.Errorf("final SIGTERM: exit code %d after %v, err %v", code, took, err)
	}
	checkLog(t, -1, sb.logs)
}

func tsaPhaseCounts(n []int) string {
	var out []string
	for i, c := range n {
		out = append(out, fmt.Sprintf("%s %d", tsaPhase(i), c))
	}
	return strings.Join(out, ", ")
}

// awaitShareDrained polls until group's start offset on topic[0] is end with lag 0, or the
// timeout passes; it returns the last values and the time waited.
func awaitShareDrained(t *testing.T, adm *kadm.Client, group, topic string, end int64, timeout time.Duration) (int64, int64, time.Duration) {
	t.Helper()
	start := time.Now()
	var st, lag int64
	_ = await.Until(timeout, 20*time.Millisecond, func() error { // the caller judges the last values
		if st, lag = shareOffsets(t, adm, group, topic); st != end || lag != 0 {
			return errors.New("not drained")
		}
		return nil
	})
	return st, lag, time.Since(start)
}

// awaitTxnsDecided waits until no transaction is open and topic's partition 0 has its
// last stable offset at its high watermark, and returns that.
func awaitTxnsDecided(t *testing.T, adm *kadm.Client, topic string, timeout time.Duration) int64 {
	t.Helper()
	var hwm int64
	if err := await.Until(timeout, 20*time.Millisecond, func() error {
		ctx := ctxTimeout(t, 10*time.Second)
		open, err := openTransactions(ctx, adm)
		if err != nil {
			return err
		}
		if open != "" {
			return errors.New(open)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return err
		}
		e, _ := ends.Lookup(topic, 0)
		s, _ := stable.Lookup(topic, 0)
		if e.Err != nil || s.Err != nil || e.Offset != s.Offset {
			return fmt.Errorf("last stable offset %d, high watermark %d (%v %v)", s.Offset, e.Offset, s.Err, e.Err)
		}
		hwm = e.Offset
		return nil
	}); err != nil {
		t.Fatalf("transactions not decided after %v: %v", timeout, err)
	}
	return hwm
}

// checkTSAOutput reads tsa-out up to hwm with read_committed and with read_uncommitted
// (applying the markers itself) and checks: both agree on what is committed, every
// non-rejected input 0..n-1 is committed exactly once and no rejected one, nothing else.
func checkTSAOutput(t *testing.T, addr string, n int, hwm int64, pl *tsaPipeline) {
	t.Helper()
	from, to := []int64{0}, []int64{hwm}
	rc, err := readRange(addr, tsaOut, kgo.ReadCommitted(), from, to)
	if err != nil {
		t.Fatalf("read_committed output: %v", err)
	}
	ru, err := readRange(addr, tsaOut, kgo.ReadUncommitted(), from, to)
	if err != nil {
		t.Fatalf("read_uncommitted output: %v", err)
	}
	pending := map[int64][]*kgo.Record{}
	decided := map[int64]string{}
	aborted := 0
	for _, r := range ru[0] {
		if !r.Attrs.IsControl() {
			pending[r.ProducerID] = append(pending[r.ProducerID], r)
			continue
		}
		if len(r.Key) < 4 {
			t.Errorf("output offset %d: control record with a %d-byte key", r.Offset, len(r.Key))
			continue
		}
		commit := binary.BigEndian.Uint16(r.Key[2:4]) == 1
		for _, d := range pending[r.ProducerID] {
			if commit {
				decided[d.Offset] = string(d.Value)
			} else {
				aborted++
			}
		}
		delete(pending, r.ProducerID)
	}
	for pid, ds := range pending {
		t.Errorf("output: producer %d has %d records (first at %d) without a marker below the last stable offset %d", pid, len(ds), ds[0].Offset, hwm)
	}
	got := map[int64]string{}
	for _, r := range rc[0] {
		if !r.Attrs.IsControl() {
			got[r.Offset] = string(r.Value)
		}
	}
	var bad []string
	for off, v := range decided {
		if g, ok := got[off]; !ok || g != v {
			bad = append(bad, fmt.Sprintf("output offset %d: %s committed by its marker, read_committed returned %q (present %v)", off, v, g, ok))
		}
	}
	times := map[int]int{}
	where := map[int][]int64{}
	for off, v := range got {
		if _, ok := decided[off]; !ok {
			bad = append(bad, fmt.Sprintf("output offset %d: read_committed returned %s, which no COMMIT marker commits (aborted output visible)", off, v))
		}
		id, err := strconv.Atoi(v)
		if err != nil || id < 0 || id >= n {
			bad = append(bad, fmt.Sprintf("output offset %d: %q is no input", off, v))
			continue
		}
		times[id]++
		where[id] = append(where[id], off)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for id := range n {
		switch want := 1 - btoi(tsaRejected(id)); {
		case times[id] == want:
		case times[id] == 0 && pl.maxCount[id] >= tsaDeliveryLimit:
			bad = append(bad, fmt.Sprintf("input %d: no output; delivered %d times (the limit): archived on an abort at the delivery limit, the kills were too many for it", id, pl.maxCount[id]))
		default:
			bad = append(bad, fmt.Sprintf("input %d (rejected %v, highest delivery count %d): %d committed outputs (at %v), want %d; commits that returned success: %s",
				id, tsaRejected(id), pl.maxCount[id], times[id], where[id], want, strings.Join(pl.commits[id], "; ")))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		t.Errorf("output check (%d inputs, %d committed outputs, %d aborted):\n%s", n, len(got), aborted, joinLines(bad))
	}
	t.Logf("output: %d committed records (every non-rejected input once), %d aborted records, high watermark %d", len(got), aborted, hwm)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
