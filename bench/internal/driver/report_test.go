package driver

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// syntheticRows are three alternating runs of every workload on exactq (fsync never) and
// Kafka, with exactq at fixed multiples of Kafka.
func syntheticRows() []Row {
	var rows []Row
	for run := 1; run <= 3; run++ {
		k := float64(run) * 1000
		add := func(r Row, exactqRPS, kafkaRPS float64, ep99, kp99 time.Duration) {
			r.Run = run
			e := r
			e.Target, e.Fsync, e.RecordsPS, e.MBps, e.P99 = "exactq", "never", exactqRPS, exactqRPS/1000, ep99
			rows = append(rows, e)
			if kafkaRPS > 0 {
				kr := r
				kr.Target, kr.RecordsPS, kr.MBps, kr.P99 = KafkaTarget, kafkaRPS, kafkaRPS/1000, kp99
				rows = append(rows, kr)
			}
		}
		add(Row{ID: P1, Workload: "produce", Partitions: 1, Records: 10}, 2*k, k, 0, 0)
		add(Row{ID: P2, Workload: "consume", Partitions: 1, Records: 10}, 1.2*k, k, 0, 0)
		add(Row{ID: P3, Workload: "share", Consumers: 4, Records: 10}, 3*k, k, 0, 0)
		add(Row{ID: P4, Workload: "eos-group", Records: 10}, 2*k, k, 0, 0)
		add(Row{ID: P5, Workload: "share-pipeline", Records: 10}, 2*k, 0, 0, 0)
		add(Row{ID: P5, Workload: "eos-share", Records: 10}, 1.5*k, 0, 0, 0)
		add(Row{ID: P6, Workload: "e2e-latency", Records: 10}, k, k, time.Millisecond, 10*time.Millisecond)
		rr := &RestartResult{FirstFetch: 500 * time.Millisecond, Serving: 100 * time.Millisecond, InFlight: 1000, RSSBase: 10000, RSSLoaded: 30000}
		kr := &RestartResult{FirstFetch: 5 * time.Second, InFlight: 1000, RSSBase: 10000, RSSLoaded: 110000}
		rows = append(rows, Row{ID: P7, Workload: "restart", Target: "exactq", Fsync: "never", Run: run, Records: 1000, Elapsed: rr.FirstFetch, Restart: rr},
			Row{ID: P7, Workload: "restart", Target: KafkaTarget, Run: run, Records: 1000, Elapsed: kr.FirstFetch, Restart: kr})
	}
	return rows
}

func TestTargets(t *testing.T) {
	sums := Summarize(syntheticRows(), KafkaTarget)
	checks := CheckTargets(sums, 4000)
	want := map[string]bool{
		"P1 produce, 1 partition ≥ 1.5× Kafka":                    true, // 2×
		"P1 produce, 1 partition ≥ ½ loopback stream":             false,
		"P2 consume, 1 partition ≥ 1.5× Kafka":                    false, // 1.2×
		"P3 share, 4 consumers ≥ 2× Kafka":                        true,  // 3×
		"P5 ≥ 80% of the non-transactional share pipeline":        false, // 0.75×
		"P5 ≥ Kafka's P4":                                         true,  // 1.5k vs 1k
		"P6 p99 ≤ ½ Kafka's":                                      true,  // 0.1×
		"P7 first share fetch < 2 s after start (1000 in-flight)": true,
		"P7 < 32 B of memory per in-flight share record":          true, // 20 B
	}
	got := map[string]TargetCheck{}
	for _, c := range checks {
		got[c.Target] = c
	}
	for target, met := range want {
		c, ok := got[target]
		if !ok {
			t.Errorf("no check %q in %+v", target, checks)
			continue
		}
		if c.Met != met {
			t.Errorf("%s: met %v (%s), want %v", target, c.Met, c.Figure, met)
		}
	}
	if f := got["P3 share, 4 consumers ≥ 2× Kafka"].Figure; f != "3.00× Kafka (per run 3.00–3.00)" {
		t.Errorf("P3 figure %q", f)
	}
	var b bytes.Buffer
	if err := WriteReport(&b, syntheticRows(), ReportInfo{Command: "x", LoopbackMBps: 4000}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| P3 share, 4 consumers | exactq fsync never | 3 | 6000 |", "| P7 restart | kafka-4.4 | 3 |",
		"| P5 ≥ Kafka's P4 | exactq fsync never |", "## Every run", "| exactq | never | 1 | P5 eos-share |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRatioChartData(t *testing.T) {
	c := RatioChart(Summarize(syntheticRows(), KafkaTarget))
	if len(c.Series) != 1 || c.Series[0] != "exactq fsync never" {
		t.Fatalf("series %v", c.Series)
	}
	want := map[string]float64{"P1 produce, 1 partition": 2, "P3 share, 4 consumers": 3, "P5 eos-share vs Kafka's P4": 1.5,
		"P6 e2e p99 (Kafka / exactq)": 10, "P7 restart (Kafka / exactq)": 10}
	for _, g := range c.Groups {
		if w, ok := want[g.Label]; ok {
			if len(g.Values) != 1 || g.Values[0] < w*0.999 || g.Values[0] > w*1.001 {
				t.Errorf("%s: %v, want %v", g.Label, g.Values, w)
			}
			delete(want, g.Label)
		}
		if strings.Contains(g.Label, "share-pipeline") {
			t.Errorf("the baseline has no Kafka counterpart: %s", g.Label)
		}
	}
	if len(want) > 0 {
		t.Errorf("groups missing: %v", want)
	}
}

func TestCheckComplete(t *testing.T) {
	s := &Suite{Workloads: AllWorkloads, Targets: []Target{{Name: "exactq", Binary: "x", Fsync: "never"}, {Name: KafkaTarget, Kafka: true}}}
	rows := syntheticRows()
	if err := CheckComplete(s, rows); err != nil {
		t.Fatal(err)
	}
	var without []Row
	for _, r := range rows {
		if !(r.Workload == "eos-share") {
			without = append(without, r)
		}
	}
	if err := CheckComplete(s, without); err == nil || !strings.Contains(err.Error(), "P5 eos-share on exactq fsync never") {
		t.Errorf("missing P5 not reported: %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"10GB": 10e9, "512MiB": 512 << 20, "1.5 GB": 1.5e9, "4096": 4096} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseBytes("lots"); err == nil {
		t.Error("parseBytes(lots) succeeded")
	}
}

// TestCPUPerUnit: broker CPU is normalised per GB of record values for P1/P2 and per
// million acknowledgements for P3, and the summary compares it with Kafka's.
func TestCPUPerUnit(t *testing.T) {
	var rows []Row
	for run := 1; run <= 3; run++ {
		rows = append(rows,
			Row{ID: P1, Workload: "produce-raw", Target: "exactq", Fsync: "never", Partitions: 1, Run: run, Records: 1000000, RecordBytes: 1000, Elapsed: time.Second, RecordsPS: 2e6, BrokerCPU: time.Second, ClientCPU: 3 * time.Second},
			Row{ID: P1, Workload: "produce-raw", Target: KafkaTarget, Partitions: 1, Run: run, Records: 1000000, RecordBytes: 1000, Elapsed: time.Second, RecordsPS: 1e6, BrokerCPU: 4 * time.Second},
			Row{ID: P3, Workload: "share", Target: "exactq", Fsync: "never", Consumers: 4, Run: run, Records: 500000, RecordBytes: 1000, Elapsed: time.Second, RecordsPS: 1e6, BrokerCPU: time.Second})
	}
	if got := cpuPerUnit(rows[0]); got != "1.00 s per GB" {
		t.Errorf("P1: %q, want 1.00 s per GB", got)
	}
	if got := cpuPerUnit(rows[2]); got != "2.00 s per M acks" {
		t.Errorf("P3: %q, want 2.00 s per M acks", got)
	}
	var b bytes.Buffer
	if err := WriteSummary(&b, Summarize(rows, KafkaTarget)); err != nil {
		t.Fatal(err)
	}
	want := "| P1 produce-raw, 1 partition | exactq fsync never | 3 | 2000000 | 0.0 | 0 µs | 0 µs | 1.00 s | 1.00 s per GB | 3.00 s | - | 2.00× (2.00–2.00) | 0.25× |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
	checks := map[string]bool{}
	for _, c := range CheckTargets(Summarize(rows, KafkaTarget), 0) {
		checks[c.Target] = c.Met
	}
	if met, ok := checks["P1 produce-raw, 1 partition ≥ 2× Kafka (fsync never)"]; !ok || !met {
		t.Errorf("raw generator target: %v", checks)
	}
}
