package server

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/decodecost"
)

// Errors returned by request decoding. In every case Apache Kafka closes the connection
// (SocketServer.processCompletedReceives → processChannelException), and so do we.
var (
	// ErrFrameSize: the size prefix is negative or larger than Config.MaxRequestBytes
	// (Kafka: InvalidReceiveException from NetworkReceive).
	ErrFrameSize = errors.New("invalid request frame size")
	// ErrUnknownAPIKey: the API key is not one this broker serves (Kafka:
	// InvalidRequestException "Unknown API key" from RequestHeader.parse, or "Received
	// request for disabled api" from Processor.parseRequestHeader).
	ErrUnknownAPIKey = errors.New("unknown or disabled api key")
	// ErrUnsupportedVersion: a known key at a version outside the served range (Kafka:
	// UnsupportedVersionException from Processor.parseRequestHeader). ApiVersions is the
	// exception: it is answered with UNSUPPORTED_VERSION instead.
	ErrUnsupportedVersion = errors.New("unsupported api version")
	// ErrMalformedRequest: the header or body does not decode (Kafka:
	// InvalidRequestException from RequestHeader.parse or RequestContext.parseRequest).
	ErrMalformedRequest = errors.New("malformed request")
)

// apiTable is the immutable set of API ranges a server dispatches, indexed by key.
type apiTable struct {
	ranges map[int16]APIRange
	// apiVersions is the range the server answers ApiVersions at (key 18).
	apiVersions APIRange
}

// maxApiVersionsVersion is the highest ApiVersions version the server implements (Kafka 4.4:
// v5, KIP-1242). kmsg v1.15.1 encodes up to v5 as well.
const maxApiVersionsVersion = 5

// newAPITable snapshots a handler's API list. ApiVersions is always served: if the handler
// lists key 18 its range is intersected with what the server implements. It returns the
// entries it could not serve: empty ranges, keys kmsg cannot decode and handler-defined
// request types that decodecost cannot bound (not decodecost.Bounds). A MaxVersion
// above kmsg's is capped to kmsg's.
func newAPITable(apis []APIRange) (t *apiTable, dropped []APIRange) {
	t = &apiTable{
		ranges:      make(map[int16]APIRange, len(apis)+1),
		apiVersions: APIRange{Key: 18, MinVersion: 0, MaxVersion: maxApiVersionsVersion},
	}
	for _, r := range apis {
		body := r.newBody()
		if body == nil {
			dropped = append(dropped, r) // kmsg cannot decode it, so we cannot serve it
			continue
		}
		if r.NewRequest != nil && !decodecost.Bounds(body) {
			dropped = append(dropped, r) // decoding it would allocate unchecked
			continue
		}
		r.MaxVersion = min(r.MaxVersion, body.MaxVersion())
		if r.MinVersion < 0 || r.MaxVersion < r.MinVersion {
			dropped = append(dropped, r) // an empty range serves nothing
			continue
		}
		if r.Key == 18 {
			if r.MaxVersion < t.apiVersions.MaxVersion {
				t.apiVersions.MaxVersion = r.MaxVersion
			}
			continue
		}
		t.ranges[r.Key] = r
	}
	t.ranges[18] = t.apiVersions
	return t, dropped
}

// withSASL is t plus SaslHandshake (17) and SaslAuthenticate (36) at Kafka 4.4's versions,
// which the server itself serves on SASL listeners.
func (t *apiTable) withSASL() *apiTable {
	out := &apiTable{ranges: make(map[int16]APIRange, len(t.ranges)+2), apiVersions: t.apiVersions}
	for k, r := range t.ranges {
		out.ranges[k] = r
	}
	out.ranges[17] = Kafka44[17]
	out.ranges[36] = Kafka44[36]
	return out
}

// decoded is the result of decoding one frame.
type decoded struct {
	key           int16
	version       int16
	correlationID int32
	clientID      string
	body          kmsg.Request // nil for an ApiVersions request at an unsupported version
	// apiVersionsFallback is set for an ApiVersions request above (or below) the served
	// range: Kafka does not parse its body and answers with a v0 UNSUPPORTED_VERSION
	// response (RequestContext.parseRequest / isUnsupportedApiVersionsRequest).
	apiVersionsFallback bool
}

// headerError describes a frame whose header decoded far enough to name the request.
type headerError struct {
	err           error
	key           int16
	version       int16
	correlationID int32 // -1 when not reached
	detail        string
	panicked      bool // the kmsg decoder panicked (a kmsg bug; the fuzz test fails on it)
}

func (e *headerError) Error() string {
	return fmt.Sprintf("%v: key %d (%s) version %d correlation id %d: %s",
		e.err, e.key, kmsg.NameForKey(e.key), e.version, e.correlationID, e.detail)
}

func (e *headerError) Unwrap() error { return e.err }

// decodeRequest decodes one frame (without its size prefix): the request header, then the
// body with kmsg. It never panics on any input: it returns a request or an error wrapping
// one of the Err* values above.
//
// The body may alias frame (kmsg keeps byte fields such as Produce records as sub-slices),
// so the caller must not reuse frame after a successful decode.
//
// Before kmsg decodes the body, decodecost checks it (without allocating): a body whose
// counts claim more than it holds is malformed, and admit, when non-nil, is called with the
// bound of what decoding allocates; an error from admit is returned (wrapped) instead of
// decoding. Handler-defined request types (APIRange.NewRequest) are checked by their own
// walker (decodecost.Bounds: the wire package's; newAPITable serves no other).
func decodeRequest(frame []byte, apis *apiTable, admit func(decodedBytes int64) error) (d decoded, err error) {
	// kmsg does not panic on short input by design; recover anyway, because "never panics
	// on input" is a broker-wide guarantee and a generated decoder bug must not take the
	// process down.
	defer func() {
		if r := recover(); r != nil {
			err = &headerError{err: ErrMalformedRequest, key: d.key, version: d.version,
				correlationID: d.correlationID, detail: fmt.Sprintf("decoder panic: %v", r), panicked: true}
			d.body = nil
		}
	}()
	d.correlationID = -1
	if len(frame) < 4 {
		return d, &headerError{err: ErrMalformedRequest, key: -1, version: -1, correlationID: -1,
			detail: "frame shorter than api key and version"}
	}
	d.key = int16(binary.BigEndian.Uint16(frame[0:]))
	d.version = int16(binary.BigEndian.Uint16(frame[2:]))
	fail := func(base error, detail string) (decoded, error) {
		return d, &headerError{err: base, key: d.key, version: d.version,
			correlationID: d.correlationID, detail: detail}
	}

	body := apis.ranges[d.key].newBody()
	if body == nil {
		body = kmsg.RequestForKey(d.key)
	}
	if body == nil {
		return fail(ErrUnknownAPIKey, "kmsg does not know this key")
	}
	// Header version follows the request version's flexibility (v2 with tagged fields when
	// flexible, else v1), even for versions kmsg does not implement: kmsg's IsFlexible is a
	// ">= first flexible version" test, matching Kafka's open-ended "flexibleVersions: N+".
	body.SetVersion(d.version)
	flexible := body.IsFlexible()

	rest := frame[4:]
	if len(rest) < 4 {
		return fail(ErrMalformedRequest, "truncated correlation id")
	}
	d.correlationID = int32(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if len(rest) < 2 {
		return fail(ErrMalformedRequest, "truncated client id")
	}
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	switch {
	case idLen == -1: // null client id: treated as empty, as Kafka does
	case idLen < -1:
		return fail(ErrMalformedRequest, "negative client id length")
	case int(idLen) > len(rest):
		return fail(ErrMalformedRequest, "truncated client id")
	default:
		d.clientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	if flexible {
		var ok bool
		if rest, ok = skipTags(rest); !ok {
			return fail(ErrMalformedRequest, "bad header tagged fields")
		}
	}

	r, served := apis.ranges[d.key]
	if !served {
		return fail(ErrUnknownAPIKey, "not served by this broker")
	}
	if d.version < r.MinVersion || d.version > r.MaxVersion {
		if d.key == 18 {
			// Kafka accepts any ApiVersions version and answers unsupported ones with a
			// v0 UNSUPPORTED_VERSION response without parsing the body.
			d.apiVersionsFallback = true
			return d, nil
		}
		return fail(ErrUnsupportedVersion, fmt.Sprintf("served range is %d-%d", r.MinVersion, r.MaxVersion))
	}
	decodedBytes, err := decodecost.CheckRequest(body, rest)
	if err != nil {
		return fail(ErrMalformedRequest, "body: "+err.Error())
	}
	if admit != nil {
		if err := admit(decodedBytes); err != nil {
			return fail(err, "not decoded")
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return fail(ErrMalformedRequest, "body: "+err.Error())
	}
	d.body = body
	return d, nil
}

// skipTags skips a tagged-field section (uvarint count, then per field a uvarint tag, a
// uvarint size and size bytes). The request header defines no tags we use.
func skipTags(b []byte) ([]byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, false
	}
	b = b[w:]
	for ; n > 0; n-- {
		_, w = binary.Uvarint(b) // tag
		if w <= 0 {
			return nil, false
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, false
		}
		b = b[w+int(size):]
	}
	return b, true
}

// newBody returns an empty request of the range's key: the handler's own type for keys it
// defines (NewRequest), else kmsg's, else nil.
func (r APIRange) newBody() kmsg.Request {
	if r.NewRequest != nil {
		return r.NewRequest()
	}
	return kmsg.RequestForKey(r.Key)
}
