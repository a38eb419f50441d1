//go:build !exactq_testpanic

package server

// injectTestPanic does nothing: only a build with -tags exactq_testpanic panics on
// TestPanicClientID (testpanic_on.go); the product binary has no way to.
func injectTestPanic(*Request) {}
