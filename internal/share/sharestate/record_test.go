package sharestate

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/exactq/exactq/internal/coordlog"
)

var testTopic = [16]byte{0x5e, 0x1a, 0x0b, 0x3c, 0x7d, 0x2e, 0x4f, 0x60, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8}

func TestKeyEncodingIsKafkas(t *testing.T) {
	k := recordKey{Type: recordTypeUpdate, Key: Key{GroupID: "g", TopicID: testTopic, Partition: 3}}
	got := encodeKey(nil, k)
	// int16 type 1, int16 len 1, "g", 16-byte uuid, int32 3.
	want, _ := hex.DecodeString("0001" + "0001" + "67" + hex.EncodeToString(testTopic[:]) + "00000003")
	if !bytes.Equal(got, want) {
		t.Fatalf("key %x, want %x", got, want)
	}
	back, err := decodeKey(got)
	if err != nil || back != k {
		t.Fatalf("decode: %+v %v", back, err)
	}
}

func TestValueEncodingIsKafkas(t *testing.T) {
	v := &updateValue{SnapshotEpoch: 1, LeaderEpoch: 2, StartOffset: 3, DeliveryCompleteCount: 4,
		Batches: []StateBatch{sb(5, 6, StateAcknowledged, 7)}}
	got := encodeUpdateValue(nil, v)
	want, _ := hex.DecodeString("0000" + // value version 0
		"00000001" + "00000002" + "0000000000000003" + // SnapshotEpoch, LeaderEpoch, StartOffset
		"02" + // compact array: 1 batch
		"0000000000000005" + "0000000000000006" + "02" + "0007" + "00" + // batch, no tags
		"01" + "00" + "04" + "00000004") // 1 tag: tag 0, 4 bytes, DeliveryCompleteCount
	if !bytes.Equal(got, want) {
		t.Fatalf("value\n%x\nwant\n%x", got, want)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	staged := StateBatch{FirstOffset: 10, LastOffset: 12, DeliveryState: StateTxPending, DeliveryCount: 2,
		TxnProducerID: 99, TxnProducerEpoch: 4, TxnAckType: AckReject, TxnCommitState: StateArchiving, TxnAbortState: StateArchived}
	snaps := []*snapshotValue{
		{SnapshotEpoch: 0, StateEpoch: 0, LeaderEpoch: 0, StartOffset: -1, DeliveryCompleteCount: -1},
		{SnapshotEpoch: 7, StateEpoch: 3, LeaderEpoch: 9, StartOffset: 100, DeliveryCompleteCount: 12, CreateTimestamp: 1e12, WriteTimestamp: 2e12,
			Batches: []StateBatch{sb(100, 109, StateAvailable, 1), staged, sb(13, 13, StateArchived, 5)}},
	}
	for _, v := range snaps {
		got, err := decodeSnapshotValue(encodeSnapshotValue(nil, v))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("snapshot round trip\n%+v\n%+v", got, v)
		}
	}
	u := &updateValue{SnapshotEpoch: 2, LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: -1, Batches: []StateBatch{staged}}
	got, err := decodeUpdateValue(encodeUpdateValue(nil, u))
	if err != nil || !reflect.DeepEqual(got, u) {
		t.Fatalf("update round trip %+v %v", got, err)
	}
}

func TestDecodeSkipsUnknownTags(t *testing.T) {
	v := &updateValue{LeaderEpoch: 1, StartOffset: 2, DeliveryCompleteCount: -1}
	b := encodeUpdateValue(nil, v)
	b = append(b[:len(b)-1], 0x01, 0x09, 0x02, 0xaa, 0xbb) // tag 9, 2 bytes
	got, err := decodeUpdateValue(b)
	if err != nil || got.LeaderEpoch != 1 || got.DeliveryCompleteCount != -1 {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {0}, {0, 2}, {0, 0, 0, 0}, {0, 1, 0, 5, 'a'}} {
		if _, err := decodeKey(b); err == nil {
			t.Errorf("key %x decoded", b)
		}
	}
	full := encodeSnapshotValue(nil, &snapshotValue{Batches: []StateBatch{sb(1, 2, 0, 1)}})
	for i := range len(full) {
		if _, err := decodeSnapshotValue(full[:i]); err == nil {
			t.Errorf("truncated snapshot value (%d of %d bytes) decoded", i, len(full))
		}
	}
	if _, err := decodeSnapshotValue(append(full, 0)); err == nil {
		t.Error("trailing byte accepted")
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(encodeSnapshotValue(nil, &snapshotValue{StartOffset: 5, DeliveryCompleteCount: 3, Batches: []StateBatch{sb(5, 9, 2, 1)}}), true)
	f.Add(encodeUpdateValue(nil, &updateValue{StartOffset: -1, DeliveryCompleteCount: -1, Batches: []StateBatch{{FirstOffset: 1, LastOffset: 1,
		DeliveryState: StateTxPending, TxnProducerID: 1, TxnAckType: 1, TxnCommitState: 2}}}), false)
	f.Fuzz(func(t *testing.T, b []byte, snapshot bool) {
		if snapshot {
			v, err := decodeSnapshotValue(b)
			if err != nil {
				return
			}
			again, err := decodeSnapshotValue(encodeSnapshotValue(nil, v))
			if err != nil || !reflect.DeepEqual(again, v) {
				t.Fatalf("re-encode changed %+v into %+v (%v)", v, again, err)
			}
			return
		}
		v, err := decodeUpdateValue(b)
		if err != nil {
			return
		}
		again, err := decodeUpdateValue(encodeUpdateValue(nil, v))
		if err != nil || !reflect.DeepEqual(again, v) {
			t.Fatalf("re-encode changed %+v into %+v (%v)", v, again, err)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(encodeKey(nil, recordKey{Type: recordTypeSnapshot, Key: Key{GroupID: "g", Partition: 1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			return
		}
		if again := encodeKey(nil, k); !bytes.Equal(again, b) {
			t.Fatalf("key %x re-encodes as %x", b, again)
		}
	})
}

func TestPartitionForMatchesJava(t *testing.T) {
	k := Key{GroupID: "grp", TopicID: [16]byte{}, Partition: 0}
	if s := k.String(); s != "grp:AAAAAAAAAAAAAAAAAAAAAA:0" {
		t.Fatalf("coordinator key %q", s)
	}
	// Java: "grp:AAAAAAAAAAAAAAAAAAAAAA:0".hashCode() computed by the same formula.
	h := coordlog.JavaStringHash(k.String())
	if h < 0 {
		h = -h
	}
	if got := PartitionFor(k, 50); got != h%50 {
		t.Fatalf("partition %d, want %d", got, h%50)
	}
	k2 := Key{GroupID: "g", TopicID: testTopic, Partition: 12}
	if s := k2.String(); s != "g:XhoLPH0uT2CBkqO0xdbn-A:12" {
		t.Fatalf("coordinator key %q (Kafka's Uuid.toString is URL-safe base64 without padding)", s)
	}
}
