package crashtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/brokerproc"
)

// flagEOSCycles is the number of kill/restart cycles of TestEOSPipelineCrashCycles. The CI
// default (30) takes about a minute; for a longer run:
//
//	go test ./crashtest/ -run TestEOSPipelineCrashCycles -eos-cycles 300 -timeout 60m -v
//	EXACTQ_EOS_CYCLES=300 go test ./crashtest/ -run TestEOS -timeout 60m
var flagEOSCycles = flag.Int("eos-cycles", envInt("EXACTQ_EOS_CYCLES", 30), "kill/restart cycles of TestEOSPipelineCrashCycles (env EXACTQ_EOS_CYCLES)")

const (
	eosIn       = "eos-in"
	eosOut      = "eos-out"
	eosParts    = 3
	eosGroup    = "eos-pipeline"
	eosTxnID    = "eos-pipeline-txn"
	eosInstance = "eos-pipeline-0" // static membership: a restarted pipeline takes its place at once
	// eosTxnTimeout is the pipeline's transaction.timeout.ms; hangTxnTimeout the hanging
	// producers'. The broker checks for timed-out transactions every eosAbortScan.
	eosTxnTimeout  = 3 * time.Second
	hangTxnTimeout = 2 * time.Second
	eosAbortScan   = 500 * time.Millisecond
	// The feeder offers eosFeedBurst input records every eosFeedTick (2000/s) after an
	// unpaced prefill, so that the pipeline has work whenever it runs.
	eosPrefill   = 10000
	eosFeedBurst = 20
	eosFeedTick  = 10 * time.Millisecond
)

// eosBrokerConfig is the broker's properties file: abort timed-out transactions quickly,
// and let a group that became empty rebalance without Kafka's 3 s initial delay.
var eosBrokerConfig = fmt.Sprintf(`# TestEOSPipelineCrashCycles
transaction.abort.timed.out.transaction.cleanup.interval.ms=%d
group.initial.rebalance.delay.ms=0
`, eosAbortScan.Milliseconds())

// TestEOSPipelineCrashCycles runs an exactly-once pipeline (kgo's GroupTransactSession:
// consume eos-in in a consumer group with read_committed, produce one output record per
// input to eos-out and commit the input offsets in the same transaction) while a feeder
// keeps appending uniquely numbered inputs, and SIGKILLs the broker at seeded random
// moments: after a random delay, or aimed into a step of a transaction (producing the
// outputs, inside End, just after a commit). The broker restarts on the same port and data directory; the pipeline either
// survives the restart (its client retries into the new broker) or is crashed with the
// broker and restarted (same group instance and transactional id: the new producer fences
// the old one). Some cycles leave a hanging transaction on eos-out just before the kill
// that nobody ever ends: the coordinator must abort it after its timeout; half of those
// cycles kill the broker again as soon as that abort starts (PrepareAbort written, markers
// perhaps not), and the next start must finish it.
//
// After each restart the pipeline is paused and, once every transaction is decided, the
// test checks with a read_committed reader of eos-out (cross-checked against a
// read_uncommitted reader that applies the COMMIT/ABORT markers itself) that each input
// appears at most once in the committed output, that every committed output is an input
// and no hanging transaction's record is committed, and that, per input partition, the
// group's committed offset is exactly the number of committed outputs from that partition
// and they are the inputs below it. At the end the feeder stops, the pipeline drains, and
// every input must appear exactly once; a SIGTERM and restart must change nothing. The
// broker must log no level=ERROR line.
func TestEOSPipelineCrashCycles(t *testing.T) {
	cycles := *flagEOSCycles
	if testing.Short() {
		cycles = min(cycles, 5)
	}
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 2))
	dataDir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "broker.properties")
	if err := os.WriteFile(cfgPath, []byte(eosBrokerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := newBrokerLog()
	start := func(listen string) *brokerproc.Process {
		t.Helper()
		return startBrokerOpts(t, brokerproc.Options{
			DataDir: dataDir, Listen: listen, Fsync: "always", LogLevel: "info",
			Echo: logs, Args: []string{"--config", cfgPath},
		})
	}
	b := start("")
	// Every transaction left open by a kill is aborted by the coordinator at most one
	// timeout plus one scan interval after it began; the rest is slack.
	quiesceTimeout := max(eosTxnTimeout, hangTxnTimeout) + eosAbortScan + 5*time.Second
	addr := b.Addr
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\nlast broker log lines:\n%s", append(args, b.Logs())...)
	}
	seg := "131072" // segments roll during the test, so kills land on rolls too
	createTopic(t, addr, eosIn, eosParts, map[string]*string{"internal.segment.bytes": &seg})
	createTopic(t, addr, eosOut, eosParts, map[string]*string{"internal.segment.bytes": &seg})

	adm := newAdmin(t, addr)
	st := newEOSState()
	fd := startFeeder(t, addr)
	pl := startPipeline(addr, 100, nil)
	testStart := time.Now()

	var survived, crashed, hangs int
	var maxQuiesce time.Duration
	var at [len(killPhases)]int
	for c := range cycles {
		runFor := time.Duration(100+rng.IntN(1000)) * time.Millisecond
		phase := killPhases[rng.IntN(len(killPhases))]
		frac := rng.Float64() // how far into the phase
		crashPipeline := rng.IntN(2) == 0
		hang := c == 1 || rng.IntN(3) == 0
		// Kill again as the coordinator starts aborting the hanging transaction: between
		// its PrepareAbort and its markers, at best, which the next start must finish.
		killAgain := hang && (c == 1 || rng.IntN(2) == 0)
		after := time.Duration(rng.IntN(800)) * time.Millisecond
		batch := 20 + rng.IntN(181) // records per transaction at most, for the next pipeline
		before := pl.snapshot()
		at[phase]++

		// The kill: after a seeded delay, optionally once the pipeline enters a given step of
		// a transaction, plus a seeded fraction of that step's typical length.
		select {
		case <-time.After(runFor):
		case <-b.Done():
			fail("cycle %d: broker exited on its own (%d)", c, b.ExitCode())
		}
		var hanger *hangTxn
		if hang {
			hanger = startHanger(t, addr, c)
			hangs++
		}
		phaseNote := phase.String()
		if phase != phaseAny && !pl.awaitPhase(phase, 30*time.Second) {
			phaseNote += "(not reached)"
		}
		if phase == phaseEnd {
			// End is short (~1-2 ms) and its part before EndTxn is durable, where a kill
			// leaves a transaction with acknowledged outputs for the restart to abort, is
			// shorter still: aim early.
			frac *= frac
		}
		jitter := time.Duration(frac * float64(pl.phaseLength(phase)))
		time.Sleep(jitter) // the fault's moment within the phase, drawn from the seed
		b.Kill()
		killedAt := time.Now()
		if hanger != nil {
			hanger.cl.Close() // it never ends its transaction
		}
		mode := "survive"
		if crashPipeline {
			mode = "crash"
			pl.crash()
			crashed++
		} else {
			survived++
		}
		b = start(addr)
		restartTook := time.Since(killedAt)
		if crashPipeline {
			pl = startPipeline(addr, batch, pl)
		}
		if hanger != nil {
			// Open when the broker died: after the restart it is still open or being
			// aborted (already, if the restart outlasted its timeout), never committed.
			hanger.state = describeTxn(t, adm, hanger.id)
			switch hanger.state {
			case "Ongoing", "PrepareAbort", "CompleteAbort":
			default:
				t.Errorf("cycle %d: hanging transaction %s is %s right after the restart, want Ongoing (or aborting)", c, hanger.id, hanger.state)
			}
			if killAgain {
				hanger.second = awaitTxnLeaves(t, adm, hanger.id, "Ongoing", quiesceTimeout)
				b.Kill()
				b = start(addr)
			}
		}

		// The pipeline resumes: at least one more transaction commits.
		if !pl.awaitCommits(before.committed+1, 60*time.Second) {
			fail("cycle %d: the pipeline committed no transaction within 60s of the restart; errors: %s", c, pl.errs)
		}
		time.Sleep(after) // keep it running under load for a seeded while
		if !pl.pause(60 * time.Second) {
			fail("cycle %d: the pipeline did not pause within 60s; errors: %s", c, pl.errs)
		}
		q := quiesce(t, adm, quiesceTimeout)
		maxQuiesce = max(maxQuiesce, q.waited)
		if q.err != nil {
			fail("cycle %d: %v", c, q.err)
		}
		st.readInput(t, addr)
		st.readOutput(t, addr, q.hwm)
		st.check(t, q.offsets, false)
		if hanger != nil {
			st.checkHanger(t, hanger)
			if d := describeTxn(t, adm, hanger.id); d != "CompleteAbort" {
				t.Errorf("cycle %d: hanging transaction %s is %s after the wait, want CompleteAbort", c, hanger.id, d)
			}
		}
		checkLog(t, c, logs)
		now := pl.snapshot()
		hangNote := ""
		if hanger != nil {
			hangNote = fmt.Sprintf(" hang(%s at restart", hanger.state)
			if hanger.second != "" {
				hangNote += ", killed again at " + hanger.second
			}
			hangNote += ")"
		}
		t.Logf("cycle %2d %-7s kill@%-7s+%5.2fms run=%4dms restart=%4dms quiesce=%5dms txns +%3d committed +%2d aborted +%d end-errors, %3d client I/O errors; inputs %6d, committed outputs %6d, aborted copies %4d (pipeline's %4d)%s",
			c, mode, phaseNote, float64(jitter.Microseconds())/1000, runFor.Milliseconds(), restartTook.Milliseconds(), q.waited.Milliseconds(),
			now.committed-before.committed, now.aborted-before.aborted, now.endErrs-before.endErrs, now.connErrs-before.connErrs,
			st.numInputs(), len(st.committed), st.aborted, st.abortedPipeline, hangNote)
		if t.Failed() {
			fail("cycle %d failed; pipeline errors: %s", c, pl.errs)
		}
		pl.resume()
	}

	// Final drain: stop the feeder, let the pipeline consume everything, then every input
	// must be in the committed output exactly once.
	fd.halt(t)
	ends, err := adm.ListEndOffsets(ctxTimeout(t, 30*time.Second), eosIn)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		fail("list input end offsets: %v", err)
	}
	drainStart := time.Now()
	if !awaitDrained(t, adm, ends, 120*time.Second) {
		fail("the pipeline did not consume all input within 120s; errors: %s", pl.errs)
	}
	drained := time.Since(drainStart)
	if !pl.pause(60 * time.Second) {
		fail("final: the pipeline did not pause")
	}
	q := quiesce(t, adm, quiesceTimeout)
	if q.err != nil {
		fail("final: %v", q.err)
	}
	st.readInput(t, addr)
	st.readOutput(t, addr, q.hwm)
	st.check(t, q.offsets, true)
	pl.crash()
	stats := pl.snapshot()
	t.Logf("%d cycles (pipeline survived %d kills, crashed with %d; kills at %v; %d hanging transactions) in %v, drain %v: %d inputs, each committed exactly once; %d transactions committed, %d aborted, %d end errors, %d sessions; %d aborted output copies (%d the pipeline's); slowest quiesce %v",
		cycles, survived, crashed, phaseCounts(at[:]), hangs, time.Since(testStart).Round(time.Millisecond), drained.Round(time.Millisecond),
		st.numInputs(), stats.committed, stats.aborted, stats.endErrs, stats.sessions, st.aborted, st.abortedPipeline, maxQuiesce.Round(time.Millisecond))
	t.Logf("pipeline client errors: %s", pl.errs)
	if t.Failed() {
		fail("final check failed")
	}

	// A clean stop and restart changes nothing.
	code, took, err := b.Terminate(termTimeout)
	if err != nil || code != 0 {
		fail("final SIGTERM: exit code %d after %v, err %v", code, took, err)
	}
	b = start(addr)
	q2 := quiesce(t, adm, 0) // nothing may be open after a clean shutdown
	if q2.err != nil {
		fail("after SIGTERM and restart: %v", q2.err)
	}
	again := newEOSState()
	again.readInput(t, addr)
	again.readOutput(t, addr, q2.hwm)
	again.check(t, q2.offsets, true)
	st.same(t, again, q.offsets, q2.offsets)
	checkLog(t, -1, logs)
	if code, took, err := b.Terminate(termTimeout); err != nil || code != 0 {
		t.Errorf("last SIGTERM: exit code %d after %v, err %v", code, took, err)
	}
	checkLog(t, -1, logs)
}

// killPhase is where in the pipeline's loop a kill is aimed.
type killPhase int

const (
	phaseAny     killPhase = iota // wherever the seeded delay ends
	phaseProduce                  // after Begin, while producing the outputs
	phaseEnd                      // inside End: flush, TxnOffsetCommit, heartbeat, EndTxn
	phaseEnded                    // right after a commit returned
)

var killPhases = [...]killPhase{phaseAny, phaseProduce, phaseEnd, phaseEnded}

func (k killPhase) String() string {
	return [...]string{"any", "produce", "end", "ended"}[k]
}

func phaseCounts(n []int) string {
	var out []string
	for i, c := range n {
		out = append(out, fmt.Sprintf("%s %d", killPhase(i), c))
	}
	return strings.Join(out, ", ")
}

// brokerLog receives every stderr line of every broker process of a test (a Process keeps
// only its last lines) and keeps the level=ERROR ones; with EXACTQ_TEST_LOG set it also
// echoes them all.
type brokerLog struct {
	echo io.Writer

	mu     sync.Mutex
	errors []string
}

func newBrokerLog() *brokerLog {
	l := &brokerLog{}
	if os.Getenv("EXACTQ_TEST_LOG") != "" {
		l.echo = os.Stderr
	}
	return l
}

// Write is called once per line.
func (l *brokerLog) Write(p []byte) (int, error) {
	if l.echo != nil {
		_, _ = l.echo.Write(p)
	}
	if bytes.Contains(p, []byte("level=ERROR")) {
		l.mu.Lock()
		l.errors = append(l.errors, strings.TrimSpace(string(p)))
		l.mu.Unlock()
	}
	return len(p), nil
}

func checkLog(t *testing.T, cycle int, l *brokerLog) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errors) > 0 {
		t.Errorf("cycle %d: broker logged errors:\n%s", cycle, strings.Join(l.errors, "\n"))
		l.errors = nil
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.AlwaysRetryEOF(), // its connections die with each kill
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// feeder appends inputs with unique ids (acks=all, idempotent) at a steady pace. Its one
// client survives every restart: unacknowledged batches are retried into the restarted
// broker with their sequence numbers, so a retried batch the broker had written before
// the kill must be deduplicated. The inputs are whatever the input topic holds (read back
// by the checks), so records the feeder saw fail need no bookkeeping.
type feeder struct {
	cl       *kgo.Client
	stop     atomic.Bool
	loop     sync.WaitGroup
	inflight sync.WaitGroup
	acks     atomic.Int64
	fails    atomic.Int64
}

func startFeeder(t *testing.T, addr string) *feeder {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(eosIn),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.MaxBufferedRecords(2000),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	)
	if err != nil {
		t.Fatal(err)
	}
	f := &feeder{cl: cl}
	f.loop.Add(1)
	go f.run()
	return f
}

func (f *feeder) run() {
	defer f.loop.Done()
	tick := time.NewTicker(eosFeedTick)
	defer tick.Stop()
	ctx := context.Background()
	for seq := 0; !f.stop.Load(); seq++ {
		// The prefill goes out unpaced.
		if seq >= eosPrefill && seq%eosFeedBurst == 0 {
			<-tick.C
		}
		id := fmt.Sprintf("in-%09d", seq)
		f.inflight.Add(1)
		f.cl.Produce(ctx, &kgo.Record{Key: []byte(id), Value: []byte(id), Partition: int32(seq % eosParts)},
			func(_ *kgo.Record, err error) {
				defer f.inflight.Done()
				if err != nil {
					f.fails.Add(1)
				} else {
					f.acks.Add(1)
				}
			})
	}
}

// halt stops feeding and flushes (the broker is up): every input is then acknowledged.
func (f *feeder) halt(t *testing.T) {
	t.Helper()
	f.stop.Store(true)
	f.loop.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.cl.Flush(ctx); err != nil {
		t.Errorf("feeder did not flush within 30s: %v", err)
	}
	f.cl.Close()
	f.inflight.Wait()
	t.Logf("feeder: %d inputs acknowledged, %d failed", f.acks.Load(), f.fails.Load())
}

// pipeline is the exactly-once consume-transform-produce loop under test, one goroutine
// driving one GroupTransactSession at a time: poll up to batch records (or what arrives
// within a few ms), begin, produce one output per input (key and value: the input's id),
// end with commit (kgo commits the consumed offsets in the transaction). A failed Begin or
// End is not retryable in kgo: the loop then closes the session and opens a new one with
// the same group instance and transactional id, as a restarted process would.
type pipeline struct {
	addr     string
	batch    int
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	ctl      chan pauseReq
	resumeCh chan struct{} // set by pause, closed by resume

	committed, aborted, endErrs, sessions atomic.Int64
	waiter                                atomic.Pointer[phaseWaiter]
	current                               atomic.Pointer[session] // the session in use
	connErrs                              atomic.Int64            // failed dials, reads, writes (ioHook)
	produceNs, endNs                      atomic.Int64            // running averages of the phases

	errs *errTally // the client errors of this pipeline and the ones it replaced
}

type pauseReq struct{ paused, resume chan struct{} }

// session is a GroupTransactSession closed at most once, by the loop or by crash.
type session struct {
	*kgo.GroupTransactSession
	once sync.Once
}

func (s *session) close() { s.once.Do(s.Close) }

// phaseWaiter is a test waiting for the pipeline to enter a phase.
type phaseWaiter struct {
	phase killPhase
	ch    chan struct{}
	once  sync.Once
}

// enter tells a test waiting for phase that the loop is there.
func (p *pipeline) enter(phase killPhase) {
	if w := p.waiter.Load(); w != nil && w.phase == phase {
		w.once.Do(func() { close(w.ch) })
	}
}

// awaitPhase waits until the loop next enters phase.
func (p *pipeline) awaitPhase(phase killPhase, timeout time.Duration) bool {
	w := &phaseWaiter{phase: phase, ch: make(chan struct{})}
	p.waiter.Store(w)
	defer p.waiter.CompareAndSwap(w, nil)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-w.ch:
		return true
	case <-timer.C:
	case <-p.done:
	}
	return false
}

type pipelineStats struct{ committed, aborted, endErrs, sessions, connErrs int64 }

// startPipeline starts a pipeline taking at most batch records per transaction; it carries
// on the counters of old, the pipeline it replaces, if any.
func startPipeline(addr string, batch int, old *pipeline) *pipeline {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pipeline{
		addr: addr, batch: batch, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), ctl: make(chan pauseReq), errs: newErrTally(),
	}
	if old != nil {
		p.inherit(old)
	}
	go p.run()
	return p
}

// inherit carries the counters and error tallies of the pipeline this one replaces.
func (p *pipeline) inherit(old *pipeline) {
	p.committed.Add(old.committed.Load())
	p.aborted.Add(old.aborted.Load())
	p.endErrs.Add(old.endErrs.Load())
	p.sessions.Add(old.sessions.Load())
	p.connErrs.Add(old.connErrs.Load())
	p.produceNs.Store(old.produceNs.Load())
	p.endNs.Store(old.endNs.Load())
	p.errs = old.errs
}

func (p *pipeline) snapshot() pipelineStats {
	return pipelineStats{p.committed.Load(), p.aborted.Load(), p.endErrs.Load(), p.sessions.Load(), p.connErrs.Load()}
}

func (p *pipeline) noteErr(where string, err error) { p.errs.add(where, err, 160) }

func (p *pipeline) newSession() (*session, error) {
	n := p.sessions.Add(1)
	var logOpt []kgo.Opt
	if os.Getenv("EXACTQ_EOS_KGO_LOG") != "" { // the pipeline's kgo log at info (debug: =debug)
		level := kgo.LogLevelInfo
		if os.Getenv("EXACTQ_EOS_KGO_LOG") == "debug" {
			level = kgo.LogLevelDebug
		}
		logOpt = append(logOpt, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string {
			return fmt.Sprintf("%s pipeline session %d: ", time.Now().Format("15:04:05.000000"), n)
		})))
	}
	s, err := kgo.NewGroupTransactSession(append(logOpt,
		kgo.SeedBrokers(p.addr),
		kgo.ConsumerGroup(eosGroup),
		kgo.InstanceID(eosInstance),
		kgo.ConsumeTopics(eosIn),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionalID(eosTxnID),
		kgo.TransactionTimeout(eosTxnTimeout),
		kgo.DefaultProduceTopic(eosOut),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.WithHooks(ioHook{&p.connErrs}),
	)...)
	if err != nil {
		return nil, err
	}
	return &session{GroupTransactSession: s}, nil
}

func (p *pipeline) run() {
	defer close(p.done)
	var sess *session
	defer func() {
		if sess != nil {
			sess.close()
		}
	}()
	for p.ctx.Err() == nil {
		select {
		case r := <-p.ctl:
			close(r.paused)
			select {
			case <-r.resume:
			case <-p.ctx.Done():
				return
			}
		default:
		}
		if sess == nil {
			s, err := p.newSession()
			if err != nil {
				p.noteErr("new session", err)
				return
			}
			sess = s
			p.current.Store(s)
			if p.ctx.Err() != nil { // crash saw the previous session
				return
			}
		}
		if !p.once(sess) {
			sess.close()
			sess = nil
		}
	}
}

// once runs one transaction; false means the session must be replaced.
func (p *pipeline) once(sess *session) bool {
	pctx, cancel := context.WithTimeout(p.ctx, 20*time.Millisecond)
	fs := sess.PollRecords(pctx, p.batch)
	cancel()
	if p.ctx.Err() != nil || fs.IsClientClosed() {
		return false
	}
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			p.noteErr("fetch", err)
		}
	})
	recs := fs.Records()
	if len(recs) == 0 {
		return true
	}
	if err := sess.Begin(); err != nil {
		p.noteErr("begin", err)
		return false
	}
	p.enter(phaseProduce)
	began := time.Now()
	e := kgo.AbortingFirstErrPromise(sess.Client())
	for _, r := range recs {
		sess.Produce(p.ctx, &kgo.Record{Key: r.Value, Value: r.Value}, e.Promise())
	}
	perr := e.Err()
	if perr != nil {
		p.noteErr("produce", perr)
	}
	p.enter(phaseEnd)
	ending := time.Now()
	average(&p.produceNs, ending.Sub(began))
	committed, err := sess.End(p.ctx, kgo.TransactionEndTry(perr == nil))
	average(&p.endNs, time.Since(ending))
	switch {
	case err != nil:
		if p.ctx.Err() == nil {
			p.endErrs.Add(1)
			p.noteErr("end", err)
		}
		return false
	case committed:
		p.committed.Add(1)
		p.enter(phaseEnded)
	default:
		p.aborted.Add(1)
	}
	return true
}

// average folds d into the running average at a.
func average(a *atomic.Int64, d time.Duration) {
	old := a.Load()
	if old == 0 {
		a.Store(int64(d))
		return
	}
	a.Store(old + (int64(d)-old)/8)
}

// phaseLength is the typical duration of phase, for aiming a kill inside it.
func (p *pipeline) phaseLength(phase killPhase) time.Duration {
	switch phase {
	case phaseProduce:
		return time.Duration(p.produceNs.Load())
	case phaseEnd:
		return time.Duration(p.endNs.Load())
	}
	return 5 * time.Millisecond
}

// ioHook counts the client's failed dials, reads and writes (requests cut by a kill) and
// group-management errors.
type ioHook struct{ n *atomic.Int64 }

func (h ioHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.count(err)
}

func (h ioHook) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.count(err)
}

func (h ioHook) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.count(err)
}

func (h ioHook) OnGroupManageError(err error) { h.count(err) }

func (h ioHook) count(err error) {
	if err != nil {
		h.n.Add(1)
	}
}

// pause waits until the loop is between transactions (the last End returned) and holds
// it there until resume.
func (p *pipeline) pause(timeout time.Duration) bool {
	r := pauseReq{paused: make(chan struct{}), resume: make(chan struct{})}
	select {
	case p.ctl <- r:
	case <-p.done:
		return false
	case <-time.After(timeout):
		return false
	}
	<-r.paused
	p.resumeCh = r.resume
	return true
}

func (p *pipeline) resume() {
	if p.resumeCh != nil {
		close(p.resumeCh)
		p.resumeCh = nil
	}
}

// crash stops the pipeline as if its process died: the session is closed without ending
// its transaction (a static member sends no LeaveGroup), failing whatever it buffered
// (the loop may be waiting for produce results from a dead broker).
func (p *pipeline) crash() {
	p.cancel()
	if s := p.current.Load(); s != nil {
		s.close()
	}
	<-p.done
}

// awaitCommits waits until n transactions committed in all, at most timeout or until the
// pipeline ends.
func (p *pipeline) awaitCommits(n int64, timeout time.Duration) bool {
	return await.Until(timeout, 5*time.Millisecond, func() error {
		if p.committed.Load() >= n {
			return nil
		}
		select {
		case <-p.done:
			return await.Stop(errors.New("the pipeline ended"))
		default:
			return errors.New("not yet")
		}
	}) == nil
}

// hangTxn is a transactional producer that writes to eos-out and disappears with the
// broker's kill, its transaction open; nobody reuses its transactional id.
type hangTxn struct {
	id     string
	cl     *kgo.Client
	values map[string]bool
	state  string // its state as described right after the restart
	second string // its state when the broker was killed again, if it was
}

func startHanger(t *testing.T, addr string, cycle int) *hangTxn {
	t.Helper()
	h := &hangTxn{id: fmt.Sprintf("eos-hang-%d", cycle), values: map[string]bool{}}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.TransactionalID(h.id),
		kgo.TransactionTimeout(hangTxnTimeout),
		kgo.DefaultProduceTopic(eosOut),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		t.Fatal(err)
	}
	h.cl = cl
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("hanger %s: begin: %v", h.id, err)
	}
	ctx := ctxTimeout(t, 30*time.Second)
	var rs []*kgo.Record
	for i := range 2 * eosParts {
		v := fmt.Sprintf("hang/%d/%d", cycle, i)
		h.values[v] = true
		rs = append(rs, &kgo.Record{Key: []byte(v), Value: []byte(v), Partition: int32(i % eosParts)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("hanger %s: produce: %v", h.id, err)
	}
	return h
}

// describeTxn returns the state of transactional id; it retries errors for a while (a
// client's first request after a kill can fail on its dead connection).
func describeTxn(t *testing.T, adm *kadm.Client, id string) string {
	t.Helper()
	var state string
	err := await.Until(30*time.Second, 50*time.Millisecond, func() error {
		ds, err := adm.DescribeTransactions(ctxTimeout(t, 30*time.Second), id)
		if err != nil {
			return err
		}
		d, ok := ds[id]
		switch {
		case !ok:
			return errors.New("not in the response")
		case d.Err != nil:
			return d.Err
		}
		state = d.State
		return nil
	})
	if err != nil {
		t.Fatalf("describe transaction %s: %v", id, err)
	}
	return state
}

// awaitTxnLeaves polls (as fast as the coordinator answers) until transactional id is no
// longer in state, and returns its new state.
func awaitTxnLeaves(t *testing.T, adm *kadm.Client, id, state string, timeout time.Duration) string {
	t.Helper()
	var now string
	if err := await.Until(timeout, 0, func() error {
		if now = describeTxn(t, adm, id); now == state {
			return fmt.Errorf("transaction %s still %s after its timeout", id, state)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return now
}

// quiescent is the state of eos-out and the group once every transaction is decided.
type quiescent struct {
	hwm     []int64 // eos-out high watermarks, equal to its last stable offsets
	offsets []int64 // the group's committed offsets on eos-in, -1 for none
	waited  time.Duration
	err     error
}

var openTxnStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}

// quiesce waits (the pipeline paused) until no transaction is open or being decided, the
// last stable offset of every eos-out partition has reached its high watermark, and the
// group's offsets are stable (OffsetFetch with require_stable). Transactions left open by
// a kill get there only when the coordinator aborts them at their timeout.
func quiesce(t *testing.T, adm *kadm.Client, timeout time.Duration) quiescent {
	t.Helper()
	start := time.Now()
	var q quiescent
	// Request errors (a client's first request after a restart can fail on its dead
	// connection) are retried for at least 10 s, also when timeout is 0.
	err := await.Until(max(timeout, 10*time.Second), 20*time.Millisecond, func() error {
		now, reason, err := quiescentNow(adm)
		switch {
		case err != nil:
			return err
		case reason == "":
			q = now
			return nil
		case time.Since(start) >= timeout:
			return await.Stop(errors.New(reason))
		}
		return errors.New(reason)
	})
	q.waited = time.Since(start)
	if err != nil {
		q.err = fmt.Errorf("not quiescent %v after the pipeline paused: %w", q.waited.Round(time.Millisecond), err)
	}
	return q
}

// quiescentNow returns the state and "" when quiescent, else the reason it is not.
func quiescentNow(adm *kadm.Client) (quiescent, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open, err := openTransactions(ctx, adm)
	if err != nil {
		return quiescent{}, "", err
	}
	if open != "" {
		return quiescent{}, open, nil
	}
	ends, err := adm.ListEndOffsets(ctx, eosOut)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return quiescent{}, "", fmt.Errorf("list end offsets: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, eosOut)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return quiescent{}, "", fmt.Errorf("list read_committed offsets: %w", err)
	}
	q := quiescent{hwm: make([]int64, eosParts), offsets: make([]int64, eosParts)}
	for p := range int32(eosParts) {
		e, ok1 := ends.Lookup(eosOut, p)
		s, ok2 := stable.Lookup(eosOut, p)
		if !ok1 || !ok2 {
			return quiescent{}, "", fmt.Errorf("ListOffsets lacks partition %d", p)
		}
		if s.Offset != e.Offset {
			return quiescent{}, fmt.Sprintf("%s[%d] last stable offset %d < high watermark %d", eosOut, p, s.Offset, e.Offset), nil
		}
		q.hwm[p] = e.Offset
	}
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), eosGroup)
	if err != nil {
		if errors.Is(err, kerr.UnstableOffsetCommit) {
			return quiescent{}, "group offsets unstable", nil
		}
		return quiescent{}, "", fmt.Errorf("fetch offsets: %w", err)
	}
	for p := range int32(eosParts) {
		q.offsets[p] = -1
		if o, ok := offs.Lookup(eosIn, p); ok {
			if errors.Is(o.Err, kerr.UnstableOffsetCommit) {
				return quiescent{}, fmt.Sprintf("group offset of %s[%d] unstable", eosIn, p), nil
			}
			if o.Err != nil {
				return quiescent{}, "", fmt.Errorf("fetch offsets %s[%d]: %w", eosIn, p, o.Err)
			}
			q.offsets[p] = o.At
		}
	}
	return q, "", nil
}

// awaitDrained waits until the group's committed offsets reach ends on every partition.
func awaitDrained(t *testing.T, adm *kadm.Client, ends kadm.ListedOffsets, timeout time.Duration) bool {
	t.Helper()
	return await.Until(timeout, 50*time.Millisecond, func() error {
		offs, err := adm.FetchOffsets(ctxTimeout(t, 30*time.Second), eosGroup)
		if err != nil {
			return err
		}
		for p := range int32(eosParts) {
			e, _ := ends.Lookup(eosIn, p)
			o, ok := offs.Lookup(eosIn, p)
			if !ok || o.Err != nil || o.At < e.Offset {
				return fmt.Errorf("%s[%d] committed at %d, end %d", eosIn, p, o.At, e.Offset)
			}
		}
		return nil
	}) == nil
}

// outRec is a data record of eos-out as the read_uncommitted reader saw it.
type outRec struct {
	at  loc
	pid int64
	id  string
}

// eosState is what the checks have read so far. Both topics are read incrementally, each
// time up to a quiescent high watermark: below it every record is final.
type eosState struct {
	inNext []int64
	inIDs  [][]string     // input ids by partition and offset
	inLoc  map[string]loc // input id -> where it is

	outNext         []int64
	committed       map[string]loc // committed output id -> where (read_committed)
	byLoc           map[loc]string // the same by location
	aborted         int            // aborted data records (read_uncommitted + markers)
	abortedPipeline int            // of which the pipeline's (not a hanging transaction's)
	abortedV        map[string]bool
	pending         []map[int64][]outRec // open transaction data per partition and producer id
}

func newEOSState() *eosState {
	s := &eosState{
		inNext: make([]int64, eosParts), inIDs: make([][]string, eosParts), inLoc: map[string]loc{},
		outNext: make([]int64, eosParts), committed: map[string]loc{}, byLoc: map[loc]string{},
		abortedV: map[string]bool{}, pending: make([]map[int64][]outRec, eosParts),
	}
	for p := range s.pending {
		s.pending[p] = map[int64][]outRec{}
	}
	return s
}

func (s *eosState) numInputs() int { return len(s.inLoc) }

// readRange reads topic's partitions from from[p] up to to[p] with isolation iso, keeping
// control records, and returns the records of each partition in offset order. It stops
// on seeing offset to[p]-1 of each partition: at a quiescent moment that is a record both
// isolation levels return (a transaction's marker, or a committed or non-transactional
// record).
func readRange(addr, topic string, iso kgo.IsolationLevel, from, to []int64) ([][]*kgo.Record, error) {
	out := make([][]*kgo.Record, len(from))
	want := map[int32]kgo.Offset{}
	for p := range from {
		if to[p] > from[p] {
			want[int32(p)] = kgo.NewOffset().At(from[p])
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	remaining := len(want)
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var at []string
			for p := range out {
				last := from[p] - 1
				if n := len(out[p]); n > 0 {
					last = out[p][n-1].Offset
				}
				at = append(at, fmt.Sprintf("%d: last %d want %d", p, last, to[p]-1))
			}
			return nil, fmt.Errorf("reading %s: %v (%s)", topic, ctx.Err(), strings.Join(at, ", "))
		}
		for _, fe := range fs.Errors() {
			return nil, fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			p := r.Partition
			if r.Offset >= to[p] {
				return
			}
			if n := len(out[p]); n > 0 && r.Offset <= out[p][n-1].Offset {
				return // seen already (cannot happen; be safe against refetches)
			}
			out[p] = append(out[p], r)
			if r.Offset == to[p]-1 {
				remaining--
			}
		})
	}
	return out, nil
}

// readInput reads eos-in from where the last read ended to its current high watermark.
// The feeder writes non-transactionally, so offsets are dense and ids unique.
func (s *eosState) readInput(t *testing.T, addr string) {
	t.Helper()
	adm := newAdmin(t, addr)
	ends, err := adm.ListEndOffsets(ctxTimeout(t, 30*time.Second), eosIn)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list input end offsets: %v", err)
	}
	to := make([]int64, eosParts)
	for p := range int32(eosParts) {
		e, _ := ends.Lookup(eosIn, p)
		to[p] = e.Offset
		if to[p] < s.inNext[p] {
			t.Fatalf("input partition %d: high watermark %d below %d read before", p, to[p], s.inNext[p])
		}
	}
	recs, err := readRange(addr, eosIn, kgo.ReadUncommitted(), s.inNext, to)
	if err != nil {
		t.Fatalf("read input: %v", err)
	}
	for p, rs := range recs {
		for _, r := range rs {
			if r.Attrs.IsControl() || r.Offset != s.inNext[p] {
				t.Fatalf("input partition %d: record at offset %d (control %v), want a data record at %d", p, r.Offset, r.Attrs.IsControl(), s.inNext[p])
			}
			id := string(r.Value)
			at := loc{int32(p), r.Offset}
			if prev, dup := s.inLoc[id]; dup {
				t.Errorf("input %s stored twice: %v and %v (idempotent producer duplicated it)", id, prev, at)
			}
			s.inLoc[id] = at
			s.inIDs[p] = append(s.inIDs[p], id)
			s.inNext[p]++
		}
	}
}

// readOutput reads eos-out up to hwm (a quiescent high watermark) twice: with
// read_committed, and with read_uncommitted applying the markers itself; both must agree
// on what is committed. Committed ids must be unique and never a hanger's.
func (s *eosState) readOutput(t *testing.T, addr string, hwm []int64) {
	t.Helper()
	rc, err := readRange(addr, eosOut, kgo.ReadCommitted(), s.outNext, hwm)
	if err != nil {
		t.Fatalf("read_committed output: %v", err)
	}
	ru, err := readRange(addr, eosOut, kgo.ReadUncommitted(), s.outNext, hwm)
	if err != nil {
		t.Fatalf("read_uncommitted output: %v", err)
	}
	for p := range eosParts {
		// read_uncommitted: every offset is there; data waits for its producer's marker.
		decided := map[loc]string{} // committed by the markers
		next := s.outNext[p]
		for _, r := range ru[p] {
			if r.Offset != next {
				t.Errorf("output partition %d: read_uncommitted record at offset %d, want %d (offsets not dense)", p, r.Offset, next)
			}
			next = r.Offset + 1
			at := loc{int32(p), r.Offset}
			if !r.Attrs.IsControl() {
				if !r.Attrs.IsTransactional() {
					t.Errorf("output %v: non-transactional record %q", at, r.Value)
				}
				s.pending[p][r.ProducerID] = append(s.pending[p][r.ProducerID], outRec{at, r.ProducerID, string(r.Value)})
				continue
			}
			if len(r.Key) < 4 {
				t.Errorf("output %v: control record with a %d-byte key", at, len(r.Key))
				continue
			}
			commit := binary.BigEndian.Uint16(r.Key[2:4]) == 1
			for _, d := range s.pending[p][r.ProducerID] {
				if commit {
					decided[d.at] = d.id
				} else {
					s.aborted++
					s.abortedV[d.id] = true
					if !strings.HasPrefix(d.id, "hang/") {
						s.abortedPipeline++
					}
				}
			}
			delete(s.pending[p], r.ProducerID)
		}
		for pid, ds := range s.pending[p] {
			t.Errorf("output partition %d: producer %d has %d records (first at %d) without a marker below the last stable offset %d",
				p, pid, len(ds), ds[0].at.offset, hwm[p])
		}
		// read_committed must return exactly the committed data, with the markers.
		got := map[loc]string{}
		for _, r := range rc[p] {
			if !r.Attrs.IsControl() {
				got[loc{int32(p), r.Offset}] = string(r.Value)
			}
		}
		for at, id := range decided {
			if g, ok := got[at]; !ok {
				t.Errorf("output %v: %s committed (COMMIT marker follows it) but read_committed skipped it", at, id)
			} else if g != id {
				t.Errorf("output %v: read_committed returned %q, read_uncommitted %q", at, g, id)
			}
		}
		for at, id := range got {
			if _, ok := decided[at]; !ok {
				t.Errorf("output %v: read_committed returned %s, which is not committed (aborted or without a marker)", at, id)
			}
		}
		// Committed ids are unique: never two committed outputs for one input.
		ats := make([]loc, 0, len(got))
		for at := range got {
			ats = append(ats, at)
		}
		sort.Slice(ats, func(i, j int) bool { return ats[i].offset < ats[j].offset })
		for _, at := range ats {
			id := got[at]
			if prev, dup := s.committed[id]; dup {
				t.Errorf("input %s committed twice in the output: at %v and %v", id, prev, at)
				continue
			}
			s.committed[id] = at
			s.byLoc[at] = id
		}
		s.outNext[p] = hwm[p]
	}
}

// check verifies the committed output against the inputs and the group's offsets: every
// committed output is an input, and on each input partition the committed offset is the
// number of committed outputs from it, which are exactly the inputs below that offset.
// With final, every input must be committed (exactly once, given uniqueness).
func (s *eosState) check(t *testing.T, offsets []int64, final bool) {
	t.Helper()
	fromPart := make([]int64, eosParts)
	maxOff := make([]int64, eosParts)
	for p := range maxOff {
		maxOff[p] = -1
	}
	var bad []string
	for id, at := range s.committed {
		in, ok := s.inLoc[id]
		if !ok {
			bad = append(bad, fmt.Sprintf("committed output %q at %v is no input", id, at))
			continue
		}
		fromPart[in.partition]++
		maxOff[in.partition] = max(maxOff[in.partition], in.offset)
	}
	for p := range eosParts {
		committed := max(offsets[p], 0) // -1: nothing committed yet
		if committed > int64(len(s.inIDs[p])) {
			bad = append(bad, fmt.Sprintf("partition %d: committed offset %d beyond the %d inputs", p, committed, len(s.inIDs[p])))
		}
		if fromPart[p] != committed || maxOff[p] >= committed {
			var missing []string
			for o := int64(0); o < min(committed, int64(len(s.inIDs[p]))) && len(missing) < 5; o++ {
				if _, ok := s.committed[s.inIDs[p][o]]; !ok {
					missing = append(missing, fmt.Sprintf("%s@%d", s.inIDs[p][o], o))
				}
			}
			bad = append(bad, fmt.Sprintf("partition %d: group committed offset %d, but %d committed outputs come from it (highest input offset %d); below the offset without output: %v",
				p, offsets[p], fromPart[p], maxOff[p], missing))
		}
		if final && committed != int64(len(s.inIDs[p])) {
			bad = append(bad, fmt.Sprintf("partition %d: after the drain the committed offset is %d of %d inputs", p, committed, len(s.inIDs[p])))
		}
	}
	if final && len(s.committed) != len(s.inLoc) {
		bad = append(bad, fmt.Sprintf("after the drain %d of %d inputs are in the committed output", len(s.committed), len(s.inLoc)))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 15 {
			bad = append(bad[:15], fmt.Sprintf("... and %d more", len(bad)-15))
		}
		t.Errorf("committed output and offsets disagree:\n%s", joinLines(bad))
	}
}

// checkHanger verifies that the hanging transaction's records were written and aborted.
func (s *eosState) checkHanger(t *testing.T, h *hangTxn) {
	t.Helper()
	for v := range h.values {
		if at, ok := s.committed[v]; ok {
			t.Errorf("hanging transaction %s: its record %s is committed at %v", h.id, v, at)
		}
		if !s.abortedV[v] {
			t.Errorf("hanging transaction %s: its acknowledged record %s is not among the aborted records", h.id, v)
		}
	}
}

// same verifies that a state read from scratch equals this one.
func (s *eosState) same(t *testing.T, o *eosState, offs, offs2 []int64) {
	t.Helper()
	for p := range eosParts {
		if offs[p] != offs2[p] {
			t.Errorf("partition %d: committed offset %d before the clean restart, %d after", p, offs[p], offs2[p])
		}
		if s.inNext[p] != o.inNext[p] || s.outNext[p] != o.outNext[p] {
			t.Errorf("partition %d: input/output end %d/%d before the clean restart, %d/%d after", p, s.inNext[p], s.outNext[p], o.inNext[p], o.outNext[p])
		}
	}
	if len(s.committed) != len(o.committed) || s.aborted != o.aborted {
		t.Errorf("before the clean restart %d committed and %d aborted outputs, after %d and %d", len(s.committed), s.aborted, len(o.committed), o.aborted)
	}
	n := 0
	for id, at := range s.committed {
		if at2, ok := o.committed[id]; !ok || at2 != at {
			if n++; n <= 5 {
				t.Errorf("committed output %s at %v before the clean restart, at %v (present %v) after", id, at, at2, ok)
			}
		}
	}
}
