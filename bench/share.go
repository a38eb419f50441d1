package bench

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
	done       chan struct{}
}

// add records one delivery; it reports whether the record belongs to the run.
func (l *shareLedger) add(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first.IsZero() {
		l.first = time.Now()
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
	led := &shareLedger{start: map[int32]int64{}, seen: map[int32][]uint8{}, done: make(chan struct{})}
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

	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	t0 := time.Now()
	for i := range clients {
		if clients[i], err = kgo.NewClient(opts...); err != nil {
			return ShareResult{}, err
		}
	}
	per := make([]int, cfg.Consumers)
	errc := make(chan error, cfg.Consumers)
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollFetches(pollCtx)
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
					errc <- ferr
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					per[i]++
					led.add(r)
					r.Ack(kgo.AckAccept)
				})
			}
			// Every record handed out has been acked; wait for the broker to answer them.
			if err := cl.FlushAcks(ctx); err != nil {
				errc <- fmt.Errorf("bench: flush acks: %w", err)
			}
		}()
	}
	select {
	case <-led.done:
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	allDelivered := time.Now()
	stopPolling()
	wg.Wait()
	end := time.Now()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
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
	// The broker's view must agree: every share-partition start offset is past the records.
	if err := waitShareDrained(ctx, adm, cfg.Group, cfg.Topic, ends); err != nil {
		return res, err
	}
	return res, nil
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

// waitShareDrained waits (briefly) until DescribeShareGroupOffsets reports every partition's
// share-partition start offset at its end offset, i.e. the broker holds every record as
// acknowledged.
func waitShareDrained(ctx context.Context, adm *kadm.Client, group, topic string, ends map[int32]int64) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var behind string
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
				}
			}
		}
		if err == nil && behind == "" {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New(behind)
			}
			return fmt.Errorf("bench: share group %s not drained after every record was accepted: %w", group, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
