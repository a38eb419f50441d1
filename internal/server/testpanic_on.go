//go:build exactq_testpanic

package server

// injectTestPanic, in a broker built with -tags exactq_testpanic (only the fail-stop test
// builds one), panics in place of the handler for a request whose client id is
// TestPanicClientID, so a test can watch a real broker process stop on a handler panic.
func injectTestPanic(req *Request) {
	if req.ClientID == TestPanicClientID {
		panic("exactq_testpanic: injected handler panic")
	}
}
