package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/exactq/exactq/internal/broker"
)

// metricsHandler serves the broker's collector, extra (the server's gauges), plus the Go
// runtime and process metrics.
func metricsHandler(b *broker.Broker, logger *slog.Logger, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.Metrics(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Per-record share state has no Kafka RPC; operators read it here as JSON.
	mux.HandleFunc("/v1/share/state", func(w http.ResponseWriter, r *http.Request) {
		group := r.URL.Query().Get("group")
		if group == "" {
			http.Error(w, "group parameter required", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(b.DescribeShareGroupState(group)); err != nil {
			// The status line is gone by now; the client sees a cut body. Say why here.
			logger.Warn("share state response not written", "group", group, "err", err)
		}
	})
	return mux
}

// serveMetrics listens on addr and serves /metrics until the returned stop is called.
func serveMetrics(addr string, b *broker.Broker, logger *slog.Logger, extra ...prometheus.Collector) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: metricsHandler(b, logger, extra...), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	logger.Info("metrics serving", "listen", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("metrics server did not shut down cleanly", "err", err)
		}
	}, nil
}
