package eos

import (
	"context"
	"time"
)

// graceContext returns a context that outlives ctx by grace: it keeps ctx's values, is
// not cancelled when ctx is, and is cancelled grace after ctx is done (or by the returned
// function). A graceful shutdown finishes its work under it.
func graceContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	g, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return g, func() {
		stop()
		cancel()
	}
}
