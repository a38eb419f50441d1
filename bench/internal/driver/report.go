package driver

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// WriteMarkdown writes rows as Markdown tables, one per kind of workload, each with its own
// columns (plain produce/consume rows first, then share, pipeline, latency and restart
// rows), separated by blank lines.
func WriteMarkdown(w io.Writer, rows []Row) error {
	var plain, share, pipe, lat, restart []Row
	for _, r := range rows {
		switch r.WorkloadID() {
		case P3:
			share = append(share, r)
		case P4, P5:
			pipe = append(pipe, r)
		case P6:
			lat = append(lat, r)
		case P7:
			restart = append(restart, r)
		default:
			plain = append(plain, r)
		}
	}
	var b strings.Builder
	sep := func() {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
	}
	if len(plain) > 0 || len(rows) == 0 {
		writePlainTable(&b, plain)
	}
	for _, t := range []struct {
		rows  []Row
		write func(*strings.Builder, []Row)
	}{{share, writeShareTable}, {pipe, writePipelineTable}, {lat, writeLatencyTable}, {restart, writeRestartTable}} {
		if len(t.rows) > 0 {
			sep()
			t.write(&b, t.rows)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cpuRSS(r Row) (cpu, rss string) {
	cpu = fmtCPU(r.BrokerCPU)
	if r.BrokerCPU > 0 {
		cpu = fmt.Sprintf("%s (%.0f%%)", cpu, 100*r.BrokerCPU.Seconds()/r.Elapsed.Seconds())
	}
	return cpu, fmtMiB(r.BrokerRSS)
}

func fsyncCol(r Row) string {
	if r.Fsync == "" {
		return "-"
	}
	return r.Fsync
}

func writeShareTable(b *strings.Builder, rows []Row) {
	b.WriteString("| target | fsync | partitions | consumers | run | workload | records | record size | MB/s | records/s | first record after | duplicates | redelivered | described start-offset lag | broker CPU | broker peak RSS |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		cpu, rss := cpuRSS(r)
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %s | %d | %d B | %.1f | %.0f | %s | %d | %d | %d | %s | %s |\n",
			r.Target, fsyncCol(r), r.Partitions, r.Consumers, r.Run, r.Workload, r.Records, r.RecordBytes, r.MBps, r.RecordsPS,
			fmtDur(r.Startup), r.Duplicates, r.Redelivered, r.StateLag, cpu, rss)
	}
}

func writePlainTable(b *strings.Builder, rows []Row) {
	b.WriteString("| target | fsync | partitions | run | workload | records | record size | MB/s | records/s | p50 | p99 | p99.9 | broker CPU | broker peak RSS |\n")
	b.WriteString("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		lat := func(d time.Duration) string {
			if !strings.HasPrefix(r.Workload, "produce") {
				return "-"
			}
			return fmtDur(d)
		}
		cpu, rss := cpuRSS(r)
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %d | %d B | %.1f | %.0f | %s | %s | %s | %s | %s |\n",
			r.Target, fsyncCol(r), r.Partitions, r.Run, r.Workload, r.Records, r.RecordBytes, r.MBps, r.RecordsPS,
			lat(r.P50), lat(r.P99), lat(r.P999), cpu, rss)
	}
}

func writePipelineTable(b *strings.Builder, rows []Row) {
	b.WriteString("| target | fsync | run | workload | inputs | record size | MB/s | records/s | poll→commit p50 | p99 | p99.9 | commits | aborts | redelivered | joined after | broker CPU | broker peak RSS |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		cpu, rss := cpuRSS(r)
		fmt.Fprintf(b, "| %s | %s | %d | %s %s | %d | %d B | %.1f | %.0f | %s | %s | %s | %d | %d | %d | %s | %s | %s |\n",
			r.Target, fsyncCol(r), r.Run, r.WorkloadID(), r.Workload, r.Records, r.RecordBytes, r.MBps, r.RecordsPS,
			fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P999), r.Commits, r.Aborts, r.Redelivered, fmtDur(r.Startup), cpu, rss)
	}
}

func writeLatencyTable(b *strings.Builder, rows []Row) {
	b.WriteString("| target | fsync | run | consumers | offered records/s | records | received records/s | e2e p50 | p99 | p99.9 | duplicates | broker CPU | broker peak RSS |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		cpu, rss := cpuRSS(r)
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %d | %.0f | %s | %s | %s | %d | %s | %s |\n",
			r.Target, fsyncCol(r), r.Run, r.Consumers, r.Rate, r.Records, r.RecordsPS, fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P999),
			r.Duplicates, cpu, rss)
	}
}

func writeRestartTable(b *strings.Builder, rows []Row) {
	b.WriteString("| target | fsync | run | log | partitions | in-flight records | serving (Metadata) | first share fetch | all partitions fetched | RSS log only | RSS loaded | bytes per in-flight record | broker CPU to loaded | broker peak RSS |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		rr := r.Restart
		if rr == nil {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Target, fsyncCol(r), r.Run, fmtBytes(rr.LogBytes), r.Partitions, rr.InFlight, fmtDur(rr.Serving), fmtDur(rr.FirstFetch),
			fmtDur(rr.Loaded), fmtMiB(rr.RSSBase), fmtMiB(rr.RSSLoaded), fmtBytesPerRecord(rr.BytesPerInFlight()),
			fmtCPU(r.BrokerCPU), fmtMiB(r.BrokerRSS))
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	default:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	}
}

// Summary is one workload variant on one system, over its runs.
type Summary struct {
	ID, Workload string
	Partitions   int32 // P1/P2
	Consumers    int   // P3
	System       string
	Kafka        bool
	Runs         int
	// Medians over the runs (RSS: the largest), of the runs whose figure is known: CPU and
	// RSS are unknownFigure, BytesPerRecord NaN, when no run's could be read.
	RecordsPS, MBps float64
	P50, P99        time.Duration
	CPU             time.Duration
	RSS             int64
	// CPUPer is the median broker CPU-seconds per GB of record values or per million
	// acknowledgements (cpuPer; NaN when unknown); ClientCPU the median client CPU.
	CPUPer    float64
	ClientCPU time.Duration
	// P7 medians.
	Serving, FirstFetch, Loaded time.Duration
	BytesPerRecord              float64
	InFlight                    int
	// Primary is the workload's headline figure per run: records/s (P1-P5), p99 in
	// seconds (P6), first share fetch after a restart in seconds (P7).
	Primary map[int]float64
}

// Key names the workload variant ("P1 produce, 8 partitions").
func (s Summary) Key() string {
	switch {
	case s.ID == P1 || s.ID == P2:
		return fmt.Sprintf("%s %s, %d partition%s", s.ID, s.Workload, s.Partitions, plural(int(s.Partitions)))
	case s.Consumers > 0 && s.ID == P3:
		return fmt.Sprintf("%s %s, %d consumers", s.ID, s.Workload, s.Consumers)
	}
	return s.ID + " " + s.Workload
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// lowerIsBetter reports whether the summary's primary figure is a time.
func (s Summary) lowerIsBetter() bool { return s.ID == P6 || s.ID == P7 }

// Summarize groups rows by workload variant and system, in the order they first appear.
func Summarize(rows []Row, kafkaTarget string) []Summary {
	type key struct {
		id, workload, system string
		partitions           int32
		consumers            int
	}
	var order []key
	by := map[key][]Row{}
	for _, r := range rows {
		k := key{r.WorkloadID(), r.Workload, r.System(), 0, 0}
		switch k.id {
		case P1, P2:
			k.partitions = r.Partitions
		case P3:
			k.consumers = r.Consumers
		}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	var out []Summary
	for _, k := range order {
		rs := by[k]
		s := Summary{ID: k.id, Workload: k.workload, Partitions: k.partitions, Consumers: k.consumers, System: k.system,
			Kafka: rs[0].Target == kafkaTarget, Runs: len(rs), Primary: map[int]float64{}}
		var rps, mb, p50, p99, cpu, rss, serving, first, loaded, bpr, per, client []float64
		for _, r := range rs {
			per, client = append(per, cpuPer(r)), append(client, figure(r.ClientCPU))
			rps, mb = append(rps, r.RecordsPS), append(mb, r.MBps)
			p50, p99, cpu = append(p50, float64(r.P50)), append(p99, float64(r.P99)), append(cpu, figure(r.BrokerCPU))
			rss = append(rss, figure(r.BrokerRSS))
			switch {
			case r.Restart != nil:
				serving, first, loaded = append(serving, float64(r.Restart.Serving)), append(first, float64(r.Restart.FirstFetch)), append(loaded, float64(r.Restart.Loaded))
				bpr = append(bpr, r.Restart.BytesPerInFlight())
				s.InFlight = r.Restart.InFlight
				s.Primary[r.Run] = r.Restart.FirstFetch.Seconds()
			case k.id == P6:
				s.Primary[r.Run] = r.P99.Seconds()
			default:
				s.Primary[r.Run] = r.RecordsPS
			}
		}
		s.RecordsPS, s.MBps = medianOf(rps), medianOf(mb)
		s.P50, s.P99, s.CPU = time.Duration(medianOf(p50)), time.Duration(medianOf(p99)), time.Duration(orUnknown(medianKnown(cpu)))
		s.RSS = int64(orUnknown(maxKnown(rss)))
		s.Serving, s.FirstFetch, s.Loaded = time.Duration(medianOf(serving)), time.Duration(medianOf(first)), time.Duration(medianOf(loaded))
		s.BytesPerRecord = medianKnown(bpr)
		s.CPUPer, s.ClientCPU = medianKnown(per), time.Duration(orUnknown(medianKnown(client)))
		out = append(out, s)
	}
	return out
}

// medianOf is the median of v (0 for none).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// ratio compares two summaries' primary figures: the ratio of the medians and the range of
// the per-run ratios (run i over run i: the runs alternate, so each pair shares the
// machine's state). ok is false when either side is missing.
func ratio(a, b *Summary) (med, lo, hi float64, ok bool) {
	if a == nil || b == nil {
		return 0, 0, 0, false
	}
	am, bm := medianOf(values(a.Primary)), medianOf(values(b.Primary))
	if bm == 0 {
		return 0, 0, 0, false
	}
	med, lo, hi = am/bm, math.Inf(1), math.Inf(-1)
	for run, v := range a.Primary {
		if w, ok := b.Primary[run]; ok && w > 0 {
			lo, hi = min(lo, v/w), max(hi, v/w)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = med, med
	}
	return med, lo, hi, true
}

func values(m map[int]float64) []float64 {
	out := make([]float64, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// find returns the summary of the variant key on system (nil if absent).
func find(sums []Summary, key, system string) *Summary {
	for i := range sums {
		if sums[i].Key() == key && sums[i].System == system {
			return &sums[i]
		}
	}
	return nil
}

func findKafka(sums []Summary, key string) *Summary {
	for i := range sums {
		if sums[i].Key() == key && sums[i].Kafka {
			return &sums[i]
		}
	}
	return nil
}

// WriteSummary writes one row per workload variant and system: medians, and the ratio to
// Apache Kafka's median on the same variant (for P6 and P7 a ratio of times: below 1 is
// better).
func WriteSummary(w io.Writer, sums []Summary) error {
	var b strings.Builder
	b.WriteString("| workload | system | runs | records/s | MB/s | p50 | p99 | broker CPU | broker CPU per unit | client CPU | broker peak RSS | vs Kafka (median; per run) | broker CPU per unit vs Kafka |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for i := range sums {
		s := &sums[i]
		vs, cpuVs := "-", "-"
		if k := findKafka(sums, s.Key()); k != nil && !s.Kafka {
			if m, lo, hi, ok := ratio(s, k); ok {
				vs = fmt.Sprintf("%.2f× (%.2f–%.2f)", m, lo, hi)
			}
			if !math.IsNaN(s.CPUPer) && !math.IsNaN(k.CPUPer) && k.CPUPer > 0 {
				cpuVs = fmt.Sprintf("%.2f×", s.CPUPer/k.CPUPer)
			}
		}
		per := "-"
		if !math.IsNaN(s.CPUPer) && s.CPUPer > 0 {
			per = fmt.Sprintf("%.2f %s", s.CPUPer, cpuUnit(s.ID))
		}
		rps, mb, p50, p99 := fmt.Sprintf("%.0f", s.RecordsPS), fmt.Sprintf("%.1f", s.MBps), fmtDur(s.P50), fmtDur(s.P99)
		switch {
		case s.ID == P7:
			rps, mb = "-", "-"
			p50 = "first fetch " + fmtDur(s.FirstFetch)
			p99 = "serving " + fmtDur(s.Serving)
		case s.ID == P2 || s.ID == P3:
			p50, p99 = "-", "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Key(), s.System, s.Runs, rps, mb, p50, p99,
			fmtCPU(s.CPU), per, fmtCPU(s.ClientCPU), fmtMiB(s.RSS), vs, cpuVs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// TargetCheck is one BENCHMARKS.md target for one system.
type TargetCheck struct {
	Target, System, Figure string
	Met                    bool
	Known                  bool // false: not measured in this suite, or unreadable ("unknown")
}

// CheckTargets evaluates every target of BENCHMARKS.md the summaries allow; loopbackMBps
// is the one-stream loopback ceiling measured in the same session (0: not measured).
func CheckTargets(sums []Summary, loopbackMBps float64) []TargetCheck {
	var out []TargetCheck
	vsKafka := func(target string, s *Summary, key string, want float64, inverse bool) {
		k := findKafka(sums, key)
		m, lo, hi, ok := ratio(s, k)
		if !ok {
			return
		}
		tc := TargetCheck{Target: target, System: s.System, Known: true}
		if inverse { // a time: exactq ÷ Kafka must be at most want
			tc.Met = m <= want
		} else {
			tc.Met = m >= want
		}
		tc.Figure = fmt.Sprintf("%.2f× Kafka (per run %.2f–%.2f)", m, lo, hi)
		out = append(out, tc)
	}
	for i := range sums {
		s := &sums[i]
		if s.Kafka {
			continue
		}
		key := s.Key()
		switch s.ID {
		case P1, P2:
			if raw := strings.HasSuffix(s.Workload, "-raw"); raw {
				// BENCHMARKS.md: with the broker-bound generator, 2× Kafka like for like, and
				// fsync always at least Kafka without.
				if strings.HasSuffix(s.System, "fsync never") {
					vsKafka(fmt.Sprintf("%s ≥ 2× Kafka (fsync never)", key), s, key, 2, false)
				} else {
					vsKafka(fmt.Sprintf("durability: %s with fsync ≥ 1.0× Kafka without", key), s, key, 1.0, false)
				}
				continue
			}
			vsKafka(fmt.Sprintf("%s ≥ 1.5× Kafka", key), s, key, 1.5, false)
			if loopbackMBps > 0 {
				out = append(out, TargetCheck{Target: fmt.Sprintf("%s ≥ ½ loopback stream", key), System: s.System, Known: true,
					Met:    s.MBps >= loopbackMBps/2,
					Figure: fmt.Sprintf("%.0f MB/s = %.2f of %.0f MB/s", s.MBps, s.MBps/loopbackMBps, loopbackMBps)})
			}
			if s.ID == P1 && strings.HasSuffix(s.System, "fsync always") {
				vsKafka(fmt.Sprintf("durability: %s with fsync ≥ 1.0× Kafka without", key), s, key, 1.0, false)
			}
		case P3:
			vsKafka(fmt.Sprintf("%s ≥ 2× Kafka", key), s, key, 2, false)
		case P5:
			if s.Workload != "eos-share" {
				continue
			}
			if base := find(sums, "P5 share-pipeline", s.System); base != nil {
				m, lo, hi, _ := ratio(s, base)
				out = append(out, TargetCheck{Target: "P5 ≥ 80% of the non-transactional share pipeline", System: s.System, Known: true,
					Met: m >= 0.8, Figure: fmt.Sprintf("%.2f× (per run %.2f–%.2f): %.0f vs %.0f records/s", m, lo, hi, s.RecordsPS, base.RecordsPS)})
			}
			if k := findKafka(sums, "P4 eos-group"); k != nil {
				m, lo, hi, _ := ratio(s, k)
				out = append(out, TargetCheck{Target: "P5 ≥ Kafka's P4", System: s.System, Known: true,
					Met: m >= 1, Figure: fmt.Sprintf("%.2f× (per run %.2f–%.2f): %.0f vs %.0f records/s", m, lo, hi, s.RecordsPS, k.RecordsPS)})
			}
		case P6:
			vsKafka("P6 p99 ≤ ½ Kafka's", s, key, 0.5, true)
		case P7:
			kf := ""
			if k := findKafka(sums, key); k != nil {
				kf = fmt.Sprintf("; Kafka %s (serving %s)", fmtDur(k.FirstFetch), fmtDur(k.Serving))
			}
			out = append(out, TargetCheck{Target: fmt.Sprintf("P7 first share fetch < 2 s after start (%d in-flight)", s.InFlight), System: s.System, Known: true,
				Met: s.FirstFetch < 2*time.Second, Figure: fmt.Sprintf("%s (serving %s, all partitions %s)%s", fmtDur(s.FirstFetch), fmtDur(s.Serving), fmtDur(s.Loaded), kf)})
			kb := ""
			if k := findKafka(sums, key); k != nil {
				kb = fmt.Sprintf("; Kafka %s B", fmtBytesPerRecord(k.BytesPerRecord))
			}
			known := !math.IsNaN(s.BytesPerRecord)
			out = append(out, TargetCheck{Target: "P7 < 32 B of memory per in-flight share record", System: s.System, Known: known,
				Met: known && s.BytesPerRecord < 32, Figure: fmt.Sprintf("%s B (RSS delta over %d records)%s", fmtBytesPerRecord(s.BytesPerRecord), s.InFlight, kb)})
		}
	}
	return out
}

// WriteTargets writes the target checks as a Markdown table.
func WriteTargets(w io.Writer, checks []TargetCheck) error {
	var b strings.Builder
	b.WriteString("| target | system | figure | met |\n|---|---|---|---|\n")
	for _, c := range checks {
		met := "**no**"
		switch {
		case !c.Known:
			met = "unknown"
		case c.Met:
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.Target, c.System, c.Figure, met)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReportInfo is what a report says about its session.
type ReportInfo struct {
	Command      string
	Started      time.Time
	Elapsed      time.Duration
	LoopbackMBps float64 // one loopback TCP stream, measured before the suite (0: not measured)
	Machine      []string
	// Load is the 1-minute load average sampled during the run (other work on the machine
	// shows up here).
	Load []float64
}

// WriteReport writes a suite's results: the session, the summary per workload and system,
// the targets of BENCHMARKS.md met or missed, and every run.
func WriteReport(w io.Writer, rows []Row, info ReportInfo) error {
	sums := Summarize(rows, KafkaTarget)
	runs := 0
	for _, s := range sums {
		runs = max(runs, s.Runs)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# exactq side by side with Apache Kafka %s\n\n", "4.4")
	fmt.Fprintf(&b, "- command: `%s`\n- started: %s, took %v\n", info.Command, info.Started.Format(time.RFC3339), info.Elapsed.Round(time.Second))
	for _, m := range info.Machine {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	if n := warnedRuns(rows); n > 0 {
		fmt.Fprintf(&b, "- **%d measured window%s started with the load average above the threshold**: see the CPU and machine state table\n", n, plural(n))
	}
	if len(info.Load) > 0 {
		fmt.Fprintf(&b, "- load average (1 min) during the run: min %.2f, median %.2f, max %.2f (%d samples)\n",
			slices.Min(info.Load), medianOf(info.Load), slices.Max(info.Load), len(info.Load))
	}
	if info.LoopbackMBps > 0 {
		fmt.Fprintf(&b, "- loopback TCP, one stream, 1 MiB writes: %.0f MB/s\n", info.LoopbackMBps)
	}
	fmt.Fprintf(&b, "\n## Summary (median of %d run%s; records of %d B)\n\n", runs, plural(runs), recordBytes(rows))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := WriteSummary(w, sums); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\n\"vs Kafka\" is exactq's median over Apache Kafka's: records/s for P1-P4 (above 1: exactq faster), "+
		"p99 for P6 and the time to the first share fetch after a restart for P7 (below 1: exactq faster); per run: run i over run i. "+
		"Pipelines (P4, P5): latency from the poll that returned an input to the commit that covered it. "+
		"P7: p50 column = first share fetch after the restart, p99 column = first Metadata answer.\n"); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\n## Targets (BENCHMARKS.md)\n\n"); err != nil {
		return err
	}
	if err := WriteTargets(w, CheckTargets(sums, info.LoopbackMBps)); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\n## Every run\n\n"); err != nil {
		return err
	}
	if err := WriteMarkdown(w, rows); err != nil {
		return err
	}
	var d strings.Builder
	writeDiagTable(&d, rows)
	if _, err := io.WriteString(w, "\n## CPU and machine state, every run\n\n"+
		"Broker CPU: user+system of the broker process and its descendants over the timed window; per unit: per GB of record values (P1, P2, P4) "+
		"or per million share acknowledgements (P3, P5, P6). Client CPU: the bench process over the same window. Run-queue wait: time the broker's "+
		"threads were runnable without a CPU (/proc/<pid>/task/*/schedstat). Dirty, writeback: /proc/vmstat page cache; major faults: pgmajfault during the window.\n\n"); err != nil {
		return err
	}
	_, err := io.WriteString(w, d.String())
	return err
}

func recordBytes(rows []Row) int {
	for _, r := range rows {
		if r.RecordBytes > 0 {
			return r.RecordBytes
		}
	}
	return 0
}

// CheckComplete fails unless every selected workload measured every target it applies to
// (P5: exactq only; P7: the brokers the driver starts) with something in it: the smoke
// run's guard that no workload silently dropped out.
func CheckComplete(s *Suite, rows []Row) error {
	var missing []string
	for _, w := range s.workloads() {
		for _, tg := range s.Targets {
			want := []string{""}
			switch {
			case w == P5 && tg.Kafka:
				continue
			case w == P5:
				want = []string{PipelineShare.String(), PipelineEOSShare.String()}
			case w == P7 && !tg.managed() && !tg.Kafka:
				continue
			}
			for _, wl := range want {
				ok := false
				for _, r := range rows {
					if r.WorkloadID() == w && r.System() == tg.label() && (wl == "" || r.Workload == wl) && r.Records > 0 {
						ok = true
					}
				}
				if !ok {
					missing = append(missing, strings.TrimSpace(w+" "+wl)+" on "+tg.label())
				}
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no measurement for %s", strings.Join(missing, ", "))
	}
	return nil
}

// cpuLine is a row's CPU figures for a progress line.
func cpuLine(r Row) string {
	s := fmt.Sprintf("broker CPU %s, client CPU %s", fmtCPU(r.BrokerCPU), fmtCPU(r.ClientCPU))
	if u := cpuPerUnit(r); u != "-" {
		s += ", broker " + u
	}
	return s
}

// perMillionAcks: the workload's broker CPU is normalised per million share
// acknowledgements (P3, P5, P6: every record is acknowledged by a share consumer), not per
// GB of record values (P1, P2, P4).
func perMillionAcks(id string) bool { return id == P3 || id == P5 || id == P6 }

// cpuPer is a row's broker CPU-seconds per GB of record values or per million
// acknowledgements (NaN: no CPU figure, or nothing moved).
func cpuPer(r Row) float64 {
	if r.BrokerCPU <= 0 || r.Records <= 0 || r.Restart != nil {
		return math.NaN()
	}
	if perMillionAcks(r.WorkloadID()) {
		return r.BrokerCPU.Seconds() / (float64(r.Records) / 1e6)
	}
	if r.RecordBytes <= 0 {
		return math.NaN()
	}
	return r.BrokerCPU.Seconds() / (float64(r.Records) * float64(r.RecordBytes) / 1e9)
}

// cpuUnit names cpuPer's unit for workload id.
func cpuUnit(id string) string {
	if perMillionAcks(id) {
		return "s per M acks"
	}
	return "s per GB"
}

// cpuPerUnit prints cpuPer with its unit ("-" without a figure).
func cpuPerUnit(r Row) string {
	v := cpuPer(r)
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f %s", v, cpuUnit(r.WorkloadID()))
}

// writeDiagTable is every measured window's CPU split and machine state: broker and client
// CPU, the broker's CPU per unit of work, the broker threads' run-queue wait, and the load
// average, dirty and writeback page cache and major faults before → after, so a slow run
// can be told from a fast one.
func writeDiagTable(b *strings.Builder, rows []Row) {
	b.WriteString("| workload | system | partitions | run | broker CPU | broker CPU per unit | client CPU | broker run-queue wait | load before → after | dirty MiB before → after | writeback MiB before → after | major faults | warning |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---|\n")
	for _, r := range rows {
		d := r.Diag
		if d == nil {
			continue
		}
		load := func(v float64) string {
			if v < 0 {
				return "?"
			}
			return fmt.Sprintf("%.2f", v)
		}
		mib := func(kib int64) string {
			if kib < 0 {
				return "?"
			}
			return fmt.Sprintf("%.1f", float64(kib)/1024)
		}
		faults := "?"
		if d.Before.MajFaults >= 0 && d.After.MajFaults >= 0 {
			faults = fmt.Sprint(d.After.MajFaults - d.Before.MajFaults)
		}
		warn := ""
		if d.LoadWarning {
			warn = "load above threshold at start"
		}
		fmt.Fprintf(b, "| %s %s | %s | %d | %d | %s | %s | %s | %s | %s → %s | %s → %s | %s → %s | %s | %s |\n",
			r.WorkloadID(), r.Workload, r.System(), r.Partitions, r.Run, fmtCPU(r.BrokerCPU), cpuPerUnit(r), fmtCPU(r.ClientCPU),
			fmtCPU(d.BrokerWait), load(d.Before.Load1), load(d.After.Load1), mib(d.Before.DirtyKiB), mib(d.After.DirtyKiB),
			mib(d.Before.WritebackKiB), mib(d.After.WritebackKiB), faults, warn)
	}
}

// warnedRuns counts the rows whose window started above the load threshold.
func warnedRuns(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.Diag != nil && r.Diag.LoadWarning {
			n++
		}
	}
	return n
}
