//go:build race

package alloctest

// RaceEnabled says the binary was built with -race. The race detector changes what
// allocates (it instruments memory, and sync.Pool drops a share of what is put back), so
// the bounds on allocated bytes do not hold under it; tests skip those assertions, and
// only those, when it is set.
const RaceEnabled = true
