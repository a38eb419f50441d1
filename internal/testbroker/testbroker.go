// Package testbroker runs a real exactq broker (real listener, real files) inside a test
// process, for integration tests of the broker, the client and the interop suites.
package testbroker

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/server"
)

// Broker is a running test broker.
type Broker struct {
	Addr    string // host:port clients dial
	DataDir string
	Broker  *broker.Broker
	Server  *server.Server
	cfg     broker.Config
	t       testing.TB
	stopped bool
}

// Option adjusts the broker configuration before start.
type Option func(*broker.Config)

// WithConfig sets Kafka broker configs (log.segment.bytes, num.partitions, ...), on top of
// the test defaults.
func WithConfig(kv map[string]string) Option {
	return func(c *broker.Config) {
		for k, v := range kv {
			c.BrokerConfigs[k] = v
		}
	}
}

// WithoutAutoCreate turns topic auto-creation off.
func WithoutAutoCreate() Option { return func(c *broker.Config) { c.AutoCreateTopics = false } }

// WithFsync sets the fsync policy.
func WithFsync(p broker.FsyncPolicy) Option { return func(c *broker.Config) { c.Fsync = p } }

// WithDataDir reuses a data directory (to test restarts).
func WithDataDir(dir string) Option { return func(c *broker.Config) { c.DataDir = dir } }

// Start starts a broker on 127.0.0.1 with a fresh data directory; it stops at test cleanup.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	cfg := broker.Config{
		DataDir:          t.TempDir(),
		NodeID:           1,
		AutoCreateTopics: true,
		Fsync:            broker.FsyncAlways,
		Logger:           quietLogger(),
		// Tests start groups constantly; Kafka's 3 s initial rebalance delay would only
		// slow them down. Small internal topics keep start-up cheap.
		BrokerConfigs: map[string]string{
			"group.initial.rebalance.delay.ms":             "0",
			"offsets.topic.num.partitions":                 "5",
			"transaction.state.log.num.partitions":         "5",
			"share.coordinator.state.topic.num.partitions": "5",
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	tb := &Broker{cfg: cfg, t: t, DataDir: cfg.DataDir}
	tb.start()
	t.Cleanup(tb.Stop)
	return tb
}

func (tb *Broker) start() {
	tb.t.Helper()
	addr := "127.0.0.1:0"
	if tb.Addr != "" {
		addr = tb.Addr // a restart keeps the port so clients reconnect
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.t.Fatalf("listen: %v", err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	cfg := tb.cfg
	cfg.AdvertisedHost = "127.0.0.1"
	cfg.AdvertisedPort = int32(tcp.Port)
	b, err := broker.Open(cfg)
	if err != nil {
		ln.Close()
		tb.t.Fatalf("open broker: %v", err)
	}
	srv := server.New(server.Config{ClusterID: b.ClusterID(), NodeID: cfg.NodeID}, b, cfg.Logger)
	go srv.Serve(ln)
	tb.Addr, tb.Broker, tb.Server, tb.stopped = ln.Addr().String(), b, srv, false
}

// Stop shuts the server down cleanly and closes the broker. Safe to call twice.
func (tb *Broker) Stop() {
	if tb.stopped {
		return
	}
	tb.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tb.Server.Shutdown(ctx)
	if err := tb.Broker.Close(); err != nil {
		tb.t.Errorf("close broker: %v", err)
	}
}

// Restart stops the broker and opens it again on the same data directory and port.
func (tb *Broker) Restart() {
	tb.t.Helper()
	tb.Stop()
	tb.start()
}

func quietLogger() *slog.Logger {
	if os.Getenv("EXACTQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
