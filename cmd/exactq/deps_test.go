package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBrokerLinksNoBenchCode: the broker binary links none of the benchmark driver, its
// charts or its Maven launcher for Apache Kafka; those live in bench/cmd/exactq-bench. Nor
// does it link exactq's old client package: the client commands run on franz-go.
func TestBrokerLinksNoBenchCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/exactq/exactq/bench/internal/driver", // the driver, bench/kafka (Maven), bench/brokerproc
		"golang.org/x/image",                             // the charts
		"github.com/exactq/exactq/client",                // replaced by kgo and kadm (#11)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("cmd/exactq links %s", dep)
			}
		}
	}
}
