// Package txnshare defines TxnShareAcknowledge (KIP-1289), the request that stages share
// acknowledgements in a producer transaction, with the field list of the KIP's latest
// revision (exactq decision D1: API key 95, version 0, flexible). kmsg has no type for it,
// so the request and response are written here on kmsg's and kbin's primitives and satisfy
// kmsg.Request and kmsg.Response: they plug into the same server dispatch and client
// plumbing as every standard message.
//
// Request carries none of kmsg's routing markers (IsTxnCoordinatorRequest and the like): it
// goes to the leader of the share partitions it acknowledges, as ShareAcknowledge does, so
// kgo must treat it as a plain broker request. Send it with
// (*kgo.Client).Broker(leaderID).RetriableRequest on a client built with
// kgo.MaxVersions(Versions(key)); (*kgo.Client).Request picks any broker, which is the
// leader only on a single node.
package txnshare

import (
	"unsafe"

	"github.com/exactq/exactq/internal/decodecost"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// DefaultAPIKey is the key of the KIP's latest draft revision. The KIP has no official key
// yet, so brokers and clients can move it (broker flag, client option).
const DefaultAPIKey int16 = 95

// Acknowledgement types that may be staged (D3): gap, ACCEPT, REJECT.
const (
	AckGap    int8 = 0
	AckAccept int8 = 1
	AckReject int8 = 3
)

// Batch acknowledges FirstOffset..LastOffset: one type for the whole range, or one per
// offset.
type Batch struct {
	FirstOffset      int64
	LastOffset       int64
	AcknowledgeTypes []int8
}

// Partition holds one share partition's acknowledgement batches.
type Partition struct {
	PartitionIndex         int32
	AcknowledgementBatches []Batch
}

// Topic holds one topic's partitions.
type Topic struct {
	TopicID    [16]byte
	Partitions []Partition
}

// Request is TxnShareAcknowledge v0.
type Request struct {
	APIKey          int16 // 0 means DefaultAPIKey
	Version         int16
	TransactionalID *string
	GroupID         string
	ProducerID      int64
	ProducerEpoch   int16
	MemberID        string
	MemberEpoch     int32
	Topics          []Topic
}

var _ kmsg.Request = (*Request)(nil)

func (v *Request) Key() int16 {
	return apiKey(v.APIKey)
}
func (*Request) MaxVersion() int16          { return 0 }
func (v *Request) SetVersion(version int16) { v.Version = version }
func (v *Request) GetVersion() int16        { return v.Version }
func (*Request) IsFlexible() bool           { return true }
func (v *Request) ResponseKind() kmsg.Response {
	return &Response{APIKey: v.Key(), Version: v.Version}
}

// AppendTo encodes the request body (flexible encoding).
func (v *Request) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactNullableString(dst, v.TransactionalID)
	dst = kbin.AppendCompactString(dst, v.GroupID)
	dst = kbin.AppendInt64(dst, v.ProducerID)
	dst = kbin.AppendInt16(dst, v.ProducerEpoch)
	dst = kbin.AppendCompactString(dst, v.MemberID)
	dst = kbin.AppendInt32(dst, v.MemberEpoch)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Topics))
	for _, t := range v.Topics {
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p.PartitionIndex)
			dst = kbin.AppendCompactArrayLen(dst, len(p.AcknowledgementBatches))
			for _, b := range p.AcknowledgementBatches {
				dst = kbin.AppendInt64(dst, b.FirstOffset)
				dst = kbin.AppendInt64(dst, b.LastOffset)
				dst = kbin.AppendCompactArrayLen(dst, len(b.AcknowledgeTypes))
				for _, at := range b.AcknowledgeTypes {
					dst = kbin.AppendInt8(dst, at)
				}
				dst = appendNoTags(dst)
			}
			dst = appendNoTags(dst)
		}
		dst = appendNoTags(dst)
	}
	return appendNoTags(dst)
}

// The fewest encoded bytes of an element of each array (fixed fields, a one-byte compact
// length per array, a one-byte empty tag section): a count is refused when that many
// cannot fit in the bytes left.
const (
	topicMinBytes             = 16 + 1 + 1
	partitionMinBytes         = 4 + 1 + 1
	batchMinBytes             = 8 + 8 + 1 + 1
	ackTypeMinBytes           = 1
	topicResponseMinBytes     = 16 + 1 + 1
	partitionResponseMinBytes = 4 + 2 + 1 + 1
)

// ReadFrom decodes the request body. Array lengths are checked against the bytes left, so
// a hostile length cannot make it allocate more than a few times what the frame holds
// (DecodeCost says how much, before decoding).
func (v *Request) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	v.TransactionalID = b.CompactNullableString()
	v.GroupID = b.CompactString()
	v.ProducerID = b.Int64()
	v.ProducerEpoch = b.Int16()
	v.MemberID = b.CompactString()
	v.MemberEpoch = b.Int32()
	v.Topics = make([]Topic, arrayLen(&b, topicMinBytes))
	for i := range v.Topics {
		t := &v.Topics[i]
		t.TopicID = b.Uuid()
		t.Partitions = make([]Partition, arrayLen(&b, partitionMinBytes))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.PartitionIndex = b.Int32()
			p.AcknowledgementBatches = make([]Batch, arrayLen(&b, batchMinBytes))
			for k := range p.AcknowledgementBatches {
				bt := &p.AcknowledgementBatches[k]
				bt.FirstOffset = b.Int64()
				bt.LastOffset = b.Int64()
				bt.AcknowledgeTypes = make([]int8, arrayLen(&b, ackTypeMinBytes))
				for l := range bt.AcknowledgeTypes {
					bt.AcknowledgeTypes[l] = b.Int8()
				}
				kmsg.SkipTags(&b)
			}
			kmsg.SkipTags(&b)
		}
		kmsg.SkipTags(&b)
	}
	kmsg.SkipTags(&b)
	return b.Complete()
}

var _ decodecost.Coster = (*Request)(nil)

// DecodeCost walks body as ReadFrom decodes it, allocating nothing, and returns an upper
// bound of the heap bytes ReadFrom allocates, or decodecost.ErrTruncated where ReadFrom
// fails: the server compares it with its budget before decoding (decodecost.CheckRequest).
func (*Request) DecodeCost(body []byte) (allocBytes int64, err error) {
	w := decodecost.NewWalker(body)
	w.CompactNullableString() // TransactionalID
	w.CompactString()         // GroupID
	w.Skip(8 + 2)             // ProducerID, ProducerEpoch
	w.CompactString()         // MemberID
	w.Skip(4)                 // MemberEpoch
	for range w.CompactArray(topicMinBytes, int64(unsafe.Sizeof(Topic{}))) {
		w.Skip(16) // TopicID
		for range w.CompactArray(partitionMinBytes, int64(unsafe.Sizeof(Partition{}))) {
			w.Skip(4) // PartitionIndex
			for range w.CompactArray(batchMinBytes, int64(unsafe.Sizeof(Batch{}))) {
				w.Skip(8 + 8) // FirstOffset, LastOffset
				w.Skip(int(w.CompactArray(ackTypeMinBytes, 1)))
				w.SkipTags()
			}
			w.SkipTags()
		}
		w.SkipTags()
	}
	w.SkipTags()
	return w.Done()
}

// PartitionResponse is one partition's staging result.
type PartitionResponse struct {
	PartitionIndex int32
	ErrorCode      int16
	ErrorMessage   *string
}

// TopicResponse holds one topic's partition results.
type TopicResponse struct {
	TopicID    [16]byte
	Partitions []PartitionResponse
}

// Response is TxnShareAcknowledge v0's response.
type Response struct {
	APIKey         int16
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	Responses      []TopicResponse
}

var _ kmsg.Response = (*Response)(nil)

func (v *Response) Key() int16 {
	return apiKey(v.APIKey)
}
func (*Response) MaxVersion() int16          { return 0 }
func (v *Response) SetVersion(version int16) { v.Version = version }
func (v *Response) GetVersion() int16        { return v.Version }
func (*Response) IsFlexible() bool           { return true }
func (v *Response) Throttle() (int32, bool)  { return v.ThrottleMillis, false }
func (v *Response) SetThrottle(ms int32)     { v.ThrottleMillis = ms }
func (v *Response) RequestKind() kmsg.Request {
	return &Request{APIKey: v.Key(), Version: v.Version}
}

// AppendTo encodes the response body.
func (v *Response) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.ThrottleMillis)
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Responses))
	for _, t := range v.Responses {
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p.PartitionIndex)
			dst = kbin.AppendInt16(dst, p.ErrorCode)
			dst = kbin.AppendCompactNullableString(dst, p.ErrorMessage)
			dst = appendNoTags(dst)
		}
		dst = appendNoTags(dst)
	}
	return appendNoTags(dst)
}

// ReadFrom decodes the response body.
func (v *Response) ReadFrom(src []byte) error {
	b := kbin.Reader{Src: src}
	v.ThrottleMillis = b.Int32()
	v.ErrorCode = b.Int16()
	v.Responses = make([]TopicResponse, arrayLen(&b, topicResponseMinBytes))
	for i := range v.Responses {
		t := &v.Responses[i]
		t.TopicID = b.Uuid()
		t.Partitions = make([]PartitionResponse, arrayLen(&b, partitionResponseMinBytes))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.PartitionIndex = b.Int32()
			p.ErrorCode = b.Int16()
			p.ErrorMessage = b.CompactNullableString()
			kmsg.SkipTags(&b)
		}
		kmsg.SkipTags(&b)
	}
	kmsg.SkipTags(&b)
	return b.Complete()
}

func appendNoTags(dst []byte) []byte { return kbin.AppendUvarint(dst, 0) }

// arrayLen reads a compact array length and bounds it by the bytes left, each element
// taking at least minElemBytes; a null or impossible length yields 0 and marks the reader
// failed so Complete reports the error.
func arrayLen(b *kbin.Reader, minElemBytes int) int {
	n := b.CompactArrayLen()
	if n < 0 {
		return 0
	}
	if int(n)*minElemBytes > len(b.Src) {
		b.Span(-1) // marks the reader failed
		return 0
	}
	return int(n)
}

// Versions is kversion.Stable() plus TxnShareAcknowledge v0 at key (0 means DefaultAPIKey).
// A *kgo.Client sends only the keys of its kgo.MaxVersions, so one that sends
// TxnShareAcknowledge is built with kgo.MaxVersions(txnshare.Versions(key)).
func Versions(key int16) *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(apiKey(key), 0)
	return v
}

// apiKey is the key a message field of 0 stands for: DefaultAPIKey.
func apiKey(key int16) int16 {
	if key == 0 {
		return DefaultAPIKey
	}
	return key
}
