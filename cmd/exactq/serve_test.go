package main

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
