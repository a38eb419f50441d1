package decodecost

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/wire"
)

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

// CheckMetadataRecord is Check for a framed KRaft metadata record (a record value of the
// metadata log, as wire.AppendMetadataRecord writes it): an upper bound of what
// wire.ReadMetadataRecord allocates for its body (the record struct itself not counted),
// ErrUnknownRequest for a bad frame or a type or version the wire package does not
// decode, and ErrTruncated where ReadBodyFrom fails (bytes after the body included).
func CheckMetadataRecord(frame []byte) (allocBytes int64, err error) {
	t, version, body, err := wire.MetadataRecordFrame(frame)
	if err != nil {
		return 0, ErrUnknownRequest
	}
	r := reader{src: body}
	if !walkWireMetadataRecord(&r, t, version) {
		return 0, ErrUnknownRequest
	}
	if r.bad || len(r.src) > 0 {
		return 0, ErrTruncated
	}
	return r.alloc, nil
}
