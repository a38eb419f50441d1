package log

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/exactq/exactq/internal/testdisk"
)

// syncBuffer is a bytes.Buffer safe for a slog handler and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(substr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestFullDisk: with the disk full, appends fail with the I/O error (the broker answers
// KAFKA_STORAGE_ERROR) and the failure is logged once with the log's directory, not per
// append; a log closed cleanly before opens and serves reads (Open writes nothing); once
// space returns, appends resume, which is logged once. Before, nothing was logged.
func TestFullDisk(t *testing.T) {
	disk := testdisk.Small(t, 1<<20)
	var out syncBuffer
	opts := Options{Files: NewFileCache(8), Logger: slog.New(slog.NewTextHandler(&out, nil))}
	cfg := DefaultConfig()

	closedDir, liveDir := filepath.Join(disk, "closed-0"), filepath.Join(disk, "live-0")
	closed, err := Open(closedDir, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := clone(valueBatch(4, 100, 1))
	appendT(t, closed, want...)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	live, err := Open(liveDir, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	appendT(t, live, clone(valueBatch(1, 100, 1))...)
	free := testdisk.Fill(t, disk, "filler", 0)

	for i := 0; i < 5; i++ {
		_, _, err := live.Append(clone(valueBatch(8, 16<<10, 1)))
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append %d on a full disk: %v, want ENOSPC", i, err)
		}
	}
	if got := out.lines("log write failed"); len(got) != 1 || !strings.Contains(got[0], liveDir) || !strings.Contains(got[0], "no space left") {
		t.Fatalf("failure logged %d times, want once with the directory and the cause: %q", len(got), got)
	}

	// A clean log opens on the full disk and serves what it holds.
	closed, err = Open(closedDir, cfg, opts)
	if err != nil {
		t.Fatalf("Open on a full disk: %v", err)
	}
	got, err := closed.Read(0, 1<<20, 1<<62)
	if err != nil || !bytes.Equal(got, want[0]) {
		t.Fatalf("read on a full disk: %d bytes, %v", len(got), err)
	}
	if err := closed.Close(); err != nil {
		t.Fatalf("Close of an unchanged log on a full disk: %v", err)
	}

	free()
	_, last := appendT(t, live, clone(valueBatch(8, 16<<10, 1))...)
	if err := live.WaitDurable(last + 1); err != nil {
		t.Fatalf("WaitDurable after space returned: %v", err)
	}
	if got := out.lines("log writes resumed"); len(got) != 1 || !strings.Contains(got[0], liveDir) {
		t.Fatalf("resumption logged %d times, want once: %q", len(got), got)
	}
	if n := len(out.lines("log write failed")); n != 1 {
		t.Fatalf("failure logged %d times in all, want once", n)
	}
}

// TestFullDiskAtRoll: a roll while the disk is full leaves the closed segment's index files
// unwritten; that is retried, not taken for a lost write, so appends and durable waits
// resume when space returns. Failed before: the failed index write was sticky, and every
// later append failed until the log was reopened.
func TestFullDiskAtRoll(t *testing.T) {
	disk := testdisk.Small(t, 1<<20)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10 // three ~16.5 KB batches fit, the fourth rolls
	l, err := Open(filepath.Join(disk, "p-0"), cfg, Options{Logger: slog.New(slog.NewTextHandler(&syncBuffer{}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 3; i++ {
		appendT(t, l, clone(valueBatch(4, 4<<10, 1))...)
	}
	free := testdisk.Fill(t, disk, "filler", 0)
	if _, _, err := l.Append(clone(valueBatch(4, 4<<10, 1))); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments: the append did not roll", l.NumSegments())
	}
	if err := l.WaitDurable(l.EndOffset()); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WaitDurable with the closed segment's index files unwritable: %v, want ENOSPC", err)
	}
	free()
	_, last := appendT(t, l, clone(valueBatch(4, 4<<10, 1))...)
	if err := l.WaitDurable(last + 1); err != nil {
		t.Fatalf("WaitDurable after space returned: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(filepath.Join(disk, "p-0"), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rec := l.Recovery(); !rec.Clean || l.EndOffset() != last+1 {
		t.Fatalf("reopened: %+v, end %d; want a clean start at %d", rec, l.EndOffset(), last+1)
	}
}
