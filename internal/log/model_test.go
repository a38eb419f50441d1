package log

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/testclock"
	"pgregory.net/rapid"
)

// model is the obviously-correct log: every batch ever appended (below the start offset
// too, since reads may return them), in order, and the start offset.
type model struct {
	batches [][]byte
	start   int64
	end     int64
}

func (m *model) read(offset int64, maxBytes int32, maxOffset int64) ([]byte, error) {
	if offset < m.start || offset > m.end {
		return nil, ErrOffsetOutOfRange
	}
	if offset == m.end || offset >= maxOffset {
		return nil, nil
	}
	var out []byte
	for _, b := range m.batches {
		if lastOffset(b) < offset {
			continue
		}
		if batch.BaseOffset(b) >= maxOffset || len(out) > 0 && len(out)+len(b) > int(maxBytes) {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

// live returns the batches a Scan from the start offset must return.
func (m *model) live() [][]byte {
	var out [][]byte
	for _, b := range m.batches {
		if lastOffset(b) >= m.start {
			out = append(out, b)
		}
	}
	return out
}

// modelRun drives one random history against a real log and the model.
type modelRun struct {
	dir     string
	cfg     Config
	rpBytes int64      // Options.recoveryPointBytes
	files   *FileCache // Options.Files: often tiny, so that files are closed and reopened all the time
	clk     *testclock.Clock
	l       *Log
	m       model
	rng     *rand.Rand
	held    []heldRead // zero-copy reads not released yet
	// oldRP is a recovery-point file written since the last Open: a crash may lose the
	// renames that replaced it, and put it back.
	oldRP []byte
}

// heldRead is a ReadChunks result kept across later operations, with what the model said
// the bytes were at the time of the read.
type heldRead struct {
	chunks []Chunk
	want   []byte
	desc   string
}

func (r *modelRun) open(t *rapid.T) {
	l, err := Open(r.dir, r.cfg, Options{Now: r.clk.Now, Files: r.files, recoveryPointBytes: r.rpBytes})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	r.l = l
	r.oldRP = nil
}

// noteRP remembers the current recovery-point file, sometimes.
func (r *modelRun) noteRP() {
	if r.rng.Intn(3) == 0 {
		if b, err := os.ReadFile(filepath.Join(r.dir, recoveryPointName)); err == nil {
			r.oldRP = b
		}
	}
}

// loseRecoveryPoint applies a crash to the recovery-point files and the clean-shutdown
// marker, which are never fsynced: the last renames may be lost (an older recovery point
// is back, or none; no marker), a file may be cut short, and appends to the .activeindex
// files may be missing.
func (r *modelRun) loseRecoveryPoint(t fataler) {
	t.Helper()
	marker := filepath.Join(r.dir, cleanShutdownName)
	switch r.rng.Intn(4) {
	case 0:
		_ = os.Remove(marker)
	case 1:
		if b, err := os.ReadFile(marker); err == nil {
			_ = os.WriteFile(marker, b[:r.rng.Intn(len(b))], 0o644)
		}
	}
	path := filepath.Join(r.dir, recoveryPointName)
	switch r.rng.Intn(6) {
	case 0:
		if r.oldRP != nil {
			if err := os.WriteFile(path, r.oldRP, 0o644); err != nil {
				t.Fatalf("%v", err)
			}
		}
	case 1:
		_ = os.Remove(path)
	case 2:
		if b, err := os.ReadFile(path); err == nil {
			_ = os.WriteFile(path, b[:r.rng.Intn(len(b))], 0o644)
		}
	}
	if r.rng.Intn(3) == 0 {
		names, _ := filepath.Glob(filepath.Join(r.dir, "*.active*index"))
		for _, n := range names {
			if fi, err := os.Stat(n); err == nil && fi.Size() > 0 {
				_ = os.Truncate(n, r.rng.Int63n(fi.Size()))
			}
		}
	}
}

// check compares the whole observable state.
func (r *modelRun) check(t *rapid.T) {
	if s, e := r.l.StartOffset(), r.l.EndOffset(); s != r.m.start || e != r.m.end {
		t.Fatalf("start/end %d/%d, model %d/%d", s, e, r.m.start, r.m.end)
	}
	var got [][]byte
	if err := r.l.Scan(0, func(b []byte) error {
		got = append(got, append([]byte(nil), b...))
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	want := r.m.live()
	if len(got) != len(want) {
		t.Fatalf("Scan: %d batches, model %d", len(got), len(want))
	}
	if h, w := scanHeadersT(t, r.l, 0), wantHeaders(t, want); !reflect.DeepEqual(h, w) {
		t.Fatalf("ScanHeaders: %d headers, model %d (or they differ)", len(h), len(w))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("Scan: batch %d (base %d) differs from the model (base %d)", i, batch.BaseOffset(got[i]), batch.BaseOffset(want[i]))
		}
	}
}

func (r *modelRun) appendOp(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "batches")
	var bs [][]byte
	var total int64
	for i := 0; i < n; i++ {
		recs := rapid.IntRange(1, 4).Draw(t, "records")
		size := rapid.IntRange(0, 150).Draw(t, "valueBytes")
		ts := r.clk.Ms() - int64(rapid.IntRange(0, 2000).Draw(t, "tsSkew"))
		b := valueBatch(recs, size, ts)
		bs = append(bs, b)
		total += int64(len(b))
	}
	first, last, err := r.l.Append(bs)
	if total > r.cfg.SegmentBytes {
		if !errors.Is(err, ErrRecordListTooLarge) {
			t.Fatalf("append of %d bytes into %d-byte segments: %v", total, r.cfg.SegmentBytes, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if first != r.m.end {
		t.Fatalf("Append first %d, model end %d", first, r.m.end)
	}
	for _, b := range bs {
		r.m.batches = append(r.m.batches, append([]byte(nil), b...))
		r.m.end = lastOffset(b) + 1
	}
	if last != r.m.end-1 {
		t.Fatalf("Append last %d, model %d", last, r.m.end-1)
	}
}

func (r *modelRun) readOp(t *rapid.T) {
	offset := rapid.Int64Range(r.m.start-2, r.m.end+2).Draw(t, "offset")
	maxBytes := int32(rapid.IntRange(0, 3000).Draw(t, "maxBytes"))
	maxOffset := int64(math.MaxInt64)
	if rapid.Bool().Draw(t, "limitOffset") {
		maxOffset = rapid.Int64Range(r.m.start, r.m.end+1).Draw(t, "maxOffset")
	}
	got, err := r.l.Read(offset, maxBytes, maxOffset)
	want, werr := r.m.read(offset, maxBytes, maxOffset)
	if !errors.Is(err, werr) || !bytes.Equal(got, want) {
		t.Fatalf("Read(%d, %d, %d) = %d bytes, %v; model %d bytes, %v", offset, maxBytes, maxOffset, len(got), err, len(want), werr)
	}
}

// holdOp reads without copying and keeps the chunks: retention, compaction, DeleteRecords
// and reopening may remove their segments meanwhile, and the bytes must stay what the read
// returned (releaseOp checks).
func (r *modelRun) holdOp(t *rapid.T) {
	offset := rapid.Int64Range(r.m.start-1, r.m.end+1).Draw(t, "offset")
	maxBytes := int32(rapid.IntRange(0, 3000).Draw(t, "maxBytes"))
	chunks, n, err := r.l.ReadChunks(nil, offset, maxBytes, math.MaxInt64)
	want, werr := r.m.read(offset, maxBytes, math.MaxInt64)
	if !errors.Is(err, werr) || n != int64(len(want)) || sumLen(chunks) != n {
		t.Fatalf("ReadChunks(%d, %d) = %d bytes in %d chunks, %v; model %d bytes, %v", offset, maxBytes, n, len(chunks), err, len(want), werr)
	}
	r.held = append(r.held, heldRead{chunks: chunks, want: want, desc: fmt.Sprintf("ReadChunks(%d, %d)", offset, maxBytes)})
}

func (r *modelRun) releaseOp(t *rapid.T) {
	if len(r.held) == 0 {
		return
	}
	i := rapid.IntRange(0, len(r.held)-1).Draw(t, "held")
	r.releaseHeld(t, i)
}

// releaseHeld checks that held read i still has the bytes it had, then releases it.
func (r *modelRun) releaseHeld(t *rapid.T, i int) {
	h := r.held[i]
	r.held = append(r.held[:i], r.held[i+1:]...)
	got := readChunksT(t, h.chunks)
	ReleaseChunks(h.chunks)
	if !bytes.Equal(got, h.want) {
		t.Fatalf("%s: the held bytes changed (%d bytes, want %d)", h.desc, len(got), len(h.want))
	}
}

func (r *modelRun) releaseAll(t *rapid.T) {
	for len(r.held) > 0 {
		r.releaseHeld(t, 0)
	}
}

func sumLen(cs []Chunk) int64 {
	var n int64
	for _, c := range cs {
		n += c.Len
	}
	return n
}

// readChunksT copies the bytes of chunks (with pread, as a copying writer would).
func readChunksT(t fataler, cs []Chunk) []byte {
	t.Helper()
	var out []byte
	for _, c := range cs {
		b := make([]byte, c.Len)
		if _, err := c.File().ReadAt(b, c.Off); err != nil {
			t.Fatalf("reading a held chunk: %v", err)
		}
		out = append(out, b...)
	}
	return out
}

func (r *modelRun) deleteRecordsOp(t *rapid.T) {
	offset := rapid.Int64Range(r.m.start-1, r.m.end+1).Draw(t, "deleteBefore")
	got, err := r.l.DeleteRecordsBefore(offset)
	if offset > r.m.end || offset < 0 {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("DeleteRecordsBefore(%d) beyond end %d: %v", offset, r.m.end, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("DeleteRecordsBefore: %v", err)
	}
	r.m.start = max(r.m.start, offset)
	if got != r.m.start {
		t.Fatalf("DeleteRecordsBefore(%d) = %d, model %d", offset, got, r.m.start)
	}
}

// retentionOp: which segments go depends on the segmentation, which the model does not
// know; it checks the rules instead: the start offset only rises, never past the end,
// everything from it on is intact, and a size limit is respected as Kafka does.
func (r *modelRun) retentionOp(t *rapid.T) {
	cfg := r.cfg
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	if rapid.Bool().Draw(t, "byTime") {
		cfg.RetentionMs = int64(rapid.IntRange(0, 5000).Draw(t, "retentionMs"))
	} else {
		cfg.RetentionBytes = int64(rapid.IntRange(0, 6000).Draw(t, "retentionBytes"))
	}
	r.l.SetConfig(cfg)
	before := r.l.Size()
	_, err := r.l.EnforceRetention()
	r.l.SetConfig(r.cfg)
	if err != nil {
		t.Fatalf("EnforceRetention: %v", err)
	}
	start := r.l.StartOffset()
	if start < r.m.start || start > r.m.end {
		t.Fatalf("retention moved start %d -> %d (end %d)", r.m.start, start, r.m.end)
	}
	// Segments wholly below the start offset go whatever the size; only those may take
	// the log below retention.bytes, and they do not move the start offset.
	if cfg.RetentionBytes >= 0 && start > r.m.start && r.l.Size() < cfg.RetentionBytes {
		t.Fatalf("size retention went below the limit: %d -> %d < %d", before, r.l.Size(), cfg.RetentionBytes)
	}
	if r.l.NumSegments() < 1 {
		t.Fatalf("no segments left")
	}
	r.m.start = start
	// Whole segments went: the batches from the new start on are all still there.
	r.check(t)
}

func (r *modelRun) reopenOp(t *rapid.T) {
	r.reopenClean(t)
	r.check(t)
}

// reopenClean closes the log and opens it again, which must be a clean start reading
// nothing.
func (r *modelRun) reopenClean(t *rapid.T) {
	if err := r.l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r.open(t)
	if rec := r.l.Recovery(); !rec.Clean || rec.ScannedBytes != 0 {
		t.Fatalf("reopen after Close: %+v, want a clean start reading nothing", rec)
	}
}

// cleanCrashOp: a clean start, then a crash before anything is written. Nothing changed,
// so the marker still matches and the next Open is clean again; after the first write
// it is gone, and the next crash is recovered.
func (r *modelRun) cleanCrashOp(t *rapid.T) {
	r.releaseAll(t)
	r.reopenClean(t)
	st := r.l.crash()
	if st.durableEnd != r.m.end {
		t.Fatalf("durable end %d after a clean start, end %d", st.durableEnd, r.m.end)
	}
	r.open(t)
	if rec := r.l.Recovery(); !rec.Clean || rec.ScannedBytes != 0 {
		t.Fatalf("open after a crash that followed a clean start: %+v", rec)
	}
	r.check(t)
}

func (r *modelRun) crashOp(t *rapid.T) {
	// A crash ends the process and every read in it; the simulated one below rewrites
	// files in place, which no live broker does.
	r.releaseAll(t)
	marked := r.l.marked.Load() // unchanged since a clean Open: the marker still holds
	st := r.l.crash()
	loseUnsynced(t, r.dir, st, r.rng)
	r.loseRecoveryPoint(t)
	r.open(t)
	// A crash after a change is never taken for a clean shutdown. Before any change the
	// marker still matches, unless the crash damaged the recovery point it relies on.
	if r.l.Recovery().Clean && !marked {
		t.Fatalf("a crash after a change left a clean-shutdown marker")
	}
	modelCrashes.Add(1)
	if r.l.Recovery().RecoveryPoint > 0 {
		modelCrashesFromRP.Add(1)
	}
	end := r.l.EndOffset()
	if end < st.durableEnd || end > r.m.end {
		t.Fatalf("after crash end %d; durable %d, appended up to %d", end, st.durableEnd, r.m.end)
	}
	// Cut the model back to what survived; the survivors must be exactly its prefix.
	for len(r.m.batches) > 0 && lastOffset(r.m.batches[len(r.m.batches)-1]) >= end {
		r.m.batches = r.m.batches[:len(r.m.batches)-1]
	}
	if n := len(r.m.batches); n > 0 && lastOffset(r.m.batches[n-1])+1 != end {
		t.Fatalf("after crash end %d is not a batch boundary of the model", end)
	}
	r.m.end = end
	r.m.start = min(r.m.start, end)
	if s := r.l.StartOffset(); s != r.m.start {
		// Retention may have removed the segment holding the old start; a crash cannot
		// bring it back below the durable start.
		if s < r.m.start {
			t.Fatalf("start offset fell from %d to %d in a crash", r.m.start, s)
		}
		r.m.start = s
	}
	r.check(t)
}

// compactOp: which segments are cleaned depends on the segmentation, so it checks the
// rules: surviving records are a subsequence of the old ones (same offsets, keys and
// values), the latest record of every key survives, offsets do not move. The model then
// takes the log's batches.
func (r *modelRun) compactOp(t *rapid.T) {
	if rapid.Bool().Draw(t, "syncFirst") {
		if err := r.l.Sync(); err != nil { // writes closed segments' indexes: cleanable
			t.Fatalf("Sync: %v", err)
		}
	}
	before := modelRecords(t, r.m.live())
	cfg := r.cfg
	cfg.Compact = true
	r.l.SetConfig(cfg)
	// A map of a few slots makes most compactions take several passes.
	keys, err := NewKeyMap(int64(rapid.IntRange(2, 40).Draw(t, "keyMapSlots")) * keySlotBytes)
	if err != nil {
		t.Fatal(err)
	}
	err = r.l.Compact(keys)
	r.l.SetConfig(r.cfg)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	var got [][]byte
	if err := r.l.Scan(0, func(b []byte) error {
		got = append(got, append([]byte(nil), b...))
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	after := modelRecords(t, got)
	latest := map[string]int64{}
	for _, k := range before {
		latest[k.key] = k.offset
	}
	j := 0
	for _, k := range after {
		for j < len(before) && before[j] != k {
			if latest[before[j].key] == before[j].offset {
				t.Fatalf("compaction removed the latest record of %q at %d", before[j].key, before[j].offset)
			}
			j++
		}
		if j == len(before) {
			t.Fatalf("compaction produced a record that was not there: %+v", k)
		}
		j++
	}
	for ; j < len(before); j++ {
		if latest[before[j].key] == before[j].offset {
			t.Fatalf("compaction removed the latest record of %q at %d", before[j].key, before[j].offset)
		}
	}
	r.m.batches = got
	r.check(t)
}

func modelRecords(t *rapid.T, bs [][]byte) []keyed {
	var out []keyed
	for _, b := range bs {
		h, recs, err := decode(b)
		if err != nil {
			t.Fatalf("%v", err)
		}
		for _, rec := range recs {
			out = append(out, keyed{offset: h.FirstOffset + int64(rec.OffsetDelta), key: string(rec.Key), value: string(rec.Value)})
		}
	}
	return out
}

func (r *modelRun) syncOp(t *rapid.T) {
	if rapid.Bool().Draw(t, "viaWait") {
		if err := r.l.WaitDurable(r.m.end); err != nil {
			t.Fatalf("WaitDurable: %v", err)
		}
	} else if err := r.l.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if d := r.l.DurableEnd(); d != r.m.end {
		t.Fatalf("DurableEnd %d after sync, end %d", d, r.m.end)
	}
	r.noteRP()
}

// Crash reopens in TestModel, and those that started from a recovery point; files the
// descriptor cache closed.
var modelCrashes, modelCrashesFromRP, modelEvictions atomic.Int64

func TestModel(t *testing.T) {
	root := memTempDir(t)
	runs := 0
	rapid.Check(t, func(t *rapid.T) {
		runs++
		dir, err := os.MkdirTemp(root, fmt.Sprintf("run%d-", runs))
		if err != nil {
			t.Fatalf("%v", err)
		}
		cfg := DefaultConfig()
		cfg.SegmentBytes = int64(rapid.IntRange(500, 4000).Draw(t, "segmentBytes"))
		cfg.IndexIntervalBytes = int32(rapid.IntRange(1, 800).Draw(t, "indexInterval"))
		cfg.SegmentMs = int64(rapid.SampledFrom([]int{0, 500, 3000}).Draw(t, "segmentMs"))
		// Recovery points: the default (in effect only at Close), or often.
		rpBytes := int64(rapid.SampledFrom([]int{0, 1, 300, 2000}).Draw(t, "recoveryPointBytes"))
		// Descriptor cache: one file (every read of an older segment evicts the active
		// one, and held chunks keep evicted files open), a few, or plenty.
		files := NewFileCache(rapid.SampledFrom([]int{1, 2, 3, 1000}).Draw(t, "openFiles"))
		r := &modelRun{dir: dir, cfg: cfg, rpBytes: rpBytes, files: files, clk: testclock.New(), rng: rand.New(rand.NewSource(rapid.Int64().Draw(t, "crashSeed")))}
		r.open(t)
		t.Cleanup(func() {
			r.releaseAll(t)
			r.l.Close()
			os.RemoveAll(dir)
			st := files.Stats()
			if st.Open != 0 || st.Cached != 0 {
				t.Fatalf("descriptors left open after Close with nothing held: %+v", st)
			}
			modelEvictions.Add(st.Evictions)
		})
		t.Repeat(map[string]func(*rapid.T){
			"append":        r.appendOp,
			"append2":       r.appendOp,
			"read":          r.readOp,
			"hold":          r.holdOp,
			"release":       r.releaseOp,
			"deleteRecords": r.deleteRecordsOp,
			"retention":     r.retentionOp,
			"reopen":        r.reopenOp,
			"crash":         r.crashOp,
			"cleanCrash":    r.cleanCrashOp,
			"sync":          r.syncOp,
			"compact":       r.compactOp,
			"tick": func(t *rapid.T) {
				r.clk.Advance(time.Duration(rapid.IntRange(1, 1500).Draw(t, "ms")) * time.Millisecond)
			},
			"": func(t *rapid.T) { // checked after every step
				if s, e := r.l.StartOffset(), r.l.EndOffset(); s != r.m.start || e != r.m.end {
					t.Fatalf("start/end %d/%d, model %d/%d", s, e, r.m.start, r.m.end)
				}
				// Open descriptors: the cached ones plus at most one per held chunk and
				// one for a flush running in the background (kicked by a roll).
				st := files.Stats()
				held := 0
				for _, h := range r.held {
					held += len(h.chunks)
				}
				if st.Cached > st.Limit || st.Open > int64(st.Cached+held+1) {
					t.Fatalf("descriptors %+v with %d chunks held", st, held)
				}
			},
		})
	})
	// Both recovery paths ran: from a recovery point, and without one.
	if n, rp := modelCrashes.Load(), modelCrashesFromRP.Load(); !t.Failed() && (rp == 0 || rp == n) {
		t.Fatalf("%d crash recoveries, %d from a recovery point: want both kinds", n, rp)
	}
	if !t.Failed() && modelEvictions.Load() == 0 {
		t.Fatalf("the descriptor cache never closed a file: lazy reopening was not exercised")
	}
	t.Logf("%d crash recoveries (%d from a recovery point), %d descriptor evictions", modelCrashes.Load(), modelCrashesFromRP.Load(), modelEvictions.Load())
}
