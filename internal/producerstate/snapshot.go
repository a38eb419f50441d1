package producerstate

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// Snapshot format, version 1, all integers big endian:
//
//	magic "EQPS" | version u16 | endOffset i64 | count u32 |
//	count x (producerID i64 | epoch i16 | coordinatorEpoch i32 | lastTimestampMs i64 |
//	         currentTxnFirstOffset i64 | numBatches u8 |
//	         numBatches x (firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64 |
//	                       timestampMs i64)) |
//	crc32c u32 of everything before it
//
// Producers are sorted by id, so equal states give equal bytes. Open transactions are not
// stored: they follow from currentTxnFirstOffset, as in Kafka's
// ProducerStateManager.loadProducerEntry.
const (
	snapshotMagic   = "EQPS"
	snapshotVersion = 1
	snapshotHeader  = 4 + 2 + 8 + 4
	entryFixedSize  = 8 + 2 + 4 + 8 + 8 + 1
	batchMetaSize   = 4 + 4 + 8 + 8 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot encodes the state. It is valid up to EndOffset(): after Restore, replay the
// log from there.
func (s *State) Snapshot() []byte {
	pids := make([]int64, 0, len(s.producers))
	for pid := range s.producers {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	b := make([]byte, 0, snapshotHeader+len(pids)*(entryFixedSize+NumBatchesToRetain*batchMetaSize)+4)
	b = append(b, snapshotMagic...)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(s.endOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := s.producers[pid]
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastTimestampMs))
		b = binary.BigEndian.AppendUint64(b, uint64(e.CurrentTxnFirstOffset))
		b = append(b, byte(len(e.Batches)))
		for _, m := range e.Batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.LastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.TimestampMs))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Restore decodes a snapshot into a new State with configuration cfg. Call Expire after
// it: Kafka drops producers that expired while the broker was down when it loads a
// snapshot.
func Restore(b []byte, cfg Config) (*State, error) {
	if len(b) < snapshotHeader+4 || string(b[:4]) != snapshotMagic {
		return nil, fmt.Errorf("%w: bad header", ErrCorruptSnapshot)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: CRC mismatch", ErrCorruptSnapshot)
	}
	if v := binary.BigEndian.Uint16(body[4:]); v != snapshotVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	// Decoded outside the budget, which takes the entries only once they all decoded.
	unbudgeted := cfg
	unbudgeted.Budget = nil
	s := NewWithConfig(unbudgeted)
	s.endOffset = int64(binary.BigEndian.Uint64(body[6:]))
	count := binary.BigEndian.Uint32(body[14:])
	p := body[snapshotHeader:]
	if uint64(count) > uint64(len(p)/entryFixedSize) {
		return nil, fmt.Errorf("%w: %d producers cannot fit", ErrCorruptSnapshot, count)
	}
	prev := int64(-1)
	for i := uint32(0); i < count; i++ {
		if len(p) < entryFixedSize {
			return nil, fmt.Errorf("%w: truncated producer", ErrCorruptSnapshot)
		}
		pid := int64(binary.BigEndian.Uint64(p))
		if pid <= prev { // sorted and unique, as Snapshot writes them
			return nil, fmt.Errorf("%w: producer id %d after %d", ErrCorruptSnapshot, pid, prev)
		}
		prev = pid
		e := s.insert(pid)
		e.Epoch = int16(binary.BigEndian.Uint16(p[8:]))
		e.CoordinatorEpoch = int32(binary.BigEndian.Uint32(p[10:]))
		e.LastTimestampMs = int64(binary.BigEndian.Uint64(p[14:]))
		e.CurrentTxnFirstOffset = int64(binary.BigEndian.Uint64(p[22:]))
		nb := int(p[30])
		p = p[entryFixedSize:]
		if nb > NumBatchesToRetain || len(p) < nb*batchMetaSize || e.CurrentTxnFirstOffset < NoOffset {
			return nil, fmt.Errorf("%w: producer %d", ErrCorruptSnapshot, pid)
		}
		e.Batches = make([]BatchMeta, 0, max(nb, 1))
		for j := 0; j < nb; j++ {
			e.Batches = append(e.Batches, BatchMeta{
				FirstSeq:    int32(binary.BigEndian.Uint32(p)),
				LastSeq:     int32(binary.BigEndian.Uint32(p[4:])),
				FirstOffset: int64(binary.BigEndian.Uint64(p[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(p[16:])),
				TimestampMs: int64(binary.BigEndian.Uint64(p[24:])),
			})
			p = p[batchMetaSize:]
		}
		if e.CurrentTxnFirstOffset != NoOffset {
			s.addOngoing(OpenTxn{ProducerID: pid, FirstOffset: e.CurrentTxnFirstOffset})
		}
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorruptSnapshot, len(p))
	}
	s.orderByLastTimestamp()
	s.cfg.Budget = cfg.Budget
	s.cfg.Budget.add(int64(len(s.producers)))
	return s, nil
}
