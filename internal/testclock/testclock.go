// Package testclock is the settable clock that tests inject as a component's Now (a log's,
// a coordinator's, the share manager's): the component's own goroutines (tickers, timers)
// may read it while the test moves it.
package testclock

import (
	"sync"
	"time"
)

// StartMs is where a new Clock stands, in Unix milliseconds (2023-11-14T22:13:20Z): a
// fixed instant, so that timestamps a test writes and logs are the same on every run.
const StartMs = 1_700_000_000_000

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock at StartMs.
func New() *Clock { return &Clock{t: time.UnixMilli(StartMs)} }

// Now is the clock's time, for a component's Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Ms is Now in Unix milliseconds (record timestamps).
func (c *Clock) Ms() int64 { return c.Now().UnixMilli() }

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
