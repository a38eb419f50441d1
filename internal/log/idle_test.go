package log

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// idleCost is what n open, idle logs cost the process.
type idleCost struct {
	n                    int
	bytesPerLog          float64
	fdsPerLog, gorPerLog float64
	open, closeT         time.Duration
}

func openFDs(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// measureIdle creates n logs of one batch each under root, closes them (as a broker's
// shutdown would), then opens them all again and measures what they hold while idle,
// and how long closing them all takes.
func measureIdle(t testing.TB, root string, n int, opts Options) idleCost {
	t.Helper()
	b := valueBatch(1, 100, 1_700_000_000_000)
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = filepath.Join(root, fmt.Sprintf("t-%d", i))
		l, err := Open(dirs[i], DefaultConfig(), opts)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if _, _, err := l.Append([][]byte{append([]byte(nil), b...)}); err != nil {
			t.Fatalf("Append: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	logs := make([]*Log, n)
	fd0, g0, h0 := openFDs(t), runtime.NumGoroutine(), heapBytes()
	start := time.Now()
	for i, dir := range dirs {
		l, err := Open(dir, DefaultConfig(), opts)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		logs[i] = l
	}
	c := idleCost{n: n, open: time.Since(start)}
	fd1, g1, h1 := openFDs(t), runtime.NumGoroutine(), heapBytes()
	c.bytesPerLog = float64(int64(h1)-int64(h0)) / float64(n)
	c.fdsPerLog = float64(fd1-fd0) / float64(n)
	c.gorPerLog = float64(g1-g0) / float64(n)
	start = time.Now()
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	c.closeT = time.Since(start)
	runtime.KeepAlive(logs)
	return c
}

// TestIdleLogsCost: open, idle logs hold no goroutine, no more descriptors than the file
// cache allows, and under 2 KB of memory each; opening and closing one that nothing
// changed writes nothing to its directory. Before lazy files and the shared flusher each
// held a descriptor and a goroutine (3.9 KB), and Close rewrote its marker with two
// fsyncs. EXACTQ_IDLE_LOGS=100000 measures a broker-sized count.
// changeTimes returns the ctime of dir and of every file in it.
func changeTimes(t *testing.T, dir string) map[string]syscall.Timespec {
	t.Helper()
	out := map[string]syscall.Timespec{}
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(names, dir) {
		fi, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = fi.Sys().(*syscall.Stat_t).Ctim
	}
	return out
}

func TestIdleLogsCost(t *testing.T) {
	n := 2000
	if s := os.Getenv("EXACTQ_IDLE_LOGS"); s != "" {
		fmt.Sscan(s, &n)
	}
	const cacheLimit = 64
	files := NewFileCache(cacheLimit)
	root := t.TempDir() // a real disk: Close's figure includes its fsyncs
	if os.Getenv("EXACTQ_IDLE_LOGS") == "" {
		root = memTempDir(t)
	}
	opts := Options{Files: files}
	c := measureIdle(t, root, n, opts)
	t.Logf("%d idle logs: %.0f bytes, %.3f descriptors, %.3f goroutines per log; open %v, close %v (%.1f µs per log); %+v",
		c.n, c.bytesPerLog, c.fdsPerLog, c.gorPerLog, c.open.Round(time.Millisecond), c.closeT.Round(time.Millisecond),
		float64(c.closeT.Microseconds())/float64(c.n), files.Stats())
	if c.gorPerLog*float64(n) > 2 {
		t.Errorf("%.3f goroutines per idle log, want none", c.gorPerLog)
	}
	if fds := c.fdsPerLog * float64(n); fds > cacheLimit+2 {
		t.Errorf("%.0f descriptors for %d idle logs, want at most the cache's %d", fds, n, cacheLimit)
	}
	if c.bytesPerLog > 2000 {
		t.Errorf("%.0f bytes per idle log, want < 2000", c.bytesPerLog)
	}
	// Open and Close of an unchanged log leave its directory and files as they were (not
	// even a timestamp changes).
	dir := filepath.Join(root, "t-0")
	before := changeTimes(t, dir)
	l, err := Open(dir, DefaultConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(0, 1<<20, 1<<62); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if after := changeTimes(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("Open and Close of an unchanged log changed its directory:\n%v\n%v", before, after)
	}
	if st := files.Stats(); st.Open != 0 {
		t.Errorf("%d descriptors open after every log was closed", st.Open)
	}
}
