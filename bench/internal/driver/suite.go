package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	// Env is added to a started exactq's environment; PprofAddr is where that exactq serves
	// /debug/pprof (bench/cmd/exactq-pprof with EXACTQ_PPROF_LISTEN in Env), for profiles.
	Env       []string
	PprofAddr string
	// Kafka marks the Apache Kafka reference the driver started: P7 starts (and restarts)
	// an instance of its own on the same jars.
	Kafka bool
}

func (t Target) managed() bool { return t.Binary != "" }

// label is the target's name with its fsync policy, as the results name systems.
func (t Target) label() string {
	if t.Fsync != "" && !t.Kafka {
		return t.Name + " fsync " + t.Fsync
	}
	return t.Name
}

// Workload ids (BENCHMARKS.md).
const (
	P1 = "P1" // produce
	P2 = "P2" // consume
	P3 = "P3" // share consume
	P4 = "P4" // EOS pipeline, consumer groups
	P5 = "P5" // EOS pipeline, share groups (and its non-transactional baseline)
	P6 = "P6" // end-to-end latency, produce → share consume
	P7 = "P7" // restart
)

// AllWorkloads are the workloads in the order a suite runs them.
var AllWorkloads = []string{P1, P2, P3, P4, P5, P6, P7}

// Suite is a set of measurements: every selected workload, every target, Runs times, with
// the targets alternated innermost so that they share the machine's noise. Workloads run
// one after the other (all runs of P1/P2, then of P3, ...), so that P6 can run at half of
// P3's measured peak.
type Suite struct {
	Targets     []Target
	Partitions  []int32 // P1/P2 partition counts
	Records     int     // P1/P2 records per run
	RecordBytes int
	Runs        int
	// Workloads selects P1..P7 (default: P1 alone; P1 and P2 with Consume; P3 with Share).
	Workloads []string
	Consume   bool // also read the data back after producing (P2)
	// Share, when set, makes the suite run P3 instead of P1/P2: pre-produce Records into a
	// fresh topic (per partition count), then drain it with every count in Consumers of
	// share consumers (default 4) that accept every record explicitly.
	Share           bool
	Consumers       []int
	ShareRecords    int               // P3 records per run (default Records)
	ShareMaxRecords int32             // kgo.ShareMaxRecords; 0: kgo's default (500)
	ShareFetchBytes int32             // kgo.FetchMaxBytes of the share consumers; 0: kgo's default (50 MiB)
	ShareFetchWait  time.Duration     // kgo.FetchMaxWait of the share consumers; 0: kgo's default (5 s)
	ShareGroupCfg   map[string]string // further group configs of the share group
	Rate            int               // records/s for produce (0: unpaced, as fast as possible)
	Linger          time.Duration
	BatchBytes      int32
	// P4/P5: inputs per run (default Records), commit interval (default 100 ms) and, for the
	// share pipelines, inputs per transaction at most (default 1000: half the default
	// share.partition.max.record.locks).
	PipelineRecords    int
	CommitInterval     time.Duration
	ShareCommitRecords int
	// P6: records per run, or (LatencyRecords 0) LatencyDuration × rate; LatencyRate 0
	// means half of the lowest P3 median records/s of the targets in this suite.
	LatencyRecords  int
	LatencyDuration time.Duration
	LatencyRate     int
	Restart         RestartConfig // P7
	// BeforeRestart, if set, is called before P7 (the driver stops the shared Kafka, which
	// P7 does not use).
	BeforeRestart func()
	// PprofDir, with targets that have a PprofAddr, receives a CPU profile of PprofSeconds
	// (default 5) taken during the measured part of every workload's first run.
	PprofDir     string
	PprofSeconds int
	// Generators drive P1/P2 (GenKgo, GenRaw; default kgo alone): each is measured like a
	// workload of its own ("produce" and "consume" for kgo, "produce-raw" and "consume-raw"
	// for raw), on every target. Raw tunes the raw generator.
	Generators []string
	Raw        RawConfig
	// LoadWarn: a measurement that starts with the 1-minute load average above this logs
	// a warning and is flagged in the report (0: no warning).
	LoadWarn float64
	Log      io.Writer // progress lines; nil for none (a *Progress draws a bar on a terminal)
}

// Row is one measurement.
type Row struct {
	ID          string // workload id, P1..P7 ("" is taken from Workload)
	Target      string
	Fsync       string // "" for an external target
	Partitions  int32
	Run         int
	Workload    string // "produce", "produce@<rate>/s" (paced), "consume", "share", "eos-group", "eos-share", "share-pipeline", "e2e-latency", "restart"
	Consumers   int    // share and e2e-latency: share consumers in the group
	Records     int
	RecordBytes int
	Elapsed     time.Duration
	MBps        float64
	RecordsPS   float64
	// P50, P99, P999: produce: Produce to acknowledgement; pipelines: Poll to the commit
	// covering the input; e2e-latency: Produce to a share consumer's PollFetches.
	P50, P99 time.Duration
	P999     time.Duration
	// BrokerCPU is the broker's user+system CPU time during the workload (its process and
	// descendants) and BrokerRSS its peak resident set so far (brokers with a known pid on
	// Linux; 0 otherwise; unknownFigure when /proc could not be read). ClientCPU is the bench
	// process's own CPU time over the same window: with both, a reader sees which side
	// bounded the run.
	BrokerCPU time.Duration
	BrokerRSS int64
	ClientCPU time.Duration
	// Diag is the machine's state around the window and the broker's run-queue wait (nil
	// for P7, which measures restarts).
	Diag *RunDiag
	// Share only: time from creating the consumers to the first record (not in Elapsed),
	// deliveries of already-delivered offsets, and deliveries the broker counted as
	// redeliveries (DeliveryCount > 1).
	Startup     time.Duration
	Duplicates  int
	Redelivered int
	// StateLag: see ShareResult.StateLag.
	StateLag int64
	// Pipelines: transactions (checkpoints) committed and aborted.
	Commits, Aborts int
	Rate            int            // e2e-latency: offered records/s
	Restart         *RestartResult // restart (P7)
}

// WorkloadID is the row's BENCHMARKS.md id.
func (r Row) WorkloadID() string {
	if r.ID != "" {
		return r.ID
	}
	switch {
	case strings.HasPrefix(r.Workload, "produce"):
		return P1
	case strings.HasPrefix(r.Workload, "consume"):
		return P2
	case r.Workload == "share":
		return P3
	case r.Workload == "eos-group":
		return P4
	case r.Workload == "eos-share", r.Workload == "share-pipeline":
		return P5
	case r.Workload == "e2e-latency":
		return P6
	case r.Workload == "restart":
		return P7
	}
	return ""
}

// System is the row's target with its fsync policy ("exactq fsync never", "kafka-4.4").
func (r Row) System() string {
	if r.Fsync != "" {
		return r.Target + " fsync " + r.Fsync
	}
	return r.Target
}

func (s *Suite) workloads() []string {
	if len(s.Workloads) > 0 {
		return s.Workloads
	}
	switch {
	case s.Share:
		return []string{P3}
	case s.Consume:
		return []string{P1, P2}
	}
	return []string{P1}
}

func (s *Suite) generators() []string {
	if len(s.Generators) > 0 {
		return s.Generators
	}
	return []string{GenKgo}
}

// pid is a started or attached broker's process id (0: none).
func pid(p *brokerproc.Process) int {
	if p == nil {
		return 0
	}
	return p.Pid
}

func (s *Suite) has(id string) bool { return slices.Contains(s.workloads(), id) }

// Run executes the suite. On error it returns the rows measured so far.
func (s *Suite) Run(ctx context.Context) ([]Row, error) {
	var rows []Row
	runs := max(1, s.Runs)
	if s.has(P1) || s.has(P2) {
		for run := 1; run <= runs; run++ {
			for _, p := range s.Partitions {
				for _, gen := range s.generators() {
					for _, tg := range s.Targets {
						rs, err := s.measure(ctx, tg, gen, p, run)
						rows = append(rows, rs...)
						if err != nil {
							return rows, fmt.Errorf("%s, %s generator, %d partitions, run %d: %w", tg.label(), gen, p, run, err)
						}
					}
				}
			}
		}
	}
	if s.has(P3) {
		consumers := s.Consumers
		if len(consumers) == 0 {
			consumers = []int{4}
		}
		parts := s.Partitions
		if len(s.Workloads) > 0 || len(parts) == 0 {
			parts = []int32{1} // P3 is one partition; the share command may ask for more
		}
		for run := 1; run <= runs; run++ {
			for _, p := range parts {
				for _, c := range consumers {
					for _, tg := range s.Targets {
						r, err := s.measureShare(ctx, tg, p, c, run)
						if err != nil {
							return rows, fmt.Errorf("%s, share, %d partitions, %d consumers, run %d: %w", tg.label(), p, c, run, err)
						}
						rows = append(rows, r)
					}
				}
			}
		}
	}
	type step struct {
		id   string
		mode PipelineMode
	}
	var pipes []step
	if s.has(P4) {
		pipes = append(pipes, step{P4, PipelineEOSGroup})
	}
	if s.has(P5) {
		pipes = append(pipes, step{P5, PipelineShare}, step{P5, PipelineEOSShare})
	}
	for run := 1; run <= runs && len(pipes) > 0; run++ {
		for _, st := range pipes {
			for _, tg := range s.Targets {
				if st.id == P5 && tg.Kafka {
					continue // Kafka has no transactional share acknowledgements (KIP-1289)
				}
				r, err := s.measurePipeline(ctx, tg, st.id, st.mode, run)
				if err != nil {
					return rows, fmt.Errorf("%s, %s %s, run %d: %w", tg.label(), st.id, st.mode, run, err)
				}
				rows = append(rows, r)
			}
		}
	}
	if s.has(P6) {
		rate := s.LatencyRate
		if rate <= 0 {
			rate = halfPeak(rows)
		}
		if rate <= 0 {
			return rows, errors.New("P6 needs a rate: run it with P3 (half of P3's peak) or give -latency-rate")
		}
		for run := 1; run <= runs; run++ {
			for _, tg := range s.Targets {
				r, err := s.measureLatency(ctx, tg, rate, run)
				if err != nil {
					return rows, fmt.Errorf("%s, e2e latency, run %d: %w", tg.label(), run, err)
				}
				rows = append(rows, r)
			}
		}
	}
	if s.has(P7) {
		rs, err := s.runRestart(ctx, runs)
		rows = append(rows, rs...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// halfPeak is half of the lowest, over systems, of the median P3 records/s: the rate P6
// offers every system, so that they are compared at the same load, at most half of any
// one's peak.
func halfPeak(rows []Row) int {
	by := map[string][]float64{}
	for _, r := range rows {
		if r.WorkloadID() == P3 {
			by[r.System()] = append(by[r.System()], r.RecordsPS)
		}
	}
	low := 0.0
	for _, v := range by {
		m := medianOf(v)
		if low == 0 || m < low {
			low = m
		}
	}
	return int(low / 2)
}

func (s *Suite) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, format+"\n", args...)
	}
}

// step starts a progress step: on a *Progress it sets the bar's label and total, and the
// returned func reports a count; otherwise the func logs "what: n/total" lines.
func (s *Suite) step(id, what string, tg Target, run, total int) func(int) {
	runs := max(1, s.Runs)
	if p, ok := s.Log.(*Progress); ok {
		p.Begin(fmt.Sprintf("%s %s", id, what), tg.label(), run, runs, total)
		return p.Set
	}
	return func(n int) { s.logf("  %s: %d/%d", what, n, total) }
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
		Env: tg.Env,
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

// profile takes a CPU profile of tg's broker (first run only, when PprofDir is set and the
// target serves pprof) while the measured part of a workload runs; the returned func waits
// for it and writes it to PprofDir/<name>.pprof.
func (s *Suite) profile(tg Target, run int, name string) func() {
	if s.PprofDir == "" || tg.PprofAddr == "" || run != 1 {
		return func() {}
	}
	secs := s.PprofSeconds
	if secs <= 0 {
		secs = 5
	}
	return s.capture(tg, fmt.Sprintf("profile?seconds=%d", secs), name)
}

// capture fetches http://<tg.PprofAddr>/debug/pprof/<what> into PprofDir/<name>.pprof in
// the background, retrying for 30 s while nothing listens there yet (a broker starting
// up); the returned func waits for it.
func (s *Suite) capture(tg Target, what, name string) func() {
	path := filepath.Join(s.PprofDir, strings.NewReplacer(" ", "-", "/", "-").Replace(name)+".pprof")
	done := make(chan error, 1)
	go func() {
		var resp *http.Response
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			resp, err = http.Get(fmt.Sprintf("http://%s/debug/pprof/%s", tg.PprofAddr, what))
			if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			s.logf("  profile %s: %v", path, err)
		} else {
			s.logf("  profile: %s", path)
		}
	}
}

// measure is one P1 (and P2) measurement with generator gen on a fresh topic.
func (s *Suite) measure(ctx context.Context, tg Target, gen string, partitions int32, run int) ([]Row, error) {
	brokers, proc, stop, err := startTarget(tg)
	if err != nil {
		return nil, err
	}
	defer stop()
	topic := fmt.Sprintf("bench-%dp-%d", partitions, time.Now().UnixNano())
	base := Row{Target: tg.Name, Fsync: tg.Fsync, Partitions: partitions, Run: run, Records: s.Records, RecordBytes: s.RecordBytes}
	suffix := ""
	if gen == GenRaw {
		suffix = "-raw"
	}

	s.logf("%s partitions=%d run %d: producing %d × %d B (%s generator)", tg.label(), partitions, run, s.Records, s.RecordBytes, gen)
	pcfg := ProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: partitions, Records: s.Records, RecordBytes: s.RecordBytes,
		Linger: s.Linger, BatchMaxBytes: s.BatchBytes, Rate: s.Rate,
		Progress: s.step(P1, fmt.Sprintf("produce%s %dp", suffix, partitions), tg, run, s.Records),
	}
	// Create the topic before the window, so that the broker's CPU figure is the produce's
	// (creating 8 partitions costs Kafka's controller more than exactq's); the generators
	// find it there.
	if err := ensureTopic(ctx, brokers, topic, partitions); err != nil {
		return nil, err
	}
	win := s.openWindow(pid(proc), fmt.Sprintf("P1 produce%s %dp on %s, run %d", suffix, partitions, tg.label(), run))
	prof := s.profile(tg, run, fmt.Sprintf("P1-produce%s-%dp-%s", suffix, partitions, tg.label()))
	var pr ProduceResult
	if gen == GenRaw {
		pr, err = RawProduce(ctx, pcfg, s.Raw)
	} else {
		pr, err = Produce(ctx, pcfg)
	}
	figs := win.close(s)
	prof()
	if err != nil {
		return nil, err
	}
	row := base
	row.ID, row.Workload, row.Elapsed, row.MBps, row.RecordsPS = P1, "produce"+suffix, pr.Elapsed, pr.MBps(), pr.RecordsPerSec()
	if s.Rate > 0 {
		row.Workload = fmt.Sprintf("produce@%d/s", s.Rate)
	}
	row.P50, row.P99, row.P999 = pr.P50, pr.P99, pr.P999
	figs.apply(&row)
	row.BrokerRSS = peakRSSFigure(s.logf, proc)
	rows := []Row{row}
	s.logf("  %.1f MB/s, %.0f records/s, p50 %v p99 %v p999 %v; %s", row.MBps, row.RecordsPS, row.P50, row.P99, row.P999, cpuLine(row))

	if s.Consume || s.has(P2) {
		win := s.openWindow(pid(proc), fmt.Sprintf("P2 consume%s %dp on %s, run %d", suffix, partitions, tg.label(), run))
		prof := s.profile(tg, run, fmt.Sprintf("P2-consume%s-%dp-%s", suffix, partitions, tg.label()))
		ccfg := ConsumeConfig{Brokers: brokers, Topic: topic,
			Progress: s.step(P2, fmt.Sprintf("consume%s %dp", suffix, partitions), tg, run, s.Records)}
		var cr ConsumeResult
		if gen == GenRaw {
			cr, err = RawConsume(ctx, ccfg, s.Raw, s.RecordBytes)
		} else {
			cr, err = Consume(ctx, ccfg)
		}
		figs := win.close(s)
		prof()
		if err != nil {
			return rows, err
		}
		if cr.Records != pr.Records {
			return rows, fmt.Errorf("consumed %d records, produced %d", cr.Records, pr.Records)
		}
		row := base
		row.ID, row.Workload, row.Elapsed, row.MBps, row.RecordsPS = P2, "consume"+suffix, cr.Elapsed, cr.MBps(), cr.RecordsPerSec()
		figs.apply(&row)
		row.BrokerRSS = peakRSSFigure(s.logf, proc)
		rows = append(rows, row)
		s.logf("  consume %.1f MB/s, %.0f records/s; %s", row.MBps, row.RecordsPS, cpuLine(row))
	}
	return rows, terminate(proc)
}

func (s *Suite) shareRecords() int {
	if s.ShareRecords > 0 {
		return s.ShareRecords
	}
	return s.Records
}

// prefill produces n records into a fresh topic for the workloads that read a full log.
func (s *Suite) prefill(ctx context.Context, brokers []string, topic string, partitions int32, n int, id string, tg Target, run int) (ProduceResult, error) {
	s.logf("%s %s run %d: pre-producing %d × %d B", id, tg.label(), run, n, s.RecordBytes)
	return Produce(ctx, ProduceConfig{
		Brokers: brokers, Topic: topic, Partitions: partitions, Records: n, RecordBytes: s.RecordBytes,
		Linger: s.Linger, BatchMaxBytes: s.BatchBytes,
		Progress: s.step(id, "pre-produce", tg, run, n),
	})
}

// measureShare is one P3 measurement: pre-produce records into a fresh topic, then drain it
// with consumers share consumers of a fresh share group.
func (s *Suite) measureShare(ctx context.Context, tg Target, partitions int32, consumers, run int) (Row, error) {
	brokers, proc, stop, err := startTarget(tg)
	if err != nil {
		return Row{}, err
	}
	defer stop()
	id := time.Now().UnixNano()
	topic := fmt.Sprintf("bench-share-%dp-%d", partitions, id)
	n := s.shareRecords()
	pr, err := s.prefill(ctx, brokers, topic, partitions, n, P3, tg, run)
	if err != nil {
		return Row{}, err
	}
	s.logf("  produced at %.1f MB/s; share-consuming with %d consumers", pr.MBps(), consumers)
	var win *window
	var figs windowFigures
	prof := s.profile(tg, run, fmt.Sprintf("P3-share-%dc-%s", consumers, tg.label()))
	sr, err := Share(ctx, ShareConfig{
		Brokers: brokers, Topic: topic, Group: fmt.Sprintf("bench-share-%d", id), Consumers: consumers,
		MaxRecords: s.ShareMaxRecords, FetchMaxBytes: s.ShareFetchBytes, FetchMaxWait: s.ShareFetchWait,
		GroupConfigs: s.ShareGroupCfg,
		Progress:     s.step(P3, fmt.Sprintf("share %dc", consumers), tg, run, pr.Records),
		OnStart: func() {
			win = s.openWindow(pid(proc), fmt.Sprintf("P3 share %dc on %s, run %d", consumers, tg.label(), run))
		},
		OnEnd: func() { figs = win.close(s) },
	})
	prof()
	if err != nil {
		return Row{}, err
	}
	if sr.Records != pr.Records {
		return Row{}, fmt.Errorf("accepted %d records, produced %d", sr.Records, pr.Records)
	}
	row := Row{ID: P3, Target: tg.Name, Fsync: tg.Fsync, Partitions: partitions, Consumers: consumers, Run: run,
		Workload: "share", Records: sr.Records, RecordBytes: s.RecordBytes,
		Elapsed: sr.Elapsed, MBps: sr.MBps(), RecordsPS: sr.RecordsPerSec(),
		BrokerRSS: peakRSSFigure(s.logf, proc),
		Startup:   sr.Startup, Duplicates: sr.Duplicates, Redelivered: sr.Redelivered, StateLag: sr.StateLag}
	figs.apply(&row)
	s.logf("  share %.1f MB/s, %.0f records/s (first record after %v; final ack flush %v; per consumer %v; %d duplicates, %d redelivered)",
		row.MBps, row.RecordsPS, sr.Startup.Round(time.Millisecond), sr.AckDrain.Round(time.Millisecond), sr.PerConsumer, sr.Duplicates, sr.Redelivered)
	return row, terminate(proc)
}

// measurePipeline is one P4 or P5 measurement: pre-produce the inputs into a fresh topic,
// run the pipeline to a fresh output topic, and check the outputs (exactly one committed
// output per input) and the group's committed position or drained share partition.
func (s *Suite) measurePipeline(ctx context.Context, tg Target, id string, mode PipelineMode, run int) (Row, error) {
	brokers, proc, stop, err := startTarget(tg)
	if err != nil {
		return Row{}, err
	}
	defer stop()
	uniq := time.Now().UnixNano()
	in, out := fmt.Sprintf("bench-%s-in-%d", mode, uniq), fmt.Sprintf("bench-%s-out-%d", mode, uniq)
	n := s.PipelineRecords
	if n <= 0 {
		n = s.Records
	}
	if _, err := s.prefill(ctx, brokers, in, 1, n, id, tg, run); err != nil {
		return Row{}, err
	}
	if err := ensureTopic(ctx, brokers, out, 1); err != nil {
		return Row{}, err
	}
	cfg := PipelineConfig{Brokers: brokers, Mode: mode, Input: in, Output: out, Group: fmt.Sprintf("bench-%s-%d", mode, uniq),
		TransactionalID: fmt.Sprintf("bench-%s-%d", mode, uniq), Records: n, CommitInterval: s.CommitInterval,
		Progress: s.step(id, mode.String(), tg, run, n)}
	var win *window
	cfg.OnStart = func() { win = s.openWindow(pid(proc), fmt.Sprintf("%s %s on %s, run %d", id, mode, tg.label(), run)) }
	if mode != PipelineEOSGroup {
		cfg.GroupConfigs = s.ShareGroupCfg
		cfg.CommitRecords = s.ShareCommitRecords
		if cfg.CommitRecords <= 0 {
			cfg.CommitRecords = 1000
		}
	}
	prof := s.profile(tg, run, fmt.Sprintf("%s-%s-%s", id, mode, tg.label()))
	pr, err := RunPipeline(ctx, cfg)
	prof()
	if err != nil {
		return Row{}, err
	}
	figs := win.close(s)
	if err := verifyOutputs(ctx, brokers, out, n); err != nil {
		return Row{}, err
	}
	if mode == PipelineEOSGroup {
		err = verifyGroupCommitted(ctx, brokers, cfg.Group, in)
	} else {
		err = verifyShareDrained(ctx, brokers, cfg.Group, in)
	}
	if err != nil {
		return Row{}, err
	}
	row := Row{ID: id, Target: tg.Name, Fsync: tg.Fsync, Partitions: 1, Run: run, Workload: mode.String(),
		Records: pr.Records, RecordBytes: s.RecordBytes, Elapsed: pr.Elapsed, MBps: pr.MBps(), RecordsPS: pr.RecordsPerSec(),
		P50: pr.P50, P99: pr.P99, P999: pr.P999, BrokerRSS: peakRSSFigure(s.logf, proc),
		Startup: pr.Startup, Redelivered: pr.Redelivered, Commits: pr.Commits, Aborts: pr.Aborts}
	figs.apply(&row)
	s.logf("  %s %.0f records/s, poll→commit p50 %v p99 %v, %d commits, %d aborts", mode, row.RecordsPS, row.P50, row.P99, row.Commits, row.Aborts)
	return row, terminate(proc)
}

// newAdmin is a kgo client with its kadm client.
func newAdmin(brokers []string) (*kgo.Client, *kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, err
	}
	return cl, kadm.NewClient(cl), nil
}

// verifyShareDrained checks that nothing of topic is left for the share group.
func verifyShareDrained(ctx context.Context, brokers []string, group, topic string) error {
	cl, adm, err := newAdmin(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, ends, err := offsetRange(ctx, adm, topic)
	if err != nil {
		return err
	}
	_, err = waitShareDrained(ctx, adm, brokers, group, topic, ends)
	return err
}

// measureLatency is one P6 measurement at rate records/s.
func (s *Suite) measureLatency(ctx context.Context, tg Target, rate, run int) (Row, error) {
	brokers, proc, stop, err := startTarget(tg)
	if err != nil {
		return Row{}, err
	}
	defer stop()
	consumers := 4
	if len(s.Consumers) > 0 {
		consumers = s.Consumers[0]
	}
	n := s.LatencyRecords
	if n <= 0 {
		d := s.LatencyDuration
		if d <= 0 {
			d = 20 * time.Second
		}
		n = max(1, int(float64(rate)*d.Seconds()))
	}
	uniq := time.Now().UnixNano()
	s.logf("P6 %s run %d: %d records at %d/s to %d share consumers", tg.label(), run, n, rate, consumers)
	var win *window
	var figs windowFigures
	prof := s.profile(tg, run, "P6-e2e-latency-"+tg.label())
	lr, err := Latency(ctx, LatencyConfig{Brokers: brokers, Topic: fmt.Sprintf("bench-latency-%d", uniq), Group: fmt.Sprintf("bench-latency-%d", uniq),
		Consumers: consumers, Rate: rate, Records: n, RecordBytes: max(16, s.RecordBytes),
		Progress: s.step(P6, "e2e latency", tg, run, n), OnStart: func() { win = s.openWindow(pid(proc), fmt.Sprintf("P6 on %s, run %d", tg.label(), run)) },
		OnEnd: func() { figs = win.close(s) }})
	prof()
	if err != nil {
		return Row{}, err
	}
	row := Row{ID: P6, Target: tg.Name, Fsync: tg.Fsync, Partitions: 1, Consumers: consumers, Run: run, Workload: "e2e-latency",
		Records: lr.Records, RecordBytes: max(16, s.RecordBytes), Elapsed: lr.Elapsed, MBps: lr.MBps(), RecordsPS: lr.RecordsPerSec(),
		P50: lr.P50, P99: lr.P99, P999: lr.P999, BrokerRSS: peakRSSFigure(s.logf, proc),
		Startup: lr.Startup, Duplicates: lr.Duplicates, StateLag: lr.StateLag, Rate: rate}
	figs.apply(&row)
	s.logf("  e2e p50 %v p99 %v p999 %v at %.0f records/s", row.P50, row.P99, row.P999, row.RecordsPS)
	return row, terminate(proc)
}

// runRestart is P7: set every target up once (log, then in-flight share state), then
// restart each Runs times, alternating.
func (s *Suite) runRestart(ctx context.Context, runs int) ([]Row, error) {
	cfg := s.Restart
	if cfg.RecordBytes <= 0 {
		cfg.RecordBytes = s.RecordBytes
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 64 << 10
	}
	if cfg.Locks <= 0 || cfg.InFlight < cfg.Locks || cfg.LogBytes <= 0 {
		return nil, fmt.Errorf("P7: bad restart config %+v", cfg)
	}
	if runs > 8 {
		return nil, errors.New("P7: at most 8 runs (each restart delivers the held record once more; the group's delivery limit is 10)")
	}
	if s.BeforeRestart != nil {
		s.BeforeRestart()
	}
	tmp := ""
	var benches []*restartBench
	var dirs []string
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	for _, tg := range s.Targets {
		if !tg.managed() && !tg.Kafka {
			s.logf("P7 skips %s: the driver can only restart brokers it starts", tg.label())
			continue
		}
		tmp = tg.TempDir
		dir, err := restartDataDir(tg.TempDir, strings.ReplaceAll(tg.label(), " ", "-"))
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, filepath.Dir(dir))
		rb := &restartBench{cfg: cfg, topic: "bench-restart", group: "bench-restart", logf: s.logf}
		if s.PprofDir != "" && tg.PprofAddr != "" {
			name := "P7-restart-" + tg.label()
			rb.profile = func() func() { return s.profile(tg, 1, name) }
			rb.heap = func() { s.capture(tg, "heap?gc=1", name+"-heap")() }
		}
		if tg.Kafka {
			rb.sys = &kafkaRestartable{dir: dir, log: s.Log}
		} else {
			rb.sys = &exactqRestartable{tg: tg, dir: dir}
		}
		benches = append(benches, rb)
	}
	need := int64(float64(cfg.LogBytes)*1.15)*int64(len(benches)) + 1<<30
	if free, err := freeDiskBytes(tmp); err == nil && free < need {
		return nil, fmt.Errorf("P7: %d systems × %.1f GB of log need about %.1f GB of free disk in %s, %.1f GB are free: lower -restart-log",
			len(benches), float64(cfg.LogBytes)/1e9, float64(need)/1e9, filepath.Dir(dirs[0]), float64(free)/1e9)
	}
	var targets []Target
	for _, tg := range s.Targets {
		if tg.managed() || tg.Kafka {
			targets = append(targets, tg)
		}
	}
	records := int(cfg.LogBytes / int64(cfg.RecordBytes))
	for i, rb := range benches {
		s.logf("P7 %s: setting up %.2f GB of log and %d in-flight share records on %d partitions", targets[i].label(),
			float64(cfg.LogBytes)/1e9, cfg.InFlight, cfg.Partitions())
		rb.advance = s.step(P7, "setup: write log", targets[i], 0, records)
		if err := rb.Setup(ctx); err != nil {
			return nil, fmt.Errorf("%s, P7 setup: %w", targets[i].label(), err)
		}
	}
	var rows []Row
	for run := 1; run <= runs; run++ {
		for i, rb := range benches {
			tg := targets[i]
			s.step(P7, "restart", tg, run, 0)
			rr, err := rb.Measure(ctx)
			if err != nil {
				return rows, fmt.Errorf("%s, P7 restart, run %d: %w", tg.label(), run, err)
			}
			rows = append(rows, Row{ID: P7, Target: tg.Name, Fsync: tg.Fsync, Partitions: int32(cfg.Partitions()), Run: run,
				Workload: "restart", Records: rr.InFlight, RecordBytes: cfg.RecordBytes, Elapsed: rr.FirstFetch,
				BrokerCPU: rr.BrokerCPU, BrokerRSS: rr.BrokerPeakRSS, Restart: &rr})
			s.logf("P7 %s run %d: serving after %v, first share fetch after %v, all %d partitions after %v; RSS %s → %s (%s B per in-flight record)",
				tg.label(), run, rr.Serving.Round(time.Millisecond), rr.FirstFetch.Round(time.Millisecond), cfg.Partitions(),
				rr.Loaded.Round(time.Millisecond), fmtMiB(rr.RSSBase), fmtMiB(rr.RSSLoaded), fmtBytesPerRecord(rr.BytesPerInFlight()))
		}
	}
	return rows, nil
}
