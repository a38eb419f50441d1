package txnshare

import (
	"reflect"
	"testing"
)

func sample() *Request {
	id := "tx-1"
	return &Request{
		TransactionalID: &id, GroupID: "sg", ProducerID: 7, ProducerEpoch: 2, MemberID: "m-1", MemberEpoch: 4,
		Topics: []Topic{{TopicID: [16]byte{1, 2}, Partitions: []Partition{
			{PartitionIndex: 0, AcknowledgementBatches: []Batch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{AckAccept}}}},
			{PartitionIndex: 3, AcknowledgementBatches: []Batch{{FirstOffset: 5, LastOffset: 7, AcknowledgeTypes: []int8{AckAccept, AckGap, AckReject}}}},
		}}},
	}
}

func TestRequestRoundTrip(t *testing.T) {
	in := sample()
	var out Request
	if err := out.ReadFrom(in.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	out.APIKey, out.Version = in.APIKey, in.Version
	if !reflect.DeepEqual(in, &out) {
		t.Fatalf("round trip:\n%+v\n%+v", in, &out)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	msg := "not acquired"
	in := &Response{ErrorCode: 0, Responses: []TopicResponse{{TopicID: [16]byte{9}, Partitions: []PartitionResponse{{PartitionIndex: 1, ErrorCode: 121, ErrorMessage: &msg}}}}}
	var out Response
	if err := out.ReadFrom(in.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in.Responses, out.Responses) {
		t.Fatalf("round trip: %+v vs %+v", in.Responses, out.Responses)
	}
}

// A length field claiming more elements than the frame can hold fails cleanly instead of
// allocating.
func TestHostileArrayLength(t *testing.T) {
	b := sample().AppendTo(nil)
	// Truncate inside the topics array: every prefix must fail, never panic.
	for i := 0; i < len(b); i++ {
		var r Request
		if err := r.ReadFrom(b[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded without error", i)
		}
	}
}

// FuzzRequestDecode: any body decodes or fails cleanly, a decoded one re-encodes, and
// DecodeCost fails exactly where ReadFrom fails and bounds what it allocates.
func FuzzRequestDecode(f *testing.F) {
	f.Add(sample().AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkCost(t, b)
		var r Request
		if err := r.ReadFrom(b); err != nil {
			return
		}
		var again Request
		if err := again.ReadFrom(r.AppendTo(nil)); err != nil {
			t.Fatalf("re-encoding a decoded request does not decode: %v", err)
		}
	})
}
