package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareConfig is a share-consumption workload (P3): Consumers share consumers of one share
// group read every record of Topic that exists when the run starts, acknowledging each one
// explicitly with Ack(AckAccept), until every record has been accepted.
type ShareConfig struct {
	Brokers   []string
	Topic     string // already holds the records (see Suite for pre-producing them)
	Group     string // a fresh share group; its share.auto.offset.reset is set to earliest
	Consumers int
	// MaxRecords sets kgo.ShareMaxRecords (MaxRecords and BatchSize of ShareFetch); 0 keeps
	// kgo's default (500).
	MaxRecords int32
	// FetchMaxBytes sets kgo.FetchMaxBytes (ShareFetch MaxBytes); 0 keeps kgo's default
	// (50 MiB).
	FetchMaxBytes int32
	// FetchMaxWait sets kgo.FetchMaxWait (how long the broker may hold a ShareFetch with
	// nothing to acquire); 0 keeps kgo's default (5 s).
	FetchMaxWait time.Duration
	// GroupConfigs are further group configs set with share.auto.offset.reset (e.g.
	// share.partition.max.record.locks).
	GroupConfigs map[string]string
	Progress     func(accepted int)
	// OnStart and OnEnd, if set, are called when the measured interval starts (the first
	// record) and ends (every acknowledgement answered), before the final checks.
	OnStart, OnEnd func()
}

// ShareResult is what a share-consumption run measured.
type ShareResult struct {
	Records int   // distinct records accepted (every record of the topic, exactly once each)
	Bytes   int64 // value bytes of those records
	// Elapsed runs from the first record handed to any consumer until the last consumer's
	// FlushAcks returned (every acknowledgement answered by the broker). Startup is the time
	// before that: from creating the consumers (joining the group) to the first record.
	Elapsed time.Duration
	Startup time.Duration
	// AckDrain is the part of Elapsed after the last record was handed out: the consumers'
	// final FlushAcks.
	AckDrain time.Duration
	// Deliveries counts every record handed to a consumer; Duplicates those of an offset
	// already handed out before in this run, and Redelivered those whose DeliveryCount > 1
	// (the broker's view). Both are 0 in a clean run.
	Deliveries  int
	Duplicates  int
	Redelivered int
	AckErrors   int   // per-partition acknowledgement errors reported by the broker
	PerConsumer []int // deliveries per consumer
	// StateLag is how far DescribeShareGroupOffsets' start offsets stayed behind the end
	// offsets after the run (summed over partitions) although a new member acquired nothing:
	// 0 on exactq; Apache Kafka 4.4 reports a lagging persisted start offset.
	StateLag int64
}

// MBps is throughput in MB/s (10^6 bytes) of record values.
func (r ShareResult) MBps() float64 { return mbps(r.Bytes, r.Elapsed) }

// RecordsPerSec is records accepted per second.
func (r ShareResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// shareLedger counts deliveries per (partition, offset) of the records a run must accept.
type shareLedger struct {
	mu         sync.Mutex
	start      map[int32]int64
	seen       map[int32][]uint8 // deliveries per offset-start, saturating at 255
	want, got  int
	bytes      int64
	deliveries int
	dups       int
	redeliv    int
	first      time.Time
	onStart    func()
	done       chan struct{}
}

// add records one delivery; it reports whether the record belongs to the run.
func (l *shareLedger) add(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first.IsZero() {
		l.first = time.Now()
		if l.onStart != nil {
			l.onStart()
		}
	}
	l.deliveries++
	if r.DeliveryCount() > 1 {
		l.redeliv++
	}
	s, ok := l.seen[r.Partition]
	i := r.Offset - l.start[r.Partition]
	if !ok || i < 0 || i >= int64(len(s)) {
		return // produced after the run started; acknowledged but not counted
	}
	if s[i] > 0 {
		l.dups++
	} else {
		l.got++
		l.bytes += int64(len(r.Value))
		if l.got == l.want {
			close(l.done)
		}
	}
	if s[i] < 255 {
		s[i]++
	}
}

// Share runs a share-consumption workload against any bootstrap that supports share groups
// (exactq, Apache Kafka 4.1+).
func Share(ctx context.Context, cfg ShareConfig) (ShareResult, error) {
	if cfg.Consumers <= 0 || cfg.Group == "" || cfg.Topic == "" {
		return ShareResult{}, fmt.Errorf("bench: bad share config %+v", cfg)
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return ShareResult{}, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	starts, ends, err := offsetRange(ctx, adm, cfg.Topic)
	if err != nil {
		return ShareResult{}, err
	}
	led := &shareLedger{start: map[int32]int64{}, seen: map[int32][]uint8{}, done: make(chan struct{}), onStart: cfg.OnStart}
	for p, s := range starts {
		if n := ends[p] - s; n > 0 {
			led.start[p], led.seen[p] = s, make([]uint8, n)
			led.want += int(n)
		}
	}
	if led.want == 0 {
		return ShareResult{}, errors.New("bench: nothing to consume")
	}
	if err := setGroupConfig(ctx, admCl, cfg.Group, "share.auto.offset.reset", "earliest"); err != nil {
		return ShareResult{}, err
	}
	for k, v := range cfg.GroupConfigs {
		if err := setGroupConfig(ctx, admCl, cfg.Group, k, v); err != nil {
			return ShareResult{}, err
		}
	}

	var (
		ackMu     sync.Mutex
		ackErrors int
		firstAck  error
	)
	onAck := func(_ *kgo.Client, rs kgo.ShareAckResults) {
		ackMu.Lock()
		defer ackMu.Unlock()
		for _, r := range rs {
			if r.Err != nil {
				ackErrors++
				if firstAck == nil {
					firstAck = fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err)
				}
			}
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ShareGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ShareAckCallback(onAck),
	}
	if cfg.MaxRecords > 0 {
		opts = append(opts, kgo.ShareMaxRecords(cfg.MaxRecords))
	}
	if cfg.FetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(cfg.FetchMaxBytes))
	}
	if cfg.FetchMaxWait > 0 {
		opts = append(opts, kgo.FetchMaxWait(cfg.FetchMaxWait))
	}
	clients := make([]*kgo.Client, cfg.Consumers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	stopProgress := startProgress(cfg.Progress, func() int { led.mu.Lock(); defer led.mu.Unlock(); return led.got })
	defer stopProgress()

	t0 := time.Now()
	for i := range clients {
		if clients[i], err = kgo.NewClient(opts...); err != nil {
			return ShareResult{}, err
		}
	}
	per := make([]int, cfg.Consumers)
	run := runShareConsumers(ctx, clients, 0, func(i int, fs kgo.Fetches, _ time.Time) {
		fs.EachRecord(func(r *kgo.Record) {
			per[i]++
			led.add(r)
			r.Ack(kgo.AckAccept)
		})
	})
	defer run.stopPolling()
	select {
	case <-led.done:
	case err = <-run.errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	allDelivered := time.Now()
	end, err := run.finish(err, cfg.OnEnd)
	if err != nil {
		return ShareResult{}, err
	}
	ackMu.Lock()
	res := ShareResult{
		Records: led.got, Bytes: led.bytes, Elapsed: end.Sub(led.first), Startup: led.first.Sub(t0),
		AckDrain:   end.Sub(allDelivered),
		Deliveries: led.deliveries, Duplicates: led.dups, Redelivered: led.redeliv,
		AckErrors: ackErrors, PerConsumer: per,
	}
	ackMu.Unlock()
	if res.AckErrors > 0 {
		return res, fmt.Errorf("bench: %d acknowledgement errors, first: %w", res.AckErrors, firstAck)
	}
	// The broker's view must agree: nothing of the topic is left for the group.
	res.StateLag, err = waitShareDrained(ctx, adm, cfg.Brokers, cfg.Group, cfg.Topic, ends)
	return res, err
}

// shareConsumers are share consumers polling on goroutines of their own.
type shareConsumers struct {
	stopPolling func()
	wg          sync.WaitGroup
	// errc receives a fetch or flush error (one per consumer at most) and extra errors the
	// caller sends (at most the extra it asked for), so sends never block.
	errc chan error
}

// runShareConsumers polls every client on a goroutine of its own until finish, handing
// each fetch to handle with the time PollFetches returned; then each flushes its
// acknowledgements (every record handed out was acknowledged; FlushAcks waits for the
// broker's answers).
func runShareConsumers(ctx context.Context, clients []*kgo.Client, extra int, handle func(i int, fs kgo.Fetches, now time.Time)) *shareConsumers {
	pollCtx, stop := context.WithCancel(ctx)
	c := &shareConsumers{stopPolling: stop, errc: make(chan error, len(clients)+extra)}
	for i, cl := range clients {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollFetches(pollCtx)
				now := time.Now()
				if pollCtx.Err() != nil {
					break
				}
				var ferr error
				fs.EachError(func(t string, p int32, err error) {
					if ferr == nil {
						ferr = fmt.Errorf("bench: share fetch %s[%d]: %w", t, p, err)
					}
				})
				if ferr != nil {
					c.errc <- ferr
					return
				}
				handle(i, fs, now)
			}
			if err := cl.FlushAcks(context.WithoutCancel(ctx)); err != nil {
				c.errc <- fmt.Errorf("bench: flush acks: %w", err)
			}
		}()
	}
	return c
}

// finish stops polling, waits until every consumer flushed its acknowledgements, calls
// onEnd (if set) and returns when that was, with err or, if err is nil, a consumer's error.
func (c *shareConsumers) finish(err error, onEnd func()) (time.Time, error) {
	c.stopPolling()
	c.wg.Wait()
	end := time.Now()
	if onEnd != nil {
		onEnd()
	}
	if err == nil {
		select {
		case err = <-c.errc:
		default:
		}
	}
	return end, err
}

// offsetRange lists every partition's log start and end offsets.
func offsetRange(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	s, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = s.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("bench: list start offsets: %w", err)
	}
	e, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = e.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("bench: list end offsets: %w", err)
	}
	starts, ends = map[int32]int64{}, map[int32]int64{}
	s.Each(func(o kadm.ListedOffset) { starts[o.Partition] = o.Offset })
	e.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return starts, ends, nil
}

// setGroupConfig sets one group config (IncrementalAlterConfigs, resource type GROUP), as
// kafka-configs --entity-type groups does; share groups read share.auto.offset.reset there.
func setGroupConfig(ctx context.Context, cl *kgo.Client, group, name, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, &value
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Resources) != 1 {
		err = errors.New("no resource in the response")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("bench: set group %s config %s=%s: %w", group, name, value, err)
	}
	return nil
}

// waitShareDrained checks the broker's view once every record was accepted: it waits
// (briefly) until DescribeShareGroupOffsets reports every partition's share-partition start
// offset at its end offset. Apache Kafka 4.4 can report a persisted start offset that lags
// its acknowledgements for good (observed: stuck ~1000 records short of the end for minutes
// after the last acknowledgement was answered, while a new member gets nothing), so when the
// described offsets lag, a fresh member (probeShareDrained) must acquire nothing instead;
// the lag is returned for the record.
func waitShareDrained(ctx context.Context, adm *kadm.Client, brokers []string, group, topic string, ends map[int32]int64) (lag int64, err error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var behind string
		lag = 0
		d, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err == nil {
			err = d[group].Err
		}
		if err == nil {
			for p, e := range ends {
				o, ok := d[group].Offsets.Lookup(topic, p)
				switch {
				case !ok:
					behind = fmt.Sprintf("partition %d missing", p)
				case o.Err != nil:
					err = o.Err
				case o.StartOffset < e:
					behind = fmt.Sprintf("partition %d start offset %d, end %d", p, o.StartOffset, e)
					lag += e - max(o.StartOffset, 0)
				}
			}
		}
		if err == nil && behind == "" {
			return 0, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return 0, fmt.Errorf("bench: share group %s: describe offsets: %w", group, err)
			}
			var parts []int32
			for p := range ends {
				parts = append(parts, p)
			}
			got, perr := probeShareDrained(ctx, brokers, group, topic, parts, time.Second)
			if perr != nil {
				return lag, fmt.Errorf("bench: share group %s: described %s; probing with a new member: %w", group, behind, perr)
			}
			if len(got) > 0 {
				return lag, fmt.Errorf("bench: share group %s not drained after every record was accepted: described %s, and a new member acquired %d records (first offset %d)",
					group, behind, len(got), got[0])
			}
			return lag, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
