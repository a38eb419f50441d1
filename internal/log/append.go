package log

import (
	"fmt"
	"math"

	"github.com/exactq/exactq/internal/batch"
	"golang.org/x/sys/unix"
)

// Append assigns consecutive offsets to batches (batch i gets base offset = the end offset
// after batch i-1; SetBaseOffset writes it into the caller's slice, which the log now owns
// for the duration of the call), and writes them all with one pwritev to the active
// segment, rolling first if needed. It returns the first and last offsets assigned. The
// data is not durable until WaitDurable or Sync. The batches must have been validated by
// the caller (batch.Parse); Append only checks what it needs to store them safely.
//
// ErrRecordListTooLarge: the batches together exceed SegmentBytes (Kafka's check).
func (l *Log) Append(batches [][]byte) (first, last int64, err error) {
	if len(batches) == 0 {
		return 0, 0, ErrEmptyAppend
	}
	var total, count int64
	for _, b := range batches {
		n, err := batch.Size(b)
		if err != nil || n != len(b) || n < batch.HeaderSize || lastOffsetDelta(b) < 0 {
			return 0, 0, ErrInvalidBatch
		}
		total += int64(n)
		count += lastOffsetDelta(b) + 1
	}
	cfg := l.config()
	if total > cfg.SegmentBytes {
		return 0, 0, ErrRecordListTooLarge
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.err(); err != nil {
		return 0, 0, err
	}
	l.mu.RLock()
	closed, a := l.closed, l.segs[len(l.segs)-1]
	l.mu.RUnlock()
	if closed {
		return 0, 0, ErrClosed
	}
	if err := l.unmark(); err != nil {
		return 0, 0, l.writeFailed(fmt.Errorf("log: remove clean-shutdown marker: %w", err))
	}
	now := l.now().UnixMilli()
	if a.size > 0 && (a.size+total > cfg.SegmentBytes ||
		cfg.SegmentMs > 0 && now-a.rollTs > cfg.SegmentMs ||
		a.next+count-1-a.base > math.MaxInt32) {
		if a, err = l.roll(now); err != nil {
			return 0, 0, l.writeFailed(err)
		}
	}

	first = a.next
	off := first
	for _, b := range batches {
		batch.SetBaseOffset(b, off)
		off += lastOffsetDelta(b) + 1
	}
	if err := l.write(a, batches); err != nil {
		return 0, 0, err
	}

	interval := int64(cfg.IndexIntervalBytes)
	l.mu.Lock()
	pos, off := a.size, first
	for _, b := range batches {
		next := off + lastOffsetDelta(b) + 1
		a.track(pos, off, next, int64(len(b)), maxTimestamp(b), batchCRC(b), interval, now)
		pos, off = pos+int64(len(b)), next
	}
	l.end = off
	a.file.unsynced.Store(true)
	l.mu.Unlock()
	return first, off - 1, nil
}

// write writes batches at the end of the active segment a. Called with appendMu held.
func (l *Log) write(a *segment, batches [][]byte) error {
	h, err := a.file.acquire()
	if err != nil {
		return l.writeFailed(fmt.Errorf("log: open active segment: %w", err))
	}
	defer h.release()
	if err := pwritevFull(int(h.f.Fd()), batches, a.size); err != nil {
		// Cut off whatever part was written so the next append starts at a batch boundary.
		if terr := h.f.Truncate(a.size); terr != nil {
			return l.fail(fmt.Errorf("append: %v; truncate: %w", err, terr))
		}
		return l.writeFailed(fmt.Errorf("log: append: %w", err))
	}
	l.writeOK()
	return nil
}

// roll closes the active segment and starts a new one at the end offset. Called with
// appendMu held. The old segment's index files are written by the flusher once its data is
// durable; roll kicks it.
func (l *Log) roll(nowMs int64) (*segment, error) {
	l.mu.RLock()
	base := l.end
	l.mu.RUnlock()
	s, err := createSegment(l.dir, base, l.files, nowMs)
	if err != nil {
		return nil, fmt.Errorf("log: roll: %w", err)
	}
	l.mu.Lock()
	old := l.segs[len(l.segs)-1]
	old.addTimeEntry()
	old.needIndex = true
	old.sinceIndex = 0
	l.segs = append(l.segs, s)
	l.dirGen++
	s.createdGen = l.dirGen
	l.mu.Unlock()
	l.kickFlusher()
	return s, nil
}

// iovMax is Linux's IOV_MAX: the most buffers one pwritev takes.
const iovMax = 1024

// pwritevFull writes bufs at off, retrying short writes.
func pwritevFull(fd int, bufs [][]byte, off int64) error {
	for len(bufs) > 0 {
		n, err := unix.Pwritev(fd, bufs[:min(len(bufs), iovMax)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("pwritev wrote nothing")
		}
		off += int64(n)
		for n > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
			} else {
				bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
				n = 0
			}
		}
	}
	return nil
}
