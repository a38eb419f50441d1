package decodecost

import "github.com/twmb/franz-go/pkg/kmsg"

// Coster is implemented by request types of exactq's own, outside kmsg (bodies a
// server.APIRange.NewRequest returns, such as wire.TxnShareAcknowledgeRequest and txnwire's
// InitProducerId v6): DecodeCost is Check for that type's ReadFrom at the version set on
// it, with the same contract (an upper bound of ReadFrom's allocations, an error where
// ReadFrom fails, nothing allocated).
type Coster interface {
	DecodeCost(body []byte) (allocBytes int64, err error)
}

// CheckRequest is Check for req, the empty request a server is about to decode body into
// (its version set): req's own DecodeCost if it is a Coster, the generated walker of a
// wire package request (wire_gen.go), else Check(req.Key(), req.GetVersion(), body).
func CheckRequest(req kmsg.Request, body []byte) (allocBytes int64, err error) {
	if c, ok := req.(Coster); ok {
		return c.DecodeCost(body)
	}
	if isWireRequest(req) {
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
	return Check(req.Key(), req.GetVersion(), body)
}

// Bounds reports whether CheckRequest bounds decoding into req by its own walker rather
// than by req's key: req is a wire package request (or a Coster).
func Bounds(req kmsg.Request) bool {
	_, ok := req.(Coster)
	return ok || isWireRequest(req)
}

// Walker is Check's reader for hand-written decoders, to write a DecodeCost that walks a
// body as the decoder reads it with kbin: the same reads and failure rules, allocating
// nothing, adding up what the decoder allocates.
type Walker struct {
	r reader
}

// NewWalker walks body.
func NewWalker(body []byte) Walker { return Walker{r: reader{src: body}} }

// Skip is a fixed-width read (kbin's Int8 ... Int64, Uuid, Bool) or a Span of n bytes.
func (w *Walker) Skip(n int) { w.r.skip(n) }

// CompactString is kbin's CompactString: its bytes are copied.
func (w *Walker) CompactString() { w.r.string(true) }

// CompactNullableString is kbin's CompactNullableString: a *string and its bytes.
func (w *Walker) CompactNullableString() { w.r.nullableString(true) }

// CompactArray reads a compact array length and checks count × minElemBytes against the
// bytes left, failing the walk if they cannot fit; it adds make([]T, count) of elemBytes
// each and returns how many elements to walk (0 for a null or empty array).
func (w *Walker) CompactArray(minElemBytes, elemBytes int64) int32 {
	return w.r.elems(w.r.arrayLen(true), minElemBytes, elemBytes)
}

// SkipTags is kmsg.SkipTags: a tag section, read and dropped.
func (w *Walker) SkipTags() {
	for num := w.r.uvarint(); num > 0 && !w.r.bad; num-- {
		w.r.uvarint()
		w.r.skipTag()
	}
}

// Tags is kmsg.ReadTags: a tag section kept in a kmsg.Tags map.
func (w *Walker) Tags() { w.r.tags() }

// Ok is false once a read failed.
func (w *Walker) Ok() bool { return !w.r.bad }

// Done returns the bytes the decoder allocates for what was walked, or ErrTruncated.
func (w *Walker) Done() (allocBytes int64, err error) {
	if w.r.bad {
		return 0, ErrTruncated
	}
	return w.r.alloc, nil
}
