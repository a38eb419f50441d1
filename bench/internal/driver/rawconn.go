package driver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxAnswerBytes bounds one answer the raw generator reads (a Fetch answer is at most the
// request's MaxBytes plus headers; Kafka's own socket.request.max.bytes is 100 MiB).
const maxAnswerBytes = 256 << 20

// rawConn is one TCP connection to a broker speaking the Kafka protocol with kmsg and
// nothing else: ApiVersions once, then requests written and answers read in order, so a
// caller can pipeline (write several, read their answers in the order written). Unlike a
// kgo client it neither batches nor decodes records: the raw generator's cost per request
// is a few header bytes, so the broker bounds the workload.
type rawConn struct {
	c        net.Conn
	r        *bufio.Reader
	fmt      *kmsg.RequestFormatter
	versions map[int16]int16 // the broker's highest version per API key
	corr     int32
	frame    []byte // reused answer buffer
	stop     func() bool
}

// dialRaw connects to addr and asks its API versions; ctx ending closes the connection.
func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	rc := &rawConn{c: c, r: bufio.NewReaderSize(c, 1<<20), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("exactq-bench-raw")),
		versions: map[int16]int16{}}
	rc.stop = context.AfterFunc(ctx, func() { c.Close() })
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "exactq-bench", "1"
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := rc.roundTrip(req, resp); err != nil {
		rc.Close()
		return nil, fmt.Errorf("bench: ApiVersions to %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		rc.Close()
		return nil, fmt.Errorf("bench: ApiVersions to %s: %w", addr, err)
	}
	for _, k := range resp.ApiKeys {
		rc.versions[k.ApiKey] = k.MaxVersion
	}
	return rc, nil
}

// Close closes the connection.
func (rc *rawConn) Close() {
	rc.stop()
	rc.c.Close()
}

// negotiate sets req's version to the highest both kmsg and the broker know.
func (rc *rawConn) negotiate(req kmsg.Request) error {
	b, ok := rc.versions[req.Key()]
	if !ok {
		return fmt.Errorf("bench: the broker does not support API key %d", req.Key())
	}
	req.SetVersion(min(req.MaxVersion(), b))
	return nil
}

// frameFor is req as the bytes to write, with the next correlation id.
func (rc *rawConn) frameFor(req kmsg.Request) ([]byte, int32) {
	rc.corr++
	return rc.fmt.AppendRequest(nil, req, rc.corr), rc.corr
}

func (rc *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	b, corr := rc.frameFor(req)
	if _, err := rc.c.Write(b); err != nil {
		return err
	}
	resp.SetVersion(req.GetVersion())
	return rc.readAnswer(corr, resp)
}

// readAnswer reads the next answer, which must carry corr, into resp (its version set).
// resp may keep references into the connection's buffer until the next read.
func (rc *rawConn) readAnswer(corr int32, resp kmsg.Response) error {
	var hdr [4]byte
	if _, err := io.ReadFull(rc.r, hdr[:]); err != nil {
		return err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 4 || n > maxAnswerBytes {
		return fmt.Errorf("bench: answer of %d bytes", n)
	}
	if cap(rc.frame) < n {
		rc.frame = make([]byte, n)
	}
	body := rc.frame[:n]
	if _, err := io.ReadFull(rc.r, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return fmt.Errorf("bench: answer for correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	// Flexible answers (ApiVersions excepted) carry a tag buffer in the header.
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = skipTags(body); err != nil {
			return err
		}
	}
	return resp.ReadFrom(body)
}

// skipTags skips a header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	bad := errors.New("bench: bad tagged fields in an answer header")
	uvarint := func() (uint64, bool) {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return v, true
	}
	n, ok := uvarint()
	if !ok {
		return nil, bad
	}
	for range n {
		if _, ok := uvarint(); !ok { // the tag
			return nil, bad
		}
		size, ok := uvarint()
		if !ok || size > uint64(len(b)) {
			return nil, bad
		}
		b = b[size:]
	}
	return b, nil
}
