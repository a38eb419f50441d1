package crashtest

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// flagLifecycleCycles is the number of faults of TestLifecycleRandomCrashes. The CI
// default takes about a minute on two cores; the documented long run:
//
//	go test ./crashtest/ -run TestLifecycleRandomCrashes -v               # CI: seeds 1, 2, 3
//	go test ./crashtest/ -run TestLifecycleRandomCrashes -seed 1234 -lifecycle-cycles 1000 -timeout 60m -v
//	EXACTQ_LIFECYCLE_CYCLES=1000 EXACTQ_CRASH_SEED=1234 go test ./crashtest/ -run TestLifecycleRandomCrashes -timeout 60m
var flagLifecycleCycles = flag.Int("lifecycle-cycles", envInt("EXACTQ_LIFECYCLE_CYCLES", 25), "faults per seed of TestLifecycleRandomCrashes (env EXACTQ_LIFECYCLE_CYCLES)")

// flagLifecycleSeeds are the seeds TestLifecycleRandomCrashes runs when -seed is not given:
// fixed, so that CI runs the same schedules every time.
var flagLifecycleSeeds = flag.String("lifecycle-seeds", envString("EXACTQ_LIFECYCLE_SEEDS", "1,2,3"), "seeds of TestLifecycleRandomCrashes when -seed is 0 (env EXACTQ_LIFECYCLE_SEEDS)")

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

const lcrWorkers = 3

// lcrKind is what a cycle of TestLifecycleRandomCrashes kills, and when.
type lcrKind int

const (
	lcrWorkerAtStep lcrKind = iota // a worker, at a step of its next checkpoint
	lcrWorkerAny                   // a worker, after a random delay
	lcrBrokerAtStep                // the broker, while a worker waits at a step
	lcrBrokerAny                   // the broker, after a random delay
	lcrBothAtStep                  // the broker and a worker waiting at a step (a host crash)
	lcrKinds
)

func (k lcrKind) String() string {
	return [...]string{"worker@step", "worker@any", "broker@step", "broker@any", "both@step"}[k]
}

// TestLifecycleRandomCrashes (issue 7, acceptance 2) runs, for each seed (fixed ones in
// CI), lcrWorkers worker processes
// (crashtest/internal/eosworker, each with its own transactional id and checkpoint file,
// all in one share group) over one input topic, and per cycle appends 30 to 89 inputs and
// puts one fault, every choice drawn from the seed: SIGKILL of a worker or of the broker
// or both, at a step of a worker's next checkpoint (before prepare, after prepare, after
// the snapshot, after the checkpoint is durable, during the commit) or after a random
// delay. Killed workers are started again by their supervisor and recover from their
// checkpoint files; workers whose clients are fenced by a broker restart exit and are
// started again too. After each fault the group must drain (every input acknowledged,
// nothing ACQUIRED or TX_PENDING). At the end: every input's output is in the
// read_committed output exactly once with no aborted output visible, no transaction is
// left open, the workers' durable checkpoints hold each input exactly once, no input
// reached the delivery limit, and the broker logged no error.
func TestLifecycleRandomCrashes(t *testing.T) {
	seeds := []int64{*flagSeed}
	if *flagSeed == 0 {
		seeds = nil
		for _, f := range strings.Split(*flagLifecycleSeeds, ",") {
			s, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("-lifecycle-seeds %q: %v", *flagLifecycleSeeds, err)
			}
			seeds = append(seeds, s)
		}
	}
	for _, s := range seeds {
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Logf("replay: go test ./crashtest/ -run '^TestLifecycleRandomCrashes$' -seed %d -lifecycle-cycles %d", s, *flagLifecycleCycles)
			lifecycleRandom(t, s)
		})
	}
}

func lifecycleRandom(t *testing.T, seed int64) {
	cycles := *flagLifecycleCycles
	if testing.Short() {
		cycles = min(cycles, 8)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	e := newLCEnv(t)
	const in, out, group = "lcr-in", "lcr-out", "lcr"
	e.pipeline(in, out, group)
	ws := make([]*lcWorker, lcrWorkers)
	for i := range ws {
		ws[i] = e.startWorker(fmt.Sprintf("r%d", i), group, in, out)
	}
	testStart := time.Now()
	n := 0
	var kinds [lcrKinds]int
	steps := map[string]int{}
	missed := 0
	var slowest time.Duration
	for c := range cycles {
		kind := lcrKind(rng.IntN(int(lcrKinds)))
		w := ws[rng.IntN(len(ws))]
		step := lcSteps[rng.IntN(len(lcSteps))]
		delay := time.Duration(rng.IntN(300_000)) * time.Microsecond
		chunk := 30 + rng.IntN(60)
		kinds[kind]++
		atStep := kind == lcrWorkerAtStep || kind == lcrBrokerAtStep || kind == lcrBothAtStep
		if atStep {
			steps[step]++
			delay = time.Duration(rng.IntN(20_000)) * time.Microsecond
		}
		mark := w.mark()
		if atStep {
			w.send("pause " + step) // armed before the inputs arrive
		}
		produceInputs(t, e.addr, in, rng, inputValues(n, n+chunk), 10)
		n += chunk

		note := kind.String()
		paused := false // w waits at the step for "go"
		if atStep {
			note += " " + step
			_, _, paused = w.await(mark, "step "+step+" ", 5*time.Second)
			if !paused {
				// Another worker took every input, or w was restarted and lost the
				// command: disarm, and catch a step reached meanwhile.
				w.send("pause none")
				_, _, paused = w.await(mark, "step "+step+" ", time.Second)
			}
			if !paused {
				note += " (not reached)"
				missed++
			}
			if paused && step == stepDuringCommit {
				// On until the commit's EndTxn reaches the broker; a worker to be killed
				// never gets the answer.
				fired := e.proxy.arm(w.txnID, endTxnKey, kind != lcrBrokerAtStep)
				w.send("go")
				paused = false
				select {
				case <-fired:
				case <-time.After(15 * time.Second):
					e.proxy.disarm()
					note += " (no EndTxn)"
				}
			}
		}
		time.Sleep(delay) // the fault's moment, drawn from the seed
		killedAt := time.Now()
		switch kind {
		case lcrWorkerAtStep, lcrWorkerAny:
			w.kill()
		case lcrBrokerAtStep, lcrBrokerAny:
			e.restartBroker()
		case lcrBothAtStep:
			w.kill()
			e.restartBroker()
		}
		if paused && kind == lcrBrokerAtStep {
			w.send("go")
		}
		st, lag, took := awaitShareDrained(t, e.adm, group, in, int64(n), 60*time.Second)
		slowest = max(slowest, time.Since(killedAt))
		if st != int64(n) || lag != 0 {
			var tails strings.Builder
			for _, w := range ws {
				tails.WriteString(w.tail(25))
			}
			t.Fatalf("cycle %d (%s): share start offset %d lag %d %v after the fault, want %d and 0; workers:\n%s",
				c, note, st, lag, took.Round(time.Millisecond), n, tails.String())
		}
		for _, w := range ws {
			for _, f := range w.failures() {
				t.Fatalf("cycle %d: worker %s: %s", c, w.name, f)
			}
		}
		checkLog(t, c, e.sb.logs)
		t.Logf("cycle %3d %-32s %s +%6.2fms: drained %5dms after, %5d inputs", c, note, w.name,
			float64(delay.Microseconds())/1000, time.Since(killedAt).Milliseconds(), n)
	}
	for _, w := range ws {
		w.stop(t)
	}
	aborted := checkOutputOnce(t, e.addr, e.adm, out, n, ws)
	st := checkLedger(t, ws, n)
	if so, lag := shareOffsets(t, e.adm, group, in); so != int64(n) || lag != 0 {
		t.Errorf("final: share start offset %d lag %d, want %d and 0", so, lag, n)
	}
	checkLog(t, -1, e.sb.logs)
	var ks []string
	for k := range lcrKinds {
		ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	var ss []string
	for _, s := range lcSteps {
		ss = append(ss, fmt.Sprintf("%s %d", s, steps[s]))
	}
	t.Logf("%d cycles (%s; at %s; %d steps not reached) in %v: %d inputs, %d checkpoints committed (durable), %d aborted (%d by the worker after a failed prepare, %d by Recover), %d committed by Recover, %d worker runs (%d SIGKILLed, %d exited to recover), %d aborted output records, highest delivery count %d, slowest fault-to-drained %v",
		cycles, strings.Join(ks, ", "), strings.Join(ss, ", "), missed, time.Since(testStart).Round(time.Millisecond), n,
		st.durable, st.aborted+st.recoverAborts, st.aborted, st.recoverAborts, st.recoverCommits, st.runs, st.kills, st.restarts,
		aborted, st.maxCount, slowest.Round(time.Millisecond))
}
