// Package brokerproc runs an exactq binary as a child process: build it, start it on a data
// directory, wait until it serves, and stop it with SIGTERM or SIGKILL. The crash tests and
// the bench driver use it; it knows nothing about Kafka.
package brokerproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/exactq/exactq/internal/await"
)

// ServingLine is the text exactq logs to stderr once it accepts connections.
const ServingLine = "exactq serving"

// maxLogLines bounds the stderr lines a Process keeps for diagnostics.
const maxLogLines = 400

// ModuleRoot returns the directory of the exactq module enclosing dir (the directory
// holding go.mod), so tests in any package can build ./cmd/exactq.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("brokerproc: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build compiles ./cmd/exactq of the module at moduleRoot into out.
func Build(ctx context.Context, moduleRoot, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/exactq")
	cmd.Dir = moduleRoot
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/exactq: %v\n%s", err, buf.String())
	}
	return nil
}

// BuildTemp builds ./cmd/exactq of the module enclosing the working directory into a new
// temporary directory, for a TestMain that builds the broker once for all of its tests. It
// returns the binary's path and a function that removes the directory; the build may take
// up to 5 minutes (a cold build cache on a loaded machine).
func BuildTemp(prefix string) (bin string, remove func(), err error) {
	root, err := ModuleRoot(".")
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "exactq")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Build(ctx, root, bin); err != nil {
		remove()
		return "", nil, err
	}
	return bin, remove, nil
}

// Options say how to start the broker.
type Options struct {
	Binary  string // path to the exactq binary
	DataDir string
	// Listen is the address to listen on; empty means 127.0.0.1:0 (the kernel picks a free
	// port, read back from the serving line).
	Listen   string
	Fsync    string // always or never; empty: the broker's default
	LogLevel string // empty: info; must be info or debug, or the serving line is not logged
	Args     []string
	// Env is added to the broker's environment (e.g. EXACTQ_PPROF_LISTEN=addr for
	// bench/cmd/exactq-pprof).
	Env []string
	// Echo, when set, receives every stderr line of the broker as it arrives.
	Echo io.Writer
	// StartTimeout bounds the wait for the serving line (default 60s: recovery of a large
	// data directory can take a while).
	StartTimeout time.Duration
}

// Process is a running (or exited) exactq serve.
type Process struct {
	Addr string // the address the broker listens on, from its serving line
	Pid  int

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and stderr is drained
	err  error         // cmd.Wait's result, valid after done

	mu    sync.Mutex
	lines []string // the last maxLogLines stderr lines

	attached bool // from Attach: not ours to stop
}

// portInUseWait bounds how long Start waits for a fixed listen port to be free.
const portInUseWait = 15 * time.Second

// Start starts `exactq serve` and returns once it logs the serving line, or an error with
// its stderr when it exits or times out first. A fixed Listen port (a restart on the port
// clients reconnect to) can be held for a moment by a client socket that the kernel gave
// it as an ephemeral local port: while the broker exits with "address already in use",
// Start starts it again, for up to 15 s.
func Start(opts Options) (*Process, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if _, port, err := net.SplitHostPort(opts.Listen); err != nil || port == "0" {
		return start(opts)
	}
	var p *Process
	err := await.Until(portInUseWait, 100*time.Millisecond, func() error {
		var err error
		p, err = start(opts)
		if err != nil && strings.Contains(err.Error(), "address already in use") {
			return err
		}
		return await.Stop(err)
	})
	return p, err
}

// start is one attempt of Start, its options defaulted.
func start(opts Options) (*Process, error) {
	args := []string{"serve", "--listen", opts.Listen, "--data-dir", opts.DataDir}
	if opts.Fsync != "" {
		args = append(args, "--fsync", opts.Fsync)
	}
	if opts.LogLevel != "" {
		args = append(args, "--log-level", opts.LogLevel)
	}
	args = append(args, opts.Args...)
	cmd := exec.Command(opts.Binary, args...)
	if len(opts.Env) > 0 {
		cmd.Env = append(os.Environ(), opts.Env...)
	}
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, Pid: cmd.Process.Pid, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if opts.Echo != nil {
				fmt.Fprintln(opts.Echo, line)
			}
			p.mu.Lock()
			p.lines = append(p.lines, line)
			if len(p.lines) > maxLogLines {
				p.lines = p.lines[len(p.lines)-maxLogLines:]
			}
			p.mu.Unlock()
			if strings.Contains(line, ServingLine) {
				select {
				case ready <- field(line, "listen"):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(opts.StartTimeout)
	defer timer.Stop()
	select {
	case addr := <-ready:
		if addr == "" {
			p.Kill()
			return nil, fmt.Errorf("brokerproc: serving line without listen=: %s", p.Logs())
		}
		p.Addr = addr
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("brokerproc: exactq exited before serving (%v):\n%s", p.err, p.Logs())
	case <-timer.C:
		p.Kill()
		return nil, fmt.Errorf("brokerproc: exactq not serving after %v:\n%s", opts.StartTimeout, p.Logs())
	}
}

// field returns the value of key=value in a slog text line (values may be quoted).
func field(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if j := strings.Index(v[1:], `"`); j >= 0 {
			return v[1 : j+1]
		}
		return ""
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// Logs returns the last stderr lines (at most maxLogLines).
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// LogLines returns the stderr lines that contain substr.
func (p *Process) LogLines(substr string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// Attach returns a Process for a broker started elsewhere (e.g. Apache Kafka), only so
// that its pid can be used for CPU and memory accounting: Terminate, Stop and Kill do
// nothing on it.
func Attach(pid int) *Process { return &Process{Pid: pid, attached: true} }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	if p.attached {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// ErrStopTimeout is returned by Terminate when the process outlives its deadline (it is
// then killed).
var ErrStopTimeout = errors.New("brokerproc: exactq did not exit in time after SIGTERM")

// Terminate sends SIGTERM and waits up to timeout for the process to exit. It returns the
// exit code and how long the exit took; after the timeout it kills the process and returns
// ErrStopTimeout.
func (p *Process) Terminate(timeout time.Duration) (exitCode int, took time.Duration, err error) {
	if p.attached {
		return 0, 0, nil
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return -1, 0, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.Kill()
		return -1, time.Since(start), ErrStopTimeout
	}
	took = time.Since(start)
	return p.cmd.ProcessState.ExitCode(), took, nil
}

// Stop terminates the process if it is still running, killing it after 30 s; for cleanups.
func (p *Process) Stop() {
	if p.attached {
		return
	}
	select {
	case <-p.done:
	default:
		_, _, _ = p.Terminate(30 * time.Second)
	}
}

// ExitCode is the exit code once the process is done (-1 when killed by a signal).
func (p *Process) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// CPUTime is the user+system CPU time of the exited process.
func (p *Process) CPUTime() time.Duration {
	<-p.done
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// MaxRSSBytes is the peak resident set size of the exited process (Linux reports KiB).
func (p *Process) MaxRSSBytes() int64 {
	<-p.done
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}
