package hostile

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

// Finding 2: decoding a request could allocate tens of times its size (kmsg bounds an
// array count by the bytes left, one byte per element, while an element is a struct of
// tens of bytes and an unknown tagged field a map): ~3.7 GB per 100 MiB frame, and the
// broker was killed for memory.
func TestDecodeAmplification(t *testing.T) {
	frameBytes := sized(12<<20, 100<<20)
	frames := sized(4, 10)
	f := amplifyingProduce(frameBytes) // built before the victim's baseline, not during it
	runAttack(t, attack{
		name: "#2 decode-time amplification", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			// The broker closes a connection after a request it cannot parse, so each frame
			// goes on a new connection; two at a time. Memory freed by one decode and reused
			// by the next must be zeroed, which is what makes it resident.
			var wg sync.WaitGroup
			work := make(chan struct{}, frames)
			for range frames {
				work <- struct{}{}
			}
			close(work)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						c, err := dialAttacker(h.addr())
						if err != nil {
							return
						}
						_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
						if _, err := c.Write(f); err == nil {
							drain(c, 5*time.Second)
						}
						c.Close()
					}
				}()
			}
			wg.Wait()
		},
	})
}

// amplifyingProduce is a flexible Produce v9 frame of about size bytes whose topic array
// holds as many elements as fit in 5 bytes each: an empty name, no partitions and one
// unknown tagged field. Each decodes into a 64-byte struct plus a map for the tag (~50x the
// wire bytes, all of it written, so all of it resident).
func amplifyingProduce(size int) []byte {
	const elemBytes = 5
	n := (size - 16) / elemBytes
	body := []byte{0}                                  // null transactional id (compact)
	body = binary.BigEndian.AppendUint16(body, 0xffff) // acks -1
	body = binary.BigEndian.AppendUint32(body, 10000)  // timeout
	body = binary.AppendUvarint(body, uint64(n)+1)     // compact array of n topics
	for range n {
		body = append(body, 1, 1, 1, 0, 0) // "", [], one tag: id 0, size 0
	}
	body = append(body, 0) // request tags
	return rawRequest(0, 9, 1, true, body)
}

// drain reads from c until the broker closes it or timeout passes.
func drain(c net.Conn, timeout time.Duration) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64<<10)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}
