package sharepipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
)

// round is one transaction of the pipeline as its hooks saw it.
type round struct {
	inputs    []*kgo.Record
	committed bool
}

// TestPipelineExactlyOnce runs the example against a broker in two phases. In the first
// every input has an output; in the second every input is rejected, so each transaction
// is consume-only. In both, the first transaction aborts (BeforeCommit fails it). It
// checks: each input is committed exactly once (never delivered after its commit), the
// inputs of the aborted transaction come back with delivery count 2, read_committed shows
// each output once and nothing of the aborted or consume-only transactions, and the group
// is left with nothing to deliver (every consume-only commit resolved its staged
// acknowledgements, none waits for the transaction timeout).
func TestPipelineExactlyOnce(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "200",
		"group.share.assignment.interval.ms": "0",
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	setGroupEarliest(t, cl, "workers")

	rounds := make(chan round, 1000)
	var abortNext atomic.Bool
	errAbort := errors.New("BeforeCommit aborts this transaction")
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(rctx, Config{
			Brokers: []string{b.Addr}, Group: "workers", Input: "in", Output: "out", TransactionalID: "worker-1",
			Transform: func(r *kgo.Record) ([]byte, bool) {
				return bytes.ToUpper(r.Value), !bytes.HasPrefix(r.Value, []byte("reject"))
			},
			BeforeCommit: func([]*kgo.Record) error {
				if abortNext.CompareAndSwap(true, false) {
					return errAbort
				}
				return nil
			},
			OnCommit: func(inputs []*kgo.Record) { rounds <- round{inputs, true} },
			OnAbort: func(inputs []*kgo.Record, cause error) {
				if !errors.Is(cause, errAbort) {
					t.Errorf("transaction aborted by %v", cause)
				}
				rounds <- round{inputs, false}
			},
			ShareOpts: []kgoext.ShareOpt{kgoext.ShareMaxWait(100 * time.Millisecond)},
		})
	}()

	const n = 10
	for _, prefix := range []string{"keep", "reject"} {
		abortNext.Store(true)
		want := map[string]bool{}
		for i := range n {
			v := fmt.Sprintf("%s-%d", prefix, i)
			want[v] = true
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		checkRounds(t, ctx, rounds, want)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("pipeline: %v", err)
	}

	// Every output once, nothing of the aborted transactions
	// or of the rejected inputs: the sentinel, produced after the pipeline stopped, ends
	// what read_committed can return.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []string
	reader, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"out": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for len(got) == 0 || got[len(got)-1] != "end" {
		fs := reader.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read_committed: %v (read %v)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("KEEP-%d", i))
	}
	got = got[:len(got)-1]
	slices.Sort(got)
	slices.Sort(want)
	if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
		t.Fatalf("read_committed output:\n%s\nwant\n%s", g, w)
	}

	// Nothing left to deliver: every input ACKNOWLEDGED or ARCHIVED, none TX_PENDING.
	if err := await.Until(10*time.Second, 50*time.Millisecond, func() error {
		offs, err := adm.DescribeShareGroupOffsets(ctx, "workers")
		if err != nil {
			return err
		}
		if so := offs["workers"].Offsets["in"][0]; so.StartOffset != 2*n || so.Lag != 0 {
			return fmt.Errorf("share start offset %d lag %d, want %d and 0", so.StartOffset, so.Lag, 2*n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// checkRounds reads the pipeline's transactions until every input of want committed. It
// checks that none commits twice, that the first transaction aborted and its inputs came
// back (delivery count 2), and that the others were delivered once.
func checkRounds(t *testing.T, ctx context.Context, rounds <-chan round, want map[string]bool) {
	t.Helper()
	committed := map[string]bool{}
	aborted := map[string]bool{}
	first := true
	for len(committed) < len(want) {
		var r round
		select {
		case r = <-rounds:
		case <-ctx.Done():
			t.Fatalf("committed %d of %d inputs (aborted %v): %v", len(committed), len(want), aborted, ctx.Err())
		}
		if first && r.committed {
			t.Fatal("the first transaction committed; BeforeCommit should have aborted it")
		}
		first = false
		for _, in := range r.inputs {
			v, count := string(in.Value), kgoext.DeliveryCount(in)
			switch {
			case !want[v]:
				t.Fatalf("input %s delivered again", v)
			case committed[v]:
				t.Fatalf("input %s delivered again after its transaction committed", v)
			case !r.committed:
				aborted[v] = true
			case aborted[v] && count != 2, !aborted[v] && count != 1:
				t.Fatalf("input %s (aborted before: %v) committed at delivery count %d", v, aborted[v], count)
			default:
				committed[v] = true
			}
		}
	}
	if len(aborted) == 0 {
		t.Fatal("no transaction aborted")
	}
}

func setGroupEarliest(t *testing.T, cl *kgo.Client, group string) {
	t.Helper()
	if err := testbroker.SetGroupConfigs(context.Background(), cl, group, "share.auto.offset.reset", "earliest"); err != nil {
		t.Fatalf("group config: %v", err)
	}
}
