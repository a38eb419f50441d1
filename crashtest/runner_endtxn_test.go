package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/eos"
	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/brokerproc"
)

// TestRunnerCommitOutcomeLost: the answers to a Runner worker's EndTxn(commit) never
// reach it (the proxy swallows each, then cuts the connection) for longer than kgo keeps
// resending, so the worker cannot know whether its transaction committed. The
// coordinator did commit it. The worker must find that out (by resending the same
// EndTxn, as Kafka's producer does, until an answer comes) and report the transaction as
// committed: reporting an abort would tell its user that those inputs come back when
// they never will. Every input's output is in the read_committed output exactly once,
// and the commits the runner reported add up to every input.
func TestRunnerCommitOutcomeLost(t *testing.T) {
	const n = 20
	proxy := newKafkaProxy(t)
	sb := &shareBroker{t: t, dataDir: t.TempDir(), cfgPath: filepath.Join(t.TempDir(), "broker.properties"), logs: newBrokerLog()}
	if err := os.WriteFile(sb.cfgPath, []byte(shareBrokerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	sb.b = startBrokerOpts(t, brokerproc.Options{
		DataDir: sb.dataDir, Fsync: "always", LogLevel: "info", Echo: sb.logs,
		Args: []string{"--config", sb.cfgPath, "--advertised", proxy.addr()},
	})
	proxy.setUpstream(sb.b.Addr)
	addr := proxy.addr()
	raw := newRawClient(t, addr)
	createTopic(t, addr, "rl-in", 1, nil)
	createTopic(t, addr, "rl-out", 1, nil)
	setGroupConfig(t, raw, "rl", "share.auto.offset.reset", "earliest")
	produceInputs(t, addr, "rl-in", rand.New(rand.NewPCG(1, 2)), inputValues(0, n), n)

	const clientID = "rl-runner"
	fired := proxy.armEvery(clientID, endTxnKey)
	var (
		mu      sync.Mutex
		commits []eos.Commit
		aborts  []*eos.AbortError
	)
	r, err := eos.NewRunner(eos.RunnerConfig{
		Brokers: []string{addr}, Group: "rl", Topics: []string{"rl-in"}, TransactionalIDPrefix: "rl",
		// kgo resends a request for RetryTimeout (30s by default) before it gives up.
		ClientOpts:    []kgo.Opt{kgo.ClientID(clientID), kgo.RetryTimeout(2 * time.Second)},
		CommitRecords: n, CommitInterval: 2 * time.Second, TransactionTimeout: 20 * time.Second,
		RetryBackoff: 50 * time.Millisecond,
		Process: func(_ context.Context, in *kgo.Record) (eos.Result, error) {
			return eos.Result{Outputs: []*kgo.Record{{Topic: "rl-out", Value: in.Value}}}, nil
		},
		OnCommit: func(c eos.Commit) { mu.Lock(); commits = append(commits, c); mu.Unlock() },
		OnAbort:  func(a *eos.AbortError) { mu.Lock(); aborts = append(aborts, a); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { stop(); <-done }()

	select {
	case <-fired:
	case <-time.After(60 * time.Second):
		t.Fatal("the runner never sent EndTxn")
	}
	// The commit is at the coordinator; its answer is held. Wait until the coordinator
	// has decided it, then cut every connection an EndTxn of the worker goes on, past
	// kgo's RetryTimeout: the worker learns only that it lost the answers.
	adm := kadm.NewClient(raw)
	if state := awaitTxnLeaves(t, adm, "rl-0", "Ongoing", 30*time.Second); state != "CompleteCommit" && state != "PrepareCommit" {
		t.Fatalf("the transaction is %s at the coordinator, want it committed", state)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		proxy.cutHeld()
		time.Sleep(20 * time.Millisecond) // the pace of the outage, not a wait for an outcome
	}
	proxy.disarm()
	proxy.cutHeld()

	// Every input has its output once in the read_committed output.
	var got []string
	if err := await.Until(60*time.Second, 100*time.Millisecond, func() error {
		ends, err := adm.ListEndOffsets(ctxTimeout(t, 10*time.Second), "rl-out")
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return err
		}
		end, _ := ends.Lookup("rl-out", 0)
		recs, err := readRange(addr, "rl-out", kgo.ReadCommitted(), []int64{0}, []int64{end.Offset})
		if err != nil {
			return err
		}
		got = got[:0]
		for _, r := range recs[0] {
			if !r.Attrs.IsControl() {
				got = append(got, string(r.Value))
			}
		}
		if len(got) < n {
			return fmt.Errorf("%d of %d outputs committed", len(got), n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	if want := inputValues(0, n); !slices.Equal(got, want) {
		t.Fatalf("read_committed output %v, want each of %v once", got, want)
	}
	// What the runner told its user must match: all n inputs committed, none aborted.
	if err := await.Until(60*time.Second, 50*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		committed := 0
		for _, c := range commits {
			committed += c.Inputs
		}
		for _, a := range aborts {
			if a.Inputs > 0 {
				return await.Stop(fmt.Errorf("the runner reported an abort of %d inputs (%v), but the transaction committed", a.Inputs, a))
			}
		}
		if committed != n {
			return fmt.Errorf("the runner reported %d inputs committed, want %d (commits %+v, aborts %v)", committed, n, commits, aborts)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	done <- nil
}
