// Command eosworker is the worker process of crashtest's checkpoint-lifecycle tests
// (crashtest/lifecycle_test.go). It is a framework-style program over eos.Checkpointer: it
// polls inputs of a share group, produces one output per input (key and value: the
// input's value) and acknowledges it (ACCEPT), and every -batch inputs or -interval takes
// a checkpoint:
//
//	PrepareCommit → SnapshotState → store {number, snapshot} (fsync + rename) → NotifyCheckpointComplete
//
// The store is what completes the checkpoint. On start it loads the last stored checkpoint
// and calls Recover with its snapshot (nil when there is none).
//
// The test drives faults at the steps, named by the constants below:
//
//	EOSWORKER_CRASH_AT=<step>:<n>   SIGKILL itself at step of checkpoint number n
//	EOSWORKER_PAUSE_AT=<step>:<n>   report the step and wait for "go" on stdin
//	EOSWORKER_CRASH_DELAY=<dur>     during-commit: how long after NotifyCheckpointComplete starts
//
// Its clients send the transactional id as client id, so that a proxy can tell its requests.
//
// and through commands on stdin, one a line: "go" (end a pause), "crash <step> <µs>" and
// "pause <step>" (at the next occurrence of step, whatever the checkpoint), "stop" (finish
// the checkpoint in progress, close, exit 0; so does the end of stdin).
//
// Everything it does is a line on stdout, which the test parses:
//
//	start txn=<id> last=<n>
//	recovered last=<n> found=<bool> committed=<bool> pid=<id> epoch=<e>
//	batch ckpt=<n> ids=<value>/<delivery count>,...     inputs of the checkpoint, before PrepareCommit
//	step <step> ckpt=<n> crash|pause|report             a fault point reached
//	aborted ckpt=<n> err=<why>                          Flush or PrepareCommit failed; Abort gave the inputs back
//	committed ckpt=<n>                                  NotifyCheckpointComplete returned
//	error where=<what> err=<why>                        an error it rides out (retried)
//	exit code=<c> err=<why>
//
// Exit codes: 0 after stop; 3 when its clients are fenced or cannot go on (the test
// starts it again and it recovers); 1 for anything else (a test failure).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The steps of a checkpoint where the test puts faults.
const (
	StepBeforePrepare = "before-prepare" // inputs polled, outputs produced, acknowledged
	StepAfterPrepare  = "after-prepare"  // PrepareCommit returned
	StepAfterSnapshot = "after-snapshot" // SnapshotState returned, the checkpoint not stored
	StepAfterDurable  = "after-durable"  // the checkpoint is stored (complete), not committed
	StepDuringCommit  = "during-commit"  // NotifyCheckpointComplete under way
)

// Exit codes.
const (
	exitStopped = 0
	exitFailed  = 1
	exitRestart = 3
)

// callTimeout bounds each lifecycle call: a broker restart takes a second or two.
const callTimeout = 30 * time.Second

func main() {
	code, err := run()
	msg := ""
	if err != nil {
		msg = oneLine(err)
	}
	say("exit code=%d err=%s", code, msg)
	os.Exit(code)
}

// say writes one line to stdout (unbuffered: a line is out before a kill that follows).
func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " | ")
}

type config struct {
	brokers          []string
	group, in, out   string
	txnID, statePath string
	batch            int
	interval         time.Duration
}

func run() (int, error) {
	var c config
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	flag.StringVar(&c.group, "group", "", "share group")
	flag.StringVar(&c.in, "in", "", "input topic")
	flag.StringVar(&c.out, "out", "", "output topic")
	flag.StringVar(&c.txnID, "txn-id", "", "transactional id (the same across restarts)")
	flag.StringVar(&c.statePath, "state", "", "checkpoint file")
	flag.IntVar(&c.batch, "batch", 10, "inputs per checkpoint at most")
	flag.DurationVar(&c.interval, "interval", 100*time.Millisecond, "checkpoint at the latest this long after its first input")
	flag.Parse()
	c.brokers = strings.Split(*brokers, ",")
	if c.group == "" || c.in == "" || c.out == "" || c.txnID == "" || c.statePath == "" {
		return exitFailed, errors.New("-group, -in, -out, -txn-id and -state are required")
	}
	f, err := newFaults()
	if err != nil {
		return exitFailed, err
	}
	go f.readCommands()
	w := &worker{cfg: c, f: f}
	return w.run()
}

// faults holds the armed crash and pause points, and the commands from stdin.
type faults struct {
	crashAt, pauseAt string // "<step>:<n>" from the environment, once each
	crashDelay       time.Duration

	mu         sync.Mutex
	nextCrash  string // step, from a command
	nextDelay  time.Duration
	nextPause  string
	goCh       chan struct{}
	stopped    atomic.Bool
	stopCtx    context.Context // ends with stop
	stopSignal context.CancelFunc
}

func newFaults() (*faults, error) {
	f := &faults{crashAt: os.Getenv("EOSWORKER_CRASH_AT"), pauseAt: os.Getenv("EOSWORKER_PAUSE_AT"),
		goCh: make(chan struct{}, 16)}
	f.stopCtx, f.stopSignal = context.WithCancel(context.Background())
	if d := os.Getenv("EOSWORKER_CRASH_DELAY"); d != "" {
		var err error
		if f.crashDelay, err = time.ParseDuration(d); err != nil {
			return nil, fmt.Errorf("EOSWORKER_CRASH_DELAY: %w", err)
		}
	}
	return f, nil
}

func (f *faults) stop() {
	f.stopped.Store(true)
	f.stopSignal()
}

// readCommands applies the commands on stdin until it ends (which stops the worker).
func (f *faults) readCommands() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		f.mu.Lock()
		switch fields[0] {
		case "go":
			f.goCh <- struct{}{}
		case "stop":
			f.stop()
		case "crash":
			f.nextCrash, f.nextDelay = fields[1], 0
			if len(fields) > 2 {
				us, _ := strconv.Atoi(fields[2])
				f.nextDelay = time.Duration(us) * time.Microsecond
			}
		case "pause":
			f.nextPause = fields[1]
		default:
			say("error where=stdin err=unknown command %q", sc.Text())
		}
		f.mu.Unlock()
	}
	f.stop()
}

// action is what to do at a step: nothing, crash (after delay) or pause.
type action int

const (
	actNone action = iota
	actCrash
	actPause
)

// at returns the action armed for step of checkpoint n, disarming it.
func (f *faults) at(step string, n int64) (action, time.Duration) {
	key := fmt.Sprintf("%s:%d", step, n)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.crashAt == key:
		f.crashAt = ""
		return actCrash, f.crashDelay
	case f.nextCrash == step:
		f.nextCrash = ""
		return actCrash, f.nextDelay
	case f.pauseAt == key:
		f.pauseAt = ""
		return actPause, 0
	case f.nextPause == step:
		f.nextPause = ""
		return actPause, 0
	}
	return actNone, 0
}

// hit is a fault point: it crashes (SIGKILL, nothing closed) or pauses until "go".
func (f *faults) hit(step string, n int64) {
	switch act, delay := f.at(step, n); act {
	case actCrash:
		say("step %s ckpt=%d crash", step, n)
		time.Sleep(delay) // the fault's moment, drawn from the seed
		killSelf()
	case actPause:
		f.pause(step, n)
	}
}

// pause reports step and waits for "go" (or stop).
func (f *faults) pause(step string, n int64) {
	say("step %s ckpt=%d pause", step, n)
	select {
	case <-f.goCh:
	case <-f.stopCtx.Done():
	}
}

// hitDuringCommit is the fault point of during-commit. A crash kills the process delay
// after the commit started (at a moment inside it, or after it); a pause waits for "go"
// before the commit (the test then arms its proxy to act when the EndTxn request reaches
// the broker).
func (f *faults) hitDuringCommit(n int64) {
	switch act, delay := f.at(StepDuringCommit, n); act {
	case actCrash:
		say("step %s ckpt=%d crash", StepDuringCommit, n)
		go func() {
			time.Sleep(delay) // the fault's moment, drawn from the seed
			killSelf()
		}()
	case actPause:
		f.pause(StepDuringCommit, n)
	}
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never reached
}

// stored is the worker's checkpoint file: the number of the checkpoint and the
// Checkpointer's snapshot. Writing it (fsync, rename, fsync of the directory) is what
// completes a checkpoint.
type stored struct {
	N        int64  `json:"n"`
	Snapshot []byte `json:"snapshot,omitempty"`
}

func load(path string) (stored, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return stored{}, nil
	}
	if err != nil {
		return stored{}, err
	}
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return stored{}, fmt.Errorf("checkpoint file %s: %w", path, err)
	}
	return s, nil
}

func store(path string, s stored) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is synced.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

type worker struct {
	cfg  config
	f    *faults
	cp   *eos.Checkpointer
	last int64 // the last stored checkpoint
}

func (w *worker) run() (int, error) {
	s, err := load(w.cfg.statePath)
	if err != nil {
		return exitFailed, err
	}
	w.last = s.N
	say("start txn=%s last=%d", w.cfg.txnID, s.N)
	w.cp, err = eos.NewCheckpointer(eos.CheckpointerConfig{
		Brokers: w.cfg.brokers, ClientOpts: []kgo.Opt{kgo.ClientID(w.cfg.txnID)}, Group: w.cfg.group, Topics: []string{w.cfg.in},
		TransactionalID: w.cfg.txnID, MaxPollRecords: int32(w.cfg.batch), RetryBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		return exitFailed, err
	}
	if code, err := w.recover(s.Snapshot); err != nil {
		return code, err
	}
	for !w.f.stopped.Load() {
		if code, err := w.checkpoint(); err != nil {
			return code, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := w.cp.Close(ctx); err != nil {
		return exitRestart, fmt.Errorf("close: %w", err)
	}
	return exitStopped, nil
}

// recover calls Recover with the stored snapshot, again while it fails (the broker may be
// restarting) for up to callTimeout.
func (w *worker) recover(snap []byte) (int, error) {
	err := await.Until(callTimeout, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		rec, err := w.cp.Recover(ctx, snap)
		cancel()
		switch {
		case err == nil:
			say("recovered last=%d found=%v committed=%v pid=%d epoch=%d", w.last, rec.Found, rec.Committed, rec.ProducerID, rec.Epoch)
		case errors.Is(err, eos.ErrSnapshot):
			return await.Stop(err)
		default:
			say("error where=recover err=%s", oneLine(err)) // the broker may be restarting
		}
		return err
	})
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, eos.ErrSnapshot):
		return exitFailed, fmt.Errorf("recover: %w", err)
	default:
		return exitRestart, fmt.Errorf("recover: %w", err)
	}
}

// checkpoint processes one checkpoint's inputs and takes the checkpoint. A checkpoint
// without inputs (stopped while idle) takes nothing.
func (w *worker) checkpoint() (int, error) {
	ids, err := w.collect()
	if err != nil {
		return exitRestart, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n := w.last + 1
	say("batch ckpt=%d ids=%s", n, strings.Join(ids, ","))
	// The outputs go to the log before the step, as a framework's sink flushes before it
	// prepares: a fault before prepare then meets them in the open transaction.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	err = w.cp.Flush(ctx)
	cancel()
	if err == nil {
		w.f.hit(StepBeforePrepare, n)
		ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
		err = w.cp.PrepareCommit(ctx)
		cancel()
	}
	if err != nil {
		// The framework gives up the checkpoint: its inputs come back.
		actx, cancel := context.WithTimeout(context.Background(), callTimeout)
		aerr := w.cp.Abort(actx)
		cancel()
		if aerr != nil {
			return exitRestart, fmt.Errorf("prepare checkpoint %d: %v; abort: %w", n, err, aerr)
		}
		say("aborted ckpt=%d err=%s", n, oneLine(err))
		return 0, nil
	}
	w.f.hit(StepAfterPrepare, n)
	snap, err := w.cp.SnapshotState()
	if err != nil {
		return exitFailed, fmt.Errorf("snapshot of checkpoint %d: %w", n, err)
	}
	if s, err := eos.DecodeSnapshot(snap); err == nil {
		say("prepared ckpt=%d txn=%v pid=%d epoch=%d", n, s.Prepared, s.ProducerID, s.Epoch)
	}
	w.f.hit(StepAfterSnapshot, n)
	if err := store(w.cfg.statePath, stored{N: n, Snapshot: snap}); err != nil {
		return exitFailed, fmt.Errorf("store checkpoint %d: %w", n, err)
	}
	w.last = n
	w.f.hit(StepAfterDurable, n)
	w.f.hitDuringCommit(n)
	err = await.Until(callTimeout, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := w.cp.NotifyCheckpointComplete(ctx)
		cancel()
		if errors.Is(err, eos.ErrFenced) || errors.Is(err, eos.ErrClosed) {
			return await.Stop(err)
		}
		if err != nil {
			say("error where=commit err=%s", oneLine(err)) // the broker may be restarting
		}
		return err
	})
	if err != nil {
		// The checkpoint is stored: a restart's Recover commits what this could not.
		return exitRestart, fmt.Errorf("commit checkpoint %d: %w", n, err)
	}
	say("committed ckpt=%d", n)
	return 0, nil
}

// collect polls until the checkpoint has batch inputs, or interval passed since its first
// one, or the worker is stopped; each input is produced and acknowledged. It returns the
// inputs as "<value>/<delivery count>".
func (w *worker) collect() ([]string, error) {
	var ids []string
	var first time.Time
	for {
		switch {
		case len(ids) >= w.cfg.batch,
			len(ids) > 0 && time.Since(first) >= w.cfg.interval,
			w.f.stopped.Load():
			return ids, nil
		}
		wait := w.cfg.interval
		if len(ids) > 0 {
			wait = w.cfg.interval - time.Since(first)
		}
		ctx, cancel := context.WithTimeout(w.f.stopCtx, wait)
		recs, err := w.cp.Poll(ctx)
		timedOut := ctx.Err() != nil
		cancel()
		for _, in := range recs {
			if len(ids) == 0 {
				first = time.Now()
			}
			if err := w.cp.Produce(context.Background(), &kgo.Record{Topic: w.cfg.out, Key: in.Value, Value: in.Value}); err != nil {
				return nil, fmt.Errorf("produce: %w", err)
			}
			if err := w.cp.Acknowledge(in, false); err != nil {
				return nil, fmt.Errorf("acknowledge: %w", err)
			}
			ids = append(ids, fmt.Sprintf("%s/%d", in.Value, kgoext.DeliveryCount(in)))
		}
		if err != nil && !timedOut {
			if errors.Is(err, eos.ErrFenced) || errors.Is(err, eos.ErrClosed) || errors.Is(err, eos.ErrPhase) {
				return nil, fmt.Errorf("poll: %w", err)
			}
			say("error where=poll err=%s", oneLine(err))
			time.Sleep(100 * time.Millisecond) // paces the polls while the broker restarts
		}
	}
}
