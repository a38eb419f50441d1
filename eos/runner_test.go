package eos_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/eos/eostest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// flaky is a ProcessFunc for tests: it fails the first time it sees each input in
// failOnce, writes an oversized output (refused by the broker) for each input in tooLarge
// until a transaction failed for a produce error, rejects poison, and otherwise writes
// "out-<input>" to out.
type flaky struct {
	out           string
	failOnce      map[string]bool
	tooLarge      map[string]bool
	poison        map[string]bool
	produceFailed atomic.Bool
	mu            sync.Mutex
	seen          map[string]int
}

func (f *flaky) process(_ context.Context, in *kgo.Record) (eos.Result, error) {
	v := string(in.Value)
	f.mu.Lock()
	f.seen[v]++
	first := f.seen[v] == 1
	f.mu.Unlock()
	switch {
	case f.poison[v]:
		return eos.Result{Reject: true}, nil
	case first && f.failOnce[v]:
		return eos.Result{}, errors.New("transient failure of " + v)
	case f.tooLarge[v] && !f.produceFailed.Load():
		return eos.Result{Outputs: []*kgo.Record{{Topic: f.out, Value: make([]byte, 64<<10)}}}, nil
	}
	return eos.Result{Outputs: []*kgo.Record{{Topic: f.out, Key: in.Value, Value: []byte("out-" + v)}}}, nil
}

// tally counts what a runner reports.
type tally struct {
	inputs, rejected atomic.Int64
	mu               sync.Mutex
	aborts           []*eos.AbortError
}

func (t *tally) onCommit(c eos.Commit) {
	t.inputs.Add(int64(c.Inputs))
	t.rejected.Add(int64(c.Rejected))
}

func (t *tally) onAbort(e *eos.AbortError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.aborts = append(t.aborts, e)
}

func (t *tally) abortsMatching(target error) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.aborts {
		if errors.Is(e, target) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eostest.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three workers, inputs that fail once (the ProcessFunc errs, or the output is refused by
// the broker), one poison input: every other input's output is committed exactly once,
// the poison has none and is never delivered again, and the group ends with nothing
// in flight. Record locks last a minute, so inputs of aborted transactions can only have
// come back in time because the runner gave them back, not because their locks expired.
func TestRunnerExactlyOnceWithFailuresAndPoison(t *testing.T) {
	b := eostest.Start(t)
	const n, parts = 300, 3
	eostest.CreateTopic(t, b.Addr, "in", parts)
	eostest.CreateTopicWithConfig(t, b.Addr, "out", parts, map[string]string{"max.message.bytes": "16384"})
	eostest.ReadFromEarliest(t, b.Addr, "workers")
	eostest.SetGroupConfig(t, b.Addr, "workers", "share.record.lock.duration.ms", "60000")
	inputs := eostest.Inputs(n)
	eostest.Produce(t, b.Addr, "in", parts, inputs)

	f := &flaky{out: "out", seen: map[string]int{},
		failOnce: map[string]bool{inputs[5]: true, inputs[77]: true, inputs[150]: true, inputs[299]: true},
		tooLarge: map[string]bool{inputs[123]: true},
		poison:   map[string]bool{inputs[42]: true},
	}
	var got tally
	r, err := eos.NewRunner(eos.RunnerConfig{
		Brokers: []string{b.Addr}, Group: "workers", Topics: []string{"in"}, TransactionalIDPrefix: "workers",
		Process: f.process, Workers: 3, CommitRecords: 40, CommitInterval: 50 * time.Millisecond,
		RetryBackoff: 20 * time.Millisecond, OnCommit: got.onCommit,
		OnAbort: func(e *eos.AbortError) {
			if errors.Is(e, eos.ErrProduce) {
				f.produceFailed.Store(true)
			}
			got.onAbort(e)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(eostest.Context(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitFor(t, "every input committed", func() bool { return got.inputs.Load() >= n })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	if in := got.inputs.Load(); in != n {
		t.Fatalf("commits acknowledged %d inputs, want %d", in, n)
	}
	if rej := got.rejected.Load(); rej != 1 {
		t.Fatalf("%d inputs rejected, want 1 (the poison)", rej)
	}
	if p := got.abortsMatching(eos.ErrProcess); p != len(f.failOnce) {
		t.Fatalf("%d aborts for process errors, want %d", p, len(f.failOnce))
	}
	if p := got.abortsMatching(eos.ErrProduce); p < 1 {
		t.Fatalf("no abort for a produce error")
	}
	var want []string
	for _, v := range inputs {
		if !f.poison[v] {
			want = append(want, "out-"+v)
		}
	}
	eostest.ExactlyOnce(t, eostest.Committed(t, b.Addr, "out", parts), want)
	// Drained: the poison is ARCHIVED, not waiting to be delivered again.
	eostest.WaitDrained(t, b.Addr, "workers", "in", parts)
}

// NewRunner refuses incomplete or contradictory configurations with ErrInvalidConfig and
// fills in defaults.
func TestNewRunnerValidates(t *testing.T) {
	ok := eos.RunnerConfig{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"in"}, TransactionalIDPrefix: "p",
		Process: func(context.Context, *kgo.Record) (eos.Result, error) { return eos.Result{}, nil }}
	for name, mutate := range map[string]func(*eos.RunnerConfig){
		"Brokers":               func(c *eos.RunnerConfig) { c.Brokers = nil },
		"Group":                 func(c *eos.RunnerConfig) { c.Group = "" },
		"Topics":                func(c *eos.RunnerConfig) { c.Topics = nil },
		"Topics[0]":             func(c *eos.RunnerConfig) { c.Topics = []string{""} },
		"TransactionalIDPrefix": func(c *eos.RunnerConfig) { c.TransactionalIDPrefix = "" },
		"Process":               func(c *eos.RunnerConfig) { c.Process = nil },
		"Workers":               func(c *eos.RunnerConfig) { c.Workers = -1 },
		"CommitRecords":         func(c *eos.RunnerConfig) { c.CommitRecords = -5 },
		"negative":              func(c *eos.RunnerConfig) { c.CommitInterval = -time.Second },
		"TransactionTimeout":    func(c *eos.RunnerConfig) { c.CommitInterval, c.TransactionTimeout = time.Minute, time.Second },
	} {
		cfg := ok
		mutate(&cfg)
		_, err := eos.NewRunner(cfg)
		if !errors.Is(err, eos.ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want ErrInvalidConfig naming it", name, err)
		}
	}
	r, err := eos.NewRunner(ok)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Config()
	if c.Workers != 1 || c.CommitRecords != 500 || c.CommitInterval != 100*time.Millisecond || c.MaxPollRecords != 500 {
		t.Fatalf("defaults: %+v", c)
	}
}

// Cancelling the context stops polling, and what was processed is committed on the way
// out: exactly the processed inputs have their outputs committed and are acknowledged,
// the others are available again at once (not after their one-minute lock), and Run
// returns nil.
func TestRunnerShutdownCommitsWhatWasProcessed(t *testing.T) {
	b := eostest.Start(t)
	eostest.CreateTopic(t, b.Addr, "in", 1)
	eostest.CreateTopic(t, b.Addr, "out", 1)
	eostest.ReadFromEarliest(t, b.Addr, "stoppers")
	eostest.SetGroupConfig(t, b.Addr, "stoppers", "share.record.lock.duration.ms", "60000")
	inputs := eostest.Inputs(100)
	for i := 0; i < len(inputs); i += 10 {
		eostest.Produce(t, b.Addr, "in", 1, inputs[i:i+10]) // a batch each: polls return 10
	}

	ctx, stop := context.WithCancel(eostest.Context(t))
	var mu sync.Mutex
	var processed []string
	var got tally
	r, err := eos.NewRunner(eos.RunnerConfig{
		Brokers: []string{b.Addr}, Group: "stoppers", Topics: []string{"in"}, TransactionalIDPrefix: "stoppers",
		// Nothing is due before the shutdown: its commit is the only one.
		CommitRecords: 1000, CommitInterval: 20 * time.Second, MaxPollRecords: 10,
		Process: func(_ context.Context, in *kgo.Record) (eos.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			if processed = append(processed, string(in.Value)); len(processed) == 25 {
				stop() // mid-poll: the rest of this poll is still processed
			}
			return eos.Result{Outputs: []*kgo.Record{{Topic: "out", Value: []byte("out-" + string(in.Value))}}}, nil
		},
		OnCommit: got.onCommit, OnAbort: got.onAbort,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(got.aborts) > 0 {
		t.Fatalf("aborts: %v", got.aborts)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := got.inputs.Load(); n != int64(len(processed)) || n < 25 {
		t.Fatalf("the shutdown commit acknowledged %d inputs; %d were processed", n, len(processed))
	}
	want := make([]string, len(processed))
	for i, v := range processed {
		want[i] = "out-" + v
	}
	eostest.ExactlyOnce(t, eostest.Committed(t, b.Addr, "out", 1), want)
	eostest.WaitNoneHeld(t, b, "stoppers")
	// One partition, delivered in order: the processed inputs are the first offsets, all
	// acknowledged; the others are still to be delivered.
	adm := eostest.Admin(t, b.Addr)
	waitFor(t, "the processed inputs acknowledged, the others not", func() bool {
		so, err := eostest.ShareOffset(eostest.Context(t), adm, "stoppers", "in", 0)
		return err == nil && so.StartOffset == int64(len(processed)) && so.Lag == int64(len(inputs)-len(processed))
	})
}

// A worker whose producer is fenced mid-transaction (another producer took its
// transactional id: kgo answers PRODUCER_FENCED or INVALID_PRODUCER_EPOCH) reports an
// abort matching ErrFenced, replaces its producer, and goes on: every input still ends up
// with exactly one committed output, and the runner does not stop.
func TestRunnerReplacesFencedProducer(t *testing.T) {
	b := eostest.Start(t)
	eostest.CreateTopic(t, b.Addr, "in", 1)
	eostest.CreateTopic(t, b.Addr, "out", 1)
	eostest.ReadFromEarliest(t, b.Addr, "fenced")
	inputs := eostest.Inputs(60)
	eostest.Produce(t, b.Addr, "in", 1, inputs)

	var fenced atomic.Bool
	var got tally
	r, err := eos.NewRunner(eos.RunnerConfig{
		Brokers: []string{b.Addr}, Group: "fenced", Topics: []string{"in"}, TransactionalIDPrefix: "fenced",
		CommitRecords: 10, MaxPollRecords: 5, RetryBackoff: 20 * time.Millisecond,
		Process: func(ctx context.Context, in *kgo.Record) (eos.Result, error) {
			if string(in.Value) == inputs[23] && !fenced.Swap(true) {
				// A second instance with worker 0's transactional id: its InitProducerId
				// bumps the epoch and aborts the worker's open transaction.
				other := eostest.Client(t, b.Addr, kgo.TransactionalID("fenced-0"))
				if _, _, err := other.ProducerID(ctx); err != nil {
					t.Errorf("fencing producer: %v", err)
				}
				other.Close()
			}
			return eos.Result{Outputs: []*kgo.Record{{Topic: "out", Value: []byte("out-" + string(in.Value))}}}, nil
		},
		OnCommit: got.onCommit, OnAbort: got.onAbort,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(eostest.Context(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitFor(t, "every input committed", func() bool { return got.inputs.Load() >= int64(len(inputs)) })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := got.abortsMatching(eos.ErrFenced); n < 1 {
		t.Fatalf("no abort matching ErrFenced; aborts: %v", got.aborts)
	}
	want := make([]string, len(inputs))
	for i, v := range inputs {
		want[i] = "out-" + v
	}
	eostest.ExactlyOnce(t, eostest.Committed(t, b.Addr, "out", 1), want)
	eostest.WaitDrained(t, b.Addr, "fenced", "in", 1)
}

// keysWritten is a kgo hook that records the API key of every request its clients write.
type keysWritten struct {
	mu   sync.Mutex
	keys map[int16]bool
}

func (h *keysWritten) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		h.mu.Lock()
		h.keys[key] = true
		h.mu.Unlock()
	}
}

func (h *keysWritten) wrote(keys ...kmsg.Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if !h.keys[k.Int16()] {
			return false
		}
	}
	return true
}

// ClientOpts reach both clients of a worker: a hook given there sees ShareFetch (only the
// share consumer's client sends it) and InitProducerId and EndTxn (only the producer's).
func TestRunnerClientOptsReachEveryClient(t *testing.T) {
	b := eostest.Start(t)
	eostest.CreateTopic(t, b.Addr, "in", 1)
	eostest.CreateTopic(t, b.Addr, "out", 1)
	eostest.ReadFromEarliest(t, b.Addr, "opts")
	eostest.Produce(t, b.Addr, "in", 1, eostest.Inputs(5))
	hook := &keysWritten{keys: map[int16]bool{}}
	var got tally
	r, err := eos.NewRunner(eos.RunnerConfig{
		Brokers: []string{b.Addr}, Group: "opts", Topics: []string{"in"}, TransactionalIDPrefix: "opts",
		ClientOpts: []kgo.Opt{kgo.WithHooks(hook)},
		Process: func(_ context.Context, in *kgo.Record) (eos.Result, error) {
			return eos.Result{Outputs: []*kgo.Record{{Topic: "out", Value: in.Value}}}, nil
		},
		OnCommit: got.onCommit,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(eostest.Context(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitFor(t, "the inputs committed", func() bool { return got.inputs.Load() >= 5 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !hook.wrote(kmsg.ShareFetch, kmsg.ShareGroupHeartbeat, kmsg.InitProducerID, kmsg.Produce, kmsg.EndTxn) {
		t.Fatalf("the hook from ClientOpts saw only keys %v", hook.keys)
	}
}
