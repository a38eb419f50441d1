package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// Fields of the v2 batch header that package batch has no accessor for (see batch.go for
// the layout; parseStored decodes them all, this is the allocation-free path for appends).
const (
	hdrMagic           = 16 // int8
	hdrAttributes      = 21 // int16
	hdrLastOffsetDelta = 23 // int32
	hdrMaxTimestamp    = 35 // int64
	hdrProducerID      = 43 // int64
	hdrNumRecords      = 57 // int32
	hdrCRC             = 17 // uint32
	hdrPrefix          = 27 // bytes needed to read base offset, length and last offset delta
)

func lastOffsetDelta(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[hdrLastOffsetDelta:])))
}
func lastOffset(b []byte) int64   { return batch.BaseOffset(b) + lastOffsetDelta(b) }
func maxTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[hdrMaxTimestamp:])) }
func attributes(b []byte) int16   { return int16(binary.BigEndian.Uint16(b[hdrAttributes:])) }
func producerID(b []byte) int64   { return int64(binary.BigEndian.Uint64(b[hdrProducerID:])) }
func batchCRC(b []byte) uint32    { return binary.BigEndian.Uint32(b[hdrCRC:]) }

// indexEntry is one sparse offset-index entry: the batch starting at file position pos has
// base offset segment.base+rel.
type indexEntry struct{ rel, pos uint32 }

// timeEntry is one time-index entry: ts is the largest batch max timestamp of the segment up
// to some point, and segment.base+rel the base offset of the earliest batch that has it.
type timeEntry struct {
	ts  int64
	rel uint32
}

const (
	indexEntrySize = 8
	timeEntrySize  = 12
)

// segment is one .log file and its indexes.
type segment struct {
	base int64
	file segFile // the .log file, opened when used (files.go)

	// Guarded by Log.mu. The appender writes them (holding appendMu and mu) only for the
	// active segment; a closed segment's fields never change.
	size       int64 // bytes of whole batches visible to readers
	next       int64 // offset after the last batch; base when empty
	index      []indexEntry
	tindex     []timeEntry
	maxTs      int64 // largest batch max timestamp, -1 if none
	maxTsOff   int64 // base offset of the earliest batch with maxTs
	rollTs     int64 // segment.ms reference: when the first batch was appended (see track)
	sinceIndex int64 // bytes appended since the last index entry (active segment)
	lastPos    int64 // file position of the last batch, -1 if none (recovery point identity)
	lastCRC    uint32

	// Guarded by syncMu for writing, by mu or syncMu for reading.
	durable       int64  // bytes known fsynced
	needIndex     bool   // closed, index files not written yet
	hasIndexFiles bool   // set at Open when valid index files were loaded
	deleted       bool   // removed from the log; the file is closed
	createdGen    uint64 // Log.dirGen that created the file (0: there at Open); the file
	//                      survives a crash once Log.dirSyncd >= createdGen

	// rp is what the recovery-point files say of this (active) segment. Guarded by syncMu.
	rp rpState
}

func segmentName(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}
func logPath(dir string, base int64) string       { return segmentName(dir, base, ".log") }
func indexPath(dir string, base int64) string     { return segmentName(dir, base, ".index") }
func timeIndexPath(dir string, base int64) string { return segmentName(dir, base, ".timeindex") }

// newSegment returns the in-memory state of an empty segment whose file is opened through
// the cache c when first used.
func newSegment(dir string, base int64, c *FileCache, nowMs int64) *segment {
	s := &segment{base: base, next: base, maxTs: -1, maxTsOff: -1, rollTs: nowMs, lastPos: -1}
	s.file.init(logPath(dir, base), c)
	return s
}

// createSegment creates an empty segment file. The caller makes the directory entry durable.
func createSegment(dir string, base int64, c *FileCache, nowMs int64) (*segment, error) {
	f, err := os.OpenFile(logPath(dir, base), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	s := newSegment(dir, base, c, nowMs)
	h, err := s.file.attach(f)
	if err != nil {
		return nil, err
	}
	h.release() // cached: the first append uses it
	return s, nil
}

// close is called when the segment leaves the log: its file is closed now, or when the
// last Chunk or reader holding it lets go.
func (s *segment) close() { s.file.drop() }

// readAt reads len(b) bytes at pos, which must lie within the segment's published size.
func (s *segment) readAt(pos int64, b []byte) error {
	if pos+int64(len(b)) > s.size {
		return fmt.Errorf("log: segment %d: read [%d,%d) beyond size %d", s.base, pos, pos+int64(len(b)), s.size)
	}
	h, err := s.file.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	_, err = h.f.ReadAt(b, pos)
	return err
}

func removeSegmentFiles(dir string, base int64) error {
	for _, p := range []string{logPath(dir, base), indexPath(dir, base), timeIndexPath(dir, base), activeIndexPath(dir, base), activeTimeIndexPath(dir, base)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// track records a batch appended at pos (offsets base.., max timestamp ts, CRC crc) in the
// segment's in-memory state. Index entries are sparse: one per interval bytes, as in Kafka.
//
// segment.ms counts from when the first batch was appended (nowMs), not from its producer
// timestamp as Kafka does: one producer with a clock far in the past would otherwise make
// every append roll. At Open, rebuild passes the first batch's timestamp when it is
// plausible (not in the future), which is the best record of its append time left.
func (s *segment) track(pos, base, next, size, ts int64, crc uint32, interval, nowMs int64) {
	if s.size == 0 && pos == 0 {
		s.rollTs = nowMs
	}
	if ts > s.maxTs {
		s.maxTs, s.maxTsOff = ts, base
	}
	if s.sinceIndex > interval {
		s.index = append(s.index, indexEntry{rel: uint32(base - s.base), pos: uint32(pos)})
		s.addTimeEntry()
		s.sinceIndex = 0
	}
	s.sinceIndex += size
	s.size = pos + size
	s.next = next
	s.lastPos, s.lastCRC = pos, crc
}

// addTimeEntry appends the running max timestamp if it grew since the last entry.
func (s *segment) addTimeEntry() {
	if s.maxTs < 0 {
		return
	}
	if n := len(s.tindex); n > 0 && s.tindex[n-1].ts >= s.maxTs {
		return
	}
	s.tindex = append(s.tindex, timeEntry{ts: s.maxTs, rel: uint32(s.maxTsOff - s.base)})
}

// floor returns the file position of the last indexed batch whose base offset is <= off
// (0 if none): a batch boundary at or before the batch holding off.
func (s *segment) floor(off int64) int64 {
	rel := off - s.base
	lo, hi := 0, len(s.index) // first entry with rel > off
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(s.index[m].rel) <= rel {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return int64(s.index[lo-1].pos)
}

// readHeader reads the first hdrPrefix bytes of the batch at pos of the segment's file f
// into h.
func (s *segment) readHeader(f *os.File, pos int64, h *[hdrPrefix]byte) error {
	if pos+hdrPrefix > s.size {
		return fmt.Errorf("log: segment %d: batch header at %d beyond size %d", s.base, pos, s.size)
	}
	_, err := f.ReadAt(h[:], pos)
	return err
}

var errTorn = errors.New("log: torn batch")

// parseStored decodes and checks the header of a stored batch: exact size, magic 2, CRC,
// sane counts. It is batch.Parse without the dense-offsets rule: compaction removes
// records from uncompressed batches too, leaving gaps between offset deltas (as Kafka's
// cleaner does), and recovery must not take such a batch for damage.
func parseStored(b []byte) (kmsg.RecordBatch, error) {
	var h kmsg.RecordBatch
	n, err := batch.Size(b)
	if err != nil {
		return h, err
	}
	if n != len(b) || n < batch.HeaderSize {
		return h, batch.ErrTruncated
	}
	if b[hdrMagic] != 2 {
		return h, batch.ErrMagic
	}
	if !batch.CRCValid(b) {
		return h, batch.ErrCRC
	}
	if err := h.ReadFrom(b); err != nil {
		return h, batch.ErrCorrupt
	}
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 || h.NumRecords-1 > h.LastOffsetDelta && h.Attributes&batch.AttrCompressionMask == batch.CodecNone {
		return h, batch.ErrInvalidBatch
	}
	return h, nil
}

// batchReader reads whole batches of a file sequentially through one reusable buffer.
type batchReader struct {
	f      *os.File
	end    int64 // file size
	pos    int64 // file position of the next batch
	buf    []byte
	bufPos int64 // file position of buf[0]
}

// next returns the next batch (aliasing the buffer until the next call), io.EOF at a clean
// end, errTorn if the bytes at pos are not a whole batch, or an I/O error.
func (r *batchReader) next() ([]byte, error) {
	if r.pos >= r.end {
		return nil, io.EOF
	}
	h, err := r.view(batch.LengthPrefix)
	if err != nil {
		return nil, err
	}
	n, err := batch.Size(h)
	if err != nil {
		return nil, errTorn
	}
	b, err := r.view(n)
	if err != nil {
		return nil, err
	}
	r.pos += int64(n)
	return b, nil
}

func (r *batchReader) view(n int) ([]byte, error) {
	if r.pos+int64(n) > r.end {
		return nil, errTorn
	}
	if off := r.pos - r.bufPos; off >= 0 && off+int64(n) <= int64(len(r.buf)) {
		return r.buf[off : off+int64(n)], nil
	}
	want := min(max(int64(n), 1<<20), r.end-r.pos)
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	if _, err := r.f.ReadAt(r.buf, r.pos); err != nil {
		return nil, err
	}
	r.bufPos = r.pos
	return r.buf[:n], nil
}

// openSegment opens an existing segment. A closed segment (last=false) with valid index
// files is trusted after checking the batches behind its last index entry. The last
// segment is trusted up to its recovery point when rp names it and checks out, and scanned
// from there. Any other segment is scanned from the start. A scan truncates the file at
// the first invalid batch (truncated reports that) and fsyncs what it read, so that the
// whole segment is durable when Open returns. In the last segment offsets must be
// consecutive from the file's base (it was appended to, never compacted); in a closed one
// they must only increase (compaction leaves gaps). st accumulates what was read.
func openSegment(dir string, base int64, c *FileCache, last bool, rp *recoveryPoint, interval int32, nowMs int64, st *Recovery) (s *segment, truncated bool, err error) {
	f, err := os.OpenFile(logPath(dir, base), os.O_RDWR, 0)
	if err != nil {
		return nil, false, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, false, err
	}
	s = newSegment(dir, base, c, fi.ModTime().UnixMilli())
	h, err := s.file.attach(f)
	if err != nil {
		return nil, false, err
	}
	defer h.release()
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	from, expect := int64(0), base
	switch {
	case !last:
		ok, err := s.loadIndex(h.f, dir, fi.Size(), st)
		if err != nil {
			return nil, false, err
		}
		if ok {
			s.hasIndexFiles = true
			return s, false, nil
		}
		s.reset(fi.ModTime().UnixMilli())
	case rp != nil:
		ok, err := s.loadRecoveryPoint(h.f, dir, *rp, fi.Size())
		if err != nil {
			return nil, false, err
		}
		if ok {
			from, expect = rp.pos, rp.next
			st.RecoveryPoint = rp.pos
		}
	}
	truncated, err = s.rebuild(h.f, from, expect, fi.Size(), last, int64(interval), nowMs, st)
	return s, truncated, err
}

// reset forgets what loading the segment found, keeping its file.
func (s *segment) reset(nowMs int64) {
	s.size, s.next, s.index, s.tindex = 0, s.base, nil, nil
	s.maxTs, s.maxTsOff, s.rollTs, s.sinceIndex, s.lastPos, s.lastCRC = -1, -1, nowMs, 0, -1, 0
}

// rebuild scans the file from position from (a batch boundary where offset expect is due),
// rebuilding the in-memory indexes, and truncates the file at the first batch that is
// torn, corrupt or out of order. What it scanned is fsynced: a crash may have left it in
// the page cache only, and Open declares the whole log durable.
func (s *segment) rebuild(f *os.File, from, expect, fileSize int64, strict bool, interval, nowMs int64, st *Recovery) (truncated bool, err error) {
	r := batchReader{f: f, end: fileSize, pos: from}
	for {
		pos := r.pos
		b, err := r.next()
		if err == io.EOF {
			st.ScannedBytes += fileSize - from
			if fileSize > from {
				return false, unix.Fdatasync(int(f.Fd()))
			}
			return false, nil
		}
		ok := err == nil
		if err != nil && err != errTorn {
			return false, err
		}
		var h = struct{ base, delta int64 }{}
		if ok {
			p, perr := parseStored(b)
			h.base, h.delta = p.FirstOffset, int64(p.LastOffsetDelta)
			ok = perr == nil && (h.base == expect || !strict && h.base > expect)
		}
		if !ok {
			st.ScannedBytes += fileSize - from
			st.Truncated = true
			if err := f.Truncate(pos); err != nil {
				return false, err
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				return false, err
			}
			return true, nil
		}
		expect = h.base + h.delta + 1
		at := nowMs
		if ts := maxTimestamp(b); pos == 0 && ts >= 0 && ts <= nowMs {
			at = ts
		}
		s.track(pos, h.base, expect, int64(len(b)), maxTimestamp(b), batchCRC(b), interval, at)
	}
}

// loadIndex loads the segment's index files and checks them against the data: shapes,
// monotonic entries inside the file, and valid batches from the last indexed one to the end
// of the file. It reports false (and no error) if the files are missing or inconsistent.
func (s *segment) loadIndex(f *os.File, dir string, fileSize int64, st *Recovery) (bool, error) {
	ib, tb, ok, err := readIndexFiles(dir, s.base)
	if !ok || err != nil {
		return false, err
	}
	index, tindex, ok := parseIndexes(ib, tb, fileSize)
	if !ok {
		return false, nil
	}
	// Validate the tail behind the last index entry; it also gives next and the max timestamp.
	pos, expect := int64(0), s.base
	if n := len(index); n > 0 {
		pos, expect = int64(index[n-1].pos), s.base+int64(index[n-1].rel)
	}
	st.ScannedBytes += fileSize - pos
	r := batchReader{f: f, end: fileSize, pos: pos}
	maxTs, maxTsOff := int64(-1), int64(-1)
	if n := len(tindex); n > 0 {
		maxTs, maxTsOff = tindex[n-1].ts, s.base+int64(tindex[n-1].rel)
	}
	first := true
	for {
		b, err := r.next()
		if err == io.EOF {
			break
		}
		if err == errTorn {
			return false, nil
		} else if err != nil {
			return false, err
		}
		p, perr := parseStored(b)
		if perr != nil || p.FirstOffset < expect || first && len(index) > 0 && p.FirstOffset != expect {
			return false, nil
		}
		first = false
		expect = p.FirstOffset + int64(p.LastOffsetDelta) + 1
		if p.MaxTimestamp > maxTs {
			maxTs, maxTsOff = p.MaxTimestamp, p.FirstOffset
		}
	}
	s.index, s.tindex = index, tindex
	s.size, s.next = fileSize, expect
	s.maxTs, s.maxTsOff = maxTs, maxTsOff
	return true, nil
}

// readIndexFiles reads a closed segment's .index and .timeindex files; ok is false if
// either is missing.
func readIndexFiles(dir string, base int64) (ib, tb []byte, ok bool, err error) {
	ib, err = os.ReadFile(indexPath(dir, base))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, false, nil
	} else if err != nil {
		return nil, nil, false, err
	}
	tb, err = os.ReadFile(timeIndexPath(dir, base))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, false, nil
	} else if err != nil {
		return nil, nil, false, err
	}
	return ib, tb, true, nil
}

// parseIndexes decodes index and time index files and checks their shape against a
// segment of fileSize bytes: whole entries, index entries strictly increasing inside the
// file (never at position 0: an entry follows at least one batch), time entries strictly
// increasing and not negative.
func parseIndexes(ib, tb []byte, fileSize int64) ([]indexEntry, []timeEntry, bool) {
	if len(ib)%indexEntrySize != 0 || len(tb)%timeEntrySize != 0 || fileSize > maxSegmentBytes {
		return nil, nil, false
	}
	index := make([]indexEntry, len(ib)/indexEntrySize)
	for i := range index {
		e := indexEntry{rel: binary.BigEndian.Uint32(ib[i*8:]), pos: binary.BigEndian.Uint32(ib[i*8+4:])}
		if int64(e.pos) >= fileSize || e.pos == 0 || i > 0 && (e.rel <= index[i-1].rel || e.pos <= index[i-1].pos) {
			return nil, nil, false
		}
		index[i] = e
	}
	tindex := make([]timeEntry, len(tb)/timeEntrySize)
	for i := range tindex {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(tb[i*12:])), rel: binary.BigEndian.Uint32(tb[i*12+8:])}
		if e.ts < 0 || i > 0 && e.ts <= tindex[i-1].ts {
			return nil, nil, false
		}
		tindex[i] = e
	}
	return index, tindex, true
}

// writeIndexFiles writes a closed segment's index files, each atomically. The caller has
// fsynced the segment's data and fsyncs the directory afterwards.
func writeIndexFiles(dir string, s *segment) error {
	ib, tb := encodeIndexes(s)
	if err := writeFileAtomic(indexPath(dir, s.base), ib); err != nil {
		return err
	}
	return writeFileAtomic(timeIndexPath(dir, s.base), tb)
}

// encodeIndexes returns the contents of a segment's .index and .timeindex files.
func encodeIndexes(s *segment) (ib, tb []byte) {
	ib = make([]byte, 0, len(s.index)*indexEntrySize)
	for _, e := range s.index {
		ib = binary.BigEndian.AppendUint32(ib, e.rel)
		ib = binary.BigEndian.AppendUint32(ib, e.pos)
	}
	tb = make([]byte, 0, len(s.tindex)*timeEntrySize)
	for _, e := range s.tindex {
		tb = binary.BigEndian.AppendUint64(tb, uint64(e.ts))
		tb = binary.BigEndian.AppendUint32(tb, e.rel)
	}
	return ib, tb
}

// writeFileAtomic writes data to path through path.tmp, fsync and rename. The caller
// fsyncs the directory.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
