package crashtest

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
)

const (
	crashTopic      = "crash"
	crashPartitions = 3
	crashProducers  = 3
	// crashSegmentBytes is small so that segments roll during the test and kills land on
	// rolls too (internal.segment.bytes is the test-only override of segment.bytes).
	crashSegmentBytes = "262144"
	// termTimeout is how long a clean shutdown may take before the test calls it hung.
	termTimeout = 10 * time.Second
)

// stopKind is how a cycle stops the broker.
type stopKind int

const (
	killFresh   stopKind = iota // SIGKILL; new producers (new producer ids) after the restart
	killSurvive                 // SIGKILL; the producers keep retrying into the restarted broker
	term                        // SIGTERM: must exit 0 quickly and lose nothing
)

func (k stopKind) String() string {
	return [...]string{"kill", "kill+survive", "term"}[k]
}

// TestCrashCycles runs -cycles cycles of: producers write continuously, the broker is
// stopped after a random delay (mostly SIGKILL, sometimes SIGTERM), restarted on the same
// data directory, and everything acknowledged so far is read back and checked.
func TestCrashCycles(t *testing.T) {
	cycles := *flagCycles
	if testing.Short() {
		cycles = min(cycles, 5)
	}
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 0))
	dataDir := t.TempDir()
	l := newLedger()

	fsync := "always"
	b := startBroker(t, dataDir, "", fsync)
	seg := crashSegmentBytes
	createTopic(t, b.Addr, crashTopic, crashPartitions, map[string]*string{"internal.segment.bytes": &seg})

	start := time.Now()
	var kinds [3]int
	for c := range cycles {
		kind := killFresh
		switch r := rng.IntN(10); {
		case r < 2 || c == 1:
			kind = term
		case r < 5 || c == 2:
			kind = killSurvive
		}
		kinds[kind]++
		// Mostly fsync=always; sometimes never. A process crash must not lose acknowledged
		// records under either policy (the page cache survives the process).
		nextFsync := "always"
		if rng.IntN(4) == 0 {
			nextFsync = "never"
		}
		// Kill after 0-1500 ms; a third of the time only once some records are
		// acknowledged, so that most cycles have something at stake.
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond
		waitForAcks := rng.IntN(3) == 0
		surviveFor := time.Duration(200+rng.IntN(800)) * time.Millisecond

		before := l.numAcked()
		ps := startProducers(t, b.Addr, crashTopic, crashPartitions, crashProducers, c, l, true)
		if waitForAcks {
			ps.awaitAcks(200, 10*time.Second, b.Done())
		}
		select {
		case <-time.After(delay): // the fault's timing, drawn from the seed
		case <-b.Done():
			t.Fatalf("cycle %d: broker exited on its own (%v):\n%s", c, b.ExitCode(), b.Logs())
		}

		addr := b.Addr
		switch kind {
		case killFresh, killSurvive:
			b.Kill()
		case term:
			code, took, err := b.Terminate(termTimeout)
			if err != nil || code != 0 {
				t.Fatalf("cycle %d: SIGTERM: exit code %d after %v, err %v:\n%s", c, code, took, err, b.Logs())
			}
			if len(b.LogLines("stopped")) == 0 {
				t.Errorf("cycle %d: SIGTERM: no 'stopped' line in the broker log:\n%s", c, b.Logs())
			}
			t.Logf("cycle %d: SIGTERM exit 0 after %v", c, took.Round(time.Millisecond))
		}
		checkNoErrors(t, c, b)

		if kind == killSurvive {
			// Same port, so the clients reconnect and retry what was in flight with the same
			// producer ids and sequence numbers: the broker must deduplicate from the state
			// it recovered.
			b = startBroker(t, dataDir, addr, nextFsync)
			select {
			case <-time.After(surviveFor):
			case <-b.Done():
				t.Fatalf("cycle %d: broker exited on its own:\n%s", c, b.Logs())
			}
			ps.halt(t, true, 20*time.Second)
		} else {
			ps.halt(t, false, 0)
			b = startBroker(t, dataDir, "", nextFsync)
		}
		fsync = nextFsync
		n := verify(t, b.Addr, crashTopic, crashPartitions, l)
		t.Logf("cycle %2d %-12s fsync=%-6s delay=%4dms acks %6d (+%5d) fails %5d, read back %6d",
			c, kind, fsync, delay.Milliseconds(), l.numAcked(), l.numAcked()-before, ps.fails.Load(), n)
		if kind == killSurvive && ps.fails.Load() > 0 {
			// Retries are unbounded and the broker came back on the same address: every
			// record must end up acknowledged (deduplicated if it was written before the kill).
			t.Errorf("cycle %d: %d records failed although the producers survived the restart: %s",
				c, ps.fails.Load(), ps.reasons)
		}
		if t.Failed() {
			t.Fatalf("cycle %d failed; broker log:\n%s", c, b.Logs())
		}
	}
	t.Logf("%d cycles (%d kill, %d kill+survive, %d term) in %v, %d records acknowledged",
		cycles, kinds[killFresh], kinds[killSurvive], kinds[term], time.Since(start).Round(time.Millisecond), l.numAcked())

	code, took, err := b.Terminate(termTimeout)
	if err != nil || code != 0 {
		t.Fatalf("final SIGTERM: exit code %d after %v, err %v", code, took, err)
	}
}

// TestCleanShutdown produces and flushes (so everything sent is acknowledged), stops the
// broker with SIGTERM, and checks that it exits 0 quickly and that after the restart each
// partition holds exactly the acknowledged records and nothing else.
func TestCleanShutdown(t *testing.T) {
	dataDir := t.TempDir()
	l := newLedger()
	b := startBroker(t, dataDir, "", "always")
	createTopic(t, b.Addr, "clean", crashPartitions, nil)
	ps := startProducers(t, b.Addr, "clean", crashPartitions, crashProducers, 0, l, false)
	if !ps.awaitAcks(3000, 60*time.Second, b.Done()) {
		t.Fatalf("3000 acks not reached; broker log:\n%s", b.Logs())
	}
	ps.halt(t, true, 30*time.Second)
	if f := ps.fails.Load(); f != 0 {
		t.Fatalf("%d records failed while the broker was up", f)
	}
	code, took, err := b.Terminate(termTimeout)
	if err != nil || code != 0 {
		t.Fatalf("SIGTERM: exit code %d after %v, err %v:\n%s", code, took, err, b.Logs())
	}
	t.Logf("SIGTERM: exit 0 after %v", took.Round(time.Millisecond))
	checkNoErrors(t, 0, b)

	b = startBroker(t, dataDir, "", "always")
	n := verify(t, b.Addr, "clean", crashPartitions, l)
	if n != l.numAcked() {
		t.Fatalf("read back %d records, acknowledged %d: after a clean shutdown they must be equal", n, l.numAcked())
	}
}

// checkNoErrors fails the test on ERROR lines in the broker log: recovery from a crash is
// routine and must not log errors.
func checkNoErrors(t *testing.T, cycle int, b *brokerproc.Process) {
	t.Helper()
	if errs := b.LogLines("level=ERROR"); len(errs) > 0 {
		t.Errorf("cycle %d: broker logged errors:\n%s", cycle, strings.Join(errs, "\n"))
	}
}
