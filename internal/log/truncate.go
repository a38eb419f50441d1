package log

// Truncation: TruncateTo drops a divergent tail (a raft follower's conflicting entries, a
// partition follower's records past a diverging epoch); TruncateFullyAndStartAt replaces
// the whole log by an empty one at an offset (a raft snapshot, a follower whose fetch
// offset fell out of the leader's log: Kafka's truncateFullyAndStartAt).
//
// # Crash safety
//
// A truncation changes several files: segments deleted newest first, one segment cut
// (ftruncate) and its index files rewritten, a new active segment, the recovery point,
// log-start-offset. A crash between two of those steps would leave a log that is neither
// the old one nor the truncated one (say, the last segments gone and the cut one not yet
// cut), and recovery of such a log could even misjudge a compacted segment that became
// the last one (its offset gaps look like damage to the last segment's scan). So before
// touching any file a truncation records what it does in truncate-intent (temp file,
// fsync, rename, directory fsync), after making everything below the cut durable and
// removing the clean-shutdown marker and the recovery point. Open, finding an intent,
// loads every segment as a closed one (no recovery point, gaps allowed, nothing cut for
// being out of order) and redoes the truncation on what it found, which is idempotent:
// every batch below the cut is durable and untouched by any step, every step only removes
// what is at or above the cut. The intent is removed, durably, once the truncated log is
// durable. So after a crash at any point the log is either the old one (the intent never
// became durable) or the truncated one.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"

	"github.com/exactq/exactq/internal/batch"
)

const (
	truncateIntentName = "truncate-intent"
	tiMagic            = "EQTI0001"
	tiSize             = len(tiMagic) + 1 + 2*8 + 4
)

// truncIntent is the content of truncate-intent.
type truncIntent struct {
	full bool  // TruncateFullyAndStartAt: every segment goes, the log restarts at end
	cut  int64 // TruncateTo's offset: batches whose last offset is >= cut are dropped
	end  int64 // the end offset afterwards (and the start offset when full)
}

func (ti truncIntent) encode() []byte {
	b := append(make([]byte, 0, tiSize), tiMagic...)
	if ti.full {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(ti.cut))
	b = binary.BigEndian.AppendUint64(b, uint64(ti.end))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeTruncIntent(b []byte) (truncIntent, bool) {
	if len(b) != tiSize || string(b[:len(tiMagic)]) != tiMagic || b[len(tiMagic)] > 1 ||
		crc32.Checksum(b[:tiSize-4], castagnoli) != binary.BigEndian.Uint32(b[tiSize-4:]) {
		return truncIntent{}, false
	}
	p := b[len(tiMagic):]
	ti := truncIntent{full: p[0] == 1, cut: int64(binary.BigEndian.Uint64(p[1:])), end: int64(binary.BigEndian.Uint64(p[9:]))}
	return ti, ti.end >= 0 && (ti.full || ti.cut >= ti.end)
}

// readTruncIntent returns the pending truncation, if any. The file is written through a
// rename, so a damaged one is damage we must not guess around (as log-start-offset).
func readTruncIntent(dir string) (*truncIntent, error) {
	b, err := os.ReadFile(filepath.Join(dir, truncateIntentName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	ti, ok := decodeTruncIntent(b)
	if !ok {
		return nil, fmt.Errorf("log: %s: malformed %s", dir, truncateIntentName)
	}
	return &ti, nil
}

// testHookTruncate, if set, is called after each step of a truncation; an error stops it
// there, as a crash would (crash tests).
var testHookTruncate func(step string) error

func truncStep(step string) error {
	if testHookTruncate != nil {
		return testHookTruncate(step)
	}
	return nil
}

// TruncateTo drops every batch whose last offset is at or above offset, durably, and
// returns the new end offset: the base offset of the first dropped batch (so at most
// offset; below it only when offset falls inside a batch, as Kafka's truncateTo drops
// the whole batch). If that batch begins below the start offset, the log is left empty
// at the start offset. An offset at or above the end offset changes nothing; one below
// the start offset is ErrOffsetOutOfRange (committed data is never truncated).
//
// When it returns, the truncated log is durable; a crash during it leaves, after Open,
// either the old log or the truncated one (see the file comment). Appends, retention and
// compaction wait for it; reads wait only while segments are swapped and cut, which
// includes re-reading the cut segment up to the cut. WaitDurable callers waiting for
// dropped offsets wait until new appends reach them. A Chunk from ReadChunks that covers
// dropped bytes of the cut segment must be released before TruncateTo (the broker
// truncates only above the high watermark, which reads do not pass).
func (l *Log) TruncateTo(offset int64) (int64, error) {
	start, end, unlock, err := l.lockForTruncate()
	if err != nil {
		return end, err
	}
	defer unlock()
	if offset >= end {
		return end, nil
	}
	if offset < start {
		return end, ErrOffsetOutOfRange
	}
	// Everything kept must be durable before the cut: a crash after it then leaves the
	// truncated log, never less.
	if err := l.syncAll(); err != nil {
		return end, err
	}
	l.mu.RLock()
	cp, err := l.findCut(offset)
	l.mu.RUnlock()
	if err != nil {
		return end, err
	}
	ti := truncIntent{cut: offset, end: max(cp.base, start)}
	if err := l.beginTruncate(ti); err != nil {
		return end, err
	}
	if err := l.applyTruncate(ti, true); err != nil {
		return end, err
	}
	return ti.end, l.endTruncate()
}

// TruncateFullyAndStartAt removes every segment and restarts the log empty at offset:
// start and end offset become offset (which may be below the old start offset: unlike
// DeleteRecordsBefore this replaces the log). Durable and crash-safe like TruncateTo.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return ErrOffsetOutOfRange
	}
	_, _, unlock, err := l.lockForTruncate()
	if err != nil {
		return err
	}
	defer unlock()
	ti := truncIntent{full: true, end: offset}
	if err := l.beginTruncate(ti); err != nil {
		return err
	}
	if err := l.applyTruncate(ti, false); err != nil {
		return err
	}
	return l.endTruncate()
}

// lockForTruncate takes maintMu and appendMu (nothing else changes the log until unlock)
// and returns the start and end offsets, or why the log cannot be truncated.
func (l *Log) lockForTruncate() (start, end int64, unlock func(), err error) {
	l.maintMu.Lock()
	l.appendMu.Lock()
	unlock = func() { l.appendMu.Unlock(); l.maintMu.Unlock() }
	l.mu.RLock()
	start, end, closed := l.start, l.end, l.closed
	l.mu.RUnlock()
	if closed {
		err = ErrClosed
	} else {
		err = l.err()
	}
	if err != nil {
		unlock()
	}
	return start, end, unlock, err
}

// cutPoint is where a truncation cuts: segment index seg, file position pos, and base,
// the base offset of the batch at pos (the first one dropped).
type cutPoint struct {
	seg       int
	pos, base int64
}

// findCut finds the first batch whose last offset is >= offset (offset < l.end). mu held.
func (l *Log) findCut(offset int64) (cutPoint, error) {
	i := max(sort.Search(len(l.segs), func(j int) bool { return l.segs[j].base > offset })-1, 0)
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		h, err := s.file.acquire()
		if err != nil {
			return cutPoint{}, err
		}
		var hdr [hdrPrefix]byte
		for pos := s.floor(offset); pos < s.size; pos += batchSize(hdr[:]) {
			if err := s.readHeader(h.f, pos, &hdr); err != nil {
				h.release()
				return cutPoint{}, err
			}
			if lastOffset(hdr[:]) >= offset {
				h.release()
				return cutPoint{seg: i, pos: pos, base: batch.BaseOffset(hdr[:])}, nil
			}
		}
		h.release()
	}
	return cutPoint{}, fmt.Errorf("log: %s: no batch at or above offset %d below the end %d", l.dir, offset, l.end)
}

// beginTruncate makes the intent durable. Before it: the clean-shutdown marker goes (the
// files are about to change), and the recovery point (it describes bytes about to go).
// Callers hold maintMu and appendMu.
func (l *Log) beginTruncate(ti truncIntent) error {
	if err := l.unmark(); err != nil {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.RLock()
	a := l.segs[len(l.segs)-1]
	l.mu.RUnlock()
	a.rp = rpState{}
	if err := os.Remove(filepath.Join(l.dir, recoveryPointName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := removeActiveIndexes(l.dir, a.base); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(l.dir, truncateIntentName), ti.encode()); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return l.fail(err)
	}
	return truncStep("intent")
}

// endTruncate removes the intent, durably, once the truncated log is.
func (l *Log) endTruncate() error {
	if err := os.Remove(filepath.Join(l.dir, truncateIntentName)); err != nil {
		return l.fail(err)
	}
	if err := syncDir(l.dir); err != nil {
		return l.fail(err)
	}
	return nil
}

// applyTruncate does the truncation ti on the loaded segments and makes the result
// durable (everything but the intent's removal). live: called by TruncateTo on a running
// log, where the active segment is known to hold consecutive offsets and may stay active;
// at Open every segment was loaded as a closed one and the log gets a new active segment
// unless it already ends with an empty one at ti.end. A failure is sticky: the files are
// half-way, and only Open (which redoes the truncation) may touch them again.
func (l *Log) applyTruncate(ti truncIntent, live bool) error {
	if err := l.cutSegments(ti, live); err != nil {
		return l.fail(err)
	}
	// The index files of segments closed by the cut or the roll, and the directory.
	if err := l.syncAll(); err != nil {
		return l.fail(err)
	}
	return truncStep("synced")
}

func (l *Log) cutSegments(ti truncIntent, live bool) error {
	cfg := l.config()
	nowMs := l.now().UnixMilli()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()

	// What goes: every segment (full), or the segments after the cut one.
	var cp cutPoint
	found := false
	switch {
	case ti.full:
		cp, found = cutPoint{seg: 0, pos: 0}, len(l.segs) > 0
	case ti.cut < l.end:
		var err error
		if cp, err = l.findCut(ti.cut); err != nil {
			return err
		}
		found = true
	}
	keepActive := false
	if found {
		wasActive := cp.seg == len(l.segs)-1
		gone := l.segs[cp.seg+1:]
		if ti.full {
			gone = l.segs
		}
		for i := len(gone) - 1; i >= 0; i-- { // newest first
			s := gone[i]
			s.deleted = true
			s.close()
			if err := removeSegmentFiles(l.dir, s.base); err != nil {
				return err
			}
			if err := truncStep("removed"); err != nil {
				return err
			}
		}
		l.segs = l.segs[:len(l.segs)-len(gone)]
		if !ti.full {
			cs := l.segs[cp.seg]
			l.segs = l.segs[:cp.seg]
			cs.deleted = true
			cs.close()
			// The active segment stays active when it keeps its base: its offsets are
			// consecutive. A closed one may have compaction gaps, so it stays closed and
			// a new active segment follows it.
			keepActive = live && wasActive && cp.base == ti.end
			if err := removeActiveIndexes(l.dir, cs.base); err != nil {
				return err
			}
			if !keepActive && cp.pos == 0 {
				if err := removeSegmentFiles(l.dir, cs.base); err != nil {
					return err
				}
			} else {
				if !keepActive {
					for _, p := range []string{indexPath(l.dir, cs.base), timeIndexPath(l.dir, cs.base)} {
						if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
							return err
						}
					}
				}
				if err := os.Truncate(logPath(l.dir, cs.base), cp.pos); err != nil {
					return err
				}
				if err := truncStep("cut"); err != nil {
					return err
				}
				// Re-read what is left (it also fsyncs the cut file).
				var st Recovery
				s, _, err := openSegment(l.dir, cs.base, l.files, keepActive, nil, cfg.IndexIntervalBytes, nowMs, &st)
				if err != nil {
					return err
				}
				s.durable = s.size
				l.segs = append(l.segs, s)
			}
		}
		l.dirGen++
	}
	if ti.full {
		// The new start offset first: if the directory fsync below does not happen, Open
		// redoes this anyway.
		if err := writeCheckpoint(l.dir, ti.end); err != nil {
			return err
		}
		l.start = ti.end
	}
	n := len(l.segs)
	if !keepActive && !(n > 0 && l.segs[n-1].base == ti.end && l.segs[n-1].size == 0) {
		if n > 0 && l.segs[n-1].next > ti.end {
			return fmt.Errorf("log: %s: segment %d ends at %d, past the truncation end %d", l.dir, l.segs[n-1].base, l.segs[n-1].next, ti.end)
		}
		s, err := createSegment(l.dir, ti.end, l.files, nowMs)
		if err != nil {
			return err
		}
		if n > 0 {
			prev := l.segs[n-1]
			prev.addTimeEntry()
			prev.needIndex = true
			prev.sinceIndex = 0
		}
		l.dirGen++
		s.createdGen = l.dirGen
		l.segs = append(l.segs, s)
		if err := truncStep("rolled"); err != nil {
			return err
		}
	}
	l.end = ti.end
	if l.start > l.end {
		return fmt.Errorf("log: %s: truncation end %d below the start offset %d", l.dir, l.end, l.start)
	}
	l.durable.Store(l.end)
	return nil
}

// finishTruncate redoes the truncation an intent found at Open describes (see the file
// comment), then removes the intent. The log may end below ti.end: a compaction gap
// before the first dropped batch.
func (l *Log) finishTruncate(ti truncIntent) error {
	if err := l.applyTruncate(ti, false); err != nil {
		return err
	}
	return l.endTruncate()
}
