package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBrokerLinksNoBenchCode: the broker binary links none of the benchmark driver, its
// charts or its Maven launcher for Apache Kafka; those live under bench/ and ship as
// bench/cmd/exactq-bench.
func TestBrokerLinksNoBenchCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/exactq/exactq/bench", // the driver, its Maven launcher for Kafka, the pprof tool
		"golang.org/x/image",             // the charts
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("cmd/exactq links %s", dep)
			}
		}
	}
}
