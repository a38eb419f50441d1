package crashtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/brokerproc"
)

// The checkpoint-lifecycle crash tests (issue 7, acceptance 1 and 2) run worker PROCESSES
// (crashtest/internal/eosworker: eos.Checkpointer driven by a framework-style loop with its
// own checkpoint file) against the exactq binary, and kill either of them with SIGKILL at
// each step of a checkpoint:
//
//	go test ./crashtest/ -run TestLifecycleCrash -v              # every step, worker and broker
//	go test ./crashtest/ -run TestLifecycleRandomCrashes -v      # CI: seeds 1,2,3, 25 faults each
//	go test ./crashtest/ -run TestLifecycleRandomCrashes -seed 1234 -lifecycle-cycles 1000 -timeout 60m -v
//	EXACTQ_LIFECYCLE_CYCLES=1000 EXACTQ_CRASH_SEED=1234 go test ./crashtest/ -run TestLifecycleRandomCrashes -timeout 60m
//
// All traffic goes through a kafkaProxy that the broker advertises, so that a kill can
// land exactly when a checkpoint's EndTxn has reached the broker.

// The steps of a checkpoint, as the worker names them.
const (
	stepBeforePrepare = "before-prepare"
	stepAfterPrepare  = "after-prepare"
	stepAfterSnapshot = "after-snapshot"
	stepAfterDurable  = "after-durable"
	stepDuringCommit  = "during-commit"
)

// endTxnKey is the API key of EndTxn.
const endTxnKey = 26

var lcSteps = []string{stepBeforePrepare, stepAfterPrepare, stepAfterSnapshot, stepAfterDurable, stepDuringCommit}

// lcBrokerConfig is added to shareBrokerConfig: two-phase commit, and short share sessions
// so that a killed worker's member leaves the group (and its records come back) quickly.
const lcBrokerConfig = `transaction.two.phase.commit.enable=true
group.share.session.timeout.ms=3000
`

const (
	lcLockMs        = 3000 // the groups' share.record.lock.duration.ms
	lcDeliveryLimit = 10   // the groups' share.delivery.count.limit (the broker's maximum)
	lcBatch         = 10   // inputs per checkpoint at most
)

// lcEnv is a broker with two-phase commit, reached through a kafkaProxy (which it
// advertises), and the worker binary.
type lcEnv struct {
	t      *testing.T
	sb     *shareBroker
	proxy  *kafkaProxy
	addr   string // the proxy's: what every client dials
	adm    *kadm.Client
	raw    *kgo.Client
	worker string // the eosworker binary
}

func newLCEnv(t *testing.T) *lcEnv {
	t.Helper()
	bin := buildProgram(t, "./crashtest/internal/eosworker")
	e := &lcEnv{t: t, proxy: newKafkaProxy(t), worker: bin,
		sb: &shareBroker{t: t, dataDir: t.TempDir(), cfgPath: filepath.Join(t.TempDir(), "broker.properties"), logs: newBrokerLog()}}
	if err := os.WriteFile(e.sb.cfgPath, []byte(shareBrokerConfig+lcBrokerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	e.startBroker("")
	e.addr = e.proxy.addr()
	e.adm, e.raw = newAdmin(t, e.addr), newRawClient(t, e.addr)
	return e
}

// buildProgram builds the main package pkg of the module into a temporary directory.
func buildProgram(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	root, err := brokerproc.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startBroker starts the broker on listen ("": a free port), advertising the proxy.
func (e *lcEnv) startBroker(listen string) {
	e.sb.b = startBrokerOpts(e.sb.t, brokerproc.Options{
		DataDir: e.sb.dataDir, Listen: listen, Fsync: "always", LogLevel: "info", Echo: e.sb.logs,
		Args: []string{"--config", e.sb.cfgPath, "--advertised", e.proxy.addr()},
	})
	e.proxy.setUpstream(e.sb.b.Addr)
}

// restartBroker SIGKILLs the broker and starts it again on the same port and data.
func (e *lcEnv) restartBroker() {
	addr := e.sb.b.Addr
	e.sb.b.Kill()
	e.startBroker(addr)
}

// pipeline creates the input and output topics (one partition each) and the group.
func (e *lcEnv) pipeline(in, out, group string) {
	e.t.Helper()
	createTopic(e.t, e.addr, in, 1, nil)
	createTopic(e.t, e.addr, out, 1, nil)
	setGroupConfig(e.t, e.raw, group, "share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", strconv.Itoa(lcLockMs), "share.delivery.count.limit", strconv.Itoa(lcDeliveryLimit))
}

// inputValues are the inputs from..to-1: their ids as decimal strings.
func inputValues(from, to int) []string {
	vs := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		vs = append(vs, strconv.Itoa(i))
	}
	return vs
}

// lcLine is one stdout line of a worker, with the run (process start) it came from.
type lcLine struct {
	run  int
	text string
}

// lcWorker is one worker (a transactional id with its checkpoint file) across the
// processes that run it: a supervisor starts the process again whenever it dies (SIGKILL,
// or exit code 3: fenced, cannot go on), until stop.
type lcWorker struct {
	e           *lcEnv
	name, txnID string
	state       string
	args        []string

	mu       sync.Mutex
	lines    []lcLine
	notify   chan struct{} // closed and replaced on every line
	runs     int
	proc     *exec.Cmd
	stdin    io.WriteCloser
	stopping bool // the test ends: kill what runs, start nothing
	// finishing: stop has asked for a graceful end; a run killed before it saw the
	// request (the test's last fault) is followed by one more, asked to stop at once, so
	// that the last run always shows the worker's clean shutdown.
	finishing bool
	exits     []string // how each run ended
	failed    []string // runs that ended with an unexpected exit code
	done      chan struct{}
}

// startWorker starts a supervised worker; env applies to its first run only.
func (e *lcEnv) startWorker(name, group, in, out string, env ...string) *lcWorker {
	e.t.Helper()
	w := &lcWorker{e: e, name: name, txnID: "lc-" + name, state: filepath.Join(e.t.TempDir(), name+".ckpt"),
		notify: make(chan struct{}), done: make(chan struct{})}
	w.args = []string{"-brokers", e.addr, "-group", group, "-in", in, "-out", out, "-txn-id", w.txnID,
		"-state", w.state, "-batch", strconv.Itoa(lcBatch), "-interval", "100ms"}
	go w.supervise(env)
	e.t.Cleanup(func() {
		w.mu.Lock()
		w.stopping = true
		if w.proc != nil {
			_ = w.proc.Process.Kill()
		}
		w.mu.Unlock()
		<-w.done
	})
	return w
}

func (w *lcWorker) supervise(env []string) {
	defer close(w.done)
	for {
		w.mu.Lock()
		if w.stopping {
			w.mu.Unlock()
			return
		}
		w.runs++
		run := w.runs
		cmd := exec.Command(w.e.worker, w.args...)
		cmd.Env = append(os.Environ(), env...)
		env = nil
		stdin, err1 := cmd.StdinPipe()
		stdout, err2 := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := errors.Join(err1, err2)
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			w.failed = append(w.failed, fmt.Sprintf("run %d: start: %v", run, err))
			w.mu.Unlock()
			return
		}
		w.proc, w.stdin = cmd, stdin
		if w.finishing {
			_, _ = io.WriteString(stdin, "stop\n")
		}
		w.mu.Unlock()

		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			w.add(run, sc.Text())
		}
		err = cmd.Wait()
		code, how := 0, "exit 0"
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			how = fmt.Sprintf("exit %d", code)
			if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
				code, how = -1, "killed by "+st.Signal().String()
			}
		} else if err != nil {
			code, how = -2, err.Error()
		}
		w.mu.Lock()
		w.proc, w.stdin = nil, nil
		w.exits = append(w.exits, how)
		if code != 0 && code != -1 && code != 3 {
			w.failed = append(w.failed, fmt.Sprintf("run %d: %s; stderr: %s", run, how, stderr.String()))
		}
		stop := w.stopping || code == 0 || len(w.failed) > 0
		w.mu.Unlock()
		if stop {
			return
		}
		time.Sleep(50 * time.Millisecond) // paces restarts, like a supervisor's restart delay
	}
}

func (w *lcWorker) add(run int, text string) {
	w.mu.Lock()
	w.lines = append(w.lines, lcLine{run, text})
	close(w.notify)
	w.notify = make(chan struct{})
	w.mu.Unlock()
}

// mark is the number of lines so far: await looks at lines after a mark.
func (w *lcWorker) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.lines)
}

// await waits for a line after mark starting with prefix and returns it, its index, ok.
func (w *lcWorker) await(mark int, prefix string, timeout time.Duration) (lcLine, int, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		for i := mark; i < len(w.lines); i++ {
			if strings.HasPrefix(w.lines[i].text, prefix) {
				l := w.lines[i]
				w.mu.Unlock()
				return l, i, true
			}
		}
		mark = len(w.lines)
		ch := w.notify
		w.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return lcLine{}, -1, false
		}
	}
}

// send writes a command line to the running process (lost if none runs).
func (w *lcWorker) send(cmd string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stdin != nil {
		_, _ = io.WriteString(w.stdin, cmd+"\n")
	}
}

// kill SIGKILLs the running process; the supervisor starts another.
func (w *lcWorker) kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil {
		_ = w.proc.Process.Kill()
	}
}

// stop asks the worker to finish and exit, and waits for it: the last run must exit 0.
func (w *lcWorker) stop(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	w.finishing = true
	if w.stdin != nil {
		_, _ = io.WriteString(w.stdin, "stop\n")
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-time.After(60 * time.Second):
		w.kill()
		t.Errorf("worker %s did not stop within 60s; its last lines:\n%s", w.name, w.tail(20))
		<-w.done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.exits); n == 0 || w.exits[n-1] != "exit 0" {
		t.Errorf("worker %s: last run ended %v, want exit 0", w.name, w.exits)
	}
}

// failures returns the runs that ended with an unexpected exit code.
func (w *lcWorker) failures() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.failed)
}

func (w *lcWorker) tail(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, l := range w.lines[max(0, len(w.lines)-n):] {
		fmt.Fprintf(&b, "  [%s run %d] %s\n", w.name, l.run, l.text)
	}
	return b.String()
}

func (w *lcWorker) snapshotLines() []lcLine {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lines)
}

// lastStored reads the worker's checkpoint file: the number of its last durable checkpoint.
func (w *lcWorker) lastStored(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(w.state)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		N int64 `json:"n"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("checkpoint file of %s: %v", w.name, err)
	}
	return s.N
}

// kv parses the key=value words of a worker line; err= takes the rest of the line.
func kv(line string) map[string]string {
	out := map[string]string{}
	if i := strings.Index(line, " err="); i >= 0 {
		out["err"] = line[i+5:]
		line = line[:i]
	}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}

// lcInput is one input of a batch line: its id and delivery count.
type lcInput struct {
	id    int
	count int
}

// parseBatch parses "batch ckpt=<n> ids=<id>/<count>,...".
func parseBatch(line string) (int64, []lcInput, error) {
	f := kv(line)
	n, err := strconv.ParseInt(f["ckpt"], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("batch line %q: %v", line, err)
	}
	var ins []lcInput
	for _, s := range strings.Split(f["ids"], ",") {
		a, b, _ := strings.Cut(s, "/")
		id, err1 := strconv.Atoi(a)
		c, err2 := strconv.Atoi(b)
		if err := errors.Join(err1, err2); err != nil {
			return 0, nil, fmt.Errorf("batch line %q: %v", line, err)
		}
		ins = append(ins, lcInput{id, c})
	}
	return n, ins, nil
}

// lcStats counts what the workers' lines say happened.
type lcStats struct {
	batches, committed, aborted      int // batch lines, committed lines, aborted lines
	recoverCommits, recoverAborts    int // Recover found a transaction and committed / aborted it
	runs, kills, restarts, maxCount  int
	durable                          int64 // checkpoints stored, over all workers
	committedInputs, redeliveredIdxs int
}

// checkLedger checks the workers' own account against the inputs 0..n-1: the durable
// checkpoints of all workers (1..the number in each checkpoint file), each the last batch
// the worker printed with that number, hold every input exactly once. Recover commits the
// transaction of a durable checkpoint and aborts any later one, so those batches are the
// inputs acknowledged: exactly once each. It also checks that no delivery reached the
// group's delivery limit and that no run ended with an unexpected exit code.
func checkLedger(t *testing.T, ws []*lcWorker, n int) lcStats {
	t.Helper()
	var st lcStats
	times := make([]int, n)
	where := map[int][]string{}
	for _, w := range ws {
		for _, f := range w.failures() {
			t.Errorf("worker %s: %s", w.name, f)
		}
		last := map[int64][]lcInput{}
		for _, l := range w.snapshotLines() {
			f := kv(l.text)
			switch {
			case strings.HasPrefix(l.text, "batch "):
				k, ins, err := parseBatch(l.text)
				if err != nil {
					t.Fatal(err)
				}
				last[k] = ins
				st.batches++
				for _, in := range ins {
					st.maxCount = max(st.maxCount, in.count)
				}
			case strings.HasPrefix(l.text, "committed "):
				st.committed++
			case strings.HasPrefix(l.text, "aborted "):
				st.aborted++
			case strings.HasPrefix(l.text, "recovered ") && f["found"] == "true":
				if f["committed"] == "true" {
					st.recoverCommits++
				} else {
					st.recoverAborts++
				}
			}
		}
		w.mu.Lock()
		st.runs += w.runs
		for _, e := range w.exits {
			switch {
			case strings.HasPrefix(e, "killed"):
				st.kills++
			case e == "exit 3":
				st.restarts++
			}
		}
		w.mu.Unlock()
		durable := w.lastStored(t)
		st.durable += durable
		for k := int64(1); k <= durable; k++ {
			ins, ok := last[k]
			if !ok {
				t.Errorf("worker %s: durable checkpoint %d has no batch line", w.name, k)
				continue
			}
			for _, in := range ins {
				if in.id < 0 || in.id >= n {
					t.Errorf("worker %s checkpoint %d: input %d is not one of the %d inputs", w.name, k, in.id, n)
					continue
				}
				times[in.id]++
				where[in.id] = append(where[in.id], fmt.Sprintf("%s#%d", w.name, k))
				st.committedInputs++
			}
		}
	}
	var bad []string
	for id, c := range times {
		if c != 1 {
			bad = append(bad, fmt.Sprintf("input %d is in %d durable checkpoints %v", id, c, where[id]))
		}
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		t.Errorf("durable checkpoints (the acknowledgements committed) vs the %d inputs:\n%s", n, joinLines(bad))
	}
	if st.maxCount >= lcDeliveryLimit {
		t.Errorf("an input was delivered %d times: the delivery limit (%d) would archive it on an abort", st.maxCount, lcDeliveryLimit)
	}
	return st
}

// checkOutputOnce waits until every transaction is decided, then reads topic (partition
// 0) with read_committed and with read_uncommitted (applying the markers itself) and
// checks: both agree on what is committed (no aborted output visible), and the committed
// outputs are the inputs 0..n-1, each exactly once. It returns the number of aborted
// output records.
//
// When an input has no committed output or several, the failure also says, for each such
// input, what a diagnosis needs (lcDiagnosis): ws are the workers whose lines it reads.
func checkOutputOnce(t *testing.T, addr string, adm *kadm.Client, topic string, n int, ws []*lcWorker) int {
	t.Helper()
	hwm := awaitTxnsDecided(t, adm, topic, 30*time.Second)
	from, to := []int64{0}, []int64{hwm}
	rc, err := readRange(addr, topic, kgo.ReadCommitted(), from, to)
	if err != nil {
		t.Fatalf("read_committed %s: %v", topic, err)
	}
	ru, err := readRange(addr, topic, kgo.ReadUncommitted(), from, to)
	if err != nil {
		t.Fatalf("read_uncommitted %s: %v", topic, err)
	}
	var bad []string
	open := map[int64][]*kgo.Record{}
	committed := map[int64]string{}
	aborted := 0
	abortedAt := map[int64]bool{}
	for _, r := range ru[0] {
		if !r.Attrs.IsControl() {
			open[r.ProducerID] = append(open[r.ProducerID], r)
			continue
		}
		isCommit := len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1
		for _, d := range open[r.ProducerID] {
			if isCommit {
				committed[d.Offset] = string(d.Value)
			} else {
				aborted++
				abortedAt[d.Offset] = true
			}
		}
		delete(open, r.ProducerID)
	}
	for pid, ds := range open {
		bad = append(bad, fmt.Sprintf("producer %d: %d records from offset %d without a marker", pid, len(ds), ds[0].Offset))
	}
	times := make([]int, n)
	seen := 0
	for _, r := range rc[0] {
		if r.Attrs.IsControl() {
			continue
		}
		seen++
		v := string(r.Value)
		if committed[r.Offset] != v {
			bad = append(bad, fmt.Sprintf("offset %d: read_committed returned %q, which no COMMIT marker commits (aborted output visible)", r.Offset, v))
		}
		id, err := strconv.Atoi(v)
		if err != nil || id < 0 || id >= n {
			bad = append(bad, fmt.Sprintf("offset %d: %q is no input", r.Offset, v))
			continue
		}
		times[id]++
	}
	if seen != len(committed) {
		bad = append(bad, fmt.Sprintf("read_committed returned %d records, the COMMIT markers commit %d", seen, len(committed)))
	}
	var wrong []int
	for id, c := range times {
		if c != 1 {
			bad = append(bad, fmt.Sprintf("input %d: %d committed outputs, want 1", id, c))
			wrong = append(wrong, id)
		}
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		t.Errorf("output %s (%d inputs, %d committed, %d aborted):\n%s", topic, n, seen, aborted, joinLines(bad))
	}
	if len(wrong) > 0 {
		t.Errorf("what became of the inputs with the wrong number of outputs:\n%s",
			lcDiagnosis(t, ws, wrong, ru[0], committed, abortedAt))
	}
	return aborted
}

// lcDiagnosisMax bounds the inputs lcDiagnosis describes in full.
const lcDiagnosisMax = 12

// lcDiagnosis describes what became of the inputs ids (offset = id on the input
// partition, which the test writes densely and non-transactionally), for a failure that
// must be diagnosed from its log alone:
//
//   - every output record carrying the input in the output log (read_uncommitted), with
//     its producer id and epoch and whether a COMMIT or ABORT marker ended it;
//   - every checkpoint batch of every worker run that held the input, with its delivery
//     count, whether that batch is the worker's durable checkpoint, and what the worker
//     recorded for that checkpoint afterwards (the transaction prepared, with its producer
//     id and epoch; aborted; committed; the step it paused or crashed at; the run's exit)
//     and, when the run ended there, what the next run's Recover found and did;
//   - what the workers recorded of the transactions of the producer ids seen above.
//
// The share state of the offsets is not readable through the Kafka API of a broker
// process; the drain check each cycle already showed them ACKNOWLEDGED or ARCHIVED (the
// share start offset past them, lag 0).
func lcDiagnosis(t *testing.T, ws []*lcWorker, ids []int, out []*kgo.Record, committed map[int64]string, abortedAt map[int64]bool) string {
	t.Helper()
	var b strings.Builder
	if len(ids) > lcDiagnosisMax {
		fmt.Fprintf(&b, "(the first %d of %d)\n", lcDiagnosisMax, len(ids))
		ids = ids[:lcDiagnosisMax]
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[strconv.Itoa(id)] = true
	}
	outs := map[string][]string{}
	for _, r := range out {
		if r.Attrs.IsControl() || !want[string(r.Value)] {
			continue
		}
		fate := "no marker"
		switch {
		case committed[r.Offset] != "":
			fate = "COMMITTED"
		case abortedAt[r.Offset]:
			fate = "aborted"
		}
		outs[string(r.Value)] = append(outs[string(r.Value)], fmt.Sprintf("out@%d pid=%d epoch=%d %s", r.Offset, r.ProducerID, r.ProducerEpoch, fate))
	}
	type wl struct {
		w     *lcWorker
		lines []lcLine
		last  map[int64]int // checkpoint -> index of its last batch line (the durable one's)
		dur   int64
	}
	var wls []wl
	for _, w := range ws {
		x := wl{w: w, lines: w.snapshotLines(), last: map[int64]int{}, dur: w.lastStored(t)}
		for i, l := range x.lines {
			if strings.HasPrefix(l.text, "batch ") {
				if k, _, err := parseBatch(l.text); err == nil {
					x.last[k] = i
				}
			}
		}
		wls = append(wls, x)
	}
	for _, id := range ids {
		v := strconv.Itoa(id)
		o := strings.Join(outs[v], "; ")
		if o == "" {
			o = "none in the output log"
		}
		fmt.Fprintf(&b, "input %d (offset %d):\n  outputs: %s\n", id, id, o)
		for _, x := range wls {
			for i, l := range x.lines {
				if !strings.HasPrefix(l.text, "batch ") {
					continue
				}
				k, ins, err := parseBatch(l.text)
				if err != nil {
					continue
				}
				count := -1
				for _, in := range ins {
					if in.id == id {
						count = in.count
					}
				}
				if count < 0 {
					continue
				}
				durable := "not durable"
				if x.last[k] == i && k <= x.dur {
					durable = "the durable checkpoint"
				}
				fmt.Fprintf(&b, "  %s run %d: batch ckpt=%d of %d inputs, delivery %d, %s; then:\n", x.w.name, l.run, k, len(ins), count, durable)
				for _, f := range lcFate(x.lines, i) {
					fmt.Fprintf(&b, "    [run %d] %s\n", f.run, f.text)
				}
			}
		}
	}
	return b.String()
}

// lcFate is what a worker recorded after the batch line at i: its run's lines up to the
// next batch line (at most 12), and, when the run ended before one, the next run's first
// lines up to its Recover's answer.
func lcFate(lines []lcLine, i int) []lcLine {
	run := lines[i].run
	var out []lcLine
	j := i + 1
	for ; j < len(lines) && lines[j].run == run && len(out) < 12; j++ {
		if strings.HasPrefix(lines[j].text, "batch ") {
			return out
		}
		out = append(out, lines[j])
	}
	for ; j < len(lines) && lines[j].run == run; j++ {
		if strings.HasPrefix(lines[j].text, "batch ") {
			return out
		}
	}
	for k := 0; j < len(lines) && k < 6; j, k = j+1, k+1 {
		out = append(out, lines[j])
		if strings.HasPrefix(lines[j].text, "recovered ") {
			break
		}
	}
	return out
}

// awaitEndOffset waits until partition 0 of topic has at least want offsets.
func awaitEndOffset(t *testing.T, adm *kadm.Client, topic string, want int64) {
	t.Helper()
	if err := await.Until(30*time.Second, 10*time.Millisecond, func() error {
		if end, _ := shareOffsetsEnd(t, adm, topic); end < want {
			return fmt.Errorf("%s: end offset %d after 30s, want %d", topic, end, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// lcFault is where and how TestLifecycleCrash puts its fault.
type lcFault struct {
	broker bool // kill the broker (else the worker)
	step   string
}

// lcFaultCkpt is the checkpoint that takes the fault: the second, so that recovery has an
// earlier completed checkpoint to go back to.
const lcFaultCkpt = 2

// TestLifecycleCrash (issue 7, acceptance 1) kills, with SIGKILL, the worker process or
// the broker at each step of checkpoint 2 of a worker (eos.Checkpointer in its own
// process, crashtest/internal/eosworker) over 30 inputs, 10 at most per checkpoint:
// before PrepareCommit, after it, after SnapshotState (the checkpoint not stored), after
// the checkpoint is stored (durable: complete) and before NotifyCheckpointComplete, and
// during the commit. A killed worker is started again and recovers from its checkpoint
// file; around a broker kill the worker waits at the step and then carries on (or exits
// when its clients cannot, and is started again). Then every input is processed, and:
//
//   - every input's output is in a read_committed read exactly once, and no aborted output
//     is visible (the markers agree);
//   - every input is acknowledged exactly once: the group is drained (start offset 30, lag
//     0), and the worker's durable checkpoints hold each input exactly once;
//   - checkpoint 2 ends as its step says. Worker killed before the checkpoint was durable:
//     Recover (with checkpoint 1's snapshot) aborts, and checkpoint 2's inputs come back
//     (delivered again, delivery count 2 or more). Killed after it was durable: Recover
//     commits (or, during the commit, finds it committed), and its inputs never come back.
//     Broker killed before prepare: the prepare fails, the worker aborts, the inputs come
//     back; killed later: the prepared transaction survives the restart and the worker
//     commits it.
func TestLifecycleCrash(t *testing.T) {
	e := newLCEnv(t)
	for _, broker := range []bool{false, true} {
		who := map[bool]string{false: "worker", true: "broker"}[broker]
		for _, step := range lcSteps {
			t.Run(who+"/"+step, func(t *testing.T) {
				e.t = t
				defer func() { e.t = nil }()
				lifecycleCrashOnce(t, e, lcFault{broker: broker, step: step})
			})
			if t.Failed() {
				return
			}
		}
	}
}

func lifecycleCrashOnce(t *testing.T, e *lcEnv, f lcFault) {
	const n = 30
	start := time.Now()
	name := strings.ReplaceAll(t.Name()[len("TestLifecycleCrash/"):], "/", "-")
	in, out, group := "lc-"+name+"-in", "lc-"+name+"-out", "lc-"+name
	e.pipeline(in, out, group)
	produceInputs(t, e.addr, in, rand.New(rand.NewPCG(1, 1)), inputValues(0, n), 5)

	// The worker crashes itself at the step, or waits there while the test kills the
	// broker. During the commit, the worker waits before NotifyCheckpointComplete; the
	// proxy lets its EndTxn request through to the broker, and then the test kills the
	// worker (which never gets the answer) or the broker (whatever it had done with it).
	at := fmt.Sprintf("%s:%d", f.step, lcFaultCkpt)
	var w *lcWorker
	if !f.broker && f.step != stepDuringCommit && f.step != stepBeforePrepare {
		w = e.startWorker(name, group, in, out, "EOSWORKER_CRASH_AT="+at)
	} else {
		w = e.startWorker(name, group, in, out, "EOSWORKER_PAUSE_AT="+at)
	}
	stepLine, stepIdx, ok := w.await(0, fmt.Sprintf("step %s ckpt=%d", f.step, lcFaultCkpt), 30*time.Second)
	if !ok {
		t.Fatalf("the worker did not reach %s; its lines:\n%s", at, w.tail(30))
	}
	if f.step == stepBeforePrepare {
		// The outputs of the checkpoint are in the log, in its open transaction, when the
		// fault comes: checkpoint 1's outputs and marker, then checkpoint 2's.
		lines := w.snapshotLines()
		var sizes [lcFaultCkpt + 1]int64
		for _, l := range lines[:stepIdx] {
			if k, ins, err := parseBatch(l.text); err == nil && strings.HasPrefix(l.text, "batch ") && k <= lcFaultCkpt {
				sizes[k] = int64(len(ins))
			}
		}
		awaitEndOffset(t, e.adm, out, sizes[1]+1+sizes[2])
		if !f.broker {
			w.kill()
		}
	}
	if f.step == stepDuringCommit {
		fired := e.proxy.arm(w.txnID, endTxnKey, !f.broker)
		w.send("go")
		select {
		case <-fired:
		case <-time.After(30 * time.Second):
			t.Fatalf("no EndTxn from the worker within 30s; its lines:\n%s", w.tail(30))
		}
		if !f.broker {
			w.kill()
		}
	}
	if f.broker {
		e.restartBroker()
		if f.step != stepDuringCommit {
			w.send("go")
		}
	}
	// The batch of the checkpoint that took the fault: the last one before the step.
	var batch []lcInput
	lines := w.snapshotLines()
	for i := stepIdx; i >= 0 && batch == nil; i-- {
		if strings.HasPrefix(lines[i].text, fmt.Sprintf("batch ckpt=%d ", lcFaultCkpt)) {
			_, batch, _ = parseBatch(lines[i].text)
		}
	}
	if batch == nil {
		t.Fatalf("no batch line before %q", stepLine.text)
	}

	st, lag, took := awaitShareDrained(t, e.adm, group, in, n, 30*time.Second)
	if st != n || lag != 0 {
		t.Fatalf("share start offset %d lag %d after %v, want %d and 0; worker lines:\n%s", st, lag, took, n, w.tail(40))
	}
	w.stop(t)
	aborted := checkOutputOnce(t, e.addr, e.adm, out, n, []*lcWorker{w})
	stats := checkLedger(t, []*lcWorker{w}, n)

	// The outcome of checkpoint 2.
	lines = w.snapshotLines()
	after := lines[stepIdx+1:]
	var recovered map[string]string
	for _, l := range after {
		if l.run > stepLine.run && strings.HasPrefix(l.text, "recovered ") {
			recovered = kv(l.text)
			break
		}
	}
	again := map[int]int{} // batch inputs delivered again: their highest delivery count
	carriedOn := ""        // what the run that took the fault said next about checkpoint 2
	for _, l := range after {
		if strings.HasPrefix(l.text, "batch ") {
			_, ins, _ := parseBatch(l.text)
			for _, x := range ins {
				for _, b := range batch {
					if x.id == b.id {
						again[x.id] = max(again[x.id], x.count)
					}
				}
			}
		}
		if l.run == stepLine.run && carriedOn == "" && (strings.HasPrefix(l.text, fmt.Sprintf("committed ckpt=%d", lcFaultCkpt)) ||
			strings.HasPrefix(l.text, fmt.Sprintf("aborted ckpt=%d", lcFaultCkpt))) {
			carriedOn = strings.Fields(l.text)[0]
		}
	}
	wantCommit := f.step == stepAfterDurable || f.step == stepDuringCommit
	if f.broker {
		wantCommit = f.step != stepBeforePrepare
	}
	var why []string
	switch {
	case !f.broker && recovered == nil:
		why = append(why, "no Recover after the kill")
	case !f.broker:
		wantLast := map[bool]string{false: "1", true: "2"}[wantCommit]
		if recovered["last"] != wantLast {
			why = append(why, fmt.Sprintf("Recover with checkpoint %s, want %s", recovered["last"], wantLast))
		}
		switch f.step {
		case stepBeforePrepare, stepAfterPrepare, stepAfterSnapshot:
			if recovered["found"] != "true" || recovered["committed"] != "false" {
				why = append(why, "Recover did not find and abort the open transaction")
			}
		case stepAfterDurable:
			if recovered["found"] != "true" || recovered["committed"] != "true" {
				why = append(why, "Recover did not find and commit the prepared transaction")
			}
		case stepDuringCommit:
			if recovered["found"] == "true" && recovered["committed"] != "true" {
				why = append(why, "Recover aborted the transaction of a durable checkpoint")
			}
		}
	case f.broker && wantCommit && carriedOn != "committed":
		why = append(why, fmt.Sprintf("after the broker restart the worker did not commit checkpoint %d itself (%q; restarted %v)", lcFaultCkpt, carriedOn, recovered != nil))
	}
	if wantCommit && len(again) > 0 {
		why = append(why, fmt.Sprintf("inputs of the committed checkpoint delivered again: %v", again))
	}
	if !wantCommit {
		for _, b := range batch {
			c, ok := again[b.id]
			switch {
			case !ok:
				why = append(why, fmt.Sprintf("input %d of the aborted checkpoint never came back", b.id))
			case !f.broker && c < 2:
				why = append(why, fmt.Sprintf("input %d of the aborted checkpoint came back with delivery count %d", b.id, c))
			}
		}
	}
	if len(why) > 0 {
		t.Errorf("checkpoint %d (%d inputs) after the %s kill at %s: %s; recovered %v; worker lines:\n%s",
			lcFaultCkpt, len(batch), map[bool]string{false: "worker", true: "broker"}[f.broker], f.step, strings.Join(why, "; "), recovered, w.tail(60))
	}
	checkLog(t, 0, e.sb.logs)
	outcome := map[bool]string{false: "aborted, inputs back", true: "committed"}[wantCommit]
	t.Logf("%s: checkpoint %d (%d inputs) %s; recovered %v, carried on %q; %d runs, %d checkpoints durable, %d aborted output records; drained %v after the fault, %v in all",
		t.Name(), lcFaultCkpt, len(batch), outcome, recovered, carriedOn, stats.runs, stats.durable, aborted, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
