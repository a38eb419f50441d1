package driver

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
)

// TestProcReaders: the /proc readers read this process, and report an error (not 0) for
// a process that is gone.
func TestProcReaders(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pid := os.Getpid()
	if _, err := procTreeCPU(pid); err != nil {
		t.Fatal(err)
	}
	if n, err := procStatusBytes(pid, "VmHWM:"); err != nil || n <= 0 {
		t.Fatalf("VmHWM of this process: %d, %v", n, err)
	}
	const gone = 1 << 30 // above the kernel's pid_max
	if _, err := procTreeCPU(gone); err == nil {
		t.Error("procTreeCPU of a missing process succeeded")
	}
	if _, err := procStatusBytes(gone, "VmRSS:"); err == nil {
		t.Error("procStatusBytes of a missing process succeeded")
	}
	if _, err := procStatusBytes(pid, "NoSuchKey:"); err == nil {
		t.Error("procStatusBytes of a missing key succeeded")
	}
	var logged []string
	logf := func(f string, a ...any) { logged = append(logged, f) }
	p := brokerproc.Attach(gone)
	if cpu, rss, now := cpuFigure(logf, p), peakRSSFigure(logf, p), rssNowFigure(logf, gone); cpu != unknownFigure || rss != unknownFigure || now != unknownFigure {
		t.Errorf("figures of a missing process: cpu %v, peak RSS %d, RSS %d; want unknown", cpu, rss, now)
	}
	if len(logged) != 3 {
		t.Errorf("%d errors logged, want 3", len(logged))
	}
	if cpu, rss := cpuFigure(logf, nil), peakRSSFigure(logf, nil); cpu != 0 || rss != 0 {
		t.Errorf("no process: cpu %v, rss %d; want 0 (not measured)", cpu, rss)
	}
}

// TestUnknownFigures: figures /proc could not give are "unknown" in the report, and the
// P7 memory target is not met on an unknown resident set. Before, the readers answered 0:
// an RSS delta of 0 B per record, which met the < 32 B target.
func TestUnknownFigures(t *testing.T) {
	var rows []Row
	for _, r := range syntheticRows() {
		if r.Target == "exactq" {
			r.BrokerCPU, r.BrokerRSS = unknownFigure, unknownFigure
			if r.Restart != nil {
				rr := *r.Restart
				rr.RSSBase, rr.RSSLoaded = unknownFigure, 50000
				r.Restart = &rr
			}
		}
		rows = append(rows, r)
	}
	sums := Summarize(rows, KafkaTarget)
	for _, c := range CheckTargets(sums, 4000) {
		if c.Target == "P7 < 32 B of memory per in-flight share record" && c.System == "exactq fsync never" {
			if c.Met || c.Known || !strings.HasPrefix(c.Figure, "unknown B") {
				t.Errorf("P7 memory target on an unknown RSS: %+v", c)
			}
		}
	}
	var b bytes.Buffer
	if err := WriteReport(&b, rows, ReportInfo{Command: "x", LoopbackMBps: 4000}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| P3 share, 4 consumers | exactq fsync never | 3 | 6000 | 6.0 | - | - | unknown | - | - | unknown |",
		"| P7 < 32 B of memory per in-flight share record | exactq fsync never | unknown B (RSS delta over 1000 records); Kafka 100.0 B | unknown |",
		"| 500 ms | 0 µs | unknown | 0 MiB | unknown | unknown | unknown |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	// One unknown run of three: the summary is over the two known ones.
	rows = syntheticRows()
	for i := range rows {
		if rows[i].Target == "exactq" && rows[i].ID == P1 {
			rows[i].BrokerCPU = time.Duration(rows[i].Run) * time.Second
			if rows[i].Run == 3 {
				rows[i].BrokerCPU = unknownFigure
			}
		}
	}
	if s := Summarize(rows, KafkaTarget)[0]; s.CPU != 1500*time.Millisecond {
		t.Errorf("median CPU of runs 1 s, 2 s and unknown: %v, want 1.5 s", s.CPU)
	}
}
