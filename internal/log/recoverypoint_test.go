package log

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/exactq/exactq/internal/batch"
)

// batchPositions lists the stored batches of a segment file: position and size.
func batchPositions(t *testing.T, path string) (pos, size []int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for p := int64(0); p < int64(len(data)); {
		n := batchSize(data[p:])
		pos, size = append(pos, p), append(size, n)
		p += n
	}
	return pos, size
}

func flipAt(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func segmentBases(t *testing.T, l *Log) []int64 {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []int64
	for _, s := range l.segs {
		out = append(out, s.base)
	}
	return out
}

// checkSame requires the log to hold exactly want and to read every offset correctly.
func checkSame(t *testing.T, l *Log, want [][]byte, what string) {
	t.Helper()
	requireBatches(t, what, scanAll(t, l), want)
	for off := l.StartOffset(); off < l.EndOffset(); off += 2 {
		b, err := l.Read(off, 1, math.MaxInt64)
		if err != nil || len(b) < batch.HeaderSize || batch.BaseOffset(b) > off || lastOffset(b) < off {
			t.Fatalf("%s: Read(%d) wrong: %d bytes, %v", what, off, len(b), err)
		}
	}
}

// TestCleanShutdownSkipsScan: after Close, Open reads no segment data (the marker matches),
// leaves the marker until the first change, and the log is the same, timestamps and
// appends included.
func TestCleanShutdownSkipsScan(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4000
	cfg.IndexIntervalBytes = 300
	all := buildLog(t, dir, cfg, rng, 60)
	if !exists(filepath.Join(dir, cleanShutdownName)) {
		t.Fatalf("Close wrote no clean-shutdown marker")
	}

	before := openT(t, dir, cfg, nil) // unchanged: the marker stays
	wantTs, wantTsOff, _ := before.MaxTimestamp()
	wantEnd, nsegs := before.EndOffset(), before.NumSegments()
	before.Close()

	l := openT(t, dir, cfg, nil)
	rec := l.Recovery()
	if !rec.Clean || rec.ScannedBytes != 0 || rec.Truncated {
		t.Fatalf("open after Close: %+v, want clean with nothing scanned", rec)
	}
	if !exists(filepath.Join(dir, cleanShutdownName)) {
		t.Fatalf("Open of an unchanged log removed the marker")
	}
	if l.EndOffset() != wantEnd || l.NumSegments() != nsegs || nsegs < 3 {
		t.Fatalf("end %d, %d segments; want %d, %d (several)", l.EndOffset(), l.NumSegments(), wantEnd, nsegs)
	}
	if ts, off, _ := l.MaxTimestamp(); ts != wantTs || off != wantTsOff {
		t.Fatalf("max timestamp %d at %d, want %d at %d", ts, off, wantTs, wantTsOff)
	}
	for _, b := range all {
		off, ts, ok, err := l.OffsetForTimestamp(maxTimestamp(b))
		if err != nil || !ok || off > batch.BaseOffset(b) {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %v, %v; want <= %d", maxTimestamp(b), off, ok, err, batch.BaseOffset(b))
		}
		_ = ts
	}
	checkSame(t, l, all, "clean open")
	// The active segment goes on from the loaded state: appends, index entries, rolls.
	for i := 0; i < 40; i++ {
		bs := clone(valueBatch(1+rng.Intn(4), rng.Intn(200), int64(1000+i)))
		appendT(t, l, bs...)
		all = append(all, bs[0])
		if exists(filepath.Join(dir, cleanShutdownName)) {
			t.Fatalf("the marker is still there after an append")
		}
	}
	checkSame(t, l, all, "appends after a clean open")
	l.Close()
	l = openT(t, dir, cfg, nil)
	defer l.Close()
	if !l.Recovery().Clean {
		t.Fatalf("second clean open: %+v", l.Recovery())
	}
	checkSame(t, l, all, "second clean open")
}

// TestCleanStartTrustsSegments: a clean start reads no data, so a byte flipped while the
// broker was stopped, which recovery would have found (and truncated at), is served as is.
// Without the marker and the recovery point the same damage is found and cut off.
func TestCleanStartTrustsSegments(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4000
	cfg.IndexIntervalBytes = 300
	all := buildLog(t, dir, cfg, rng, 60)
	// Damage the last batch of the first segment (recovery checks a closed segment's
	// batches after its last index entry) and a batch of the active one.
	first := logPath(dir, 0)
	pos, size := batchPositions(t, first)
	flipAt(t, first, pos[len(pos)-1]+size[len(size)-1]-1)
	l := openT(t, dir, cfg, nil)
	bases := segmentBases(t, l)
	l.Close()
	active := logPath(dir, bases[len(bases)-1])
	apos, _ := batchPositions(t, active)
	flipAt(t, active, apos[0]+batch.HeaderSize+1)
	snap := snapshotDir(t, dir)

	l = openT(t, dir, cfg, nil)
	if rec := l.Recovery(); !rec.Clean || rec.ScannedBytes != 0 {
		t.Fatalf("clean start: %+v", rec)
	}
	if got := scanAll(t, l); len(got) != len(all) {
		t.Fatalf("clean start: %d batches, want all %d (trusted as they are)", len(got), len(all))
	}
	l.Close()

	restoreDir(t, dir, snap)
	forgetShutdown(t, dir, true)
	l = openT(t, dir, cfg, nil)
	defer l.Close()
	rec := l.Recovery()
	if rec.Clean || !rec.Truncated || rec.ScannedBytes == 0 {
		t.Fatalf("recovery without marker: %+v, want a scan that truncates", rec)
	}
	if got := scanAll(t, l); len(got) != len(pos)-1 {
		t.Fatalf("recovery kept %d batches, want the %d before the damaged one", len(got), len(pos)-1)
	}
}

// TestMarkerMismatch: a marker that does not describe the files is ignored (and removed)
// and the log is recovered as after a crash.
func TestMarkerMismatch(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4000
	cfg.IndexIntervalBytes = 300
	base := memTempDir(t)
	all := buildLog(t, base, cfg, rng, 60)
	l := openT(t, base, cfg, nil)
	bases := segmentBases(t, l)
	l.Close()
	snap := snapshotDir(t, base)
	activeName := filepath.Base(logPath(base, bases[len(bases)-1]))
	closedName := filepath.Base(logPath(base, bases[1]))

	cases := []struct {
		name   string
		damage func(dir string)
		want   [][]byte
	}{
		{"garbage appended to the active segment", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, activeName), os.O_WRONLY|os.O_APPEND, 0)
			f.Write(bytes.Repeat([]byte{7}, 100))
			f.Close()
		}, all},
		{"active segment cut short", func(dir string) {
			p := filepath.Join(dir, activeName)
			pos, _ := batchPositions(t, p)
			os.Truncate(p, pos[len(pos)-1])
		}, all[:len(all)-1]},
		{"a closed segment's index emptied", func(dir string) {
			os.WriteFile(indexPath(dir, bases[1]), nil, 0o644)
		}, all},
		{"a closed segment grew", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, closedName), os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte{1, 2, 3})
			f.Close()
		}, nil}, // recovery truncates the closed segment and drops the later ones
		{"an extra segment file", func(dir string) { // as a roll leaves it
			os.WriteFile(logPath(dir, lastOffset(all[len(all)-1])+1), nil, 0o644)
		}, all},
		{"the marker damaged", func(dir string) {
			flipAt(t, filepath.Join(dir, cleanShutdownName), 20)
		}, all},
		{"the recovery point gone", func(dir string) {
			os.Remove(filepath.Join(dir, recoveryPointName))
		}, all},
		{"the active index cut", func(dir string) {
			p := activeIndexPath(dir, bases[len(bases)-1])
			fi, _ := os.Stat(p)
			os.Truncate(p, fi.Size()-indexEntrySize)
		}, all},
	}
	for _, c := range cases {
		dir := memTempDir(t)
		restoreDir(t, dir, snap)
		c.damage(dir)
		l := openT(t, dir, cfg, nil)
		if l.Recovery().Clean {
			t.Fatalf("%s: trusted the marker", c.name)
		}
		if exists(filepath.Join(dir, cleanShutdownName)) {
			t.Fatalf("%s: the marker survived Open", c.name)
		}
		if c.want != nil {
			checkSame(t, l, c.want, c.name)
		} else if got := scanAll(t, l); len(got) == 0 || len(got) >= len(all) || !bytes.Equal(got[0], all[0]) {
			t.Fatalf("%s: %d batches", c.name, len(got))
		}
		l.Close()
	}
}

// TestCrashAfterCleanOpen: the marker stays while nothing changes, so a crash right after
// a clean start finds it still matching; the first write removes it, so a crash after
// writes is recovered, and the recovery point written by the Close bounds the scan to
// what was written since.
func TestCrashAfterCleanOpen(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 300
	all := buildLog(t, dir, cfg, rng, 80)

	l := openT(t, dir, cfg, nil)
	if !l.Recovery().Clean {
		t.Fatalf("not a clean start")
	}
	size := l.Size()
	l.crash() // before any write
	l = openT(t, dir, cfg, nil)
	rec := l.Recovery()
	if !rec.Clean || rec.ScannedBytes != 0 {
		t.Fatalf("crash right after a clean open: %+v, want a clean start (nothing changed)", rec)
	}
	checkSame(t, l, all, "crash right after a clean open")

	// Writes after the start, some durable, then a crash that loses the unsynced rest.
	var durable int64
	for i := 0; i < 30; i++ {
		bs := clone(valueBatch(1+rng.Intn(4), rng.Intn(200), int64(2000+i)))
		_, last := appendT(t, l, bs...)
		all = append(all, bs[0])
		if i == 20 {
			if err := l.WaitDurable(last + 1); err != nil {
				t.Fatal(err)
			}
			durable = last + 1
		}
	}
	st := l.crash()
	loseUnsynced(t, dir, st, rng)
	l = openT(t, dir, cfg, nil)
	defer l.Close()
	rec = l.Recovery()
	if rec.Clean || rec.RecoveryPoint != size || rec.ScannedBytes == 0 {
		t.Fatalf("crash after writes: %+v, want a scan from the recovery point at %d", rec, size)
	}
	if l.EndOffset() < durable {
		t.Fatalf("end %d below the durable %d", l.EndOffset(), durable)
	}
	requirePrefix(t, "crash after writes", scanAll(t, l), all)
}

// TestRecoveryPointBoundsScan: with recovery points written as the active segment becomes
// durable, a crash re-reads only what follows the last one; damage there is found and cut
// off; a recovery point that does not check out (its files damaged, the segment shorter
// than it says) is ignored and the segment scanned whole.
func TestRecoveryPointBoundsScan(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 500
	const rpBytes = 10_000
	l, err := Open(dir, cfg, Options{recoveryPointBytes: rpBytes})
	if err != nil {
		t.Fatal(err)
	}
	var all [][]byte
	for i := 0; i < 300; i++ {
		bs := clone(valueBatch(1+rng.Intn(4), rng.Intn(300), int64(i)))
		_, last := appendT(t, l, bs...)
		all = append(all, bs[0])
		if err := l.WaitDurable(last + 1); err != nil {
			t.Fatal(err)
		}
	}
	size := l.Size()
	l.crash() // everything durable; the recovery point trails by less than rpBytes
	if !exists(filepath.Join(dir, recoveryPointName)) || exists(filepath.Join(dir, cleanShutdownName)) {
		t.Fatalf("want a recovery point and no marker after a crash")
	}
	forgetShutdown(t, dir, false)
	snap := snapshotDir(t, dir)
	rp, ok := readRecoveryPoint(dir)
	if !ok || rp.pos <= size-rpBytes || rp.pos > size || rp.nIdx == 0 {
		t.Fatalf("recovery point %+v (ok %v) for a %d-byte segment", rp, ok, size)
	}

	reopen := func(what string, want [][]byte) Recovery {
		t.Helper()
		l, err := Open(dir, cfg, Options{recoveryPointBytes: rpBytes})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		checkSame(t, l, want, what)
		return l.Recovery()
	}
	if rec := reopen("crash", all); rec.RecoveryPoint != rp.pos || rec.ScannedBytes != size-rp.pos {
		t.Fatalf("crash: %+v, want the %d bytes after the recovery point at %d scanned", rec, size-rp.pos, rp.pos)
	}

	path := logPath(dir, 0)
	pos, _ := batchPositions(t, path)
	nBefore := 0 // batches wholly below the recovery point
	for nBefore < len(pos) && pos[nBefore] < rp.pos {
		nBefore++
	}
	if nBefore >= len(pos)-1 {
		t.Fatalf("want several batches after the recovery point")
	}
	// Damage after the recovery point: found and cut off there.
	restoreDir(t, dir, snap)
	flipAt(t, path, pos[nBefore+1]+batch.HeaderSize+2)
	if rec := reopen("flip after the recovery point", all[:nBefore+1]); !rec.Truncated || rec.RecoveryPoint != rp.pos {
		t.Fatalf("flip after the recovery point: %+v", rec)
	}
	// The recovery point files damaged or the segment shorter: a full scan.
	damages := map[string]func(){
		"recovery point flipped": func() { flipAt(t, filepath.Join(dir, recoveryPointName), 30) },
		"active index flipped":   func() { flipAt(t, activeIndexPath(dir, 0), 5) },
		"active time index cut": func() {
			os.Truncate(activeTimeIndexPath(dir, 0), int64(rp.nTime-1)*timeEntrySize)
		},
		"active index gone": func() { os.Remove(activeIndexPath(dir, 0)) },
	}
	for what, d := range damages {
		restoreDir(t, dir, snap)
		d()
		if rec := reopen(what, all); rec.RecoveryPoint != 0 || rec.ScannedBytes != size {
			t.Fatalf("%s: %+v, want a full scan", what, rec)
		}
	}
	restoreDir(t, dir, snap)
	if err := os.Truncate(path, pos[nBefore-2]); err != nil {
		t.Fatal(err)
	}
	if rec := reopen("segment cut below the recovery point", all[:nBefore-2]); rec.RecoveryPoint != 0 {
		t.Fatalf("segment cut below the recovery point: %+v", rec)
	}
}

// TestRecoveryPointOfAnotherSegment: a recovery point (with its index files) left from an
// earlier log in the same place does not describe a new segment with the same base: the
// batch at its recorded position does not match and the segment is scanned.
func TestRecoveryPointOfAnotherSegment(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 200
	buildLog(t, dir, cfg, rng, 50)
	old := snapshotDir(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	all := buildLog(t, dir, cfg, rng, 80) // same base, other batches, longer
	for _, name := range []string{recoveryPointName, filepath.Base(activeIndexPath(dir, 0)), filepath.Base(activeTimeIndexPath(dir, 0))} {
		if err := os.WriteFile(filepath.Join(dir, name), old[name], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	forgetShutdown(t, dir, false)
	l := openT(t, dir, cfg, nil)
	defer l.Close()
	if rec := l.Recovery(); rec.RecoveryPoint != 0 {
		t.Fatalf("used another segment's recovery point: %+v", rec)
	}
	checkSame(t, l, all, "stale recovery point")
}
