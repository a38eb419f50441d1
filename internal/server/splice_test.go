package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// splicePart is a piece of a test spliced body: bytes, or a chunk of the test file.
type splicePart struct {
	data  []byte
	chunk FileChunk
}

// testSpliced is a Metadata response whose body is parts (the server does not interpret
// bodies, and the raw client compares bytes), counting its releases.
type testSpliced struct {
	*kmsg.MetadataResponse
	parts    []splicePart
	fail     error // AppendSpliced's error
	released chan struct{}
	releases atomic.Int32
}

func newTestSpliced(parts ...splicePart) *testSpliced {
	return &testSpliced{MetadataResponse: kmsg.NewPtrMetadataResponse(), parts: parts, released: make(chan struct{}, 1)}
}

func (r *testSpliced) AppendSpliced(dst []byte, ins []Insert) ([]byte, []Insert, error) {
	if r.fail != nil {
		return dst, ins, r.fail
	}
	for _, p := range r.parts {
		if p.chunk.Len > 0 {
			ins = append(ins, Insert{At: len(dst), Chunk: p.chunk})
		} else {
			dst = append(dst, p.data...)
		}
	}
	return dst, ins, nil
}

// AppendTo is the copying encoding (what the wire must carry).
func (r *testSpliced) AppendTo(dst []byte) []byte {
	for _, p := range r.parts {
		if p.chunk.Len > 0 {
			b := make([]byte, p.chunk.Len)
			if _, err := p.chunk.File.ReadAt(b, p.chunk.Off); err != nil {
				panic(err)
			}
			dst = append(dst, b...)
		} else {
			dst = append(dst, p.data...)
		}
	}
	return dst
}

func (r *testSpliced) Release() {
	if r.releases.Add(1) == 1 {
		r.released <- struct{}{}
	}
}

// waitReleased asserts the response is released exactly once, soon.
func (r *testSpliced) waitReleased(t *testing.T) {
	t.Helper()
	select {
	case <-r.released:
	case <-time.After(safetyDeadline):
		t.Fatal("spliced response never released")
	}
	if n := r.releases.Load(); n != 1 {
		t.Fatalf("released %d times", n)
	}
}

// spliceFile is a temporary file of n pseudo-random bytes.
func spliceFile(t *testing.T, n int) *os.File {
	t.Helper()
	data := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(data)
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// hidingListener wraps accepted connections so the server cannot see a *net.TCPConn, as
// with TLS: it must take the copying path.
type hidingListener struct{ net.Listener }

func (l hidingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{c}, nil
}

// startSpliceServer serves h over plain TCP (sendfile) or through hidingListener (copying).
func startSpliceServer(t *testing.T, h Handler, zeroCopy bool) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !zeroCopy {
		ln = hidingListener{ln}
	}
	s := New(Config{}, h, quietLogger(t))
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s
}

// wantFrame is the frame a spliced response must produce: the copying encoding.
func wantFrame(corr int32, version int16, r *testSpliced) []byte {
	r.SetVersion(version)
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if r.IsFlexible() {
		body = append(body, 0)
	}
	return r.AppendTo(body)
}

// TestSplicedResponse: the bytes on the wire are the copying encoding, whether chunks go
// with sendfile (large, plain TCP) or are copied (small, or a connection that hides its
// socket); chunks may sit at the start, the end, next to each other and at one position;
// and the response is released once.
func TestSplicedResponse(t *testing.T) {
	f := spliceFile(t, 1<<20)
	chunk := func(off, n int64) splicePart { return splicePart{chunk: FileChunk{File: f, Off: off, Len: n}} }
	data := func(s string) splicePart { return splicePart{data: []byte(s)} }
	bodies := map[string][]splicePart{
		"small":    {data("head"), chunk(10, 100), data("tail")},
		"large":    {data("head"), chunk(1000, 300_000), data("tail")},
		"boundary": {chunk(0, sendfileMinBytes-1), data("x"), chunk(5, sendfileMinBytes), data("y")},
		"adjacent": {data("h"), chunk(0, 70_000), chunk(70_000, 5), chunk(70_005, 200_000), data("t")},
		"edges":    {chunk(1<<20-40_000, 40_000), data("middle"), chunk(3, 17)},
		"many":     {data("a"), chunk(1, 1), data("b"), chunk(2, 50_000), data("c"), chunk(999_999, 1), chunk(0, 1<<20)},
	}
	for _, zeroCopy := range []bool{true, false} {
		for name, parts := range bodies {
			for _, version := range []int16{1, 12} { // header v0 and flexible v1
				t.Run(fmt.Sprintf("zeroCopy=%v/%s/v%d", zeroCopy, name, version), func(t *testing.T) {
					h := newTestHandler()
					resp := newTestSpliced(parts...)
					h.handle = func(ctx context.Context, req *Request) Reply { return Reply{Resp: resp} }
					c := dial(t, startSpliceServer(t, h, zeroCopy))
					c.send(metadataReq(version), 7)
					corr, body, err := c.readFrame()
					if err != nil {
						t.Fatal(err)
					}
					got := binary.BigEndian.AppendUint32(nil, uint32(corr))
					got = append(got, body...)
					if want := wantFrame(7, version, resp); !bytes.Equal(got, want) {
						t.Fatalf("frame of %d bytes differs from the copying encoding (%d bytes)", len(got), len(want))
					}
					resp.waitReleased(t)
				})
			}
		}
	}
}

// TestSplicedPipelined: spliced responses (immediate and from Wait) and ordinary ones
// leave in request order, each intact, several connections sending the same file ranges at
// once (sendfile must not use the file's shared position).
func TestSplicedPipelined(t *testing.T) {
	f := spliceFile(t, 1<<20)
	h := newTestHandler()
	h.handle = func(ctx context.Context, req *Request) Reply {
		n := req.CorrelationID
		resp := newTestSpliced(splicePart{data: []byte(fmt.Sprint(n))},
			splicePart{chunk: FileChunk{File: f, Off: int64(n) * 1000, Len: 64<<10 + int64(n)}})
		switch n % 3 {
		case 0:
			return Reply{Resp: resp}
		case 1:
			return Reply{Wait: func() kmsg.Response { return resp }}
		}
		return Reply{Resp: req.Body.ResponseKind()}
	}
	s := startSpliceServer(t, h, true)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		c := dial(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			const n = 60
			var frames []byte
			for i := range n {
				frames = append(frames, c.f.AppendRequest(nil, metadataReq(1), int32(i))...)
			}
			go c.nc.Write(frames)
			for i := range n {
				corr, body, err := c.readFrame()
				if err != nil || corr != int32(i) {
					errs <- fmt.Errorf("response %d: corr %d, %v", i, corr, err)
					return
				}
				if i%3 == 2 {
					continue
				}
				want := wantFrame(int32(i), 1, newTestSpliced(splicePart{data: []byte(fmt.Sprint(i))},
					splicePart{chunk: FileChunk{File: f, Off: int64(i) * 1000, Len: 64<<10 + int64(i)}}))
				if !bytes.Equal(body, want[4:]) {
					errs <- fmt.Errorf("response %d: body differs", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestSplicedShortFile: a chunk reaching past the end of its file (which a log never
// allows) cannot be sent whole; the connection closes, so the client sees a short frame
// or none, never wrong bytes; the response is still released.
func TestSplicedShortFile(t *testing.T) {
	f := spliceFile(t, 100_000)
	for _, zeroCopy := range []bool{true, false} {
		t.Run(fmt.Sprintf("zeroCopy=%v", zeroCopy), func(t *testing.T) {
			h := newTestHandler()
			resp := newTestSpliced(splicePart{data: []byte("head")}, splicePart{chunk: FileChunk{File: f, Off: 50_000, Len: 60_000}})
			h.handle = func(ctx context.Context, req *Request) Reply { return Reply{Resp: resp} }
			c := dial(t, startSpliceServer(t, h, zeroCopy))
			c.send(metadataReq(1), 1)
			if _, _, err := c.readFrame(); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				t.Fatalf("read %v, want the connection closed", err)
			}
			resp.waitReleased(t)
		})
	}
}

// TestSplicedEncodeError: a response that cannot be encoded closes the connection (after
// the earlier responses) and is released.
func TestSplicedEncodeError(t *testing.T) {
	h := newTestHandler()
	resp := newTestSpliced()
	resp.fail = errors.New("segment unreadable")
	h.handle = func(ctx context.Context, req *Request) Reply {
		if req.CorrelationID == 0 {
			return Reply{Resp: req.Body.ResponseKind()}
		}
		return Reply{Resp: resp}
	}
	c := dial(t, startSpliceServer(t, h, true))
	c.send(metadataReq(1), 0)
	c.send(metadataReq(1), 1)
	if corr, _ := c.recv(metadataReq(1)); corr != 0 {
		t.Fatalf("first response corr %d", corr)
	}
	c.expectClosed()
	resp.waitReleased(t)
}

// TestSplicedReleasedWhenDropped: responses that are never written because writing failed
// are released all the same, immediate ones and those from Wait.
func TestSplicedReleasedWhenDropped(t *testing.T) {
	f := spliceFile(t, 1000)
	var mu sync.Mutex
	var resps []*testSpliced
	h := newTestHandler()
	h.handle = func(ctx context.Context, req *Request) Reply {
		resp := newTestSpliced(splicePart{chunk: FileChunk{File: f, Off: 0, Len: 10}})
		mu.Lock()
		resps = append(resps, resp)
		mu.Unlock()
		if req.CorrelationID%2 == 0 {
			return Reply{Resp: resp}
		}
		return Reply{Wait: func() kmsg.Response { return resp }}
	}
	sc := newScriptConn()
	sc.failWrites.Store(true)
	s := New(Config{}, h, quietLogger(t))
	go s.Serve(&oneConnListener{c: sc, done: make(chan struct{})})
	defer s.Close()
	fmtr := kmsg.NewRequestFormatter()
	var frames []byte
	for i := range 6 {
		frames = append(frames, fmtr.AppendRequest(nil, metadataReq(1), int32(i))...)
	}
	sc.reads <- readEvent{data: frames}
	<-h.ended
	mu.Lock()
	defer mu.Unlock()
	if len(resps) == 0 {
		t.Fatal("no request handled")
	}
	for _, r := range resps {
		r.waitReleased(t)
	}
}
