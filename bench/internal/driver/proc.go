package driver

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
)

// unknownFigure stands for a broker CPU time or memory size that could not be read from
// /proc (the read failed, or the file did not parse): reports print "unknown". Zero keeps
// meaning "not measured" (no process of ours to read, as for a Kafka target in P1-P6).
const unknownFigure = -1

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on every
// Linux architecture Go supports).
const clockTicks = 100

// procStatusBytes reads a "key: N kB" line of /proc/<pid>/status, in bytes.
func procStatusBytes(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, key, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s line", pid, key)
}

// cpuFigure is p's CPU time so far for a report: 0 without a process (not measured),
// unknownFigure when /proc cannot be read (the error is logged).
func cpuFigure(logf func(string, ...any), p *brokerproc.Process) time.Duration {
	if p == nil {
		return 0
	}
	d, err := procTreeCPU(p.Pid)
	if err != nil {
		logf("  broker CPU time unknown: %v", err)
		return unknownFigure
	}
	return d
}

// cpuBetween is the CPU time between two cpuFigure readings (unknown if either is).
func cpuBetween(start, end time.Duration) time.Duration {
	if start == unknownFigure || end == unknownFigure {
		return unknownFigure
	}
	return end - start
}

// peakRSSFigure is p's peak resident set (VmHWM) for a report: 0 without a process,
// unknownFigure when /proc cannot be read (logged).
func peakRSSFigure(logf func(string, ...any), p *brokerproc.Process) int64 {
	if p == nil {
		return 0
	}
	return statusFigure(logf, p.Pid, "VmHWM:", "broker peak RSS")
}

// rssNowFigure is pid's current resident set (VmRSS), unknownFigure when /proc cannot be
// read (logged).
func rssNowFigure(logf func(string, ...any), pid int) int64 {
	return statusFigure(logf, pid, "VmRSS:", "broker RSS")
}

func statusFigure(logf func(string, ...any), pid int, key, what string) int64 {
	n, err := procStatusBytes(pid, key)
	if err != nil {
		logf("  %s unknown: %v", what, err)
		return unknownFigure
	}
	return n
}

// fmtCPU prints a CPU-time figure: "-" when not measured, "unknown" when unreadable.
func fmtCPU(d time.Duration) string {
	switch {
	case d == unknownFigure:
		return "unknown"
	case d <= 0:
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// fmtMiB prints a memory figure in MiB: "-" when not measured, "unknown" when unreadable.
func fmtMiB(n int64) string {
	switch {
	case n == unknownFigure:
		return "unknown"
	case n <= 0:
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// fmtBytesPerRecord prints a RestartResult.BytesPerInFlight figure (NaN: unknown).
func fmtBytesPerRecord(v float64) string {
	if math.IsNaN(v) {
		return "unknown"
	}
	return fmt.Sprintf("%.1f", v)
}

// figure is a CPU or memory figure for medianKnown and maxKnown: NaN when unknown.
func figure[T time.Duration | int64](v T) float64 {
	if v == unknownFigure {
		return math.NaN()
	}
	return float64(v)
}

// orUnknown is figure's inverse: unknownFigure for NaN.
func orUnknown(v float64) float64 {
	if math.IsNaN(v) {
		return unknownFigure
	}
	return v
}

// medianKnown is the median of v's known (not NaN) figures: NaN when v has figures and
// none is known, 0 when it has none.
func medianKnown(v []float64) float64 {
	known := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(known) == 0 && len(v) > 0 {
		return math.NaN()
	}
	return medianOf(known)
}

// maxKnown is the largest of v's known (not NaN) figures, NaN when v has figures and none
// is known, 0 when it has none.
func maxKnown(v []float64) float64 {
	known := slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	switch {
	case len(known) > 0:
		return slices.Max(known)
	case len(v) > 0:
		return math.NaN()
	}
	return 0
}
