package log

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Descriptors. A segment file is opened when it is first used and stays open in a
// FileCache shared by every log of the process, which closes the least recently used file
// when it is full (a CLOCK: one "used" bit per file, cleared by a sweeping hand). An idle
// partition therefore holds no descriptor at all, and tens of thousands of partitions fit
// a process limit that a descriptor per segment would exhaust (issue #17: with 20,000
// partitions accept(2) failed with EMFILE, and a restart reopened them all). A partition
// being written keeps its active segment in the cache because every append uses it.
//
// A file the cache closes may still be in use: a reader between two preads, or a Chunk
// handed to a socket writer. The cache only drops its own reference (fileRefs); the
// descriptor closes when the last holder releases it, and the next use opens the file
// again. Descriptors open at once are therefore the cache limit plus one per held Chunk
// or running read: bounded by the fetch responses in flight, not by partitions.

// FileCache bounds how many segment files the logs that share it keep open (see
// Options.Files). Safe for concurrent use.
type FileCache struct {
	mu    sync.Mutex
	limit int
	ring  []*segFile // the cached files; guarded by mu
	hand  int        // next ring slot the eviction sweep looks at; guarded by mu

	open      atomic.Int64 // descriptors open: cached ones and those only readers still hold
	opens     atomic.Int64
	evictions atomic.Int64
}

// NewFileCache returns a cache that keeps at most limit segment files open (at least 1).
func NewFileCache(limit int) *FileCache {
	return &FileCache{limit: max(limit, 1)}
}

// FileCacheStats is a snapshot of a FileCache.
type FileCacheStats struct {
	Limit     int   // most files kept open for reuse
	Cached    int   // files kept open for reuse now
	Open      int64 // descriptors open now: Cached plus evicted files that reads still hold
	Opens     int64 // files opened since the cache was made
	Evictions int64 // files the cache closed to make room
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	cached := len(c.ring)
	c.mu.Unlock()
	return FileCacheStats{Limit: c.limit, Cached: cached, Open: c.open.Load(), Opens: c.opens.Load(), Evictions: c.evictions.Load()}
}

// Limit returns the most files the cache keeps open for reuse.
func (c *FileCache) Limit() int { return c.limit }

// DefaultFileCacheLimit is the size of DefaultFileCache: a quarter of the process's
// descriptor limit (RLIMIT_NOFILE; the Go runtime raises the soft limit to the hard one at
// start-up), between 64 and 4096. The rest is left to connections (server's default
// max.connections is 10,000), in-flight zero-copy reads and short-lived files (index
// writes, markers, directory fsyncs). 4096 open segments cover the partitions a broker
// writes and reads at one time; the others cost a reopen (one open(2)) when next used.
func DefaultFileCacheLimit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return int(min(max(rl.Cur/4, 64), 4096))
}

var defaultFileCache = sync.OnceValue(func() *FileCache { return NewFileCache(DefaultFileCacheLimit()) })

// DefaultFileCache is the cache of logs opened without Options.Files.
func DefaultFileCache() *FileCache { return defaultFileCache() }

// segFile is one segment's file: its current descriptor when it has one, and its place in
// the cache.
type segFile struct {
	path  string
	cache *FileCache
	h     atomic.Pointer[fileRefs] // the cached descriptor; nil when not cached
	slot  int                      // index in cache.ring, -1 if not there; guarded by cache.mu
	gone  bool                     // removed from its log: never opened again; guarded by cache.mu

	used     atomic.Bool // touched since the eviction hand last passed
	unsynced atomic.Bool // written since its last fsync: evicted only when nothing else can be
}

func (sf *segFile) init(path string, c *FileCache) {
	sf.path, sf.cache, sf.slot = path, c, -1
}

// errSegmentGone: a segment file was used after its log removed it (a bug).
var errSegmentGone = errors.New("log: segment file used after removal")

// acquire returns the segment's descriptor with a reference held for the caller, opening
// the file if the cache does not have it. The caller releases it. The caller must keep
// the segment from being removed meanwhile (hold Log.mu, or appendMu for the active
// segment, or syncMu), so that the path still names this segment's file.
func (sf *segFile) acquire() (*fileRefs, error) {
	sf.used.Store(true)
	if h := sf.h.Load(); h != nil && h.tryAcquire() {
		return h, nil
	}
	f, err := os.OpenFile(sf.path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return sf.install(f)
}

// attach makes f (the segment's file, just opened or created) its cached descriptor and
// returns it with a reference held for the caller.
func (sf *segFile) attach(f *os.File) (*fileRefs, error) { return sf.install(f) }

func (sf *segFile) install(f *os.File) (*fileRefs, error) {
	c := sf.cache
	c.opens.Add(1)
	c.open.Add(1)
	h := &fileRefs{f: f, cache: c}
	h.refs.Store(2) // the cache's and the caller's
	var evicted []*fileRefs
	c.mu.Lock()
	if sf.gone {
		c.mu.Unlock()
		h.refs.Store(1)
		h.release()
		return nil, errSegmentGone
	}
	if cur := sf.h.Load(); cur != nil && cur.tryAcquire() {
		// Opened twice at once: keep the cached one.
		c.mu.Unlock()
		h.refs.Store(1)
		h.release()
		return cur, nil
	}
	// Not cached (a cached descriptor holds the cache's reference, so tryAcquire above
	// succeeds while sf is in the ring).
	for len(c.ring) >= c.limit {
		if e := c.evictOne(); e != nil {
			evicted = append(evicted, e)
		}
	}
	sf.slot = len(c.ring)
	c.ring = append(c.ring, sf)
	sf.h.Store(h)
	c.mu.Unlock()
	for _, e := range evicted {
		e.release()
	}
	return h, nil
}

// maxUnsyncedSkips is how many files with unsynced data one eviction passes over looking
// for a clean one. Evicting a file between its write and its fsync is correct (fsync
// flushes the file, whichever descriptor asks, and Linux reports a writeback error to a
// descriptor opened after it), but the kernel can forget such an error once no
// descriptor holds the file, so the cache prefers files with nothing to lose. The bound
// keeps eviction O(1) when every file is unsynced (fsync never).
const maxUnsyncedSkips = 8

// evictOne removes one file from the ring (the ring is not empty) and returns its
// descriptor for the caller to release outside the lock (nil if it had none). mu held.
func (c *FileCache) evictOne() *fileRefs {
	skips := 0
	for steps := 0; ; steps++ {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		sf := c.ring[c.hand]
		if steps < 2*len(c.ring) && sf.used.Swap(false) {
			c.hand++
			continue
		}
		if skips < maxUnsyncedSkips && sf.unsynced.Load() && steps < 3*len(c.ring) {
			skips++
			c.hand++
			continue
		}
		c.evictions.Add(1)
		return c.remove(sf)
	}
}

// remove takes sf out of the ring and returns its cached descriptor (nil if none). mu held.
func (c *FileCache) remove(sf *segFile) *fileRefs {
	if i := sf.slot; i >= 0 {
		last := len(c.ring) - 1
		c.ring[i] = c.ring[last]
		c.ring[i].slot = i
		c.ring[last] = nil
		c.ring = c.ring[:last]
		sf.slot = -1
	}
	return sf.h.Swap(nil)
}

// drop is called when the segment leaves its log: the cache forgets the file and will not
// open it again; the descriptor closes now or when its last holder releases it.
func (sf *segFile) drop() {
	if sf.cache == nil {
		return
	}
	c := sf.cache
	c.mu.Lock()
	sf.gone = true
	h := c.remove(sf)
	c.mu.Unlock()
	if h != nil {
		h.release()
	}
}

// fileRefs counts the holders of one open descriptor of a segment file: the cache while
// it keeps it, plus every reader using it (a read's preads, a Chunk of a zero-copy read,
// a scan). The descriptor is closed when the last one lets go, so eviction, retention,
// compaction and Close never close a file whose bytes a Chunk still has to deliver (to a
// socket, with sendfile, after the read returned and the log's lock was released). The
// bytes of a chunk never change while it is held: segments are only appended to (a failed
// append truncates back to the visible size, never below it), and compaction writes a new
// file and renames it over the old name, leaving the old file's contents to whoever
// still has it open. The one exception is TruncateTo, which cuts the file it truncates in
// place (as Kafka does): callers truncate only above what readers are given (the high
// watermark), so no chunk covers the bytes it removes.
type fileRefs struct {
	f     *os.File
	cache *FileCache
	refs  atomic.Int64
}

// tryAcquire adds a reference unless the descriptor is already closed (or closing).
func (r *fileRefs) tryAcquire() bool {
	for {
		n := r.refs.Load()
		if n <= 0 {
			return false
		}
		if r.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// acquire adds a reference. The caller already holds one.
func (r *fileRefs) acquire() { r.refs.Add(1) }

func (r *fileRefs) release() {
	switch n := r.refs.Add(-1); {
	case n == 0:
		_ = r.f.Close()
		r.cache.open.Add(-1)
	case n < 0:
		panic("log: segment file released more often than acquired")
	}
}
