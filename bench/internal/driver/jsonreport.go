package driver

import (
	"encoding/json"
	"math"
	"os"
)

// jsonRow is a Row in results.json with its derived CPU figures in plain units, for
// tools that compare sessions: durations stay nanoseconds as in Row, and the CPU figures
// are also given in seconds with the per-unit figure (absent when unknown).
type jsonRow struct {
	Row
	System           string   `json:"system"`
	WorkloadID       string   `json:"workload_id"`
	BrokerCPUSeconds float64  `json:"broker_cpu_seconds"` // -1: unknown, 0: not measured
	ClientCPUSeconds float64  `json:"client_cpu_seconds"`
	BrokerCPUPer     *float64 `json:"broker_cpu_per_unit,omitempty"`
	BrokerCPUUnit    string   `json:"broker_cpu_unit,omitempty"` // "s per GB" or "s per M acks"
}

type jsonReport struct {
	Info ReportInfo `json:"info"`
	Rows []jsonRow  `json:"rows"`
}

func cpuSeconds(d float64) float64 {
	if d == unknownFigure {
		return -1
	}
	return d / 1e9
}

// writeJSON writes the suite's rows to path as a jsonReport.
func writeJSON(path string, rows []Row, info ReportInfo) error {
	rep := jsonReport{Info: info}
	for _, r := range rows {
		jr := jsonRow{Row: r, System: r.System(), WorkloadID: r.WorkloadID(),
			BrokerCPUSeconds: cpuSeconds(float64(r.BrokerCPU)), ClientCPUSeconds: cpuSeconds(float64(r.ClientCPU))}
		if v := cpuPer(r); !math.IsNaN(v) {
			jr.BrokerCPUPer, jr.BrokerCPUUnit = &v, cpuUnit(r.WorkloadID())
		}
		rep.Rows = append(rep.Rows, jr)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
