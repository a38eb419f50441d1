package eos

import (
	"reflect"
	"testing"

	"github.com/exactq/exactq/kgoext"
)

// Acknowledgements collected over several polls come out sorted per partition, adjacent
// runs of one type merged, and mixed-type batches kept as they are.
func TestAckSetSortsAndCoalesces(t *testing.T) {
	tp := kgoext.TopicPartition{Topic: "in", Partition: 0}
	other := kgoext.TopicPartition{Topic: "in", Partition: 1}
	accept, reject := []kgoext.AckType{kgoext.AckAccept}, []kgoext.AckType{kgoext.AckReject}
	var s ackSet
	s.add(kgoext.TxnAcks{tp: {{FirstOffset: 10, LastOffset: 14, Types: accept}}})
	s.add(kgoext.TxnAcks{
		tp:    {{FirstOffset: 0, LastOffset: 4, Types: accept}, {FirstOffset: 5, LastOffset: 9, Types: accept}},
		other: {{FirstOffset: 3, LastOffset: 3, Types: reject}},
	})
	s.add(kgoext.TxnAcks{tp: {
		{FirstOffset: 15, LastOffset: 16, Types: []kgoext.AckType{kgoext.AckAccept, kgoext.AckGap}},
		{FirstOffset: 17, LastOffset: 17, Types: accept},
	}})
	if s.len() != 19 {
		t.Fatalf("len %d, want 19", s.len())
	}
	want := kgoext.TxnAcks{
		tp: {
			{FirstOffset: 0, LastOffset: 14, Types: accept},
			{FirstOffset: 15, LastOffset: 16, Types: []kgoext.AckType{kgoext.AckAccept, kgoext.AckGap}},
			{FirstOffset: 17, LastOffset: 17, Types: accept},
		},
		other: {{FirstOffset: 3, LastOffset: 3, Types: reject}},
	}
	if got := s.txnAcks(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	s.clear()
	if s.len() != 0 || len(s.txnAcks()) != 0 {
		t.Fatal("clear left acknowledgements")
	}
}
