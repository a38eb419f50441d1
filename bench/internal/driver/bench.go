// Package bench is exactq's whole-system benchmark driver: it produces and consumes
// through a real Kafka client (franz-go kgo) against any bootstrap address, so the same
// workload measures exactq and Apache Kafka side by side, and it can start exactq itself
// from a built binary in a temporary data directory (see Suite and the brokerproc
// subpackage). Results are rows of a Markdown table.
//
// Workloads (BENCHMARKS.md ids):
//   - P1 produce: N records of S random (incompressible) bytes over P partitions, acks=all,
//     idempotent, one client. Latency is per record, from Produce to its acknowledgement,
//     so it includes the time spent in the client's buffer (like kafka-producer-perf-test).
//   - P2 consume: read P1's records back from the start of every partition with one plain
//     (group-less) consumer.
//   - P1/P2 with the raw generator (RawProduce, RawConsume; Suite.Generators): batches
//     encoded once and sent as they are over a few pipelined connections, and Fetch answers
//     counted from batch headers, so the broker rather than the client bounds the figure.
//   - P3 share consume: pre-produce N records into a 1-partition topic, then drain it with C
//     kgo share consumers that Ack(AckAccept) every record, checking every record is
//     accepted exactly once (Share, Suite.Share; the `share` command).
package driver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceConfig is a produce workload.
type ProduceConfig struct {
	Brokers     []string
	Topic       string // created with Partitions partitions (replication factor 1) if absent
	Partitions  int32
	Records     int
	RecordBytes int
	// Linger and BatchMaxBytes tune the client (kgo defaults: 10ms and 1000012 bytes when 0).
	Linger        time.Duration
	BatchMaxBytes int32
	// Rate, when > 0, paces Produce calls to this many records per second (open loop), so
	// that latency is measured below saturation; 0 produces as fast as the client's buffer
	// (kgo's 50000 records) allows, and latency then mostly measures time in that buffer.
	Rate int
	// Progress, when set, is called about once a second with the records acknowledged so far.
	Progress func(acked int)
}

// ProduceResult is what a produce run measured.
type ProduceResult struct {
	Records      int
	Bytes        int64 // record value bytes acknowledged
	Elapsed      time.Duration
	P50, P99     time.Duration
	P999, Max    time.Duration
	FailedErrors int
}

// MBps is throughput in MB/s (10^6 bytes) of record values.
func (r ProduceResult) MBps() float64 { return mbps(r.Bytes, r.Elapsed) }

// RecordsPerSec is acknowledged records per second.
func (r ProduceResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

func mbps(b int64, d time.Duration) float64 { return float64(b) / 1e6 / d.Seconds() }

// Produce runs a produce workload with one idempotent acks=all client.
func Produce(ctx context.Context, cfg ProduceConfig) (ProduceResult, error) {
	if cfg.Records <= 0 || cfg.RecordBytes < 0 || cfg.Partitions <= 0 {
		return ProduceResult{}, fmt.Errorf("bench: bad produce config %+v", cfg)
	}
	if err := ensureTopic(ctx, cfg.Brokers, cfg.Topic, cfg.Partitions); err != nil {
		return ProduceResult{}, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is kgo's default and needs acks=all
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	}
	if cfg.Linger > 0 {
		opts = append(opts, kgo.ProducerLinger(cfg.Linger))
	}
	if cfg.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(cfg.BatchMaxBytes))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return ProduceResult{}, err
	}
	defer cl.Close()
	// Connect and load metadata before the clock starts.
	if err := cl.Ping(ctx); err != nil {
		return ProduceResult{}, fmt.Errorf("bench: ping %v: %w", cfg.Brokers, err)
	}

	payload := make([]byte, cfg.RecordBytes)
	_, _ = rand.Read(payload) // incompressible; kgo does not modify values, so one is shared

	var (
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, cfg.Records)
		bytes   int64
		failed  int
		firstEr error
		wg      sync.WaitGroup
	)
	stopProgress := startProgress(cfg.Progress, func() int { mu.Lock(); defer mu.Unlock(); return len(lat) })
	start := time.Now()
	pace := newPacer(cfg.Rate, start)
	defer pace.stop()
	for i := range cfg.Records {
		if err := pace.wait(ctx, i); err != nil {
			return ProduceResult{}, err
		}
		wg.Add(1)
		// Timestamp is the send time: kgo would set it to time.Now() anyway, and the
		// promise reads it back for the latency.
		r := &kgo.Record{Value: payload, Timestamp: time.Now()}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			d := time.Since(r.Timestamp)
			mu.Lock()
			if err != nil {
				failed++
				if firstEr == nil {
					firstEr = err
				}
			} else {
				lat = append(lat, d)
				bytes += int64(len(r.Value))
			}
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if failed > 0 {
		return ProduceResult{}, fmt.Errorf("bench: %d of %d records failed, first: %w", failed, cfg.Records, firstEr)
	}
	slices.Sort(lat)
	return ProduceResult{
		Records: len(lat), Bytes: bytes, Elapsed: elapsed,
		P50: quantile(lat, 0.50), P99: quantile(lat, 0.99), P999: quantile(lat, 0.999), Max: lat[len(lat)-1],
	}, nil
}

// pacer releases records at a fixed rate: record i may go at start + i/rate.
type pacer struct {
	rate  int
	start time.Time
	tick  *time.Ticker
}

func newPacer(rate int, start time.Time) *pacer {
	p := &pacer{rate: rate, start: start}
	if rate > 0 {
		p.tick = time.NewTicker(time.Millisecond)
	}
	return p
}

func (p *pacer) wait(ctx context.Context, i int) error {
	if p.rate <= 0 {
		return nil
	}
	due := p.start.Add(time.Duration(float64(i) / float64(p.rate) * float64(time.Second)))
	for time.Now().Before(due) {
		select {
		case <-p.tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (p *pacer) stop() {
	if p.tick != nil {
		p.tick.Stop()
	}
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ConsumeConfig is a consume workload: read every partition of Topic from its log start
// to the end offset it has when the run starts.
type ConsumeConfig struct {
	Brokers  []string
	Topic    string
	Progress func(read int)
}

// ConsumeResult is what a consume run measured.
type ConsumeResult struct {
	Records int
	Bytes   int64 // record value bytes
	Elapsed time.Duration
}

// MBps is throughput in MB/s (10^6 bytes) of record values.
func (r ConsumeResult) MBps() float64 { return mbps(r.Bytes, r.Elapsed) }

// RecordsPerSec is records read per second.
func (r ConsumeResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// Consume reads the topic back with one consumer assigned every partition directly.
func Consume(ctx context.Context, cfg ConsumeConfig) (ConsumeResult, error) {
	admCl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return ConsumeResult{}, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	starts, err := adm.ListStartOffsets(ctx, cfg.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return ConsumeResult{}, fmt.Errorf("bench: list end offsets: %w", err)
	}
	assign := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	remaining := 0
	starts.Each(func(o kadm.ListedOffset) {
		e, _ := ends.Lookup(o.Topic, o.Partition)
		if e.Offset > o.Offset {
			assign[o.Partition] = kgo.NewOffset().At(o.Offset)
			end[o.Partition] = e.Offset
			remaining++
		}
	})
	if remaining == 0 {
		return ConsumeResult{}, errors.New("bench: nothing to consume")
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: assign}),
	)
	if err != nil {
		return ConsumeResult{}, err
	}
	defer cl.Close()
	var res ConsumeResult
	var mu sync.Mutex
	stopProgress := startProgress(cfg.Progress, func() int { mu.Lock(); defer mu.Unlock(); return res.Records })
	defer stopProgress()
	start := time.Now()
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return ConsumeResult{}, err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return ConsumeResult{}, fmt.Errorf("bench: fetch %s[%d]: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Partition]
			if !ok || r.Offset >= e {
				return
			}
			res.Records++
			res.Bytes += int64(len(r.Value))
			if r.Offset == e-1 {
				delete(end, r.Partition)
				remaining--
			}
		})
		mu.Unlock()
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// ensureTopic creates topic unless it exists.
func ensureTopic(ctx context.Context, brokers []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("bench: create topic %s: %w", topic, err)
	}
	// Wait until every partition has a leader in the broker's metadata: Kafka answers
	// CreateTopics before its broker side has loaded the partitions, and a producer that
	// sees no leader backs off for seconds inside the measured interval.
	deadline := time.Now().Add(30 * time.Second)
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil {
			err = td.Error()
		}
		ready := err == nil && len(td[topic].Partitions) > 0
		for _, p := range td[topic].Partitions {
			ready = ready && p.Err == nil && p.Leader >= 0
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: topic %s has no leader for every partition after 30s (last error: %v)", topic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startProgress calls report(count()) about once a second until the returned stop is called.
func startProgress(report func(int), count func() int) (stop func()) {
	if report == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				report(count())
			}
		}
	}()
	return func() { close(done); <-finished }
}
