package metadata

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/exactq/exactq/wire"
)

func framed(recs []wire.MetadataRecord) []byte {
	var b []byte
	for _, r := range recs {
		b = wire.AppendMetadataRecord(b, r)
		b = append(b, '|')
	}
	return b
}

// An entry decodes to the records encoded into it, and the Machine's checkpoint of any
// image decodes to an equal image.
func TestEntryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		im := Empty()
		m := Machine{}
		for i := range rapid.IntRange(1, 20).Draw(t, "batches") {
			var batch []wire.MetadataRecord
			for range rapid.IntRange(1, 4).Draw(t, "records") {
				batch = append(batch, genRecord(t, im))
			}
			data, err := EncodeEntry(int64(i), batch)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeEntry(data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(framed(back), framed(batch)) {
				t.Fatal("entry round trip changed the records")
			}
			next, _, err := m.Apply(im, uint64(i+1), data)
			if err == nil {
				im = next.(*Image)
			} else if !errors.Is(err, ErrRefused) {
				t.Fatalf("Apply: %v", err)
			}
			cp, err := m.Encode(im)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Decode(cp)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(frames(t, got.(*Image)), frames(t, im)) {
				t.Fatal("checkpoint round trip changed the image")
			}
		}
	})
}

// Damage anywhere in an entry is refused (the batch CRC covers it), never applied as other
// records, and an oversized batch is refused when encoded.
func TestEntryRefusesDamage(t *testing.T) {
	v := "x"
	recs := []wire.MetadataRecord{
		&wire.ClusterRecord{ClusterID: "c1", CreatedMillis: 5},
		&wire.ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "a", Value: &v},
	}
	data, err := EncodeEntry(1, recs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		if _, err := DecodeEntry(bad); err == nil {
			t.Fatalf("byte %d flipped: decoded", i)
		}
	}
	for n := range len(data) {
		if _, err := DecodeEntry(data[:n]); err == nil {
			t.Fatalf("cut to %d bytes: decoded", n)
		}
	}
	huge := strings.Repeat("v", MaxEntryBytes)
	big := []wire.MetadataRecord{&wire.ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "a", Value: &huge}}
	if _, err := EncodeEntry(1, big); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("9 MiB entry: %v, want ErrEntryTooLarge", err)
	}
	if _, err := EncodeEntry(1, nil); err == nil {
		t.Fatal("an empty entry encoded")
	}
}

// A registration written with epoch -1 gets the raft index of its entry as the broker's
// epoch on every node, and a checkpoint keeps the epoch; outside an entry it is refused.
func TestRegistrationEpochIsIndex(t *testing.T) {
	reg := wire.NewRegisterBrokerRecord()
	reg.BrokerID, reg.BrokerEpoch, reg.Fenced = 3, -1, true
	data, err := EncodeEntry(1, []wire.MetadataRecord{&reg})
	if err != nil {
		t.Fatal(err)
	}
	m := Machine{}
	st, _, err := m.Apply(Empty(), 42, data)
	if err != nil {
		t.Fatal(err)
	}
	im := st.(*Image)
	if got := im.Brokers[3].Epoch; got != 42 {
		t.Fatalf("epoch %d, want the entry's index 42", got)
	}
	cp, _ := m.Encode(im)
	back, err := m.Decode(cp)
	if err != nil || back.(*Image).Brokers[3].Epoch != 42 {
		t.Fatalf("after a checkpoint: %v %+v", err, back)
	}
	if _, _, err := Apply(Empty(), []wire.MetadataRecord{&reg}); !errors.Is(err, ErrRefused) {
		t.Fatalf("epoch -1 outside an entry: %v", err)
	}
	// A later registration of the same broker at a higher index replaces it.
	st, _, err = m.Apply(im, 50, data)
	if err != nil || st.(*Image).Brokers[3].Epoch != 50 {
		t.Fatalf("re-registration: %v", err)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	v := "v"
	for _, recs := range [][]wire.MetadataRecord{
		{&wire.ClusterRecord{ClusterID: "c"}},
		{&wire.TopicRecord{Name: "t", TopicID: [16]byte{1}}, &wire.ConfigRecord{ResourceType: 2, ResourceName: "t", Name: "n", Value: &v}},
	} {
		data, _ := EncodeEntry(7, recs)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeEntry(data)
		if err != nil {
			return
		}
		// What decodes re-encodes to records that decode the same.
		again, err := EncodeEntry(0, recs)
		if err != nil {
			t.Fatalf("re-encoding decoded records: %v", err)
		}
		back, err := DecodeEntry(again)
		if err != nil || !bytes.Equal(framed(back), framed(recs)) {
			t.Fatalf("decoded records did not round-trip: %v", err)
		}
		_, _, _ = Machine{}.Apply(Empty(), 1, data) // refused or applied, never a panic
	})
}
