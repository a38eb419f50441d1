package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/exactq/exactq/client"
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
// The clients are exactq's own (package client), the only Go client with KIP-1289.
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
	polled    time.Time
	partition int32
	offset    int64
	bytes     int
}

// pipelineSource is the consuming side: a group consumer or a share consumer.
type pipelineSource interface {
	poll(ctx context.Context) ([]*client.Record, error)
	// accepted is called for every polled record once its output was produced.
	accepted(r *client.Record) error
	// commit makes the open transaction (checkpoint) durable; abortable errors mean the
	// transaction must be aborted.
	commit(ctx context.Context, p *client.Producer) error
	// aborted undoes the open transaction's consumption (P4: seek back).
	aborted(ctx context.Context) error
	close()
}

// RunPipeline runs one pipeline until every input has a committed output.
func RunPipeline(ctx context.Context, cfg PipelineConfig) (PipelineResult, error) {
	if cfg.Records <= 0 || cfg.Input == "" || cfg.Output == "" || cfg.Group == "" {
		return PipelineResult{}, fmt.Errorf("bench: bad pipeline config %+v", cfg)
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = DefaultCommitInterval
	}
	transactional := cfg.Mode != PipelineShare
	pcfg := client.ProducerConfig{Brokers: cfg.Brokers}
	if transactional {
		if cfg.TransactionalID == "" {
			return PipelineResult{}, errors.New("bench: a transactional pipeline needs a transactional id")
		}
		pcfg.TransactionalID = cfg.TransactionalID
	}
	prod, err := client.NewProducer(pcfg)
	if err != nil {
		return PipelineResult{}, err
	}
	defer prod.Close()
	if transactional {
		if err := prod.InitTransactions(ctx); err != nil {
			return PipelineResult{}, fmt.Errorf("bench: init transactions: %w", err)
		}
	}
	var src pipelineSource
	t0 := time.Now()
	switch cfg.Mode {
	case PipelineEOSGroup:
		src, err = newGroupSource(cfg)
	default:
		src, err = newShareSource(ctx, cfg)
	}
	if err != nil {
		return PipelineResult{}, err
	}
	defer src.close()

	var (
		mu        sync.Mutex
		committed = map[int32]map[int64]bool{}
		res       PipelineResult
		lat       = make([]time.Duration, 0, cfg.Records)
		open      []pipelineInput
		txnStart  time.Time
		first     time.Time
		produceMu sync.Mutex
		produceEr error
	)
	stopProgress := startProgress(cfg.Progress, func() int { mu.Lock(); defer mu.Unlock(); return res.Records })
	defer stopProgress()
	onProduced := func(_ *client.Record, err error) {
		if err != nil {
			produceMu.Lock()
			if produceEr == nil {
				produceEr = err
			}
			produceMu.Unlock()
		}
	}
	commit := func() error {
		if len(open) == 0 {
			return nil
		}
		err := src.commit(ctx, prod)
		if err == nil && !transactional {
			produceMu.Lock()
			err = produceEr
			produceMu.Unlock()
		}
		now := time.Now()
		if err != nil {
			if !transactional || !errors.Is(err, client.ErrTransactionAbortable) {
				return err
			}
			if aerr := prod.AbortTransaction(ctx); aerr != nil {
				return errors.Join(err, aerr)
			}
			res.Aborts++
			open = open[:0]
			return src.aborted(ctx)
		}
		mu.Lock()
		defer mu.Unlock()
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
		pctx, cancel := context.WithDeadline(ctx, deadline)
		recs, err := src.poll(pctx)
		cancel()
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
			return res, fmt.Errorf("bench: %s poll: %w", cfg.Mode, err)
		}
		now := time.Now()
		if len(recs) > 0 {
			idle = now
			if first.IsZero() {
				first = now
				res.Startup = now.Sub(t0)
				if cfg.OnStart != nil {
					cfg.OnStart()
				}
			}
			if len(open) == 0 {
				txnStart = now
				if transactional {
					if err := prod.BeginTransaction(ctx); err != nil {
						return res, fmt.Errorf("bench: begin transaction: %w", err)
					}
				}
			}
		} else if now.Sub(idle) > 30*time.Second {
			mu.Lock()
			n := res.Records
			mu.Unlock()
			return res, fmt.Errorf("bench: %s: no input for 30s with %d of %d committed", cfg.Mode, n, cfg.Records)
		}
		for _, r := range recs {
			if r.DeliveryCount > 1 {
				res.Redelivered++
			}
			out := &client.Record{Topic: cfg.Output, Key: fmt.Appendf(nil, "%d/%d", r.Partition, r.Offset), Value: r.Value}
			prod.Produce(ctx, out, onProduced)
			if err := src.accepted(r); err != nil {
				return res, err
			}
			open = append(open, pipelineInput{polled: now, partition: r.Partition, offset: r.Offset, bytes: len(r.Value)})
		}
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

// groupSource is P4's consumer-group member (read_committed, no auto commit).
type groupSource struct {
	c         *client.Consumer
	committed map[client.TopicPartition]int64 // positions as of the last commit
}

func newGroupSource(cfg PipelineConfig) (*groupSource, error) {
	c, err := client.NewConsumer(client.ConsumerConfig{
		Brokers: cfg.Brokers, Group: cfg.Group, IsolationLevel: client.ReadCommitted, DisableAutoCommit: true,
	})
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(cfg.Input); err != nil {
		c.Close()
		return nil, err
	}
	return &groupSource{c: c, committed: map[client.TopicPartition]int64{}}, nil
}

func (g *groupSource) poll(ctx context.Context) ([]*client.Record, error) { return g.c.Poll(ctx) }
func (g *groupSource) accepted(*client.Record) error                      { return nil }
func (g *groupSource) close()                                             { g.c.Close() }

func (g *groupSource) commit(ctx context.Context, p *client.Producer) error {
	offs := g.c.UncommittedOffsets()
	if err := p.SendOffsetsToTransaction(ctx, offs, g.c.GroupMetadata()); err != nil {
		return err
	}
	if err := p.CommitTransaction(ctx); err != nil {
		return err
	}
	for tp, o := range offs {
		g.committed[tp] = o
	}
	return nil
}

func (g *groupSource) aborted(context.Context) error {
	for tp := range g.c.UncommittedOffsets() {
		o, ok := g.committed[tp]
		if !ok {
			o = int64(client.Earliest)
		}
		if err := g.c.Seek(tp, client.Offset(o)); err != nil {
			return err
		}
	}
	return nil
}

// shareSource is P5's share-group member (explicit acknowledgement).
type shareSource struct {
	c         *client.ShareConsumer
	txn       bool
	md        client.ShareGroupMetadata
	mdSet     bool
	ackErrors []error
	mu        sync.Mutex
}

func newShareSource(ctx context.Context, cfg PipelineConfig) (*shareSource, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := setGroupConfig(ctx, cl, cfg.Group, "share.auto.offset.reset", "earliest"); err != nil {
		return nil, err
	}
	for k, v := range cfg.GroupConfigs {
		if err := setGroupConfig(ctx, cl, cfg.Group, k, v); err != nil {
			return nil, err
		}
	}
	s := &shareSource{txn: cfg.Mode == PipelineEOSShare}
	c, err := client.NewShareConsumer(client.ShareConsumerConfig{
		Brokers: cfg.Brokers, Group: cfg.Group, Topics: []string{cfg.Input}, AckMode: client.AckExplicit,
		OnAcknowledged: func(rs []client.AckResult) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					s.ackErrors = append(s.ackErrors, r.Err)
				}
			}
		},
	})
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

func (s *shareSource) poll(ctx context.Context) ([]*client.Record, error) {
	recs, err := s.c.Poll(ctx)
	if len(recs) > 0 && !s.mdSet {
		// The member metadata as of the records' acknowledgement: read before the open
		// transaction's first acknowledgement, refreshed at every commit.
		s.md, s.mdSet = s.c.GroupMetadata(), true
	}
	return recs, err
}

func (s *shareSource) accepted(r *client.Record) error { return s.c.Acknowledge(r, client.AckAccept) }

func (s *shareSource) commit(ctx context.Context, p *client.Producer) error {
	s.mdSet = false
	if !s.txn {
		if err := p.Flush(ctx); err != nil {
			return err
		}
		if _, err := s.c.CommitSync(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.ackErrors) > 0 {
			return fmt.Errorf("%d acknowledgement errors, first: %w", len(s.ackErrors), s.ackErrors[0])
		}
		return nil
	}
	acks, err := s.c.AcknowledgementsForTransaction()
	if err != nil {
		return err
	}
	if err := p.SendShareAcksToTransaction(ctx, acks, s.md); err != nil {
		return err
	}
	return p.CommitTransaction(ctx)
}

func (s *shareSource) aborted(context.Context) error { return nil } // the broker delivers them again
func (s *shareSource) close()                        { _ = s.c.Close(context.Background()) }

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
