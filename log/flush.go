package log

import (
	"golang.org/x/sys/unix"
)

// Group commit: one flusher goroutine per log does every fsync. WaitDurable callers kick it
// and wait on fcond; while one fsync runs, later callers pile up behind one pending kick
// and are all covered by the next fsync. No goroutine per waiter.

func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *Log) flushLoop() {
	defer close(l.done)
	for {
		select {
		case <-l.kick:
		case <-l.stop:
			return
		}
		_ = l.syncAll() // a failure is sticky (l.failed); waiters read it
		l.fmu.Lock()
		l.fcond.Broadcast()
		l.fmu.Unlock()
	}
}

// WaitDurable blocks until every byte of every batch with offsets < end is fsynced (end is
// clamped to the end offset at the time of the call). Many concurrent callers share one
// fsync. It returns the sticky fsync error if the log failed, or ErrClosed if the log was
// closed before the data became durable.
func (l *Log) WaitDurable(end int64) error {
	if e := l.EndOffset(); end > e {
		end = e
	}
	if l.durable.Load() >= end {
		return nil
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	for l.durable.Load() < end {
		if err := l.err(); err != nil {
			return err
		}
		l.mu.RLock()
		closed := l.closed
		l.mu.RUnlock()
		if closed {
			return ErrClosed
		}
		l.kickFlusher()
		l.fcond.Wait()
	}
	return nil
}

// Sync fsyncs everything appended so far, now, in the caller's goroutine.
func (l *Log) Sync() error {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	err := l.syncAll()
	l.fmu.Lock()
	l.fcond.Broadcast()
	l.fmu.Unlock()
	return err
}

// syncAll makes everything published so far durable: fdatasync of every segment with
// unsynced bytes, index files of newly closed segments (after their data), and the
// directory if entries changed. Then it advances the durable end offset.
func (l *Log) syncAll() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.err(); err != nil {
		return err
	}
	type job struct {
		s    *segment
		size int64
		idx  bool
	}
	var jobs []job
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	end, gen := l.end, l.dirGen
	for _, s := range l.segs {
		if s.durable < s.size || s.needIndex {
			jobs = append(jobs, job{s: s, size: s.size, idx: s.needIndex})
		}
	}
	dirty := gen != l.dirSyncd
	// A new recovery point once enough of the active segment will be durable (rp is
	// guarded by syncMu, which we hold).
	var rp *activeState
	if a := l.segs[len(l.segs)-1]; a.size-a.rp.pos >= l.rpBytes {
		v := a.view()
		rp = &v
	}
	l.mu.RUnlock()

	// syncMu keeps segment files open (removal and compaction take it to close them).
	for _, j := range jobs {
		if j.size > j.s.durable {
			if err := unix.Fdatasync(int(j.s.f.Fd())); err != nil {
				return l.fail(err)
			}
		}
		if j.idx {
			if err := writeIndexFiles(l.dir, j.s); err != nil {
				return l.fail(err)
			}
			// What the segment's recovery point described while it was active is now in
			// its index files. Best effort: Open removes a closed segment's leftovers.
			_ = removeActiveIndexes(l.dir, j.s.base)
			dirty = true
		}
	}
	if dirty {
		if err := syncDir(l.dir); err != nil {
			return l.fail(err)
		}
	}
	l.mu.Lock()
	for _, j := range jobs {
		j.s.durable = max(j.s.durable, j.size)
		if j.idx {
			j.s.needIndex = false
		}
	}
	l.dirSyncd = max(l.dirSyncd, gen)
	l.mu.Unlock()
	if end > l.durable.Load() {
		l.durable.Store(end)
	}
	if rp != nil {
		// Best effort: a failure only means a longer scan after a crash.
		_ = writeRecoveryPoint(l.dir, *rp)
	}
	return nil
}
