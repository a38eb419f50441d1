package hostile

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// attack is one hostile client's behaviour and the bounds the broker must keep under it.
type attack struct {
	name string
	// Bounds. rssBytes caps the broker's peak resident memory over the whole test;
	// minRatio is the least fraction of its baseline rate each victim client must keep
	// during the attack; p99 caps the victim's 99th-percentile latency (produce requests,
	// and end-to-end for the consumers) during the attack.
	rssBytes int64
	minRatio float64
	p99      time.Duration
	share    bool       // run a share consumer in the victim too
	broker   brokerOpts // how the broker runs
	// run performs the attack; it returns when the attack is over. minWindow is the least
	// time the victim is measured under attack (for attacks of a few requests).
	run       func(t *testing.T, h *harness)
	minWindow time.Duration
	// after, when set, checks the attack's own effects once the broker has restarted.
	after func(t *testing.T, h *harness)
}

// harness is what an attack sees: the broker and the victim.
type harness struct {
	b *broker
	v *victim
}

// addr is the broker's address (stable across restarts).
func (h *harness) addr() string { return h.b.addr }

// Victim baseline and minimum attack windows. Short, so that the package fits CI; long
// enough for a few hundred victim requests on a busy machine.
var (
	baselineWindow = sized(1500*time.Millisecond, 5*time.Second)
	attackWindow   = sized(1500*time.Millisecond, 5*time.Second)
)

// result is one line of the summary.
type result struct {
	name   string
	rss    int64
	p99    time.Duration
	ratio  float64
	failed bool
}

var (
	resultsMu sync.Mutex
	results   []result
)

// runAttack measures the victim's baseline, runs the attack beside it, checks the bounds,
// restarts the broker and checks that every record acknowledged to the victim is there.
func runAttack(t *testing.T, a attack) {
	b := startBroker(t, a.broker)
	h := &harness{b: b}
	h.v = startVictim(t, b.addr, a.share)

	baseFrom := time.Now()
	time.Sleep(baselineWindow) // the victim's baseline is measured over this window
	baseTo := time.Now()
	base := h.v.window(baseFrom, baseTo)

	minWindow := max(a.minWindow, attackWindow)
	attackFrom := time.Now()
	a.run(t, h)
	if rest := minWindow - time.Since(attackFrom); rest > 0 {
		time.Sleep(rest) // every attack window is at least minWindow long, so p99s compare
	}
	attackTo := time.Now()
	under := h.v.window(attackFrom, attackTo)
	up := b.alive()
	h.v.stop()

	rss := b.peakRSS.Load()
	// A consumer's rate is bounded by the producer's once it has caught up, but in the
	// baseline it may still be reading the backlog of the warm-up (a share consumer's
	// assignment takes a few heartbeats): a baseline above the production rate is that
	// backlog, not a rate the attack could take away, so the consumers are held to the
	// producer's baseline at most.
	ratio := min(rate(under.produceRate, base.produceRate), rate(under.consumeRate, min(base.consumeRate, base.produceRate)))
	if a.share {
		ratio = min(ratio, rate(under.shareRate, min(base.shareRate, base.produceRate)))
	}
	p99 := max(under.produceP99, under.consumeP99, under.shareP99)
	t.Logf("baseline: %v", base)
	t.Logf("under attack: %v", under)
	if !up {
		t.Errorf("the broker died during the attack (exit %d): %s", b.p.ExitCode(), crashLine(b.p.Logs()))
	}
	if a.rssBytes > 0 && rss > a.rssBytes {
		t.Errorf("broker peak RSS %s, bound %s", mib(rss), mib(a.rssBytes))
	}
	if ratio < a.minRatio {
		t.Errorf("victim kept %.2f of its baseline rate under attack, bound %.2f (baseline: %v; under attack: %v)", ratio, a.minRatio, base, under)
	}
	if a.p99 > 0 && p99 > a.p99 {
		t.Errorf("victim p99 %v under attack, bound %v", p99, a.p99)
	}
	if len(h.v.failures) > 0 {
		t.Logf("victim produce failures: %v", h.v.failures)
	}

	b.restart()
	h.v.checkAcked(t, b.addr)
	if a.after != nil {
		a.after(t, h)
	}
	r := result{name: a.name, rss: rss, p99: p99, ratio: ratio, failed: t.Failed()}
	recordResult(r)
	t.Logf("%s", formatResult(r))
}

// rate is under/base, 1 when there was no baseline to compare with.
func rate(under, base float64) float64 {
	if base == 0 {
		return 1
	}
	return under / base
}

func recordResult(r result) {
	resultsMu.Lock()
	results = append(results, r)
	resultsMu.Unlock()
}

func formatResult(r result) string {
	status := "ok"
	if r.failed {
		status = "FAIL"
	}
	return fmt.Sprintf("hostile: %-36s peak_rss=%-8s victim_p99=%-8v throughput_ratio=%.2f %s",
		r.name, mib(r.rss), r.p99.Round(time.Millisecond), r.ratio, status)
}

// printSummary prints one line per attack run (the figures the issue note quotes).
func printSummary() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var sb strings.Builder
	for _, r := range results {
		sb.WriteString(formatResult(r) + "\n")
	}
	fmt.Fprint(os.Stdout, sb.String())
}

// crashLine is the first line of a Go crash in logs (fatal error or panic), else the last
// lines.
func crashLine(logs string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "runtime: out of memory") {
			return l
		}
	}
	return "log tail:\n" + tail(logs, 15)
}
