package log

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/exactq/exactq/internal/batch"
)

// truncCfg makes small segments and indexes, so that cuts land in closed segments, at
// segment boundaries and between index entries.
func truncCfg() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2500
	cfg.IndexIntervalBytes = 200
	return cfg
}

// keptBelow returns the batches of all whose last offset is below cut, and the end offset
// TruncateTo(cut) leaves: the base of the first dropped batch.
func keptBelow(all [][]byte, cut int64) ([][]byte, int64) {
	for i, b := range all {
		if lastOffset(b) >= cut {
			return all[:i], batch.BaseOffset(b)
		}
	}
	n := len(all)
	return all, lastOffset(all[n-1]) + 1
}

// checkTruncated checks that l holds exactly want and ends at end, appends at end, and
// does so again after a clean reopen and after a crash.
func checkTruncated(t *testing.T, dir string, cfg Config, l *Log, want [][]byte, end int64, what string) {
	t.Helper()
	if l.EndOffset() != end {
		t.Fatalf("%s: end %d, want %d", what, l.EndOffset(), end)
	}
	requireBatches(t, what, scanAll(t, l), want)
	b := clone(valueBatch(2, 7, 99))
	if first, _ := appendT(t, l, b...); first != end {
		t.Fatalf("%s: append after truncation at %d, want %d", what, first, end)
	}
	want = append(append([][]byte(nil), want...), b...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, cfg, nil)
	requireBatches(t, what+" (reopened)", scanAll(t, l), want)
	l.crash() // everything was durable at Close: nothing may be lost
	l = openT(t, dir, cfg, nil)
	defer l.Close()
	requireBatches(t, what+" (crashed)", scanAll(t, l), want)
	if l.EndOffset() != end+2 {
		t.Fatalf("%s: end %d after reopen, want %d", what, l.EndOffset(), end+2)
	}
}

// TestTruncateTo cuts a log of several segments at every offset: what is left is the
// batches ending below the cut, the end offset is the first dropped batch's base, and
// appends, reopen and recovery continue from there.
func TestTruncateTo(t *testing.T) {
	cfg := truncCfg()
	src, all, end := truncSource(t, cfg, 7)
	segsBefore := 0
	for cut := int64(0); cut <= end; cut++ {
		dir := memTempDir(t)
		copyDir(t, src, dir)
		l := openT(t, dir, cfg, nil)
		segsBefore = l.NumSegments()
		got, err := l.TruncateTo(cut)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		want, wantEnd := keptBelow(all, cut)
		if got != wantEnd {
			t.Fatalf("cut %d: TruncateTo returned %d, want %d", cut, got, wantEnd)
		}
		if _, err := os.Stat(filepath.Join(dir, truncateIntentName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cut %d: intent left behind: %v", cut, err)
		}
		checkTruncated(t, dir, cfg, l, want, wantEnd, fmt.Sprintf("cut %d", cut))
	}
	if segsBefore < 4 {
		t.Fatalf("the log had %d segments; the test wants cuts in closed segments", segsBefore)
	}
}

// truncSource writes a log of several segments to truncate copies of; it returns its
// directory, batches and end offset.
func truncSource(t *testing.T, cfg Config, seed int64) (string, [][]byte, int64) {
	t.Helper()
	src := memTempDir(t)
	all := buildLog(t, src, cfg, rand.New(rand.NewSource(seed)), 30)
	return src, all, lastOffset(all[len(all)-1]) + 1
}

// copyDir copies the regular files of src into dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncateToRefuses: below the start offset is refused, at or past the end changes
// nothing.
func TestTruncateToRefuses(t *testing.T) {
	dir := memTempDir(t)
	l := openT(t, dir, truncCfg(), nil)
	defer l.Close()
	for i := 0; i < 5; i++ {
		appendT(t, l, clone(valueBatch(1, 10, 1))...)
	}
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateTo(1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("TruncateTo below the start: %v, want ErrOffsetOutOfRange", err)
	}
	if end, err := l.TruncateTo(9); err != nil || end != 5 || l.EndOffset() != 5 {
		t.Fatalf("TruncateTo past the end: %d, %v; end %d", end, err, l.EndOffset())
	}
}

// TestTruncateStraddlingStart: a cut inside a batch that begins below the start offset
// leaves the log empty at the start offset.
func TestTruncateStraddlingStart(t *testing.T) {
	dir := memTempDir(t)
	cfg := truncCfg()
	l := openT(t, dir, cfg, nil)
	appendT(t, l, clone(valueBatch(1, 10, 1))...)
	appendT(t, l, clone(valueBatch(4, 10, 1))...) // offsets 1-4
	if _, err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	end, err := l.TruncateTo(4)
	if err != nil || end != 3 {
		t.Fatalf("TruncateTo: %d, %v, want 3", end, err)
	}
	if l.StartOffset() != 3 {
		t.Fatalf("start %d, want 3", l.StartOffset())
	}
	checkTruncated(t, dir, cfg, l, nil, 3, "straddle")
}

// TestTruncateFullyAndStartAt replaces the log by an empty one at an offset above the
// end, inside it, and below the start offset; it survives reopen and crash.
func TestTruncateFullyAndStartAt(t *testing.T) {
	cfg := truncCfg()
	src, _, end := truncSource(t, cfg, 8)
	for _, at := range []int64{0, 3, end / 2, end, end + 1000} {
		dir := memTempDir(t)
		copyDir(t, src, dir)
		l := openT(t, dir, cfg, nil)
		if _, err := l.DeleteRecordsBefore(2); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateFullyAndStartAt(at); err != nil {
			t.Fatalf("at %d: %v", at, err)
		}
		if l.StartOffset() != at || l.NumSegments() != 1 {
			t.Fatalf("at %d: start %d, %d segments", at, l.StartOffset(), l.NumSegments())
		}
		checkTruncated(t, dir, cfg, l, nil, at, fmt.Sprintf("at %d", at))
		l = openT(t, dir, cfg, nil)
		if l.StartOffset() != at {
			t.Fatalf("at %d: start %d after reopen", at, l.StartOffset())
		}
		l.Close()
	}
}

// TestTruncateCrashAtEveryStep stops a truncation after each of its steps (as a kill
// would: no further write, no fsync), then reopens: the log is the truncated one, every
// time, and appends continue at its end. Cuts in the active segment, in a closed one, at a
// segment boundary, in a compacted segment (offset gaps), and a full truncation.
func TestTruncateCrashAtEveryStep(t *testing.T) {
	cfg := truncCfg()
	src, all, end := truncSource(t, cfg, 9)

	l := openT(t, src, cfg, nil)
	l.mu.RLock()
	bases := make([]int64, len(l.segs))
	for i, s := range l.segs {
		bases[i] = s.base
	}
	l.mu.RUnlock()
	l.Close()
	if len(bases) < 4 {
		t.Fatalf("want several segments, got %d", len(bases))
	}

	compacted := memTempDir(t)
	compAll := buildCompacted(t, compacted)

	type tcase struct {
		name string
		src  string
		all  [][]byte
		cut  int64 // -1: TruncateFullyAndStartAt(full)
		full int64
	}
	cases := []tcase{
		{"active", src, all, end - 2, 0},
		{"closed", src, all, bases[1] + 1, 0},
		{"boundary", src, all, bases[2], 0},
		{"first", src, all, 0, 0},
		{"full", src, all, -1, end + 50},
		{"compacted", compacted, compAll, batch.BaseOffset(compAll[len(compAll)/2]), 0},
	}
	defer func() { testHookTruncate = nil }()
	for _, c := range cases {
		for stopAt := 1; ; stopAt++ {
			dir := memTempDir(t)
			copyDir(t, c.src, dir)
			ccfg := cfg
			if c.src == compacted {
				ccfg = compactCfg()
			}
			l := openT(t, dir, ccfg, nil)
			steps := 0
			stop := errors.New("crash")
			testHookTruncate = func(string) error {
				if steps++; steps == stopAt {
					return stop
				}
				return nil
			}
			var err error
			if c.cut < 0 {
				err = l.TruncateFullyAndStartAt(c.full)
			} else {
				_, err = l.TruncateTo(c.cut)
			}
			testHookTruncate = nil
			want, wantEnd := [][]byte(nil), c.full
			if c.cut >= 0 {
				want, wantEnd = keptBelow(c.all, c.cut)
			}
			what := fmt.Sprintf("%s, stopped after step %d", c.name, stopAt)
			if err == nil {
				l.Close()
				if stopAt <= 3 {
					t.Fatalf("%s: the truncation has only %d steps", what, stopAt-1)
				}
				t.Logf("%s: %d steps", c.name, stopAt-1)
				break // every step was covered
			}
			if !errors.Is(err, stop) {
				t.Fatalf("%s: %v", what, err)
			}
			l.crash()
			l = openT(t, dir, ccfg, nil)
			checkTruncated(t, dir, ccfg, l, want, wantEnd, what)
		}
	}
}

func compactCfg() Config {
	cfg := truncCfg()
	cfg.Compact, cfg.Delete = true, false
	cfg.MinCompactionLagMs = 0
	return cfg
}

// buildCompacted writes a log whose first segments are compacted (offset gaps inside
// them), closes it and returns its batches.
func buildCompacted(t *testing.T, dir string) [][]byte {
	t.Helper()
	cfg := compactCfg()
	l := openT(t, dir, cfg, nil)
	for i := 0; i < 40; i++ {
		key := fmt.Sprintf("u%d", i) // kept
		if i%3 == 0 {
			key = "dup" // all but the last dropped: gaps
		}
		b := makeBatch([]rec{{key: []byte(key), value: bytes.Repeat([]byte("v"), 300), ts: int64(i)}}, plain)
		appendT(t, l, clone(b)...)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	all := scanAll(t, l)
	gaps := 0
	for i := 1; i < len(all); i++ {
		if batch.BaseOffset(all[i]) != lastOffset(all[i-1])+1 {
			gaps++
		}
	}
	if gaps == 0 {
		t.Fatalf("compaction left no offset gaps")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return all
}

// TestTruncateModel runs random appends, durable waits, truncations, full truncations,
// clean reopens and crashes (losing what was not durable) against a model: after every
// step the log is the model's batches, or after a crash a prefix of them holding every
// durable one.
func TestTruncateModel(t *testing.T) {
	rng := rand.New(rand.NewSource(10))
	cfg := truncCfg()
	for round := 0; round < 15; round++ {
		dir := memTempDir(t)
		l := openT(t, dir, cfg, nil)
		var model [][]byte
		start, durable := int64(0), 0 // durable: batches of model known fsynced
		endOf := func() int64 {
			if n := len(model); n > 0 {
				return lastOffset(model[n-1]) + 1
			}
			return start
		}
		for step := 0; step < 120; step++ {
			what := fmt.Sprintf("round %d step %d", round, step)
			r := rng.Intn(20)
			if os.Getenv("TRACE") != "" {
				t.Logf("%s: op %d, model %d batches end %d durable %d", what, r, len(model), endOf(), durable)
			}
			switch {
			case r < 11:
				bs := clone(valueBatch(1+rng.Intn(3), rng.Intn(150), int64(step)))
				appendT(t, l, bs...)
				model = append(model, bs...)
			case r < 13:
				if err := l.WaitDurable(l.EndOffset()); err != nil {
					t.Fatal(err)
				}
				durable = len(model)
			case r < 16:
				cut := start + rng.Int63n(endOf()-start+1)
				if _, err := l.TruncateTo(cut); err != nil {
					t.Fatalf("%s: TruncateTo(%d): %v", what, cut, err)
				}
				if cut < endOf() {
					model, _ = keptBelow(model, cut)
					durable = len(model) // a cut makes what it keeps durable
				}
			case r < 17:
				start = endOf() + int64(rng.Intn(5))
				if err := l.TruncateFullyAndStartAt(start); err != nil {
					t.Fatal(err)
				}
				model, durable = nil, 0
			case r < 18:
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = openT(t, dir, cfg, nil)
			default:
				st := l.crash()
				loseUnsynced(t, dir, st, rng)
				l = openT(t, dir, cfg, nil)
				got := scanAll(t, l)
				requirePrefix(t, what, got, model)
				if len(got) < durable {
					t.Fatalf("%s: %d batches after a crash, %d were durable", what, len(got), durable)
				}
				model = model[:len(got)]
				durable = len(model)
			}
			requireBatches(t, what, scanAll(t, l), model)
			if l.EndOffset() != endOf() || l.StartOffset() != start && len(model) == 0 && l.EndOffset() == start {
				t.Fatalf("%s: end %d start %d, model end %d start %d", what, l.EndOffset(), l.StartOffset(), endOf(), start)
			}
		}
		l.Close()
	}
}

// TestTruncateConcurrentReads truncates and appends while readers read, zero-copy and
// not, below the truncation point (as the broker does: truncation is above the high
// watermark): what they get is always the batches as appended (run under -race in CI).
func TestTruncateConcurrentReads(t *testing.T) {
	cfg := truncCfg()
	dir := memTempDir(t)
	l := openT(t, dir, cfg, nil)
	defer l.Close()
	var stable [][]byte // never truncated: readers read these
	for i := 0; i < 20; i++ {
		bs := clone(valueBatch(2, 100, int64(i)))
		appendT(t, l, bs...)
		stable = append(stable, bs...)
	}
	hw := l.EndOffset()
	done := make(chan struct{})
	errs := make(chan error, 2)
	for r := 0; r < 2; r++ {
		go func(zeroCopy bool) {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				off := int64(i) % hw
				var got []byte
				if zeroCopy {
					chunks, _, err := l.ReadChunks(nil, off, 600, hw)
					if err != nil {
						errs <- err
						return
					}
					for _, c := range chunks {
						b := make([]byte, c.Len)
						if _, err := c.File().ReadAt(b, c.Off); err != nil {
							errs <- err
							return
						}
						got = append(got, b...)
						c.Release()
					}
				} else {
					var err error
					if got, err = l.Read(off, 600, hw); err != nil {
						errs <- err
						return
					}
				}
				bs, err := batch.Split(got)
				if err != nil {
					errs <- err
					return
				}
				for _, b := range bs {
					i := sort.Search(len(stable), func(i int) bool { return lastOffset(stable[i]) >= batch.BaseOffset(b) })
					if !bytes.Equal(b, stable[i]) {
						errs <- fmt.Errorf("read at %d: batch %d differs", off, batch.BaseOffset(b))
						return
					}
				}
			}
		}(r == 0)
	}
	for i := 0; i < 400; i++ {
		appendT(t, l, clone(valueBatch(1+i%3, 150, 1))...)
		if i%4 == 3 {
			if _, err := l.TruncateTo(hw + int64(i%5)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	for r := 0; r < 2; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
