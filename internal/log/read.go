package log

import (
	"encoding/binary"
	"math"
	"os"
	"sort"

	"github.com/exactq/exactq/internal/batch"
)

// span is a byte range of whole batches in one segment, with a reference on the
// descriptor to read it through.
type span struct {
	s        *segment
	h        *fileRefs
	from, to int64
}

func releaseSpans(sp []span) {
	for _, r := range sp {
		r.h.release()
	}
}

// readCursor holds the descriptor of the segment a read is looking at, opening it when
// the read first needs its bytes.
type readCursor struct {
	s *segment
	h *fileRefs
}

func (c *readCursor) file(s *segment) (*os.File, error) {
	if c.s != s {
		c.done()
		h, err := s.file.acquire()
		if err != nil {
			return nil, err
		}
		c.s, c.h = s, h
	}
	return c.h.f, nil
}

// hold returns another reference on the current descriptor (for a span).
func (c *readCursor) hold() *fileRefs {
	c.h.acquire()
	return c.h
}

func (c *readCursor) done() {
	if c.h != nil {
		c.h.release()
	}
	c.s, c.h = nil, nil
}

// Read returns whole batches starting with the first batch whose last offset is >= offset
// (the batch containing offset, or the next one after a compaction gap), up to maxBytes in
// total, except that the first batch is returned whole even if larger (KIP-74: a consumer
// never gets stuck). It never includes a batch whose base offset is >= maxOffset (the high
// watermark or the last stable offset). It may span segments.
//
// offset < StartOffset() or > EndOffset(): ErrOffsetOutOfRange. offset == EndOffset(), or
// no batch below maxOffset: nil, nil. The returned batches may begin below offset (and
// below the start offset), exactly as Kafka's fetch; clients skip those records.
//
// Read finds the position with the sparse index and reads with pread; it allocates only
// the returned bytes. ReadChunks returns the same bytes without copying them.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var spans [4]span
	sp, total, err := l.spans(offset, maxBytes, maxOffset, spans[:0])
	if err != nil || total == 0 {
		return nil, err
	}
	defer releaseSpans(sp)
	buf := make([]byte, total)
	at := 0
	for _, r := range sp {
		n := int(r.to - r.from)
		if _, err := r.h.f.ReadAt(buf[at:at+n], r.from); err != nil {
			return nil, err
		}
		at += n
	}
	return buf, nil
}

// A Chunk is a byte range of a segment file, returned by ReadChunks: whole batches, exactly
// the bytes Read would have copied. It holds the file open until Release, even when
// retention, compaction or Close remove the segment meanwhile, and the range's bytes do not
// change while it is held, so they can be sent long after the read (sendfile).
type Chunk struct {
	refs *fileRefs
	Off  int64 // position in the file
	Len  int64 // bytes, > 0
}

// File returns the segment file. Callers read it only at explicit positions (ReadAt,
// sendfile with an offset) and never close, write or seek it.
func (c Chunk) File() *os.File { return c.refs.f }

// Release gives the chunk's hold on its file back. Each chunk is released exactly once.
func (c Chunk) Release() { c.refs.release() }

// ReleaseChunks releases every chunk of cs.
func ReleaseChunks(cs []Chunk) {
	for _, c := range cs {
		c.Release()
	}
}

// ReadChunks is Read without the copy: it appends to dst the file ranges holding the
// batches Read would return (one per segment spanned, usually one) and returns dst and
// their total length. Errors are Read's; on error nothing is appended. Every appended
// chunk must be released.
func (l *Log) ReadChunks(dst []Chunk, offset int64, maxBytes int32, maxOffset int64) ([]Chunk, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var spans [4]span
	sp, total, err := l.spans(offset, maxBytes, maxOffset, spans[:0])
	if err != nil || total == 0 {
		return dst, 0, err
	}
	for _, r := range sp {
		dst = append(dst, Chunk{refs: r.h, Off: r.from, Len: r.to - r.from}) // the span's reference goes to the chunk
	}
	return dst, total, nil
}

// spans checks a read's offsets and locates its byte spans (see Read). Called with mu held
// (shared).
func (l *Log) spans(offset int64, maxBytes int32, maxOffset int64, out []span) ([]span, int64, error) {
	if l.closed {
		return nil, 0, ErrClosed
	}
	if offset < l.start || offset > l.end {
		return nil, 0, ErrOffsetOutOfRange
	}
	if offset == l.end || offset >= maxOffset {
		return nil, 0, nil
	}
	return l.locate(offset, int64(max(maxBytes, 0)), maxOffset, out)
}

// locate computes the byte spans Read returns, each holding a reference on its segment's
// descriptor (none on error). Called with mu held (shared); out is empty.
func (l *Log) locate(offset, maxBytes, maxOffset int64, out []span) (_ []span, _ int64, err error) {
	var cur readCursor
	defer cur.done()
	defer func() {
		if err != nil {
			releaseSpans(out)
		}
	}()
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	var h [hdrPrefix]byte
	// Find the first batch with last offset >= offset.
	s := l.segs[i]
	pos := s.floor(offset)
	var f *os.File
	for {
		if pos >= s.size {
			if i++; i == len(l.segs) {
				return out, 0, nil
			}
			s, pos = l.segs[i], 0
			continue
		}
		if f, err = cur.file(s); err != nil {
			return nil, 0, err
		}
		if err := s.readHeader(f, pos, &h); err != nil {
			return nil, 0, err
		}
		if batch.BaseOffset(h[:])+lastOffsetDelta(h[:]) >= offset {
			break
		}
		pos += batchSize(h[:])
	}
	var total int64
	for {
		to := pos
		if pos < s.size { // an empty active segment needs no descriptor
			if f, err = cur.file(s); err != nil {
				return nil, 0, err
			}
			if to, err = s.extent(f, pos, maxBytes-total, maxOffset, total == 0, &h); err != nil {
				return nil, 0, err
			}
		}
		if to > pos {
			out = append(out, span{s: s, h: cur.hold(), from: pos, to: to})
			total += to - pos
		}
		if to < s.size || i+1 == len(l.segs) {
			return out, total, nil
		}
		i++
		s, pos = l.segs[i], 0
	}
}

// extent returns the end of the longest run of whole batches from pos (a batch boundary)
// that fits in limit bytes (the first batch always fits if first), all with base offsets
// below maxOffset. It jumps ahead with the sparse index and reads at most an index
// interval's worth of batch headers.
func (s *segment) extent(f *os.File, pos, limit, maxOffset int64, first bool, h *[hdrPrefix]byte) (int64, error) {
	cur := pos
	if first && cur < s.size {
		if err := s.readHeader(f, cur, h); err != nil {
			return 0, err
		}
		if batch.BaseOffset(h[:]) >= maxOffset {
			return cur, nil
		}
		cur += batchSize(h[:])
	}
	// Every batch before an index entry that is within the limits qualifies.
	byPos := sort.Search(len(s.index), func(j int) bool { return int64(s.index[j].pos) > pos+limit })
	byOff := sort.Search(len(s.index), func(j int) bool { return s.base+int64(s.index[j].rel) >= maxOffset })
	if m := min(byPos, byOff); m > 0 && int64(s.index[m-1].pos) > cur {
		cur = int64(s.index[m-1].pos)
	}
	for cur < s.size {
		if err := s.readHeader(f, cur, h); err != nil {
			return 0, err
		}
		n := batchSize(h[:])
		if cur+n > pos+limit || batch.BaseOffset(h[:]) >= maxOffset {
			break
		}
		cur += n
	}
	return cur, nil
}

// batchSize reads the size of a stored batch from its header (validated at append or
// recovery, so no error).
func batchSize(h []byte) int64 {
	return batch.LengthPrefix + int64(int32(binary.BigEndian.Uint32(h[8:])))
}

// Scan calls fn for every batch from the one containing from (clamped to the start
// offset) to the end offset at the time of the calls, in order. The slice passed to fn is
// valid only during the call. Used to rebuild producer and coordinator state at start-up.
func (l *Log) Scan(from int64, fn func(batch []byte) error) error {
	if s := l.StartOffset(); from < s {
		from = s
	}
	for {
		if from >= l.EndOffset() {
			return nil
		}
		b, err := l.Read(from, 1<<20, math.MaxInt64)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return nil
		}
		for len(b) > 0 {
			n := int(batchSize(b))
			if err := fn(b[:n:n]); err != nil {
				return err
			}
			from = batch.BaseOffset(b) + lastOffsetDelta(b) + 1
			b = b[n:]
		}
	}
}
