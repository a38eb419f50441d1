package hostile

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
)

// addressSpaceLimitKiB caps every broker's virtual memory (ulimit -v): an attack that makes
// the broker allocate tens of gigabytes ends in a Go "out of memory" crash of that one
// process rather than the kernel's OOM killer choosing among everything on the machine.
// The RSS bounds the tests assert are far below it.
const addressSpaceLimitKiB = 4 << 20 // 4 GiB

// writeLimitScript writes the wrapper that applies the limits of HOSTILE_AS_KIB and
// HOSTILE_NOFILE and then execs the broker (so the wrapper's pid is the broker's).
func writeLimitScript(path, bin string) error {
	script := fmt.Sprintf(`#!/bin/sh
ulimit -v "${HOSTILE_AS_KIB:-%d}" || exit 97
if [ -n "$HOSTILE_NOFILE" ]; then ulimit -n "$HOSTILE_NOFILE" || exit 98; fi
exec %q "$@"
`, addressSpaceLimitKiB, bin)
	return os.WriteFile(path, []byte(script), 0o755)
}

// brokerOpts say how a test's broker runs; zero values are a zero-config `exactq serve`
// (plus the fast-heartbeat share settings every test uses).
type brokerOpts struct {
	config  []string // extra key=value lines of the properties file
	args    []string // extra serve flags
	nofile  int      // ulimit -n; 0 keeps the test process's limit
	dataDir string   // "" picks a temporary directory
}

// shareTestConfig makes share groups assign and heartbeat fast enough for short tests.
var shareTestConfig = []string{
	"group.share.heartbeat.interval.ms=200",
	"group.share.min.heartbeat.interval.ms=200",
	"group.share.assignment.interval.ms=0",
	"group.initial.rebalance.delay.ms=0",
}

// broker is one test's exactq serve process, restartable on the same data directory and
// port. Its peak resident memory is sampled for the whole test.
type broker struct {
	t       *testing.T
	opts    brokerOpts
	cfgPath string
	p       *brokerproc.Process
	addr    string

	peakRSS atomic.Int64 // highest VmHWM / VmRSS seen of any run, bytes
	stopMu  sync.Mutex
	stopRSS func()
}

func startBroker(t *testing.T, opts brokerOpts) *broker {
	t.Helper()
	if opts.dataDir == "" {
		opts.dataDir = t.TempDir()
	}
	b := &broker{t: t, opts: opts, cfgPath: filepath.Join(t.TempDir(), "broker.properties")}
	lines := append(append([]string{"# hostile"}, shareTestConfig...), opts.config...)
	if err := os.WriteFile(b.cfgPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.start(""); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		b.stopSampling()
		b.p.Kill()
	})
	return b
}

func (b *broker) start(listen string) error {
	env := []string{}
	if b.opts.nofile > 0 {
		env = append(env, "HOSTILE_NOFILE="+strconv.Itoa(b.opts.nofile))
	}
	opts := brokerproc.Options{
		Binary: brokerScript, DataDir: b.opts.dataDir, Listen: listen, LogLevel: "info",
		Args: append([]string{"--config", b.cfgPath}, b.opts.args...), Env: env,
		StartTimeout: 60 * time.Second,
	}
	if os.Getenv("EXACTQ_TEST_LOG") != "" {
		opts.Echo = os.Stderr
	}
	p, err := brokerproc.Start(opts) // a restart on b.addr waits for the port to be free
	if err != nil {
		return err
	}
	b.p, b.addr = p, p.Addr
	b.sampleRSS(p)
	return nil
}

// sampleRSS polls the process's VmHWM (peak resident set) every few milliseconds, so the
// peak survives the process dying of the attack.
func (b *broker) sampleRSS(p *brokerproc.Process) {
	b.stopMu.Lock()
	defer b.stopMu.Unlock()
	stop := make(chan struct{})
	done := make(chan struct{})
	b.stopRSS = func() { close(stop); <-done }
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := peakRSSBytes(p.Pid); v > b.peakRSS.Load() {
				b.peakRSS.Store(v)
			}
			select {
			case <-stop:
				return
			case <-p.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func (b *broker) stopSampling() {
	b.stopMu.Lock()
	defer b.stopMu.Unlock()
	if b.stopRSS != nil {
		b.stopRSS()
		b.stopRSS = nil
	}
}

// peakRSSBytes reads the larger of VmHWM and VmRSS of pid (0 when it is gone).
func peakRSSBytes(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	var peak int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err == nil && kib*1024 > peak {
			peak = kib * 1024
		}
	}
	return peak
}

// alive reports whether the current broker process is still running.
func (b *broker) alive() bool {
	select {
	case <-b.p.Done():
		return false
	default:
		return true
	}
}

// restart stops the broker with SIGTERM (it must exit 0 if it was up) and starts it again
// on the same data directory and port. It returns how long the SIGTERM exit took.
func (b *broker) restart() time.Duration {
	b.t.Helper()
	b.stopSampling()
	var took time.Duration
	if b.alive() {
		code, d, err := b.p.Terminate(60 * time.Second)
		took = d
		if err != nil || code != 0 {
			b.t.Errorf("SIGTERM: exit code %d after %v (%v): %s", code, d, err, crashLine(b.p.Logs()))
		}
	}
	if err := b.start(b.addr); err != nil {
		b.t.Fatalf("restart broker: %v", err)
	}
	return took
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func mib(bytes int64) string { return fmt.Sprintf("%dMiB", bytes>>20) }
