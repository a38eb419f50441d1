package compress

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/alloctest"
	"github.com/exactq/exactq/internal/await"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
)

// readAll drains r through reads of chunk bytes.
func readAll(r io.Reader, chunk int) ([]byte, error) {
	var out []byte
	buf := make([]byte, chunk)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestReaderMatchesDecompress: streaming yields exactly what whole decompression does, for
// every codec and framing (the franz-go and snappy-java fixtures too), whatever the read size.
func TestReaderMatchesDecompress(t *testing.T) {
	type payload struct {
		codec int8
		data  []byte
	}
	var payloads []payload
	for _, codec := range codecs {
		for _, in := range inputs() {
			c, err := Compress(codec, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, payload{codec, c})
		}
	}
	plain, err := os.ReadFile(filepath.Join("testdata", "plain.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for file, codec := range map[string]int8{"franz-go.gzip": Gzip, "franz-go.snappy-raw": Snappy,
		"franz-go.lz4": LZ4, "franz-go.zstd": Zstd, "xerial.snappy": Snappy} {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, payload{codec, b})
	}
	payloads = append(payloads, payload{Snappy, xerial.EncodeBetter(nil, bytes.Repeat(plain, 100))})
	for _, p := range payloads {
		want, err := Decompress(p.codec, p.data)
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{1, 7, 64 << 10} {
			r, err := NewReader(p.codec, p.data, len(want))
			if err != nil {
				t.Fatalf("%s: %v", Name(p.codec), err)
			}
			got, err := readAll(r, chunk)
			r.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s, reads of %d: %d bytes, %v; want %d bytes", Name(p.codec), chunk, len(got), err, len(want))
			}
		}
		if len(want) > 0 { // one byte under the limit fails
			r, err := NewReader(p.codec, p.data, len(want)-1)
			if err == nil {
				_, err = readAll(r, 4096)
				r.Close()
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: limit %d of %d: %v, want ErrTooLarge", Name(p.codec), len(want)-1, len(want), err)
			}
		}
	}
}

// bombs are 64 MiB of zeros in each codec's framings, a few KiB to 300 KiB compressed.
func bombs(t testing.TB) map[string][]int8Payload {
	zeros := make([]byte, 64<<20)
	out := map[string][]int8Payload{}
	for _, codec := range []int8{Gzip, Snappy, LZ4, Zstd} {
		c, err := Compress(codec, nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		out[Name(codec)] = append(out[Name(codec)], int8Payload{codec, c})
	}
	out["snappy"] = append(out["snappy"], int8Payload{Snappy, xerial.Encode(nil, zeros)})
	// A zstd stream declares no content size (as zstd-jni's ZstdOutputStream): only
	// decoding finds out how much it holds.
	var streamed bytes.Buffer
	w, err := zstd.NewWriter(&streamed, zstd.WithWindowSize(8<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out["zstd"] = append(out["zstd"], int8Payload{Zstd, streamed.Bytes()})
	return out
}

type int8Payload struct {
	codec int8
	data  []byte
}

// drainBomb reads a bomb with a 1 MiB limit and returns the error that stopped it.
func drainBomb(p int8Payload, window []byte) error {
	r, err := NewReader(p.codec, p.data, 1<<20)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		if _, err := r.Read(window); err != nil {
			return err
		}
	}
}

// TestReaderBombs (#17 finding 7): a bomb in each codec stops at the limit with
// ErrTooLarge, and, measured, costs neither its content nor its limit in allocations:
// decoders and buffers come from pools, so a warm Reader allocates almost nothing, and what
// it may hold (MemoryBound) is a window, not the output.
func TestReaderBombs(t *testing.T) {
	window := make([]byte, 64<<10)
	for name, ps := range bombs(t) {
		for i, p := range ps {
			if err := drainBomb(p, window); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s bomb %d: %v, want ErrTooLarge", name, i, err)
			}
			if bound := MemoryBound(p.codec, p.data, 1<<20); bound > 8<<20+2*zstdBlockBytes {
				t.Fatalf("%s bomb %d: MemoryBound %d", name, i, bound)
			}
			perBomb := alloctest.LeastPerCall(3, 20, func() { _ = drainBomb(p, window) })
			t.Logf("%s bomb %d (%d bytes): %d bytes allocated per bomb", name, i, len(p.data), perBomb)
			if !alloctest.RaceEnabled && perBomb > 256<<10 {
				t.Fatalf("%s bomb %d: %d bytes allocated per bomb", name, i, perBomb)
			}
		}
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(10, 50*time.Millisecond)
	got, err := b.Acquire(6)
	if err != nil || got != 6 {
		t.Fatal(got, err)
	}
	// Over the budget: the caller waits, and is served when room comes back.
	granted := make(chan int64)
	go func() {
		n, err := b.Acquire(6)
		if err != nil {
			n = -1
		}
		granted <- n
	}()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.waiters) == 1 })
	b.Release(6)
	if n := <-granted; n != 6 {
		t.Fatalf("waiter got %d", n)
	}
	// The wait is bounded.
	start := time.Now()
	if _, err := b.Acquire(5); !errors.Is(err, ErrBudgetTimeout) {
		t.Fatalf("full budget: %v", err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("returned before the wait")
	}
	b.Release(6)
	// More than the whole budget is cut to it: it runs alone rather than never.
	if n, err := b.Acquire(100); err != nil || n != 10 {
		t.Fatal(n, err)
	}
	b.Release(10)
	if b.PeakBytes() != 10 {
		t.Fatalf("peak %d", b.PeakBytes())
	}
}

// TestBudgetConcurrent: many callers at once never hold more than the budget between
// them, and all of them are served.
func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(100, 10*time.Second)
	var held, maxHeld atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n, err := b.Acquire(int64(10 + (g*7+i)%50))
				if err != nil {
					t.Error(err)
					return
				}
				h := held.Add(n)
				for {
					m := maxHeld.Load()
					if h <= m || maxHeld.CompareAndSwap(m, h) {
						break
					}
				}
				runtime.Gosched()
				held.Add(-n)
				b.Release(n)
			}
		}()
	}
	wg.Wait()
	if maxHeld.Load() > 100 || b.PeakBytes() > 100 {
		t.Fatalf("held %d at once (peak %d), budget 100", maxHeld.Load(), b.PeakBytes())
	}
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	err := await.Until(5*time.Second, time.Millisecond, func() error {
		if !cond() {
			return errors.New("condition not met")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
