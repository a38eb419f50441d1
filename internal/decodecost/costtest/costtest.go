// Package costtest measures what a decoder really allocates, for the tests that hold a
// decodecost bound (Check or CheckRequest) against it.
package costtest

import (
	"runtime"
	"runtime/debug"
)

// SlackBytes is what TotalAlloc may move around a decode that is not the decode's: 0 on
// one goroutine with GC off, but a fuzz engine's goroutines run beside the fuzz function.
const SlackBytes = 256

// AllocBytes returns the heap bytes (runtime.MemStats.TotalAlloc) one call of decode
// allocates into a value from fresh (made before the measurement), with decode's error:
// the least of three calls (a decode is deterministic, anything else the runtime allocates
// meanwhile only adds), GC off, on this goroutine's locked thread.
func AllocBytes[T any](fresh func() T, decode func(T) error) (int64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	least := int64(-1)
	var err error
	for range 3 {
		into := fresh()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err = decode(into)
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(into)
		if n := int64(after.TotalAlloc - before.TotalAlloc); least < 0 || n < least {
			least = n
		}
	}
	return least, err
}
