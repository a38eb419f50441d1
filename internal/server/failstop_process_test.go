package server_test

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/brokerproc"
	"github.com/exactq/exactq/internal/server"
)

// TestHandlerPanicStopsBrokerProcess: a real broker whose handler panics logs the panic
// with its stack at error level, stops accepting connections and exits with status 2, so a
// supervisor restarts it; the restarted broker still has every record acknowledged before.
// The panic comes from a broker built with -tags exactq_testpanic: the product binary has
// no way to trigger one (TestNoInjectedPanicWithoutTag).
func TestHandlerPanicStopsBrokerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the broker binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := brokerproc.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "exactq")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "exactq_testpanic", "-o", bin, "./cmd/exactq")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags exactq_testpanic: %v\n%s", err, out)
	}
	dataDir := t.TempDir()
	p, err := brokerproc.Start(brokerproc.Options{Binary: bin, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)

	producer, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("before the panic")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	producer.Close()

	victim, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.ClientID(server.TestPanicClientID),
		kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	// ApiVersions is answered by the server itself; the Metadata after it reaches Handle.
	_, _ = victim.Request(ctx, kmsg.NewPtrMetadataRequest())

	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the broker still runs a minute after a handler panic:\n%s", p.Logs())
	}
	if code := p.ExitCode(); code != server.ExitHandlerPanic {
		t.Fatalf("exit code %d, want %d:\n%s", code, server.ExitHandlerPanic, p.Logs())
	}
	lines := p.LogLines("handler panic")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") ||
		!strings.Contains(lines[0], "injected handler panic") || !strings.Contains(lines[0], "injectTestPanic") {
		t.Fatalf("want one error line with the panic and its stack, got %q", lines)
	}
	if nc, err := net.DialTimeout("tcp", p.Addr, 5*time.Second); err == nil {
		nc.Close()
		t.Fatal("something still accepts on the broker's address")
	}

	// What a supervisor does: start it again on the same data directory.
	p2, err := brokerproc.Start(brokerproc.Options{Binary: bin, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p2.Stop)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(p2.Addr), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("record produced before the panic not read back after the restart: %v", err)
		}
		var got []string
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) > 0 {
			if len(got) != 1 || got[0] != "before the panic" {
				t.Fatalf("after the restart: %q", got)
			}
			return
		}
	}
}
