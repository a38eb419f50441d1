package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog writes at most one line per event kind per interval, so a failure that repeats on
// every request (a full disk, a client hammering a limit) is reported without flooding the
// log. The line after a quiet interval says how many were left out. Kinds are fixed strings
// chosen by the code, so the maps stay as small as the set of call sites.
type rateLog struct {
	logger *slog.Logger
	every  time.Duration
	now    func() time.Time

	mu      sync.Mutex
	last    map[string]time.Time // guarded by mu
	skipped map[string]int       // guarded by mu
}

// rateLogInterval is how often one kind of repeated failure is logged.
const rateLogInterval = 10 * time.Second

func newRateLog(logger *slog.Logger, now func() time.Time) *rateLog {
	return &rateLog{logger: logger, every: rateLogInterval, now: now, last: map[string]time.Time{}, skipped: map[string]int{}}
}

// log writes msg at level under kind unless a line of that kind was written less than the
// interval ago; then it only counts it.
func (r *rateLog) log(level slog.Level, kind, msg string, args ...any) {
	now := r.now()
	r.mu.Lock()
	if last, ok := r.last[kind]; ok && now.Sub(last) < r.every {
		r.skipped[kind]++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped[kind]
	r.last[kind] = now
	delete(r.skipped, kind)
	r.mu.Unlock()
	if skipped > 0 {
		args = append(args, "suppressed", skipped)
	}
	r.logger.Log(context.Background(), level, msg, args...)
}

// storageError logs a failed write or read of the data directory at error level (rate
// limited per operation): a full or failing disk must show in the log, not only in the
// KAFKA_STORAGE_ERROR codes clients see.
func (b *Broker) storageError(op string, err error, args ...any) {
	b.ratelog.log(slog.LevelError, "storage:"+op, "storage error: "+op, append(args, "err", err)...)
}
