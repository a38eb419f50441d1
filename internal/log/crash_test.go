package log

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"testing"
)

// crashState is what a crash leaves of a log: per segment, the bytes known fsynced and
// whether its directory entry was fsynced.
type crashState struct {
	durableEnd int64
	segs       []crashSeg
}

type crashSeg struct {
	base, durable, size int64
	inDir               bool
}

// crash stops the log without any further fsync, as a power cut would, and reports what
// was durable. The log is unusable afterwards (ErrClosed).
func (l *Log) crash() crashState {
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.syncMu.Lock() // an fsync in flight completes: it happened before the crash
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := crashState{durableEnd: l.durable.Load()}
	for _, s := range l.segs {
		st.segs = append(st.segs, crashSeg{base: s.base, durable: s.durable, size: s.size, inDir: s.createdGen <= l.dirSyncd})
	}
	l.closeFiles()
	l.fmu.Lock()
	l.fcond.Broadcast()
	l.fmu.Unlock()
	return st
}

// fataler is the part of testing.TB that *rapid.T has too.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// loseUnsynced applies a crash to the files: segment files whose creation was not fsynced
// vanish; every other segment keeps its fsynced bytes plus a random prefix of the unsynced
// ones, of which a random part reads back as zeros (pages that never reached the disk).
func loseUnsynced(t fataler, dir string, st crashState, rng *rand.Rand) {
	t.Helper()
	for _, s := range st.segs {
		path := logPath(dir, s.base)
		if !s.inDir {
			if err := removeSegmentFiles(dir, s.base); err != nil {
				t.Fatalf("%v", err)
			}
			continue
		}
		if s.size == s.durable {
			continue
		}
		keep := s.durable + rng.Int63n(s.size-s.durable+1)
		if err := os.Truncate(path, keep); err != nil {
			t.Fatalf("%v", err)
		}
		if keep > s.durable && rng.Intn(2) == 0 {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatalf("%v", err)
			}
			from := s.durable + rng.Int63n(keep-s.durable)
			zeros := make([]byte, 1+rng.Int63n(keep-from))
			if _, err := f.WriteAt(zeros, from); err != nil {
				t.Fatalf("%v", err)
			}
			f.Close()
		}
	}
}

// TestCrashKeepsDurable appends with occasional WaitDurable, crashes (dropping unsynced
// bytes), reopens: everything durable is there, what is there is a prefix of what was
// appended, and appends continue at the recovered end.
func TestCrashKeepsDurable(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	cfg := DefaultConfig()
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 250
	var lossRounds, durableRounds int
	for round := 0; round < 40; round++ {
		dir := memTempDir(t)
		l := openT(t, dir, cfg, nil)
		var appended [][]byte
		for i := 0; i < 10+rng.Intn(60); i++ {
			bs := clone(valueBatch(1+rng.Intn(3), rng.Intn(300), int64(i)))
			_, last := appendT(t, l, bs...)
			appended = append(appended, bs...)
			if rng.Intn(8) == 0 {
				if err := l.WaitDurable(last + 1); err != nil {
					t.Fatalf("%v", err)
				}
			}
		}
		st := l.crash()
		loseUnsynced(t, dir, st, rng)

		l = openT(t, dir, cfg, nil)
		if l.EndOffset() < st.durableEnd {
			t.Fatalf("round %d: end %d below the durable end %d", round, l.EndOffset(), st.durableEnd)
		}
		got := scanAll(t, l)
		if len(got) < len(appended) {
			lossRounds++
		}
		if st.durableEnd > 0 {
			durableRounds++
		}
		requirePrefix(t, fmt.Sprintf("round %d", round), got, appended)
		if n := len(got); n > 0 && lastOffset(got[n-1])+1 != l.EndOffset() || n == 0 && l.EndOffset() != 0 {
			t.Fatalf("round %d: end offset %d does not follow the last batch", round, l.EndOffset())
		}
		end := l.EndOffset()
		first, _ := appendT(t, l, clone(valueBatch(1, 5, 1))...)
		if first != end {
			t.Fatalf("round %d: append at %d after recovery, want %d", round, first, end)
		}
		if b, err := l.Read(first, math.MaxInt32, math.MaxInt64); err != nil || len(b) == 0 {
			t.Fatalf("round %d: read after recovery: %v", round, err)
		}
		l.Close()
	}
	if lossRounds == 0 || durableRounds == 0 {
		t.Fatalf("the test did not exercise both loss (%d rounds) and durable data (%d)", lossRounds, durableRounds)
	}
}

// TestIOErrorIsSticky: once a write cannot be undone or an fsync fails, the log refuses
// appends and durable waits with that error; reopening recovers what was written.
func TestIOErrorIsSticky(t *testing.T) {
	dir := memTempDir(t)
	l := openT(t, dir, DefaultConfig(), nil)
	_, last := appendT(t, l, clone(valueBatch(2, 10, 1))...)
	if err := l.WaitDurable(last + 1); err != nil {
		t.Fatal(err)
	}
	appendT(t, l, clone(valueBatch(2, 10, 1))...) // written, not yet synced
	l.mu.RLock()
	f := l.segs[0].file.h.Load().f
	l.mu.RUnlock()
	f.Close() // the disk goes away under the log: writes and fsyncs now fail
	if _, _, err := l.Append(clone(valueBatch(1, 10, 1))); err == nil {
		t.Fatalf("append on a dead file succeeded")
	}
	if err := l.WaitDurable(l.EndOffset()); err == nil {
		t.Fatalf("WaitDurable succeeded on a dead file")
	}
	_, _, err := l.Append(clone(valueBatch(1, 10, 1)))
	if err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("second append: %v, want the sticky I/O error", err)
	}
	l.Close()
	l = openT(t, dir, DefaultConfig(), nil)
	defer l.Close()
	if l.EndOffset() != 4 {
		t.Fatalf("reopened at end %d, want 4", l.EndOffset())
	}
}
