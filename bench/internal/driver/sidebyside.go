package driver

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/exactq/exactq/bench/internal/kafka"
)

// KafkaTarget is the label of the Apache Kafka reference in the results.
const KafkaTarget = "kafka-4.4"

// startKafka starts the Apache Kafka reference (bench/kafka) for a whole suite: one JVM,
// warmed up with a produce and a consume of warm records before any measurement, with a
// fresh topic per measurement like every other external target. exactq, by contrast, is
// started afresh for every measurement; a warm JVM is Kafka's normal state, a cold one would
// understate it.
func startKafka(ctx context.Context, tmp string, warm int, size int, log io.Writer) (Target, func(), error) {
	dir, err := os.MkdirTemp(tmp, "exactq-bench-kafka-")
	if err != nil {
		return Target{}, nil, err
	}
	b, err := kafka.StartBroker(ctx, kafka.Options{Dir: dir, Log: log})
	if err != nil {
		os.RemoveAll(dir)
		return Target{}, nil, err
	}
	stop := func() { b.Stop(); os.RemoveAll(dir) }
	tg := Target{Name: KafkaTarget, Brokers: []string{b.Addr}, Pid: b.Pid, Kafka: true, TempDir: tmp}
	if warm > 0 {
		if log != nil {
			fmt.Fprintf(log, "warming up Kafka's JVM: produce and consume %d × %d B\n", warm, size)
		}
		topic := "bench-warmup"
		pr, err := Produce(ctx, ProduceConfig{Brokers: tg.Brokers, Topic: topic, Partitions: 8, Records: warm, RecordBytes: size})
		if err == nil {
			_, err = Consume(ctx, ConsumeConfig{Brokers: tg.Brokers, Topic: topic})
		}
		if err != nil {
			stop()
			return Target{}, nil, fmt.Errorf("warming up Kafka: %w", err)
		}
		if log != nil {
			fmt.Fprintf(log, "  warm-up produce %.1f MB/s\n", pr.MBps())
		}
	}
	return tg, stop, nil
}

// WriteRatios writes, for every workload and partition count, the median throughput of
// each exactq fsync policy and of the reference target (by name), their ratio, the range of
// the per-run ratios (run i of exactq over run i of the reference: the runs alternate, so
// each pair shares the machine's state), and whether the 1.5× target of BENCHMARKS.md
// (P1/P2) holds for that median ratio.
func WriteRatios(w io.Writer, rows []Row, reference string) error {
	type key struct {
		workload   string
		partitions int32
		consumers  int
	}
	type series struct{ byRun map[int]float64 }
	get := func(m map[string]*series, name string) *series {
		s := m[name]
		if s == nil {
			s = &series{byRun: map[int]float64{}}
			m[name] = s
		}
		return s
	}
	groups := map[key]map[string]*series{}
	var keys []key
	for _, r := range rows {
		k := key{r.Workload, r.Partitions, r.Consumers}
		if groups[k] == nil {
			groups[k] = map[string]*series{}
			keys = append(keys, k)
		}
		name := r.Target
		if r.Target != reference && r.Fsync != "" {
			name += " fsync " + r.Fsync
		}
		get(groups[k], name).byRun[r.Run] = r.MBps
	}
	var b strings.Builder
	b.WriteString("| workload | partitions | system | median MB/s | " + reference + " median MB/s | ratio | per-run ratios | ≥ 1.5× |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---|---|\n")
	for _, k := range keys {
		ref := groups[k][reference]
		if ref == nil {
			continue
		}
		var names []string
		for n := range groups[k] {
			if n != reference {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		refMed := median(ref.byRun)
		wl := k.workload
		if k.consumers > 0 {
			wl = fmt.Sprintf("%s, %d consumers", wl, k.consumers)
		}
		for _, n := range names {
			s := groups[k][n]
			med := median(s.byRun)
			var per []float64
			for run, v := range s.byRun {
				if rv, ok := ref.byRun[run]; ok && rv > 0 {
					per = append(per, v/rv)
				}
			}
			slices.Sort(per)
			rng := "-"
			if len(per) > 0 {
				rng = fmt.Sprintf("%.2f–%.2f", per[0], per[len(per)-1])
			}
			ratio, met := 0.0, "-"
			if refMed > 0 {
				ratio = med / refMed
				met = "no"
				if ratio >= 1.5 {
					met = "yes"
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.1f | %.1f | %.2f× | %s | %s |\n", wl, k.partitions, n, med, refMed, ratio, rng, met)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func median(byRun map[int]float64) float64 {
	var v []float64
	for _, x := range byRun {
		v = append(v, x)
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
