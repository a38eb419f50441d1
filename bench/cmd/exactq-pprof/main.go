// Command exactq-pprof is `exactq serve` reduced to what the bench driver passes (--listen,
// --data-dir, --fsync, --log-level) plus Go's pprof handlers, so the broker can be profiled
// under a bench workload without changing the product binary:
//
//	go build -o /tmp/exactq-pprof ./bench/cmd/exactq-pprof
//	EXACTQ_PPROF_LISTEN=127.0.0.1:6060 exactq-bench -exactq /tmp/exactq-pprof ... share
//	go tool pprof -top 'http://127.0.0.1:6060/debug/pprof/profile?seconds=5'
//
// It is test tooling: it sets no broker configs and has none of serve's other options.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/server"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: exactq-pprof serve --listen ADDR --data-dir DIR [--fsync always|never] [--log-level L]")
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "exactq-pprof:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9092", "address to listen on")
	dataDir := fs.String("data-dir", "./exactq-data", "data directory")
	fsync := fs.String("fsync", "always", "always or never")
	logLevel := fs.String("log-level", "info", "log level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	policy := broker.FsyncAlways
	if *fsync == "never" {
		policy = broker.FsyncNever
	}
	if addr := os.Getenv("EXACTQ_PPROF_LISTEN"); addr != "" {
		pln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("pprof listen: %w", err)
		}
		go http.Serve(pln, nil) //nolint:errcheck // lives as long as the process
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		return err
	}
	b, err := broker.Open(broker.Config{
		DataDir: *dataDir, NodeID: 1, AdvertisedHost: host, AdvertisedPort: int32(port),
		AutoCreateTopics: true, Fsync: policy, BrokerConfigs: map[string]string{}, Logger: logger,
	})
	if err != nil {
		return err
	}
	srv := server.New(server.Config{
		MaxRequestBytes: server.DefaultMaxRequestBytes, MaxConnections: server.DefaultMaxConnections,
		IdleTimeout: server.DefaultIdleTimeout, ClusterID: b.ClusterID(), NodeID: 1,
	}, b, logger)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("exactq serving", "listen", ln.Addr().String(), "data_dir", *dataDir, "fsync", *fsync)
	select {
	case <-sigs:
	case err := <-errc:
		b.Close()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return b.Close()
}
