package client

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// peer is a scripted Kafka peer for unit tests: it frames and decodes requests with kmsg
// and writes whatever responses the test scripts. It is not a broker: it has no state
// beyond what a test's script keeps.
type peer struct {
	t    testing.TB
	ln   net.Listener
	addr string
	// serve runs once per accepted connection. The default answers ApiVersions and hands
	// everything else to handle in order.
	serve func(pc *peerConn)
	// handle answers one request; nil response means no answer (acks=0).
	handle func(pc *peerConn, req *peerReq) kmsg.Response
	// apiMax caps the versions the peer advertises (key → max), for negotiation tests.
	apiMax map[int16]int16
	// features are finalized feature levels advertised in ApiVersions v3+.
	features map[string]int16
	// others decodes (and advertises, v0 to the type's MaxVersion) keys kmsg does not
	// define, such as TxnShareAcknowledge.
	others map[int16]func() kmsg.Request

	mu    sync.Mutex
	conns []*peerConn
	wg    sync.WaitGroup
}

type peerConn struct {
	p  *peer
	nc net.Conn
	br *bufio.Reader
	wm sync.Mutex
}

type peerReq struct {
	key, version int16
	corr         int32
	clientID     *string
	body         kmsg.Request
}

// newPeer listens on a loopback port; configure sets serve, handle and apiMax before the
// first connection is accepted.
func newPeer(t testing.TB, configure func(p *peer)) *peer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, ln: ln, addr: ln.Addr().String()}
	configure(p)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			pc := &peerConn{p: p, nc: nc, br: bufio.NewReader(nc)}
			p.mu.Lock()
			p.conns = append(p.conns, pc)
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer nc.Close()
				if p.serve != nil {
					p.serve(pc)
					return
				}
				p.defaultServe(pc)
			}()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *peer) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, pc := range p.conns {
		_ = pc.nc.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// dropConns closes every accepted connection (the client must reconnect).
func (p *peer) dropConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.conns {
		_ = pc.nc.Close()
	}
	p.conns = nil
}

func (p *peer) defaultServe(pc *peerConn) {
	for {
		req, err := pc.read()
		if err != nil {
			return
		}
		var resp kmsg.Response
		if req.key == kmsg.ApiVersions.Int16() {
			resp = p.apiVersions(req)
		} else {
			resp = p.handle(pc, req)
		}
		if resp == nil {
			continue
		}
		if err := pc.write(req, resp); err != nil {
			return
		}
	}
}

// apiVersions answers with every key kmsg knows, capped by apiMax.
func (p *peer) apiVersions(req *peerReq) kmsg.Response {
	resp := req.body.ResponseKind().(*kmsg.ApiVersionsResponse)
	for k := int16(0); k <= maxKey; k++ {
		r := kmsg.RequestForKey(k)
		if r == nil {
			continue
		}
		hi := r.MaxVersion()
		if m, ok := p.apiMax[k]; ok {
			if m < 0 {
				continue
			}
			hi = min(hi, m)
		}
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, 0, hi
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	for k, newReq := range p.others {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, 0, newReq().MaxVersion()
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	for name, level := range p.features {
		f := kmsg.NewApiVersionsResponseFinalizedFeature()
		f.Name, f.MinVersionLevel, f.MaxVersionLevel = name, level, level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, f)
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp
}

func (pc *peerConn) read() (*peerReq, error) {
	var sz [4]byte
	if _, err := io.ReadFull(pc.br, sz[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(pc.br, buf); err != nil {
		return nil, err
	}
	r := &peerReq{
		key:     int16(binary.BigEndian.Uint16(buf)),
		version: int16(binary.BigEndian.Uint16(buf[2:])),
		corr:    int32(binary.BigEndian.Uint32(buf[4:])),
	}
	buf = buf[8:]
	n := int16(binary.BigEndian.Uint16(buf))
	buf = buf[2:]
	if n >= 0 {
		s := string(buf[:n])
		r.clientID = &s
		buf = buf[n:]
	}
	r.body = kmsg.RequestForKey(r.key)
	if newReq, ok := pc.p.others[r.key]; ok && r.body == nil {
		r.body = newReq()
	}
	if r.body == nil {
		return nil, errors.New("peer: unknown key")
	}
	r.body.SetVersion(r.version)
	if r.body.IsFlexible() {
		rest, err := skipTags(buf)
		if err != nil {
			return nil, err
		}
		buf = rest
	}
	if err := r.body.ReadFrom(buf); err != nil {
		return nil, err
	}
	return r, nil
}

// write frames resp as the answer to req, with header v1 (empty tags) for flexible
// versions except ApiVersions.
func (pc *peerConn) write(req *peerReq, resp kmsg.Response) error {
	return pc.writeRaw(req.corr, req.key != kmsg.ApiVersions.Int16() && req.body.IsFlexible(), nil, resp)
}

// writeRaw writes a response with an explicit correlation id and header tag bytes.
func (pc *peerConn) writeRaw(corr int32, flexHeader bool, tags []byte, resp kmsg.Response) error {
	out := make([]byte, 4, 256)
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	if flexHeader {
		if tags == nil {
			tags = []byte{0}
		}
		out = append(out, tags...)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	pc.wm.Lock()
	defer pc.wm.Unlock()
	_, err := pc.nc.Write(out)
	return err
}
