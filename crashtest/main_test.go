package crashtest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
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
	dir, err := os.MkdirTemp("", "exactq-crashtest-bin-")
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
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		return 1
	}
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
	p, err := tryStartBroker(t, opts)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	return p
}

// tryStartBroker is startBrokerOpts returning the error.
func tryStartBroker(t *testing.T, opts brokerproc.Options) (*brokerproc.Process, error) {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = exactqBin
	}
	listen := opts.Listen
	var p *brokerproc.Process
	// A fixed port (a restart that clients reconnect to) can be briefly held by a client
	// socket that the kernel gave it as an ephemeral local port; retry until it is free.
	err := await.Until(15*time.Second, 100*time.Millisecond, func() error {
		var err error
		p, err = brokerproc.Start(opts)
		if err == nil || listen == "" || !strings.Contains(err.Error(), "address already in use") {
			return await.Stop(err)
		}
		t.Logf("port %s in use, retrying: %v", listen, err)
		return err
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(p.Kill)
	return p, nil
}
