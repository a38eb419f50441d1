package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// A SplicedResponse is a response that carries some of its bytes as ranges of files, so the
// server can send them without copying them through user space (sendfile, on plain TCP
// connections). A fetch response's record batches are the case: they are already on disk
// exactly as they go on the wire.
//
// AppendTo (from kmsg.Response) must still produce the complete body, copying the file
// bytes, for anyone who encodes the response without knowing about splicing.
type SplicedResponse interface {
	kmsg.Response
	// AppendSpliced appends the response body at its version (the server calls SetVersion
	// first) to dst, except for the file bytes, and appends to ins where they go: the body
	// on the wire is the appended bytes with each insert's chunk put in at its At, an
	// index into the returned slice. Inserts are in order of At; several may share one
	// position (a range spanning files) and go in the order listed. An error means no
	// correct body can be produced: the server closes the connection.
	AppendSpliced(dst []byte, ins []Insert) ([]byte, []Insert, error)
	// Release is called exactly once, when the server no longer needs the files: after the
	// response was written (for sendfile: handed to the kernel, which then holds the pages)
	// or when it is dropped unwritten. Until then the chunks' bytes must not change.
	Release()
}

// FileChunk is Len bytes of File from position Off. The server reads the file only at
// explicit positions (pread, sendfile with an offset) and never closes it.
type FileChunk struct {
	File *os.File
	Off  int64
	Len  int64
}

// Insert puts a file chunk into an encoded body at index At (see AppendSpliced).
type Insert struct {
	At    int
	Chunk FileChunk
}

// sendfileMinBytes: smaller chunks are copied into the write buffer, which is cheaper than
// flushing it and making a sendfile call for a few KiB.
const sendfileMinBytes = 16 << 10

var errShortChunk = errors.New("file chunk shorter than announced (file truncated?)")

// zeroCopySender returns a sender for connections that can take sendfile: plain TCP (and
// Unix) sockets. Anything else (TLS, test wrappers) gets nil: the copying path.
func zeroCopySender(nc net.Conn) *sender {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return newSender(rc)
}

// releaseResponse releases resp if it holds files.
func releaseResponse(resp kmsg.Response) {
	if sr, ok := resp.(SplicedResponse); ok {
		sr.Release()
	}
}

// writeSpliced frames and writes a spliced response: the encoded pieces through bw, the
// file chunks with sendfile (after flushing bw) or, on connections that cannot take it and
// for small chunks, copied into bw. A false return means the connection must close; the
// frame may then be cut short, never wrong.
func (c *conn) writeSpliced(bw *bufio.Writer, p pending, resp SplicedResponse, scratch []byte) ([]byte, bool) {
	resp.SetVersion(p.version)
	scratch = append(scratch[:0], 0, 0, 0, 0)
	scratch = appendResponseHeader(scratch, p, resp)
	bodyStart := len(scratch)
	var err error
	scratch, c.inserts, err = resp.AppendSpliced(scratch, c.inserts[:0])
	if err != nil {
		c.log.Error("closing connection: cannot encode response", "key", p.key,
			"correlation_id", p.correlationID, "err", err)
		c.flushBefore(bw)
		return scratch, false
	}
	size := int64(len(scratch) - 4)
	prev := bodyStart
	for _, in := range c.inserts {
		if in.At < prev || in.At > len(scratch) || in.Chunk.Len <= 0 || in.Chunk.File == nil {
			c.log.Error("closing connection: malformed spliced response", "key", p.key,
				"correlation_id", p.correlationID, "at", in.At, "len", in.Chunk.Len)
			c.flushBefore(bw)
			return scratch, false
		}
		prev = in.At
		size += in.Chunk.Len
	}
	if size > 1<<31-1 {
		c.log.Error("closing connection: response larger than 2 GiB", "key", p.key, "bytes", size)
		c.flushBefore(bw)
		return scratch, false
	}
	scratch[0], scratch[1], scratch[2], scratch[3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)

	c.armWriteDeadline()
	at := 0
	for _, in := range c.inserts {
		if _, err := bw.Write(scratch[at:in.At]); err != nil {
			c.log.Debug("write failed", "err", err)
			return scratch, false
		}
		at = in.At
		if err := c.writeChunk(bw, in.Chunk); err != nil {
			if errors.Is(err, errShortChunk) {
				c.log.Error("closing connection mid-response", "key", p.key, "err", err)
			} else {
				c.log.Debug("write failed", "err", err)
			}
			return scratch, false
		}
	}
	if _, err := bw.Write(scratch[at:]); err != nil {
		c.log.Debug("write failed", "err", err)
		return scratch, false
	}
	return scratch, true
}

// flushBefore writes the responses buffered before one that cannot be written, so the
// client gets every answer up to the close, as with the other close cases.
func (c *conn) flushBefore(bw *bufio.Writer) {
	c.armWriteDeadline()
	if err := bw.Flush(); err != nil {
		c.log.Debug("write failed", "err", err)
	}
}

func (c *conn) writeChunk(bw *bufio.Writer, ch FileChunk) error {
	if c.sender == nil || ch.Len < sendfileMinBytes {
		return copyChunk(bw, ch)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return c.sender.send(ch)
}

// copyChunk preads a chunk straight into the write buffer.
func copyChunk(bw *bufio.Writer, ch FileChunk) error {
	off, left := ch.Off, ch.Len
	for left > 0 {
		if bw.Available() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		buf := bw.AvailableBuffer()
		buf = buf[:min(int64(cap(buf)), left)]
		n, err := ch.File.ReadAt(buf, off)
		if n < len(buf) {
			if err == nil || err == io.EOF {
				err = errShortChunk
			}
			return err
		}
		_, _ = bw.Write(buf) // fits: at most Available bytes
		off += int64(n)
		left -= int64(n)
	}
	return nil
}

// sender sends file chunks on one connection's socket with sendfile(2). Its callbacks are
// bound once, so a send allocates nothing but the file's RawConn.
type sender struct {
	sock    syscall.RawConn
	in      uintptr // source file descriptor, during a send
	off     int64   // next file position to send
	left    int64   // bytes still to send
	err     error
	control func(uintptr)
	write   func(uintptr) bool
}

func newSender(sock syscall.RawConn) *sender {
	s := &sender{sock: sock}
	s.control, s.write = s.controlFn, s.writeFn
	return s
}

// send sends a chunk at the chunk's offset: the file's own position is neither used nor
// moved, so concurrent sends of one file are safe. It waits for the socket through the
// runtime poller, so write deadlines apply. Control holds the file open for the duration,
// on top of the chunk owner's guarantee.
func (s *sender) send(ch FileChunk) error {
	src, err := ch.File.SyscallConn()
	if err != nil {
		return err
	}
	s.off, s.left, s.err = ch.Off, ch.Len, nil
	if err := src.Control(s.control); err != nil {
		return err
	}
	return s.err
}

func (s *sender) controlFn(in uintptr) {
	s.in = in
	if err := s.sock.Write(s.write); s.err == nil {
		s.err = err
	}
}

func (s *sender) writeFn(out uintptr) bool {
	for s.left > 0 {
		n, err := unix.Sendfile(int(out), int(s.in), &s.off, int(min(s.left, 1<<30)))
		if n > 0 {
			s.left -= int64(n)
		}
		switch {
		case err == unix.EAGAIN:
			return false // socket buffer full: wait until writable
		case err == unix.EINTR:
		case err != nil:
			s.err = fmt.Errorf("sendfile: %w", err)
			return true
		case n == 0:
			s.err = errShortChunk
			return true
		}
	}
	return true
}
