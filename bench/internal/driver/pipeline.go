package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PipelineMode is the kind of consume → transform → produce pipeline.
type PipelineMode int

const (
	// PipelineEOSGroup is P4: a consumer-group member and a transactional producer; each
	// transaction holds the outputs and the inputs' offsets (SendOffsetsToTransaction).
	PipelineEOSGroup PipelineMode = iota
	// PipelineEOSShare is P5: a share-group member (explicit acknowledgement) and a
	// transactional producer; each transaction holds the outputs and the inputs' ACCEPTs
	// (KIP-1289 SendShareAcksToTransaction). exactq only.
	PipelineEOSShare
	// PipelineShare is P5's baseline: the same share pipeline without transactions: an
	// idempotent producer, ACCEPT acknowledgements sent the normal way, and at each
	// checkpoint a producer Flush then a share CommitSync (at-least-once).
	PipelineShare
)

func (m PipelineMode) String() string {
	switch m {
	case PipelineEOSGroup:
		return "eos-group"
	case PipelineEOSShare:
		return "eos-share"
	default:
		return "share-pipeline"
	}
}

// DefaultCommitInterval is how often the pipelines commit (BENCHMARKS.md: every 100 ms).
const DefaultCommitInterval = 100 * time.Millisecond

// PipelineConfig is a pipeline workload: read every record of Input (which holds exactly
// Records records when the run starts), write one output per input to Output (key
// "partition/offset" of the input, the input's value), committing every CommitInterval.
// Each mode's clients are in its stage: P4 is kgo's GroupTransactSession, the share
// baseline kgo's share consumer and an idempotent kgo producer, P5 a transactional kgo
// client with kgoext's share consumer and transactional share acknowledgements (KIP-1289).
type PipelineConfig struct {
	Brokers         []string
	Mode            PipelineMode
	Input, Output   string
	Group           string // a fresh consumer group (P4) or share group (P5)
	TransactionalID string // the transactional modes
	Records         int
	// CommitInterval is the time from a transaction's (checkpoint's) first input to its
	// commit; default DefaultCommitInterval.
	CommitInterval time.Duration
	// CommitRecords, when > 0, also commits once the open transaction holds that many
	// inputs. The share modes need it: staged (TX_PENDING) records keep their place in the
	// share partition's window of share.partition.max.record.locks (default 2000) records
	// until the commit, so a share consumer cannot acquire more than that per transaction.
	CommitRecords int
	// GroupConfigs are further configs of the share group (e.g.
	// share.partition.max.record.locks, to let a transaction hold more records).
	GroupConfigs map[string]string
	Progress     func(committed int)
	OnStart      func() // called when the measured interval starts (the first input)
}

// PipelineResult is what a pipeline run measured.
type PipelineResult struct {
	Records int   // distinct inputs whose outputs were committed
	Bytes   int64 // value bytes of those inputs
	// Elapsed runs from the first input handed to the pipeline to the last commit; Startup
	// is the time before that (joining the group).
	Elapsed, Startup time.Duration
	// Latency per input: from the Poll that returned it to the return of the commit (for
	// PipelineShare: the checkpoint) that covered it.
	P50, P99, P999  time.Duration
	Commits, Aborts int
	// Redelivered counts inputs delivered again after an aborted transaction (share modes).
	Redelivered int
}

// MBps is input throughput in MB/s (10^6 bytes of record values).
func (r PipelineResult) MBps() float64 { return mbps(r.Bytes, r.Elapsed) }

// RecordsPerSec is inputs committed per second.
func (r PipelineResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// pipelineInput is one polled input waiting for its commit.
type pipelineInput struct {
	polled      time.Time // when the poll that returned it returned
	partition   int32
	offset      int64
	bytes       int
	redelivered bool // a share delivery count above 1
}

// pipelineStage is one pipeline's clients: it consumes inputs, produces one output for each
// and commits outputs and consumption together (PipelineShare: checkpoints them).
type pipelineStage interface {
	// poll waits until deadline at most for inputs and returns them with their outputs
	// produced and their consumption recorded in the open transaction (checkpoint), which
	// it begins when none is open. A poll that ends at its deadline returns nothing and no
	// error.
	poll(ctx context.Context, deadline time.Time) ([]pipelineInput, error)
	// commit ends the open transaction; committed is false when it was aborted instead (the
	// inputs are consumed again).
	commit(ctx context.Context) (committed bool, err error)
	close()
}

// outputRecord is the output of input r: key "partition/offset" of the input, its value.
func outputRecord(topic string, partition int32, offset int64, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d/%d", partition, offset), Value: value}
}

// firstError keeps the first error reported from clients' callbacks.
type firstError struct {
	mu  sync.Mutex
	err error
	n   int
}

func (f *firstError) set(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.err == nil {
		f.err = err
	}
}

// get is nil or the first error with how many there were.
func (f *firstError) get(what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		return nil
	}
	return fmt.Errorf("%d %s errors, first: %w", f.n, what, f.err)
}

// pollFetches calls poll (a kgo PollFetches) with a context ending at deadline; the
// deadline passing is not an error. It returns when poll returned.
func pollFetches(ctx context.Context, deadline time.Time, poll func(context.Context) kgo.Fetches) (kgo.Fetches, time.Time, error) {
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	fs := poll(pctx)
	now := time.Now()
	var err error
	fs.EachError(func(t string, p int32, e error) {
		if err == nil && !(pctx.Err() != nil && ctx.Err() == nil && errors.Is(e, pctx.Err())) {
			err = fmt.Errorf("%s[%d]: %w", t, p, e)
		}
	})
	return fs, now, err
}

// RunPipeline runs one pipeline until every input has a committed output.
func RunPipeline(ctx context.Context, cfg PipelineConfig) (PipelineResult, error) {
	if cfg.Records <= 0 || cfg.Input == "" || cfg.Output == "" || cfg.Group == "" {
		return PipelineResult{}, fmt.Errorf("bench: bad pipeline config %+v", cfg)
	}
	if cfg.Mode != PipelineShare && cfg.TransactionalID == "" {
		return PipelineResult{}, errors.New("bench: a transactional pipeline needs a transactional id")
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = DefaultCommitInterval
	}
	var (
		stage pipelineStage
		err   error
	)
	t0 := time.Now()
	switch cfg.Mode {
	case PipelineEOSGroup:
		stage, err = newGroupTxnStage(cfg)
	case PipelineEOSShare:
		stage, err = newShareTxnStage(ctx, cfg)
	default:
		stage, err = newShareStage(ctx, cfg)
	}
	if err != nil {
		return PipelineResult{}, err
	}
	defer stage.close()

	var (
		mu        sync.Mutex // res.Records, read by the progress reporter
		committed = map[int32]map[int64]bool{}
		res       PipelineResult
		lat       = make([]time.Duration, 0, cfg.Records)
		open      []pipelineInput
		txnStart  time.Time
		first     time.Time
	)
	stopProgress := startProgress(cfg.Progress, func() int { mu.Lock(); defer mu.Unlock(); return res.Records })
	defer stopProgress()
	commit := func() error {
		ok, err := stage.commit(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if !ok {
			res.Aborts++
			open = open[:0]
			return nil
		}
		res.Commits++
		for _, in := range open {
			seen := committed[in.partition]
			if seen == nil {
				seen = map[int64]bool{}
				committed[in.partition] = seen
			}
			if seen[in.offset] {
				continue // committed before: cannot happen with exactly-once, counted as a redelivery
			}
			seen[in.offset] = true
			res.Records++
			res.Bytes += int64(in.bytes)
			lat = append(lat, now.Sub(in.polled))
		}
		open = open[:0]
		return nil
	}

	idle := time.Now()
	for {
		mu.Lock()
		done := res.Records >= cfg.Records
		mu.Unlock()
		if done {
			break
		}
		deadline := time.Now().Add(time.Second)
		if len(open) > 0 {
			deadline = txnStart.Add(cfg.CommitInterval)
		}
		ins, err := stage.poll(ctx, deadline)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return res, fmt.Errorf("bench: %s poll: %w", cfg.Mode, err)
		}
		if len(ins) > 0 {
			idle = ins[0].polled
			if first.IsZero() {
				first = idle
				res.Startup = first.Sub(t0)
				if cfg.OnStart != nil {
					cfg.OnStart()
				}
			}
			if len(open) == 0 {
				txnStart = idle
			}
		} else if time.Since(idle) > 30*time.Second {
			mu.Lock()
			n := res.Records
			mu.Unlock()
			return res, fmt.Errorf("bench: %s: no input for 30s with %d of %d committed", cfg.Mode, n, cfg.Records)
		}
		for _, in := range ins {
			if in.redelivered {
				res.Redelivered++
			}
		}
		open = append(open, ins...)
		if len(open) > 0 && (time.Since(txnStart) >= cfg.CommitInterval || (cfg.CommitRecords > 0 && len(open) >= cfg.CommitRecords)) {
			if err := commit(); err != nil {
				return res, fmt.Errorf("bench: %s commit: %w", cfg.Mode, err)
			}
		}
	}
	res.Elapsed = time.Since(first)
	slices.Sort(lat)
	res.P50, res.P99, res.P999 = quantile(lat, 0.50), quantile(lat, 0.99), quantile(lat, 0.999)
	return res, nil
}

// setGroupConfigAt sets one group config through a short-lived kgo client.
func setGroupConfigAt(ctx context.Context, brokers []string, group, name, value string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	return setGroupConfig(ctx, cl, group, name, value)
}

// verifyOutputs reads topic with a read_committed consumer and checks it holds exactly one
// output per input: want records with distinct keys. It returns how many it read.
func verifyOutputs(ctx context.Context, brokers []string, topic string, want int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	keys := make(map[string]struct{}, want)
	n, dups := 0, 0
	quiet := time.Now()
	for time.Since(quiet) < time.Second || n < want {
		if time.Since(quiet) > 30*time.Second {
			return fmt.Errorf("bench: output %s: %d of %d committed outputs after 30s", topic, n, want)
		}
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("bench: output %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			quiet = time.Now()
			if _, ok := keys[string(r.Key)]; ok {
				dups++
			}
			keys[string(r.Key)] = struct{}{}
		})
	}
	if n != want || dups > 0 {
		return fmt.Errorf("bench: output %s holds %d committed records (%d distinct inputs, %d duplicates), want exactly %d", topic, n, len(keys), dups, want)
	}
	return nil
}

// verifyGroupCommitted checks that group committed the end offset of every partition of topic.
func verifyGroupCommitted(ctx context.Context, brokers []string, group, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, ends, err := offsetRange(ctx, adm, topic)
	if err != nil {
		return err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("bench: committed offsets of %s: %w", group, err)
	}
	for p, e := range ends {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.At != e {
			return fmt.Errorf("bench: group %s committed %s[%d] at %d, end offset %d", group, topic, p, o.At, e)
		}
	}
	return nil
}
