package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exactq/exactq/bench/brokerproc"
	"github.com/exactq/exactq/bench/kafka"
)

const cliUsage = `exactq-bench: whole-system benchmark (produce/consume through franz-go kgo)

Usage:
  exactq-bench [flags] [run|produce|consume|share|loopback]

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

Examples:
  exactq-bench -build -fsync always,never -partitions 1,8 -records 500000 -size 1024
  exactq-bench -brokers 127.0.0.1:9092 -name kafka-4.4 -partitions 1,8
  exactq-bench -build -kafka -fsync always,never -partitions 1,8 -records 500000 -runs 3
  exactq-bench -build -fsync always -records 200000 -consumers 1,4 -runs 3 share

Flags:
`

// Main runs the bench command line (args without the program name) and returns the exit
// code; the Markdown table goes to stdout, progress to stderr. `exactq bench` can call it.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exactq-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cliUsage); fs.PrintDefaults() }
	brokers := fs.String("brokers", "", "bootstrap addresses of a running cluster, comma-separated")
	name := fs.String("name", "external", "label of the -brokers target in the results")
	binary := fs.String("exactq", "", "exactq binary to start for each measurement")
	build := fs.Bool("build", false, "build ./cmd/exactq of the enclosing module and start it for each measurement")
	fsyncs := fs.String("fsync", "always", "fsync policies for started exactq, comma-separated (always,never)")
	parts := fs.String("partitions", "1,8", "partition counts, comma-separated")
	records := fs.Int("records", 200000, "records per produce run")
	size := fs.Int("size", 1024, "record value size in bytes")
	runs := fs.Int("runs", 1, "repetitions of every measurement (targets alternate within each)")
	rate := fs.Int("rate", 0, "produce at most this many records/s (0: as fast as possible); latency below saturation")
	linger := fs.Duration("linger", 0, "producer linger (0: kgo default, 10ms)")
	batchBytes := fs.Int("batch-bytes", 0, "producer max batch bytes (0: kgo default, 1000012)")
	topic := fs.String("topic", "", "topic for consume")
	consumers := fs.String("consumers", "4", "share: share consumer counts, comma-separated")
	shareMax := fs.Int("share-max-records", 0, "share: kgo ShareMaxRecords per ShareFetch (0: kgo default, 500)")
	shareBytes := fs.Int("share-fetch-bytes", 0, "share: kgo FetchMaxBytes of the share consumers (0: kgo default, 50 MiB)")
	shareWait := fs.Duration("share-fetch-wait", 0, "share: kgo FetchMaxWait of the share consumers (0: kgo default, 5s)")
	shareGroupCfg := fs.String("share-group-config", "", "share: further group configs, k=v comma-separated (e.g. share.partition.max.record.locks=10000)")
	withKafka := fs.Bool("kafka", false, "also start Apache Kafka "+kafka.Version+" (jars via Maven, cached) and measure it alternately with the other targets; adds a ratio table")
	kafkaWarm := fs.Int("kafka-warmup", 200000, "-kafka: records produced and consumed to warm Kafka's JVM up before measuring")
	tmp := fs.String("tmp", "", "directory for started brokers' data (default: the system temp dir)")
	quiet := fs.Bool("q", false, "no progress output")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
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
	if fs.NArg() > 1 || (cmd != "run" && cmd != "produce" && cmd != "consume" && cmd != "share" && cmd != "loopback") {
		fs.Usage()
		return 2
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	var log io.Writer = stderr
	if *quiet {
		log = nil
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "exactq-bench:", err); return 1 }

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
		cr, err := Consume(ctx, ConsumeConfig{Brokers: splitList(*brokers), Topic: *topic})
		if err != nil {
			return fail(err)
		}
		row := Row{Target: *name, Workload: "consume", Records: cr.Records, Elapsed: cr.Elapsed, MBps: cr.MBps(), RecordsPS: cr.RecordsPerSec(), Run: 1}
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
		Share: cmd == "share", ShareMaxRecords: int32(*shareMax), ShareFetchBytes: int32(*shareBytes), ShareFetchWait: *shareWait}
	if s.Share {
		if s.Rate > 0 {
			return fail(errors.New("-rate does not apply to share"))
		}
		partsSet := false
		fs.Visit(func(f *flag.Flag) { partsSet = partsSet || f.Name == "partitions" })
		if !partsSet {
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
			s.Targets = append(s.Targets, Target{Name: "exactq", Binary: *binary, Fsync: f, TempDir: *tmp})
		}
	}
	if *brokers != "" {
		s.Targets = append(s.Targets, Target{Name: *name, Brokers: splitList(*brokers)})
	}
	if *withKafka {
		tg, stop, err := startKafka(ctx, *tmp, *kafkaWarm, *size, log)
		if err != nil {
			return fail(err)
		}
		defer stop()
		s.Targets = append(s.Targets, tg)
	}
	if len(s.Targets) == 0 {
		return fail(errors.New("no target: give -brokers, -exactq, -build or -kafka"))
	}
	start := time.Now()
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

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
