package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// Compact applies the Compact cleanup policy to the closed segments (never the active
// one): for every key, only the record with the highest offset in the cleaned range
// survives; offsets never change. It is a no-op unless Config.Compact. The broker calls
// it periodically (Kafka's log cleaner) for each compacted log in turn, with one KeyMap.
//
// What is cleaned: the closed segments whose index files are written, up to the first
// segment younger than MinCompactionLagMs and below the first offset of any transaction
// whose marker is not in those segments (Kafka cleans only below the last stable offset).
//
// Rules, following Kafka's LogCleaner:
//   - Control batches (transaction markers) are kept. (Kafka drops a marker once its
//     transaction has no data left and delete.retention.ms passed; we keep them.)
//   - Data of aborted transactions is dropped; data of committed transactions is
//     compacted like plain data.
//   - A tombstone (null value) that is the latest for its key is kept while its segment's
//     largest timestamp is within DeleteRetentionMs of now, then dropped.
//   - The last data batch of each producer id in the cleaned range is kept whole, so
//     that replaying the log (Scan) still yields every producer's last sequence and epoch.
//   - A batch whose records all survive is kept byte for byte; one that keeps some is
//     rewritten with the same header (base offset, last offset delta, producer fields,
//     codec) and the surviving records with their original offset deltas; one that
//     keeps none is dropped.
//
// Crash safety, per segment X: the cleaned data and indexes are written to X.*.cleaned
// and fsynced; then X's index files are removed, X.log.cleaned is renamed over X.log
// (atomic), the cleaned indexes are renamed into place, and the directory is fsynced. A
// crash at any point leaves either the old or the new X.log; leftover .cleaned files are
// removed at Open and a missing index is rebuilt by scanning. A cleaned segment that is
// left empty is deleted, except the first (it holds the log start offset).
//
// Memory: keys is bounded (KeyMap, log.cleaner.dedupe.buffer.size). When the keys of the
// cleaned range do not all fit, compaction runs in passes, as Kafka's cleaner does over
// successive runs: a pass maps keys from where the last one stopped until the map is full
// (stopping at a record, possibly mid-segment), then cleans every segment holding offsets
// below that point with it (a record past it is kept: its key is either not in the map or
// mapped to an older offset); the next pass goes on from there. Each pass re-reads the
// segments already cleaned, so the cost grows with the number of passes, not the memory.
// Compact holds keys for its duration.
func (l *Log) Compact(keys *KeyMap) error {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	cfg := l.config()
	if !cfg.Compact {
		return nil
	}
	keys.mu.Lock()
	defer keys.mu.Unlock()
	keys.passes = 0
	nowMs := l.now().UnixMilli()
	segs, err := l.compactable(cfg, nowMs, math.MaxInt64)
	if err != nil || len(segs) == 0 {
		return err
	}

	// Pass 1: transaction outcomes and each producer's last batch, from the headers (and
	// the markers).
	st := cleanState{
		committed: map[int64]bool{},
		pending:   map[int64][]int64{},
		lastOfPid: map[int64]int64{},
	}
	var records int64 // data records in the range: the most keys a pass can meet
	count := func(b []byte) error {
		if attributes(b)&batch.AttrControl == 0 {
			records += int64(int32(binary.BigEndian.Uint32(b[hdrNumRecords:])))
		}
		return st.observe(b)
	}
	for _, s := range segs {
		if err := l.eachBatch(s, true, count); err != nil {
			return err
		}
	}
	cut := int64(math.MaxInt64)
	for _, bases := range st.pending {
		cut = min(cut, bases[0])
	}
	for len(segs) > 0 && segs[len(segs)-1].next > cut {
		segs = segs[:len(segs)-1]
	}
	if len(segs) == 0 {
		return nil
	}
	lastBase, end := segs[len(segs)-1].base, segs[len(segs)-1].next

	for from := segs[0].base; from < end; {
		// Map the keys from `from` on, as far as the map holds them.
		keys.reset(records)
		keys.passes++
		mapped, err := l.mapKeys(segs, from, end, keys, &st)
		if err != nil {
			return err
		}
		// Rewrite each segment below mapped that changes.
		for i, s := range segs {
			if s.base >= mapped {
				break
			}
			tombstonesExpire := s.largestTimestamp() < nowMs-cfg.DeleteRetentionMs
			if err := l.cleanSegment(s, i == 0 && s == l.firstSegment(), &st, keys, tombstonesExpire, cfg, nowMs); err != nil {
				return err
			}
		}
		from = mapped
		if from < end { // cleaning replaced or dropped segments: take the current ones
			if segs, err = l.compactable(cfg, nowMs, lastBase); err != nil || len(segs) == 0 {
				return err
			}
		}
	}
	return nil
}

// compactable returns the closed segments compaction may clean, in order, up to the one
// based at lastBase: those whose index files are written, up to the first younger than
// MinCompactionLagMs.
func (l *Log) compactable(cfg Config, nowMs, lastBase int64) ([]*segment, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	var segs []*segment
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.base > lastBase || s.needIndex || cfg.MinCompactionLagMs > 0 && s.largestTimestamp() > nowMs-cfg.MinCompactionLagMs {
			break
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// errKeyMapFull stops mapKeys' walk once the map takes no new key.
var errKeyMapFull = errors.New("log: key map full")

// mapKeys fills keys with the latest offset of every key of the records in [from, end),
// in order, until the map is full; it returns the offset mapping stopped at (end when
// every record fit).
func (l *Log) mapKeys(segs []*segment, from, end int64, keys *KeyMap, st *cleanState) (int64, error) {
	stop := end
	for _, s := range segs {
		if s.next <= from {
			continue
		}
		err := l.eachBatch(s, false, func(b []byte) error {
			if lastOffset(b) < from || st.skip(b) {
				return nil
			}
			h, recs, err := decode(b)
			if err != nil {
				return err
			}
			for _, r := range recs {
				off := h.FirstOffset + int64(r.OffsetDelta)
				if r.Key == nil || off < from {
					continue
				}
				if !keys.put(r.Key, off) {
					stop = off
					return errKeyMapFull
				}
			}
			return nil
		})
		if errors.Is(err, errKeyMapFull) {
			return stop, nil
		} else if err != nil {
			return 0, err
		}
	}
	return stop, nil
}

func (l *Log) firstSegment() *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[0]
}

// cleanState is what pass 1 learns about transactions and producers.
type cleanState struct {
	committed map[int64]bool    // base offset of a transactional data batch -> committed
	pending   map[int64][]int64 // producer id -> its open transaction's data batch bases
	lastOfPid map[int64]int64   // producer id -> base offset of its last data batch
}

// observe is pass 1's per-batch step. It sees whole batches only for control batches.
func (st *cleanState) observe(b []byte) error {
	pid, attrs, base := producerID(b), attributes(b), batch.BaseOffset(b)
	if attrs&batch.AttrControl != 0 {
		h, err := parseStored(b)
		if err != nil {
			return fmt.Errorf("log: stored control batch at %d: %w", base, err)
		}
		m, err := batch.ParseMarker(&h)
		if errors.Is(err, batch.ErrNotMarker) {
			return nil
		} else if err != nil {
			return fmt.Errorf("log: stored control batch at %d: %w", base, err)
		}
		for _, p := range st.pending[pid] {
			st.committed[p] = m.Commit
		}
		delete(st.pending, pid)
		return nil
	}
	if pid >= 0 {
		st.lastOfPid[pid] = base
	}
	if attrs&batch.AttrTransactional != 0 {
		st.pending[pid] = append(st.pending[pid], base)
	}
	return nil
}

// skip reports whether a batch takes no part in the key map: control batches and
// aborted transactional data.
func (st *cleanState) skip(b []byte) bool {
	attrs := attributes(b)
	if attrs&batch.AttrControl != 0 {
		return true
	}
	return attrs&batch.AttrTransactional != 0 && !st.committed[batch.BaseOffset(b)]
}

// eachBatch calls fn for every batch of a closed segment, in order. With headersOnly, fn
// gets only the first batch.HeaderSize bytes of data batches (control batches whole).
func (l *Log) eachBatch(s *segment, headersOnly bool, fn func(b []byte) error) error {
	fh, err := s.file.acquire()
	if err != nil {
		return err
	}
	defer fh.release()
	if !headersOnly {
		r := batchReader{f: fh.f, end: s.size}
		for {
			b, err := r.next()
			if err == io.EOF {
				return nil
			} else if err != nil {
				return fmt.Errorf("log: segment %d: %w", s.base, err)
			}
			if err := fn(b); err != nil {
				return err
			}
		}
	}
	var h [batch.HeaderSize]byte
	for pos := int64(0); pos < s.size; {
		if _, err := fh.f.ReadAt(h[:], pos); err != nil {
			return err
		}
		n := batchSize(h[:])
		b := h[:]
		if attributes(h[:])&batch.AttrControl != 0 {
			b = make([]byte, n)
			if _, err := fh.f.ReadAt(b, pos); err != nil {
				return err
			}
		}
		if err := fn(b); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

func decode(b []byte) (kmsg.RecordBatch, []kmsg.Record, error) {
	h, err := parseStored(b)
	if err != nil {
		return h, nil, fmt.Errorf("log: stored batch at %d: %w", batch.BaseOffset(b), err)
	}
	recs, err := batch.DecodeRecords(&h, batch.DefaultMaxDecompressedBytes)
	if err != nil {
		return h, nil, fmt.Errorf("log: stored batch at %d: %w", h.FirstOffset, err)
	}
	return h, recs, nil
}

// filter returns the batch to keep in place of b: b itself, a rewritten batch, or nil.
func (st *cleanState) filter(b []byte, keys *KeyMap, tombstonesExpire bool) ([]byte, error) {
	attrs, base := attributes(b), batch.BaseOffset(b)
	if attrs&batch.AttrControl != 0 {
		return b, nil
	}
	isLast := producerID(b) >= 0 && st.lastOfPid[producerID(b)] == base
	if attrs&batch.AttrTransactional != 0 && !st.committed[base] {
		if isLast {
			return b, nil
		}
		return nil, nil // aborted
	}
	h, recs, err := decode(b)
	if err != nil {
		return nil, err
	}
	kept := recs[:0:0]
	for _, r := range recs {
		off := h.FirstOffset + int64(r.OffsetDelta)
		if r.Key != nil && keys.get(r.Key) > off {
			continue // superseded
		}
		if r.Value == nil && tombstonesExpire {
			continue
		}
		kept = append(kept, r)
	}
	switch {
	case len(kept) == len(recs) || isLast:
		return b, nil
	case len(kept) == 0:
		return nil, nil
	}
	return reencode(h, kept)
}

// reencode builds a batch with header h (base offset, last offset delta, producer fields,
// codec kept) holding records with their original offset deltas.
func reencode(h kmsg.RecordBatch, recs []kmsg.Record) ([]byte, error) {
	var raw, scratch []byte
	maxDelta := int64(math.MinInt64)
	for _, r := range recs {
		r.Length = 0
		scratch = r.AppendTo(scratch[:0]) // a one-byte zero length, then the body
		raw = binary.AppendVarint(raw, int64(len(scratch)-1))
		raw = append(raw, scratch[1:]...)
		maxDelta = max(maxDelta, r.TimestampDelta64)
	}
	payload := raw
	if codec := int8(h.Attributes & batch.AttrCompressionMask); codec != batch.CodecNone {
		var err error
		if payload, err = compress.Compress(codec, nil, raw); err != nil {
			return nil, err
		}
	}
	h.Records = payload
	h.NumRecords = int32(len(recs))
	h.Length = int32(batch.HeaderSize - batch.LengthPrefix + len(payload))
	if h.Attributes&batch.AttrTimestampType == 0 {
		h.MaxTimestamp = h.FirstTimestamp + maxDelta
	}
	b := h.AppendTo(nil)
	batch.UpdateCRC(b)
	return b, nil
}

// cleanSegment rewrites one closed segment and swaps it in (see Compact). It does nothing
// if no batch changes.
func (l *Log) cleanSegment(s *segment, first bool, st *cleanState, keys *KeyMap, tombstonesExpire bool, cfg Config, nowMs int64) error {
	var out [][]byte
	changed := false
	err := l.eachBatch(s, false, func(b []byte) error {
		nb, err := st.filter(b, keys, tombstonesExpire)
		if err != nil {
			return err
		}
		if len(nb) != len(b) || nb == nil {
			changed = true
		}
		if nb != nil {
			out = append(out, append([]byte(nil), nb...))
		}
		return nil
	})
	if err != nil || !changed {
		return err
	}
	if err := l.unmark(); err != nil {
		return err
	}
	if len(out) == 0 && !first {
		return l.dropSegment(s)
	}

	// Write X.log.cleaned and its indexes, all fsynced.
	cleaned := logPath(l.dir, s.base) + ".cleaned"
	f, err := os.OpenFile(cleaned, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	// ns names the segment's final path: its descriptor is cached now (this file, renamed
	// there below), and ns is not reachable (so not reopened by name) before the rename.
	ns := newSegment(l.dir, s.base, l.files, nowMs)
	fh, err := ns.file.attach(f)
	if err != nil {
		return err
	}
	defer fh.release()
	fail := func(err error) error {
		ns.close()
		_ = os.Remove(cleaned)
		return err
	}
	if len(out) > 0 {
		if err := pwritevFull(int(f.Fd()), out, 0); err != nil {
			return fail(err)
		}
	}
	var pos int64
	for _, b := range out {
		ns.track(pos, batch.BaseOffset(b), lastOffset(b)+1, int64(len(b)), maxTimestamp(b), batchCRC(b), int64(cfg.IndexIntervalBytes), nowMs)
		pos += int64(len(b))
	}
	ns.addTimeEntry()
	ns.durable = ns.size
	if len(out) == 0 {
		// An empty segment's retention time is its file's mtime: keep the old one's.
		at := time.UnixMilli(s.largestTimestamp())
		if err := os.Chtimes(cleaned, at, at); err != nil {
			return fail(err)
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fail(err)
	}
	ib, tb := encodeIndexes(ns)
	for _, w := range []struct {
		path string
		data []byte
	}{{indexPath(l.dir, s.base) + ".cleaned", ib}, {timeIndexPath(l.dir, s.base) + ".cleaned", tb}} {
		if err := writeFileAtomic(w.path, w.data); err != nil {
			return fail(err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		return fail(err)
	}

	// Swap. syncMu keeps the flusher (which writes index files) out of the way.
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	for _, p := range []string{indexPath(l.dir, s.base), timeIndexPath(l.dir, s.base)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return l.fail(err)
		}
	}
	// The rename and the swap happen together under mu: s opens its file by name when it
	// is not cached, and must never find the cleaned file there.
	l.mu.Lock()
	if err := os.Rename(cleaned, logPath(l.dir, s.base)); err != nil {
		l.mu.Unlock()
		ns.close()
		return l.fail(err)
	}
	for i := range l.segs {
		if l.segs[i] == s {
			l.segs[i] = ns
		}
	}
	s.deleted = true
	s.close()
	l.mu.Unlock()
	for _, p := range []string{indexPath(l.dir, s.base), timeIndexPath(l.dir, s.base)} {
		if err := os.Rename(p+".cleaned", p); err != nil {
			return l.fail(err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		return l.fail(err)
	}
	return nil
}

// dropSegment removes a closed segment that compaction left empty (not the first one).
func (l *Log) dropSegment(s *segment) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	for i := range l.segs {
		if l.segs[i] == s {
			l.segs = append(l.segs[:i:i], l.segs[i+1:]...)
			break
		}
	}
	s.deleted = true
	s.close()
	l.dirGen++
	l.mu.Unlock()
	if err := removeSegmentFiles(l.dir, s.base); err != nil {
		return l.fail(err)
	}
	return syncDir(l.dir)
}
