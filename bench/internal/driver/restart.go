package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/exactq/exactq/bench/internal/kafka"
	"github.com/exactq/exactq/internal/brokerproc"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RestartConfig is P7: a broker holding LogBytes of log in a topic of
// ceil(InFlight/Locks) partitions and a share group with InFlight records in flight
// (Locks per partition) is stopped cleanly and started again; the run measures how long it
// takes to serve.
type RestartConfig struct {
	LogBytes    int64 // total log, spread evenly over the partitions
	RecordBytes int   // default 1024
	InFlight    int   // in-flight share records to build (at least Locks)
	// Locks is share.partition.max.record.locks of the group: the in-flight window of one
	// share partition (100..4000 with both brokers' default bounds).
	Locks int
	// BatchBytes is the producer's max batch size while writing the log; 0 means 64 KiB.
	BatchBytes int32
}

// Partitions is the number of partitions P7 uses.
func (c RestartConfig) Partitions() int { return (c.InFlight + c.Locks - 1) / c.Locks }

// RestartResult is one measured restart.
type RestartResult struct {
	// Serving is the time from launching the process to the first Metadata answer that
	// lists every partition of the topic with a leader; FirstFetch to the first ShareFetch
	// that acquired records (the member joined first); Loaded to the point where every
	// partition of the topic had answered a ShareFetch with records (every share partition
	// loaded from the persisted state).
	Serving, FirstFetch, Loaded time.Duration
	InFlight                    int   // in-flight records the setup left (the window of every partition)
	LogBytes                    int64 // value bytes in the log
	// RSSBase is the broker's resident set after a restart with the same log and no share
	// state (measured once, before the in-flight records were made); RSSLoaded the resident
	// set after Loaded. BrokerCPU is the CPU time from launch to Loaded; BrokerPeakRSS the
	// peak resident set then. Each is unknownFigure when /proc could not be read.
	RSSBase, RSSLoaded       int64
	BrokerCPU                time.Duration
	BrokerPeakRSS            int64
	BaseServing              time.Duration // Serving of the restart with the log only
	SetupProduce, SetupShare time.Duration // time to write the log, and to build the in-flight state
}

// BytesPerInFlight is the resident-set growth per in-flight share record; NaN when either
// resident set is unknown (a read of 0 would pass the < 32 B target).
func (r RestartResult) BytesPerInFlight() float64 {
	if r.RSSBase == unknownFigure || r.RSSLoaded == unknownFigure {
		return math.NaN()
	}
	if r.InFlight == 0 {
		return 0
	}
	return float64(r.RSSLoaded-r.RSSBase) / float64(r.InFlight)
}

// restartable is a broker P7 can stop and start again on the same data directory.
type restartable interface {
	// start launches the broker (the first call on a fresh directory); it may return
	// before the broker serves.
	start(ctx context.Context) (*restartProc, error)
}

// restartProc is one launched broker process.
type restartProc struct {
	addr     string
	pid      int
	launched time.Time
	stop     func() error // clean stop (SIGTERM), an error if the process did not exit cleanly
}

// stopAfter stops the process and returns err, or the stop's error if err is nil.
func (p *restartProc) stopAfter(err error) error {
	serr := p.stop()
	if err != nil {
		return err
	}
	return serr
}

// exactqRestartable starts exactq on one data directory.
type exactqRestartable struct {
	tg  Target
	dir string
}

func (e *exactqRestartable) start(context.Context) (*restartProc, error) {
	t0 := time.Now()
	p, err := brokerproc.Start(brokerproc.Options{Binary: e.tg.Binary, DataDir: e.dir, Fsync: e.tg.Fsync,
		LogLevel: "info", Env: e.tg.Env, StartTimeout: 10 * time.Minute})
	if err != nil {
		return nil, err
	}
	return &restartProc{addr: p.Addr, pid: p.Pid, launched: t0, stop: func() error { return terminate(p) }}, nil
}

// kafkaRestartable starts Apache Kafka on one directory (formatted by the first start).
type kafkaRestartable struct {
	dir     string
	started bool
	log     io.Writer
}

func (k *kafkaRestartable) start(ctx context.Context) (*restartProc, error) {
	b, err := kafka.StartBroker(ctx, kafka.Options{Dir: k.dir, Existing: k.started, NoWait: true, Log: k.log, StartTimeout: 10 * time.Minute})
	if err != nil {
		return nil, err
	}
	k.started = true
	return &restartProc{addr: b.Addr, pid: b.Pid, launched: b.Started, stop: func() error {
		b.Stop()
		select {
		case <-b.Done():
			return nil
		default:
			return errors.New("kafka did not exit")
		}
	}}, nil
}

// restartBench is P7 for one system: Setup once, then Measure per run.
type restartBench struct {
	cfg     RestartConfig
	sys     restartable
	topic   string
	group   string
	base    RestartResult // setup figures, copied into every measurement
	logf    func(format string, args ...any)
	advance func(done int) // progress of the setup's produce, in records
	// profile, if set, starts a CPU profile of the broker from its launch on (first
	// measurement only); heap takes a heap profile once every partition is loaded.
	profile func() (wait func())
	heap    func()
}

// waitServing polls Metadata every 10 ms until the broker lists every partition of topic
// (or, with topic empty, answers at all) with a leader.
func waitServing(ctx context.Context, addr, topic string, partitions int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	last := errors.New("not tried")
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s not serving after %v: %w", addr, timeout, last)
		}
		if cl == nil {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				last = err
				if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
					return err
				}
				continue
			}
			c.Close()
			if cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
				kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond })); err != nil {
				return err
			}
		}
		req := kmsg.NewPtrMetadataRequest()
		if topic != "" {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err == nil {
			last = metadataReady(resp, topic, partitions)
			if last == nil {
				return nil
			}
		} else {
			last = err
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

func metadataReady(resp *kmsg.MetadataResponse, topic string, partitions int) error {
	if topic == "" {
		if len(resp.Brokers) == 0 {
			return errors.New("no brokers in metadata")
		}
		return nil
	}
	if len(resp.Topics) != 1 {
		return errors.New("topic missing from metadata")
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return err
	}
	if len(t.Partitions) != partitions {
		return fmt.Errorf("%d of %d partitions in metadata", len(t.Partitions), partitions)
	}
	for _, p := range t.Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, err)
		}
		if p.Leader < 0 {
			return fmt.Errorf("partition %d has no leader", p.Partition)
		}
	}
	return nil
}

// Setup writes the log, measures a restart with the log only (RSSBase), builds the
// in-flight share state and stops the broker.
func (rb *restartBench) Setup(ctx context.Context) error {
	cfg := rb.cfg
	parts := cfg.Partitions()
	proc, err := rb.sys.start(ctx)
	if err != nil {
		return err
	}
	if err := waitServing(ctx, proc.addr, "", 0, 10*time.Minute); err != nil {
		proc.stop()
		return err
	}
	brokers := []string{proc.addr}
	records := int(cfg.LogBytes / int64(cfg.RecordBytes))
	if records < cfg.InFlight+parts {
		records = cfg.InFlight + parts // every window must fill
	}
	rb.logf("  writing %d × %d B over %d partitions", records, cfg.RecordBytes, parts)
	pr, err := Produce(ctx, ProduceConfig{Brokers: brokers, Topic: rb.topic, Partitions: int32(parts), Records: records,
		RecordBytes: cfg.RecordBytes, BatchMaxBytes: cfg.BatchBytes, Progress: rb.advance})
	if err := proc.stopAfter(err); err != nil {
		return err
	}
	rb.base.LogBytes, rb.base.SetupProduce = pr.Bytes, pr.Elapsed
	rb.logf("  log written at %.0f MB/s; restart with the log only", pr.MBps())

	syscall.Sync()
	proc, err = rb.sys.start(ctx)
	if err != nil {
		return err
	}
	if err := waitServing(ctx, proc.addr, rb.topic, parts, 10*time.Minute); err != nil {
		proc.stop()
		return err
	}
	rb.base.BaseServing = time.Since(proc.launched)
	rb.base.RSSBase = rssNowFigure(rb.logf, proc.pid)
	t := time.Now()
	n, err := buildInFlight(ctx, []string{proc.addr}, rb.group, rb.topic, parts, cfg.Locks)
	if err := proc.stopAfter(err); err != nil {
		return err
	}
	rb.base.InFlight, rb.base.SetupShare = n, time.Since(t)
	rb.logf("  %d in-flight share records in %v (log-only restart served after %v, RSS %s)", n,
		rb.base.SetupShare.Round(time.Millisecond), rb.base.BaseServing.Round(time.Millisecond), fmtMiB(rb.base.RSSBase))
	return nil
}

// buildInFlight joins group and, partition by partition, acquires the first locks records
// of the window, REJECTs and ACCEPTs them alternately except the first, which is held
// until the window is full and then RELEASEd: the share-partition start offset stays at
// that AVAILABLE record, so all locks records stay in flight, with per-record states (the
// worst case for a compact representation). It returns how many records are in flight.
func buildInFlight(ctx context.Context, brokers []string, group, topic string, partitions, locks int) (int, error) {
	for k, v := range map[string]string{
		"share.auto.offset.reset":          "earliest",
		"share.partition.max.record.locks": strconv.Itoa(locks),
		// Every measured restart acquires (and releases) the held record once more.
		"share.delivery.count.limit": "10",
	} {
		if err := setGroupConfigAt(ctx, brokers, group, k, v); err != nil {
			return 0, err
		}
	}
	m, err := newRawShareMember(ctx, brokers, group, topic)
	if err != nil {
		return 0, err
	}
	defer m.close(context.WithoutCancel(ctx))
	if err := m.join(ctx, partitions, 2*time.Minute); err != nil {
		return 0, err
	}
	total := 0
	var forget []int32
	for p := int32(0); p < int32(partitions); p++ {
		held := int64(-1)
		got := 0
		var pending []ackBatch
		empty := 0
		for got < locks {
			acq, err := m.shareFetch(ctx, []int32{p}, map[int32][]ackBatch{p: pending}, forget, 200*time.Millisecond, int32(locks))
			if err != nil {
				return total, fmt.Errorf("partition %d: %w", p, err)
			}
			forget, pending = nil, nil
			if len(acq[p]) == 0 {
				if empty++; empty > 150 {
					return total, fmt.Errorf("bench: partition %d: window not full after 30s (%d of %d records acquired)", p, got, locks)
				}
				continue
			}
			for _, r := range acq[p] {
				from := r.FirstOffset
				if held < 0 {
					held, from = r.FirstOffset, r.FirstOffset+1
					got++
				}
				if from > r.LastOffset {
					continue
				}
				b := ackBatch{First: from, Last: r.LastOffset, Types: make([]int8, r.LastOffset-from+1)}
				for i := range b.Types {
					b.Types[i] = ackAccept
					if (from+int64(i))%2 == 1 {
						b.Types[i] = ackReject
					}
				}
				pending = append(pending, b)
				got += len(b.Types)
			}
		}
		final := append([]ackBatch{{First: held, Last: held, Types: []int8{ackRelease}}}, pending...)
		if err := m.acknowledge(ctx, map[int32][]ackBatch{p: final}); err != nil {
			return total, fmt.Errorf("partition %d: %w", p, err)
		}
		total += got
		forget = []int32{p}
	}
	return total, nil
}

// Measure starts the broker on the prepared data and measures the restart.
func (rb *restartBench) Measure(ctx context.Context) (RestartResult, error) {
	res := rb.base
	parts := rb.cfg.Partitions()
	syscall.Sync()
	waitProfile := func() {}
	if rb.profile != nil {
		waitProfile, rb.profile = rb.profile(), nil
	}
	proc, err := rb.sys.start(ctx)
	if err != nil {
		return res, err
	}
	fail := func(err error) (RestartResult, error) { waitProfile(); proc.stop(); return res, err }
	if err := waitServing(ctx, proc.addr, rb.topic, parts, 10*time.Minute); err != nil {
		return fail(err)
	}
	res.Serving = time.Since(proc.launched)
	m, err := newRawShareMember(ctx, []string{proc.addr}, rb.group, rb.topic)
	if err != nil {
		return fail(err)
	}
	defer m.close(context.WithoutCancel(ctx))
	if err := m.join(ctx, 0, 5*time.Minute); err != nil {
		return fail(err)
	}
	all := make([]int32, parts)
	for i := range all {
		all[i] = int32(i)
	}
	answered := map[int32]bool{}
	deadline := time.Now().Add(5 * time.Minute)
	for len(answered) < parts {
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("bench: %d of %d partitions delivered a record within 5 minutes of the restart", len(answered), parts))
		}
		req := all
		if m.session > 0 {
			req = nil // the session holds them
		}
		acq, err := m.shareFetch(ctx, req, nil, nil, 500*time.Millisecond, int32(parts))
		if err != nil {
			return fail(err)
		}
		if len(acq) > 0 && res.FirstFetch == 0 {
			res.FirstFetch = time.Since(proc.launched)
		}
		for p := range acq {
			answered[p] = true
		}
	}
	res.Loaded = time.Since(proc.launched)
	res.RSSLoaded = rssNowFigure(rb.logf, proc.pid)
	bp := brokerproc.Attach(proc.pid)
	res.BrokerCPU, res.BrokerPeakRSS = cpuFigure(rb.logf, bp), peakRSSFigure(rb.logf, bp)
	if rb.heap != nil {
		rb.heap()
		rb.heap = nil
	}
	waitProfile() // before the stop cuts it short
	m.close(ctx)
	if err := proc.stop(); err != nil {
		return res, err
	}
	return res, nil
}

// freeDiskBytes is the space available to an unprivileged user on the file system of dir.
func freeDiskBytes(dir string) (int64, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// restartDataDir is a fresh directory for one system's P7 data.
func restartDataDir(tmp, name string) (string, error) {
	d, err := os.MkdirTemp(tmp, "exactq-bench-p7-"+name+"-")
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "data"), nil
}
