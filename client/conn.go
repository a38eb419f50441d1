package client

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

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/txn/txnwire"
)

// Limits of one connection.
const (
	// maxPipelined bounds the requests written to one connection whose responses have not
	// been read yet. The producer keeps its own, lower bound (MaxInFlight).
	maxPipelined = 64
	// defaultMaxResponseBytes bounds one response frame; a larger size prefix means a
	// desynchronised or hostile peer and the connection is closed.
	defaultMaxResponseBytes = 256 << 20
)

// ErrConnClosed is returned for requests on a connection that was closed, by us or by the
// broker. It is retriable: the next request dials again.
var ErrConnClosed = errors.New("client: connection closed")

// softwareName and softwareVersion identify us in ApiVersions v3+ (KIP-511).
const (
	softwareName    = "exactq-go"
	softwareVersion = "0.1.0"
)

// conn is one TCP connection to one broker. Requests are pipelined: send writes a request
// and queues its call; a reader goroutine reads responses in order and completes the calls
// in the same order, checking each correlation id (Kafka answers a connection's requests in
// the order they were sent).
//
// A request whose caller stops waiting (context done) closes the connection, as the Java
// client does on a request timeout: the broker may still be working on it, and a response
// we no longer wait for is indistinguishable from a stuck broker.
type conn struct {
	addr     string
	nc       net.Conn
	clientID *string
	maxResp  int32

	// versions and features are written once by handshake, before the conn is shared;
	// read-only after. features maps a finalized feature (transaction.version, ...) to its
	// finalized max level, from ApiVersions v3+.
	versions versionTable
	features map[string]int16
	// others holds the broker's ranges for requests written outside kmsg: keys kmsg does
	// not define (txnshare.Request) and InitProducerId, which txnwire encodes up to v6
	// (KIP-939) where kmsg stops at v5; see otherVersion.
	others map[int16]kmsg.ApiVersionsResponseApiKey

	// writeMu serialises writes and the push onto pending, so the pending order is the
	// wire order.
	writeMu sync.Mutex
	corrID  int32 // under writeMu
	bw      *bufio.Writer
	fmtr    *kmsg.RequestFormatter

	// pending holds written calls in wire order; the reader pops them.
	pending chan *call

	closeOnce sync.Once
	dead      chan struct{} // closed when the connection is unusable
	deadErr   error         // set before dead is closed
}

// call is one request in flight on a conn.
type call struct {
	corrID int32
	req    kmsg.Request
	done   chan struct{} // closed when resp or err is set
	resp   kmsg.Response
	err    error
	c      *conn
}

// dialConn connects to addr and negotiates API versions.
func dialConn(ctx context.Context, cfg *netConfig, addr string) (*conn, error) {
	nc, err := cfg.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	c := newConn(nc, addr, cfg.clientID, cfg.maxResponseBytes)
	if err := c.handshake(ctx); err != nil {
		c.close(err)
		return nil, err
	}
	return c, nil
}

func newConn(nc net.Conn, addr string, clientID string, maxResp int32) *conn {
	if maxResp <= 0 {
		maxResp = defaultMaxResponseBytes
	}
	c := &conn{
		addr:    addr,
		nc:      nc,
		maxResp: maxResp,
		bw:      bufio.NewWriterSize(nc, 64<<10),
		pending: make(chan *call, maxPipelined),
		dead:    make(chan struct{}),
	}
	if clientID != "" {
		c.clientID = &clientID
	}
	c.fmtr = kmsg.NewRequestFormatter()
	if c.clientID != nil {
		c.fmtr = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	}
	for i := range c.versions {
		c.versions[i] = -1
	}
	go c.readLoop()
	return c
}

// handshake sends ApiVersions at our highest version; a broker that does not know that
// version answers UNSUPPORTED_VERSION in the v0 format with its own range for ApiVersions,
// and we retry once at that version (KIP-511).
func (c *conn) handshake(ctx context.Context) error {
	version := (&kmsg.ApiVersionsRequest{}).MaxVersion()
	for attempt := 0; attempt < 2; attempt++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName = softwareName
		req.ClientSoftwareVersion = softwareVersion
		req.SetVersion(version)
		resp, err := c.roundTrip(ctx, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode == kerr.UnsupportedVersion.Code {
			next := int16(-1)
			for _, k := range r.ApiKeys {
				if k.ApiKey == req.Key() {
					next = min(k.MaxVersion, version-1)
				}
			}
			if next < 0 || attempt > 0 {
				return fmt.Errorf("client: %s: ApiVersions: %w", c.addr, kerr.UnsupportedVersion)
			}
			version = next
			continue
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("client: %s: ApiVersions: %w", c.addr, err)
		}
		c.versions = negotiate(r.ApiKeys)
		for _, k := range r.ApiKeys {
			if kmsg.RequestForKey(k.ApiKey) == nil || k.ApiKey == kmsg.InitProducerID.Int16() {
				if c.others == nil {
					c.others = make(map[int16]kmsg.ApiVersionsResponseApiKey)
				}
				c.others[k.ApiKey] = k
			}
		}
		if len(r.FinalizedFeatures) > 0 {
			c.features = make(map[string]int16, len(r.FinalizedFeatures))
			for _, f := range r.FinalizedFeatures {
				c.features[f.Name] = f.MaxVersionLevel
			}
		}
		return nil
	}
	return fmt.Errorf("client: %s: ApiVersions: %w", c.addr, kerr.UnsupportedVersion)
}

// do sends req at the negotiated version and waits for its response.
func (c *conn) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.doMax(ctx, req, -1)
}

// doMax is do with the version capped at hi (hi < 0: no cap). A cap below the lowest
// version both sides support fails with UNSUPPORTED_VERSION.
func (c *conn) doMax(ctx context.Context, req kmsg.Request, hi int16) (kmsg.Response, error) {
	v := c.versions.get(req.Key())
	if _, own := req.(*txnwire.InitProducerIDRequest); own || (v < 0 && kmsg.RequestForKey(req.Key()) == nil) {
		v = otherVersion(c.others, req)
	}
	if hi >= 0 && v > hi {
		v = hi
		if lo, _, _ := clientRange(req.Key()); v < lo {
			v = -1
		}
	}
	if v < 0 {
		return nil, fmt.Errorf("client: %s does not support %s: %w", c.addr, kmsg.NameForKey(req.Key()), kerr.UnsupportedVersion)
	}
	req.SetVersion(v)
	return c.roundTrip(ctx, req)
}

// roundTrip sends req at the version it carries and waits for the response.
func (c *conn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return cl.wait(ctx)
}

// version returns the negotiated version for key, -1 when the broker lacks it.
func (c *conn) version(key int16) int16 { return c.versions.get(key) }

// feature returns the finalized max level of a feature, 0 when the broker did not
// finalize it (Kafka's "not enabled").
func (c *conn) feature(name string) int16 { return c.features[name] }

// send writes req (its version already set) and returns its call without waiting for the
// response. Calls complete in send order. A produce request with acks=0 gets no response
// and its call completes as soon as it is written.
func (c *conn) send(ctx context.Context, req kmsg.Request) (*call, error) {
	select {
	case <-c.dead:
		return nil, c.deadErr
	default:
	}
	noResponse := false
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		noResponse = true
	}
	cl := &call{req: req, done: make(chan struct{}), c: c}

	cl, writeErr, err := c.write(ctx, cl, noResponse)
	if err != nil {
		return nil, err
	}
	if writeErr != nil {
		// close (outside writeMu, which it takes) fails every pending call, this one
		// included since it was queued before the write.
		c.close(fmt.Errorf("client: write to %s: %w", c.addr, writeErr))
		if noResponse {
			return nil, c.deadErr
		}
	}
	if noResponse {
		close(cl.done)
	}
	return cl, nil
}

// write queues cl on pending and writes its request, under writeMu. err means nothing was
// written; writeErr means the connection is broken (the caller closes it).
func (c *conn) write(ctx context.Context, cl *call, noResponse bool) (_ *call, writeErr, err error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	// close drains pending under writeMu after closing dead: checking dead here, under the
	// lock, guarantees nothing is queued after that drain.
	select {
	case <-c.dead:
		return nil, nil, c.deadErr
	default:
	}
	if !noResponse {
		// Reserve the pending slot first: when the pipeline is full we block here,
		// before writing, so at most maxPipelined responses are ever outstanding.
		select {
		case c.pending <- cl:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-c.dead:
			return nil, nil, c.deadErr
		}
	}
	c.corrID++
	cl.corrID = c.corrID
	buf := c.fmtr.AppendRequest(nil, cl.req, cl.corrID)
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetWriteDeadline(dl)
	} else {
		_ = c.nc.SetWriteDeadline(noDeadline)
	}
	if _, writeErr = c.bw.Write(buf); writeErr == nil {
		writeErr = c.bw.Flush()
	}
	return cl, writeErr, nil
}

// wait blocks until the response arrives or ctx is done. A done ctx closes the connection
// (see conn).
func (cl *call) wait(ctx context.Context) (kmsg.Response, error) {
	select {
	case <-cl.done:
		return cl.resp, cl.err
	default:
	}
	select {
	case <-cl.done:
		return cl.resp, cl.err
	case <-ctx.Done():
		cl.c.close(fmt.Errorf("client: %s: request %s abandoned: %w", cl.c.addr, kmsg.NameForKey(cl.req.Key()), ctx.Err()))
		<-cl.done
		if cl.err == nil {
			return cl.resp, nil // the response won the race
		}
		return nil, ctx.Err()
	}
}

// readLoop reads responses in order and completes pending calls. It exits, closing the
// connection, on the first read or decode error.
func (c *conn) readLoop() {
	var sizeBuf [4]byte
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			c.close(fmt.Errorf("client: read from %s: %w", c.addr, err))
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 4 || size > c.maxResp {
			c.close(fmt.Errorf("client: %s: response size %d out of range", c.addr, size))
			return
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(br, body); err != nil {
			c.close(fmt.Errorf("client: read from %s: %w", c.addr, err))
			return
		}
		var cl *call
		select {
		case cl = <-c.pending:
		default:
			c.close(fmt.Errorf("client: %s: response with no request in flight", c.addr))
			return
		}
		resp, err := decodeResponse(cl, body)
		if err != nil {
			// Put the error on this call; close fails the rest. Close first, so a
			// caller that sees the error also sees a closed connection.
			cl.err = err
			c.close(err)
			close(cl.done)
			return
		}
		cl.resp = resp
		close(cl.done)
	}
}

// decodeResponse checks the correlation id, skips the response header's tagged fields
// (header v1, used by flexible versions of every API except ApiVersions, which always
// answers with header v0 so that a client can read it before knowing any version), and
// decodes the body.
func decodeResponse(cl *call, body []byte) (kmsg.Response, error) {
	corr := int32(binary.BigEndian.Uint32(body))
	if corr != cl.corrID {
		return nil, fmt.Errorf("client: %s: correlation id %d, want %d", cl.c.addr, corr, cl.corrID)
	}
	body = body[4:]
	key := cl.req.Key()
	if cl.req.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		rest, err := skipTags(body)
		if err != nil {
			return nil, fmt.Errorf("client: %s: %s response header: %w", cl.c.addr, kmsg.NameForKey(key), err)
		}
		body = rest
	}
	resp := cl.req.ResponseKind()
	err := resp.ReadFrom(body)
	if key == kmsg.ApiVersions.Int16() && cl.req.GetVersion() > 0 {
		// A broker that does not support our ApiVersions version answers in v0 with
		// UNSUPPORTED_VERSION; that body may or may not parse at the higher version.
		if err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode == kerr.UnsupportedVersion.Code {
			v0 := kmsg.NewPtrApiVersionsResponse()
			v0.Version = 0
			if err0 := v0.ReadFrom(body); err0 == nil {
				return v0, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("client: %s: decode %s v%d response: %w", cl.c.addr, kmsg.NameForKey(key), cl.req.GetVersion(), err)
	}
	return resp, nil
}

// skipTags skips a tagged-field section: an unsigned varint count, then per field an
// unsigned varint tag, an unsigned varint size and size bytes.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errTruncatedTags
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errTruncatedTags
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, errTruncatedTags
		}
		b = b[k+int(size):]
	}
	return b, nil
}

var noDeadline time.Time

var errTruncatedTags = errors.New("truncated tagged fields")

// close makes the connection unusable and fails every pending call with err.
func (c *conn) close(err error) {
	c.closeOnce.Do(func() {
		if err == nil {
			err = ErrConnClosed
		} else if !errors.Is(err, ErrConnClosed) {
			err = fmt.Errorf("%w: %w", ErrConnClosed, err)
		}
		c.deadErr = err
		close(c.dead)
		_ = c.nc.Close()
		// Fail pending calls. writeMu keeps a concurrent send from queueing after the
		// drain; send re-checks dead under the lock.
		c.writeMu.Lock()
		for {
			select {
			case cl := <-c.pending:
				cl.err = err
				close(cl.done)
				continue
			default:
			}
			break
		}
		c.writeMu.Unlock()
	})
}

// closed reports whether the connection is unusable.
func (c *conn) closed() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}
