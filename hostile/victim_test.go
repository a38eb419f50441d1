package hostile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
)

const (
	victimTopic      = "victim"
	victimPartitions = 2
	victimShareGroup = "victim-share"
)

// sample is one measured victim operation: when it ended and how long it took.
type sample struct {
	at  time.Time
	lat time.Duration
}

// series is a concurrent append-only list of samples.
type series struct {
	mu sync.Mutex
	s  []sample
}

func (s *series) add(at time.Time, lat time.Duration) {
	s.mu.Lock()
	s.s = append(s.s, sample{at, lat})
	s.mu.Unlock()
}

// window returns the count and the 99th-percentile latency of the samples in [from, to).
func (s *series) window(from, to time.Time) (n int, p99 time.Duration) {
	s.mu.Lock()
	var lats []time.Duration
	for _, x := range s.s {
		if !x.at.Before(from) && x.at.Before(to) {
			lats = append(lats, x.lat)
		}
	}
	s.mu.Unlock()
	if len(lats) == 0 {
		return 0, 0
	}
	slices.Sort(lats)
	return len(lats), lats[(len(lats)*99)/100]
}

// victim is the well-behaved workload beside every attack: an idempotent acks=all kgo
// producer writing one record per request (closed loop, so its rate is what the broker
// gives it), a kgo consumer reading the topic, and optionally a share consumer. It
// remembers every acknowledged record to check after a restart.
type victim struct {
	t      *testing.T
	prod   *kgo.Client
	cons   *kgo.Client
	share  *kgo.Client // a share-group member (kgo.ShareGroup): each poll accepts the previous one
	cancel context.CancelFunc
	wg     sync.WaitGroup

	produced, consumed, shared series // producer request latency; consumers' end-to-end latency

	mu       sync.Mutex
	acked    map[int32]map[int64]string // partition → offset → value
	failures map[string]int             // produce error text → count
}

// stats is what a victim achieved in one time window.
type stats struct {
	produceRate, consumeRate, shareRate float64 // records per second
	produceP99, consumeP99, shareP99    time.Duration
}

// startVictim creates the victim topic and starts the clients; it returns once all of them
// moved records.
func startVictim(t *testing.T, addr string, share bool) *victim {
	t.Helper()
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, victimPartitions, 1, nil, victimTopic); err != nil {
		t.Fatalf("create victim topic: %v", err)
	}
	v := &victim{t: t, acked: map[int32]map[int64]string{}, failures: map[string]int{}}
	v.prod, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(victimTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		// A buffered record ignores ProduceSync's context; without a delivery timeout a
		// dead broker would hold the victim (and the test) forever.
		kgo.RecordDeliveryTimeout(15*time.Second),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	v.cons, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(victimTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if share {
		v.share, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(victimShareGroup),
			kgo.ConsumeTopics(victimTopic), kgo.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(context.Background())
	v.cancel = stop
	v.loop(func() { v.produceOne(runCtx) }, runCtx)
	v.loop(func() { v.consume(runCtx) }, runCtx)
	if share {
		v.loop(func() { v.shareConsume(runCtx) }, runCtx)
	}
	t.Cleanup(v.stop)
	err = await.Until(30*time.Second, 10*time.Millisecond, func() error {
		now := time.Now()
		p, _ := v.produced.window(time.Time{}, now)
		c, _ := v.consumed.window(time.Time{}, now)
		s, _ := v.shared.window(time.Time{}, now)
		if p > 10 && c > 0 && (!share || s > 0) {
			return nil
		}
		return fmt.Errorf("%d records produced, %d consumed, %d share-consumed", p, c, s)
	})
	if err != nil {
		t.Fatalf("victim clients never moved records: %v", err)
	}
	return v
}

// loop runs f until ctx is cancelled.
func (v *victim) loop(f func(), ctx context.Context) {
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		for ctx.Err() == nil {
			f()
		}
	}()
}

var victimSeq struct {
	mu sync.Mutex
	n  int
}

func nextValue() string {
	victimSeq.mu.Lock()
	defer victimSeq.mu.Unlock()
	victimSeq.n++
	return fmt.Sprintf("victim-%09d", victimSeq.n)
}

// produceOne produces one record and waits for its acknowledgement, at most 15 s (or until
// the victim stops). A record still in flight after that is given up for the measurement;
// if it is acknowledged later it still counts as acknowledged.
func (v *victim) produceOne(ctx context.Context) {
	val := nextValue()
	start := time.Now()
	done := make(chan error, 1)
	v.prod.Produce(context.Background(), &kgo.Record{Value: []byte(val)}, func(r *kgo.Record, err error) {
		if err == nil {
			v.mu.Lock()
			if v.acked[r.Partition] == nil {
				v.acked[r.Partition] = map[int64]string{}
			}
			v.acked[r.Partition][r.Offset] = val
			v.mu.Unlock()
		}
		done <- err
	})
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return
	case <-time.After(15 * time.Second):
		err = errors.New("no acknowledgement within 15s")
	}
	end := time.Now()
	v.produced.add(end, end.Sub(start))
	if err != nil {
		v.mu.Lock()
		v.failures[err.Error()]++
		v.mu.Unlock()
	}
}

func (v *victim) consume(ctx context.Context) {
	fs := v.cons.PollFetches(ctx)
	now := time.Now()
	fs.EachRecord(func(r *kgo.Record) { v.consumed.add(now, now.Sub(r.Timestamp)) })
}

func (v *victim) shareConsume(ctx context.Context) {
	fs := v.share.PollFetches(ctx)
	now := time.Now()
	if fs.Err() != nil && ctx.Err() == nil {
		// Paces the retry while an attack makes the broker refuse the share fetch.
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	fs.EachRecord(func(r *kgo.Record) { v.shared.add(now, now.Sub(r.Timestamp)) })
}

// window measures the victim over [from, to).
func (v *victim) window(from, to time.Time) stats {
	secs := to.Sub(from).Seconds()
	var s stats
	n, p := v.produced.window(from, to)
	s.produceRate, s.produceP99 = float64(n)/secs, p
	n, p = v.consumed.window(from, to)
	s.consumeRate, s.consumeP99 = float64(n)/secs, p
	n, p = v.shared.window(from, to)
	s.shareRate, s.shareP99 = float64(n)/secs, p
	return s
}

// stop stops the clients (safe to call twice).
func (v *victim) stop() {
	if v.cancel == nil {
		return
	}
	v.cancel()
	v.wg.Wait()
	v.cancel = nil
	v.prod.Close()
	v.cons.Close()
	if v.share != nil {
		// Leaving releases what the member still holds; bounded, because the broker may be
		// dead (Close alone would leave with the client's own, endless, context).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = v.share.LeaveGroupContext(ctx)
		cancel()
		v.share.Close()
	}
}

// numAcked is the number of records the broker acknowledged to the victim.
func (v *victim) numAcked() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, m := range v.acked {
		n += len(m)
	}
	return n
}

// checkAcked reads the victim topic from the start and fails the test for every
// acknowledged record that is not at its offset.
func (v *victim) checkAcked(t *testing.T, addr string) {
	t.Helper()
	v.mu.Lock()
	want := map[int32]map[int64]string{}
	for p, m := range v.acked {
		want[p] = maps(m)
	}
	v.mu.Unlock()
	got := readAll(t, addr, victimTopic)
	missing := 0
	for p, m := range want {
		for off, val := range m {
			if got[p][off] != val {
				if missing < 5 {
					t.Errorf("acknowledged %s at partition %d offset %d: read back %q", val, p, off, got[p][off])
				}
				missing++
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d acknowledged records missing after the restart", missing)
	}
}

func maps(m map[int64]string) map[int64]string {
	c := make(map[int64]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// readAll reads every partition of topic from the start to its end offset as listed now;
// it returns partition → offset → value.
func readAll(t *testing.T, addr, topic string) map[int32]map[int64]string {
	t.Helper()
	cl := readerClient(t, addr, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	out := map[int32]map[int64]string{}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		out[o.Partition] = map[int64]string{}
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: still waiting for partitions to their end: %v", topic, left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Errorf("reading %s[%d] back: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition][r.Offset] = string(r.Value)
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// countTopics is the number of topics Metadata lists (internal ones excluded).
func countTopics(t *testing.T, addr string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(newClient(t, addr)).ListTopics(ctx)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	return len(topics.Names())
}

func (s stats) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("produce %.0f/s p99 %v, consume %.0f/s p99 %v, share %.0f/s p99 %v",
		s.produceRate, r(s.produceP99), s.consumeRate, r(s.consumeP99), s.shareRate, r(s.shareP99))
}

// newClient is a victim-side kgo client closed at the end of the test.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordDeliveryTimeout(15 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// readerClient consumes topic from the start.
func readerClient(t *testing.T, addr, topic string) *kgo.Client {
	return newClient(t, addr, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
}
