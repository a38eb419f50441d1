package log

import (
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/exactq/exactq/internal/batch"
)

// buildLog writes n batches of varied sizes into dir (several segments) and closes it.
// It returns the batches as stored.
func buildLog(t *testing.T, dir string, cfg Config, rng *rand.Rand, n int) [][]byte {
	t.Helper()
	l := openT(t, dir, cfg, nil)
	for i := 0; i < n; i++ {
		appendT(t, l, clone(valueBatch(1+rng.Intn(4), rng.Intn(200), int64(i)))...)
	}
	all := scanAll(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return all
}

// lastSegment returns the base offset of the last segment and the batches in it.
func lastSegment(all [][]byte, base int64) (inLast [][]byte, positions []int64) {
	var pos int64
	for _, b := range all {
		if batch.BaseOffset(b) >= base {
			inLast = append(inLast, b)
			positions = append(positions, pos)
			pos += int64(len(b))
		}
	}
	return inLast, positions
}

// checkRecovered reopens dir and checks that it holds exactly want, ends at wantEnd and
// appends at wantEnd.
func checkRecovered(t *testing.T, dir string, cfg Config, want [][]byte, wantEnd int64, what string) {
	t.Helper()
	l := openT(t, dir, cfg, nil)
	defer l.Close()
	if l.EndOffset() != wantEnd {
		t.Fatalf("%s: end offset %d, want %d", what, l.EndOffset(), wantEnd)
	}
	requireBatches(t, what, scanAll(t, l), want)
	first, _ := appendT(t, l, clone(valueBatch(1, 10, 1))...)
	if first != wantEnd {
		t.Fatalf("%s: append after recovery at %d, want %d", what, first, wantEnd)
	}
	if got, err := l.Read(first, math.MaxInt32, math.MaxInt64); err != nil || batch.BaseOffset(got) != first {
		t.Fatalf("%s: read after recovery append: %v", what, err)
	}
}

// TestTornTailRecovery truncates the last segment at many random positions, and flips
// random bytes in its batches: every complete valid batch before the damage survives,
// the damaged one and everything after it are dropped.
func TestTornTailRecovery(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4000
	cfg.IndexIntervalBytes = 300
	all := buildLog(t, dir, cfg, rng, 40)

	l := openT(t, dir, cfg, nil)
	l.mu.RLock()
	activeBase := l.segs[len(l.segs)-1].base
	nsegs := len(l.segs)
	l.mu.RUnlock()
	l.Close()
	if nsegs < 3 {
		t.Fatalf("want several segments, got %d", nsegs)
	}
	// What a crash leaves: no clean-shutdown marker and no recovery point covering the
	// tail (TestRecoveryPointBoundsScan covers damage after a recovery point).
	forgetShutdown(t, dir, true)
	path := logPath(dir, activeBase)
	snap := snapshotDir(t, dir)
	orig := snap[filepath.Base(path)]
	inLast, positions := lastSegment(all, activeBase)
	if len(inLast) < 3 {
		t.Fatalf("want several batches in the last segment, got %d", len(inLast))
	}
	kept := len(all) - len(inLast) // batches in closed segments

	// Expected survivors if the damage starts at byte p of the last segment.
	survivors := func(p int64) ([][]byte, int64) {
		n := 0
		for n < len(inLast) && positions[n]+int64(len(inLast[n])) <= p {
			n++
		}
		want := all[:kept+n]
		end := activeBase
		if len(want) > 0 && n > 0 {
			end = lastOffset(want[len(want)-1]) + 1
		}
		return want, end
	}

	for i := 0; i < 150; i++ {
		p := rng.Int63n(int64(len(orig)) + 1)
		if err := os.WriteFile(path, orig[:p], 0o644); err != nil {
			t.Fatal(err)
		}
		want, end := survivors(p)
		checkRecovered(t, dir, cfg, want, end, "truncate")
		restoreDir(t, dir, snap) // undo the recovery and its append (which may have rolled)
	}

	for i := 0; i < 150; i++ {
		j := rng.Intn(len(inLast))
		if i%2 == 0 {
			j = len(inLast) - 1 // half of the time the last batch, as the tail most likely tears
		}
		var at int
		for {
			at = rng.Intn(len(inLast[j]))
			// The partition leader epoch is not covered by the CRC (Kafka's format), so
			// damage there is undetectable by design.
			if at < 12 || at >= 16 {
				break
			}
		}
		damaged := append([]byte(nil), orig...)
		damaged[positions[j]+int64(at)] ^= byte(1 + rng.Intn(255))
		if err := os.WriteFile(path, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		want, end := survivors(positions[j])
		checkRecovered(t, dir, cfg, want, end, "flip")
		restoreDir(t, dir, snap)
	}
}

// forgetShutdown removes the clean-shutdown marker, and with rp the recovery point too, as
// if the log had crashed without writing them.
func forgetShutdown(t testing.TB, dir string, rp bool) {
	t.Helper()
	names := []string{cleanShutdownName}
	if rp {
		names = append(names, recoveryPointName)
	}
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	snap := map[string][]byte{}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		snap[e.Name()] = b
	}
	return snap
}

func restoreDir(t *testing.T, dir string, snap map[string][]byte) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if _, ok := snap[e.Name()]; !ok {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range snap {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCorruptIndexRebuilt damages a closed segment's index files: Open rebuilds the index
// by scanning instead of trusting it.
func TestCorruptIndexRebuilt(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	dir := memTempDir(t)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4000
	cfg.IndexIntervalBytes = 200
	all := buildLog(t, dir, cfg, rng, 40)
	damage := []func(string){
		func(p string) { _ = os.Remove(p) },
		func(p string) { _ = os.WriteFile(p, []byte{1, 2, 3}, 0o644) },
		func(p string) { // a plausible-looking entry pointing past the file
			_ = os.WriteFile(p, []byte{0, 0, 0, 1, 0x7f, 0, 0, 0}, 0o644)
		},
		func(p string) { // entries out of order
			_ = os.WriteFile(p, []byte{0, 0, 0, 5, 0, 0, 1, 0, 0, 0, 0, 4, 0, 0, 2, 0}, 0o644)
		},
		func(p string) { // an entry whose offset does not match the batch at its position
			_ = os.WriteFile(p, []byte{0, 0, 0, 0, 0, 0, 0, 9}, 0o644)
		},
	}
	for i, d := range damage {
		d(indexPath(dir, 0))
		l := openT(t, dir, cfg, nil)
		got := scanAll(t, l)
		if len(got) != len(all) {
			t.Fatalf("damage %d: %d batches, want %d", i, len(got), len(all))
		}
		for off := int64(0); off < l.EndOffset(); off += 3 {
			b, err := l.Read(off, 1, math.MaxInt64)
			if err != nil || batch.BaseOffset(b) > off || lastOffset(b) < off {
				t.Fatalf("damage %d: Read(%d) wrong: %v", i, off, err)
			}
		}
		// Close rewrote the index of the closed segment.
		l.Close()
		if _, err := os.Stat(indexPath(dir, 0)); err != nil {
			t.Fatalf("damage %d: index not rewritten: %v", i, err)
		}
	}
}
