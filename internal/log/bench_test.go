package log

import (
	"math"
	"math/rand"
	"sync"
	"testing"

	"github.com/exactq/exactq/internal/batch"
)

// benchBatch is a 16 KiB batch of 1 KiB records.
func benchBatch() []byte { return valueBatch(16, 1000, 1_700_000_000_000) }

func BenchmarkAppend(b *testing.B) {
	l := openT(b, b.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	bb := benchBatch()
	batches := [][]byte{bb}
	b.SetBytes(int64(len(bb)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := l.Append(batches); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendWaitDurable: one producer waiting for each batch to be fsynced
// (acks=all with one request in flight): one fsync per append.
func BenchmarkAppendWaitDurable(b *testing.B) {
	l := openT(b, b.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	bb := benchBatch()
	batches := [][]byte{bb}
	b.SetBytes(int64(len(bb)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		appendDurable(b, l, batches)
	}
}

// appendDurable appends batches and waits until they are durable, as an acks=all produce
// does.
func appendDurable(b *testing.B, l *Log, batches [][]byte) {
	_, last, err := l.Append(batches)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.WaitDurable(last + 1); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppendWaitDurableParallel: many producers at once (acks=all), sharing fsyncs.
func BenchmarkAppendWaitDurableParallel(b *testing.B) {
	l := openT(b, b.TempDir(), DefaultConfig(), nil)
	defer l.Close()
	b.SetBytes(int64(len(benchBatch())))
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		batches := [][]byte{benchBatch()}
		for pb.Next() {
			appendDurable(b, l, batches)
		}
	})
}

// BenchmarkRead reads 1 MiB fetches at random offsets of a 64 MiB log (page cache).
func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	l := openT(b, b.TempDir(), cfg, nil)
	defer l.Close()
	bb := benchBatch()
	for n := 0; n < (64<<20)/len(bb); n++ {
		if _, _, err := l.Append([][]byte{bb}); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	rng := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	b.ResetTimer()
	var total int64
	for i := 0; i < b.N; i++ {
		got, err := l.Read(rng.Int63n(end), 1<<20, math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(got))
	}
	b.SetBytes(total / int64(b.N))
}

// TestConcurrent runs appenders, readers and durable waiters together (run with -race):
// offsets are handed out without gaps or overlaps, every read returns whole batches in
// offset order, and everything is durable at the end. With a one-file descriptor cache,
// readers of older segments and the appender evict each other's files all the time.
func TestConcurrent(t *testing.T) {
	t.Run("cache=default", func(t *testing.T) { testConcurrent(t, nil) })
	t.Run("cache=1", func(t *testing.T) {
		files := NewFileCache(1)
		testConcurrent(t, files)
		if st := files.Stats(); st.Evictions == 0 || st.Open != 0 {
			t.Fatalf("cache after the run: %+v; want evictions and nothing open", st)
		}
	})
}

func testConcurrent(t *testing.T, files *FileCache) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 20_000
	cfg.IndexIntervalBytes = 500
	l, err := Open(memTempDir(t), cfg, Options{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const writers, perWriter = 4, 200
	var wg sync.WaitGroup
	firsts := make(chan [2]int64, writers*perWriter)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				b := valueBatch(1+i%3, 50+w*10, int64(i))
				first, last, err := l.Append([][]byte{b})
				if err != nil {
					t.Error(err)
					return
				}
				firsts <- [2]int64{first, last}
				if i%10 == 0 {
					if err := l.WaitDurable(last + 1); err != nil {
						t.Error(err)
						return
					}
					if l.DurableEnd() < last+1 {
						t.Errorf("WaitDurable returned before %d was durable", last+1)
					}
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for r := 0; r < 3; r++ {
		rwg.Add(1)
		go func(seed int64) {
			defer rwg.Done()
			rng := rand.New(rand.NewSource(seed))
			for {
				select {
				case <-stop:
					return
				default:
				}
				end := l.EndOffset()
				if end == 0 {
					continue
				}
				off := rng.Int63n(end)
				got, err := l.Read(off, int32(rng.Intn(5000)), math.MaxInt64)
				if err != nil {
					t.Error(err)
					return
				}
				bs, err := batch.Split(got)
				if err != nil || len(bs) == 0 {
					t.Errorf("Read(%d): %d batches, %v", off, len(bs), err)
					return
				}
				if batch.BaseOffset(bs[0]) > off || lastOffset(bs[0]) < off {
					t.Errorf("Read(%d) starts with batch %d..%d", off, batch.BaseOffset(bs[0]), lastOffset(bs[0]))
				}
				for i, b := range bs {
					if !batch.CRCValid(b) || i > 0 && batch.BaseOffset(b) != lastOffset(bs[i-1])+1 {
						t.Errorf("Read(%d): batch %d bad or out of order", off, i)
						return
					}
				}
			}
		}(int64(r))
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(firsts)
	seen := make([]bool, l.EndOffset())
	for r := range firsts {
		for o := r[0]; o <= r[1]; o++ {
			if seen[o] {
				t.Fatalf("offset %d assigned twice", o)
			}
			seen[o] = true
		}
	}
	for o, ok := range seen {
		if !ok {
			t.Fatalf("offset %d never assigned", o)
		}
	}
	if err := l.WaitDurable(l.EndOffset()); err != nil || l.DurableEnd() != l.EndOffset() {
		t.Fatalf("final WaitDurable: %v, durable %d of %d", err, l.DurableEnd(), l.EndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
