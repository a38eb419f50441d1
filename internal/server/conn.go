package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A conn is one client connection, served by two goroutines:
//
//   - the reader reads frames, decodes them and calls Handler.Handle one at a time in
//     arrival order, then queues the Reply;
//   - the writer takes Replies from the queue in order, calls Wait when set, encodes and
//     writes, flushing when the queue is empty.
//
// The queue holds at most Config.MaxInFlightPerConn replies; a full queue blocks the reader,
// which stops reading the socket, which pushes back on the client through TCP.
//
// Ending: the reader ends on a read or protocol error, a handler panic (which stops the whole
// server, failstop.go), a Reply.Close or
// Shutdown, and then closes the queue. The writer writes every reply queued before that (so a
// client sees the answers to the requests before a bad one, as with Kafka, which handles one
// request per connection at a time), then closes the socket and reports the end. If writing
// fails, the writer closes the socket (which stops the reader) and keeps draining the queue,
// calling Wait functions without writing, until the reader has closed it.
type conn struct {
	s    *Server
	nc   net.Conn
	info *ConnInfo
	log  *slog.Logger

	// ip and listener are what the server's connection limits count this connection
	// under; set at creation, read-only.
	ip       netip.Addr
	listener string

	// auth is the connection's authentication (the listener's protocol and where the
	// client is in it); reader goroutine only, but for the handshake slot the writer
	// releases after the reader has ended. apis and apiKeys are the listener's API table
	// and ApiVersions list. Read-only after creation.
	auth    *connAuth
	apis    *apiTable
	apiKeys []kmsg.ApiVersionsResponseApiKey

	// ctx is passed to Handle; cancelled when the connection ends or the server shuts down.
	ctx    context.Context
	cancel context.CancelFunc

	// replies carries replies from the reader (sole sender, closes it) to the writer.
	replies chan pending
	// inflight counts requests read whose reply the writer has not finished; the idle
	// timeout does not fire while it is positive. Written by both goroutines.
	inflight atomic.Int32

	killOnce sync.Once

	// What this connection holds of the server's request budget; guarded by the pools.
	frameShare, decodedShare poolShare

	mu      sync.Mutex // guards stopped and read-deadline changes
	stopped bool       // Shutdown asked the reader to stop

	// Writer goroutine only.
	sender  *sender  // sendfile on the socket; nil when the connection cannot take it
	inserts []Insert // scratch for SplicedResponse
}

// pending is one queued reply with what the writer needs to frame it.
type pending struct {
	key           int16
	version       int16 // response version to encode at
	correlationID int32
	reply         Reply
	charge        requestCharge // released once the reply is written or dropped
	// raw, when not nil, is a bare SASL token to write in a size-prefixed frame with no
	// response header (after SaslHandshake v0).
	raw []byte
}

func newConn(s *Server, nc net.Conn, ip netip.Addr, listener string) *conn {
	lc := s.cfg.Listeners[listener]
	info := &ConnInfo{
		ID:               s.nextConnID.Add(1),
		RemoteAddr:       nc.RemoteAddr(),
		LocalAddr:        nc.LocalAddr(),
		Listener:         listener,
		SecurityProtocol: lc.protocol(),
		Principal:        Anonymous,
	}
	apis, apiKeys := s.apis, s.apiKeys
	if lc.protocol().usesSASL() {
		apis, apiKeys = s.saslAPIs, s.saslAPIKeys
	}
	ctx, cancel := context.WithCancel(s.baseCtx)
	return &conn{
		auth:     &connAuth{listener: lc},
		apis:     apis,
		apiKeys:  apiKeys,
		s:        s,
		nc:       nc,
		ip:       ip,
		listener: listener,
		info:     info,
		log:      s.log.With("conn", info.ID, "remote", info.RemoteAddr),
		ctx:      ctx,
		cancel:   cancel,
		replies:  make(chan pending, s.cfg.MaxInFlightPerConn),
		sender:   zeroCopySender(nc),
	}
}

func (c *conn) start() {
	go c.readLoop()
	go c.writeLoop()
}

// stopReading makes the reader stop before its next request; queued replies are still
// written. Used by Shutdown.
func (c *conn) stopReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	_ = c.nc.SetReadDeadline(time.Unix(1, 0)) // wakes a blocked Read
}

// armReadDeadline sets the idle deadline for the next read, or reports false once
// stopReading was called. Both take c.mu, so a deadline set here can never overwrite the
// "wake now" deadline of stopReading.
func (c *conn) armReadDeadline() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	return true
}

func (c *conn) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// kill closes the socket at once and cancels the handler context. Idempotent.
func (c *conn) kill() {
	c.killOnce.Do(func() {
		c.cancel()
		if tc, ok := c.nc.(*tls.Conn); ok {
			// tls.Conn.Close first writes close_notify under a 5 s deadline, which a
			// client not reading would make Close wait out (Server.Close kills every
			// connection in turn); the socket itself closes at once.
			_ = tc.NetConn().Close()
			return
		}
		_ = c.nc.Close()
	})
}

// readerBufBytes is the read buffer size: large enough to take many small pipelined
// requests in one syscall.
const readerBufBytes = 32 << 10

func (c *conn) readLoop() {
	defer close(c.replies)
	if err := c.secure(); err != nil {
		c.log.Info("closing connection: not secured", "listener", c.listener, "err", err)
		return
	}
	br := bufio.NewReaderSize(c.nc, readerBufBytes)
	for {
		if c.ctx.Err() != nil {
			// The writer failed (or the server is closing): handling requests still
			// sitting in the read buffer would only produce replies nobody can receive.
			c.log.Debug("connection ending, stop reading")
			return
		}
		frame, charge, err := c.readFrame(br)
		if err != nil {
			c.logReadEnd(err)
			return
		}
		if c.auth.rawTokens {
			// After SaslHandshake v0 the frame is a bare token, not a request.
			p := pending{key: 36, version: -1}
			c.rawToken(frame, &p)
			c.release(charge)
			c.inflight.Add(1)
			c.replies <- p
			if p.reply.Close {
				return
			}
			continue
		}
		d, err := decodeRequest(frame, c.apis, func(decodedBytes int64) error {
			return c.chargeDecoded(&charge, decodedBytes)
		})
		if err != nil {
			c.release(charge)
			if c.ctx.Err() != nil {
				c.log.Debug("connection ending while waiting for request memory")
				return
			}
			// Kafka closes the connection on every decode failure, unknown key and
			// unsupported version (Processor.parseRequestHeader → processChannelException).
			c.log.Warn("closing connection: bad request", "err", err)
			return
		}
		p := pending{key: d.key, version: d.version, correlationID: d.correlationID}
		verdict, err := c.gate(&d, &p)
		if verdict == closeConn {
			c.release(charge)
			c.log.Info("closing connection", "listener", c.listener, "err", err)
			return
		}
		if verdict == answered {
			// Server-answered requests reference no frame bytes once answered (the
			// exchange copies what it keeps).
			putFrame(frame)
			c.release(charge)
			p.charge = requestCharge{}
			c.inflight.Add(1)
			c.replies <- p
			if p.reply.Close {
				return
			}
			continue
		}
		if d.key == 18 {
			resp := c.s.apiVersionsReply(&d, c.info, c.apiKeys)
			p.version = resp.Version
			p.reply = Reply{Resp: resp}
		} else {
			reply, ok := c.handle(&d)
			if !ok {
				c.release(charge)
				return
			}
			p.reply = reply
			if reply.BodyDone {
				putFrame(frame) // nothing references the request's bytes any more
				c.release(charge)
				charge = requestCharge{}
			}
		}
		if p.reply.Resp == nil && p.reply.Wait == nil && !p.reply.Close {
			c.release(charge)
			continue // no response (acks=0)
		}
		p.charge = charge
		c.inflight.Add(1)
		c.replies <- p
		if p.reply.Close {
			return
		}
	}
}

// chargeDecoded charges what decoding the request will allocate, waiting for it to fit;
// a cost no connection may ever hold is refused.
func (c *conn) chargeDecoded(charge *requestCharge, decodedBytes int64) error {
	pool := c.s.budget.decoded
	if !pool.canEverFit(decodedBytes) {
		return fmt.Errorf("%w: decoding would allocate %d bytes", ErrRequestMemory, decodedBytes)
	}
	if err := pool.acquire(c.ctx, &c.decodedShare, decodedBytes, decodedBytes); err != nil {
		return err
	}
	charge.decodedBytes = decodedBytes
	return nil
}

// release gives a request's charge back to the budget.
func (c *conn) release(charge requestCharge) {
	c.s.budget.frames.release(&c.frameShare, charge.frameBytes)
	c.s.budget.decoded.release(&c.decodedShare, charge.decodedBytes)
}

// handle calls the handler; a panic stops the server (failstop.go) and, in tests that
// keep the process, ends this connection.
func (c *conn) handle(d *decoded) (reply Reply, ok bool) {
	req := &Request{
		Key:           d.key,
		Version:       d.version,
		CorrelationID: d.correlationID,
		ClientID:      d.clientID,
		Body:          d.body,
		Conn:          c.info,
	}
	defer func() {
		if r := recover(); r != nil {
			c.s.handlerPanicked(HandlerPanic{In: "Handle", Key: d.key, Version: d.version,
				CorrelationID: d.correlationID, Value: r, Stack: debug.Stack()})
			ok = false
		}
	}()
	injectTestPanic(req)
	return c.s.h.Handle(c.ctx, req), true
}

// readFrame reads one size-prefixed frame and returns it without the prefix, charged to the
// request budget (each part of its buffer before it is allocated or filled). It waits past
// the idle timeout while requests are in flight (a long poll is not idleness).
func (c *conn) readFrame(br *bufio.Reader) ([]byte, requestCharge, error) {
	var none requestCharge
	var hdr []byte
	for {
		if !c.armReadDeadline() {
			return nil, none, errStopped
		}
		var err error
		hdr, err = br.Peek(4)
		if err == nil {
			break
		}
		if isTimeout(err) && c.inflight.Load() > 0 && !c.isStopped() {
			continue // bufio keeps any partial size bytes; Peek again
		}
		if isTimeout(err) && !c.isStopped() {
			return nil, none, errIdle
		}
		return nil, none, err
	}
	size := int32(binary.BigEndian.Uint32(hdr))
	_, _ = br.Discard(4)
	if maxBytes := c.maxFrameBytes(); size < 0 || size > maxBytes {
		return nil, none, fmt.Errorf("%w: %d (max %d)", ErrFrameSize, size, maxBytes)
	}
	charge, err := c.admitFrame(br, int(size))
	if err != nil {
		return nil, none, err
	}
	if !c.armReadDeadline() { // again: waiting for the budget may have taken a while
		c.release(charge)
		return nil, none, errStopped
	}
	buf, err := c.fillFrame(br, int(size), &charge)
	if err != nil {
		c.release(charge)
		return nil, none, err
	}
	return buf, charge, nil
}

// admitFrame waits until the first piece of a frame of n bytes has arrived in the read
// buffer (all of a frame up to readerBufBytes, else readerBufBytes of it) and then until the
// frame may be read (the socket is not read meanwhile, so TCP pushes back on the client),
// and charges that piece. A client announcing frames and sending nothing holds no budget.
func (c *conn) admitFrame(br *bufio.Reader, n int) (requestCharge, error) {
	pool := c.s.budget.frames
	totalBytes := int64(frameClassCap(n))
	if !pool.canEverFit(totalBytes) {
		return requestCharge{}, fmt.Errorf("%w: %d-byte frame", ErrRequestMemory, n)
	}
	firstBytes := min(totalBytes, readerBufBytes)
	if !c.armReadDeadline() {
		return requestCharge{}, errStopped
	}
	if _, err := br.Peek(min(n, readerBufBytes)); err != nil {
		return requestCharge{}, err
	}
	if err := pool.acquire(c.ctx, &c.frameShare, firstBytes, totalBytes); err != nil {
		return requestCharge{}, err
	}
	return requestCharge{frameBytes: firstBytes}, nil
}

// errFrameOverrun: frames being read at once outgrew the frame pool; the connection whose
// frame could not grow is closed rather than made to wait (see budget.go).
var errFrameOverrun = fmt.Errorf("%w: frames being read outgrew the budget", ErrRequestMemory)

// fillFrame reads an admitted n-byte frame. The charged capacity starts at the admitted
// first piece and doubles up to the frame's pooled capacity, each step charged before it is
// allocated (a fresh buffer, copied on growth) or filled (a pooled buffer, allocated
// already), so a frame holds at most about twice the bytes its client sent.
func (c *conn) fillFrame(br *bufio.Reader, n int, charge *requestCharge) ([]byte, error) {
	target := frameClassCap(n)
	charged := int(charge.frameBytes)
	pooled := getFrame(n)
	buf := pooled[:0]
	if pooled == nil {
		buf = make([]byte, 0, charged)
	}
	for len(buf) < n {
		if len(buf) == charged {
			more := min(2*charged, target) - charged
			if !c.s.budget.frames.grow(&c.frameShare, int64(more)) {
				putFrame(pooled)
				return nil, errFrameOverrun
			}
			charge.frameBytes += int64(more)
			charged += more
			if pooled == nil {
				grown := make([]byte, len(buf), charged)
				copy(grown, buf)
				buf = grown
			}
		}
		m, err := io.ReadFull(br, buf[len(buf):min(charged, n)])
		buf = buf[:len(buf)+m]
		if err != nil {
			putFrame(pooled)
			return nil, err
		}
	}
	return buf, nil
}

var (
	errStopped = errors.New("server shutting down")
	errIdle    = errors.New("idle timeout")
)

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *conn) logReadEnd(err error) {
	switch {
	case errors.Is(err, errStopped), c.isStopped():
		c.log.Debug("connection stopped for shutdown")
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Debug("connection closed by peer or writer")
	case errors.Is(err, errIdle):
		c.log.Info("closing idle connection", "idle_timeout", c.s.cfg.IdleTimeout)
	case errors.Is(err, ErrFrameSize), errors.Is(err, ErrRequestMemory):
		c.log.Warn("closing connection: bad request", "err", err)
	default:
		c.log.Debug("connection read ended", "err", err)
	}
}

// writerBufBytes is the write buffer size; larger writes go straight to the socket.
const writerBufBytes = 64 << 10

// writers are the connections' write buffers. A connection takes one for the replies it
// has to write and gives it back once they are flushed, so an idle connection holds none
// (a member idling in a share group on its own connection cost ~100 KB, issue 17).
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writerBufBytes) }}

func (c *conn) writeLoop() {
	var bw *bufio.Writer // nil while every reply is flushed
	var scratch []byte
	ok := true
	for p := range c.replies {
		if ok {
			if bw == nil {
				bw = writers.Get().(*bufio.Writer)
				bw.Reset(c.nc)
			}
			scratch, ok = c.writeReply(bw, p, scratch[:0])
			if ok && len(c.replies) == 0 {
				if err := bw.Flush(); err != nil {
					c.log.Debug("write failed", "err", err)
					ok = false
				} else {
					bw.Reset(nil)
					writers.Put(bw)
					bw = nil
					if cap(scratch) > writerBufBytes {
						scratch = nil // nor the encoding of a large response
					}
				}
			}
			if !ok {
				c.kill() // stops the reader; keep draining until it closes the queue
			}
		} else {
			c.discardReply(p)
		}
		c.release(p.charge)
		c.inflight.Add(-1)
	}
	if ok && bw != nil {
		c.armWriteDeadline()
		_ = bw.Flush()
	}
	c.kill()
	c.auth.releaseSlot() // the reader has ended (it closed the queue)
	c.connClosed()
	c.s.connEnded(c)
}

// writeReply resolves, encodes and buffers one reply. It returns false when the connection
// must close: a write error, a Wait or encoding panic (which stops the server too), a
// response of the wrong kind, or Reply.Close.
func (c *conn) writeReply(bw *bufio.Writer, p pending, scratch []byte) (_ []byte, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.s.handlerPanicked(HandlerPanic{In: "response", Key: p.key, Version: p.version,
				CorrelationID: p.correlationID, Value: r, Stack: debug.Stack()})
			ok = false
		}
	}()
	if p.raw != nil {
		scratch = binary.BigEndian.AppendUint32(scratch, uint32(len(p.raw)))
		scratch = append(scratch, p.raw...)
		c.armWriteDeadline()
		if _, err := bw.Write(scratch); err != nil {
			c.log.Debug("write failed", "err", err)
			return scratch, false
		}
		return scratch, true
	}
	resp := p.reply.Resp
	if p.reply.Wait != nil {
		// Send what is buffered before possibly blocking: earlier responses must not wait
		// for a later long poll or fsync.
		if bw.Buffered() > 0 {
			c.armWriteDeadline()
			if err := bw.Flush(); err != nil {
				c.log.Debug("write failed", "err", err)
				c.kill()
				c.discardReply(p) // its Wait must still run, like every queued one
				return scratch, false
			}
		}
		resp = p.reply.Wait()
	}
	defer releaseResponse(resp) // after the write (or a panic in it)
	if resp != nil {
		if resp.Key() != p.key {
			c.log.Error("closing connection: handler answered with the wrong response kind",
				"key", p.key, "response_key", resp.Key(), "correlation_id", p.correlationID)
			return scratch, false
		}
		if sr, ok := resp.(SplicedResponse); ok {
			if scratch, ok = c.writeSpliced(bw, p, sr, scratch); !ok {
				return scratch, false
			}
		} else {
			scratch = appendResponse(scratch, p, resp)
			c.armWriteDeadline()
			if _, err := bw.Write(scratch); err != nil {
				c.log.Debug("write failed", "err", err)
				return scratch, false
			}
		}
	}
	if p.reply.Close {
		if err := bw.Flush(); err != nil {
			c.log.Debug("write failed", "err", err)
		}
		c.log.Info("closing connection as the handler asked", "key", p.key,
			"correlation_id", p.correlationID)
		return scratch, false
	}
	return scratch, true
}

// appendResponse appends a whole response frame: size, correlation id, the response
// header's tagged-field byte when the response is flexible (never for ApiVersions, whose
// response header is always v0), then the body.
func appendResponse(dst []byte, p pending, resp kmsg.Response) []byte {
	resp.SetVersion(p.version)
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = appendResponseHeader(dst, p, resp)
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// appendResponseHeader appends the response header (after the frame size); resp's version
// is set.
func appendResponseHeader(dst []byte, p pending, resp kmsg.Response) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.correlationID))
	if p.key != 18 && resp.IsFlexible() {
		dst = append(dst, 0)
	}
	return dst
}

// discardReply lets a reply's Wait run to completion after the connection failed, so the
// handler's pending work (and whatever it holds) finishes; its context is already
// cancelled. A response holding files is released.
func (c *conn) discardReply(p pending) {
	defer func() {
		if r := recover(); r != nil {
			c.s.handlerPanicked(HandlerPanic{In: "discarded Wait", Key: p.key, Version: p.version,
				CorrelationID: p.correlationID, Value: r, Stack: debug.Stack()})
		}
	}()
	resp := p.reply.Resp
	if p.reply.Wait != nil {
		resp = p.reply.Wait()
	}
	releaseResponse(resp)
}

// armWriteDeadline bounds the next writes: a client that stops reading its responses for
// IdleTimeout is as dead as one that stops sending (Kafka's idle expiry looks at all socket
// activity), and without it the writer, then the full queue, then the reader would block
// forever.
func (c *conn) armWriteDeadline() {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
}

func (c *conn) connClosed() {
	defer func() {
		if r := recover(); r != nil {
			c.s.handlerPanicked(HandlerPanic{In: "ConnClosed", Key: -1, Version: -1,
				CorrelationID: -1, Value: r, Stack: debug.Stack()})
		}
	}()
	c.s.h.ConnClosed(c.info)
}
