package driver

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/exactq/exactq/bench/internal/kafka"
)

// machineInfo describes where a suite runs: CPUs, memory, kernel, the temp directory's
// disk, Go, Java and Kafka versions and exactq's git commit (what is known; nothing fails).
func machineInfo(ctx context.Context, tmp string) []string {
	var out []string
	cpu := fmt.Sprintf("%d CPUs", runtime.NumCPU())
	if m := procField("/proc/cpuinfo", "model name"); m != "" {
		cpu += " (" + m + ")"
	}
	mem := ""
	if kb, err := strconv.ParseInt(strings.Fields(procField("/proc/meminfo", "MemTotal") + " 0")[0], 10, 64); err == nil && kb > 0 {
		mem = fmt.Sprintf(", %.1f GiB memory", float64(kb)/(1<<20))
	}
	out = append(out, "machine: "+cpu+mem+", Linux "+strings.TrimSpace(readFirstLine("/proc/sys/kernel/osrelease")))
	if free, err := freeDiskBytes(tmp); err == nil {
		dir := tmp
		if dir == "" {
			dir = os.TempDir()
		}
		out = append(out, fmt.Sprintf("data directories in %s (%.0f GB free at the start)", dir, float64(free)/1e9))
	}
	java := "java"
	if h := os.Getenv("JAVA_HOME"); h != "" {
		java = h + "/bin/java"
	}
	jv := ""
	if b, err := exec.CommandContext(ctx, java, "-version").CombinedOutput(); err == nil {
		jv = ", " + strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
	out = append(out, fmt.Sprintf("versions: %s%s, Apache Kafka %s", runtime.Version(), jv, kafka.Version))
	if b, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		dirty := ""
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			dirty = " (working tree has uncommitted changes)"
		}
		out = append(out, "exactq commit (of the working directory): "+strings.TrimSpace(string(b))+dirty)
	}
	return out
}

func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func readFirstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.SplitN(string(b), "\n", 2)[0]
}

// loadSampler records the 1-minute load average every interval until stopped.
type loadSampler struct {
	mu      sync.Mutex
	samples []float64
	stop    chan struct{}
	done    chan struct{}
}

func sampleLoad(every time.Duration) *loadSampler {
	l := &loadSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			l.take()
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
		}
	}()
	return l
}

func (l *loadSampler) take() {
	f := strings.Fields(readFirstLine("/proc/loadavg"))
	if len(f) == 0 {
		return
	}
	if v, err := strconv.ParseFloat(f[0], 64); err == nil {
		l.mu.Lock()
		l.samples = append(l.samples, v)
		l.mu.Unlock()
	}
}

// Stop ends sampling (with a last sample) and returns the samples.
func (l *loadSampler) Stop() []float64 {
	close(l.stop)
	<-l.done
	l.take()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.samples
}
