package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataRecordVersions pins each record's type and versions to Kafka 4.4's schema
// (metadata/src/main/resources/common/metadata/<Name>.json: apiKey, validVersions);
// ClusterRecord is exactq's.
func TestMetadataRecordVersions(t *testing.T) {
	want := map[string][2]int16{
		"RegisterBrokerRecord":            {0, 4},
		"UnregisterBrokerRecord":          {1, 0},
		"TopicRecord":                     {2, 0},
		"PartitionRecord":                 {3, 2},
		"ConfigRecord":                    {4, 0},
		"PartitionChangeRecord":           {5, 2},
		"RemoveTopicRecord":               {9, 0},
		"UserScramCredentialRecord":       {11, 0},
		"AccessControlEntryRecord":        {18, 0},
		"RemoveAccessControlEntryRecord":  {19, 0},
		"RemoveUserScramCredentialRecord": {22, 0},
		"FeatureLevelRecord":              {12, 0},
		"ProducerIdsRecord":               {15, 0},
		"BrokerRegistrationChangeRecord":  {17, 3},
		"ClearElrRecord":                  {28, 0},
		"ClusterRecord":                   {1000, 0},
	}
	seen := 0
	for _, typ := range MetadataRecordTypes() {
		r := NewMetadataRecord(typ)
		name := reflect.TypeOf(r).Elem().Name()
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: not pinned", name)
			continue
		}
		seen++
		if int16(r.Type()) != w[0] || r.Type() != typ || r.MaxVersion() != w[1] {
			t.Errorf("%s: type %d (enum %d), max version %d; want %d, %d", name, r.Type(), typ, r.MaxVersion(), w[0], w[1])
		}
		if typ.String() != name {
			t.Errorf("type %d: String %q, want %q", typ, typ.String(), name)
		}
	}
	if seen != len(want) {
		t.Errorf("%d record types, want %d", seen, len(want))
	}
	if NewMetadataRecord(6) != nil {
		t.Error("type 6 (Kafka's FenceBrokerRecord, not carried over) has a record")
	}
}

// metadataRecord is a populated record of typ at version: every field its version has
// set to something other than its default, a tagged field only at the versions Kafka
// has it, and an unknown tag.
func metadataRecord(typ MetadataRecordType, v int16) MetadataRecord {
	id := [16]byte{0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xcd}
	var r MetadataRecord
	switch typ {
	case MetadataRecordTypeRegisterBrokerRecord:
		x := NewRegisterBrokerRecord()
		x.BrokerID, x.IncarnationID, x.BrokerEpoch = 3, id, 77
		x.IsMigratingZkBroker = v >= 2
		x.EndPoints = []RegisterBrokerRecordEndPoint{{Name: "PLAINTEXT", Host: "h1", Port: 9092, SecurityProtocol: 0}, {Name: "CONTROLLER", Host: "h1", Port: 65535, SecurityProtocol: 1}}
		x.Features = []RegisterBrokerRecordFeature{{Name: "metadata.version", MinSupportedVersion: 7, MaxSupportedVersion: 27}}
		x.Rack = kmsg.StringPtr("rack-a")
		x.Fenced = false
		x.InControlledShutdown = v >= 1
		if v >= 3 {
			x.LogDirs = [][16]byte{id, {1}}
		}
		if v >= 4 {
			x.CordonedLogDirs = [][16]byte{{1}}
		}
		r = &x
	case MetadataRecordTypeUnregisterBrokerRecord:
		x := NewUnregisterBrokerRecord()
		x.BrokerID, x.BrokerEpoch = 3, 77
		r = &x
	case MetadataRecordTypeTopicRecord:
		x := NewTopicRecord()
		x.Name, x.TopicID = "orders", id
		r = &x
	case MetadataRecordTypePartitionRecord:
		x := NewPartitionRecord()
		x.PartitionID, x.TopicID = 7, id
		x.Replicas, x.ISR, x.RemovingReplicas, x.AddingReplicas = []int32{1, 2, 3}, []int32{1, 2}, []int32{3}, []int32{4}
		x.Leader, x.LeaderRecoveryState, x.LeaderEpoch, x.PartitionEpoch = 1, 1, 5, 9
		if v >= 1 {
			x.Directories = [][16]byte{id, id, {2}}
		}
		if v >= 2 {
			x.EligibleLeaderReplicas, x.LastKnownELR = []int32{2}, []int32{}
		}
		r = &x
	case MetadataRecordTypeConfigRecord:
		x := NewConfigRecord()
		x.ResourceType, x.ResourceName, x.Name, x.Value = 2, "orders", "retention.ms", kmsg.StringPtr("1000")
		r = &x
	case MetadataRecordTypePartitionChangeRecord:
		x := NewPartitionChangeRecord()
		x.PartitionID, x.TopicID = 7, id
		x.ISR, x.Leader, x.Replicas, x.RemovingReplicas, x.AddingReplicas = []int32{2}, -1, []int32{2, 3}, []int32{}, []int32{9}
		x.LeaderRecoveryState = 0
		if v >= 1 {
			x.Directories = [][16]byte{id, {3}}
		}
		if v >= 2 {
			x.EligibleLeaderReplicas, x.LastKnownELR = []int32{3}, []int32{2}
		}
		r = &x
	case MetadataRecordTypeRemoveTopicRecord:
		x := NewRemoveTopicRecord()
		x.TopicID = id
		r = &x
	case MetadataRecordTypeFeatureLevelRecord:
		x := NewFeatureLevelRecord()
		x.Name, x.FeatureLevel = "metadata.version", 27
		r = &x
	case MetadataRecordTypeProducerIdsRecord:
		x := NewProducerIdsRecord()
		x.BrokerID, x.BrokerEpoch, x.NextProducerID = 3, 77, 5000
		r = &x
	case MetadataRecordTypeBrokerRegistrationChangeRecord:
		x := NewBrokerRegistrationChangeRecord()
		x.BrokerID, x.BrokerEpoch, x.Fenced = 3, 77, -1
		if v >= 1 {
			x.InControlledShutdown = 1
		}
		if v >= 2 {
			x.LogDirs = [][16]byte{id}
		}
		if v >= 3 {
			x.CordonedLogDirs = [][16]byte{}
		}
		r = &x
	case MetadataRecordTypeUserScramCredentialRecord:
		x := NewUserScramCredentialRecord()
		x.Name, x.Mechanism, x.Iterations = "alice", 2, 8192
		x.Salt, x.StoredKey, x.ServerKey = []byte("salt"), id[:], []byte{0, 1, 2}
		r = &x
	case MetadataRecordTypeRemoveUserScramCredentialRecord:
		x := NewRemoveUserScramCredentialRecord()
		x.Name, x.Mechanism = "alice", 1
		r = &x
	case MetadataRecordTypeAccessControlEntryRecord:
		x := NewAccessControlEntryRecord()
		x.ID, x.ResourceType, x.ResourceName, x.PatternType = id, 2, "orders-", 4
		x.Principal, x.Host, x.Operation, x.PermissionType = "User:alice", "10.0.0.0/8", 3, 3
		r = &x
	case MetadataRecordTypeRemoveAccessControlEntryRecord:
		x := NewRemoveAccessControlEntryRecord()
		x.ID = id
		r = &x
	case MetadataRecordTypeClearElrRecord:
		x := NewClearElrRecord()
		x.TopicName = "orders"
		r = &x
	case MetadataRecordTypeClusterRecord:
		x := NewClusterRecord()
		x.ClusterID, x.CreatedMillis = "MkU3OEVBNTcwNTJENDM2Qk", 1764633600000
		r = &x
	default:
		panic("no populated record for type " + typ.String())
	}
	r.SetVersion(v)
	reflect.ValueOf(r).Elem().FieldByName("UnknownTags").Addr().Interface().(*Tags).Set(30, []byte("future"))
	return r
}

// everyRecord is a populated record of every type at every version.
func everyRecord() []MetadataRecord {
	var all []MetadataRecord
	for _, typ := range MetadataRecordTypes() {
		for v := range NewMetadataRecord(typ).MaxVersion() + 1 {
			all = append(all, metadataRecord(typ, v))
		}
	}
	return all
}

// TestMetadataRecordRoundTrip: every record at every version decodes to what was encoded,
// framed (safe and unsafe) and through AppendTo/ReadFrom (franz-go's int16 version
// before the body); every strict prefix of a frame is an error, and so is a byte after it.
func TestMetadataRecordRoundTrip(t *testing.T) {
	for _, in := range everyRecord() {
		b := AppendMetadataRecord(nil, in)
		for _, unsafe := range []bool{false, true} {
			out, err := ReadMetadataRecord(b, unsafe)
			if err != nil {
				t.Fatalf("%s v%d: %v", in.Type(), in.GetVersion(), err)
			}
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("%s v%d round trip:\n%+v\n%+v", in.Type(), in.GetVersion(), in, out)
			}
		}
		for n := range len(b) {
			if _, err := ReadMetadataRecord(b[:n], false); err == nil {
				t.Fatalf("%s v%d: %d of %d bytes decoded", in.Type(), in.GetVersion(), n, len(b))
			}
		}
		if _, err := ReadMetadataRecord(append(b[:len(b):len(b)], 0), false); !errors.Is(err, ErrMetadataTrailing) {
			t.Fatalf("%s v%d: a byte after the body: %v, want ErrMetadataTrailing", in.Type(), in.GetVersion(), err)
		}

		franz := reflect.ValueOf(in).MethodByName("AppendTo").Call([]reflect.Value{reflect.ValueOf([]byte(nil))})[0].Bytes()
		if want := append(kbin.AppendInt16(nil, in.GetVersion()), in.AppendBodyTo(nil)...); !bytes.Equal(franz, want) {
			t.Fatalf("%s v%d: AppendTo %x, want the int16 version then AppendBodyTo's %x", in.Type(), in.GetVersion(), franz, want)
		}
		back := NewMetadataRecord(in.Type())
		if err := back.(interface{ ReadFrom([]byte) error }).ReadFrom(franz); err != nil || !reflect.DeepEqual(in, back) {
			t.Fatalf("%s v%d: ReadFrom of AppendTo: %v\n%+v\n%+v", in.Type(), in.GetVersion(), err, in, back)
		}
	}
}

// TestMetadataRecordFrameRefused: what KRaft's MetadataRecordSerde refuses is refused.
func TestMetadataRecordFrameRefused(t *testing.T) {
	good := AppendMetadataRecord(nil, metadataRecord(MetadataRecordTypeTopicRecord, 0))
	body := good[3:]
	frame := func(frameVersion, typ, version uint32) []byte {
		b := kbin.AppendUvarint(nil, frameVersion)
		b = kbin.AppendUvarint(b, typ)
		return append(kbin.AppendUvarint(b, version), body...)
	}
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"frame version 0":     {frame(0, 2, 0), ErrMetadataFrame},
		"frame version 2":     {frame(2, 2, 0), ErrMetadataFrame},
		"type above int16":    {frame(1, 1<<15, 0), ErrMetadataFrame},
		"version above int16": {frame(1, 2, 1<<15), ErrMetadataFrame},
		"unknown type":        {frame(1, 6, 0), ErrUnknownMetadataRecord},
		"version too new":     {frame(1, 2, 1), ErrUnknownMetadataRecord},
		"empty":               {nil, ErrMetadataFrame},
	} {
		if _, err := ReadMetadataRecord(c.b, false); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// TestMetadataRecordBytes pins two frames as Kafka 4.4's MetadataRecordSerde writes them
// (read off the schemas: frame version 1, type, version, then the body; a tagged field
// only when not its default, tags in order).
func TestMetadataRecordBytes(t *testing.T) {
	id := [16]byte{15: 1}
	change := NewPartitionChangeRecord()
	change.PartitionID, change.TopicID, change.Leader = 3, id, -1
	topic := NewTopicRecord()
	topic.Name, topic.TopicID = "t", id
	for _, c := range []struct {
		r    MetadataRecord
		want string
	}{
		// 01 05 00 | partition 3 | topic id | 1 tag: tag 1, 4 bytes, -1
		{&change, "010500" + "00000003" + "00000000000000000000000000000001" + "01" + "0104ffffffff"},
		// 01 02 00 | compact string "t" | topic id | no tags
		{&topic, "010200" + "0274" + "00000000000000000000000000000001" + "00"},
	} {
		if got := hex.EncodeToString(AppendMetadataRecord(nil, c.r)); got != c.want {
			t.Errorf("%s: %s, want %s", c.r.Type(), got, c.want)
		}
	}
}

// FuzzMetadataRecord: any bytes decode as a framed record or fail cleanly (never panic),
// and what decoded re-encodes to a frame that decodes to the same record.
func FuzzMetadataRecord(f *testing.F) {
	for _, r := range everyRecord() {
		f.Add(AppendMetadataRecord(nil, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ReadMetadataRecord(b, false)
		if err != nil {
			return
		}
		again, err := ReadMetadataRecord(AppendMetadataRecord(nil, r), false)
		if err != nil {
			t.Fatalf("%s v%d: re-encoding a decoded record does not decode: %v", r.Type(), r.GetVersion(), err)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("%s v%d: decode, encode, decode changed the record:\n%+v\n%+v", r.Type(), r.GetVersion(), r, again)
		}
	})
}
