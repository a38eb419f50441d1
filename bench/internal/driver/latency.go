package driver

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// LatencyConfig is P6: end-to-end latency from Produce to a share consumer, producing at a
// fixed Rate while Consumers share consumers (one group) accept every record.
type LatencyConfig struct {
	Brokers     []string
	Topic       string // created with one partition
	Group       string // a fresh share group
	Consumers   int
	Rate        int // records per second (open loop)
	Records     int
	RecordBytes int // at least 16 (sequence number and send time)
	// Linger of the producer; 0 means 1 ms (kgo's default of 10 ms would dominate the
	// figure at moderate rates).
	Linger   time.Duration
	Progress func(received int)
	// OnStart and OnEnd are called when the measured interval starts (after the warm-up)
	// and ends (every record received and acknowledged), before the final checks.
	OnStart, OnEnd func()
}

// LatencyResult is what a P6 run measured. Latency is per record, from the moment before
// Produce (stamped into the value, nanoseconds) to the PollFetches that handed it to a
// share consumer, on the same clock.
type LatencyResult struct {
	Records int
	Bytes   int64
	Elapsed time.Duration // first send to last receipt
	P50     time.Duration
	P99     time.Duration
	P999    time.Duration
	Max     time.Duration
	// Startup is the time until every consumer had received a warm-up record (joined and
	// fetching); warm-up records are not measured.
	Startup    time.Duration
	Duplicates int
	StateLag   int64 // see ShareResult.StateLag
}

// RecordsPerSec is received records per second.
func (r LatencyResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// MBps is received value bytes per second (10^6).
func (r LatencyResult) MBps() float64 { return mbps(r.Bytes, r.Elapsed) }

// Latency runs P6.
func Latency(ctx context.Context, cfg LatencyConfig) (LatencyResult, error) {
	if cfg.Consumers <= 0 || cfg.Rate <= 0 || cfg.Records <= 0 || cfg.RecordBytes < 16 {
		return LatencyResult{}, fmt.Errorf("bench: bad latency config %+v", cfg)
	}
	if cfg.Linger <= 0 {
		cfg.Linger = time.Millisecond
	}
	if err := ensureTopic(ctx, cfg.Brokers, cfg.Topic, 1); err != nil {
		return LatencyResult{}, err
	}
	if err := setGroupConfigAt(ctx, cfg.Brokers, cfg.Group, "share.auto.offset.reset", "earliest"); err != nil {
		return LatencyResult{}, err
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(cfg.Linger))
	if err != nil {
		return LatencyResult{}, err
	}
	defer prod.Close()
	if err := prod.Ping(ctx); err != nil {
		return LatencyResult{}, err
	}

	var (
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, cfg.Records)
		seen     = make([]bool, cfg.Records)
		got      int
		dups     int
		bytes    int64
		lastRecv time.Time
		warmBy   = make([]bool, cfg.Consumers)
		warm     = 0
		allWarm  = make(chan struct{})
		allGot   = make(chan struct{})
		ackErr   error
	)
	onAck := func(_ *kgo.Client, rs kgo.ShareAckResults) {
		for _, r := range rs {
			if r.Err != nil {
				mu.Lock()
				if ackErr == nil {
					ackErr = fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err)
				}
				mu.Unlock()
			}
		}
	}
	clients := make([]*kgo.Client, cfg.Consumers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		if clients[i], err = kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ShareGroup(cfg.Group),
			kgo.ConsumeTopics(cfg.Topic), kgo.ShareAckCallback(onAck)); err != nil {
			return LatencyResult{}, err
		}
	}
	t0 := time.Now()
	run := runShareConsumers(ctx, clients, 1, func(i int, fs kgo.Fetches, now time.Time) {
		mu.Lock()
		defer mu.Unlock()
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			if len(r.Value) < 16 {
				return
			}
			seq := int64(binary.BigEndian.Uint64(r.Value))
			sent := int64(binary.BigEndian.Uint64(r.Value[8:]))
			if seq < 0 || seq >= int64(cfg.Records) { // a warm-up record
				if !warmBy[i] {
					warmBy[i] = true
					if warm++; warm == cfg.Consumers {
						close(allWarm)
					}
				}
				return
			}
			if seen[seq] {
				dups++
				return
			}
			seen[seq] = true
			got++
			bytes += int64(len(r.Value))
			lat = append(lat, now.Sub(time.Unix(0, sent)))
			lastRecv = now
			if got == cfg.Records {
				close(allGot)
			}
		})
	})
	defer run.stopPolling()

	payload := make([]byte, cfg.RecordBytes)
	_, _ = rand.Read(payload)
	value := func(seq int64) []byte {
		v := slices.Clone(payload)
		binary.BigEndian.PutUint64(v, uint64(seq))
		binary.BigEndian.PutUint64(v[8:], uint64(time.Now().UnixNano()))
		return v
	}
	onProduced := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case run.errc <- fmt.Errorf("bench: produce: %w", err):
			default:
			}
		}
	}
	// Warm up: one record every 20 ms until every consumer has received one.
	warmTick := time.NewTicker(20 * time.Millisecond)
	warmDeadline := time.After(90 * time.Second)
warmup:
	for {
		select {
		case <-allWarm:
			break warmup
		case <-warmTick.C:
			prod.Produce(ctx, &kgo.Record{Value: value(-1)}, onProduced)
		case err := <-run.errc:
			warmTick.Stop()
			return LatencyResult{}, err
		case <-warmDeadline:
			warmTick.Stop()
			mu.Lock()
			defer mu.Unlock()
			return LatencyResult{}, fmt.Errorf("bench: only %d of %d share consumers received a record after 90s", warm, cfg.Consumers)
		case <-ctx.Done():
			warmTick.Stop()
			return LatencyResult{}, ctx.Err()
		}
	}
	warmTick.Stop()
	res := LatencyResult{Startup: time.Since(t0)}

	stopProgress := startProgress(cfg.Progress, func() int { mu.Lock(); defer mu.Unlock(); return got })
	defer stopProgress()
	if cfg.OnStart != nil {
		cfg.OnStart()
	}
	start := time.Now()
	pace := newPacer(cfg.Rate, start)
	for i := range cfg.Records {
		if err := pace.wait(ctx, i); err != nil {
			pace.stop()
			return res, err
		}
		prod.Produce(ctx, &kgo.Record{Value: value(int64(i))}, onProduced)
	}
	pace.stop()
	expected := time.Duration(float64(cfg.Records) / float64(cfg.Rate) * float64(time.Second))
	select {
	case <-allGot:
	case err = <-run.errc:
	case <-time.After(time.Until(start.Add(expected)) + 60*time.Second):
		mu.Lock()
		err = fmt.Errorf("bench: %d of %d records received 60s after the last was produced", got, cfg.Records)
		mu.Unlock()
	case <-ctx.Done():
		err = ctx.Err()
	}
	if _, err = run.finish(err, cfg.OnEnd); err != nil {
		return res, err
	}
	mu.Lock()
	slices.Sort(lat)
	res.Records, res.Bytes, res.Duplicates = got, bytes, dups
	res.Elapsed = lastRecv.Sub(start)
	res.P50, res.P99, res.P999, res.Max = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 0.999), lat[len(lat)-1]
	err = ackErr
	mu.Unlock()
	if err != nil {
		return res, fmt.Errorf("bench: acknowledgement error: %w", err)
	}
	admCl, adm, err := newAdmin(cfg.Brokers)
	if err != nil {
		return res, err
	}
	defer admCl.Close()
	_, ends, err := offsetRange(ctx, adm, cfg.Topic)
	if err != nil {
		return res, err
	}
	res.StateLag, err = waitShareDrained(ctx, adm, cfg.Brokers, cfg.Group, cfg.Topic, ends)
	return res, err
}
