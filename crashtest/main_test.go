package crashtest

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/brokerproc"
)

var (
	flagCycles = flag.Int("cycles", envInt("EXACTQ_CRASH_CYCLES", 25), "kill/restart cycles of TestCrashCycles (env EXACTQ_CRASH_CYCLES)")
	flagSeed   = flag.Int64("seed", int64(envInt("EXACTQ_CRASH_SEED", 0)), "RNG seed; 0 picks one from the clock (env EXACTQ_CRASH_SEED)")
)

// exactqBin is the broker binary built once by TestMain.
var exactqBin string

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, remove, err := brokerproc.BuildTemp("exactq-crashtest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		return 1
	}
	defer remove()
	exactqBin = bin
	return m.Run()
}

// seed returns the seed for a test, logging it so that a failure can be replayed.
func seed(t *testing.T) int64 {
	s := *flagSeed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: go test ./crashtest/ -run '^%s$' -seed %d)", s, t.Name(), s)
	return s
}

// startBroker starts the built binary on dataDir; listen "" picks a free port.
func startBroker(t *testing.T, dataDir, listen, fsync string) *brokerproc.Process {
	t.Helper()
	var echo io.Writer
	if os.Getenv("EXACTQ_TEST_LOG") != "" {
		echo = os.Stderr
	}
	return startBrokerOpts(t, brokerproc.Options{
		Binary: exactqBin, DataDir: dataDir, Listen: listen, Fsync: fsync,
		LogLevel: "info", Echo: echo,
	})
}

// startBrokerOpts starts the broker with opts (Binary defaults to the built one) and kills
// it at the end of the test.
func startBrokerOpts(t *testing.T, opts brokerproc.Options) *brokerproc.Process {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = exactqBin
	}
	p, err := brokerproc.Start(opts)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(p.Kill)
	return p
}
