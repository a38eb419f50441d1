package driver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exactq/exactq/bench/internal/kafka"
	"github.com/exactq/exactq/internal/brokerproc"
)

const cliUsage = `exactq-bench: whole-system benchmark, side by side with Apache Kafka

Usage:
  exactq-bench [flags] [suite|run|produce|consume|share|loopback]

  suite    the side-by-side suite: the workloads of -workloads (P1-P7 of BENCHMARKS.md)
           against every target, alternating, with a progress bar, then a summary, the
           targets met or missed, per-run tables and (-out DIR) results.md and PNG charts
  run      produce, then consume the same records (default)
  produce  produce only
  consume  read an existing topic from the start (-brokers and -topic required)
  share    P3: produce -records into a fresh topic (-partitions, default 1), then drain it
           with -consumers share consumers of a fresh share group (share.auto.offset.reset
           set to earliest) that Ack(AckAccept) every record; every record must be accepted
           exactly once
  loopback one TCP stream over 127.0.0.1 (the machine's ceiling for one connection)

Targets: -brokers for a running cluster (exactq, Apache Kafka, ...), and/or -exactq (a
binary) or -build (build ./cmd/exactq of the enclosing module) to start exactq on a fresh
temporary data directory for each measurement, once per -fsync policy.

Workloads (suite; BENCHMARKS.md): P1 produce and P2 consume (-partitions, -records), once
per -generator: kgo (one franz-go client) and raw (pre-encoded record batches, acks=all,
idempotent unless -raw-idempotent=false, -raw-conns connections with -raw-inflight requests each; sessionless Fetch
counted from batch headers, offsets checked contiguous, a CRC sample checked: the broker,
not the client, bounds it); both run in a suite by default;
P3 share consume (kgo, 1 partition, -consumers, -share-records); P4 consume-transform-
produce with transactions on a consumer group and P5 the same on a share group with
transactional share acks (exactq only) and its non-transactional baseline (exactq's Go
client; -pipeline-records, commit every -commit-interval); P6 produce to share consumers at
-latency-rate (default: half the lowest P3 median of this run); P7 restart with
-restart-log of log and -restart-inflight in-flight share records.

Examples:
  exactq-bench -build -kafka -fsync always,never -runs 3 -out docs/benchmarks suite
  exactq-bench -build -kafka -smoke suite          (CI: every workload, tiny sizes)
  exactq-bench -build -fsync always,never -partitions 1,8 -records 500000 -size 1024
  exactq-bench -brokers 127.0.0.1:9092 -name kafka-4.4 -partitions 1,8
  exactq-bench -build -kafka -fsync always,never -partitions 1,8 -records 500000 -runs 3
  exactq-bench -build -fsync always -records 200000 -consumers 1,4 -runs 3 share

Flags:
`

// sizes of a suite, per workload; the -smoke preset and the full defaults.
type sizes struct {
	records, shareRecords, pipelineRecords, latencyRecords int
	latencyDuration                                        time.Duration
	restartLog                                             string
	restartInFlight, restartLocks                          int
	loopback                                               int64
	kafkaWarm                                              int
}

var (
	fullSizes  = sizes{records: 500000, shareRecords: 200000, pipelineRecords: 1000000, latencyDuration: 20 * time.Second, restartLog: "10GB", restartInFlight: 1000000, restartLocks: 4000, loopback: 4 << 30, kafkaWarm: 200000}
	smokeSizes = sizes{records: 5000, shareRecords: 5000, pipelineRecords: 5000, latencyRecords: 3000, restartLog: "16MB", restartInFlight: 2000, restartLocks: 1000, loopback: 256 << 20, kafkaWarm: 20000}
)

// Main runs the bench command line (args without the program name) and returns the exit
// code; results go to stdout, progress to stderr. `exactq bench` calls it.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exactq-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cliUsage); fs.PrintDefaults() }
	brokers := fs.String("brokers", "", "bootstrap addresses of a running cluster, comma-separated")
	name := fs.String("name", "external", "label of the -brokers target in the results")
	binary := fs.String("exactq", "", "exactq binary to start for each measurement")
	build := fs.Bool("build", false, "build ./cmd/exactq of the enclosing module and start it for each measurement")
	fsyncs := fs.String("fsync", "always", "fsync policies for started exactq, comma-separated (always,never)")
	parts := fs.String("partitions", "1,8", "P1/P2 partition counts, comma-separated")
	records := fs.Int("records", 200000, "records per produce run (P1/P2; suite: 500000)")
	size := fs.Int("size", 1024, "record value size in bytes")
	runs := fs.Int("runs", 1, "repetitions of every measurement (targets alternate within each)")
	rate := fs.Int("rate", 0, "produce at most this many records/s (0: as fast as possible); latency below saturation")
	linger := fs.Duration("linger", 0, "producer linger (0: kgo default, 10ms)")
	batchBytes := fs.Int("batch-bytes", 0, "producer max batch bytes (0: kgo default, 1000012)")
	topic := fs.String("topic", "", "topic for consume")
	consumers := fs.String("consumers", "4", "share: share consumer counts, comma-separated (suite P3 and P6: the first)")
	shareMax := fs.Int("share-max-records", 0, "share: kgo ShareMaxRecords per ShareFetch (0: kgo default, 500)")
	shareBytes := fs.Int("share-fetch-bytes", 0, "share: kgo FetchMaxBytes of the share consumers (0: kgo default, 50 MiB)")
	shareWait := fs.Duration("share-fetch-wait", 0, "share: kgo FetchMaxWait of the share consumers (0: kgo default, 5s)")
	shareGroupCfg := fs.String("share-group-config", "", "share (and suite P3, P5): further share group configs, k=v comma-separated (e.g. share.partition.max.record.locks=4000)")
	withKafka := fs.Bool("kafka", false, "also start Apache Kafka "+kafka.Version+" (jars via Maven, cached) and measure it alternately with the other targets; adds a ratio table")
	kafkaWarm := fs.Int("kafka-warmup", 200000, "-kafka: records produced and consumed to warm Kafka's JVM up before measuring (suite -smoke: 20000)")
	tmp := fs.String("tmp", "", "directory for started brokers' data (default: the system temp dir)")
	quiet := fs.Bool("q", false, "no progress output")
	timeout := fs.Duration("timeout", 3*time.Hour, "give up after this long")
	// suite
	workloads := fs.String("workloads", strings.Join(AllWorkloads, ","), "suite: workloads to run, comma-separated (P1..P7)")
	smoke := fs.Bool("smoke", false, "suite: tiny sizes and one run unless given (CI), and fail unless every workload measured every target")
	out := fs.String("out", "", "suite: write results.md, ratios.png and latency-p99.png into this directory")
	shareRecords := fs.Int("share-records", 0, "suite: P3 records per run (default 200000)")
	pipeRecords := fs.Int("pipeline-records", 0, "suite: P4/P5 inputs per run (default 1000000)")
	commitInterval := fs.Duration("commit-interval", DefaultCommitInterval, "suite: P4/P5 commit interval")
	shareCommit := fs.Int("share-commit-records", 1000, "suite: P5 commits at most this many inputs per transaction (share.partition.max.record.locks bounds a transaction)")
	latRecords := fs.Int("latency-records", 0, "suite: P6 records per run (default: -latency-duration at the rate)")
	latDuration := fs.Duration("latency-duration", 20*time.Second, "suite: P6 produce duration per run when -latency-records is 0")
	latRate := fs.Int("latency-rate", 0, "suite: P6 records/s (0: half the lowest median P3 records/s of the systems in this run)")
	restartLog := fs.String("restart-log", "10GB", "suite: P7 log size (e.g. 10GB, 512MB; free disk must hold it once per system)")
	restartInFlight := fs.Int("restart-inflight", 1000000, "suite: P7 in-flight share records")
	restartLocks := fs.Int("restart-locks", 4000, "suite: P7 share.partition.max.record.locks: in-flight records per partition (partitions = inflight / locks)")
	pprofDir := fs.String("pprof", "", "suite: with -exactq a bench/cmd/exactq-pprof binary, write a CPU profile of the broker during each workload's first run into this directory")
	pprofSecs := fs.Int("pprof-seconds", 5, "suite: length of each -pprof profile")
	generators := fs.String("generator", "", "P1/P2 load generators, comma-separated: kgo (one franz-go client) and raw (pre-encoded batches, header-only fetch counting; the broker bounds it) (default: suite kgo,raw; otherwise kgo)")
	rawConns := fs.Int("raw-conns", 2, "raw generator: connections to the broker")
	rawInFlight := fs.Int("raw-inflight", 4, "raw generator: produce requests in flight per connection")
	rawBatch := fs.Int("raw-batch-bytes", 1000000, "raw generator: bytes per record batch at most")
	rawIdem := fs.Bool("raw-idempotent", true, "raw generator: an idempotent producer like P1's (base sequence and CRC rewritten per request, a partition's batches on one connection); false sends the same bytes for every request")
	loadWarn := fs.Float64("load-warn", float64(runtime.NumCPU())/2, "warn, and flag the run in the report, when a measured window starts with the 1-minute load average above this (0: never)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cmd := "run"
	if fs.NArg() > 0 {
		cmd = fs.Arg(0)
	}
	if fs.NArg() > 1 || !slices.Contains([]string{"suite", "run", "produce", "consume", "share", "loopback"}, cmd) {
		fs.Usage()
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cmd == "suite" {
		sz := fullSizes
		if *smoke {
			sz = smokeSizes
		}
		def := func(name string, p *int, v int) {
			if !set[name] {
				*p = v
			}
		}
		def("records", records, sz.records)
		def("share-records", shareRecords, sz.shareRecords)
		def("pipeline-records", pipeRecords, sz.pipelineRecords)
		def("latency-records", latRecords, sz.latencyRecords)
		def("restart-inflight", restartInFlight, sz.restartInFlight)
		def("restart-locks", restartLocks, sz.restartLocks)
		def("kafka-warmup", kafkaWarm, sz.kafkaWarm)
		if !set["restart-log"] {
			*restartLog = sz.restartLog
		}
		if !set["latency-duration"] && sz.latencyDuration > 0 {
			*latDuration = sz.latencyDuration
		}
		if *smoke && !set["timeout"] {
			*timeout = 10 * time.Minute
		}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	var log io.Writer = stderr
	var prog *Progress
	if *quiet {
		log = nil
	} else if cmd == "suite" {
		f, ok := stderr.(*os.File)
		prog = NewProgress(stderr, ok && IsTerminal(f))
		defer prog.Close()
		log = prog
	}
	fail := func(err error) int {
		if prog != nil {
			prog.Close()
		}
		fmt.Fprintln(stderr, "exactq-bench:", err)
		return 1
	}

	if cmd == "loopback" {
		best := LoopbackResult{}
		for i := range max(1, *runs) {
			r, err := Loopback(ctx, 4<<30)
			if err != nil {
				return fail(err)
			}
			if log != nil {
				fmt.Fprintf(log, "loopback run %d: %.0f MB/s\n", i+1, r.MBps())
			}
			if i == 0 || r.MBps() > best.MBps() {
				best = r
			}
		}
		fmt.Fprintf(stdout, "| loopback TCP, one stream, 1 MiB writes | %.0f MB/s (best of %d) |\n", best.MBps(), max(1, *runs))
		return 0
	}
	if cmd == "consume" {
		if *brokers == "" || *topic == "" {
			return fail(errors.New("consume needs -brokers and -topic"))
		}
		ccfg := ConsumeConfig{Brokers: splitList(*brokers), Topic: *topic}
		var cr ConsumeResult
		var err error
		wl := "consume"
		switch *generators {
		case "", GenKgo:
			cr, err = Consume(ctx, ccfg)
		case GenRaw:
			wl = "consume-raw" // counts records from batch headers; bytes are records × -size
			cr, err = RawConsume(ctx, ccfg, RawConfig{Conns: *rawConns}, *size)
		default:
			return fail(fmt.Errorf("consume takes one generator, kgo or raw, not %q", *generators))
		}
		if err != nil {
			return fail(err)
		}
		row := Row{Target: *name, Workload: wl, Records: cr.Records, Elapsed: cr.Elapsed, MBps: cr.MBps(), RecordsPS: cr.RecordsPerSec(), Run: 1}
		if cr.Records > 0 {
			row.RecordBytes = int(cr.Bytes / int64(cr.Records))
		}
		if err := WriteMarkdown(stdout, []Row{row}); err != nil {
			return fail(err)
		}
		return 0
	}

	s := Suite{Records: *records, RecordBytes: *size, Runs: *runs, Consume: cmd == "run",
		Rate: *rate, Linger: *linger, BatchBytes: int32(*batchBytes), Log: log,
		Share: cmd == "share", ShareMaxRecords: int32(*shareMax), ShareFetchBytes: int32(*shareBytes), ShareFetchWait: *shareWait,
		Raw: RawConfig{Conns: *rawConns, InFlight: *rawInFlight, BatchBytes: *rawBatch, Idempotent: *rawIdem}, LoadWarn: *loadWarn}
	if *generators == "" {
		*generators = GenKgo
		if cmd == "suite" {
			*generators = GenKgo + "," + GenRaw
		}
	}
	for _, g := range splitList(*generators) {
		if g != GenKgo && g != GenRaw {
			return fail(fmt.Errorf("unknown generator %q (kgo, raw)", g))
		}
		s.Generators = append(s.Generators, g)
	}
	if *rate > 0 && slices.Contains(s.Generators, GenRaw) {
		return fail(errors.New("-rate paces the kgo generator only: add -generator kgo"))
	}
	if cmd == "suite" {
		for _, w := range splitList(*workloads) {
			w = strings.ToUpper(w)
			if !slices.Contains(AllWorkloads, w) {
				return fail(fmt.Errorf("unknown workload %q (P1..P7)", w))
			}
			s.Workloads = append(s.Workloads, w)
		}
		logBytes, err := parseBytes(*restartLog)
		if err != nil {
			return fail(err)
		}
		s.ShareRecords, s.PipelineRecords, s.CommitInterval, s.ShareCommitRecords = *shareRecords, *pipeRecords, *commitInterval, *shareCommit
		s.LatencyRecords, s.LatencyDuration, s.LatencyRate = *latRecords, *latDuration, *latRate
		s.Restart = RestartConfig{LogBytes: logBytes, RecordBytes: *size, InFlight: *restartInFlight, Locks: *restartLocks}
		s.PprofDir, s.PprofSeconds = *pprofDir, *pprofSecs
		if s.PprofDir != "" {
			if err := os.MkdirAll(s.PprofDir, 0o755); err != nil {
				return fail(err)
			}
		}
	}
	if s.Share || cmd == "suite" {
		if s.Share && s.Rate > 0 {
			return fail(errors.New("-rate does not apply to share"))
		}
		if s.Share && !set["partitions"] {
			*parts = "1" // P3 is one partition
		}
		for _, kv := range splitList(*shareGroupCfg) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fail(fmt.Errorf("bad group config %q, want k=v", kv))
			}
			if s.ShareGroupCfg == nil {
				s.ShareGroupCfg = map[string]string{}
			}
			s.ShareGroupCfg[k] = v
		}
		for _, c := range splitList(*consumers) {
			n, err := strconv.Atoi(c)
			if err != nil || n <= 0 {
				return fail(fmt.Errorf("bad consumer count %q", c))
			}
			s.Consumers = append(s.Consumers, n)
		}
	}
	for _, p := range splitList(*parts) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return fail(fmt.Errorf("bad partition count %q", p))
		}
		s.Partitions = append(s.Partitions, int32(n))
	}
	if *build {
		dir, err := os.MkdirTemp("", "exactq-bench-bin-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		root, err := brokerproc.ModuleRoot(".")
		if err != nil {
			return fail(err)
		}
		*binary = filepath.Join(dir, "exactq")
		if log != nil {
			fmt.Fprintf(log, "building %s/cmd/exactq\n", root)
		}
		if err := brokerproc.Build(ctx, root, *binary); err != nil {
			return fail(err)
		}
	}
	if *binary != "" {
		for _, f := range splitList(*fsyncs) {
			if f != "always" && f != "never" {
				return fail(fmt.Errorf("bad fsync policy %q", f))
			}
			tg := Target{Name: "exactq", Binary: *binary, Fsync: f, TempDir: *tmp}
			if s.PprofDir != "" {
				ports, err := freeLoopbackPort()
				if err != nil {
					return fail(err)
				}
				tg.PprofAddr = ports
				tg.Env = []string{"EXACTQ_PPROF_LISTEN=" + ports}
			}
			s.Targets = append(s.Targets, tg)
		}
	}
	if *brokers != "" {
		s.Targets = append(s.Targets, Target{Name: *name, Brokers: splitList(*brokers)})
	}
	if *withKafka {
		if cmd == "suite" && len(s.Workloads) == 1 && s.Workloads[0] == P7 {
			// P7 starts Kafka instances of its own.
			s.Targets = append(s.Targets, Target{Name: KafkaTarget, Kafka: true, TempDir: *tmp})
		} else {
			tg, stop, err := startKafka(ctx, *tmp, *kafkaWarm, *size, log)
			if err != nil {
				return fail(err)
			}
			defer stop()
			s.BeforeRestart = stop
			s.Targets = append(s.Targets, tg)
		}
	}
	if len(s.Targets) == 0 {
		return fail(errors.New("no target: give -brokers, -exactq, -build or -kafka"))
	}
	start := time.Now()
	if cmd == "suite" {
		info := ReportInfo{Command: "exactq-bench " + strings.Join(args, " "), Started: start, Machine: machineInfo(ctx, *tmp)}
		load := sampleLoad(15 * time.Second)
		if s.has(P1) || s.has(P2) {
			sz := fullSizes.loopback
			if *smoke {
				sz = smokeSizes.loopback
			}
			lb, err := Loopback(ctx, sz)
			if err != nil {
				return fail(err)
			}
			info.LoopbackMBps = lb.MBps()
			s.logf("loopback TCP, one stream: %.0f MB/s", info.LoopbackMBps)
		}
		rows, err := s.Run(ctx)
		if prog != nil {
			prog.Close()
		}
		info.Elapsed, info.Load = time.Since(start), load.Stop()
		if len(rows) > 0 {
			if werr := WriteReport(stdout, rows, info); werr != nil && err == nil {
				err = werr
			}
			if *out != "" {
				if werr := writeOut(*out, rows, info); werr != nil && err == nil {
					err = werr
				}
			}
		}
		if err == nil && *smoke {
			err = CheckComplete(&s, rows)
		}
		if err != nil {
			return fail(err)
		}
		if log != nil {
			fmt.Fprintf(stderr, "done in %v (GOMAXPROCS=%d)\n", info.Elapsed.Round(time.Second), runtime.GOMAXPROCS(0))
		}
		return 0
	}
	rows, err := s.Run(ctx)
	if len(rows) > 0 {
		if werr := WriteMarkdown(stdout, rows); werr != nil && err == nil {
			err = werr
		}
		if *withKafka && err == nil {
			fmt.Fprintln(stdout)
			err = WriteRatios(stdout, rows, KafkaTarget)
		}
	}
	if err != nil {
		return fail(err)
	}
	if log != nil {
		fmt.Fprintf(log, "done in %v (GOMAXPROCS=%d)\n", time.Since(start).Round(time.Second), runtime.GOMAXPROCS(0))
	}
	return 0
}

// writeOut writes results.md and the charts into dir.
func writeOut(dir string, rows []Row, info ReportInfo) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.md"))
	if err != nil {
		return err
	}
	if err := WriteReport(f, rows, info); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if _, err := WriteCharts(dir, Summarize(rows, KafkaTarget)); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "results.json"), rows, info)
}

// parseBytes reads a size such as 10GB, 512MB, 64KiB or 1000000 (bytes).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	s = strings.TrimSpace(s)
	mult := 1.0
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 10GB or 512MiB)", s)
	}
	return int64(v * mult), nil
}

// freeLoopbackPort returns a free 127.0.0.1:port.
func freeLoopbackPort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
