package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// bytesConn is a net.Conn reading a fixed byte string: what one client sent.
type bytesConn struct{ r *bytes.Reader }

func (c *bytesConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *bytesConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *bytesConn) Close() error                     { return nil }
func (c *bytesConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *bytesConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *bytesConn) SetDeadline(time.Time) error      { return nil }
func (c *bytesConn) SetReadDeadline(time.Time) error  { return nil }
func (c *bytesConn) SetWriteDeadline(time.Time) error { return nil }

// Allocation limits of FuzzRequestPath.
const (
	// maxDecodedPerByte bounds what decoding a request may allocate per byte of its
	// frame. The worst honest shape is an unknown tagged field: ~190 bytes in kmsg's map
	// for 2 bytes on the wire; a lying array count made kmsg allocate up to ~190 bytes
	// per byte (issue #17 finding 2) before decodecost refused such bodies.
	maxDecodedPerByte = 128
	// pathSlackBytes covers the fixed allocations of one request: the request struct,
	// header strings, an error and its message.
	pathSlackBytes = 16 << 10
)

// requestPathSeeds are seedFrames with their size prefixes, plus bodies whose counts lie.
func requestPathSeeds() [][]byte {
	var seeds [][]byte
	for _, frame := range seedFrames() {
		seeds = append(seeds, append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	}
	// Metadata v4 whose topic count is as large as kmsg's check lets it be (2 bytes a
	// topic): kmsg made a 50,000-topic array from these 100 KB, then failed.
	lie := frameBody(metadataReq(4), 4, 1)
	lie = lie[:len(lie)-5] // drop the empty topic array and the auto-create flag
	lie = binary.BigEndian.AppendUint32(lie, 50000)
	lie = append(lie, bytes.Repeat([]byte{0x7f}, 100000)...)
	seeds = append(seeds, append(binary.BigEndian.AppendUint32(nil, uint32(len(lie))), lie...))
	return seeds
}

// FuzzRequestPath drives the whole read path over what one client sent (size prefix,
// frame, header, decodecost, the request budget, kmsg decode), frame after frame, and
// bounds what it allocates: per frame at most its buffer (twice, while growing), what the
// budget was charged for decoding it, and a fixed slack; and the decode charge at most
// maxDecodedPerByte per frame byte. A count that makes kmsg allocate more than decodecost
// charged, or a charge out of proportion to the bytes sent, fails. The read path never
// panics.
func FuzzRequestPath(f *testing.F) {
	for _, s := range requestPathSeeds() {
		f.Add(s)
	}
	table := kafka44Table()
	s := New(Config{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: -1}, &testHandler{apis: nil}, quietLogger(f))
	s.apis = table
	br := bufio.NewReaderSize(nil, readerBufBytes)
	f.Fuzz(func(t *testing.T, input []byte) {
		nc := &bytesConn{r: bytes.NewReader(input)}
		c := newConn(s, nc, netip.Addr{}, DefaultListenerName)
		br.Reset(nc)
		for {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			frame, charge, err := c.readFrame(br)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrameSize) {
					t.Fatalf("read: %v", err)
				}
				break
			}
			_, err = decodeRequest(frame, s.apis, func(n int64) error { return c.chargeDecoded(&charge, n) })
			runtime.ReadMemStats(&after)
			c.release(charge)
			if he := (*headerError)(nil); errors.As(err, &he) && he.panicked {
				t.Fatalf("decoder panic: %v", err)
			}
			allocated := int64(after.TotalAlloc - before.TotalAlloc)
			if limit := 2*charge.frameBytes + charge.decodedBytes + pathSlackBytes; allocated > limit {
				t.Fatalf("%d-byte frame: allocated %d bytes, charged %d for the frame and %d for decoding (limit %d): %v",
					len(frame), allocated, charge.frameBytes, charge.decodedBytes, limit, err)
			}
			if limit := maxDecodedPerByte*int64(len(frame)) + pathSlackBytes; charge.decodedBytes > limit {
				t.Fatalf("%d-byte frame: decoding charged %d bytes, over %d per byte", len(frame), charge.decodedBytes, maxDecodedPerByte)
			}
		}
		if got := s.QueuedRequestBytes(); got != 0 {
			t.Fatalf("%d bytes still charged", got)
		}
	})
}

// TestRequestPathLyingCount: the lying-count seed is refused without kmsg allocating its
// array (a regression test of FuzzRequestPath's limit; it failed before decodecost was
// called: 2.6 MB allocated for 100 KB, nothing charged).
func TestRequestPathLyingCount(t *testing.T) {
	seeds := requestPathSeeds()
	lie := seeds[len(seeds)-1][4:]
	var charged int64 = -1
	_, err := decodeRequest(lie, kafka44Table(), func(n int64) error { charged = n; return nil })
	if !errors.Is(err, ErrMalformedRequest) || charged != -1 {
		t.Fatalf("lying count: %v, charged %d", err, charged)
	}
}
