package raftstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func TestHardStateRoundTrip(t *testing.T) {
	for _, hs := range []*pb.HardState{mkHardState(0, 0, 0), mkHardState(7, 3, 12345), mkHardState(1<<63, 1<<40, 1<<62)} {
		got, err := decodeHardState(encodeHardState(hs))
		if err != nil || !proto.Equal(mkHardState(got.GetTerm(), got.GetVote(), got.GetCommit()), hs) {
			t.Fatalf("%v decoded as %v, %v", hs, got, err)
		}
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	snap := mkSnapshot(12345, 7, []uint64{1, 2, 3}, []byte("image"))
	snap.Metadata.ConfState.Learners = []uint64{9}
	got, err := decodeCheckpoint(encodeCheckpoint(snap))
	if err != nil || !proto.Equal(got, snap) {
		t.Fatalf("decoded %v, %v; want %v", got, err, snap)
	}
	if name := checkpointName(12345, 7); name != "00000000000000012345-0000000007.checkpoint" {
		t.Fatalf("name %q", name)
	}
	if i, tm, ok := parseCheckpointName(checkpointName(12345, 7)); !ok || i != 12345 || tm != 7 {
		t.Fatalf("parsed %d %d %v", i, tm, ok)
	}
}

// TestDecodersRejectDamage: every truncation and every flipped byte of a quorum-state or
// checkpoint file is refused (the CRC covers everything).
func TestDecodersRejectDamage(t *testing.T) {
	qs := encodeHardState(mkHardState(5, 2, 99))
	ck := encodeCheckpoint(mkSnapshot(40, 3, []uint64{1}, []byte("some image bytes")))
	for name, c := range map[string]struct {
		b      []byte
		decode func([]byte) error
	}{
		"quorum-state": {qs, func(b []byte) error { _, err := decodeHardState(b); return err }},
		"checkpoint":   {ck, func(b []byte) error { _, err := decodeCheckpoint(b); return err }},
	} {
		for n := 0; n < len(c.b); n++ {
			if err := c.decode(c.b[:n]); !errors.Is(err, errDamaged) {
				t.Fatalf("%s cut at %d: %v", name, n, err)
			}
		}
		for i := range c.b {
			d := append([]byte(nil), c.b...)
			d[i] ^= 0x41
			if err := c.decode(d); !errors.Is(err, errDamaged) {
				t.Fatalf("%s with byte %d flipped: %v", name, i, err)
			}
		}
		if err := c.decode(append(append([]byte(nil), c.b...), 0)); !errors.Is(err, errDamaged) {
			t.Fatalf("%s with a byte appended: %v", name, err)
		}
	}
}

// framed gives a fuzzer's bytes a valid magic and CRC when it asks for them, so that the
// decoders' parsing behind the CRC is fuzzed too (random bytes almost never pass a CRC).
func framed(b []byte, magic string, frame bool) []byte {
	if !frame {
		return b
	}
	return appendCRC(append([]byte(magic), b...))
}

// unframed strips a valid file's magic and CRC (seeds for the framed mode).
func unframed(b []byte, magic string) []byte { return b[len(magic) : len(b)-4] }

func FuzzDecodeHardState(f *testing.F) {
	f.Add(encodeHardState(mkHardState(5, 2, 99)), false)
	f.Add(unframed(encodeHardState(mkHardState(5, 2, 99)), qsMagic), true)
	f.Add([]byte(qsMagic), false)
	f.Fuzz(func(t *testing.T, b []byte, frame bool) {
		hs, err := decodeHardState(framed(b, qsMagic, frame))
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a file that decodes to the same state.
		again, err := decodeHardState(encodeHardState(hs))
		if err != nil || again.GetTerm() != hs.GetTerm() || again.GetVote() != hs.GetVote() || again.GetCommit() != hs.GetCommit() {
			t.Fatalf("%v re-decoded as %v, %v", hs, again, err)
		}
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(encodeCheckpoint(mkSnapshot(40, 3, []uint64{1, 2}, []byte("image"))), false)
	f.Add(unframed(encodeCheckpoint(mkSnapshot(40, 3, []uint64{1, 2}, []byte("image"))), ckptMagic), true)
	f.Add(unframed(encodeCheckpoint(mkSnapshot(1, 1, nil, nil)), ckptMagic), true)
	f.Add([]byte(ckptMagic), false)
	f.Fuzz(func(t *testing.T, b []byte, frame bool) {
		snap, err := decodeCheckpoint(framed(b, ckptMagic, frame))
		if err != nil {
			return
		}
		if snap.GetMetadata().GetIndex() == 0 {
			t.Fatalf("decoded a snapshot at index 0")
		}
		again, err := decodeCheckpoint(encodeCheckpoint(snap))
		if err != nil || !proto.Equal(again, snap) {
			t.Fatalf("%v re-decoded as %v, %v", snap, again, err)
		}
	})
}

// TestDamagedQuorumStateRefused: a voter must not forget its vote, so Open refuses a
// quorum-state it cannot read rather than start from an empty one.
func TestDamagedQuorumStateRefused(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, testOptions(nil))
	rd := entriesOnly(1, 1, 3)
	rd.HardState = mkHardState(1, 1, 2)
	if err := s.SaveReady(rd); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, quorumStateName)
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 1
	os.WriteFile(path, b, 0o644)
	if s, err := Open(dir, testOptions(nil)); err == nil {
		s.Close()
		t.Fatalf("Open accepted a damaged quorum-state")
	}
}

// TestDamagedCheckpointFallsBack: when the newest checkpoint fails its CRC, Open uses the
// older one, and the log (compacted only below the older one) still reaches back to it.
func TestDamagedCheckpointFallsBack(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	s := openStore(t, dir, opts)
	rd := entriesOnly(1, 2, 60)
	rd.HardState = mkHardState(2, 1, 60)
	if err := s.SaveReady(rd); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{20, 40, 50} {
		if _, err := s.Checkpoint(i, pb.EnsureConfState(&pb.ConfState{Voters: []uint64{1}}), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Compact(0); err != nil {
			t.Fatal(err)
		}
	}
	if first := uint64(s.log.StartOffset()) + 1; first != 41 {
		t.Fatalf("log starts at index %d, want 41 (after the older checkpoint, 40)", first)
	}
	if cs, _ := listCheckpoints(dir); len(cs) != 2 {
		t.Fatalf("%d checkpoint files, want 2", len(cs))
	}
	s.Close()
	path := filepath.Join(dir, checkpointName(50, 2))
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 1
	os.WriteFile(path, b, 0o644)
	s = openStore(t, dir, opts)
	defer s.Close()
	sn, _ := s.Storage().Snapshot()
	if sn.GetMetadata().GetIndex() != 40 {
		t.Fatalf("snapshot at %d, want the older checkpoint 40", sn.GetMetadata().GetIndex())
	}
	requireEntries(t, "after fallback", s.Storage(), 41, entriesOnly(41, 2, 20).Entries)
}
