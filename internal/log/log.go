// Package log is exactq's segmented partition log: one *Log is one partition's directory.
//
// # What it stores
//
// Kafka v2 record batches exactly as the broker received and validated them; Append only
// writes the base offset (outside the CRC). Only compaction rewrites a batch, and then only
// by dropping records from it (the header, base offset and offsets of kept records stay).
//
// # Files (Kafka-like)
//
//	<20-digit base>.log        batches, back to back
//	<20-digit base>.index      sparse offset index: uint32 offset-base, uint32 file position,
//	                           one entry per >= IndexIntervalBytes of batches; the offset is
//	                           the base offset of the batch that starts at that position
//	<20-digit base>.timeindex  int64 running max timestamp, uint32 offset-base of the
//	                           (earliest) batch that first reached it
//	log-start-offset           checkpoint of the log start offset (DeleteRecords)
//	<base>.activeindex,        the active segment's index entries as far as its recovery
//	<base>.activetimeindex     point describes it (same formats, append-only)
//	recovery-point             the active segment's recovery point (recoverypoint.go)
//	clean-shutdown             marker: Close finished with everything durable
//	truncate-intent            a TruncateTo or TruncateFullyAndStartAt in progress, redone
//	                           by Open (truncate.go)
//	*.tmp, *.cleaned           half-written files, removed at Open
//
// The active (last) segment's indexes live in memory, and on disk only as far as its
// recovery point. A closed segment's index files are written by the flusher after the
// segment's data is fsynced, through a temporary file and a rename; so an index file that
// exists always describes durable data.
//
// # Durability invariants
//
//  1. Append writes but does not fsync. WaitDurable(end) returns once every byte of every
//     batch with offsets < end (and the directory entry of every segment holding them) is
//     fsynced. The broker answers acks=all only after WaitDurable, so after a crash only the
//     unsynced tail of the log can be missing or torn.
//  2. Open therefore trusts closed segments with a valid index (it checks the index shape
//     and validates the batches after the last index entry) and the last segment up to
//     its recovery point (the prefix a flush made durable, when every check of
//     recoverypoint.go passes), and scans every other segment and the rest of the last
//     one batch by batch: batch.Size, magic 2, CRC (parseStored) and offsets that follow
//     each other (consecutive in the last segment, which is never compacted; increasing
//     elsewhere, as compaction leaves gaps). At the first torn or corrupt batch the file
//     is truncated there (and fsynced) and later segments are removed; what a scan kept is
//     fsynced. No complete valid batch that was ever made durable is dropped. After a
//     clean Close, Open finds the clean-shutdown marker and, if the files match it, reads
//     no data and writes nothing; the first change removes the marker durably before it
//     happens, so any crash after a change is recovered as above.
//  3. The log start offset only rises. DeleteRecordsBefore fsyncs the data below the new
//     start, then writes the checkpoint (temp file, fsync, rename, fsync directory), and
//     only then deletes segments, so a crash never loses a start offset that was answered.
//  4. An fsync error is sticky: the kernel may have dropped the dirty pages, so the log
//     refuses further appends and waits with that error (Kafka takes the log dir offline).
//
// # Concurrency
//
// All methods are safe for concurrent use. Appends are serialized by appendMu and write to
// the active segment without holding mu; a batch becomes visible to Read only after it is
// fully written (the segment's size is published under mu). Reads hold mu shared while they
// pread, so a segment's file is never closed under a reader; ReadChunks instead takes a
// reference on each file it returns a range of, and a removed segment's file is closed only
// when the last reference goes (fileRefs). Retention, DeleteRecordsBefore
// and Compact are serialized by maintMu and take mu exclusively only to swap segments. The
// fsyncs of every log run on a shared, bounded set of flusher goroutines (group commit,
// flush.go); an idle log has none. Segment files are opened when used, through a
// FileCache that bounds the descriptors of all logs sharing it (files.go). Lock order:
// maintMu > appendMu > markMu > syncMu > mu > fmu, and FileCache.mu and flushers.mu are
// taken under any of them but take none.
//
// # For the broker
//
//   - Produce: validate each batch (batch.Validate), stamp what the broker owns (leader
//     epoch with batch.SetLeaderEpoch, batch.SetLogAppendTime for LogAppendTime topics),
//     then Append all of a request's batches for the partition in one call. For acks=all
//     call WaitDurable(last+1) before answering (and before raising the high watermark
//     past last+1 if the high watermark must only cover durable data).
//   - Fetch: Read(offset, partitionMaxBytes, hw) for read_uncommitted, Read(offset, max,
//     lso) for read_committed. The first returned batch can start below offset (and below
//     the start offset); clients skip those records, as with Kafka. ReadChunks gives the
//     same bytes as file ranges to send with sendfile; release them once sent.
//   - ListOffsets: -2 StartOffset, -1 EndOffset (or the high watermark), -3 MaxTimestamp,
//     else OffsetForTimestamp.
//   - Start-up: Open recovers (Recovery says how much it read); Scan(StartOffset(), ...)
//     rebuilds producer state. Close every log on shutdown: it leaves the marker that makes
//     the next Open read nothing (a log unchanged since a clean Open keeps the marker it
//     has, and its Close writes nothing; Unchanged reports that).
//   - Descriptors: every log opened without Options.Files shares DefaultFileCache, whose
//     limit (DefaultFileCacheLimit, from RLIMIT_NOFILE) bounds the segment files open
//     whatever the number of partitions; FileCache.Stats reports what is open.
//   - Housekeeping: nothing runs by itself except the flusher. Call EnforceRetention
//     (log.retention.check.interval.ms) and, for compacted topics, Compact periodically, from
//     a background goroutine: they never block appends or reads for long (segments are
//     swapped under a short exclusive lock), but Close waits for them.
//   - Errors map to Kafka codes: ErrOffsetOutOfRange OFFSET_OUT_OF_RANGE,
//     ErrRecordListTooLarge RECORD_LIST_TOO_LARGE, ErrInvalidBatch CORRUPT_MESSAGE, ErrClosed
//     NOT_LEADER_OR_FOLLOWER, ErrEmptyAppend INVALID_REQUEST; any other error is an I/O
//     failure (KAFKA_STORAGE_ERROR). After a failed fsync every later Append, WaitDurable
//     and Sync fails with the same error: close and reopen the log (which recovers it).
//   - One *Log per directory: Open does not lock the directory against a second Open.
package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Errors. Each maps to one Kafka error code.
var (
	ErrOffsetOutOfRange   = errors.New("log: offset out of range")                        // OFFSET_OUT_OF_RANGE
	ErrClosed             = errors.New("log: closed")                                     // NOT_LEADER_OR_FOLLOWER (partition went away)
	ErrRecordListTooLarge = errors.New("log: appended batches are larger than a segment") // RECORD_LIST_TOO_LARGE
	ErrInvalidBatch       = errors.New("log: malformed record batch")                     // CORRUPT_MESSAGE
	ErrEmptyAppend        = errors.New("log: append of no batches")                       // INVALID_REQUEST
)

// Config is the per-topic configuration the log honours. Names follow Kafka's topic configs.
type Config struct {
	SegmentBytes       int64 // segment.bytes: roll when appending would exceed this (at most 2 GiB - 1)
	SegmentMs          int64 // segment.ms: roll when the active segment's first batch is older; <= 0 never
	IndexIntervalBytes int32 // index.interval.bytes: bytes between sparse index entries
	RetentionMs        int64 // retention.ms, -1 = unlimited
	RetentionBytes     int64 // retention.bytes, -1 = unlimited
	Delete, Compact    bool  // cleanup.policy contains delete / compact
	DeleteRetentionMs  int64 // delete.retention.ms: how long compaction keeps tombstones
	MinCompactionLagMs int64 // min.compaction.lag.ms
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		Delete:             true,
		DeleteRetentionMs:  24 * 3600 * 1000,
	}
}

// normalize clamps values the file format cannot represent.
func (c Config) normalize() Config {
	if c.SegmentBytes <= 0 || c.SegmentBytes > maxSegmentBytes {
		c.SegmentBytes = maxSegmentBytes
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = 4096
	}
	return c
}

// maxSegmentBytes keeps every file position representable in the index's uint32.
const maxSegmentBytes = 1<<31 - 1

// Options are the log's dependencies.
type Options struct {
	Now func() time.Time // clock; nil = time.Now

	// Files is the cache of open segment files the log shares with other logs; nil =
	// DefaultFileCache(). Its limit bounds the descriptors all those logs hold, whatever
	// their number (files.go).
	Files *FileCache

	// OnDurable, if set, is called after every successful flush of a flusher (for
	// WaitDurable or SyncAsync) with the durable end offset, from the flusher goroutine and
	// outside the log's locks. It must be quick (the broker raises the high watermark there). With it a
	// caller needs no goroutine of its own per log to follow durability.
	OnDurable func(durableEnd int64)

	// Logger receives storage errors (a failed write or fsync, logged once per change of
	// state with the log's directory, not per request) and their end; nil = slog.Default().
	Logger *slog.Logger

	// recoveryPointBytes overrides defaultRecoveryPointBytes (tests).
	recoveryPointBytes int64
}

// Log is one partition's log. See the package comment for the locking rules.
type Log struct {
	dir       string
	now       func() time.Time
	cfg       atomic.Pointer[Config]
	files     *FileCache
	logger    *slog.Logger
	onDurable func(int64)

	maintMu  sync.Mutex // serializes retention, DeleteRecordsBefore, Compact
	appendMu sync.Mutex // serializes Append (and so roll); guards active's writer-side fields
	syncMu   sync.Mutex // serializes fsyncs, index-file writes and file closes

	mu       sync.RWMutex
	segs     []*segment // guarded by mu; sorted by base, last one is active
	start    int64      // guarded by mu: log start offset
	end      int64      // guarded by mu: next offset to assign
	closed   bool       // guarded by mu
	dirGen   uint64     // guarded by mu: bumped on every directory change
	dirSyncd uint64     // guarded by mu: dirGen covered by the last directory fsync

	failed     atomic.Pointer[error] // sticky write/fsync error
	writeFails atomic.Bool           // the last write failed (logged when this changes)

	// marked: the clean-shutdown marker Open found is still on disk, because nothing has
	// changed since. The first change removes it first (unmark); Close of a log still
	// marked writes nothing. markMu serializes the removal.
	marked atomic.Bool
	markMu sync.Mutex

	recovery Recovery // how Open found the log; written only by Open
	rpBytes  int64    // durable growth of the active segment between recovery points

	// pendingTrunc is the truncation Open found in progress (truncate.go); Open redoes it.
	pendingTrunc *truncIntent

	// Group commit. durable is the end offset of the fsynced prefix.
	durable atomic.Int64
	fmu     sync.Mutex
	fcond   *sync.Cond
	flush   flushState // guarded by flushers.mu
	// flushErr is the retryable error of the last flusher flush (nil if it succeeded),
	// returned to its waiters. Guarded by fmu.
	flushErr error
}

// Open opens (creating if needed) the log in dir and recovers it (see the package comment).
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, now: opts.Now, files: opts.Files, logger: opts.Logger, onDurable: opts.OnDurable}
	if l.now == nil {
		l.now = time.Now
	}
	if l.files == nil {
		l.files = DefaultFileCache()
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	l.rpBytes = opts.recoveryPointBytes
	if l.rpBytes <= 0 {
		l.rpBytes = defaultRecoveryPointBytes
	}
	l.fcond = sync.NewCond(&l.fmu)
	c := cfg.normalize()
	l.cfg.Store(&c)
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.durable.Store(l.end)
	if l.pendingTrunc != nil {
		if err := l.finishTruncate(*l.pendingTrunc); err != nil {
			l.closeFiles()
			return nil, err
		}
		l.pendingTrunc = nil
	}
	return l, nil
}

// recover loads the segments in l.dir. See invariant 2 in the package comment and
// recoverypoint.go.
func (l *Log) recover() error {
	names, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	logs := map[int64]bool{}
	for _, e := range names {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".cleaned"):
			// Half-written: the operation that wrote it never committed.
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
			continue
		}
		if base, ext, ok := parseSegmentFile(name); ok && ext == ".log" {
			bases = append(bases, base)
			logs[base] = true
		}
	}
	// Index files whose segment is gone (a crash during deletion).
	for _, e := range names {
		if base, ext, ok := parseSegmentFile(e.Name()); ok && ext != ".log" && !logs[base] {
			_ = os.Remove(filepath.Join(l.dir, e.Name()))
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })

	ckpt, haveCkpt, err := readCheckpoint(l.dir)
	if err != nil {
		return err
	}
	cfg := l.config()
	nowMs := l.now().UnixMilli()
	rp, haveRP := readRecoveryPoint(l.dir)
	marker, hadMarker, markerOK := readMarker(l.dir)
	if l.pendingTrunc, err = readTruncIntent(l.dir); err != nil {
		return err
	}
	// A truncation in progress: every segment is loaded as a closed one, without the
	// recovery point, and the truncation is redone (truncate.go).
	inTrunc := l.pendingTrunc != nil
	clean := false
	if markerOK && !inTrunc {
		if clean, err = l.openClean(bases, marker, rp, haveRP); err != nil {
			return err
		}
	}
	if hadMarker && !clean {
		// The marker does not describe these files. Remove it before recovery changes any
		// of them, so that it cannot come to match a half-recovered directory.
		if err := os.Remove(filepath.Join(l.dir, cleanShutdownName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := syncDir(l.dir); err != nil {
			return err
		}
	}
	l.recovery.Clean = clean
	if clean {
		l.recovery.RecoveryPoint = l.segs[len(l.segs)-1].rp.pos
	} else {
		expect := int64(-1) // first offset the next segment may hold
		for i, base := range bases {
			last := i == len(bases)-1
			if expect >= 0 && base < expect {
				return fmt.Errorf("log: %s: segment %d overlaps the previous segment (ends at %d)", l.dir, base, expect)
			}
			var srp *recoveryPoint
			if last && haveRP && rp.base == base && !inTrunc {
				srp = &rp
			}
			s, truncated, err := openSegment(l.dir, base, l.files, last && !inTrunc, srp, cfg.IndexIntervalBytes, nowMs, &l.recovery)
			if err != nil {
				return err
			}
			l.segs = append(l.segs, s)
			expect = s.next
			if truncated && !last {
				// Everything after a torn batch was never acknowledged (invariant 1).
				for _, b := range bases[i+1:] {
					if err := removeSegmentFiles(l.dir, b); err != nil {
						return err
					}
				}
				break
			}
		}
	}
	// The last segment is active: its indexes are in memory, and on disk only as far as
	// its recovery point describes it. A closed segment's .activeindex files are left over
	// from when it was active (its index files supersede them).
	for i, s := range l.segs {
		if i < len(l.segs)-1 {
			if err := removeActiveIndexes(l.dir, s.base); err != nil {
				return err
			}
			continue
		}
		_ = os.Remove(indexPath(l.dir, s.base))
		_ = os.Remove(timeIndexPath(l.dir, s.base))
		s.needIndex = false
	}
	for _, s := range l.segs[:max(len(l.segs)-1, 0)] {
		if !s.hasIndexFiles {
			s.addTimeEntry()
			s.needIndex = true
		}
	}
	if len(l.segs) == 0 {
		base := int64(0)
		if haveCkpt {
			base = ckpt
		}
		s, err := createSegment(l.dir, base, l.files, nowMs)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	l.end = l.segs[len(l.segs)-1].next
	l.start = l.segs[0].base
	if haveCkpt && ckpt > l.start {
		l.start = ckpt
	}
	if l.start > l.end {
		// The checkpoint is fsynced only after the data below it (invariant 3), so this
		// means the data was lost under us. Start over at the checkpoint, like Kafka's
		// truncateFullyAndStartAt, rather than lower the start offset.
		for _, s := range l.segs {
			s.close()
			if err := removeSegmentFiles(l.dir, s.base); err != nil {
				return err
			}
		}
		s, err := createSegment(l.dir, l.start, l.files, nowMs)
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		l.end = l.start
	}
	// Keep the recovery point only if it describes the active segment as loaded; a stale
	// one could otherwise come to name a later segment with the same base.
	a := l.segs[len(l.segs)-1]
	if err := trimActiveIndexes(l.dir, a); err != nil {
		return err
	}
	if a.rp.pos == 0 {
		if err := os.Remove(filepath.Join(l.dir, recoveryPointName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for _, s := range l.segs {
		s.durable = s.size
	}
	if clean {
		// The marker stays while nothing changes: the first change removes it (unmark),
		// so a crash before then finds files that still match it, and Close of a log that
		// was never changed writes nothing. Open itself writes nothing here, so a log
		// opens on a full disk, and the directory is as durable as the marker says.
		l.marked.Store(true)
		return nil
	}
	return syncDir(l.dir)
}

// unmark removes the clean-shutdown marker, durably, before the first change since a
// clean Open (see Log.marked). Callers hold maintMu or appendMu.
func (l *Log) unmark() error {
	if !l.marked.Load() {
		return nil
	}
	l.markMu.Lock()
	defer l.markMu.Unlock()
	if !l.marked.Load() {
		return nil
	}
	if err := os.Remove(filepath.Join(l.dir, cleanShutdownName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.marked.Store(false)
	return nil
}

// parseSegmentFile splits a segment file name (<20-digit base><ext>) into its base offset
// and extension; ok is false for any other file.
func parseSegmentFile(name string) (base int64, ext string, ok bool) {
	i := strings.IndexByte(name, '.')
	if i < 0 {
		return 0, "", false
	}
	switch ext = name[i:]; ext {
	case ".log", ".index", ".timeindex", ".activeindex", ".activetimeindex":
	default:
		return 0, "", false
	}
	base, err := strconv.ParseInt(name[:i], 10, 64)
	if err != nil || base < 0 {
		return 0, "", false
	}
	return base, ext, true
}

// config returns the current configuration.
func (l *Log) config() Config { return *l.cfg.Load() }

// SetConfig applies a dynamic topic configuration change; it takes effect at the next
// append, retention or compaction.
func (l *Log) SetConfig(cfg Config) {
	c := cfg.normalize()
	l.cfg.Store(&c)
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// StartOffset returns the log start offset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset returns the log end offset: the next offset Append assigns.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// DurableEnd returns the end offset of the fsynced prefix of the log.
func (l *Log) DurableEnd() int64 { return l.durable.Load() }

// Size returns the total bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NumSegments returns the number of segments, the active one included.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// Unchanged reports whether the log is as the last clean Close left it: Open found the
// clean-shutdown marker matching and nothing has changed since (no append, DeleteRecords,
// retention or compaction). Close of such a log writes nothing, and what the caller saved
// beside the log at that Close (the broker's producer-state snapshot) is still current.
func (l *Log) Unchanged() bool { return l.marked.Load() }

// err returns the sticky failure, if any.
func (l *Log) err() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) fail(err error) error {
	err = fmt.Errorf("log: %s: %w", l.dir, err)
	if l.failed.CompareAndSwap(nil, &err) {
		l.logger.Error("log failed: appends refused until it is reopened", "dir", l.dir, "err", err)
	}
	return l.err()
}

// writeFailed reports a write that failed without harm to the log (it was cut back to
// its last batch, and the next write may succeed: a full disk). It is logged once, when
// writes start failing, not per request.
func (l *Log) writeFailed(err error) error {
	if !l.writeFails.Swap(true) {
		l.logger.Error("log write failed", "dir", l.dir, "err", err)
	}
	return err
}

// writeOK notes a successful write, logging the end of a run of failures.
func (l *Log) writeOK() {
	if l.writeFails.Load() && l.writeFails.Swap(false) {
		l.logger.Info("log writes resumed", "dir", l.dir)
	}
}

// Close makes everything durable, stops the flusher and closes the files. Appends and
// reads after Close return ErrClosed. After a successful Close the log is marked as shut
// down cleanly, and the next Open reads none of its data (see recoverypoint.go).
func (l *Log) Close() error { return l.close(true) }

func (l *Log) close(markClean bool) error {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	err := l.syncAll()
	if err == nil && markClean && !l.marked.Load() {
		// Best effort: without the marker the next Open recovers, which is always safe;
		// nothing the caller relies on depends on it.
		_ = l.writeCleanShutdown()
	}
	l.shutdown()
	return err
}

// shutdown marks the log closed, stops the flusher, wakes waiters and closes the files.
// Callers hold maintMu and appendMu.
func (l *Log) shutdown() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.fmu.Lock()
	l.fcond.Broadcast()
	l.fmu.Unlock()
	// A flush in progress holds syncMu; any later one sees closed and touches nothing.
	l.syncMu.Lock()
	l.mu.Lock()
	l.closeFiles()
	l.mu.Unlock()
	l.syncMu.Unlock()
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.close()
	}
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	_ = l.close(false) // the data is going away: a failed final flush does not matter
	return os.RemoveAll(l.dir)
}
