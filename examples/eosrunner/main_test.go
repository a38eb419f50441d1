package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/exactq/exactq/eos/eostest"
)

// The service, run as its command line would run it, turns every line into its upper-cased
// output exactly once (read_committed) and leaves nothing of the group in flight; the
// empty line and the invalid UTF-8 one are rejected: no output, and acknowledged all the
// same (archived).
func TestServiceExactlyOnce(t *testing.T) {
	b := eostest.Start(t)
	const parts = 3
	eostest.CreateTopic(t, b.Addr, "lines", parts)
	eostest.CreateTopic(t, b.Addr, "upper", parts)
	inputs := eostest.Inputs(200)
	poison := []string{"", "\xff\xfe"}
	eostest.Produce(t, b.Addr, "lines", parts, append(append([]string{}, inputs...), poison...))

	ctx, stop := context.WithCancel(eostest.Context(t))
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-brokers", b.Addr, "-in", "lines", "-out", "upper", "-group", "uppercasers",
			"-from-earliest", "-workers", "3", "-commit-records", "50", "-commit-interval", "50ms"}, io.Discard)
	}()
	eostest.WaitDrained(t, b.Addr, "uppercasers", "lines", parts)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	want := make([]string, len(inputs))
	for i, v := range inputs {
		want[i] = strings.ToUpper(v)
	}
	eostest.ExactlyOnce(t, eostest.Committed(t, b.Addr, "upper", parts), want)
}

// Missing required flags are refused before anything connects.
func TestServiceNeedsTopics(t *testing.T) {
	if err := run(context.Background(), []string{"-in", "lines"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-out") {
		t.Fatalf("run without -out: %v", err)
	}
}
