package decodecost

import "github.com/twmb/franz-go/pkg/kmsg"

// CheckRequest is Check for req, the empty request a server is about to decode body into
// (its version set): the generated walker of a wire package request (wire_gen.go), else
// Check(req.Key(), req.GetVersion(), body).
func CheckRequest(req kmsg.Request, body []byte) (allocBytes int64, err error) {
	if !isWireRequest(req) {
		return Check(req.Key(), req.GetVersion(), body)
	}
	// By type: a wire request's key can be moved at run time (TxnShareAcknowledge), and
	// InitProducerId's key is kmsg's too, at versions kmsg does not decode.
	r := reader{src: body}
	if !walkWireRequest(&r, req) {
		return 0, ErrUnknownRequest
	}
	if r.bad {
		return 0, ErrTruncated
	}
	return r.alloc, nil
}

// Bounds reports whether CheckRequest bounds decoding into req, a request type a server
// handler defines rather than kmsg's for its key: only the wire package's are walked.
func Bounds(req kmsg.Request) bool { return isWireRequest(req) }
