package server

import (
	"fmt"
	"os"
)

// A panic in handler code is fatal to the process (fail-stop). Kafka's request handler
// catches an unexpected exception, answers UNKNOWN_SERVER_ERROR and keeps going; exactq's
// handlers cannot promise that is safe: a panic can leave a share partition's mutex held
// (they are released without defer on hot paths, so a later transaction marker would block
// forever), or an in-memory state half updated, with no way to know which from here. What
// the broker wrote is crash-safe by design (the kill -9 crash tests check it), so stopping
// and letting a supervisor restart the process loses nothing acknowledged and recovers
// from the disk, where carrying on could hang or serve wrong state.
//
// Only the kmsg decoder's panics are still recovered (decode.go): decoding touches no
// broker state, and hostile input must never stop the broker.

// ExitHandlerPanic is the exit status after a handler panic: 2, as an unrecovered Go panic
// exits, so supervisors treat both alike.
const ExitHandlerPanic = 2

// HandlerPanic describes a panic of handler code that stopped the server.
type HandlerPanic struct {
	// In names the code that panicked: "Handle", "Wait", "response" (Wait or encoding
	// the response), "discarded Wait" (a Wait run after its connection failed) or
	// "ConnClosed".
	In            string
	Key, Version  int16 // the request's; -1 for ConnClosed
	CorrelationID int32
	Value         any    // what was passed to panic
	Stack         []byte // the panicking goroutine's stack
}

// handlerPanicked stops the server after a panic in handler code: it logs the panic with
// its stack at error level, closes the listeners and connections, then exits the process
// (or, in tests of this, calls Config.OnHandlerPanic). Every panic is logged; only the first
// stops. Called from the recovering goroutine, which then ends its connection.
func (s *Server) handlerPanicked(p HandlerPanic) {
	s.log.Error("handler panic: stopping the broker; restart it (data on disk is crash-safe)",
		"in", p.In, "key", p.Key, "version", p.Version, "correlation_id", p.CorrelationID,
		"panic", fmt.Sprint(p.Value), "stack", string(p.Stack))
	s.failStop.Do(func() {
		s.Close()
		if s.cfg.OnHandlerPanic != nil {
			s.cfg.OnHandlerPanic(p)
			return
		}
		os.Exit(ExitHandlerPanic)
	})
}

// TestPanicClientID is the client id whose requests panic in a broker built with
// -tags exactq_testpanic (testpanic_on.go), and in no other build.
const TestPanicClientID = "exactq-test-injected-panic"
