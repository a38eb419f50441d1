package crashtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
)

// loc is where a record was acknowledged.
type loc struct {
	partition int32
	offset    int64
}

// ledger is the test's memory of what was produced: every value handed to a producer, and
// where each acknowledged one was written. Values are unique across the whole test, so a
// value read twice is a duplicate.
type ledger struct {
	mu        sync.Mutex
	attempted map[string]struct{}
	acked     map[string]loc
	byLoc     map[loc]string
}

func newLedger() *ledger {
	return &ledger{attempted: map[string]struct{}{}, acked: map[string]loc{}, byLoc: map[loc]string{}}
}

func (l *ledger) attempt(v string) {
	l.mu.Lock()
	l.attempted[v] = struct{}{}
	l.mu.Unlock()
}

// ack records an acknowledgement; acknowledging two values at one offset is itself a bug.
func (l *ledger) ack(v string, at loc) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.byLoc[at]; ok && prev != v {
		return fmt.Errorf("offset %d of partition %d acknowledged twice: %q and %q", at.offset, at.partition, prev, v)
	}
	if prev, ok := l.acked[v]; ok && prev != at {
		return fmt.Errorf("value %q acknowledged twice: at %v and %v", v, prev, at)
	}
	l.acked[v] = at
	l.byLoc[at] = v
	return nil
}

func (l *ledger) numAcked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// value builds the unique value for sequence number seq of producer g in cycle c, padded
// to a length that varies with seq so that batches have varied sizes.
func value(c, g int, seq int64) string {
	head := fmt.Sprintf("c%04d/g%d/s%09d/", c, g, seq)
	n := int(seq*7919%251) + 16
	pad := make([]byte, n)
	for i := range pad {
		pad[i] = 'a' + byte((seq+int64(i))%26)
	}
	return head + string(pad)
}

// producers are goroutines, each with its own idempotent kgo client (so its own producer
// id), producing unique values round-robin over the partitions until stopped.
type producers struct {
	clients  []*kgo.Client
	stop     atomic.Bool
	loops    sync.WaitGroup
	inflight sync.WaitGroup // one per Produce call whose promise has not run
	acks     atomic.Int64
	fails    atomic.Int64

	reasons *errTally // why records failed

	errMu sync.Mutex
	err   error // the first ledger inconsistency seen in a promise
}

// Each producer goroutine offers at most producerBurst records per producerTick (4000/s).
const (
	producerBurst = 20
	producerTick  = 5 * time.Millisecond
)

// startProducers starts goroutines producers writing to topic (see producers). With
// crashes, the clients retry an EOF on a connection's first response (kgo.AlwaysRetryEOF),
// as clients of brokers that crash and restart should. When a broker process dies, the
// kernel closes each of its sockets with a FIN if the broker had read everything the client
// sent (a RST otherwise). A client whose connection is that new (its ApiVersions, or the
// first request after it, in flight or sent after the death) reads EOF before any
// response, which kgo by default takes for a TLS or SASL misconfiguration and does not
// retry: the producer id initialization fails, and with it every buffered record. The
// SIGKILLs drawn 0-2 ms after the producers start land in their connection set-up now and
// then, and a Kafka broker killed there does the same. Without crashes (TestCleanShutdown)
// the clients keep kgo's default, so a broker that wrongly closes connections still fails.
func startProducers(t *testing.T, addr, topic string, partitions, goroutines, cycle int, l *ledger, crashes bool) *producers {
	t.Helper()
	ps := &producers{reasons: newErrTally()}
	for g := range goroutines {
		opts := []kgo.Opt{
			kgo.SeedBrokers(addr),
			kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(time.Millisecond),
			kgo.MaxBufferedRecords(1000),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		}
		if crashes {
			opts = append(opts, kgo.AlwaysRetryEOF())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatalf("producer client: %v", err)
		}
		ps.clients = append(ps.clients, cl)
		ps.loops.Add(1)
		go ps.run(cl, g, partitions, cycle, l)
	}
	return ps
}

func (ps *producers) run(cl *kgo.Client, g, partitions, cycle int, l *ledger) {
	defer ps.loops.Done()
	ctx := context.Background()
	// Pace the producer (producerBurst records per tick) so that the data read back by every
	// cycle stays small enough for many cycles; unpaced, a producer writes ~100k records/s.
	tick := time.NewTicker(producerTick)
	defer tick.Stop()
	for seq := int64(0); !ps.stop.Load(); seq++ {
		if seq%producerBurst == 0 && seq > 0 {
			<-tick.C
		}
		v := value(cycle, g, seq)
		l.attempt(v)
		ps.inflight.Add(1)
		r := &kgo.Record{Value: []byte(v), Partition: int32((seq + int64(g)) % int64(partitions))}
		// Produce blocks while MaxBufferedRecords are buffered; Close unblocks it.
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer ps.inflight.Done()
			if err != nil {
				ps.fails.Add(1)
				ps.reasons.add("", err, 0)
				return
			}
			ps.acks.Add(1)
			if err := l.ack(string(r.Value), loc{r.Partition, r.Offset}); err != nil {
				ps.errMu.Lock()
				if ps.err == nil {
					ps.err = err
				}
				ps.errMu.Unlock()
			}
		})
	}
}

// halt stops producing. With flush it first waits (up to flushTimeout) for every buffered
// record to be acknowledged or failed; then it closes the clients, which fails whatever is
// left, and waits for every promise.
func (ps *producers) halt(t *testing.T, flush bool, flushTimeout time.Duration) {
	t.Helper()
	ps.stop.Store(true)
	if flush {
		// Let the loops finish their last Produce first, or it could land after Flush.
		looped := make(chan struct{})
		go func() { ps.loops.Wait(); close(looped) }()
		select {
		case <-looped:
		case <-time.After(flushTimeout):
			t.Errorf("producer loops blocked in Produce for %v with the broker up", flushTimeout)
		}
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		for _, cl := range ps.clients {
			if err := cl.Flush(ctx); err != nil {
				t.Errorf("producers did not flush within %v after the restart: %v", flushTimeout, err)
				break
			}
		}
		cancel()
	}
	closed := make(chan struct{})
	go func() {
		for _, cl := range ps.clients {
			cl.Close()
		}
		ps.loops.Wait()
		ps.inflight.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatalf("producers did not stop within 30s of Close")
	}
	ps.errMu.Lock()
	defer ps.errMu.Unlock()
	if ps.err != nil {
		t.Errorf("acknowledgements: %v", ps.err)
	}
}

// errTally counts errors by their text, for a cycle's log line: how often each thing went
// wrong, not only the first. It is safe for concurrent use.
type errTally struct {
	mu sync.Mutex
	n  map[string]int // "where: error" (or "error") -> count
}

func newErrTally() *errTally { return &errTally{n: map[string]int{}} }

// add counts err under where ("": none), its text cut to maxLen bytes (0: all of it).
func (e *errTally) add(where string, err error, maxLen int) {
	msg := err.Error()
	if maxLen > 0 && len(msg) > maxLen {
		msg = msg[:maxLen] + "..."
	}
	if where != "" {
		msg = where + ": " + msg
	}
	e.mu.Lock()
	e.n[msg]++
	e.mu.Unlock()
}

// String lists the errors as "Nx text", sorted; "none" when there were none.
func (e *errTally) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for msg, n := range e.n {
		out = append(out, fmt.Sprintf("%dx %s", n, msg))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// awaitAcks waits until at least n records were acknowledged, timeout passes or the
// broker exits; it returns whether n was reached.
func (ps *producers) awaitAcks(n int64, timeout time.Duration, brokerDone <-chan struct{}) bool {
	return await.Until(timeout, 5*time.Millisecond, func() error {
		if ps.acks.Load() >= n {
			return nil
		}
		select {
		case <-brokerDone:
			return await.Stop(errors.New("the broker exited"))
		default:
			return errors.New("not yet")
		}
	}) == nil
}

// createTopic creates topic with the given partitions and configs.
func createTopic(t *testing.T, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// readAll reads every partition of topic from its log start to its high watermark (as
// ListOffsets reports them when the read starts) and returns the values by offset.
func readAll(t *testing.T, addr, topic string, partitions int32) ([]map[int64]string, []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("ListOffsets earliest: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("ListOffsets latest: %v", err)
	}
	hwm := make([]int64, partitions)
	want := map[int32]kgo.Offset{}
	remaining := 0
	for p := range partitions {
		s, ok1 := starts.Lookup(topic, p)
		e, ok2 := ends.Lookup(topic, p)
		if !ok1 || !ok2 {
			t.Fatalf("ListOffsets has no partition %d", p)
		}
		if s.Offset != 0 {
			t.Fatalf("partition %d: log start offset %d, want 0 (nothing was deleted)", p, s.Offset)
		}
		hwm[p] = e.Offset
		if e.Offset > 0 {
			want[p] = kgo.NewOffset().At(0)
			remaining++
		}
	}
	out := make([]map[int64]string, partitions)
	for p := range out {
		out[p] = map[int64]string{}
	}
	if remaining == 0 {
		return out, hwm
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := make([]int64, partitions)
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: %v; read up to %v of high watermarks %v", ctx.Err(), next, hwm)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			p := r.Partition
			if r.Offset >= hwm[p] {
				return // appended after ListOffsets: not part of this read
			}
			if r.Offset != next[p] {
				t.Fatalf("partition %d: record at offset %d, want %d (offsets not contiguous)", p, r.Offset, next[p])
			}
			out[p][r.Offset] = string(r.Value)
			next[p]++
			if next[p] == hwm[p] {
				remaining--
			}
		})
	}
	return out, hwm
}

// verify checks the broker's contents against the ledger: every acknowledged record is at
// its acknowledged offset, every value read was produced by this test, and no value is
// read twice. It returns the number of records read.
func verify(t *testing.T, addr, topic string, partitions int32, l *ledger) int {
	t.Helper()
	got, hwm := readAll(t, addr, topic, partitions)
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := make(map[string]loc, len(l.attempted))
	n := 0
	for p, recs := range got {
		offs := make([]int64, 0, len(recs))
		for o := range recs {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for _, o := range offs {
			v := recs[o]
			at := loc{int32(p), o}
			if _, ok := l.attempted[v]; !ok {
				t.Errorf("partition %d offset %d: value %.40q was never produced", p, o, v)
			}
			if prev, dup := seen[v]; dup {
				t.Errorf("value %.40q is stored twice: partition %d offset %d and partition %d offset %d",
					v, prev.partition, prev.offset, p, o)
			}
			seen[v] = at
			n++
		}
	}
	var missing []string
	for v, at := range l.acked {
		if at.offset >= hwm[at.partition] {
			missing = append(missing, fmt.Sprintf("%.30q acked at %d/%d beyond high watermark %d", v, at.partition, at.offset, hwm[at.partition]))
			continue
		}
		if got[at.partition][at.offset] != v {
			missing = append(missing, fmt.Sprintf("%.30q acked at %d/%d, found %.30q there", v, at.partition, at.offset, got[at.partition][at.offset]))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		if len(missing) > 10 {
			missing = append(missing[:10], fmt.Sprintf("... and %d more", len(missing)-10))
		}
		t.Errorf("%d acknowledged records lost or moved (high watermarks %v):\n%s", len(missing), hwm, joinLines(missing))
	}
	return n
}

func joinLines(ss []string) string {
	var b []byte
	for _, s := range ss {
		b = append(b, "  "...)
		b = append(b, s...)
		b = append(b, '\n')
	}
	return string(b)
}

// openTransactions describes the transactions still open (openTxnStates) as "open
// transactions: id(pid N) State, ..."; "" when there are none.
func openTransactions(ctx context.Context, adm *kadm.Client) (string, error) {
	open, err := adm.ListTransactions(ctx, nil, openTxnStates)
	if err != nil {
		return "", fmt.Errorf("list transactions: %w", err)
	}
	if len(open) == 0 {
		return "", nil
	}
	var ss []string
	for _, l := range open.Sorted() {
		ss = append(ss, fmt.Sprintf("%s(pid %d) %s", l.TxnID, l.ProducerID, l.State))
	}
	return "open transactions: " + strings.Join(ss, ", "), nil
}
