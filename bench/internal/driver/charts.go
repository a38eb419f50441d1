package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// RatioChart is the bar chart of exactq's figures over Apache Kafka's, per workload
// variant and exactq system, oriented so that above 1 means exactq is better: throughput
// ratios for P1-P4, P5 (transactional share acks) over Kafka's P4, Kafka's p99 over
// exactq's for P6, Kafka's time to the first share fetch after a restart over exactq's for
// P7. Red marks are BENCHMARKS.md's targets; the dashed line is parity.
func RatioChart(sums []Summary) BarChart {
	systems := exactqSystems(sums)
	c := BarChart{Series: systems, Ref: 1, Log: true, Axis: "exactq vs Apache Kafka (log scale; > 1: exactq better)",
		Format: func(v float64) string { return fmt.Sprintf("%.2fx", v) }}
	runs := 0
	var keys []string
	for _, s := range sums {
		if !slices.Contains(keys, s.Key()) {
			keys = append(keys, s.Key())
		}
		runs = max(runs, s.Runs)
	}
	c.Title = fmt.Sprintf("exactq / Apache Kafka 4.4, median of %d run%s (red: target)", runs, plural(runs))
	for _, key := range keys {
		g := BarGroup{Label: key}
		ref := findKafka(sums, key)
		switch {
		case key == "P5 eos-share":
			g.Label, g.Target, ref = "P5 eos-share vs Kafka's P4", 1, findKafka(sums, "P4 eos-group")
		case key == "P5 share-pipeline":
			continue
		case len(key) > 1 && (key[:2] == P1 || key[:2] == P2):
			g.Target = 1.5
		case key[:2] == P3:
			g.Target = 2
		case key[:2] == P6:
			g.Label, g.Target = "P6 e2e p99 (Kafka / exactq)", 2
		case key[:2] == P7:
			g.Label = "P7 restart (Kafka / exactq)"
		}
		if ref == nil {
			continue
		}
		for _, sys := range systems {
			v := 0.0
			if m, _, _, ok := ratio(find(sums, key, sys), ref); ok && m > 0 {
				v = m
				if key[:2] == P6 || key[:2] == P7 {
					v = 1 / m
				}
			}
			g.Values = append(g.Values, v)
		}
		c.Groups = append(c.Groups, g)
	}
	return c
}

// LatencyChart is the bar chart of median p99 latencies (ms, log scale) per workload with a
// latency and per system: produce (P1), the pipelines' poll-to-commit (P4, P5), and the
// end-to-end produce-to-share-consumer latency (P6).
func LatencyChart(sums []Summary) BarChart {
	var systems, keys []string
	runs := 0
	for _, s := range sums {
		if !slices.Contains(systems, s.System) {
			systems = append(systems, s.System)
		}
		if (s.ID == P1 || s.ID == P4 || s.ID == P5 || s.ID == P6) && !slices.Contains(keys, s.Key()) {
			keys = append(keys, s.Key())
		}
		runs = max(runs, s.Runs)
	}
	c := BarChart{Series: systems, Log: true, Axis: "p99 latency, ms (log scale; lower is better)",
		Title:  fmt.Sprintf("p99 latency, median of %d run%s", runs, plural(runs)),
		Format: func(v float64) string { return fmt.Sprintf("%.3g ms", v) }}
	for _, key := range keys {
		g := BarGroup{Label: key}
		for _, sys := range systems {
			v := 0.0
			if s := find(sums, key, sys); s != nil {
				v = float64(s.P99.Microseconds()) / 1000
			}
			g.Values = append(g.Values, v)
		}
		c.Groups = append(c.Groups, g)
	}
	return c
}

func exactqSystems(sums []Summary) []string {
	var out []string
	for _, s := range sums {
		if !s.Kafka && !slices.Contains(out, s.System) {
			out = append(out, s.System)
		}
	}
	return out
}

// WriteCharts writes ratios.png (when a Kafka reference was measured) and latency-p99.png
// into dir and returns the paths written.
func WriteCharts(dir string, sums []Summary) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	write := func(name string, c BarChart) error {
		if len(c.Groups) == 0 {
			return nil
		}
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := c.WritePNG(f); err != nil {
			f.Close()
			return err
		}
		out = append(out, path)
		return f.Close()
	}
	if err := write("ratios.png", RatioChart(sums)); err != nil {
		return out, err
	}
	return out, write("latency-p99.png", LatencyChart(sums))
}
