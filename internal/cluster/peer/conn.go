package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestTimeout is how long a connection waits for the oldest unanswered request before
// it is declared dead (Kafka's request.timeout.ms for inter-broker clients). It runs only
// while something is in flight: an idle connection never times out.
const RequestTimeout = 30 * time.Second

// conn is one live connection. The lane's writer goroutine writes to it; its read goroutine
// reads the answers, which come in request order, and matches each to the oldest call in
// flight.
type conn struct {
	l     *lane
	nc    net.Conn
	bw    *bufio.Writer // only the writer touches it
	vers  apiVersions
	slots chan struct{} // one token per request in flight, MaxInFlight at most

	mu       sync.Mutex
	inflight []*call // written, not answered, oldest first
	dead     bool
	deadCh   chan struct{}
}

func newConn(l *lane, nc net.Conn, vers apiVersions) *conn {
	return &conn{l: l, nc: nc, bw: bufio.NewWriterSize(nc, 64<<10), vers: vers,
		slots: make(chan struct{}, MaxInFlight), deadCh: make(chan struct{})}
}

func (cn *conn) isDead() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.dead
}

// acquire takes an in-flight slot, flushing first if it has to wait for one: the answers
// it waits for may be to requests still in the buffer.
func (cn *conn) acquire(ctx context.Context) bool {
	select {
	case cn.slots <- struct{}{}:
		return true
	default:
	}
	cn.flush()
	select {
	case cn.slots <- struct{}{}:
		return true
	case <-cn.deadCh:
	case <-ctx.Done():
	}
	return false
}

func (cn *conn) release() { <-cn.slots }

// write puts c in flight and into the write buffer; a failure kills the connection.
func (cn *conn) write(c *call) {
	cn.mu.Lock()
	if cn.dead {
		cn.mu.Unlock()
		cn.release()
		// Never written: the lane's next connection may send it, but the queue behind it
		// has moved on, so it fails like the requests that were in flight.
		cn.l.finish(c, nil, cn.l.connErr(errors.New("connection closed")))
		return
	}
	if len(cn.inflight) == 0 {
		cn.nc.SetReadDeadline(time.Now().Add(RequestTimeout))
	}
	cn.inflight = append(cn.inflight, c)
	cn.mu.Unlock()
	if _, err := cn.bw.Write(c.frame); err != nil {
		cn.fail(err)
	}
}

func (cn *conn) flush() {
	if cn.bw.Buffered() == 0 {
		return
	}
	if err := cn.bw.Flush(); err != nil {
		cn.fail(err)
	}
}

// fail closes the connection and fails every call in flight on it.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.dead {
		cn.mu.Unlock()
		return
	}
	cn.dead = true
	close(cn.deadCh)
	inflight := cn.inflight
	cn.inflight = nil
	cn.mu.Unlock()
	cn.nc.Close()
	err = cn.l.connErr(err)
	for _, c := range inflight {
		cn.l.finish(c, nil, err)
	}
}

// read reads answers until the connection fails.
func (cn *conn) read() {
	defer cn.l.t.wg.Done()
	br := bufio.NewReaderSize(cn.nc, 64<<10)
	for {
		body, err := readFrame(br)
		if err != nil {
			cn.fail(err)
			return
		}
		cn.mu.Lock()
		if len(cn.inflight) == 0 {
			cn.mu.Unlock()
			cn.fail(errors.New("a response to no request"))
			return
		}
		c := cn.inflight[0]
		cn.inflight[0] = nil
		cn.inflight = cn.inflight[1:]
		if len(cn.inflight) > 0 {
			cn.nc.SetReadDeadline(time.Now().Add(RequestTimeout))
		} else {
			cn.nc.SetReadDeadline(time.Time{})
		}
		cn.mu.Unlock()
		resp, err := decodeResponse(c.req.ResponseKind(), c.version, c.corr, body)
		cn.release()
		if err != nil {
			// A stream that answered with something else cannot be trusted further.
			cn.l.finish(c, nil, cn.l.connErr(err))
			cn.fail(err)
			return
		}
		cn.l.finish(c, resp, nil)
	}
}

// readFrame reads one size-prefixed frame of at most MaxResponseBytes.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > MaxResponseBytes {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeResponse decodes a response frame's body (the header and the message) into resp
// at version. The response header has the correlation id and, from the first flexible
// version on, tagged fields, except ApiVersions', which is always v0 (KIP-511).
func decodeResponse(resp kmsg.Response, version int16, corr int32, body []byte) (kmsg.Response, error) {
	resp.SetVersion(version)
	r := kbin.Reader{Src: body}
	if got := r.Int32(); got != corr {
		return nil, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	if resp.Key() != 18 && resp.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return nil, errors.New("short response header")
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return nil, fmt.Errorf("decoding %T v%d: %w", resp, version, err)
	}
	return resp, nil
}

// putCorr writes a correlation id into a frame made by kmsg's RequestFormatter (size,
// key, version, then the id).
func putCorr(frame []byte, corr int32) { binary.BigEndian.PutUint32(frame[8:12], uint32(corr)) }

// apiVersions is what a peer's ApiVersions lists: key → [min, max].
type apiVersions map[int16][2]int16

// pick sets nothing: it returns the highest version of req both sides support.
func (v apiVersions) pick(req kmsg.Request) (int16, error) {
	r, ok := v[req.Key()]
	if !ok {
		return 0, fmt.Errorf("%w: key %d not listed", ErrUnsupported, req.Key())
	}
	ver := min(req.MaxVersion(), r[1])
	if ver < r[0] || ver < 0 {
		return 0, fmt.Errorf("%w: key %d, ours up to v%d, the peer's v%d-v%d", ErrUnsupported, req.Key(), req.MaxVersion(), r[0], r[1])
	}
	return ver, nil
}

func versionsOf(resp *kmsg.ApiVersionsResponse) apiVersions {
	v := make(apiVersions, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		v[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return v
}

// exchangeApiVersions asks a new connection's peer which versions it serves, at our
// highest ApiVersions version and, if the peer answers UNSUPPORTED_VERSION, once more at
// the highest it listed (Kafka's KIP-511 fallback).
func exchangeApiVersions(nc net.Conn, f *kmsg.RequestFormatter, deadline time.Time) (apiVersions, error) {
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "exactq"
	req.ClientSoftwareVersion = "peer"
	version := req.MaxVersion()
	for try := 0; ; try++ {
		req.SetVersion(version)
		if _, err := nc.Write(f.AppendRequest(nil, req, 0)); err != nil {
			return nil, err
		}
		body, err := readFrame(nc)
		if err != nil {
			return nil, err
		}
		resp, err := decodeResponse(req.ResponseKind(), version, 0, body)
		if err != nil {
			// An UNSUPPORTED_VERSION answer is a v0 body whatever version was asked.
			if resp, err = decodeResponse(req.ResponseKind(), 0, 0, body); err != nil {
				return nil, err
			}
		}
		ar := resp.(*kmsg.ApiVersionsResponse)
		if ar.ErrorCode == kerr.UnsupportedVersion.Code && try == 0 {
			if v, ok := versionsOf(ar)[18]; ok && v[1] < version && v[1] >= 0 {
				version = v[1]
				continue
			}
		}
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			return nil, err
		}
		return versionsOf(ar), nil
	}
}
