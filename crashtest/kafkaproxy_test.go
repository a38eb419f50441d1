package crashtest

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// kafkaProxy forwards TCP connections from clients to the broker and reads the request
// frames on the way, so that a test can act at the moment a given request reaches the
// broker: the broker advertises the proxy's address, so every connection of every client
// goes through it. A connection that dies on one side is closed on the other, as a
// broker kill closes them.
type kafkaProxy struct {
	ln       net.Listener
	upstream atomic.Pointer[string]
	trap     atomic.Pointer[proxyTrap]
	// held is the connection pair that a hold trap silenced last: cutHeld closes it.
	held atomic.Pointer[[2]net.Conn]

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// proxyTrap fires on the first request with apiKey from a client whose client id is
// clientID: the request is forwarded whole, then fired is closed. With hold, nothing the
// broker sends on that connection reaches the client any more: the client never learns
// the outcome.
type proxyTrap struct {
	clientID string
	apiKey   int16
	hold     bool
	// every: the trap stays armed and fires on every such request (until disarm).
	every bool
	fired chan struct{}
	once  sync.Once
}

func newKafkaProxy(t *testing.T) *kafkaProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &kafkaProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *kafkaProxy) addr() string { return p.ln.Addr().String() }

// setUpstream says where the broker listens (connections made before keep theirs).
func (p *kafkaProxy) setUpstream(addr string) { p.upstream.Store(&addr) }

// arm sets a trap and returns the channel closed when it fires.
func (p *kafkaProxy) arm(clientID string, apiKey int16, hold bool) <-chan struct{} {
	tr := &proxyTrap{clientID: clientID, apiKey: apiKey, hold: hold, fired: make(chan struct{})}
	p.trap.Store(tr)
	return tr.fired
}

// cutHeld closes the connection that a hold trap silenced, as a network failure would:
// the client learns that the answer will not come, not what it was.
func (p *kafkaProxy) cutHeld() {
	if cs := p.held.Swap(nil); cs != nil {
		p.untrack(cs[0], cs[1])
	}
}

// armEvery sets a hold trap that fires on every request with apiKey from clientID until
// disarm: each answer is held (cutHeld drops the connection), however often the client
// resends.
func (p *kafkaProxy) armEvery(clientID string, apiKey int16) <-chan struct{} {
	tr := &proxyTrap{clientID: clientID, apiKey: apiKey, hold: true, every: true, fired: make(chan struct{})}
	p.trap.Store(tr)
	return tr.fired
}

// disarm removes the trap if it did not fire.
func (p *kafkaProxy) disarm() { p.trap.Store(nil) }

func (p *kafkaProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *kafkaProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *kafkaProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *kafkaProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", *p.upstream.Load())
		if err != nil {
			down.Close() // the broker is down: so is this connection
			continue
		}
		p.track(down, up)
		var held atomic.Bool
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.requests(down, up, &held)
			p.untrack(down, up)
		}()
		go func() {
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := up.Read(buf)
				if n > 0 && !held.Load() {
					if _, werr := down.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			p.untrack(down, up)
		}()
	}
}

// requests forwards request frames from down to up, springing the trap.
func (p *kafkaProxy) requests(down, up net.Conn, held *atomic.Bool) {
	var size [4]byte
	for {
		if _, err := io.ReadFull(down, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		frame := make([]byte, 4+int(n))
		copy(frame, size[:])
		if _, err := io.ReadFull(down, frame[4:]); err != nil {
			return
		}
		if _, err := up.Write(frame); err != nil {
			return
		}
		tr := p.trap.Load()
		if tr == nil || len(frame) < 14 {
			continue
		}
		// Request header: api key, api version, correlation id, client id (int16 length).
		body := frame[4:]
		key := int16(binary.BigEndian.Uint16(body[0:2]))
		idLen := int(int16(binary.BigEndian.Uint16(body[8:10])))
		if key != tr.apiKey || idLen < 0 || 10+idLen > len(body) || string(body[10:10+idLen]) != tr.clientID {
			continue
		}
		if tr.every || p.trap.CompareAndSwap(tr, nil) {
			if tr.hold {
				held.Store(true)
				p.held.Store(&[2]net.Conn{down, up})
			}
			tr.once.Do(func() { close(tr.fired) })
		}
	}
}
