package hostile

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	dir, err := os.MkdirTemp("", "exactq-hostile-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := brokerproc.ModuleRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	exactqBin = filepath.Join(dir, "exactq")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := brokerproc.Build(ctx, root, exactqBin); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		return 1
	}
	brokerScript = filepath.Join(dir, "exactq-limited")
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
