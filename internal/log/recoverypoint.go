package log

// Start-up without reading the log: recovery points and the clean-shutdown marker.
//
// Open must know, for every segment, its size, its next offset, its sparse indexes and its
// largest timestamp, and must cut off a torn tail. Reading every batch gives all of that,
// at the cost of reading the whole log. Two records let Open skip most of the reading.
//
// # Recovery point (recovery-point, <base>.activeindex, <base>.activetimeindex)
//
// A closed segment's index files are written only after its data is fsynced, so they are
// trusted (invariant 2). The active segment's indexes live in memory. Whenever the
// flusher has fsynced at least Options.recoveryPointBytes more of the active segment
// (and at Close), it appends the index entries of the fsynced prefix [0, D) to the
// segment's .activeindex and .activetimeindex files (the .index and .timeindex formats),
// then replaces recovery-point (temp file, rename) with: the segment's base, D, the next
// offset at D, the largest timestamp below D, the count and CRC-32C of the index entries
// covering [0, D), and the position and CRC of the batch that ends at D. After a crash Open
// takes [0, D) of the active segment from these files and scans only [D, end), as Kafka
// recovers only the segments after its recovery-point-offset-checkpoint; D is below
// whatever acks=all answered last only by the unsynced tail, which is exactly what may be
// torn.
//
// Only fsynced data is ever described: D is captured with the segment size that the same
// flush made durable. The files themselves are not fsynced. Instead Open uses a recovery
// point only when everything in it checks out: its own CRC, the CRCs of the index prefix,
// the batch header at the recorded position (magic, length ending exactly at D, CRC field,
// base and last offset), D within the file, and the named segment being the last one. A
// recovery point that did not reach the disk whole, or describes another incarnation of
// the segment, fails these checks and Open scans the whole segment, which is always
// correct. A recovery point is removed at Open when it was not used, so none survives that
// could describe a later segment with the same base.
//
// # Clean-shutdown marker (clean-shutdown)
//
// Kafka's .kafka_cleanshutdown, per log. Close writes it after everything is fsynced,
// every closed segment has its index files and the recovery point covers the whole active
// segment: temp file and rename, not fsynced (like the recovery point: a marker that did
// not reach the disk whole fails its CRC or its checks and Open recovers, which is always
// correct, and one that did describes data that was durable before it was written). It
// lists every segment with its size, next offset, largest timestamp and index entry
// counts. If Open finds it and the directory matches it exactly (the same segment files
// with the same sizes, index files of the recorded lengths with sane entries, a valid
// recovery point at the end of the active segment), Open reads no segment data at all:
// closed segments are not tail-checked either.
//
// The marker stays on disk while the log is unchanged after such an Open: Open writes
// nothing (it works on a full disk), a crash before any change finds the files still
// matching it, and Close of a log that was never changed writes nothing at all (most
// partitions of a large broker, at every shutdown). The first change (an append,
// DeleteRecords, retention, compaction) removes it first, durably (unmark: unlink and
// directory fsync), so no change ever happens while a marker is on disk, and a crash at
// any later point is recovered without it. A marker that does not match is removed,
// durably, before recovery changes any file.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/exactq/exactq/internal/batch"
	"golang.org/x/sys/unix"
)

const (
	recoveryPointName = "recovery-point"
	cleanShutdownName = "clean-shutdown"

	// defaultRecoveryPointBytes is how much of the active segment must become durable
	// between two recovery points: a crash re-reads at most this much (plus the unsynced
	// tail) per partition, and each recovery point costs a few small writes.
	defaultRecoveryPointBytes = 4 << 20

	rpMagic     = "EQRP0001"
	markerMagic = "EQCS0001"
	rpSize      = len(rpMagic) + 7*8 + 5*4 + 4
	markerEntry = 5*8 + 2*4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func activeIndexPath(dir string, base int64) string { return segmentName(dir, base, ".activeindex") }
func activeTimeIndexPath(dir string, base int64) string {
	return segmentName(dir, base, ".activetimeindex")
}

// Recovery says how Open found the log.
type Recovery struct {
	// Clean: a clean-shutdown marker matched the files; no segment data was read.
	Clean bool
	// RecoveryPoint is the number of bytes of the active segment taken from its recovery
	// point without reading them.
	RecoveryPoint int64
	// ScannedBytes is how many bytes of segment data were read and checked batch by batch.
	ScannedBytes int64
	// Truncated: a torn or corrupt tail was cut off.
	Truncated bool
}

// Recovery reports how Open found the log.
func (l *Log) Recovery() Recovery { return l.recovery }

// rpState is what the recovery-point files on disk say of a segment (the active one).
type rpState struct {
	pos             int64 // D: bytes described (0: no recovery point for this segment)
	nIdx, nTime     int   // index entries in the .activeindex / .activetimeindex files
	crcIdx, crcTime uint32
}

// recoveryPoint is the content of the recovery-point file.
type recoveryPoint struct {
	base, pos, next int64 // the segment; D; the offset after the batch ending at D
	maxTs, maxTsOff int64 // largest batch max timestamp below D and its earliest batch
	rollTs          int64 // the segment's segment.ms reference
	lastPos         int64 // position of the batch ending at D
	lastCRC         uint32
	nIdx, nTime     uint32 // index entries covering [0, D)
	crcIdx, crcTime uint32 // CRC-32C of their encoding
}

func (rp recoveryPoint) encode() []byte {
	b := make([]byte, 0, rpSize)
	b = append(b, rpMagic...)
	for _, v := range []int64{rp.base, rp.pos, rp.next, rp.maxTs, rp.maxTsOff, rp.rollTs, rp.lastPos} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	for _, v := range []uint32{rp.lastCRC, rp.nIdx, rp.nTime, rp.crcIdx, rp.crcTime} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeRecoveryPoint(b []byte) (recoveryPoint, bool) {
	var rp recoveryPoint
	if len(b) != rpSize || string(b[:len(rpMagic)]) != rpMagic ||
		crc32.Checksum(b[:rpSize-4], castagnoli) != binary.BigEndian.Uint32(b[rpSize-4:]) {
		return rp, false
	}
	p := b[len(rpMagic):]
	i64 := func() int64 { v := int64(binary.BigEndian.Uint64(p)); p = p[8:]; return v }
	u32 := func() uint32 { v := binary.BigEndian.Uint32(p); p = p[4:]; return v }
	rp.base, rp.pos, rp.next, rp.maxTs, rp.maxTsOff, rp.rollTs, rp.lastPos = i64(), i64(), i64(), i64(), i64(), i64(), i64()
	rp.lastCRC, rp.nIdx, rp.nTime, rp.crcIdx, rp.crcTime = u32(), u32(), u32(), u32(), u32()
	return rp, true
}

// readRecoveryPoint returns the log's recovery point; ok is false if there is none or it is
// damaged (either way: scan).
func readRecoveryPoint(dir string) (rp recoveryPoint, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, recoveryPointName))
	if err != nil {
		return rp, false
	}
	return decodeRecoveryPoint(b)
}

// activeState is a consistent view of the active segment, taken under Log.mu: the data up to
// size, the indexes describing it and what a recovery point records besides.
type activeState struct {
	s                                   *segment
	size, next, maxTs, maxTsOff, rollTs int64
	lastPos                             int64
	lastCRC                             uint32
	index                               []indexEntry // entries are never changed once appended
	tindex                              []timeEntry
}

// view returns the segment's state for a recovery point. Log.mu held.
func (s *segment) view() activeState {
	return activeState{s: s, size: s.size, next: s.next, maxTs: s.maxTs, maxTsOff: s.maxTsOff, rollTs: s.rollTs,
		lastPos: s.lastPos, lastCRC: s.lastCRC, index: s.index[:len(s.index):len(s.index)], tindex: s.tindex[:len(s.tindex):len(s.tindex)]}
}

// writeRecoveryPoint records a as the recovery point: the index entries not yet in the
// .activeindex files are appended, then the recovery-point file is replaced. The caller
// holds syncMu and has fsynced [0, a.size). Nothing is fsynced here (see the file comment).
// On error the segment's rpState is reset, so the next attempt rewrites the files from the
// start; whatever is on disk meanwhile fails Open's checks or is still true.
func writeRecoveryPoint(dir string, a activeState) (err error) {
	s := a.s
	st := s.rp
	if a.size == st.pos {
		return nil
	}
	defer func() {
		if err != nil {
			s.rp = rpState{}
		}
	}()
	if st.nIdx > len(a.index) || st.nTime > len(a.tindex) || a.size < st.pos {
		return fmt.Errorf("log: segment %d: recovery point state ahead of the segment", s.base)
	}
	ib := make([]byte, 0, (len(a.index)-st.nIdx)*indexEntrySize)
	for _, e := range a.index[st.nIdx:] {
		ib = binary.BigEndian.AppendUint32(ib, e.rel)
		ib = binary.BigEndian.AppendUint32(ib, e.pos)
	}
	tb := make([]byte, 0, (len(a.tindex)-st.nTime)*timeEntrySize)
	for _, e := range a.tindex[st.nTime:] {
		tb = binary.BigEndian.AppendUint64(tb, uint64(e.ts))
		tb = binary.BigEndian.AppendUint32(tb, e.rel)
	}
	fresh := st.nIdx == 0 && st.nTime == 0 // start the files over: they may hold anything
	if err := writeAtPath(activeIndexPath(dir, s.base), ib, int64(st.nIdx)*indexEntrySize, fresh); err != nil {
		return err
	}
	if err := writeAtPath(activeTimeIndexPath(dir, s.base), tb, int64(st.nTime)*timeEntrySize, fresh); err != nil {
		return err
	}
	next := rpState{pos: a.size, nIdx: len(a.index), nTime: len(a.tindex),
		crcIdx: crc32.Update(st.crcIdx, castagnoli, ib), crcTime: crc32.Update(st.crcTime, castagnoli, tb)}
	rp := recoveryPoint{base: s.base, pos: a.size, next: a.next, maxTs: a.maxTs, maxTsOff: a.maxTsOff, rollTs: a.rollTs,
		lastPos: a.lastPos, lastCRC: a.lastCRC, nIdx: uint32(next.nIdx), nTime: uint32(next.nTime), crcIdx: next.crcIdx, crcTime: next.crcTime}
	if err := replaceFile(filepath.Join(dir, recoveryPointName), rp.encode(), false); err != nil {
		return err
	}
	s.rp = next
	return nil
}

// writeAtPath writes b at off in the file at path (created if missing; emptied first if
// fresh).
func writeAtPath(path string, b []byte, off int64, fresh bool) error {
	flag := os.O_WRONLY | os.O_CREATE
	if fresh {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if len(b) > 0 {
		_, err = f.WriteAt(b, off)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replaceFile writes data to path through path.tmp and a rename, fsyncing the data first if
// sync. The caller fsyncs the directory if the rename must be durable.
func replaceFile(path string, data []byte, sync bool) error {
	if sync {
		return writeFileAtomic(path, data)
	}
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, data, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// loadRecoveryPoint takes the segment's state up to rp.pos from the recovery point and its
// .activeindex files if every check passes (see the file comment); it reports false, with
// the segment untouched, otherwise. fileSize is the segment file's size.
func (s *segment) loadRecoveryPoint(f *os.File, dir string, rp recoveryPoint, fileSize int64) (bool, error) {
	if rp.base != s.base || rp.pos <= 0 || rp.pos > fileSize || fileSize > maxSegmentBytes ||
		rp.next <= s.base || rp.next-s.base-1 > maxRel ||
		rp.lastPos < 0 || rp.lastPos+batch.HeaderSize > rp.pos ||
		rp.maxTs >= 0 && (rp.maxTsOff < s.base || rp.maxTsOff >= rp.next) {
		return false, nil
	}
	ib, ok := readPrefix(activeIndexPath(dir, s.base), int(rp.nIdx)*indexEntrySize)
	if !ok || crc32.Checksum(ib, castagnoli) != rp.crcIdx {
		return false, nil
	}
	tb, ok := readPrefix(activeTimeIndexPath(dir, s.base), int(rp.nTime)*timeEntrySize)
	if !ok || crc32.Checksum(tb, castagnoli) != rp.crcTime {
		return false, nil
	}
	index, tindex, ok := parseIndexes(ib, tb, rp.pos)
	if !ok {
		return false, nil
	}
	if n := len(index); n > 0 && (int64(index[n-1].pos) > rp.lastPos || s.base+int64(index[n-1].rel) >= rp.next) {
		return false, nil
	}
	if n := len(tindex); n > 0 && (tindex[n-1].ts > rp.maxTs || s.base+int64(tindex[n-1].rel) >= rp.next) {
		return false, nil
	}
	// The batch ending at D is the one the recovery point recorded.
	var h [hdrPrefix]byte
	if _, err := f.ReadAt(h[:], rp.lastPos); err != nil {
		return false, err
	}
	if batchSize(h[:]) != rp.pos-rp.lastPos || h[hdrMagic] != 2 || batchCRC(h[:]) != rp.lastCRC ||
		batch.BaseOffset(h[:]) < s.base || lastOffset(h[:])+1 != rp.next {
		return false, nil
	}
	s.index, s.tindex = index, tindex
	s.size, s.next = rp.pos, rp.next
	s.maxTs, s.maxTsOff = rp.maxTs, rp.maxTsOff
	s.rollTs = rp.rollTs
	s.lastPos, s.lastCRC = rp.lastPos, rp.lastCRC
	s.sinceIndex = rp.pos
	if n := len(index); n > 0 {
		s.sinceIndex = rp.pos - int64(index[n-1].pos)
	}
	s.rp = rpState{pos: rp.pos, nIdx: len(index), nTime: len(tindex), crcIdx: rp.crcIdx, crcTime: rp.crcTime}
	return true, nil
}

// maxRel is the largest offset distance from a segment's base (the indexes store uint32).
const maxRel = 1<<31 - 1

// readPrefix returns the first n bytes of the file at path; a missing file counts as empty.
func readPrefix(path string, n int) ([]byte, bool) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, n == 0
	}
	if err != nil || len(b) < n {
		return nil, false
	}
	return b[:n], true
}

// trimActiveIndexes cuts the active segment's .activeindex files to what its recovery
// point covers (entries past it may be left by a flush whose recovery point never made it
// to the file), or removes them when it has none.
func trimActiveIndexes(dir string, s *segment) error {
	if s.rp.pos == 0 {
		return removeActiveIndexes(dir, s.base)
	}
	for _, t := range []struct {
		path string
		size int64
	}{{activeIndexPath(dir, s.base), int64(s.rp.nIdx) * indexEntrySize}, {activeTimeIndexPath(dir, s.base), int64(s.rp.nTime) * timeEntrySize}} {
		if fi, err := os.Stat(t.path); err == nil && fi.Size() == t.size {
			continue // as it should be: no write (a clean Open writes nothing)
		}
		if err := os.Truncate(t.path, t.size); err != nil && !(errors.Is(err, os.ErrNotExist) && t.size == 0) {
			return err
		}
	}
	return nil
}

func removeActiveIndexes(dir string, base int64) error {
	for _, p := range []string{activeIndexPath(dir, base), activeTimeIndexPath(dir, base)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// markerSeg is one segment as the clean-shutdown marker records it.
type markerSeg struct {
	base, size, next, maxTs, maxTsOff int64
	nIdx, nTime                       uint32 // entries in its index files (.activeindex for the last)
}

func encodeMarker(segs []markerSeg) []byte {
	b := make([]byte, 0, len(markerMagic)+4+len(segs)*markerEntry+4)
	b = append(b, markerMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(segs)))
	for _, m := range segs {
		for _, v := range []int64{m.base, m.size, m.next, m.maxTs, m.maxTsOff} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
		b = binary.BigEndian.AppendUint32(b, m.nIdx)
		b = binary.BigEndian.AppendUint32(b, m.nTime)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeMarker(b []byte) ([]markerSeg, bool) {
	h := len(markerMagic) + 4
	if len(b) < h+4 || string(b[:len(markerMagic)]) != markerMagic ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, false
	}
	n := int(binary.BigEndian.Uint32(b[len(markerMagic):]))
	if n < 1 || len(b) != h+n*markerEntry+4 {
		return nil, false
	}
	segs := make([]markerSeg, n)
	p := b[h:]
	for i := range segs {
		i64 := func() int64 { v := int64(binary.BigEndian.Uint64(p)); p = p[8:]; return v }
		m := &segs[i]
		m.base, m.size, m.next, m.maxTs, m.maxTsOff = i64(), i64(), i64(), i64(), i64()
		m.nIdx, m.nTime = binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		p = p[8:]
	}
	return segs, true
}

// readMarker returns the clean-shutdown marker's segments; present says whether a marker
// file exists at all, ok whether it is well-formed.
func readMarker(dir string) (segs []markerSeg, present, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, cleanShutdownName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, false
	}
	if err != nil {
		return nil, true, false
	}
	segs, ok = decodeMarker(b)
	return segs, true, ok
}

// writeCleanShutdown records that the log is closed with everything durable: the recovery
// point is moved to the end of the active segment, then the marker is written (neither is
// fsynced: see the file comment).
// Called by Close with maintMu and appendMu held (nothing changes any more) after a
// successful syncAll.
func (l *Log) writeCleanShutdown() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.err(); err != nil {
		return err
	}
	l.mu.RLock()
	clean := l.dirSyncd == l.dirGen
	segs := make([]markerSeg, 0, len(l.segs))
	for _, s := range l.segs {
		if s.durable < s.size || s.needIndex {
			clean = false
		}
		segs = append(segs, markerSeg{base: s.base, size: s.size, next: s.next, maxTs: s.maxTs, maxTsOff: s.maxTsOff,
			nIdx: uint32(len(s.index)), nTime: uint32(len(s.tindex))})
	}
	a := l.segs[len(l.segs)-1].view()
	l.mu.RUnlock()
	if !clean {
		return errors.New("log: not everything is durable")
	}
	if a.size > 0 {
		if err := writeRecoveryPoint(l.dir, a); err != nil {
			return err
		}
	}
	return replaceFile(filepath.Join(l.dir, cleanShutdownName), encodeMarker(segs), false)
}

// openClean opens the segments listed by a clean-shutdown marker without reading their
// data. It reports false (and closes what it opened) unless the directory matches the
// marker exactly; see the file comment.
func (l *Log) openClean(bases []int64, marker []markerSeg, rp recoveryPoint, haveRP bool) (bool, error) {
	if len(bases) != len(marker) {
		return false, nil
	}
	var segs []*segment
	ok, err := func() (bool, error) {
		expect := int64(-1)
		for i, m := range marker {
			last := i == len(marker)-1
			if m.base != bases[i] || m.base < expect || m.next < m.base || m.size < 0 || m.size > maxSegmentBytes ||
				(m.size == 0) != (m.next == m.base) {
				return false, nil
			}
			expect = m.next
			// Closed segments are not opened at all (their descriptors open when a read
			// needs them); the active one is read below, and stays cached for appends.
			fi, err := os.Stat(logPath(l.dir, m.base))
			if err != nil {
				return false, err
			}
			s := newSegment(l.dir, m.base, l.files, fi.ModTime().UnixMilli())
			segs = append(segs, s)
			if fi.Size() != m.size {
				return false, nil
			}
			if last {
				if m.size == 0 {
					continue // empty: nothing to describe (and no recovery point needed)
				}
				if !haveRP || rp.pos != m.size || rp.next != m.next || rp.nIdx != m.nIdx || rp.nTime != m.nTime {
					return false, nil
				}
				h, err := s.file.acquire()
				if err != nil {
					return false, err
				}
				ok, err := s.loadRecoveryPoint(h.f, l.dir, rp, m.size)
				h.release()
				if !ok || err != nil {
					return false, err
				}
				continue
			}
			if ok, err := s.loadTrustedIndex(l.dir, m); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	}()
	if !ok || err != nil {
		for _, s := range segs {
			s.close()
		}
		return false, err
	}
	l.segs = segs
	return true, nil
}

// loadTrustedIndex loads a closed segment's index files for a clean start: their lengths
// must be the marker's and their entries sane; the segment's size, next offset and largest
// timestamp come from the marker. No data is read.
func (s *segment) loadTrustedIndex(dir string, m markerSeg) (bool, error) {
	ib, tb, ok, err := readIndexFiles(dir, s.base)
	if !ok || err != nil {
		return false, err
	}
	if len(ib) != int(m.nIdx)*indexEntrySize || len(tb) != int(m.nTime)*timeEntrySize {
		return false, nil
	}
	index, tindex, ok := parseIndexes(ib, tb, m.size)
	if !ok {
		return false, nil
	}
	if n := len(index); n > 0 && s.base+int64(index[n-1].rel) >= m.next {
		return false, nil
	}
	if n := len(tindex); n > 0 && (tindex[n-1].ts > m.maxTs || s.base+int64(tindex[n-1].rel) >= m.next) {
		return false, nil
	}
	s.index, s.tindex = index, tindex
	s.size, s.next = m.size, m.next
	s.maxTs, s.maxTsOff = m.maxTs, m.maxTsOff
	s.hasIndexFiles = true
	return true, nil
}

// fdatasync flushes the segment's data. fsync acts on the file, not the descriptor, so a
// descriptor opened after the writes flushes them too.
func (s *segment) fdatasync() error {
	h, err := s.file.acquire()
	if err != nil {
		return &retryableSyncError{fmt.Errorf("log: reopen segment %d for fsync: %w", s.base, err)}
	}
	defer h.release()
	return unix.Fdatasync(int(h.f.Fd()))
}
