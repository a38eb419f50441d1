package hostile

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/exactq/exactq/internal/brokerproc"
)

// flagFull runs every attack at the size the issue (#17) reported it at instead of the
// scaled-down size CI uses.
var flagFull = flag.Bool("hostile-full", false, "run each attack at the issue's full size (minutes per attack)")

// exactqBin is the broker binary built once by TestMain; brokerScript wraps it with an
// address-space limit (see startBroker).
var exactqBin, brokerScript string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, remove, err := brokerproc.BuildTemp("exactq-hostile-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		return 1
	}
	defer remove()
	exactqBin = bin
	brokerScript = filepath.Join(filepath.Dir(bin), "exactq-limited")
	if err := writeLimitScript(brokerScript, exactqBin); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		return 1
	}
	code := m.Run()
	printSummary()
	return code
}

// sized returns ci, or full under -hostile-full.
func sized[T any](ci, full T) T {
	if *flagFull {
		return full
	}
	return ci
}
