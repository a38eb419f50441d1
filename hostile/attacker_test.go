package hostile

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// attackerIP is the source address of every attacker connection: Linux routes all of
// 127.0.0.0/8 to lo, so per-address limits apply to the attacker and never to the victim
// on 127.0.0.1.
var attackerIP = net.IPv4(127, 0, 0, 2)

var attackerDialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: attackerIP}, Timeout: 10 * time.Second}

// dialAttacker opens one attacker connection.
func dialAttacker(addr string) (net.Conn, error) {
	return attackerDialer.Dial("tcp", addr)
}

// attackerClient is a kgo client whose connections come from the attacker address.
func attackerClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.Dialer(attackerDialer.DialContext)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// rawConn is an attacker connection speaking the wire protocol by hand: requests are
// framed with kmsg, malformed ones written as raw bytes.
type rawConn struct {
	net.Conn
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := dialAttacker(addr)
	if err != nil {
		t.Fatalf("attacker dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile"))}
}

// send writes req at its set version (the highest kmsg knows when unset).
func (c *rawConn) send(req kmsg.Request) error {
	if req.GetVersion() < 0 {
		req.SetVersion(req.MaxVersion())
	}
	c.corr++
	_, err := c.Write(c.fmt.AppendRequest(nil, req, c.corr))
	return err
}

// readFrame reads one size-prefixed response frame (correlation id included).
func (c *rawConn) readFrame(timeout time.Duration) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<30 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return buf, err
}

// roundTrip sends req and decodes its response.
func (c *rawConn) roundTrip(req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	if err := c.send(req); err != nil {
		return nil, err
	}
	frame, err := c.readFrame(timeout)
	if err != nil {
		return nil, err
	}
	if len(frame) < 4 || int32(binary.BigEndian.Uint32(frame)) != c.corr {
		return nil, fmt.Errorf("response of %d bytes does not carry correlation id %d", len(frame), c.corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions responses have no header tags
		if len(body) < 1 {
			return nil, fmt.Errorf("short response")
		}
		body = body[1:] // an empty tag section
	}
	return resp, resp.ReadFrom(body)
}

// sizePrefix is the 4-byte size prefix of a frame holding body.
func sizePrefix(body []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(len(body)))
}

// header is a request header v1 (v2 when flexible adds the empty tag section).
func header(key, version int16, corr int32, flexible bool) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len("hostile")))
	b = append(b, "hostile"...)
	if flexible {
		b = append(b, 0)
	}
	return b
}

// rawRequest is a complete frame: header then body as given.
func rawRequest(key, version int16, corr int32, flexible bool, body []byte) []byte {
	msg := append(header(key, version, corr, flexible), body...)
	return append(sizePrefix(msg), msg...)
}

// brokerAnswers reports whether a fresh victim-side (127.0.0.1) connection gets an
// ApiVersions answer within timeout.
func brokerAnswers(addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	rc := &rawConn{Conn: c, fmt: kmsg.NewRequestFormatter()}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "victim", "1"
	_, err = rc.roundTrip(req, timeout)
	return err
}
