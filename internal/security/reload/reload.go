// Package reload keeps a value parsed from files and parses it again when the files
// change, as Kafka reloads its keystores and JWKS files: no watcher and no goroutine; the
// caller's Get looks at the files at most once per interval, on the path that uses the
// value (a TLS handshake, a token validation), so a broker nobody connects to does no work.
package reload

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often, at most, Get looks at the files.
const DefaultInterval = time.Second

// MaxFileBytes bounds each file: key stores, certificate bundles and key sets are far
// smaller, and a wrong path (a log, a device) must not be read whole.
const MaxFileBytes = 16 << 20

// Files is a value parsed from the contents of some files. A change is found by the
// contents' digest, not modification times: file systems stamp times at a clock tick of
// some milliseconds, and a file rewritten within one tick at the same size would be
// missed. When the files change but do not parse (half written, a wrong password), the
// last good value stays and the files are tried again at the next look. Safe for
// concurrent use.
type Files[T any] struct {
	paths    []string
	parse    func(contents [][]byte) (T, error)
	interval time.Duration
	onError  func(error)

	value   atomic.Pointer[T]
	mu      sync.Mutex // held while looking and parsing
	digest  [sha256.Size]byte
	checked time.Time
}

// Options tunes Files.
type Options struct {
	// Interval is the least time between two looks (0: DefaultInterval; negative: every Get).
	Interval time.Duration
	// OnError, if set, hears each failed read or parse after the first (for the log).
	OnError func(error)
}

// New reads and parses the files now; an error here is the caller's configuration error.
func New[T any](paths []string, parse func(contents [][]byte) (T, error), now time.Time, opts Options) (*Files[T], error) {
	f := &Files[T]{paths: paths, parse: parse, interval: opts.Interval, onError: opts.OnError}
	if f.interval == 0 {
		f.interval = DefaultInterval
	}
	contents, err := f.read()
	if err != nil {
		return nil, err
	}
	v, err := parse(contents)
	if err != nil {
		return nil, err
	}
	f.value.Store(&v)
	f.digest = digest(contents)
	f.checked = now
	return f, nil
}

// Get returns the current value, first reparsing the files if they changed and the
// interval since the last look has passed.
func (f *Files[T]) Get(now time.Time) T {
	f.mu.Lock()
	// A clock that went back by an interval (a wall-clock step, or a caller's clock
	// other than the one New was given) counts as time passed.
	if d := now.Sub(f.checked); f.interval < 0 || d >= f.interval || d <= -f.interval {
		f.checked = now
		f.refresh()
	}
	f.mu.Unlock()
	return *f.value.Load()
}

// refresh rereads the files; f.mu is held.
func (f *Files[T]) refresh() {
	contents, err := f.read()
	if err != nil {
		f.failed(err)
		return
	}
	d := digest(contents)
	if d == f.digest {
		return
	}
	v, err := f.parse(contents)
	if err != nil {
		f.failed(err)
		return
	}
	f.value.Store(&v)
	f.digest = d
}

func (f *Files[T]) failed(err error) {
	if f.onError != nil {
		f.onError(err)
	}
}

func (f *Files[T]) read() ([][]byte, error) {
	out := make([][]byte, len(f.paths))
	for i, p := range f.paths {
		b, err := readLimited(p)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func digest(contents [][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, c := range contents {
		fmt.Fprintf(h, "%d:", len(c))
		h.Write(c)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err == nil && len(b) > MaxFileBytes {
		err = fmt.Errorf("%s is larger than %d bytes", path, MaxFileBytes)
	}
	return b, err
}
