package eos

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf8"
)

// Snapshot is the state a Checkpointer puts into a checkpoint (SnapshotState) and needs
// back after a crash (Recover): which transaction the checkpoint prepared. It holds no
// other state, so a process that has the bytes can settle the transaction alone.
type Snapshot struct {
	// TransactionalID is the Checkpointer's producer.
	TransactionalID string
	// Prepared is false for a checkpoint that had nothing to commit; ProducerID and
	// Epoch are then -1.
	Prepared bool
	// ProducerID and Epoch identify the prepared transaction (KIP-939's
	// PreparedTxnState): Recover commits the open transaction only if it is this one.
	ProducerID int64
	Epoch      int16
}

// Snapshot encoding, version 1. Integers are big-endian.
//
//	offset  size  field
//	0       4     magic "eqcp"
//	4       1     version (1)
//	5       1     flags: bit 0 set when a transaction was prepared; other bits 0
//	6       8     producer id (int64; -1 when not prepared)
//	14      2     producer epoch (int16; -1 when not prepared)
//	16      2     length n of the transactional id (1..maxTxnIDLen)
//	18      n     transactional id (UTF-8)
//	18+n    4     CRC-32C (Castagnoli) of bytes 0 to 18+n
//
// A reader refuses a version it does not know rather than guess.
const (
	snapshotMagic   = "eqcp"
	snapshotVersion = 1
	flagPrepared    = 1 << 0
	snapshotFixed   = 18 // bytes before the transactional id
	maxTxnIDLen     = 1 << 15
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarshalBinary encodes s (version 1). It fails for a snapshot DecodeSnapshot would refuse.
func (s Snapshot) MarshalBinary() ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, snapshotFixed+len(s.TransactionalID)+4)
	b = append(b, snapshotMagic...)
	flags := byte(0)
	if s.Prepared {
		flags |= flagPrepared
	}
	b = append(b, snapshotVersion, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(s.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(s.Epoch))
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.TransactionalID)))
	b = append(b, s.TransactionalID...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// DecodeSnapshot decodes bytes from SnapshotState. Anything else (truncated, extended,
// corrupted, another format or a later version) is refused with an error matching
// ErrSnapshot that says what is wrong.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	bad := func(format string, args ...any) (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("%w: %s", ErrSnapshot, fmt.Sprintf(format, args...))
	}
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return bad("not a checkpoint snapshot (no %q magic)", snapshotMagic)
	}
	if len(b) < snapshotFixed {
		return bad("%d bytes, shorter than the %d-byte header", len(b), snapshotFixed)
	}
	if v := b[4]; v != snapshotVersion {
		return bad("version %d, this reader knows version %d", v, snapshotVersion)
	}
	n := int(binary.BigEndian.Uint16(b[16:18]))
	if want := snapshotFixed + n + 4; len(b) != want {
		return bad("%d bytes, the header says %d", len(b), want)
	}
	body, sum := b[:snapshotFixed+n], binary.BigEndian.Uint32(b[snapshotFixed+n:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return bad("checksum %08x, computed %08x", sum, got)
	}
	flags := b[5]
	if flags&^flagPrepared != 0 {
		return bad("unknown flags %#x", flags)
	}
	s := Snapshot{
		TransactionalID: string(b[snapshotFixed : snapshotFixed+n]),
		Prepared:        flags&flagPrepared != 0,
		ProducerID:      int64(binary.BigEndian.Uint64(b[6:14])),
		Epoch:           int16(binary.BigEndian.Uint16(b[14:16])),
	}
	if err := s.validate(); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

func (s Snapshot) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrSnapshot, fmt.Sprintf(format, args...))
	}
	switch {
	case s.TransactionalID == "" || len(s.TransactionalID) >= maxTxnIDLen:
		return bad("transactional id of %d bytes (want 1 to %d)", len(s.TransactionalID), maxTxnIDLen-1)
	case !utf8.ValidString(s.TransactionalID):
		return bad("transactional id is not UTF-8")
	case s.Prepared && (s.ProducerID < 0 || s.Epoch < 0):
		return bad("prepared transaction with producer id %d epoch %d", s.ProducerID, s.Epoch)
	case !s.Prepared && (s.ProducerID != -1 || s.Epoch != -1):
		return bad("no prepared transaction but producer id %d epoch %d (want -1, -1)", s.ProducerID, s.Epoch)
	}
	return nil
}
