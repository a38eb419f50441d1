package log

import (
	"errors"
	"fmt"
	"sync"
)

// Group commit: WaitDurable callers kick the log's flush and wait on fcond; while one
// fsync of the log runs, later callers pile up behind one pending kick and are all covered
// by the next fsync. No goroutine per waiter, and none per log: the flushes of every log
// run on a shared, bounded set of goroutines (flushers), started when there is work and
// gone when there is none. An idle partition costs no goroutine (a goroutine per log was
// ~2.5 KiB and a scheduler entry each, 250 MB at 100,000 partitions), and a burst of
// acks=all writes to many partitions blocks at most maxFlushers threads in fdatasync,
// where a flusher per log could block one OS thread per partition (the runtime stops the
// process at 10,000).

// maxFlushers bounds the fsyncs running at once across all logs. Each blocks a thread in
// fdatasync; more than a few dozen concurrent flushes do not make one disk faster, and
// flushes of one log never overlap (syncMu), so a busy partition gets one flusher.
const maxFlushers = 32

// flushers runs the kicked logs' flushes. flushState fields of Log are guarded by mu.
type flushQueue struct {
	mu      sync.Mutex
	queue   []*Log // logs with a kick pending, oldest first; each at most once
	running int    // goroutines draining queue
}

var flushers flushQueue

// flushState is a log's place in the flush queue (guarded by flushers.mu).
type flushState struct {
	queued  bool // in flushers.queue
	running bool // a flusher is in syncAll for this log
	again   bool // kicked while running: queue it again when that flush ends
}

func (l *Log) kickFlusher() {
	q := &flushers
	q.mu.Lock()
	defer q.mu.Unlock()
	switch st := &l.flush; {
	case st.running:
		st.again = true
	case !st.queued:
		st.queued = true
		q.queue = append(q.queue, l)
		if q.running < maxFlushers {
			q.running++
			go q.drain()
		}
	}
}

// drain flushes queued logs until the queue is empty.
func (q *flushQueue) drain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queue) > 0 {
		l := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		l.flush.queued, l.flush.running = false, true
		q.mu.Unlock()
		l.flushed(l.syncAll()) // a failure is sticky (l.failed); waiters read it
		q.mu.Lock()
		l.flush.running = false
		if l.flush.again {
			l.flush.again, l.flush.queued = false, true
			q.queue = append(q.queue, l)
		}
	}
	q.queue = nil // let the backing array go
	q.running--
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
		if l.flushErr != nil && l.durable.Load() < end {
			return l.flushErr
		}
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

// SyncAsync asks for everything appended so far to be made durable, without waiting: a
// flusher does it (sharing the fsync with WaitDurable callers) and then calls
// Options.OnDurable.
func (l *Log) SyncAsync() { l.kickFlusher() }

// retryableSyncError is a flush failure that lost nothing (a segment file that could not be
// reopened, index files that could not be written): unlike a failed fsync it is not
// sticky, and WaitDurable returns it to the waiters of that flush.
type retryableSyncError struct{ err error }

func (e *retryableSyncError) Error() string { return e.err.Error() }
func (e *retryableSyncError) Unwrap() error { return e.err }

// flushed wakes the durable waiters after a flusher's flush and reports a successful one.
func (l *Log) flushed(err error) {
	var re *retryableSyncError
	l.fmu.Lock()
	if errors.As(err, &re) {
		l.flushErr = re.err
	} else {
		l.flushErr = nil
	}
	l.fcond.Broadcast()
	l.fmu.Unlock()
	if err == nil && l.onDurable != nil {
		l.onDurable(l.durable.Load())
	}
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

	// syncMu keeps the segments in the log (removal and compaction take it).
	for _, j := range jobs {
		if j.size > j.s.durable {
			if err := j.s.fdatasync(); err != nil {
				var re *retryableSyncError
				if errors.As(err, &re) {
					return err // the file could not be opened: nothing was lost, retry later
				}
				return l.fail(err)
			}
		}
		if j.idx {
			if err := writeIndexFiles(l.dir, j.s); err != nil {
				// The data is durable; only its index files are missing (a full disk, say).
				// Not sticky: the next flush writes them, and until then this flush's
				// waiters get the error (KAFKA_STORAGE_ERROR) and the durable end stays.
				return &retryableSyncError{l.writeFailed(fmt.Errorf("log: %s: index files of segment %d: %w", l.dir, j.s.base, err))}
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
		if j.s.durable == j.s.size {
			j.s.file.unsynced.Store(false)
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
