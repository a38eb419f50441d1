// Package txnwire holds the transaction-coordinator messages that kmsg v1.15.1 cannot
// encode: InitProducerId v6 (KIP-939 two-phase commit), whose request adds Enable2Pc and
// KeepPreparedTxn and whose response adds OngoingTxnProducerId and OngoingTxnProducerEpoch
// (clients/src/main/resources/common/message/InitProducerId{Request,Response}.json, Kafka
// 4.4). Versions 0-5 are kmsg's own encoding; version 6 is written here on kbin's
// primitives. The types satisfy kmsg.Request and kmsg.Response, so the broker serves key 22
// with them (server.APIRange.NewRequest) and the client sends them like any kmsg request.
package txnwire

import (
	"github.com/exactq/exactq/internal/decodecost"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxInitProducerIDVersion is the newest InitProducerId version these types encode.
const MaxInitProducerIDVersion int16 = 6

// InitProducerIDRequest is InitProducerId v0-6. The embedded kmsg request holds the
// fields of v0-5 and the version; the KIP-939 fields exist from v6 on and are not encoded
// below it, so a sender that sets them must send v6 (Java's serializer throws instead).
type InitProducerIDRequest struct {
	kmsg.InitProducerIDRequest
	// Enable2Pc (v6+): the producer takes part in two-phase commit; its transactions
	// never time out.
	Enable2Pc bool
	// KeepPreparedTxn (v6+): keep the ongoing transaction instead of aborting it.
	KeepPreparedTxn bool
}

var _ kmsg.Request = (*InitProducerIDRequest)(nil)

// NewInitProducerIDRequest returns a request with kmsg's defaults (producer id and epoch
// -1).
func NewInitProducerIDRequest() *InitProducerIDRequest {
	r := &InitProducerIDRequest{}
	r.Default()
	return r
}

func (*InitProducerIDRequest) MaxVersion() int16 { return MaxInitProducerIDVersion }

func (v *InitProducerIDRequest) ResponseKind() kmsg.Response {
	r := NewInitProducerIDResponse()
	r.Version = v.Version
	return r
}

// AppendTo encodes the body at v.Version.
func (v *InitProducerIDRequest) AppendTo(dst []byte) []byte {
	if v.Version < 6 {
		return v.InitProducerIDRequest.AppendTo(dst)
	}
	dst = kbin.AppendCompactNullableString(dst, v.TransactionalID)
	dst = kbin.AppendInt32(dst, v.TransactionTimeoutMillis)
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendBool(dst, v.Enable2Pc)
	dst = kbin.AppendBool(dst, v.KeepPreparedTxn)
	return appendTags(dst, &v.UnknownTags)
}

// ReadFrom decodes a body of v.Version. Below v6 the KIP-939 fields are false.
func (v *InitProducerIDRequest) ReadFrom(src []byte) error {
	v.Enable2Pc, v.KeepPreparedTxn = false, false
	if v.Version < 6 {
		return v.InitProducerIDRequest.ReadFrom(src)
	}
	b := kbin.Reader{Src: src}
	v.TransactionalID = b.CompactNullableString()
	v.TransactionTimeoutMillis = b.Int32()
	v.ProducerID = b.Int64()
	v.ProducerEpoch = b.Int16()
	v.Enable2Pc = b.Bool()
	v.KeepPreparedTxn = b.Bool()
	v.UnknownTags = kmsg.ReadTags(&b)
	return b.Complete()
}

var _ decodecost.Coster = (*InitProducerIDRequest)(nil)

// DecodeCost walks body as ReadFrom decodes it at v.Version, allocating nothing, and
// returns an upper bound of what ReadFrom allocates, or decodecost.ErrTruncated where
// ReadFrom fails. ReadFrom allocates from one client-claimed count, the unknown tags' (a
// kmsg.Tags map entry of up to ~190 bytes for every 2 bytes of tag), which DecodeCost
// counts, so a server budget refuses a body of a million empty tags before it is decoded.
// Below v6 it is decodecost.Check of kmsg's decoder.
func (v *InitProducerIDRequest) DecodeCost(body []byte) (allocBytes int64, err error) {
	if v.Version < 6 {
		return decodecost.Check(v.Key(), v.Version, body)
	}
	w := decodecost.NewWalker(body)
	w.CompactNullableString() // TransactionalID
	w.Skip(4 + 8 + 2 + 1 + 1) // TransactionTimeoutMillis, ProducerID, ProducerEpoch, Enable2Pc, KeepPreparedTxn
	w.Tags()
	return w.Done()
}

// UnsafeReadFrom is ReadFrom (the embedded kmsg method would skip the v6 fields).
func (v *InitProducerIDRequest) UnsafeReadFrom(src []byte) error { return v.ReadFrom(src) }

// InitProducerIDResponse is InitProducerId v0-6. OngoingTxnProducerID/Epoch (v6+) name the
// transaction a KeepPreparedTxn request kept open, -1 when there is none.
type InitProducerIDResponse struct {
	kmsg.InitProducerIDResponse
	OngoingTxnProducerID    int64
	OngoingTxnProducerEpoch int16
}

var _ kmsg.Response = (*InitProducerIDResponse)(nil)

// NewInitProducerIDResponse returns a response with the schema defaults (producer id and
// both ongoing fields -1).
func NewInitProducerIDResponse() *InitProducerIDResponse {
	r := &InitProducerIDResponse{OngoingTxnProducerID: -1, OngoingTxnProducerEpoch: -1}
	r.Default()
	return r
}

func (*InitProducerIDResponse) MaxVersion() int16 { return MaxInitProducerIDVersion }

func (v *InitProducerIDResponse) RequestKind() kmsg.Request {
	r := NewInitProducerIDRequest()
	r.Version = v.Version
	return r
}

// AppendTo encodes the body at v.Version.
func (v *InitProducerIDResponse) AppendTo(dst []byte) []byte {
	if v.Version < 6 {
		return v.InitProducerIDResponse.AppendTo(dst)
	}
	dst = kbin.AppendInt32(dst, v.ThrottleMillis)
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendInt64(dst, v.OngoingTxnProducerID)
	dst = kbin.AppendInt16(dst, v.OngoingTxnProducerEpoch)
	return appendTags(dst, &v.UnknownTags)
}

// ReadFrom decodes a body of v.Version. Below v6 the ongoing fields are -1.
func (v *InitProducerIDResponse) ReadFrom(src []byte) error {
	v.OngoingTxnProducerID, v.OngoingTxnProducerEpoch = -1, -1
	if v.Version < 6 {
		return v.InitProducerIDResponse.ReadFrom(src)
	}
	b := kbin.Reader{Src: src}
	v.ThrottleMillis = b.Int32()
	v.ErrorCode = b.Int16()
	v.ProducerID = b.Int64()
	v.ProducerEpoch = b.Int16()
	v.OngoingTxnProducerID = b.Int64()
	v.OngoingTxnProducerEpoch = b.Int16()
	v.UnknownTags = kmsg.ReadTags(&b)
	return b.Complete()
}

// UnsafeReadFrom is ReadFrom.
func (v *InitProducerIDResponse) UnsafeReadFrom(src []byte) error { return v.ReadFrom(src) }

func appendTags(dst []byte, t *kmsg.Tags) []byte {
	dst = kbin.AppendUvarint(dst, uint32(t.Len()))
	return t.AppendEach(dst)
}
