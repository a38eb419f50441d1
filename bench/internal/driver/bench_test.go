package driver

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
)

// TestSuiteSmoke runs a tiny suite against a freshly built exactq: it checks that the
// driver works end to end and that every row is filled in, never how fast anything is.
func TestSuiteSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker")
	}
	bin, ctx := buildExactq(t)
	s := Suite{
		Targets:    []Target{{Name: "exactq", Binary: bin, Fsync: "always", TempDir: t.TempDir()}, {Name: "exactq", Binary: bin, Fsync: "never", TempDir: t.TempDir()}},
		Partitions: []int32{1, 3},
		Records:    3000, RecordBytes: 100, Consume: true,
	}
	rows, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*2*2 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	for _, r := range rows {
		if r.Records != 3000 || r.MBps <= 0 || r.Elapsed <= 0 {
			t.Errorf("row not filled in: %+v", r)
		}
		if r.Workload == "produce" && (r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.P999) {
			t.Errorf("latency quantiles out of order: %+v", r)
		}
	}
	var out bytes.Buffer
	if err := WriteMarkdown(&out, rows); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 2+len(rows) {
		t.Errorf("table has %d lines, want %d:\n%s", lines, 2+len(rows), out.String())
	}

	// Paced produce against the broker started by hand, through the -brokers path.
	p, err := brokerproc.Start(brokerproc.Options{Binary: bin, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	pr, err := Produce(ctx, ProduceConfig{Brokers: []string{p.Addr}, Topic: "paced", Partitions: 2, Records: 500, RecordBytes: 10, Rate: 5000})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := Consume(ctx, ConsumeConfig{Brokers: []string{p.Addr}, Topic: "paced"})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Records != 500 || cr.Records != 500 || cr.Bytes != 5000 {
		t.Errorf("paced: produced %d, consumed %d records (%d bytes), want 500 (5000 bytes)", pr.Records, cr.Records, cr.Bytes)
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := quantile(d, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing")
	}
}

// TestShareSmoke runs P3 on a freshly built exactq with a few records: every record must be
// accepted exactly once and every row filled in; it never checks how fast.
func TestShareSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker")
	}
	bin, ctx := buildExactq(t)
	s := Suite{
		Targets:    []Target{{Name: "exactq", Binary: bin, Fsync: "always", TempDir: t.TempDir()}},
		Partitions: []int32{1},
		Records:    2000, RecordBytes: 100, Share: true, Consumers: []int{1, 3}, ShareMaxRecords: 100,
	}
	rows, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for i, r := range rows {
		if r.Workload != "share" || r.Records != 2000 || r.Consumers != s.Consumers[i] || r.MBps <= 0 || r.Elapsed <= 0 || r.Duplicates != 0 {
			t.Errorf("row not filled in: %+v", r)
		}
	}
	var out bytes.Buffer
	if err := WriteMarkdown(&out, rows); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 2+len(rows) || !strings.Contains(out.String(), "| consumers |") {
		t.Errorf("share table:\n%s", out.String())
	}

	// Share against a broker started by hand (the -brokers path), records on 2 partitions.
	p, err := brokerproc.Start(brokerproc.Options{Binary: bin, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if _, err := Produce(ctx, ProduceConfig{Brokers: []string{p.Addr}, Topic: "q", Partitions: 2, Records: 300, RecordBytes: 10}); err != nil {
		t.Fatal(err)
	}
	sr, err := Share(ctx, ShareConfig{Brokers: []string{p.Addr}, Topic: "q", Group: "g", Consumers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sr.Records != 300 || sr.Bytes != 3000 || sr.Duplicates != 0 || sr.Deliveries != 300 || sr.PerConsumer[0]+sr.PerConsumer[1] != 300 {
		t.Errorf("share: %+v, want 300 records (3000 bytes) each delivered once", sr)
	}
	// The drained probe sees records that are left: ten more, not consumed.
	if _, err := Produce(ctx, ProduceConfig{Brokers: []string{p.Addr}, Topic: "q", Partitions: 2, Records: 10, RecordBytes: 10}); err != nil {
		t.Fatal(err)
	}
	got, err := probeShareDrained(ctx, []string{p.Addr}, "g", "q", []int32{0, 1}, time.Second)
	if err != nil || len(got) != 10 {
		t.Errorf("probe of a group with 10 records left: acquired %v, %v", got, err)
	}
}

// TestSuiteWorkloadsSmoke runs P4-P7 on a freshly built exactq at tiny sizes: the pipelines
// must commit exactly one output per input, P6 must receive every record and P7 must
// restart into the in-flight state it built; it never checks how fast.
func TestSuiteWorkloadsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker")
	}
	bin, ctx := buildExactq(t)
	s := Suite{
		Targets:   []Target{{Name: "exactq", Binary: bin, Fsync: "never", TempDir: t.TempDir()}},
		Workloads: []string{P4, P5, P6, P7},
		Records:   2000, RecordBytes: 100, Consumers: []int{2},
		LatencyRate: 2000, LatencyRecords: 1000,
		Restart: RestartConfig{LogBytes: 1 << 20, InFlight: 400, Locks: 200},
	}
	rows, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckComplete(&s, rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		switch r.WorkloadID() {
		case P4, P5:
			if r.Records != 2000 || r.Commits == 0 || r.P50 <= 0 || r.P50 > r.P99 {
				t.Errorf("pipeline row: %+v", r)
			}
		case P6:
			if r.Records != 1000 || r.Rate != 2000 || r.P50 <= 0 || r.P50 > r.P99 || r.Duplicates != 0 {
				t.Errorf("latency row: %+v", r)
			}
		case P7:
			rr := r.Restart
			if rr == nil || rr.InFlight < 400 || rr.Serving <= 0 || rr.FirstFetch < rr.Serving || rr.Loaded < rr.FirstFetch || rr.RSSLoaded <= 0 {
				t.Errorf("restart row: %+v %+v", r, rr)
			}
		}
	}
}

// buildExactq builds ./cmd/exactq into a temporary directory; ctx ends with the test (at
// most 5 minutes).
func buildExactq(t *testing.T) (string, context.Context) {
	t.Helper()
	root, err := brokerproc.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "exactq")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	if err := brokerproc.Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	return bin, ctx
}
