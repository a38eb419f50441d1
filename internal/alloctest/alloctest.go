// Package alloctest measures the bytes a piece of code allocates, for tests that bound
// memory (allocation bounds of decoders, fuzz targets).
package alloctest

import "runtime"

// Bytes is what f allocates, counting every goroutine: meant for code that runs alone
// (a test's own goroutine, a fuzz worker's one input at a time).
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// LeastPerCall is the least, over tries measurements of calls calls each, of what one
// call of f allocates on average: a GC that empties sync.Pools during one measurement
// does not count, an allocation made on every call still does.
func LeastPerCall(tries, calls int, f func()) uint64 {
	least := ^uint64(0)
	for range tries {
		least = min(least, Bytes(func() {
			for range calls {
				f()
			}
		})/uint64(calls))
	}
	return least
}
