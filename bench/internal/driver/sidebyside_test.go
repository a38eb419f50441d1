package driver

import (
	"strings"
	"testing"
)

func TestWriteRatios(t *testing.T) {
	var rows []Row
	for run, v := range []float64{100, 300, 200} {
		rows = append(rows,
			Row{Target: "exactq", Fsync: "always", Partitions: 1, Run: run + 1, Workload: "produce", MBps: 2 * v},
			Row{Target: "exactq", Fsync: "never", Partitions: 1, Run: run + 1, Workload: "produce", MBps: v},
			Row{Target: KafkaTarget, Partitions: 1, Run: run + 1, Workload: "produce", MBps: v})
	}
	var b strings.Builder
	if err := WriteRatios(&b, rows, KafkaTarget); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| produce | 1 | exactq fsync always | 400.0 | 200.0 | 2.00× | 2.00–2.00 | yes |",
		"| produce | 1 | exactq fsync never | 200.0 | 200.0 | 1.00× | 1.00–1.00 | no |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}
