package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is what the bench reads of /proc/<pid>/stat.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64 // clock ticks
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// Fields after the parenthesized command name (which may hold spaces): state is
	// field 3, ppid 4, utime 14, stime 15, cutime 16, cstime 17.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 15", pid, len(f))
	}
	var st procStat
	for _, x := range []struct {
		i int
		p *int64
	}{{11, &st.utime}, {12, &st.stime}, {13, &st.cutime}, {14, &st.cstime}} {
		if *x.p, err = strconv.ParseInt(f[x.i], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: field %d: %w", pid, x.i+3, err)
		}
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	st.ppid = ppid
	return st, nil
}

// descendants is pid and every live process below it (Kafka's start script may leave the
// JVM a child; a JVM may fork helpers), from one pass over /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if st, err := readProcStat(p); err == nil {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// procTreeCPU is the user+system CPU time of pid, its live descendants and the children it
// has reaped (cutime+cstime): the broker's whole cost, whatever it forks. A descendant that
// exits unreaped between two readings loses its time (none of the brokers does that).
func procTreeCPU(pid int) (time.Duration, error) {
	var ticks int64
	for i, p := range descendants(pid) {
		st, err := readProcStat(p)
		if err != nil {
			if i == 0 {
				return 0, err
			}
			continue // a descendant gone since the scan
		}
		ticks += st.utime + st.stime
		if i == 0 {
			ticks += st.cutime + st.cstime
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// runQueueWait is the time the threads of pid and its descendants have spent runnable but
// waiting for a CPU (the second field of /proc/<pid>/task/<tid>/schedstat, in ns), summed:
// a broker that wants a CPU and does not get one (other work on the machine, or the client)
// shows here and not in its CPU time. Threads that exited are no longer counted.
func runQueueWait(pid int) (time.Duration, error) {
	var total int64
	found := false
	for _, p := range descendants(pid) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", p))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // the thread ended
			}
			f := strings.Fields(string(b))
			if len(f) < 2 {
				continue
			}
			w, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", t, err)
			}
			total += w
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("no schedstat for process %d (kernel without CONFIG_SCHEDSTATS?)", pid)
	}
	return time.Duration(total), nil
}

// selfCPU is this process's (the client's) user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return unknownFigure
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MachineState is the machine's state at one moment, for telling a slow run from a fast
// one: fields are -1 when unreadable.
type MachineState struct {
	Load1        float64 // 1-minute load average
	DirtyKiB     int64   // /proc/vmstat nr_dirty (page cache waiting for writeback)
	WritebackKiB int64   // nr_writeback (being written back now)
	MajFaults    int64   // pgmajfault since boot
}

func machineState() MachineState {
	ms := MachineState{Load1: -1, DirtyKiB: -1, WritebackKiB: -1, MajFaults: -1}
	if f := strings.Fields(readFirstLine("/proc/loadavg")); len(f) > 0 {
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			ms.Load1 = v
		}
	}
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return ms
	}
	page := int64(os.Getpagesize()) / 1024
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "nr_dirty":
			ms.DirtyKiB = n * page
		case "nr_writeback":
			ms.WritebackKiB = n * page
		case "pgmajfault":
			ms.MajFaults = n
		}
	}
	return ms
}

// RunDiag is a measured window's variance diagnostics: the machine before and after, and
// the broker's run-queue wait over the window (unknownFigure: unreadable; 0: no broker
// process of ours to read).
type RunDiag struct {
	Before, After MachineState
	BrokerWait    time.Duration
	// LoadWarning: the load average at the start exceeded Suite.LoadWarn.
	LoadWarning bool
}

// window measures one workload's timed part: broker and client CPU, the broker's
// run-queue wait and the machine's state at both ends.
type window struct {
	proc   int // broker pid, 0 if none
	cpu0   time.Duration
	self0  time.Duration
	wait0  time.Duration
	before MachineState
	warned bool
}

// windowFigures is what a window measured.
type windowFigures struct {
	BrokerCPU, ClientCPU time.Duration
	Diag                 *RunDiag
}

func (f windowFigures) apply(r *Row) {
	r.BrokerCPU, r.ClientCPU, r.Diag = f.BrokerCPU, f.ClientCPU, f.Diag
}

// openWindow starts a window on the broker pid (0: none); what names the run in the load
// warning it logs when the load average exceeds s.LoadWarn.
func (s *Suite) openWindow(pid int, what string) *window {
	w := &window{proc: pid, before: machineState()}
	if s.LoadWarn > 0 && w.before.Load1 > s.LoadWarn {
		w.warned = true
		s.logf("  WARNING: load average %.2f at the start of %s exceeds %.2f: other work shares the machine, this run's figures do not compare",
			w.before.Load1, what, s.LoadWarn)
	}
	w.cpu0, w.wait0 = s.brokerCPU(pid), s.brokerWait(pid)
	w.self0 = selfCPU()
	return w
}

// close ends the window (nil: a window never opened, nothing measured).
func (w *window) close(s *Suite) windowFigures {
	if w == nil {
		return windowFigures{}
	}
	self1 := selfCPU()
	cpu1, wait1 := s.brokerCPU(w.proc), s.brokerWait(w.proc)
	f := windowFigures{BrokerCPU: cpuBetween(w.cpu0, cpu1), ClientCPU: cpuBetween(w.self0, self1),
		Diag: &RunDiag{Before: w.before, After: machineState(), BrokerWait: cpuBetween(w.wait0, wait1), LoadWarning: w.warned}}
	return f
}

func (s *Suite) brokerCPU(pid int) time.Duration {
	return s.brokerFigure(pid, "CPU time", procTreeCPU)
}

func (s *Suite) brokerWait(pid int) time.Duration {
	return s.brokerFigure(pid, "run-queue wait", runQueueWait)
}

// brokerFigure reads a broker figure: 0 without a broker process, unknownFigure (logged)
// when /proc cannot be read.
func (s *Suite) brokerFigure(pid int, what string, read func(int) (time.Duration, error)) time.Duration {
	if pid == 0 {
		return 0
	}
	d, err := read(pid)
	if err != nil {
		s.logf("  broker %s unknown: %v", what, err)
		return unknownFigure
	}
	return d
}
