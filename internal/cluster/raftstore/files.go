package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Both files are a magic, length-prefixed protobuf bodies of raft's own types (raftpb's
// codec, not ours) and a CRC-32C of everything before it, written with
// log.WriteFileDurable (temporary file, fsync, rename, directory fsync).

const (
	quorumStateName = "quorum-state"
	qsMagic         = "EQQS0001"
	ckptMagic       = "EQCP0001"
	ckptExt         = ".checkpoint"

	// maxCheckpointBytes refuses to decode a checkpoint body larger than a RaftMessage
	// may carry (socket.request.max.bytes, the design's bound on MsgSnap).
	maxCheckpointBytes = 100 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// checkCRC returns b without its magic and trailing CRC if both check.
func checkCRC(b []byte, magic string) ([]byte, bool) {
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return nil, false
	}
	n := len(b) - 4
	if crc32.Checksum(b[:n], castagnoli) != binary.BigEndian.Uint32(b[n:]) {
		return nil, false
	}
	return b[len(magic):n], true
}

// encodeHardState is the content of quorum-state.
func encodeHardState(hs *pb.HardState) []byte {
	body, err := proto.Marshal(hs)
	if err != nil {
		panic("raftstore: marshal HardState: " + err.Error()) // three varints: cannot fail
	}
	b := append([]byte(qsMagic), binary.BigEndian.AppendUint32(nil, uint32(len(body)))...)
	return appendCRC(append(b, body...))
}

var errDamaged = errors.New("raftstore: damaged file")

func decodeHardState(b []byte) (*pb.HardState, error) {
	p, ok := checkCRC(b, qsMagic)
	if !ok || len(p) < 4 || int(binary.BigEndian.Uint32(p)) != len(p)-4 {
		return nil, errDamaged
	}
	hs := &pb.HardState{}
	if err := proto.Unmarshal(p[4:], hs); err != nil {
		return nil, errDamaged
	}
	return hs, nil
}

// checkpointName is KRaft's snapshot file name: the end offset (exclusive: the raft index
// of the snapshot, whose entry is at offset index-1) and the epoch (the term).
func checkpointName(index, term uint64) string {
	return fmt.Sprintf("%020d-%010d%s", index, term, ckptExt)
}

func parseCheckpointName(name string) (index, term uint64, ok bool) {
	base, found := strings.CutSuffix(name, ckptExt)
	if !found || len(base) != 31 || base[20] != '-' {
		return 0, 0, false
	}
	i, err1 := strconv.ParseUint(base[:20], 10, 64)
	t, err2 := strconv.ParseUint(base[21:], 10, 64)
	return i, t, err1 == nil && err2 == nil
}

// encodeCheckpoint is the content of a checkpoint file: index, term, ConfState, data.
func encodeCheckpoint(snap *pb.Snapshot) []byte {
	md := snap.GetMetadata()
	cs, err := proto.Marshal(pb.EnsureConfState(md.GetConfState()))
	if err != nil {
		panic("raftstore: marshal ConfState: " + err.Error())
	}
	b := make([]byte, 0, len(ckptMagic)+8+8+4+len(cs)+8+len(snap.GetData())+4)
	b = append(b, ckptMagic...)
	b = binary.BigEndian.AppendUint64(b, md.GetIndex())
	b = binary.BigEndian.AppendUint64(b, md.GetTerm())
	b = binary.BigEndian.AppendUint32(b, uint32(len(cs)))
	b = append(b, cs...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(snap.GetData())))
	b = append(b, snap.GetData()...)
	return appendCRC(b)
}

func decodeCheckpoint(b []byte) (*pb.Snapshot, error) {
	p, ok := checkCRC(b, ckptMagic)
	if !ok || len(p) < 8+8+4 {
		return nil, errDamaged
	}
	index, term := binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])
	n := uint64(binary.BigEndian.Uint32(p[16:]))
	p = p[20:]
	if n > uint64(len(p)) {
		return nil, errDamaged
	}
	cs := &pb.ConfState{}
	if err := proto.Unmarshal(p[:n], cs); err != nil {
		return nil, errDamaged
	}
	p = p[n:]
	if len(p) < 8 || binary.BigEndian.Uint64(p) != uint64(len(p)-8) || len(p)-8 > maxCheckpointBytes {
		return nil, errDamaged
	}
	data := append([]byte(nil), p[8:]...)
	if index == 0 {
		return nil, errDamaged // index 0 is "no snapshot" to raft
	}
	return &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: pb.EnsureConfState(cs)}}, nil
}

// checkpointFile is a checkpoint file's name parts.
type checkpointFile struct {
	name        string
	index, term uint64
}

// listCheckpoints returns the checkpoint files in dir, newest (highest index) first.
func listCheckpoints(dir string) ([]checkpointFile, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []checkpointFile
	for _, e := range es {
		if i, t, ok := parseCheckpointName(e.Name()); ok {
			out = append(out, checkpointFile{name: e.Name(), index: i, term: t})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].index > out[b].index })
	return out, nil
}

// readCheckpoint reads and checks one checkpoint file: its CRC, and that its content
// names the same snapshot as its file name.
func readCheckpoint(dir string, c checkpointFile) (*pb.Snapshot, error) {
	b, err := os.ReadFile(filepath.Join(dir, c.name))
	if err != nil {
		return nil, err
	}
	snap, err := decodeCheckpoint(b)
	if err != nil {
		return nil, err
	}
	if snap.GetMetadata().GetIndex() != c.index || snap.GetMetadata().GetTerm() != c.term {
		return nil, errDamaged
	}
	return snap, nil
}
