package compat

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

	"github.com/exactq/exactq/internal/testbroker"
)

// shareStep bounds every wait of the share suites for a condition.
const shareStep = 20 * time.Second

// setGroupConfigs sets share-group configs with IncrementalAlterConfigs on the GROUP resource.
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	if err := testbroker.SetGroupConfigs(ctxFor(t, shareStep), cl, group, kv...); err != nil {
		t.Fatalf("IncrementalAlterConfigs GROUP %s %v: %v", group, kv, err)
	}
}

// shareCl is a kgo share consumer whose acknowledgement results are kept: every
// ShareAckCallback error is remembered so a check can require that its acks succeeded.
type shareCl struct {
	*kgo.Client
	mu      sync.Mutex
	ackErrs []error
}

func newShareCl(t *testing.T, addr, group, topic, name string, extra ...kgo.Opt) *shareCl {
	t.Helper()
	s := &shareCl{}
	opts := []kgo.Opt{kgo.ClientID("exactq-" + name), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ShareMaxRecords(50),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					s.ackErrs = append(s.ackErrs, fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err))
				}
			}
		})}
	s.Client = newClient(t, addr, append(append(opts, extra...), kgoLogOpts(name)...)...)
	return s
}

// flush sends every pending ack and fails the test if the broker refused any so far.
func (s *shareCl) flush(t *testing.T, what string) {
	t.Helper()
	if err := s.FlushAcks(ctxFor(t, shareStep)); err != nil {
		t.Fatalf("%s: FlushAcks: %v", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ackErrs) > 0 {
		t.Fatalf("%s: the broker refused acknowledgements: %v", what, s.ackErrs)
	}
}

// pollSome polls until at least one record arrives and returns the records.
func (s *shareCl) pollSome(t *testing.T, what string) []*kgo.Record {
	t.Helper()
	ctx := ctxFor(t, shareStep)
	for {
		fs := s.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			t.Fatalf("%s: no record within %v", what, shareStep)
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: fetch error on %s[%d]: %v", what, topic, p, err)
			}
		})
		if recs := fs.Records(); len(recs) > 0 {
			return recs
		}
	}
}

// drainToSentinel polls, ACCEPTing everything, until the record with value sentinel arrives;
// a record whose value is in never fails the test.
func (s *shareCl) drainToSentinel(t *testing.T, sentinel string, never []string, what string) {
	t.Helper()
	for {
		done := false
		for _, r := range s.pollSome(t, what+": waiting for sentinel "+sentinel) {
			if slices.Contains(never, string(r.Value)) {
				t.Fatalf("%s: %s delivered again (delivery count %d)", what, r.Value, r.DeliveryCount())
			}
			r.Ack(kgo.AckAccept)
			done = done || string(r.Value) == sentinel
		}
		if done {
			s.flush(t, what)
			return
		}
	}
}

func produceValues(t *testing.T, cl *kgo.Client, topic string, values ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}
	}
	if err := cl.ProduceSync(ctxFor(t, shareStep), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// expectShareOffsets checks kadm DescribeShareGroupOffsets for partition 0 of topic.
func expectShareOffsets(t *testing.T, adm *kadm.Client, group, topic string, start, lag int64) {
	t.Helper()
	offs, err := adm.DescribeShareGroupOffsets(ctxFor(t, shareStep), group)
	if err != nil {
		t.Fatalf("DescribeShareGroupOffsets %s: %v", group, err)
	}
	g := offs[group]
	o, ok := g.Offsets.Lookup(topic, 0)
	if g.Err != nil || !ok || o.Err != nil || o.StartOffset != start || o.Lag != lag {
		t.Fatalf("DescribeShareGroupOffsets %s %s[0]: %+v (present %v, group error %v), want start offset %d and lag %d", group, topic, o, ok, g.Err, start, lag)
	}
}

// TestKgoShareConsumer is acceptance test 2 of issue 4: franz-go's share consumer
// (kgo.ShareGroup, Record.Ack, FlushAcks, Record.DeliveryCount) and kadm's share-group admin
// against exactq, the same checks as TestJavaShareConsumer (plus record_limit with
// ShareMaxRecordsStrict). Each subtest has its own
// single-partition topic and share group.
func TestKgoShareConsumer(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(shareBrokerConfig))
	cl := newClient(t, tb.Addr, kgo.DefaultProduceTopic("unused"), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	setup := func(t *testing.T, name string, kv ...string) (topic, group string) {
		topic, group = "ksq-"+name, "ksq-"+name
		createTopic(t, adm, topic, 1, nil)
		setGroupConfigs(t, cl, group, append([]string{"share.auto.offset.reset", "earliest"}, kv...)...)
		return topic, group
	}

	// Three consumers on one partition all make progress; every record exactly once; kadm
	// describes the members, their assignment and the offsets.
	t.Run("multi", func(t *testing.T) {
		topic, group := setup(t, "multi")
		const n, consumers = 3000, 3
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var (
			mu     sync.Mutex
			seen   = map[string]int{}
			per    [consumers]int
			dups   []string
			all    = make(chan struct{})
			closed bool
			wg     sync.WaitGroup
		)
		cls := make([]*shareCl, consumers)
		for i := range cls {
			cls[i] = newShareCl(t, tb.Addr, group, topic, fmt.Sprintf("ksq-multi-%d", i))
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				for ctx.Err() == nil {
					fs := cls[i].PollRecords(ctx, 50)
					fs.EachRecord(func(r *kgo.Record) {
						r.Ack(kgo.AckAccept)
						mu.Lock()
						defer mu.Unlock()
						if seen[string(r.Value)]++; seen[string(r.Value)] > 1 {
							dups = append(dups, fmt.Sprintf("%s (delivery count %d)", r.Value, r.DeliveryCount()))
						}
						per[i]++
						if len(seen) == n && !closed {
							closed = true
							close(all)
						}
					})
				}
			}(i)
		}
		// All three are members with the partition before anything is produced.
		eventually(t, shareStep, "3 members assigned "+topic+"[0]", func() error {
			d, err := adm.DescribeShareGroups(ctxFor(t, shareStep), group)
			if err != nil {
				return err
			}
			g := d[group]
			if g.Err != nil || len(g.Members) != consumers {
				return fmt.Errorf("group %+v", g)
			}
			for _, m := range g.Members {
				if ps := m.Assignment.Sorted(); len(ps) != 1 || !slices.Equal(ps[0].Partitions, []int32{0}) {
					return fmt.Errorf("member %s assignment %v", m.MemberID, m.Assignment)
				}
			}
			return nil
		})
		// Batches of 10: a fetch acquires whole batches, so many small ones give every
		// consumer many chances to acquire (with 30 batches of 100, a consumer slowed by a
		// loaded machine could miss them all).
		for i := 0; i < n; i += 10 {
			vals := make([]string, 10)
			for j := range vals {
				vals[j] = fmt.Sprintf("m-%05d", i+j)
			}
			produceValues(t, cl, topic, vals...)
		}
		select {
		case <-all:
		case <-time.After(60 * time.Second):
			mu.Lock()
			t.Fatalf("consumers got %d of %d records", len(seen), n)
		}
		cancel()
		wg.Wait()
		if len(dups) > 0 {
			t.Fatalf("%d duplicate deliveries with every record ACCEPTed: %v", len(dups), dups[:min(len(dups), 10)])
		}
		t.Logf("per-consumer counts %v", per)
		for i, c := range per {
			if c == 0 {
				t.Fatalf("consumer %d got no record (counts %v)", i, per)
			}
		}
		for i, c := range cls {
			c.flush(t, fmt.Sprintf("consumer %d", i))
		}
		d, err := adm.DescribeShareGroups(ctxFor(t, shareStep), group)
		if err != nil {
			t.Fatal(err)
		}
		g := d[group]
		if g.Err != nil || g.GroupState != "Stable" || len(g.Members) != consumers {
			t.Fatalf("DescribeShareGroups: %+v, want Stable with %d members", g, consumers)
		}
		for _, m := range g.Members {
			if ps := m.Assignment.Sorted(); len(ps) != 1 || ps[0].Topic != topic || !slices.Equal(ps[0].Partitions, []int32{0}) {
				t.Fatalf("member %s (%s) assignment %v, want %s[0]", m.MemberID, m.ClientID, ps, topic)
			}
		}
		expectShareOffsets(t, adm, group, topic, n, 0)
	})

	// AckRelease redelivers with delivery count 2; the released record is lag meanwhile.
	t.Run("release", func(t *testing.T) {
		topic, group := setup(t, "release")
		produceValues(t, cl, topic, "r0", "r1", "r2", "r3", "r4")
		c := newShareCl(t, tb.Addr, group, topic, "ksq-release")
		got := 0
		for got < 5 {
			for _, r := range c.pollSome(t, "first delivery") {
				if r.DeliveryCount() != 1 {
					t.Fatalf("first delivery of %s has delivery count %d, want 1", r.Value, r.DeliveryCount())
				}
				if string(r.Value) == "r0" {
					r.Ack(kgo.AckRelease)
				} else {
					r.Ack(kgo.AckAccept)
				}
				got++
			}
		}
		c.flush(t, "release")
		expectShareOffsets(t, adm, group, topic, 0, 1)
		again := c.pollSome(t, "redelivery of r0")
		if len(again) != 1 || string(again[0].Value) != "r0" || again[0].Offset != 0 || again[0].DeliveryCount() != 2 {
			t.Fatalf("redelivered %d records, first %s@%d delivery count %d; want only r0@0 with delivery count 2",
				len(again), again[0].Value, again[0].Offset, again[0].DeliveryCount())
		}
		again[0].Ack(kgo.AckAccept)
		c.flush(t, "accept r0")
		expectShareOffsets(t, adm, group, topic, 5, 0)
	})

	// AckReject archives: the record never comes back.
	t.Run("reject", func(t *testing.T) {
		topic, group := setup(t, "reject")
		produceValues(t, cl, topic, "x0", "x1", "x2")
		c := newShareCl(t, tb.Addr, group, topic, "ksq-reject")
		for got := 0; got < 3; {
			for _, r := range c.pollSome(t, "first delivery") {
				if string(r.Value) == "x1" {
					r.Ack(kgo.AckReject)
				} else {
					r.Ack(kgo.AckAccept)
				}
				got++
			}
		}
		c.flush(t, "reject")
		expectShareOffsets(t, adm, group, topic, 3, 0)
		produceValues(t, cl, topic, "x-sentinel")
		c.drainToSentinel(t, "x-sentinel", []string{"x0", "x1", "x2"}, "reject")
		expectShareOffsets(t, adm, group, topic, 4, 0)
	})

	// A record left unacknowledged goes to another consumer once its lock expires.
	t.Run("lock", func(t *testing.T) {
		topic, group := setup(t, "lock", "share.record.lock.duration.ms", fmt.Sprint(shareLockMs))
		produceValues(t, cl, topic, "l0")
		a := newShareCl(t, tb.Addr, group, topic, "ksq-lock-a")
		recs := a.pollSome(t, "first delivery")
		acquired := time.Now()
		// a holds l0 unacknowledged and stops fetching (a paused partition leaves a's share
		// session; its locks stay); b gets l0 when the lock expires.
		a.PauseFetchTopics(topic)
		if len(recs) != 1 || string(recs[0].Value) != "l0" || recs[0].DeliveryCount() != 1 {
			t.Fatalf("first delivery: %d records, first %s with delivery count %d", len(recs), recs[0].Value, recs[0].DeliveryCount())
		}
		if dl := time.Until(recs[0].AcquisitionDeadline()); dl <= 0 || dl > shareLockMs*time.Millisecond {
			t.Fatalf("acquisition deadline %v from now, want within the %d ms lock", dl, shareLockMs)
		}
		b := newShareCl(t, tb.Addr, group, topic, "ksq-lock-b")
		again := b.pollSome(t, "redelivery after lock expiry")
		after := time.Since(acquired)
		if len(again) != 1 || string(again[0].Value) != "l0" || again[0].DeliveryCount() != 2 {
			t.Fatalf("redelivered %d records, first %s with delivery count %d; want only l0 with delivery count 2", len(again), again[0].Value, again[0].DeliveryCount())
		}
		if after < shareLockMs*time.Millisecond/2 {
			t.Fatalf("l0 redelivered %v after acquisition, before its %d ms lock could expire", after, shareLockMs)
		}
		t.Logf("redelivered %v after acquisition (lock %d ms)", after.Round(time.Millisecond), shareLockMs)
		again[0].Ack(kgo.AckAccept)
		b.flush(t, "accept l0")
		expectShareOffsets(t, adm, group, topic, 1, 0)
	})

	// With share.delivery.count.limit=2 a record released twice is archived.
	t.Run("limit", func(t *testing.T) {
		topic, group := setup(t, "limit", "share.delivery.count.limit", "2")
		produceValues(t, cl, topic, "d0")
		c := newShareCl(t, tb.Addr, group, topic, "ksq-limit")
		for want := int32(1); want <= 2; want++ {
			recs := c.pollSome(t, fmt.Sprintf("delivery %d", want))
			if len(recs) != 1 || string(recs[0].Value) != "d0" || recs[0].DeliveryCount() != want {
				t.Fatalf("delivery %d: %d records, first %s with delivery count %d", want, len(recs), recs[0].Value, recs[0].DeliveryCount())
			}
			recs[0].Ack(kgo.AckRelease)
			c.flush(t, fmt.Sprintf("release #%d", want))
		}
		expectShareOffsets(t, adm, group, topic, 1, 0) // archived at the limit
		produceValues(t, cl, topic, "d-sentinel")
		c.drainToSentinel(t, "d-sentinel", []string{"d0"}, "limit")
	})

	// AckRenew keeps a slow record locked past several lock durations.
	t.Run("renew", func(t *testing.T) {
		topic, group := setup(t, "renew", "share.record.lock.duration.ms", fmt.Sprint(shareLockMs))
		produceValues(t, cl, topic, "w0")
		a := newShareCl(t, tb.Addr, group, topic, "ksq-renew-a")
		recs := a.pollSome(t, "first delivery")
		t0 := time.Now()
		// a stops fetching: were a renew lost, the expired w0 could only go to b.
		a.PauseFetchTopics(topic)
		if len(recs) != 1 || string(recs[0].Value) != "w0" {
			t.Fatalf("first delivery: %d records, first %s", len(recs), recs[0].Value)
		}
		w0 := recs[0]
		b := newShareCl(t, tb.Addr, group, topic, "ksq-renew-b")
		renews := 0
		// a renews w0 about three times per lock duration while b polls the same partition;
		// b's polls are the pacing.
		for time.Since(t0) < 3*shareLockMs*time.Millisecond {
			w0.Ack(kgo.AckRenew)
			renews++
			a.flush(t, fmt.Sprintf("RENEW #%d", renews))
			ctx, cancel := context.WithTimeout(context.Background(), shareLockMs*time.Millisecond/4)
			fs := b.PollRecords(ctx, 10)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				t.Fatalf("%s given to another consumer %v after acquisition despite %d renews (delivery count %d)", r.Value, time.Since(t0), renews, r.DeliveryCount())
			})
		}
		w0.Ack(kgo.AckAccept)
		a.flush(t, fmt.Sprintf("final ACCEPT after %d renews", renews))
		t.Logf("held w0 %v with %d renews (lock %d ms)", time.Since(t0).Round(time.Millisecond), renews, shareLockMs)
		produceValues(t, cl, topic, "w-sentinel")
		b.drainToSentinel(t, "w-sentinel", []string{"w0"}, "renew")
		expectShareOffsets(t, adm, group, topic, 2, 0)
	})
	// kgo.ShareMaxRecordsStrict (ShareAcquireMode record_limit, ShareFetch v2): no ShareFetch
	// response hands over more than ShareMaxRecords, even inside one produced batch.
	t.Run("record_limit", func(t *testing.T) {
		topic, group := setup(t, "rlimit")
		const n, max = 100, 7
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprintf("q-%03d", i)
		}
		produceValues(t, cl, topic, vals...) // one batch
		c := newShareCl(t, tb.Addr, group, topic, "ksq-rlimit", kgo.ShareMaxRecords(max), kgo.ShareMaxRecordsStrict())
		seen := map[string]bool{}
		ctx := ctxFor(t, shareStep)
		polls := 0
		for len(seen) < n {
			fs := c.PollFetches(ctx) // everything buffered: one ShareFetch response
			if ctx.Err() != nil {
				t.Fatalf("%d of %d records within %v", len(seen), n, shareStep)
			}
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			polls++
			if len(recs) > max {
				t.Fatalf("one fetch handed over %d records with ShareMaxRecords(%d) strict", len(recs), max)
			}
			for _, r := range recs {
				if seen[string(r.Value)] {
					t.Fatalf("%s delivered twice", r.Value)
				}
				seen[string(r.Value)] = true
				r.Ack(kgo.AckAccept)
			}
		}
		c.flush(t, "record_limit")
		t.Logf("%d records in %d fetches of at most %d", n, polls, max)
		expectShareOffsets(t, adm, group, topic, n, 0)
	})
}
