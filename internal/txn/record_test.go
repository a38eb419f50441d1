package txn

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, m := range []Metadata{
		{ProducerID: 7, PrevProducerID: -1, NextProducerID: -1, ProducerEpoch: 0, TimeoutMs: 60000, State: Empty, StartMs: -1, LastUpdateMs: 5, ClientTV: 0},
		{ProducerID: 7, PrevProducerID: 7, NextProducerID: 9, ProducerEpoch: 32767, TimeoutMs: 60000, State: PrepareCommit,
			Partitions: []TopicPartition{{"a", 0}, {"a", 3}, {"b", 1}}, StartMs: 4, LastUpdateMs: 5, ClientTV: 2},
		{ProducerID: 9, PrevProducerID: 7, NextProducerID: -1, ProducerEpoch: 0, TimeoutMs: 60000, State: CompleteCommit,
			Partitions: []TopicPartition{}, StartMs: 4, LastUpdateMs: 6, ClientTV: 2},
		// KIP-939: a kept two-phase transaction (exactq's tags 939/940), and the decision
		// of a kept transaction whose producer id was rotated (tag 3, NextProducerEpoch).
		{ProducerID: 7, PrevProducerID: 7, NextProducerID: -1, ProducerEpoch: 4, TimeoutMs: twoPhaseTimeoutMs, State: Ongoing,
			Partitions: []TopicPartition{{"a", 0}}, StartMs: 4, LastUpdateMs: 7, ClientTV: 2, Kept: true, KeptProducerID: 7, KeptProducerEpoch: 3},
		{ProducerID: 7, PrevProducerID: 11, NextProducerID: 11, NextProducerEpoch: 3, ProducerEpoch: 32767, TimeoutMs: twoPhaseTimeoutMs,
			State: PrepareAbort, Partitions: []TopicPartition{{"a", 0}}, StartMs: 4, LastUpdateMs: 8, ClientTV: 2},
	} {
		if m.NextProducerEpoch == 0 {
			m.NextProducerEpoch = -1
		}
		if !m.Kept {
			m.KeptProducerID, m.KeptProducerEpoch = -1, -1
		}
		r := record(&transit{id: "tx", meta: m})
		id, got, ok, err := decodeRecord(r.Key, r.Value)
		if err != nil || !ok || id != "tx" {
			t.Fatal(id, ok, err)
		}
		m.LastProducerEpoch = -1
		if len(m.Partitions) == 0 {
			m.Partitions, got.Partitions = nil, nil
		}
		if !reflect.DeepEqual(*got, m) {
			t.Fatalf("got %+v\nwant %+v", *got, m)
		}
	}
	r := record(&transit{id: "tx", meta: Metadata{State: Dead}})
	if r.Value != nil {
		t.Fatal("tombstone has a value")
	}
	if id, m, ok, _ := decodeRecord(r.Key, nil); !ok || id != "tx" || m != nil {
		t.Fatal("tombstone decode")
	}
}

// The bytes Kafka 4.4's TransactionLog.valueToBytes writes at transaction.version 2 for an
// Empty id: version 1, ProducerId, ProducerEpoch, TransactionTimeoutMs, status, null
// partitions (compact length 0), last update, start, then the tagged fields, none of
// which differs from its default here (so the tag count is 0).
func TestEmptyValueBytes(t *testing.T) {
	m := Metadata{ProducerID: 1, PrevProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1, ProducerEpoch: 2, TimeoutMs: 3, State: Empty, StartMs: -1, LastUpdateMs: 4}
	want := "0001" + "0000000000000001" + "0002" + "00000003" + "00" + "00" + "0000000000000004" + "ffffffffffffffff" + "00"
	if got := hex.EncodeToString(encodeValue(m)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	key := encodeKey("ab")
	if !bytes.Equal(key, []byte{0, 0, 0, 2, 'a', 'b'}) {
		t.Fatalf("key %x", key)
	}
}
