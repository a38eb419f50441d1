package eos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/eos/eostest"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const ckptN = 40

// ckptEnv is a two-phase-commit broker with ckptN inputs, an output topic, and a group
// that reads from the start. The input topic has one partition: a crashed Checkpointer of
// these tests stays a group member (its heartbeats go on in the test process), and with
// one partition it cannot keep a partition from its successor.
func ckptEnv(t *testing.T) (*testbroker.Broker, []string) {
	t.Helper()
	b := eostest.Start(t, eostest.TwoPhaseCommit())
	eostest.CreateTopic(t, b.Addr, "in", 1)
	eostest.CreateTopic(t, b.Addr, "out", 1)
	eostest.ReadFromEarliest(t, b.Addr, "ckpt")
	inputs := eostest.Inputs(ckptN)
	eostest.Produce(t, b.Addr, "in", 1, inputs)
	return b, inputs
}

// moreInputs writes n more inputs after the given ones and returns them all.
func moreInputs(t *testing.T, b *testbroker.Broker, inputs []string, n int) []string {
	t.Helper()
	more := eostest.Inputs(len(inputs) + n)[len(inputs):]
	eostest.Produce(t, b.Addr, "in", 1, more)
	return append(inputs, more...)
}

func newCheckpointer(t *testing.T, addr string) *eos.Checkpointer {
	t.Helper()
	c, err := eos.NewCheckpointer(eos.CheckpointerConfig{Brokers: []string{addr}, Group: "ckpt", Topics: []string{"in"},
		TransactionalID: "ckpt-1", RetryBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// started is a new Checkpointer recovered with snapshot, closed with the test.
func started(t *testing.T, addr string, snapshot []byte) (*eos.Checkpointer, eos.Recovery) {
	t.Helper()
	c := newCheckpointer(t, addr)
	t.Cleanup(func() { c.Close(context.Background()) })
	rec, err := c.Recover(eostest.Context(t), snapshot)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return c, rec
}

// crash abandons c as a killed process would: nothing is closed, aborted or committed
// (its connections are closed only when the test ends).
func crash(t *testing.T, c *eos.Checkpointer) {
	t.Cleanup(func() { c.Close(context.Background()) })
}

// process polls until at least n more inputs were processed (written as "out-<input>",
// accepted); it returns the inputs with their delivery counts.
func process(t *testing.T, c *eos.Checkpointer, n int) map[string]int16 {
	t.Helper()
	ctx := eostest.Context(t)
	got := map[string]int16{}
	for len(got) < n {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		for _, in := range recs {
			if err := c.Produce(ctx, &kgo.Record{Topic: "out", Value: append([]byte("out-"), in.Value...)}); err != nil {
				t.Fatal(err)
			}
			if err := c.Acknowledge(in, false); err != nil {
				t.Fatal(err)
			}
			got[string(in.Value)] = kgoext.DeliveryCount(in)
		}
	}
	return got
}

// prepare runs PrepareCommit and SnapshotState.
func prepare(t *testing.T, c *eos.Checkpointer) []byte {
	t.Helper()
	if err := c.PrepareCommit(eostest.Context(t)); err != nil {
		t.Fatalf("PrepareCommit: %v", err)
	}
	snap, err := c.SnapshotState()
	if err != nil {
		t.Fatalf("SnapshotState: %v", err)
	}
	return snap
}

func complete(t *testing.T, c *eos.Checkpointer) {
	t.Helper()
	if err := c.NotifyCheckpointComplete(eostest.Context(t)); err != nil {
		t.Fatalf("NotifyCheckpointComplete: %v", err)
	}
}

// checkExactlyOnce checks the user-visible outcome: every input's output committed once,
// and every input acknowledged (the group holds nothing any more).
func checkExactlyOnce(t *testing.T, b *testbroker.Broker, inputs []string) {
	t.Helper()
	eostest.ExactlyOnce(t, eostest.Committed(t, b.Addr, "out", 1), outputsOf(inputs))
	eostest.WaitDrained(t, b.Addr, "ckpt", "in", 1)
}

// checkpoint runs PrepareCommit, SnapshotState and NotifyCheckpointComplete.
func checkpoint(t *testing.T, c *eos.Checkpointer) {
	t.Helper()
	prepare(t, c)
	complete(t, c)
}

func outputsOf(inputs []string) []string {
	out := make([]string, len(inputs))
	for i, v := range inputs {
		out[i] = "out-" + v
	}
	return out
}

// A normal run of several checkpoints commits every input's output exactly once and
// acknowledges every input.
func TestCheckpointLifecycle(t *testing.T) {
	b, inputs := ckptEnv(t)
	c, rec := started(t, b.Addr, nil)
	if rec.Found {
		t.Fatalf("first start found a transaction: %+v", rec)
	}
	for done, round := 0, 0; round < 3; round++ {
		if round > 0 {
			inputs = moreInputs(t, b, inputs, 10)
		}
		done += len(process(t, c, len(inputs)-done))
		checkpoint(t, c)
	}
	checkExactlyOnce(t, b, inputs)
}

// Crash after the snapshot was taken (and, as far as the framework knows, the checkpoint
// completed): recovery with that snapshot commits the prepared transaction.
func TestRecoverCommitsCompletedCheckpoint(t *testing.T) {
	b, inputs := ckptEnv(t)
	c, _ := started(t, b.Addr, nil)
	process(t, c, ckptN)
	snap := prepare(t, c)
	crash(t, c)

	_, rec := started(t, b.Addr, snap)
	if !rec.Found || !rec.Committed {
		t.Fatalf("Recover with the completed checkpoint's snapshot: %+v, want found and committed", rec)
	}
	checkExactlyOnce(t, b, inputs)
}

// Crash after a checkpoint was prepared but before it completed: recovery with the
// previous checkpoint's snapshot aborts it, its inputs are delivered again, and
// processing them again gives every output exactly once.
func TestRecoverAbortsUncompletedCheckpoint(t *testing.T) {
	b, inputs := ckptEnv(t)
	c, _ := started(t, b.Addr, nil)
	process(t, c, ckptN)
	completed := prepare(t, c)
	complete(t, c)
	inputs = moreInputs(t, b, inputs, 10)
	rest := process(t, c, 10)
	prepare(t, c) // never stored by the framework
	crash(t, c)

	c2, rec := started(t, b.Addr, completed)
	if !rec.Found || rec.Committed {
		t.Fatalf("Recover with the previous checkpoint's snapshot: %+v, want found and aborted", rec)
	}
	again := process(t, c2, len(rest))
	for v := range rest {
		if again[v] < 2 {
			t.Fatalf("input %s of the aborted checkpoint came back with delivery count %d", v, again[v])
		}
	}
	checkpoint(t, c2)
	checkExactlyOnce(t, b, inputs)
}

// A first start (no completed checkpoint) aborts whatever a crashed predecessor prepared.
func TestRecoverWithoutSnapshotAborts(t *testing.T) {
	b, inputs := ckptEnv(t)
	c, _ := started(t, b.Addr, nil)
	process(t, c, ckptN)
	prepare(t, c)
	crash(t, c)

	c2, rec := started(t, b.Addr, nil)
	if !rec.Found || rec.Committed {
		t.Fatalf("Recover(nil): %+v, want found and aborted", rec)
	}
	process(t, c2, ckptN)
	checkpoint(t, c2)
	checkExactlyOnce(t, b, inputs)
}

// A prepared transaction and its staged acknowledgements survive a broker restart, and
// the checkpoint completes afterwards.
func TestPreparedCheckpointSurvivesBrokerRestart(t *testing.T) {
	b, inputs := ckptEnv(t)
	c, _ := started(t, b.Addr, nil)
	process(t, c, ckptN)
	prepare(t, c)
	b.Restart()
	complete(t, c)
	checkExactlyOnce(t, b, inputs)
}

// A broker restart before PrepareCommit loses the inputs' acquisitions (ACQUIRED is not
// persisted): PrepareCommit fails with ErrStage, Abort discards the outputs, and the inputs
// are processed again in the next checkpoint.
func TestBrokerRestartBeforePrepare(t *testing.T) {
	b, inputs := ckptEnv(t)
	c, _ := started(t, b.Addr, nil)
	process(t, c, ckptN)
	b.Restart()
	ctx := eostest.Context(t)
	if err := c.PrepareCommit(ctx); !errors.Is(err, eos.ErrStage) {
		t.Fatalf("PrepareCommit after a broker restart: %v, want ErrStage", err)
	}
	if err := c.Abort(ctx); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	process(t, c, ckptN)
	checkpoint(t, c)
	checkExactlyOnce(t, b, inputs)
}

// Abort, before or after PrepareCommit, gives the checkpoint's inputs back at once, and
// discards the outputs, also those Flush had written to the log.
func TestCheckpointAbort(t *testing.T) {
	b, inputs := ckptEnv(t)
	eostest.SetGroupConfig(t, b.Addr, "ckpt", "share.record.lock.duration.ms", "60000")
	c, _ := started(t, b.Addr, nil)
	ctx := eostest.Context(t)
	process(t, c, 1)
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	ends, err := eostest.Admin(t, b.Addr).ListEndOffsets(ctx, "out")
	if end, _ := ends.Lookup("out", 0); err != nil || end.Offset == 0 {
		t.Fatalf("after Flush the outputs are not in the log: end offset %d, %v", end.Offset, err)
	}
	if err := c.Abort(ctx); err != nil {
		t.Fatalf("Abort (open): %v", err)
	}
	eostest.WaitNoneHeld(t, b, "ckpt")
	process(t, c, ckptN)
	prepare(t, c)
	if err := c.Abort(ctx); err != nil {
		t.Fatalf("Abort (prepared): %v", err)
	}
	eostest.WaitNoneHeld(t, b, "ckpt")
	process(t, c, ckptN)
	checkpoint(t, c)
	checkExactlyOnce(t, b, inputs)
}

// Steps out of order are refused with ErrPhase and change nothing; snapshots that are
// garbage or belong to another transactional id are refused with ErrSnapshot.
func TestCheckpointerRefusesMisuse(t *testing.T) {
	b, _ := ckptEnv(t)
	ctx := eostest.Context(t)
	c := newCheckpointer(t, b.Addr)
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Poll(ctx); !errors.Is(err, eos.ErrPhase) {
		t.Fatalf("Poll before Recover: %v", err)
	}
	if _, err := c.Recover(ctx, []byte("garbage")); !errors.Is(err, eos.ErrSnapshot) {
		t.Fatalf("Recover(garbage): %v", err)
	}
	other, _ := eos.Snapshot{TransactionalID: "someone-else", ProducerID: -1, Epoch: -1}.MarshalBinary()
	if _, err := c.Recover(ctx, other); !errors.Is(err, eos.ErrSnapshot) {
		t.Fatalf("Recover(another id's snapshot): %v", err)
	}
	if _, err := c.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx, nil); !errors.Is(err, eos.ErrPhase) {
		t.Fatalf("second Recover: %v", err)
	}
	if _, err := c.SnapshotState(); !errors.Is(err, eos.ErrPhase) {
		t.Fatalf("SnapshotState before PrepareCommit: %v", err)
	}
	if err := c.NotifyCheckpointComplete(ctx); !errors.Is(err, eos.ErrPhase) {
		t.Fatalf("NotifyCheckpointComplete before PrepareCommit: %v", err)
	}
	var recs []*kgo.Record
	for len(recs) == 0 {
		var err error
		if recs, err = c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PrepareCommit(ctx); !errors.Is(err, eos.ErrPhase) {
		t.Fatalf("PrepareCommit with unacknowledged inputs: %v", err)
	}
	for _, r := range recs {
		if err := c.Acknowledge(r, false); err != nil {
			t.Fatal(err)
		}
	}
	prepare(t, c)
	if _, err := c.Poll(ctx); !errors.Is(err, eos.ErrPhase) {
		t.Fatalf("Poll while prepared: %v", err)
	}
	if err := c.Produce(ctx, &kgo.Record{Topic: "out"}); !errors.Is(err, eos.ErrPhase) {
		t.Fatalf("Produce while prepared: %v", err)
	}
	complete(t, c)
	eostest.WaitNoneHeld(t, b, "ckpt")
}

// NewCheckpointer refuses incomplete configurations with ErrInvalidConfig, naming the field.
func TestNewCheckpointerValidates(t *testing.T) {
	ok := eos.CheckpointerConfig{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"in"}, TransactionalID: "t"}
	for name, mutate := range map[string]func(*eos.CheckpointerConfig){
		"Brokers":         func(c *eos.CheckpointerConfig) { c.Brokers = nil },
		"Group":           func(c *eos.CheckpointerConfig) { c.Group = "" },
		"Topics[0]":       func(c *eos.CheckpointerConfig) { c.Topics = []string{""} },
		"TransactionalID": func(c *eos.CheckpointerConfig) { c.TransactionalID = "" },
		"MaxPollRecords":  func(c *eos.CheckpointerConfig) { c.MaxPollRecords = -1 },
	} {
		cfg := ok
		mutate(&cfg)
		if _, err := eos.NewCheckpointer(cfg); !errors.Is(err, eos.ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want ErrInvalidConfig naming it", name, err)
		}
	}
}

// ClientOpts reach both clients of a Checkpointer: a hook given there sees ShareFetch (the
// share consumer's client) and InitProducerId and EndTxn (the two-phase-commit producer's).
func TestCheckpointerClientOptsReachEveryClient(t *testing.T) {
	b, inputs := ckptEnv(t)
	hook := &keysWritten{keys: map[int16]bool{}}
	c, err := eos.NewCheckpointer(eos.CheckpointerConfig{Brokers: []string{b.Addr}, Group: "ckpt", Topics: []string{"in"},
		TransactionalID: "ckpt-1", ClientOpts: []kgo.Opt{kgo.WithHooks(hook)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Recover(eostest.Context(t), nil); err != nil {
		t.Fatal(err)
	}
	process(t, c, ckptN)
	checkpoint(t, c)
	if !hook.wrote(kmsg.ShareFetch, kmsg.ShareGroupHeartbeat, kmsg.InitProducerID, kmsg.Produce, kmsg.EndTxn) {
		t.Fatalf("the hook from ClientOpts saw only keys %v", hook.keys)
	}
	checkExactlyOnce(t, b, inputs)
}
