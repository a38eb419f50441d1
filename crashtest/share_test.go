package crashtest

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/brokerproc"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
)

// flagShareCycles is the number of kill/restart cycles of TestShareStateSurvivesKill.
//
//	go test ./crashtest/ -run TestShareStateSurvivesKill -share-cycles 100 -v
//	EXACTQ_SHARE_CYCLES=100 go test ./crashtest/ -run TestShareStateSurvivesKill
var flagShareCycles = flag.Int("share-cycles", envInt("EXACTQ_SHARE_CYCLES", 6), "kill/restart cycles of TestShareStateSurvivesKill (env EXACTQ_SHARE_CYCLES)")

const (
	shareRecords = 300 // records per cycle's topic
	shareWorkers = 2
	// shareWorkerTick paces each worker's polls.
	shareWorkerTick = 3 * time.Millisecond
)

// shareBrokerConfig is the broker's properties file of the share-group crash tests: fast
// heartbeats and assignment, a short transaction-abort scan.
var shareBrokerConfig = fmt.Sprintf(`# crashtest share groups
group.share.heartbeat.interval.ms=200
group.share.min.heartbeat.interval.ms=200
group.share.assignment.interval.ms=0
group.share.min.record.lock.duration.ms=1000
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=%d
`, eosAbortScan.Milliseconds())

// shareBroker starts brokers on one data directory with the share config, every stderr
// line going to one brokerLog.
type shareBroker struct {
	t       *testing.T
	dataDir string
	cfgPath string
	logs    *brokerLog
	b       *brokerproc.Process
}

func newShareBroker(t *testing.T, extraConfig string) *shareBroker {
	t.Helper()
	sb := &shareBroker{t: t, dataDir: t.TempDir(), cfgPath: filepath.Join(t.TempDir(), "broker.properties"), logs: newBrokerLog()}
	if err := os.WriteFile(sb.cfgPath, []byte(shareBrokerConfig+extraConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	sb.start("")
	return sb
}

func (sb *shareBroker) start(listen string) {
	sb.t.Helper()
	sb.b = startBrokerOpts(sb.t, brokerproc.Options{
		DataDir: sb.dataDir, Listen: listen, Fsync: "always", LogLevel: "info",
		Echo: sb.logs, Args: []string{"--config", sb.cfgPath},
	})
}

// restart SIGKILLs the broker (if still running) and starts it again on the same address.
func (sb *shareBroker) kill() { sb.b.Kill() }

func (sb *shareBroker) restart() {
	sb.t.Helper()
	addr := sb.b.Addr
	sb.b.Kill()
	sb.start(addr)
}

// setGroupConfig sets group configs of a (share) group, retrying request errors (the
// first request of a client after a restart can fail on its dead connection).
func setGroupConfig(t *testing.T, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	if err := await.Until(30*time.Second, 50*time.Millisecond, func() error {
		err := testbroker.SetGroupConfigs(ctxTimeout(t, 10*time.Second), cl, group, kv...)
		var refused *kerr.Error
		if errors.As(err, &refused) {
			return await.Stop(err) // the broker answered: asking again changes nothing
		}
		return err // the broker may be restarting
	}); err != nil {
		t.Fatalf("group %s config %v: %v", group, kv, err)
	}
}

// newRawClient is a kgo client for requests kadm does not wrap; it survives restarts.
func newRawClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AlwaysRetryEOF(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// shareOffsets returns the share-partition start offset and lag of group on partition 0
// of topic, retrying request errors.
func shareOffsets(t *testing.T, adm *kadm.Client, group, topic string) (start, lag int64) {
	t.Helper()
	if err := await.Until(30*time.Second, 50*time.Millisecond, func() error {
		offs, err := adm.DescribeShareGroupOffsets(ctxTimeout(t, 10*time.Second), group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return err
		}
		so, ok := offs[group].Offsets[topic][0]
		switch {
		case !ok:
			return fmt.Errorf("no offsets of %s[0] in %+v", topic, offs[group])
		case so.Err != nil:
			return so.Err
		}
		start, lag = so.StartOffset, so.Lag
		return nil
	}); err != nil {
		t.Fatalf("describe share group offsets of %s: %v", group, err)
	}
	return start, lag
}

// produceInputs appends values to partition 0 of topic in batches of seeded sizes and
// (1 to maxBatch records) and returns once all are acknowledged.
func produceInputs(t *testing.T, addr, topic string, rng *rand.Rand, values []string, maxBatch int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.AlwaysRetryEOF(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxTimeout(t, 30*time.Second)
	for i := 0; i < len(values); {
		n := min(1+rng.IntN(maxBatch), len(values)-i)
		rs := make([]*kgo.Record, n)
		for j := range rs {
			rs[j] = &kgo.Record{Value: []byte(values[i+j])}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce inputs to %s: %v", topic, err)
		}
		i += n
	}
}

// offState is what the test knows about one offset of a share partition: its last
// delivery, and the acknowledgements the broker confirmed (CommitSync succeeded) or may
// have applied (the CommitSync failed, typically because of the kill).
type offState struct {
	delivered  int16          // delivery count of the last delivery seen, 0 if none
	durable    kgoext.AckType // last confirmed ACCEPT/REJECT/RELEASE, -1 if none
	durableCnt int16          // delivery count at the last confirmed RELEASE (persisted AVAILABLE)
	uncertain  kgoext.AckType // an ack whose outcome is unknown, -1 if none
	held       bool           // delivered, not acknowledged (or RENEWed) when the broker died
}

// shareLedger tracks every offset of one cycle's share partition.
type shareLedger struct {
	mu      sync.Mutex
	offs    []offState
	errs    []string
	seen    int // deliveries seen
	target  int
	reached chan struct{}
	killed  atomic.Bool            // set just before the broker is killed
	counts  map[kgoext.AckType]int // confirmed acks by type
	failed  int                    // acks of failed commits
}

func newShareLedger(n, target int) *shareLedger {
	l := &shareLedger{offs: make([]offState, n), target: target, reached: make(chan struct{}), counts: map[kgoext.AckType]int{}}
	for i := range l.offs {
		l.offs[i].durable, l.offs[i].uncertain = -1, -1
	}
	return l
}

func (l *shareLedger) errorf(format string, args ...any) {
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// deliver notes a delivery to a worker before the kill.
func (l *shareLedger) deliver(off int64, count int16) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off < 0 || off >= int64(len(l.offs)) {
		l.errorf("delivered offset %d outside the %d records", off, len(l.offs))
		return
	}
	s := &l.offs[off]
	switch {
	case s.durable == kgoext.AckAccept || s.durable == kgoext.AckReject:
		l.errorf("offset %d delivered again (count %d) after a confirmed %s", off, count, s.durable)
	case count <= s.delivered:
		l.errorf("offset %d delivered with count %d after a delivery with count %d", off, count, s.delivered)
	}
	s.delivered = count
	s.held = true
	s.uncertain = -1 // delivered again: an earlier unconfirmed ack was not applied
	if l.seen++; l.seen == l.target {
		close(l.reached)
	}
}

// ackOf is an acknowledgement sent for one delivery.
type ackOf struct {
	t     kgoext.AckType
	count int16 // the delivery count of the delivery acknowledged
}

// acked notes the outcome of a CommitSync of acks (by offset). A RELEASEd record can be
// delivered again (to the other worker) before the CommitSync that released it returns:
// then only the confirmation is noted, not the end of the newer delivery.
func (l *shareLedger) acked(acks map[int64]ackOf, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for off, a := range acks {
		s := &l.offs[off]
		if a.t == kgoext.AckRenew {
			continue // still held
		}
		current := s.delivered == a.count
		if !ok {
			l.failed++
			if current {
				s.held = false
				s.uncertain = a.t
			}
			continue
		}
		l.counts[a.t]++
		if a.t == kgoext.AckRelease {
			s.durableCnt = max(s.durableCnt, a.count)
		}
		if current {
			s.held = false
			s.durable = a.t
		}
	}
}

// decide is the seeded outcome a worker gives a delivery: mostly ACCEPT, some RELEASE (only
// on a first delivery, so that no record reaches the delivery limit), REJECT and holding
// the record (RENEW, never a terminal ack before the kill).
func decide(seed uint64, off int64, count int16) kgoext.AckType {
	r := rand.New(rand.NewPCG(seed, uint64(off)<<16|uint64(count))).IntN(100)
	switch {
	case r < 45:
		return kgoext.AckAccept
	case r < 65 && count == 1:
		return kgoext.AckRelease
	case r < 80:
		return kgoext.AckReject
	default:
		return kgoext.AckRenew
	}
}

// shareWorker polls an explicit-mode ShareConsumer, acknowledges every delivery as decide
// says and commits the acknowledgements synchronously after each poll, until ctx ends.
func shareWorker(ctx context.Context, c *kgoext.ShareConsumer, topic string, seed uint64, l *shareLedger) {
	// Pace the polls so that consuming a cycle's records takes long enough (~100 ms) for
	// the kill to land in the middle of it; unpaced, they are consumed in a few ms.
	tick := time.NewTicker(shareWorkerTick)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		recs, err := c.Poll(ctx)
		if err != nil {
			continue // the broker died (ctx is cancelled right after the kill) or a fetch failed
		}
		acks := map[int64]ackOf{}
		for _, r := range recs {
			count := kgoext.DeliveryCount(r)
			l.deliver(r.Offset, count)
			t := decide(seed, r.Offset, count)
			if err := c.Acknowledge(r, t); err != nil {
				l.mu.Lock()
				l.errorf("acknowledge offset %d: %v", r.Offset, err)
				l.mu.Unlock()
				continue
			}
			acks[r.Offset] = ackOf{t, count}
		}
		if len(acks) == 0 {
			continue
		}
		res, err := c.CommitSync(ctx)
		perr := res[kgoext.TopicPartition{Topic: topic, Partition: 0}]
		if err := cmp.Or(err, perr); err != nil && !l.killed.Load() {
			// Only the kill may make an acknowledgement's outcome unknown.
			l.mu.Lock()
			l.errorf("CommitSync with the broker up: %v", err)
			l.mu.Unlock()
		}
		l.acked(acks, err == nil && perr == nil)
	}
}

// TestShareStateSurvivesKill (share groups, acceptance 5): per cycle, a fresh one-partition
// topic of shareRecords records and a share group (earliest) that two explicit-mode
// kgoext.ShareConsumers work on: they ACCEPT, RELEASE (first deliveries only), REJECT, or hold
// (RENEW) each delivery as a seeded function of offset and delivery count decides, and
// commit the acknowledgements synchronously. The broker is SIGKILLed once a seeded number
// of deliveries was seen (plus a seeded jitter); the workers die with it (no request
// reaches the restarted broker). After the restart a fresh consumer drains the group,
// ACCEPTing everything, and the test checks against what the broker confirmed before the
// kill: confirmed ACCEPTed and REJECTed records never come back; RELEASEd, held, and never
// delivered records all come back, exactly once, with a delivery count above the one
// persisted with their last RELEASE; records whose acknowledgement was in flight at the
// kill come back at most once; in the end the share start offset is shareRecords and the
// lag 0. Every restart also rechecks the groups of the earlier cycles (start offset and lag
// unchanged). The broker must log no level=ERROR line.
func TestShareStateSurvivesKill(t *testing.T) {
	cycles := *flagShareCycles
	if testing.Short() {
		cycles = min(cycles, 3)
	}
	s := seed(t)
	rng := rand.New(rand.NewPCG(uint64(s), 3))
	sb := newShareBroker(t, "")
	addr := sb.b.Addr
	adm := newAdmin(t, addr)
	raw := newRawClient(t, addr)
	testStart := time.Now()
	var totals [5]int
	for c := range cycles {
		topic, group := fmt.Sprintf("share-kill-%d", c), fmt.Sprintf("share-kill-g%d", c)
		createTopic(t, addr, topic, 1, nil)
		values := make([]string, shareRecords)
		for i := range values {
			values[i] = fmt.Sprintf("c%d/r%04d", c, i)
		}
		produceInputs(t, addr, topic, rng, values, 40)
		setGroupConfig(t, raw, group, "share.auto.offset.reset", "earliest")

		target := 1 + rng.IntN(shareRecords*3/4)
		jitter := time.Duration(rng.IntN(5_000)) * time.Microsecond
		cseed := rng.Uint64()
		l := newShareLedger(shareRecords, target)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var (
			consumers  []*kgoext.ShareConsumer
			transports []*kgo.Client // one per consumer: the consumers' long polls do not queue behind each other
		)
		for range shareWorkers {
			transport, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			transports = append(transports, transport)
			cons, err := kgoext.NewShareConsumer(transport, group, kgoext.ShareTopics(topic), kgoext.ExplicitAcks(),
				kgoext.ShareMaxRecords(int32(2+rng.IntN(10))), kgoext.ShareMaxWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			consumers = append(consumers, cons)
			wg.Add(1)
			go func() { defer wg.Done(); shareWorker(ctx, cons, topic, cseed, l) }()
		}
		select {
		case <-l.reached:
		case <-time.After(30 * time.Second):
			t.Fatalf("cycle %d: the workers saw %d of %d deliveries within 30s", c, l.seen, target)
		}
		time.Sleep(jitter) // the fault's timing, drawn from the seed
		l.killed.Store(true)
		sb.kill()
		// The workers die with the broker: nothing they do from now on reaches a broker.
		cancel()
		wg.Wait()
		dead, stop := context.WithCancel(context.Background())
		stop()
		for i, cons := range consumers {
			_ = cons.Close(dead)
			transports[i].Close()
		}
		sb.start(addr)

		// Earlier cycles' groups are untouched by this one and its kill.
		for p := range c {
			if st, lag := shareOffsets(t, adm, fmt.Sprintf("share-kill-g%d", p), fmt.Sprintf("share-kill-%d", p)); st != shareRecords || lag != 0 {
				t.Errorf("cycle %d: group of cycle %d has start offset %d lag %d after the restart, want %d and 0", c, p, st, lag, shareRecords)
			}
		}

		l.mu.Lock()
		for _, e := range l.errs {
			t.Errorf("cycle %d before the kill: %s", c, e)
		}
		l.mu.Unlock()
		got := drainShare(t, addr, adm, group, topic)
		var n [5]int // confirmed accept/reject, released, held, never delivered, uncertain
		var bad []string
		// Held records come back; ACQUIRED is never persisted (spec 4.7), so their delivery
		// count after the restart is only bounded by the last persisted one: count how many
		// came back with a higher count than their last delivery, and how many did not.
		var heldUp, heldSame int
		for off := range l.offs {
			st := l.offs[off]
			cnt, again := got[int64(off)]
			switch {
			case st.durable == kgoext.AckAccept || st.durable == kgoext.AckReject:
				n[0]++
				if again {
					bad = append(bad, fmt.Sprintf("offset %d: confirmed %s before the kill, delivered again (count %d)", off, st.durable, cnt))
				}
				continue
			case st.uncertain >= 0 && st.uncertain != kgoext.AckRelease:
				n[4]++
				if !again {
					continue // applied before the kill: fine
				}
			case st.held:
				n[2]++
			case st.delivered == 0:
				n[3]++
			default:
				n[1]++ // released (confirmed or not)
			}
			if again && st.held && st.delivered > 0 {
				if cnt > st.delivered {
					heldUp++
				} else {
					heldSame++
				}
			}
			if !again {
				bad = append(bad, fmt.Sprintf("offset %d (delivered %d times, confirmed %v, held %v, unconfirmed %v) not delivered after the restart: lost",
					off, st.delivered, st.durable, st.held, st.uncertain))
			} else if cnt <= st.durableCnt {
				bad = append(bad, fmt.Sprintf("offset %d: delivery count %d after the restart, but %d was persisted with its RELEASE", off, cnt, st.durableCnt))
			}
		}
		if len(bad) > 0 {
			if len(bad) > 15 {
				bad = append(bad[:15], fmt.Sprintf("... and %d more", len(bad)-15))
			}
			t.Errorf("cycle %d (%d deliveries before the kill):\n%s", c, l.seen, joinLines(bad))
		}
		if st, lag := shareOffsets(t, adm, group, topic); st != shareRecords || lag != 0 {
			t.Errorf("cycle %d: after the drain start offset %d lag %d, want %d and 0", c, st, lag, shareRecords)
		}
		checkLog(t, c, sb.logs)
		t.Logf("cycle %d: kill after %4d deliveries +%5.2fms; confirmed accept %3d reject %3d release %3d, %2d acks unconfirmed; after the restart: %3d gone (accepted/rejected), %3d released, %3d held, %3d never delivered, %2d unconfirmed came back of %d; drain delivered %d; held records' delivery count after the restart above their last one %d, not above %d",
			c, target, float64(jitter.Microseconds())/1000, l.counts[kgoext.AckAccept], l.counts[kgoext.AckReject], l.counts[kgoext.AckRelease], l.failed,
			n[0], n[1], n[2], n[3], countBack(l, got), n[4], len(got), heldUp, heldSame)
		for i := range n {
			totals[i] += n[i]
		}
		if t.Failed() {
			t.Fatalf("cycle %d failed; last broker log lines:\n%s", c, sb.b.Logs())
		}
	}
	t.Logf("%d cycles of %d records in %v: %d records gone after confirmed accept/reject, %d released, %d held, %d never delivered, %d with unconfirmed acks at the kill",
		cycles, shareRecords, time.Since(testStart).Round(time.Millisecond), totals[0], totals[1], totals[2], totals[3], totals[4])
	if code, took, err := sb.b.Terminate(termTimeout); err != nil || code != 0 {
		t.Errorf("final SIGTERM: exit code %d after %v, err %v", code, took, err)
	}
	checkLog(t, -1, sb.logs)
}

// countBack counts the offsets with an unconfirmed ACCEPT/REJECT that were delivered again.
func countBack(l *shareLedger, got map[int64]int16) int {
	n := 0
	for off, st := range l.offs {
		if _, again := got[int64(off)]; again && st.durable < 0 && st.uncertain >= 0 && st.uncertain != kgoext.AckRelease {
			n++
		}
	}
	return n
}

// drainShare consumes group with a fresh kgo share consumer that ACCEPTs everything, until
// the share start offset reaches the end of the topic with lag 0; it returns the delivery
// count of each offset delivered, failing on a second delivery of an offset.
func drainShare(t *testing.T, addr string, adm *kadm.Client, group, topic string) map[int64]int16 {
	t.Helper()
	var (
		ackMu  sync.Mutex
		ackErr error
	)
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			ackMu.Lock()
			defer ackMu.Unlock()
			ackErr = cmp.Or(ackErr, rs.Error())
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cons.LeaveGroupContext(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Errorf("close drain consumer: %v", err)
		}
		cons.Close()
	}()
	got := map[int64]int16{}
	err = await.Until(40*time.Second, 0, func() error {
		pctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cons.PollFetches(pctx)
		cancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("drain %s: poll: %v", group, err)
			}
		})
		if fs.NumRecords() > 0 {
			fs.EachRecord(func(r *kgo.Record) {
				if prev, dup := got[r.Offset]; dup {
					t.Errorf("drain %s: offset %d delivered twice (counts %d and %d)", group, r.Offset, prev, r.DeliveryCount())
				}
				got[r.Offset] = int16(r.DeliveryCount())
				r.Ack(kgo.AckAccept)
			})
			if err := cons.FlushAcks(ctxTimeout(t, 10*time.Second)); err != nil {
				t.Fatalf("drain %s: flush acknowledgements: %v", group, err)
			}
			ackMu.Lock()
			defer ackMu.Unlock()
			if ackErr != nil {
				t.Fatalf("drain %s: acknowledge: %v", group, ackErr)
			}
			return errors.New("still delivering")
		}
		end, _ := shareOffsetsEnd(t, adm, topic)
		if st, lag := shareOffsets(t, adm, group, topic); st != end || lag != 0 {
			return fmt.Errorf("start offset %d lag %d (end %d), %d records drained", st, lag, end, len(got))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("drain %s after 40s: %v", group, err)
	}
	return got
}

// shareOffsetsEnd returns the high watermark of partition 0 of topic.
func shareOffsetsEnd(t *testing.T, adm *kadm.Client, topic string) (int64, error) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctxTimeout(t, 10*time.Second), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	e, _ := ends.Lookup(topic, 0)
	return e.Offset, nil
}
