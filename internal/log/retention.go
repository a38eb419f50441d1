package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	checkpointName   = "log-start-offset"
	checkpointHeader = "exactq log-start-offset v1"
)

func readCheckpoint(dir string) (offset int64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	// Written atomically, so anything else is damage we must not guess around.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != checkpointHeader {
		return 0, false, fmt.Errorf("log: %s: malformed %s", dir, checkpointName)
	}
	offset, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || offset < 0 {
		return 0, false, fmt.Errorf("log: %s: malformed %s", dir, checkpointName)
	}
	return offset, true, nil
}

// writeCheckpoint durably records the log start offset: temp file, fsync, rename, fsync
// directory.
func writeCheckpoint(dir string, offset int64) error {
	data := fmt.Sprintf("%s\n%d\n", checkpointHeader, offset)
	if err := writeFileAtomic(filepath.Join(dir, checkpointName), []byte(data)); err != nil {
		return err
	}
	return syncDir(dir)
}

// DeleteRecordsBefore raises the log start offset to offset (Kafka DeleteRecords): it
// never lowers it, and offset must not exceed the end offset (ErrOffsetOutOfRange; the
// broker passes at most the high watermark). The new start offset is durable when this
// returns; segments wholly below it are then deleted (never the active one). It returns
// the start offset.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	l.mu.RLock()
	start, end, closed := l.start, l.end, l.closed
	l.mu.RUnlock()
	if closed {
		return 0, ErrClosed
	}
	if offset > end || offset < 0 {
		return start, ErrOffsetOutOfRange
	}
	if offset <= start {
		return start, nil
	}
	// Invariant 3: the data below the checkpoint is durable before the checkpoint.
	if l.durable.Load() < offset {
		if err := l.Sync(); err != nil {
			return start, err
		}
	}
	if err := l.unmark(); err != nil {
		return start, err
	}
	if err := writeCheckpoint(l.dir, offset); err != nil {
		return start, l.fail(err)
	}
	l.mu.Lock()
	l.start = max(l.start, offset)
	l.mu.Unlock()
	_, err := l.removeBelowStart()
	return offset, err
}

// removeBelowStart deletes the closed segments wholly below the start offset. maintMu held.
func (l *Log) removeBelowStart() (int, error) {
	l.mu.RLock()
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= l.start {
		n++
	}
	l.mu.RUnlock()
	return n, l.removeFront(n)
}

// removeFront deletes the n oldest segments (never the active one) and raises the start
// offset to the new first segment's base. maintMu held.
func (l *Log) removeFront(n int) error {
	if n == 0 {
		return nil
	}
	if err := l.unmark(); err != nil {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	n = min(n, len(l.segs)-1)
	gone := append([]*segment(nil), l.segs[:n]...)
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.start = max(l.start, l.segs[0].base)
	l.dirGen++
	gen := l.dirGen
	for _, s := range gone {
		s.deleted = true
		s.close()
	}
	l.mu.Unlock()
	// Oldest first: a crash part-way leaves a suffix of the log, which is still a log.
	for _, s := range gone {
		if err := removeSegmentFiles(l.dir, s.base); err != nil {
			return l.fail(err)
		}
	}
	// Make the removals durable: a segment coming back after a crash would lower the start
	// offset, which is derived from the first segment unless DeleteRecords checkpointed it.
	if err := syncDir(l.dir); err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	l.dirSyncd = max(l.dirSyncd, gen)
	l.mu.Unlock()
	return nil
}

// EnforceRetention applies the Delete cleanup policy: deletes the oldest closed segments
// whose largest timestamp is older than RetentionMs, then the oldest closed segments while
// the log stays at or above RetentionBytes without them, then segments wholly below the
// start offset (the last even without the Delete policy). The active segment is never
// deleted. The start offset rises to the first remaining segment. The broker calls it
// periodically (Kafka's log.retention.check.interval.ms, default 5 minutes).
func (l *Log) EnforceRetention() (int, error) {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	cfg := l.config()
	nowMs := l.now().UnixMilli()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, ErrClosed
	}
	n := 0
	closed := len(l.segs) - 1
	if cfg.Delete && cfg.RetentionMs >= 0 {
		for n < closed && l.segs[n].largestTimestamp() < nowMs-cfg.RetentionMs {
			n++
		}
	}
	if cfg.Delete && cfg.RetentionBytes >= 0 {
		var total int64
		for _, s := range l.segs[n:] {
			total += s.size
		}
		diff := total - cfg.RetentionBytes
		for n < closed && diff-l.segs[n].size >= 0 {
			diff -= l.segs[n].size
			n++
		}
	}
	for n < closed && l.segs[n+1].base <= l.start { // Kafka's rule: the next segment starts at or below
		n++
	}
	l.mu.RUnlock()
	return n, l.removeFront(n)
}

// largestTimestamp is the segment's retention time: its largest batch timestamp, or the
// file's modification time if no batch has one (Kafka's rule). mu held.
func (s *segment) largestTimestamp() int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	if st, err := os.Stat(s.file.path); err == nil {
		return st.ModTime().UnixMilli()
	}
	return s.rollTs
}
