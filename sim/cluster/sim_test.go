// Package cluster is the deterministic simulation of several exactq nodes' metadata
// quorum and controllers (docs/architecture.md, "Deterministic simulation of several
// nodes", build step 8): 3 or 5 voters, each the real quorum loop (raft's RawNode,
// raftstore on real files in a temp directory, the metadata image) polled on the test's
// goroutine, with the real controller Core on whichever node serves, and a broker per
// node registering, heartbeating, allocating producer ids, shutting down (controlled)
// and now and then unregistered by an operator. One seed chooses every
// event: message delays, drops, duplicates, partitions, crashes and restarts (a new life
// reopens the node's files), stalled processes and clock jumps; raft's own randomness
// (crypto/rand) is fixed from the seed by cryptotest.SetGlobalRandom, so one seed is one
// history, and its trace hash is printed.
//
// Checked after every event: one raft leader and one serving controller per term;
// equal images at equal applied indexes, across nodes and across a node's lives; an
// answered proposal's entry is in every log that reaches its index, in every later life;
// producer-id blocks never overlap; broker epochs only grow; no fenced broker leads a
// partition; a cluster healed for electBound has a controller. After the chaos
// everything is healed and the cluster must settle within settleBound: a controller,
// every node applied to the leader's commit, every broker registered and unfenced,
// every partition led by its broker.
//
// A crash happens between two events, so at a Ready boundary: every write SaveReady made
// was fsynced, and raftstore and internal/log have no seam to lose an unsynced one (their
// own crash tests tear log tails). TestChecksCatchALyingDisk runs a disk that loses
// fsynced writes, to show that the checks catch what raft cannot survive.
//
// CI runs ciSeeds (10 seeds of 30 s of virtual chaos, about 3 s on a loaded 2-core
// machine). Replay one, or run many:
//
//	go test ./sim/cluster -run 'TestClusterSimulation$' -seed=N -fulltrace
//	EXACTQ_SIM_SEED=N go test ./sim/cluster -run 'TestClusterSimulation$'
//	go test ./sim/cluster -run 'TestClusterSimulation$' -seed=100 -seeds=200 -chaos=60s -timeout 30m
//
// (200 seeds of 60 s: about 90 s. Such a run found the stall TestUnreportedSnapshotStalls
// keeps.)
package cluster

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"
)

var (
	flagSeed   = flag.Uint64("seed", 0, "first seed to run (0: $EXACTQ_SIM_SEED, else the fixed CI seeds)")
	flagSeeds  = flag.Int("seeds", 1, "number of consecutive seeds to run from -seed")
	flagChaos  = flag.Duration("chaos", 30*time.Second, "virtual time of faults per seed, before everything heals")
	flagVoters = flag.Int("voters", 0, "voters per seed (0: 3 for even seeds, 5 for odd ones)")
	flagTrace  = flag.Bool("fulltrace", false, "print the whole trace of every seed")
	flagSilent = flag.Bool("noreports", false, "the transport does not report lost raft messages and delivered snapshots (to find a seed for TestUnreportedSnapshotStalls)")
)

// ciSeeds are the seeds CI runs.
var ciSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

// settleBound is how long the cluster may take, once everything is healed, to serve
// again with every broker unfenced: elections, a new incarnation waiting out the restart
// rule (two heartbeat intervals), catching up.
const settleBound = 30 * time.Second

// maxEvents bounds one seed's events (a livelock would otherwise never end).
const maxEvents = 5_000_000

func seeds(t *testing.T) []uint64 {
	first := *flagSeed
	if first == 0 {
		if s := os.Getenv("EXACTQ_SIM_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("EXACTQ_SIM_SEED=%q: %v", s, err)
			}
			first = v
		}
	}
	if first == 0 {
		return ciSeeds
	}
	var out []uint64
	for i := range *flagSeeds {
		out = append(out, first+uint64(i))
	}
	return out
}

func votersFor(seed uint64) int {
	if *flagVoters != 0 {
		return *flagVoters
	}
	if seed%2 == 1 {
		return 5
	}
	return 3
}

func TestClusterSimulation(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			w := runSeed(t, seed, votersFor(seed), *flagChaos, func(w *world) { w.reportDelivery = !*flagSilent })
			report(t, w)
		})
	}
}

// TestClusterSimulationReplays checks the simulation itself: one seed, one history.
func TestClusterSimulationReplays(t *testing.T) {
	a := runSeed(t, 11, 3, 20*time.Second)
	b := runSeed(t, 11, 3, 20*time.Second)
	ha, hb := a.traceHash.Sum64(), b.traceHash.Sum64()
	if ha != hb || a.lines != b.lines {
		t.Fatalf("seed 11 twice: trace hashes %016x (%d lines) and %016x (%d lines)", ha, a.lines, hb, b.lines)
	}
	if len(a.errs) > 0 {
		report(t, a)
	}
	t.Logf("seed 11: %d trace lines, hash %016x both times", a.lines, ha)
}

// TestChecksCatchALyingDisk checks the checks: with a disk that loses fsynced writes at
// every crash (the vote and the log's tail), raft's guarantees are gone, and some of a
// few seeds must show it as a violation. (What shows it is mostly raft's own panic at a
// commit index beyond the log, which the simulation reports; TestChecksFail shows each
// check of ours failing on the history it refuses.)
func TestChecksCatchALyingDisk(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 8; seed++ {
		w := runSeed(t, seed, 3, 30*time.Second, func(w *world) { w.lyingDisk = true })
		if len(w.errs) > 0 {
			caught++
			t.Logf("seed %d: %s", seed, w.errs[0])
		}
	}
	if caught == 0 {
		t.Fatal("8 seeds on a disk that loses fsynced writes at every crash, and no check failed")
	}
	t.Logf("%d of 8 seeds caught the lying disk", caught)
}

// runSeed runs one history: the chaos, then healing until the cluster settles.
func runSeed(t *testing.T, seed uint64, voters int, chaos time.Duration, tune ...func(*world)) *world {
	cryptotest.SetGlobalRandom(t, seed)
	w := newWorld(seed, voters, chaos, t.TempDir)
	for _, f := range tune {
		f(w)
	}
	events := 0
	for len(w.errs) == 0 && w.step(chaos) {
		if events++; events > maxEvents {
			w.failf("more than %d events before the chaos ended", maxEvents)
			return w
		}
	}
	if len(w.errs) > 0 {
		return w
	}
	// The chaos's last fault event (at or after chaos) heals everything.
	w.now = max(w.now, chaos)
	w.fault()
	deadline := w.now + settleBound
	for len(w.errs) == 0 && !w.settled() {
		if !w.step(deadline) {
			msg := w.unsettled()
			if len(w.snapSent) > 0 {
				msg += fmt.Sprintf("; MsgSnaps sent: %s", strings.Join(w.snapSent, ", "))
			}
			w.failf("the cluster did not settle within %v of healing: %s", settleBound, msg)
			return w
		}
		if events++; events > maxEvents {
			w.failf("more than %d events", maxEvents)
			return w
		}
	}
	if len(w.errs) == 0 {
		w.tracef("settled: %s", w.unsettled())
	}
	return w
}

// settled: a serving controller, every node applied to its commit, every broker
// registered and unfenced, every partition led by its broker.
func (w *world) settled() bool { return w.unsettled() == "" }

// unsettled says what keeps the cluster from being settled ("" when nothing).
func (w *world) unsettled() string {
	var lead *simNode
	for _, n := range w.nodes {
		if !n.up || n.paused() {
			return fmt.Sprintf("n%d is not running", n.id)
		}
		if _, ok := n.loop.Serving(); ok {
			lead = n
		}
	}
	if lead == nil {
		return "no controller"
	}
	if rc := w.rc; rc != nil {
		return fmt.Sprintf("the voter change of n%d is at %s", rc.target.id, rc.phase)
	}
	commit := lead.loop.RaftStatus().GetCommit()
	for _, n := range w.nodes {
		if got := n.loop.Current().Index; got != commit {
			return fmt.Sprintf("n%d applied %d, the commit is %d", n.id, got, commit)
		}
	}
	for _, b := range w.brokers {
		if !b.alive || b.epoch == 0 || b.fenced {
			return fmt.Sprintf("b%d is not registered and unfenced", b.id)
		}
	}
	im := lead.image()
	for _, t := range im.TopicsByID {
		for i, p := range t.Partitions {
			if p.Leader != p.Replicas[0] {
				return fmt.Sprintf("%s-%d is led by %d, not its broker %d", t.Name, i, p.Leader, p.Replicas[0])
			}
		}
	}
	return ""
}

func report(t *testing.T, w *world) {
	t.Helper()
	if *flagTrace {
		t.Log("trace tail:\n" + strings.Join(w.trace, "\n"))
	}
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(w.stats)) {
		fmt.Fprintf(&sb, "%s=%d ", k, w.stats[k])
	}
	t.Logf("seed %d: %d voters, %d trace lines, virtual %.1fs, %d entries answered, trace hash %016x; %s",
		w.seed, len(w.nodes), w.lines, w.now.Seconds(), len(w.chk.indexes), w.traceHash.Sum64(), sb.String())
	if len(w.errs) == 0 {
		return
	}
	t.Fatalf("seed %d failed; replay: go test ./sim/cluster -run 'TestClusterSimulation$' -seed=%d -voters=%d -chaos=%v -fulltrace\nviolations:\n  %s\nlast %d trace lines:\n%s",
		w.seed, w.seed, len(w.nodes), w.chaosUntil, strings.Join(w.errs, "\n  "), len(w.trace), strings.Join(w.trace, "\n"))
}
