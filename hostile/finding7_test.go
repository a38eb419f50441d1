package hostile

import (
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/compress"
)

// Finding 7: eight connections sending 1 MiB zstd bombs for 30 s: each batch was
// decompressed up to 64 MiB before it was refused; the broker reached 1.6 GB and the
// victim's produce p99 went from ~10 ms to 1 s. Decompression must stop at the topic's
// max.message.bytes, with a broker-wide budget.
func TestDecompressionFlood(t *testing.T) {
	conns := sized(4, 8)
	bomb := zstdBomb(t)
	runAttack(t, attack{
		name: "#7 decompression flood", rssBytes: defaultRSSBound, minRatio: floodRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), "bombed", 1, nil)
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int16]int{}
			deadline := time.Now().Add(sized(3*time.Second, 30*time.Second))
			for range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dialRaw(t, h.addr())
					// 50 bombs a second per connection: a refused bomb now costs at most
					// max.message.bytes of decompression, and back to back four of them
					// would take both CPUs from the victim without exposing anything.
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					for ; time.Now().Before(deadline); <-tick.C {
						code, err := produceRaw(t, c, "bombed", 0, bomb)
						if err != nil {
							c = dialRaw(t, h.addr())
							continue
						}
						mu.Lock()
						codes[code]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			t.Logf("bomb produce answers by error code: %v", codes)
			if codes[0] > 0 {
				t.Errorf("%d bombs were accepted", codes[0])
			}
		},
	})
}

// zstdBomb is a CRC-valid zstd batch of about 1 MB whose records section decompresses to
// gigabytes: the same small zstd frame (1 MiB of zeros) repeated, which a zstd decoder
// reads as one stream.
func zstdBomb(t *testing.T) []byte {
	t.Helper()
	frame, err := compress.Compress(compress.Zstd, nil, make([]byte, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	for len(stream)+len(frame) < 1_000_000 {
		stream = append(stream, frame...)
	}
	b := noProducer(0, 1, nil)
	b.codec = compress.Zstd
	return b.bytesCompressed(t, stream)
}
