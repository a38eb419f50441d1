package twopc_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/exactq/exactq/kgoext/twopc"
)

// childAddrEnv makes TestKilledParticipant the participant process: it prepares a
// transaction against the broker at this address, prints its state and waits to be killed.
const childAddrEnv = "TWOPC_TEST_PARTICIPANT_ADDR"

// TestKilledParticipant: the participant is a separate process, killed with SIGKILL right
// after it printed its prepared state (what an external coordinator would have stored).
// A new producer in this process recovers the transaction and completes it with that
// state: its records are read once.
func TestKilledParticipant(t *testing.T) {
	if addr := os.Getenv(childAddrEnv); addr != "" {
		participant(t, addr)
		return
	}
	b := startBroker(t, true)
	createTopics(t, b.Addr, "out")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledParticipant$")
	cmd.Env = append(os.Environ(), childAddrEnv+"="+b.Addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var line string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if s, ok := strings.CutPrefix(sc.Text(), "prepared "); ok {
			line = s
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	st, err := twopc.ParsePreparedTxnState(line)
	if err != nil || st.IsZero() {
		t.Fatalf("participant's state %q: %v", line, err)
	}
	recoverAndComplete(t, b.Addr, "tx-killed", st, st)
	wantReadOnce(t, b.Addr, "killed-0", "killed-1", "killed-2")
}

// participant prepares a transaction of three records, prints its state and blocks.
func participant(t *testing.T, addr string) {
	ctx := testCtx(t)
	p := newProducer(t, addr, "tx-killed")
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceOuts(t, p, "killed", 3)
	st, err := p.PrepareTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("prepared %s\n", st)
	<-ctx.Done() // killed long before
}
