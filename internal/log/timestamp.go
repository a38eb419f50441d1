package log

import (
	"fmt"

	"github.com/exactq/exactq/internal/batch"
)

// OffsetForTimestamp answers ListOffsets by timestamp: the offset and timestamp of the
// first record (in offset order, at or above the start offset) whose timestamp is >= ts;
// ok is false if there is none. The special timestamps -1 (latest), -2 (earliest) and -3
// (max timestamp) are the caller's: EndOffset, StartOffset, MaxTimestamp.
//
// It skips segments whose largest timestamp is below ts, uses the time index to skip the
// segment's batches that are all below ts, then walks batch headers and decodes only the
// first batch whose max timestamp reaches ts.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, 0, false, ErrClosed
	}
	var h [batch.HeaderSize]byte
	for _, s := range l.segs {
		if s.maxTs < ts || s.next <= l.start {
			continue
		}
		for pos := s.timeFloor(ts); pos < s.size; {
			if err := s.readAt(pos, h[:]); err != nil {
				return 0, 0, false, err
			}
			n := batchSize(h[:])
			if maxTimestamp(h[:]) >= ts && lastOffset(h[:]) >= l.start {
				b := make([]byte, n)
				if err := s.readAt(pos, b); err != nil {
					return 0, 0, false, err
				}
				recs, err := recordTimes(b)
				if err != nil {
					return 0, 0, false, err
				}
				for _, r := range recs {
					if r.offset >= l.start && r.ts >= ts {
						return r.offset, r.ts, true, nil
					}
				}
			}
			pos += n
		}
	}
	return -1, -1, false, nil
}

// MaxTimestamp answers ListOffsets MAX_TIMESTAMP (-3): the largest record timestamp in the
// log and the offset of the earliest record that has it; -1, -1 if the log has no batch
// with a timestamp. Batches wholly below the start offset do not count; the batch holding
// the start offset counts whole (as Fetch returns it whole), so the answer can be an
// offset just below the start offset.
func (l *Log) MaxTimestamp() (timestamp, offset int64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, 0, ErrClosed
	}
	var best *segment
	bestTs, bestOff := int64(-1), int64(-1)
	for _, s := range l.segs {
		ts, off := s.maxTs, s.maxTsOff
		if s.base < l.start && s.maxTsOff >= 0 && lastOffsetBelow(s, off, l.start) {
			// DeleteRecords cut into this segment and its max is gone: recompute over the
			// batches from the one holding the start offset (one segment, rare).
			var err error
			if ts, off, err = s.liveMax(l.start); err != nil {
				return 0, 0, err
			}
		}
		if ts > bestTs {
			best, bestTs, bestOff = s, ts, off
		}
	}
	if best == nil {
		return -1, -1, nil
	}
	// The earliest batch holding the max is known; find the record in it.
	var h [hdrPrefix]byte
	for pos := best.floor(bestOff); pos < best.size; {
		if err := best.readAt(pos, h[:]); err != nil {
			return 0, 0, err
		}
		n := batchSize(h[:])
		if batch.BaseOffset(h[:]) == bestOff {
			b := make([]byte, n)
			if err := best.readAt(pos, b); err != nil {
				return 0, 0, err
			}
			recs, err := recordTimes(b)
			if err != nil {
				return 0, 0, err
			}
			for _, r := range recs {
				if r.ts == bestTs {
					return r.ts, r.offset, nil
				}
			}
			// The batch header claims a max no record has (a producer bug); report the
			// header's claim at the batch's first offset, as Kafka's index would.
			return bestTs, bestOff, nil
		}
		pos += n
	}
	return 0, 0, fmt.Errorf("log: segment %d: batch %d with the max timestamp not found", best.base, bestOff)
}

// lastOffsetBelow reports whether the batch with base offset off ends below start.
func lastOffsetBelow(s *segment, off, start int64) bool {
	if off >= start {
		return false
	}
	var h [hdrPrefix]byte
	pos := s.floor(off)
	for pos < s.size {
		if s.readAt(pos, h[:]) != nil {
			return true
		}
		if batch.BaseOffset(h[:]) == off {
			return lastOffset(h[:]) < start
		}
		pos += batchSize(h[:])
	}
	return true
}

// liveMax returns the largest batch max timestamp among the batches that end at or above
// start, and the base offset of the earliest batch with it (-1, -1 if none).
func (s *segment) liveMax(start int64) (ts, off int64, err error) {
	ts, off = -1, -1
	var h [batch.HeaderSize]byte
	for pos := s.floor(start); pos < s.size; pos += batchSize(h[:]) {
		if err := s.readAt(pos, h[:]); err != nil {
			return 0, 0, err
		}
		if lastOffset(h[:]) >= start && maxTimestamp(h[:]) > ts {
			ts, off = maxTimestamp(h[:]), batch.BaseOffset(h[:])
		}
	}
	return ts, off, nil
}

// timeFloor returns a batch-boundary position before which every batch of the segment
// has only timestamps < ts: the position of the batch named by the last time-index entry
// below ts (entries hold running maxima, so everything up to it is below ts too).
func (s *segment) timeFloor(ts int64) int64 {
	lo, hi := 0, len(s.tindex) // first entry with ts >= target
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.tindex[m].ts < ts {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return s.floor(s.base + int64(s.tindex[lo-1].rel))
}

// recordTime is one record's offset and timestamp.
type recordTime struct{ offset, ts int64 }

// recordTimes decodes (decompressing if needed) the offsets and timestamps of a stored
// batch's records. In a LogAppendTime batch every record has the batch's max timestamp.
func recordTimes(b []byte) ([]recordTime, error) {
	h, err := parseStored(b)
	if err != nil {
		return nil, fmt.Errorf("log: stored batch at offset %d: %w", batch.BaseOffset(b), err)
	}
	recs, err := batch.DecodeRecords(&h, batch.DefaultMaxDecompressedBytes)
	if err != nil {
		return nil, fmt.Errorf("log: stored batch at offset %d: %w", h.FirstOffset, err)
	}
	out := make([]recordTime, len(recs))
	for i, r := range recs {
		ts := h.FirstTimestamp + r.TimestampDelta64
		if h.Attributes&batch.AttrTimestampType != 0 {
			ts = h.MaxTimestamp
		}
		out[i] = recordTime{offset: h.FirstOffset + int64(r.OffsetDelta), ts: ts}
	}
	return out, nil
}
