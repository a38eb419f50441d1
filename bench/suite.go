package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exactq/exactq/bench/brokerproc"
)

// Target is a system under test: an external cluster at Brokers, or (Binary set) an exactq
// binary the suite starts itself on a fresh temporary data directory for every measurement.
type Target struct {
	Name    string   // label in the results, e.g. "exactq" or "kafka-4.4"
	Brokers []string // bootstrap addresses of an external cluster
	Binary  string   // path to an exactq binary to start (instead of Brokers)
	Fsync   string   // --fsync for a started exactq: always or never
	// TempDir is where started brokers keep their data (default os.TempDir()); put it on
	// the disk you mean to measure.
	TempDir string
	// Pid of an external target's broker process on this machine (e.g. the Apache Kafka
	// the suite started), for CPU and peak RSS accounting; 0 if unknown.
	Pid int
}

func (t Target) managed() bool { return t.Binary != "" }

// Suite is a set of measurements: every target × every partition count, Runs times, with
// the targets alternated innermost so that they share the machine's noise.
type Suite struct {
	Targets     []Target
	Partitions  []int32
	Records     int
	RecordBytes int
	Runs        int
	Consume     bool // also read the data back after producing (P2)
	// Share, when set, makes the suite run P3 instead of P1/P2: pre-produce Records into a
	// fresh topic (per partition count), then drain it with every count in Consumers of
	// share consumers (default 4) that accept every record explicitly.
	Share           bool
	Consumers       []int
	ShareMaxRecords int32             // kgo.ShareMaxRecords; 0: kgo's default (500)
	ShareFetchBytes int32             // kgo.FetchMaxBytes of the share consumers; 0: kgo's default (50 MiB)
	ShareFetchWait  time.Duration     // kgo.FetchMaxWait of the share consumers; 0: kgo's default (5 s)
	ShareGroupCfg   map[string]string // further group configs of the share group
	Rate            int               // records/s for produce (0: unpaced, as fast as possible)
	Linger          time.Duration
	BatchBytes      int32
	Log             io.Writer // progress lines; nil for none
}

// Row is one measurement.
type Row struct {
	Target      string
	Fsync       string // "" for an external target
	Partitions  int32
	Run         int
	Workload    string // "produce", "produce@<rate>/s" (paced), "consume" or "share"
	Consumers   int    // share only: share consumers in the group
	Records     int
	RecordBytes int
	Elapsed     time.Duration
	MBps        float64
	RecordsPS   float64
	P50, P99    time.Duration // produce only
	P999        time.Duration
	// BrokerCPU is the broker's user+system CPU time during the workload and BrokerRSS its
	// peak resident set so far (started exactq targets on Linux only; 0 otherwise).
	BrokerCPU time.Duration
	BrokerRSS int64
	// Share only: time from creating the consumers to the first record (not in Elapsed),
	// deliveries of already-delivered offsets, and deliveries the broker counted as
	// redeliveries (DeliveryCount > 1).
	Startup     time.Duration
	Duplicates  int
	Redelivered int
}

// Run executes the suite.
func (s Suite) Run(ctx context.Context) ([]Row, error) {
	var rows []Row
	runs := max(1, s.Runs)
	if s.Share {
		consumers := s.Consumers
		if len(consumers) == 0 {
			consumers = []int{4}
		}
		for run := 1; run <= runs; run++ {
			for _, p := range s.Partitions {
				for _, c := range consumers {
					for _, tg := range s.Targets {
						r, err := s.measureShare(ctx, tg, p, c, run)
						if err != nil {
							return rows, fmt.Errorf("%s, share, %d partitions, %d consumers, run %d: %w", tg.Name, p, c, run, err)
						}
						rows = append(rows, r)
					}
				}
			}
		}
		return rows, nil
	}
	for run := 1; run <= runs; run++ {
		for _, p := range s.Partitions {
			for _, tg := range s.Targets {
				rs, err := s.measure(ctx, tg, p, run)
				if err != nil {
					return rows, fmt.Errorf("%s, %d partitions, run %d: %w", tg.Name, p, run, err)
				}
				rows = append(rows, rs...)
			}
		}
	}
	return rows, nil
}

func (s Suite) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, format+"\n", args...)
	}
}

// startTarget starts a managed target's broker on a fresh data directory (stop undoes it),
// or returns an external target's brokers.
func startTarget(tg Target) (brokers []string, proc *brokerproc.Process, stop func(), err error) {
	// Write back the previous measurement's dirty pages first (outside the measured
	// interval), so that one system's unsynced data (Kafka, fsync never) is not flushed by
	// the kernel during, and charged to, the next system's measurement.
	syscall.Sync()
	if !tg.managed() {
		if tg.Pid > 0 {
			proc = brokerproc.Attach(tg.Pid)
		}
		return tg.Brokers, proc, func() {}, nil
	}
	dir, err := os.MkdirTemp(tg.TempDir, "exactq-bench-")
	if err != nil {
		return nil, nil, nil, err
	}
	proc, err = brokerproc.Start(brokerproc.Options{
		Binary: tg.Binary, DataDir: filepath.Join(dir, "data"), Fsync: tg.Fsync, LogLevel: "info", // the serving line is at info
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return []string{proc.Addr}, proc, func() { proc.Stop(); os.RemoveAll(dir) }, nil
}

// terminate stops a started broker cleanly and fails if it did not exit 0.
func terminate(proc *brokerproc.Process) error {
	if proc == nil {
		return nil
	}
	code, took, err := proc.Terminate(30 * time.Second)
	if err != nil || code != 0 {
		return fmt.Errorf("stopping exactq: exit %d after %v: %v\n%s", code, took, err, proc.Logs())
	}
	return nil
}

func (s Suite) measure(ctx context.Context, tg Target, partitions int32, run int) ([]Row, error) {
	brokers, proc, stop, err := startTarget(tg)
	if err != nil {
		return nil, err
	}
	defer stop()
	topic := fmt.Sprintf("bench-%dp-%d", partitions, time.Now().UnixNano())
	base := Row{Target: tg.Name, Fsync: tg.Fsync, Partitions: partitions, Run: run, Records: s.Records, RecordBytes: s.RecordBytes}

	s.logf("%s fsync=%s partitions=%d run %d: producing %d × %d B", tg.Name, tg.Fsync, partitions, run, s.Records, s.RecordBytes)
	cpu0 := procCPU(proc)
	pr, err := Produce(ctx, ProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: partitions, Records: s.Records, RecordBytes: s.RecordBytes,
		Linger: s.Linger, BatchMaxBytes: s.BatchBytes, Rate: s.Rate,
		Progress: func(n int) { s.logf("  produce: %d/%d acknowledged", n, s.Records) },
	})
	if err != nil {
		return nil, err
	}
	row := base
	row.Workload, row.Elapsed, row.MBps, row.RecordsPS = "produce", pr.Elapsed, pr.MBps(), pr.RecordsPerSec()
	if s.Rate > 0 {
		row.Workload = fmt.Sprintf("produce@%d/s", s.Rate)
	}
	row.P50, row.P99, row.P999 = pr.P50, pr.P99, pr.P999
	row.BrokerCPU, row.BrokerRSS = procCPU(proc)-cpu0, procRSS(proc)
	rows := []Row{row}
	s.logf("  %.1f MB/s, %.0f records/s, p50 %v p99 %v p999 %v", row.MBps, row.RecordsPS, row.P50, row.P99, row.P999)

	if s.Consume {
		cpu0 := procCPU(proc)
		cr, err := Consume(ctx, ConsumeConfig{Brokers: brokers, Topic: topic,
			Progress: func(n int) { s.logf("  consume: %d/%d read", n, s.Records) }})
		if err != nil {
			return rows, err
		}
		if cr.Records != pr.Records {
			return rows, fmt.Errorf("consumed %d records, produced %d", cr.Records, pr.Records)
		}
		row := base
		row.Workload, row.Elapsed, row.MBps, row.RecordsPS = "consume", cr.Elapsed, cr.MBps(), cr.RecordsPerSec()
		row.BrokerCPU, row.BrokerRSS = procCPU(proc)-cpu0, procRSS(proc)
		rows = append(rows, row)
		s.logf("  consume %.1f MB/s, %.0f records/s", row.MBps, row.RecordsPS)
	}
	return rows, terminate(proc)
}

// measureShare is one P3 measurement: pre-produce Records into a fresh topic, then drain it
// with consumers share consumers of a fresh share group.
func (s Suite) measureShare(ctx context.Context, tg Target, partitions int32, consumers, run int) (Row, error) {
	brokers, proc, stop, err := startTarget(tg)
	if err != nil {
		return Row{}, err
	}
	defer stop()
	id := time.Now().UnixNano()
	topic := fmt.Sprintf("bench-share-%dp-%d", partitions, id)
	s.logf("%s fsync=%s partitions=%d consumers=%d run %d: pre-producing %d × %d B", tg.Name, tg.Fsync, partitions, consumers, run, s.Records, s.RecordBytes)
	pr, err := Produce(ctx, ProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: partitions, Records: s.Records, RecordBytes: s.RecordBytes,
		Linger: s.Linger, BatchMaxBytes: s.BatchBytes,
		Progress: func(n int) { s.logf("  produce: %d/%d acknowledged", n, s.Records) },
	})
	if err != nil {
		return Row{}, err
	}
	s.logf("  produced at %.1f MB/s; share-consuming with %d consumers", pr.MBps(), consumers)
	cpu0 := procCPU(proc)
	sr, err := Share(ctx, ShareConfig{
		Brokers: brokers, Topic: topic, Group: fmt.Sprintf("bench-share-%d", id), Consumers: consumers,
		MaxRecords: s.ShareMaxRecords, FetchMaxBytes: s.ShareFetchBytes, FetchMaxWait: s.ShareFetchWait,
		GroupConfigs: s.ShareGroupCfg,
		Progress:     func(n int) { s.logf("  share: %d/%d accepted", n, pr.Records) },
	})
	if err != nil {
		return Row{}, err
	}
	if sr.Records != pr.Records {
		return Row{}, fmt.Errorf("accepted %d records, produced %d", sr.Records, pr.Records)
	}
	row := Row{Target: tg.Name, Fsync: tg.Fsync, Partitions: partitions, Consumers: consumers, Run: run,
		Workload: "share", Records: sr.Records, RecordBytes: s.RecordBytes,
		Elapsed: sr.Elapsed, MBps: sr.MBps(), RecordsPS: sr.RecordsPerSec(),
		BrokerCPU: procCPU(proc) - cpu0, BrokerRSS: procRSS(proc),
		Startup: sr.Startup, Duplicates: sr.Duplicates, Redelivered: sr.Redelivered}
	s.logf("  share %.1f MB/s, %.0f records/s (first record after %v; final ack flush %v; per consumer %v; %d duplicates, %d redelivered)",
		row.MBps, row.RecordsPS, sr.Startup.Round(time.Millisecond), sr.AckDrain.Round(time.Millisecond), sr.PerConsumer, sr.Duplicates, sr.Redelivered)
	return row, terminate(proc)
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on every
// Linux architecture Go supports).
const clockTicks = 100

// procCPU is the user+system CPU time of a running process, from /proc (0 if unavailable).
func procCPU(p *brokerproc.Process) time.Duration {
	if p == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesized command name; utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

// procRSS is the peak resident set (VmHWM) of a running process, from /proc (0 if
// unavailable).
func procRSS(p *brokerproc.Process) int64 {
	if p == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// WriteMarkdown writes rows as a Markdown table; share rows (P3) go to a second table
// with their own columns, after a blank line when there are both.
func WriteMarkdown(w io.Writer, rows []Row) error {
	var plain, share []Row
	for _, r := range rows {
		if r.Workload == "share" {
			share = append(share, r)
		} else {
			plain = append(plain, r)
		}
	}
	var b strings.Builder
	if len(plain) > 0 || len(share) == 0 {
		writePlainTable(&b, plain)
	}
	if len(share) > 0 {
		if len(plain) > 0 {
			b.WriteString("\n")
		}
		writeShareTable(&b, share)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cpuRSS(r Row) (cpu, rss string) {
	cpu, rss = "-", "-"
	if r.BrokerCPU > 0 {
		cpu = fmt.Sprintf("%.2f s (%.0f%%)", r.BrokerCPU.Seconds(), 100*r.BrokerCPU.Seconds()/r.Elapsed.Seconds())
	}
	if r.BrokerRSS > 0 {
		rss = fmt.Sprintf("%.0f MiB", float64(r.BrokerRSS)/(1<<20))
	}
	return cpu, rss
}

func writeShareTable(b *strings.Builder, rows []Row) {
	b.WriteString("| target | fsync | partitions | consumers | run | workload | records | record size | MB/s | records/s | first record after | duplicates | redelivered | broker CPU | broker peak RSS |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fsync := r.Fsync
		if fsync == "" {
			fsync = "-"
		}
		cpu, rss := cpuRSS(r)
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %s | %d | %d B | %.1f | %.0f | %s | %d | %d | %s | %s |\n",
			r.Target, fsync, r.Partitions, r.Consumers, r.Run, r.Workload, r.Records, r.RecordBytes, r.MBps, r.RecordsPS,
			fmtDur(r.Startup), r.Duplicates, r.Redelivered, cpu, rss)
	}
}

func writePlainTable(b *strings.Builder, rows []Row) {
	b.WriteString("| target | fsync | partitions | run | workload | records | record size | MB/s | records/s | p50 | p99 | p99.9 | broker CPU | broker peak RSS |\n")
	b.WriteString("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fsync := r.Fsync
		if fsync == "" {
			fsync = "-"
		}
		lat := func(d time.Duration) string {
			if !strings.HasPrefix(r.Workload, "produce") {
				return "-"
			}
			return fmtDur(d)
		}
		cpu, rss := cpuRSS(r)
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %d | %d B | %.1f | %.0f | %s | %s | %s | %s | %s |\n",
			r.Target, fsync, r.Partitions, r.Run, r.Workload, r.Records, r.RecordBytes, r.MBps, r.RecordsPS,
			lat(r.P50), lat(r.P99), lat(r.P999), cpu, rss)
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}
