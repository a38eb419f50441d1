package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext/twopc"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// eventually polls cond until it returns nil, failing the test after waitLimit. Only for
// broker state that changes asynchronously with nothing to wait on (transaction markers
// are written after EndTxn answers).
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	if err := await.Until(waitLimit, 10*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: still not true after %v: %v", what, waitLimit, err)
	}
}

// waitTxnState waits until the transactional id's state is want.
func waitTxnState(t *testing.T, adm *kadm.Client, id, want string) {
	t.Helper()
	eventually(t, id+" reaches "+want, func() error {
		ds, err := adm.DescribeTransactions(t.Context(), id)
		if err != nil {
			return err
		}
		if ds[id].State != want {
			return fmt.Errorf("state %s", ds[id].State)
		}
		return nil
	})
}

func TestTxnCommands(t *testing.T) {
	tb := testbroker.Start(t)
	b := []string{"-b", tb.Addr}
	createTopic(t, tb.Addr, "pay", 2)
	adm := testAdmin(t, tb.Addr)
	p := testClient(t, tb.Addr, kgo.TransactionalID("pay-tx"), kgo.TransactionTimeout(time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := t.Context()
	// transaction produces values to partitions in order and leaves the transaction open.
	transaction := func(values ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i, v := range values {
			p.Produce(ctx, &kgo.Record{Topic: "pay", Partition: int32(i % 2), Value: []byte(v)}, nil)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	transaction("p1", "p2", "p3")

	rows := fieldRows(mustRun(t, runTxn, "", append([]string{"list"}, b...)...))
	if len(rows) != 2 || strings.Join(rows[0], " ") != "TRANSACTIONAL-ID COORDINATOR PRODUCER-ID STATE" ||
		len(rows[1]) != 4 || rows[1][0] != "pay-tx" || rows[1][1] != "1" || rows[1][3] != "Ongoing" {
		t.Fatalf("list: %q", rows)
	}
	pid := rows[1][2]
	if out := mustRun(t, runTxn, "", append([]string{"list", "--state", "CompleteCommit"}, b...)...); strings.Count(out, "\n") != 1 {
		t.Errorf("list --state CompleteCommit: %q", out)
	}

	before := time.Now().Add(-time.Minute)
	out, _, err := run(t, t.Context(), runTxn, "", append([]string{"describe", "pay-tx", "ghost"}, b...)...)
	if !errors.Is(err, kerr.TransactionalIDNotFound) || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("describe pay-tx ghost: %v", err)
	}
	rows = fieldRows(out)
	if len(rows) != 2 || strings.Join(rows[0], " ") != "TRANSACTIONAL-ID COORDINATOR STATE PRODUCER-ID EPOCH TIMEOUT-MS TWO-PHASE STARTED DURATION-MS PARTITIONS" {
		t.Fatalf("describe:\n%s", out)
	}
	r := rows[1]
	if strings.Join([]string{r[0], r[1], r[2], r[3], r[5], r[6], r[9]}, " ") != "pay-tx 1 Ongoing "+pid+" 60000 no pay-0,pay-1" {
		t.Errorf("describe row %q", r)
	}
	if started, err := time.Parse("2006-01-02T15:04:05.000Z", r[7]); err != nil || started.Before(before) || started.After(time.Now()) {
		t.Errorf("started %q: %v", r[7], err)
	}

	// read_committed stops at the open transaction's first offset: nothing yet.
	if out := mustRun(t, runConsume, "", "pay", "-b", tb.Addr, "-q", "--isolation", "read_committed"); out != "" {
		t.Errorf("read_committed during the transaction: %q", out)
	}

	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, adm, "pay-tx", "CompleteCommit")
	rows = fieldRows(mustRun(t, runTxn, "", append([]string{"describe", "pay-tx"}, b...)...))
	if len(rows) != 2 || rows[1][2] != "CompleteCommit" || rows[1][len(rows[1])-1] != "-" {
		t.Errorf("describe after commit: %q", rows)
	}

	// An aborted transaction after the committed one: each partition ends with control
	// records and aborted records, which consume reads past to the end offsets and exits.
	transaction("x1", "x2")
	if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, adm, "pay-tx", "CompleteAbort")
	for _, tc := range []struct {
		iso          string
		want0, want1 string
	}{
		{"read_committed", "0|p1\n0|p3\n", "1|p2\n"},
		{"read_uncommitted", "0|p1\n0|p3\n0|x1\n", "1|p2\n1|x2\n"}, // the aborted records too
	} {
		out := mustRun(t, runConsume, "", "pay", "-b", tb.Addr, "-q", "--isolation", tc.iso, "--format", `%p|%v\n`)
		if got := byPartition(t, out); strings.Join(got[0], "") != tc.want0 || strings.Join(got[1], "") != tc.want1 {
			t.Errorf("%s after a commit and an abort:\n%s", tc.iso, out)
		}
	}
}

func TestGroupTxnUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		cmd  command
		args []string
		hint string
	}{
		{runGroup, nil, "x"},
		{runGroup, []string{"rename"}, "x"},
		{runGroup, []string{"describe"}, "group describe"},
		{runGroup, []string{"delete"}, "group delete"},
		{runGroup, []string{"list", "extra"}, "group list"},
		{runTxn, nil, "x"},
		{runTxn, []string{"abort", "t"}, "x"},
		{runTxn, []string{"describe"}, "txn describe"},
		{runTxn, []string{"list", "--bogus"}, "txn list"},
		{runTxn, []string{"list", "--state", "Ongoing,Pending"}, "txn list"}, // not a state
	} {
		_, _, err := run(t, t.Context(), tc.cmd, "", append(tc.args, "-b", "127.0.0.1:1")...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", tc.args, err)
			continue
		}
		var stderr strings.Builder
		hint := `Run "exactq ` + tc.hint + ` -h" for usage.`
		if code := exitCode("x", err, &stderr); code != 2 || !strings.Contains(stderr.String(), hint) {
			t.Errorf("%v: exit code %d, stderr %q, want %q", tc.args, code, stderr.String(), hint)
		}
	}
	for _, cmd := range []command{runGroup, runTxn} {
		out, _, err := run(t, t.Context(), cmd, "", "-h")
		if !errors.Is(err, errHelp) || !strings.HasPrefix(out, "Usage:") {
			t.Errorf("-h: %v, %q", err, out)
		}
	}
}

// A KIP-939 two-phase-commit participant's transaction is recognisable in describe: its
// timeout is MaxInt32 and TWO-PHASE says yes.
func TestTxnDescribeTwoPhase(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"transaction.two.phase.commit.enable": "true"}))
	createTopic(t, tb.Addr, "pay", 1)
	p, err := twopc.NewProducer(testClient(t, tb.Addr, kgo.MaxVersions(twopc.Versions())), "pay-2pc")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "pay", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PrepareTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	rows := fieldRows(mustRun(t, runTxn, "", "describe", "pay-2pc", "-b", tb.Addr))
	if len(rows) != 2 || rows[0][6] != "TWO-PHASE" {
		t.Fatalf("describe: %q", rows)
	}
	if r := rows[1]; r[2] != "Ongoing" || r[5] != "2147483647" || r[6] != "yes" || r[9] != "pay-0" {
		t.Errorf("describe row %q", r)
	}
}

// consume --isolation read_committed without -f ends at the last stable offset even when
// the records just below it belong to an aborted transaction whose abort marker lies past
// it, behind another transaction that is still open: nothing read_committed returns shows
// an offset near the end there.
func TestConsumeReadCommittedEndsBeforeOpenTransaction(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb.Addr, "pay", 1)
	ctx := t.Context()
	aborted := testClient(t, tb.Addr, kgo.TransactionalID("aborted"))
	open := testClient(t, tb.Addr, kgo.TransactionalID("open"))
	mustRun(t, runProduce, "before\n", "pay", "-b", tb.Addr)
	produce := func(cl *kgo.Client, v string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "pay", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(aborted, "a1") // offset 1
	produce(open, "o1")    // offset 2: the last stable offset stays here while it is open
	if err := aborted.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, testAdmin(t, tb.Addr), "aborted", "CompleteAbort") // its marker: offset 3
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, errOut, err := run(t, runCtx, runConsume, "", "pay", "-b", tb.Addr, "--isolation", "read_committed")
	if err != nil || runCtx.Err() != nil || out != "before\n" {
		t.Errorf("consume read_committed: %v (ctx %v) %q\n%s", err, runCtx.Err(), out, errOut)
	}
	if !strings.Contains(errOut, "from offset 0 to 2\n") {
		t.Errorf("end offset:\n%s", errOut)
	}
}
