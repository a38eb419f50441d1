package eos

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

var snapshotExamples = []Snapshot{
	{TransactionalID: "orders-1", Prepared: true, ProducerID: 4711, Epoch: 3},
	{TransactionalID: "orders-1", ProducerID: -1, Epoch: -1},
	{TransactionalID: "ü-" + strings.Repeat("x", 300), Prepared: true, ProducerID: 1<<62 + 5, Epoch: 32767},
}

// Encoded snapshots decode to what was encoded.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, s := range snapshotExamples {
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSnapshot(b)
		if err != nil || got != s {
			t.Fatalf("decode(%x) = %+v, %v; want %+v", b, got, err, s)
		}
	}
}

// The version-1 layout is fixed: snapshots stored by earlier releases must keep decoding.
func TestSnapshotGolden(t *testing.T) {
	const golden = "6571637001010000000000001267000300086f72646572732d31afd083d7"
	enc, err := snapshotExamples[0].MarshalBinary()
	if err != nil || hex.EncodeToString(enc) != golden {
		t.Fatalf("encoding changed: %x, %v; want %s", enc, err, golden)
	}
	b, _ := hex.DecodeString(golden)
	if s, err := DecodeSnapshot(b); err != nil || s != snapshotExamples[0] {
		t.Fatalf("golden decodes to %+v, %v", s, err)
	}
}

// Garbage, truncations, extensions, flipped bits and later versions are refused with
// ErrSnapshot and a message that says why.
func TestDecodeSnapshotRefuses(t *testing.T) {
	good, _ := snapshotExamples[0].MarshalBinary()
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	version2 := bytes.Clone(good)
	version2[4] = 2
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"nil":       {nil, "magic"},
		"json":      {[]byte(`{"txn":"orders-1"}`), "magic"},
		"header":    {good[:10], "header"},
		"truncated": {good[:len(good)-1], "header says"},
		"extended":  {append(bytes.Clone(good), 0), "header says"},
		"id bit":    {flip(snapshotFixed + 2), "checksum"},
		"epoch bit": {flip(15), "checksum"},
		"version":   {version2, "version 2"},
	} {
		_, err := DecodeSnapshot(c.b)
		if !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrSnapshot mentioning %q", name, err, c.want)
		}
	}
	for _, s := range []Snapshot{
		{ProducerID: -1, Epoch: -1},
		{TransactionalID: "x", Prepared: true, ProducerID: -1, Epoch: 0},
		{TransactionalID: "x", ProducerID: 7, Epoch: 1},
		{TransactionalID: "\xff", ProducerID: -1, Epoch: -1},
	} {
		if _, err := s.MarshalBinary(); !errors.Is(err, ErrSnapshot) {
			t.Errorf("MarshalBinary(%+v): %v, want ErrSnapshot", s, err)
		}
	}
}

// Whatever the bytes, DecodeSnapshot returns a snapshot that encodes back to exactly
// them, or an ErrSnapshot; it never panics.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, s := range snapshotExamples {
		b, _ := s.MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte("eqcp"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error %v does not match ErrSnapshot", err)
			}
			return
		}
		enc, err := s.MarshalBinary()
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("%x decoded to %+v, which encodes to %x, %v", b, s, enc, err)
		}
	})
}
