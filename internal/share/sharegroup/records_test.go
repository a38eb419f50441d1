package sharegroup

import (
	"bytes"
	"reflect"
	"testing"
)

func strp(s string) *string { return &s }

func TestRecordKeyBytes(t *testing.T) {
	// ShareGroupMemberMetadataKey: int16 type 10, then GroupId and MemberId as int16
	// length-prefixed strings (version 0, not flexible).
	got := encodeKey(recordKey{Type: recMemberMetadata, GroupID: "g", MemberID: "m1"})
	want := []byte{0, 10, 0, 1, 'g', 0, 2, 'm', '1'}
	if !bytes.Equal(got, want) {
		t.Fatalf("key % x, want % x", got, want)
	}
	got = encodeKey(recordKey{Type: recMetadata, GroupID: "g"})
	if want := []byte{0, 11, 0, 1, 'g'}; !bytes.Equal(got, want) {
		t.Fatalf("key % x, want % x", got, want)
	}
	k, ok, err := decodeKey([]byte{0, 2, 0, 1, 'g'}) // a classic GroupMetadataKey
	if ok || err != nil {
		t.Fatalf("classic key: ok %v err %v (%+v)", ok, err, k)
	}
}

func TestRecordValueBytes(t *testing.T) {
	// ShareGroupMetadataValue v0: version, Epoch, MetadataHash, empty tag section.
	v := metadataValue{Epoch: 3, MetadataHash: -1}
	want := []byte{0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}
	if got := v.encode(); !bytes.Equal(got, want) {
		t.Fatalf("metadata % x, want % x", got, want)
	}
	// ShareGroupMemberMetadataValue v0: null rack (0), compact strings, compact array.
	m := memberMetadataValue{ClientID: "c", ClientHost: "/h", SubscribedTopicNames: []string{"t"}}
	want = []byte{0, 0, 0, 2, 'c', 3, '/', 'h', 2, 2, 't', 0}
	if got := m.encode(); !bytes.Equal(got, want) {
		t.Fatalf("member % x, want % x", got, want)
	}
	// ShareGroupTargetAssignmentMetadataValue: the timestamp is tagged field 0, written
	// only when non-zero.
	ta := targetAssignmentMetadataValue{AssignmentEpoch: 1, AssignmentTimestampMs: 2}
	want = []byte{0, 0, 0, 0, 0, 1, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 2}
	if got := ta.encode(); !bytes.Equal(got, want) {
		t.Fatalf("target metadata % x, want % x", got, want)
	}
	ta.AssignmentTimestampMs = 0
	if got := ta.encode(); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 1, 0}) {
		t.Fatalf("target metadata without timestamp % x", got)
	}
}

func TestRecordRoundTrips(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, k := range []recordKey{
		{Type: recMemberMetadata, GroupID: "group", MemberID: "member"},
		{Type: recMetadata, GroupID: "group"},
		{Type: recTargetAssignmentMetadata, GroupID: "g"},
		{Type: recTargetAssignmentMember, GroupID: "g", MemberID: "m"},
		{Type: recCurrentMemberAssignment, GroupID: "g", MemberID: "m"},
		{Type: recStatePartitionMetadata, GroupID: "é"},
	} {
		got, ok, err := decodeKey(encodeKey(k))
		if !ok || err != nil || got != k {
			t.Fatalf("key %+v: got %+v ok %v err %v", k, got, ok, err)
		}
	}
	check := func(name string, want, got any, err error) {
		t.Helper()
		if err != nil || !reflect.DeepEqual(want, got) {
			t.Fatalf("%s: got %+v err %v, want %+v", name, got, err, want)
		}
	}
	mm := memberMetadataValue{RackID: strp("r"), ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"a", "b"}}
	got1, err := decodeMemberMetadata(mm.encode())
	check("member", mm, got1, err)
	mm2 := memberMetadataValue{SubscribedTopicNames: []string{}}
	got1, err = decodeMemberMetadata(mm2.encode())
	check("empty member", mm2, got1, err)
	md := metadataValue{Epoch: 7, MetadataHash: 1 << 40}
	got2, err := decodeMetadata(md.encode())
	check("metadata", md, got2, err)
	ta := targetAssignmentMetadataValue{AssignmentEpoch: 9, AssignmentTimestampMs: 123456}
	got3, err := decodeTargetAssignmentMetadata(ta.encode())
	check("target metadata", ta, got3, err)
	tm := targetAssignmentMemberValue{TopicPartitions: []TopicPartitions{{TopicID: id, Partitions: []int32{0, 5}}}}
	got4, err := decodeTargetAssignmentMember(tm.encode())
	check("target member", tm, got4, err)
	ca := currentMemberAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, State: 0, AssignedPartitions: []TopicPartitions{{TopicID: id, Partitions: []int32{1}}}}
	got5, err := decodeCurrentMemberAssignment(ca.encode())
	check("current", ca, got5, err)
	sp := statePartitionMetadataValue{
		InitializingTopics: []initTopic{{TopicID: id, TopicName: "t", Partitions: []int32{2}}},
		InitializedTopics:  []initTopic{{TopicID: [16]byte{9}, TopicName: "u", Partitions: []int32{0, 1}}},
		DeletingTopics:     []deletingTopic{{TopicID: [16]byte{7}, TopicName: "v"}},
	}
	got6, err := decodeStatePartitionMetadata(sp.encode())
	check("state partitions", sp, got6, err)
}

func TestDecodeSkipsUnknownTags(t *testing.T) {
	// A metadata value with an unknown tagged field (tag 5, 2 bytes) still decodes.
	b := []byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 1, 5, 2, 0xaa, 0xbb}
	v, err := decodeMetadata(b)
	if err != nil || v.Epoch != 3 || v.MetadataHash != 9 {
		t.Fatalf("got %+v err %v", v, err)
	}
	if _, err := decodeMetadata([]byte{0, 1, 0, 0, 0, 3}); err == nil {
		t.Fatal("value version 1 accepted")
	}
}

// FuzzDecode feeds arbitrary bytes to every decoder: none may panic, and whatever
// decodes re-encodes to a value that decodes equal.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 10, 0, 1, 'g', 0, 1, 'm'}, (&memberMetadataValue{ClientID: "c", SubscribedTopicNames: []string{"t"}}).encode())
	f.Add([]byte{0, 15, 0, 1, 'g'}, (&statePartitionMetadataValue{InitializedTopics: []initTopic{{TopicName: "t", Partitions: []int32{1}}}}).encode())
	f.Add([]byte{0, 14, 0, 0, 0, 0}, (&currentMemberAssignmentValue{AssignedPartitions: []TopicPartitions{{Partitions: []int32{3}}}}).encode())
	f.Add([]byte{0, 12, 0, 0}, (&targetAssignmentMetadataValue{AssignmentEpoch: 1, AssignmentTimestampMs: 5}).encode())
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if k, ok, err := decodeKey(key); ok && err == nil {
			if got, _, err := decodeKey(encodeKey(k)); err != nil || got != k {
				t.Fatalf("key round trip: %+v -> %+v, %v", k, got, err)
			}
		}
		if v, err := decodeMemberMetadata(value); err == nil {
			if w, err := decodeMemberMetadata(v.encode()); err != nil || !reflect.DeepEqual(v, w) {
				t.Fatalf("member: %+v -> %+v, %v", v, w, err)
			}
		}
		if v, err := decodeMetadata(value); err == nil {
			if w, err := decodeMetadata(v.encode()); err != nil || v != w {
				t.Fatalf("metadata: %+v -> %+v", v, w)
			}
		}
		if v, err := decodeTargetAssignmentMetadata(value); err == nil {
			if w, err := decodeTargetAssignmentMetadata(v.encode()); err != nil || v != w {
				t.Fatalf("target metadata: %+v -> %+v", v, w)
			}
		}
		if v, err := decodeTargetAssignmentMember(value); err == nil {
			if w, err := decodeTargetAssignmentMember(v.encode()); err != nil || !reflect.DeepEqual(v, w) {
				t.Fatalf("target member: %+v -> %+v", v, w)
			}
		}
		if v, err := decodeCurrentMemberAssignment(value); err == nil {
			if w, err := decodeCurrentMemberAssignment(v.encode()); err != nil || !reflect.DeepEqual(v, w) {
				t.Fatalf("current: %+v -> %+v", v, w)
			}
		}
		if v, err := decodeStatePartitionMetadata(value); err == nil {
			if w, err := decodeStatePartitionMetadata(v.encode()); err != nil || !reflect.DeepEqual(v, w) {
				t.Fatalf("state partitions: %+v -> %+v", v, w)
			}
		}
	})
}
