// Package await is how the tests of the whole module (and the crash tests' worker
// process) wait for a condition they cannot be told about: they ask again at a fixed
// interval, for a bounded time. It is the one such loop in the repository, so that every
// wait has a deadline and says what it last saw; a sleep left in a test paces a fault or a
// load on purpose, and says so.
package await

import (
	"errors"
	"time"
)

// stopped is an error after which asking again is pointless.
type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }

// Stop wraps err so that Until returns it at once instead of asking again: the condition
// can no longer come true (a non-retriable error, the process it waits on died). The
// wrapped error reads as err and matches it under errors.Is and errors.As. Stop(nil) is
// nil: the condition holds.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return stopped{err}
}

// Until calls cond until it returns nil and then returns nil. It calls cond again interval
// after each failed call (straight away when interval is 0) for as long as timeout has not
// passed since the first call; then it returns cond's last error. An error wrapped in Stop
// ends the wait at once with that error. cond runs at least once, and a call in progress
// when the timeout passes is not cut short.
func Until(timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		var s stopped
		if err == nil || errors.As(err, &s) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}
