package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/testbroker"
)

// The metrics endpoint serves the transactional-ack and share metrics in Prometheus text
// format.
func TestMetricsEndpoint(t *testing.T) {
	tb := testbroker.Start(t)
	srv := httptest.NewServer(metricsHandler(tb.Broker, slog.Default()))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"exactq_txn_share_acknowledge_seconds", "exactq_topics", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
