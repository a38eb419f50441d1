package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/spf13/pflag"
)

func TestConnectionLimits(t *testing.T) {
	opts := defaultServeOptions()
	cfg, err := connectionLimits(opts)
	if err != nil || cfg.MaxConnectionsPerIP != 0 || cfg.Listeners != nil {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	opts.maxConnectionsPerIP = 0
	if _, err := connectionLimits(opts); err == nil {
		t.Fatal("max.connections.per.ip=0 without overrides accepted (Kafka refuses it)")
	}
	opts.maxConnectionsPerIPOverrides = "10.0.0.1:50"
	opts.plaintextMaxConnections = 20
	cfg, err = connectionLimits(opts)
	if err != nil || cfg.MaxConnectionsPerIP != server.NoConnectionsPerIP ||
		cfg.MaxConnectionsPerIPOverrides[netip.MustParseAddr("10.0.0.1")] != 50 ||
		cfg.Listeners[server.DefaultListenerName].MaxConnections != 20 {
		t.Fatalf("%+v %v", cfg, err)
	}
}

// TestConnectionLimitKeys: the Kafka keys set their flags, and a listener exactq does not
// have is refused rather than ignored.
func TestConnectionLimitKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	parse := func(text string) (serveOptions, error) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return parseServe([]string{"--config", path})
	}
	opts, err := parse("max.connections.per.ip=7\nmax.connections.per.ip.overrides=10.0.0.1:9\nlistener.name.plaintext.max.connections=30\n")
	if err != nil || opts.maxConnectionsPerIP != 7 || opts.maxConnectionsPerIPOverrides != "10.0.0.1:9" || opts.plaintextMaxConnections != 30 {
		t.Fatalf("%+v %v", opts, err)
	}
	if _, err := parse("listener.name.internal.max.connections=5\n"); err == nil || !strings.Contains(err.Error(), "no such listener") {
		t.Fatalf("unknown listener: %v", err)
	}
}

func TestQueuedMaxRequestBytes(t *testing.T) {
	opts := defaultServeOptions()
	if got, err := queuedMaxRequestBytes(opts); err != nil || got != server.DefaultQueuedMaxRequestBytes {
		t.Fatalf("default: %d %v", got, err)
	}
	opts.queuedMaxRequestBytes = -1
	if got, err := queuedMaxRequestBytes(opts); err != nil || got != -1 {
		t.Fatalf("unbounded: %d %v", got, err)
	}
	opts.queuedMaxRequestBytes = int64(opts.maxRequestBytes) // Kafka's minimum; exactq needs more
	if _, err := queuedMaxRequestBytes(opts); err == nil {
		t.Fatal("a budget a largest request cannot pass was accepted")
	}
}

// TestQueuedRequestBytesMetric: the budget's gauge is served with the broker's metrics.
func TestQueuedRequestBytesMetric(t *testing.T) {
	tb := testbroker.Start(t)
	srv := server.New(server.Config{}, tb.Broker, nil)
	defer srv.Close()
	hs := httptest.NewServer(metricsHandler(tb.Broker, slog.Default(), serverMetrics(srv)...))
	defer hs.Close()
	resp, err := hs.Client().Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "exactq_queued_request_bytes 0") {
		t.Errorf("metrics lack exactq_queued_request_bytes:\n%s", body)
	}
}

// TestConfigFileJavaProperties: --config reads a Java properties file as Kafka reads
// server.properties: ":" and whitespace separators, "!" comments, "\" continuations (the next
// line's leading whitespace dropped), \t \n \uXXXX escapes, escaped separators in keys, and
// the last of a repeated key. Failed before: the parser took only key=value lines.
func TestConfigFileJavaProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	text := "! a comment in Java's other style\n" +
		"# and the usual one\n" +
		"   listen : 127.0.0.1:19092\n" +
		"data.dir /var/lib/exactq\n" +
		"log.retention.hours=1\\\n" +
		"     68\n" +
		"message.format=a\\tb\\nc\n" +
		"ssl.principal=caf\\u00e9\n" +
		"key\\:with\\=separators = x\n" +
		"fsync=always\n" +
		"fsync=never\n" +
		"node.id=7\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// --node-id on the command line wins over the file's node.id.
	opts, err := parseServe([]string{"--config", path, "--node-id", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.listen != "127.0.0.1:19092" || opts.dataDir != "/var/lib/exactq" || opts.fsync != "never" || opts.nodeID != 3 {
		t.Errorf("flags from the file: listen %q data-dir %q fsync %q node-id %d", opts.listen, opts.dataDir, opts.fsync, opts.nodeID)
	}
	want := map[string]string{
		"log.retention.hours": "168", "message.format": "a\tb\nc", "ssl.principal": "caf\u00e9",
		"key:with=separators": "x",
	}
	for k, v := range want {
		if got := opts.brokerConfigs[k]; got != v {
			t.Errorf("broker config %q = %q, want %q", k, got, v)
		}
	}
	if len(opts.brokerConfigs) != len(want) {
		t.Errorf("broker configs %q, want %q", opts.brokerConfigs, want)
	}
}

// parseServe parses serve's command line as newServeCmd does, then the --config file for
// the flags not given.
func parseServe(args []string) (serveOptions, error) {
	opts := defaultServeOptions()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	configFile := serveFlags(fs, &opts)
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if fs.NArg() > 0 {
		return opts, usagef("unexpected argument %q", fs.Arg(0))
	}
	return opts, applyConfigFile(*configFile, fs, opts.brokerConfigs)
}
