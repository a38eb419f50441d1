package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A failure repeated on every request is logged once per interval per kind, and the next
// line says how many were left out.
func TestRateLogOnePerInterval(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	r := newRateLog(slog.New(slog.NewTextHandler(&out, nil)), func() time.Time { return now })
	for range 100 {
		r.log(slog.LevelError, "disk", "storage error")
	}
	r.log(slog.LevelError, "other", "other error")
	now = now.Add(rateLogInterval)
	r.log(slog.LevelError, "disk", "storage error")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "other error") || !strings.Contains(lines[2], "suppressed=99") {
		t.Fatalf("lines:\n%s", out.String())
	}
}
