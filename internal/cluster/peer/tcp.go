package peer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config configures a TCP transport.
type Config struct {
	// Self is this node's id; it names the connections (the request header's client id,
	// "exactq-node-<Self>-<lane>", which the peer's logs show).
	Self int32
	// Addr gives a node's broker listener (host:port). Required. It is asked at every dial,
	// so an address the metadata image changes is used from the next connection on (a node
	// whose endpoint changes has restarted, which broke the old connections).
	Addr func(node int32) (addr string, ok bool)
	// ControllerAddr gives a voter's controller listener, which its control lane dials
	// (raft messages and controller requests). Nil, or not ok for a node, means that node's
	// control lane dials Addr: a broker-only node receives raft traffic on its broker
	// listener.
	ControllerAddr func(node int32) (addr string, ok bool)
	// OnRaftDrop is called, on the sender's goroutine, when a raft message is dropped because
	// its lane is full, so the quorum loop can report the node unreachable. Nil: the drop is
	// only returned (ErrRaftDropped).
	OnRaftDrop func(node int32)
}

// TCP is the Transport over real connections: per node and lane one connection, dialled
// on first use and redialled after a failure (with backoff), ApiVersions on every new
// connection to choose request versions.
type TCP struct {
	cfg    Config
	ctx    context.Context // ends at Close: cancels dials and backoff waits
	cancel context.CancelFunc
	dialer net.Dialer

	mu     sync.Mutex
	lanes  map[laneKey]*lane
	closed bool
	wg     sync.WaitGroup // lane writers and connection readers
}

type laneKey struct {
	node int32
	lane Lane
}

// NewTCP returns a TCP transport; connections are made when first needed.
func NewTCP(cfg Config) *TCP {
	if cfg.Addr == nil {
		panic("peer: Config.Addr is required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &TCP{cfg: cfg, ctx: ctx, cancel: cancel, lanes: make(map[laneKey]*lane),
		dialer: net.Dialer{Timeout: DialTimeout}}
}

// Send queues req on the node's lane and waits for its response or ctx. A request whose
// ctx ends before it is written is never written; one that ends after is answered into
// the void (the lane still counts it until then). The caller must not modify req until
// Send returns, nor reuse it after a Send that returned ctx's error.
func (t *TCP) Send(ctx context.Context, node int32, ln Lane, req kmsg.Request) (kmsg.Response, error) {
	if ln >= NumLanes {
		return nil, fmt.Errorf("peer: no lane %d", ln)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, err := t.lane(node, ln)
	if err != nil {
		return nil, err
	}
	c, err := l.admit(ctx, req)
	if err != nil {
		if errors.Is(err, ErrRaftDropped) && t.cfg.OnRaftDrop != nil {
			t.cfg.OnRaftDrop(node)
		}
		return nil, err
	}
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close fails everything queued or in flight with ErrClosed, closes the connections and
// waits for the transport's goroutines. Send after Close returns ErrClosed.
func (t *TCP) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	lanes := make([]*lane, 0, len(t.lanes))
	for _, l := range t.lanes {
		lanes = append(lanes, l)
	}
	t.mu.Unlock()
	t.cancel()
	for _, l := range lanes {
		l.close()
	}
	t.wg.Wait()
}

func (t *TCP) lane(node int32, ln Lane) (*lane, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	k := laneKey{node, ln}
	l := t.lanes[k]
	if l == nil {
		l = &lane{t: t, node: node, id: ln, wake: make(chan struct{}, 1),
			formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("exactq-node-%d-%s", t.cfg.Self, ln)))}
		t.lanes[k] = l
		t.wg.Add(1)
		go l.run()
	}
	return l, nil
}

// addr is where the lane's next connection goes.
func (t *TCP) addr(node int32, ln Lane) (string, bool) {
	if ln == Control && t.cfg.ControllerAddr != nil {
		if a, ok := t.cfg.ControllerAddr(node); ok {
			return a, true
		}
	}
	return t.cfg.Addr(node)
}

// lane is one node's lane: the queue of calls not written yet, the accounting of every
// call not answered yet, and the writer goroutine (run) that owns the connection.
type lane struct {
	t         *TCP
	node      int32
	id        Lane
	formatter *kmsg.RequestFormatter
	wake      chan struct{} // run waits on it for the queue to fill; capacity 1

	mu      sync.Mutex
	queue   []*call // admitted, not written yet, in correlation id order
	count   int     // calls admitted and not finished (queued and in flight)
	bytes   int64   // their frames' bytes
	corr    int32   // the last correlation id given out
	vers    apiVersions
	closed  bool
	downTil time.Time // after a failed dial: Send fails at once until then
	downErr error
}

// call is one request from admission to its answer. Whoever holds it (the queue, run,
// then the connection's in-flight list) finishes it exactly once.
type call struct {
	ctx     context.Context
	req     kmsg.Request
	version int16  // the version frame is encoded at
	frame   []byte // size, header and body, the correlation id in it
	corr    int32
	done    chan struct{}
	resp    kmsg.Response
	err     error
}

// admit encodes req and queues it, or refuses it at once.
func (l *lane) admit(ctx context.Context, req kmsg.Request) (*call, error) {
	l.mu.Lock()
	vers := l.vers
	l.mu.Unlock()
	// Encode at the version the last connection agreed (the peer's range rarely changes);
	// run encodes again if the next connection agrees another one.
	v := req.MaxVersion()
	if vers != nil {
		var err error
		if v, err = vers.pick(req); err != nil {
			return nil, err
		}
	}
	req.SetVersion(v)
	frame := l.formatter.AppendRequest(nil, req, 0)
	c := &call{ctx: ctx, req: req, version: v, frame: frame, done: make(chan struct{})}

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, ErrClosed
	case time.Now().Before(l.downTil):
		return nil, l.connErr(l.downErr)
	case l.count >= MaxQueued || l.count > 0 && l.bytes+int64(len(frame)) > MaxQueuedBytes:
		if req.Key() == RaftMessageKey {
			return nil, ErrRaftDropped
		}
		return nil, ErrQueueFull
	}
	l.corr++
	c.corr = l.corr
	putCorr(c.frame, c.corr)
	l.count++
	l.bytes += int64(len(frame))
	l.queue = append(l.queue, c)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return c, nil
}

// finish answers c and releases what the lane counted for it.
func (l *lane) finish(c *call, resp kmsg.Response, err error) {
	l.mu.Lock()
	l.count--
	l.bytes -= int64(len(c.frame))
	l.mu.Unlock()
	c.resp, c.err = resp, err
	close(c.done)
}

func (l *lane) connErr(err error) error {
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrUnknownNode) {
		return err
	}
	addr, _ := l.t.addr(l.node, l.id)
	return &ConnError{Node: l.node, Lane: l.id, Addr: addr, Err: err}
}

// take removes and returns the whole queue.
func (l *lane) take() []*call {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue
	l.queue = nil
	return q
}

func (l *lane) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run is the lane's writer: it dials when there is something to send, writes the queue in
// order while fewer than MaxInFlight requests wait for answers, and flushes before it
// waits for anything, so a burst goes out in few writes.
func (l *lane) run() {
	defer l.t.wg.Done()
	var cn *conn
	failures := 0
	for {
		l.mu.Lock()
		for len(l.queue) == 0 && !l.closed {
			l.mu.Unlock()
			if cn != nil {
				cn.flush()
			}
			<-l.wake
			l.mu.Lock()
		}
		closed := l.closed
		l.mu.Unlock()
		if closed {
			if cn != nil {
				cn.fail(ErrClosed)
			}
			for _, c := range l.take() {
				l.finish(c, nil, ErrClosed)
			}
			return
		}

		if cn == nil || cn.isDead() {
			var err error
			if cn, err = l.dial(); err != nil {
				failures++
				wait := backoff(failures)
				l.mu.Lock()
				l.downTil, l.downErr = time.Now().Add(wait), err
				l.mu.Unlock()
				for _, c := range l.take() {
					l.finish(c, nil, l.connErr(err))
				}
				select {
				case <-time.After(wait):
				case <-l.t.ctx.Done():
				}
				continue
			}
			failures = 0
			l.mu.Lock()
			l.vers = cn.vers
			l.mu.Unlock()
		}

		if !cn.acquire(l.t.ctx) {
			continue // the connection died or the transport closed: look again
		}
		l.mu.Lock()
		var c *call
		if len(l.queue) > 0 {
			c = l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
		}
		l.mu.Unlock()
		if c == nil { // Close took the queue
			cn.release()
			continue
		}
		if err := c.ctx.Err(); err != nil {
			cn.release()
			l.finish(c, nil, err)
			continue
		}
		if err := l.encodeFor(c, cn.vers); err != nil {
			cn.release()
			l.finish(c, nil, err)
			continue
		}
		cn.write(c)
	}
}

// encodeFor encodes c again if the connection's peer agrees another version than the one
// it was admitted at.
func (l *lane) encodeFor(c *call, vers apiVersions) error {
	v, err := vers.pick(c.req)
	if err != nil {
		return err
	}
	if v == c.version {
		return nil
	}
	c.req.SetVersion(v)
	c.version = v
	// The lane counts the admitted size; the difference between two versions of one
	// request is a few bytes, so the accounting keeps it.
	c.frame = l.formatter.AppendRequest(c.frame[:0], c.req, c.corr)
	return nil
}

// dial connects to the lane's address and exchanges ApiVersions.
func (l *lane) dial() (*conn, error) {
	addr, ok := l.t.addr(l.node, l.id)
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownNode, l.node)
	}
	ctx, cancel := context.WithTimeout(l.t.ctx, DialTimeout)
	defer cancel()
	nc, err := l.t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if l.t.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	vers, err := exchangeApiVersions(nc, l.formatter, deadline)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	cn := newConn(l, nc, vers)
	l.t.wg.Add(1)
	go cn.read()
	return cn, nil
}

// backoff is the wait after the n-th dial failure in a row: BackoffMin doubled per failure
// up to BackoffMax, each within ±20 % (Kafka's reconnect.backoff jitter), never outside
// the two bounds.
func backoff(n int) time.Duration {
	d := BackoffMax
	if n < 8 {
		d = min(BackoffMin<<(n-1), BackoffMax)
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	return min(max(d, BackoffMin), BackoffMax)
}
