package main

import (
	"flag"
	"io"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/server"
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
		opts := defaultServeOptions()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.IntVar(&opts.maxConnectionsPerIP, "max-connections-per-ip", opts.maxConnectionsPerIP, "")
		fs.StringVar(&opts.maxConnectionsPerIPOverrides, "max-connections-per-ip-overrides", "", "")
		fs.IntVar(&opts.plaintextMaxConnections, "plaintext-max-connections", 0, "")
		return opts, applyConfigFile(path, fs, map[string]bool{}, map[string]string{})
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
	hs := httptest.NewServer(metricsHandler(tb.Broker, serverMetrics(srv)...))
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
