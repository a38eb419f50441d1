package log

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ScanHeaders calls fn for every batch from the one containing from (clamped to the start
// offset; the next one after a compaction gap) to the end offset at the time of the call,
// in order, with the batch's header decoded: every field of kmsg.RecordBatch except
// Records, which is set only for control batches (transaction markers), read whole. It is
// Scan for callers that need the headers only, such as rebuilding producer state at
// start-up: it reads batch.HeaderSize bytes per data batch instead of the whole log. h and
// its Records are valid only during the call.
func (l *Log) ScanHeaders(from int64, fn func(h *kmsg.RecordBatch) error) error {
	type seg struct {
		base, size int64
		refs       *fileRefs
		pos        int64 // where to start: a batch boundary at or before the first wanted batch
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	from = max(from, l.start)
	i := max(sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > from })-1, 0)
	var segs []seg
	defer func() {
		for _, g := range segs {
			g.refs.release()
		}
	}()
	for j, s := range l.segs[i:] {
		g := seg{base: s.base, size: s.size}
		if j == 0 {
			g.pos = s.floor(from)
		}
		if g.pos >= g.size {
			continue
		}
		// Held: retention or Close may remove the segment meanwhile.
		h, err := s.file.acquire()
		if err != nil {
			l.mu.RUnlock()
			return err
		}
		g.refs = h
		segs = append(segs, g)
	}
	l.mu.RUnlock()

	r := headerReader{}
	var h kmsg.RecordBatch
	for _, g := range segs {
		r.reset(g.refs, g.size)
		for pos := g.pos; pos < g.size; {
			b, err := r.header(pos)
			if err != nil {
				return fmt.Errorf("log: segment %d: %w", g.base, err)
			}
			n := batchSize(b)
			if lastOffset(b) < from {
				pos += n
				continue
			}
			if attributes(b)&batch.AttrControl != 0 {
				whole, err := r.whole(pos, n)
				if err != nil {
					return fmt.Errorf("log: segment %d: %w", g.base, err)
				}
				// Decoded as Scan's callers decode it: what the log stores was checked when it
				// was appended or recovered.
				if err := h.ReadFrom(whole); err != nil {
					return fmt.Errorf("log: stored control batch at %d: %w", batch.BaseOffset(whole), err)
				}
			} else {
				decodeHeader(b, &h)
			}
			if err := fn(&h); err != nil {
				return err
			}
			pos += n
		}
	}
	return nil
}

// decodeHeader fills h from a stored batch's header (batch.HeaderSize bytes); Records is
// left nil.
func decodeHeader(b []byte, h *kmsg.RecordBatch) {
	be := binary.BigEndian
	*h = kmsg.RecordBatch{
		FirstOffset:          int64(be.Uint64(b[0:])),
		Length:               int32(be.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[12:])),
		Magic:                int8(b[hdrMagic]),
		CRC:                  int32(be.Uint32(b[hdrCRC:])),
		Attributes:           int16(be.Uint16(b[hdrAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[hdrLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[27:])),
		MaxTimestamp:         int64(be.Uint64(b[hdrMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[hdrProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[51:])),
		FirstSequence:        int32(be.Uint32(b[53:])),
		NumRecords:           int32(be.Uint32(b[57:])),
	}
}

// headerReader reads batch headers of one segment file. Small batches are read through a
// window (many headers per pread); after a large batch only the next header is read, so a
// log of large batches costs one small pread per batch, not a read of every byte.
type headerReader struct {
	refs    *fileRefs
	size    int64
	buf     []byte
	bufPos  int64
	lastLen int64 // size of the previous batch
}

const headerWindow = 64 << 10

func (r *headerReader) reset(refs *fileRefs, size int64) {
	r.refs, r.size, r.buf, r.bufPos, r.lastLen = refs, size, r.buf[:0], 0, 0
}

// header returns the batch.HeaderSize bytes at pos (a batch boundary inside the segment).
func (r *headerReader) header(pos int64) ([]byte, error) {
	if pos+batch.HeaderSize > r.size {
		return nil, fmt.Errorf("batch header at %d beyond size %d", pos, r.size)
	}
	if off := pos - r.bufPos; off < 0 || off+batch.HeaderSize > int64(len(r.buf)) {
		n := int64(batch.HeaderSize)
		if r.lastLen < headerWindow/4 {
			n = min(headerWindow, r.size-pos)
		}
		if err := r.fill(pos, n); err != nil {
			return nil, err
		}
	}
	b := r.buf[pos-r.bufPos:][:batch.HeaderSize]
	r.lastLen = batchSize(b)
	if r.lastLen < batch.HeaderSize || pos+r.lastLen > r.size {
		return nil, fmt.Errorf("batch at %d: bad length %d", pos, r.lastLen)
	}
	return b, nil
}

// whole returns the n bytes of the batch at pos.
func (r *headerReader) whole(pos, n int64) ([]byte, error) {
	if off := pos - r.bufPos; off >= 0 && off+n <= int64(len(r.buf)) {
		return r.buf[off : off+n], nil
	}
	if err := r.fill(pos, n); err != nil {
		return nil, err
	}
	return r.buf[:n], nil
}

func (r *headerReader) fill(pos, n int64) error {
	if int64(cap(r.buf)) < n {
		r.buf = make([]byte, max(n, headerWindow))
	}
	r.buf = r.buf[:n]
	r.bufPos = pos
	if _, err := r.refs.f.ReadAt(r.buf, pos); err != nil {
		r.buf = r.buf[:0]
		return err
	}
	return nil
}
