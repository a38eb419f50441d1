package server

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/alloctest"
)

// TestRequestBudget (queued.max.request.bytes): attackers pipeline large Produce frames,
// written in small pieces, whose handling does not finish (a Wait that blocks), and one more
// announces a large frame and stalls. The memory charged for requests never exceeds the
// budget, the handler never holds more request bytes than the budget, and a small request
// from another client is still answered at once. Once the attackers' requests finish, the
// attackers are answered (those whose frames overran the budget mid-read were closed) and
// everything charged is released: waiting never deadlocks.
// With QueuedMaxRequestBytes -1 (unbounded, today's behaviour before the budget) the
// handler held all 9.6 MB of the attackers' frames.
func TestRequestBudget(t *testing.T) {
	const (
		maxRequestBytes = 1 << 20
		budgetBytes     = 4 << 20
		recordBytes     = 300 << 10
		attackers       = 4
		framesEach      = 8
	)
	release := make(chan struct{})
	var heldBytes, maxHeldBytes atomic.Int64 // request bytes the handler holds
	h := newTestHandler()
	h.ended = nil
	h.handle = func(ctx context.Context, req *Request) Reply {
		p, ok := req.Body.(*kmsg.ProduceRequest)
		if !ok {
			return Reply{Resp: req.Body.ResponseKind()}
		}
		n := int64(len(p.Topics[0].Partitions[0].Records))
		held := heldBytes.Add(n)
		for m := maxHeldBytes.Load(); held > m && !maxHeldBytes.CompareAndSwap(m, held); m = maxHeldBytes.Load() {
		}
		return Reply{Wait: func() kmsg.Response {
			<-release
			heldBytes.Add(-n)
			return p.ResponseKind()
		}}
	}
	s := startServer(t, Config{MaxRequestBytes: maxRequestBytes, QueuedMaxRequestBytes: budgetBytes}, h)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	// Sample the gauge until the test ends.
	var maxQueued atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if q := s.QueuedRequestBytes(); q > maxQueued.Load() {
				maxQueued.Store(q)
			}
			select {
			case <-stopSampling:
				return
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()

	var writers sync.WaitGroup
	var conns []*rawClient
	for i := range attackers {
		c := dialFrom(t, s, "127.0.0.2")
		conns = append(conns, c)
		var frames []byte
		for j := range framesEach {
			req := benchProduce(recordBytes)
			frames = append(frames, c.f.AppendRequest(nil, req, int32(i*100+j))...)
		}
		writers.Add(1)
		go func() {
			defer writers.Done()
			for len(frames) > 0 { // slowly: small writes; blocks once the server stops reading
				n := min(len(frames), 8<<10)
				if _, err := c.nc.Write(frames[:n]); err != nil {
					return
				}
				frames = frames[n:]
			}
		}()
	}
	stalled := dialFrom(t, s, "127.0.0.2")
	stalled.write(append(binary.BigEndian.AppendUint32(nil, 600<<10), 0, 0))

	// Wait until the attackers hold all they can: no further frame is admitted.
	admit := s.budget.frames.admitLimitBytes
	waitUntil(t, "the attackers fill the budget", func() bool {
		return s.budget.frames.used()+readerBufBytes > admit
	})

	victim := dial(t, s)
	start := time.Now()
	victim.served(1)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("victim answered after %v", d)
	}

	if m := maxHeldBytes.Load(); m > budgetBytes {
		t.Errorf("the handler held %d request bytes, budget %d", m, budgetBytes)
	}

	close(release)
	answered := 0
	for i, c := range conns {
		for j := range framesEach {
			corr, _, err := c.readFrame()
			if err != nil {
				break // closed: its frame overran the budget
			}
			if corr != int32(i*100+j) {
				t.Fatalf("attacker %d response %d: corr %d", i, j, corr)
			}
			answered++
		}
		c.nc.Close()
	}
	if answered == 0 {
		t.Error("no attacker request was answered")
	}
	writers.Wait()
	close(stopSampling)
	<-sampled
	if m := maxQueued.Load(); m > budgetBytes || m == 0 {
		t.Errorf("queued request bytes peaked at %d, budget %d", m, budgetBytes)
	}
	stalled.nc.Close()
	waitUntil(t, "every charge is released", func() bool { return s.QueuedRequestBytes() == 0 })
}

// TestStalledFramesHoldNothing: connections that announce large frames and trickle a few
// bytes (slowloris) hold only what they sent, so another client's large request is still
// read and answered. Failed when frames were charged their announced size at the size
// prefix (as Kafka's MemoryPool does): the stalled connections reserved the frame pool and the
// victim's request was never read.
func TestStalledFramesHoldNothing(t *testing.T) {
	h := newTestHandler()
	h.ended = nil
	s := startServer(t, Config{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: 4 << 20}, h)
	const stalled = 40
	for range stalled {
		c := dialFrom(t, s, "127.0.0.2")
		c.write(append(binary.BigEndian.AppendUint32(nil, 1<<20-100), 0, 3, 0, 9, 0, 0))
	}
	waitUntil(t, "every stalled connection is open", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == stalled
	})
	victim := dial(t, s)
	req := benchProduce(600 << 10)
	victim.send(req, 7)
	if corr, _ := victim.recv(req); corr != 7 {
		t.Fatalf("correlation id %d", corr)
	}
	// The victim's own charge is released just after its response is written, which can
	// be after the client read it; the stalled connections never release anything, so
	// reaching 0 shows they hold nothing.
	waitUntil(t, "stalled connections hold nothing", func() bool { return s.QueuedRequestBytes() == 0 })
}

// TestDecodeCostRefused (#17 finding 2): a small frame whose decoding would allocate more
// than a connection's share of the budget (unknown tagged fields: ~190 bytes each for 2
// wire bytes) is refused without decoding, and the connection closed; others are served.
// Failed before the fix: it was decoded (allocating ~3.8 MB) and answered.
func TestDecodeCostRefused(t *testing.T) {
	s := startServer(t, Config{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: 4 << 20}, newTestHandler())
	req := metadataReq(12)
	body := req.AppendTo(nil)
	body = body[:len(body)-1] // the top-level tag section: replaced by 20,000 unknown tags
	const tags = 20000
	body = binary.AppendUvarint(body, tags)
	for i := range tags {
		body = binary.AppendUvarint(body, uint64(100+i))
		body = binary.AppendUvarint(body, 0)
	}
	c := dial(t, s)
	frame := c.f.AppendRequest(nil, req, 1)
	hdr := frame[4 : len(frame)-len(req.AppendTo(nil))] // size prefix excluded, header kept
	msg := append(append([]byte(nil), hdr...), body...)
	c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...))
	c.expectClosed()
	dial(t, s).served(2)
}

func TestMemPool(t *testing.T) {
	const mib = 1 << 20
	p := newMemPool(8*mib, 4*mib) // admit within 6 MiB, grow within 7, reserve 1
	ctx := context.Background()
	var a, b, first poolShare
	fits := func(sh *poolShare, firstBytes, totalBytes int64) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.fits(sh, firstBytes, totalBytes)
	}
	if err := p.acquire(ctx, &a, 4*mib, 4*mib); err != nil {
		t.Fatal(err)
	}
	if fits(&a, mib, mib) || !fits(&b, mib, 2*mib) {
		t.Fatal("connection share not applied")
	}
	if err := p.acquire(ctx, &b, mib, 3*mib); err != nil {
		t.Fatal(err)
	}
	// Admission stops at 6 MiB; an admitted frame grows to 7 MiB, no further.
	if fits(&first, mib+1, 2*mib) || !p.grow(&b, mib) || !p.grow(&b, mib) || p.grow(&b, 1) {
		t.Fatal("admission and growth limits")
	}
	// Only a connection's first small charge may use the reserve.
	if !fits(&first, smallChargeBytes, smallChargeBytes) || fits(&b, smallChargeBytes, smallChargeBytes) ||
		fits(&first, smallChargeBytes+1, smallChargeBytes+1) {
		t.Fatal("reserve not kept for small charges")
	}
	// A waiter wakes when bytes are released.
	done := make(chan error, 1)
	var c poolShare
	go func() { done <- p.acquire(ctx, &c, 2*mib, 2*mib) }()
	p.release(&a, 4*mib)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := p.used(); got != 5*mib {
		t.Fatalf("used %d", got)
	}
	// A wait ends with its context.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- p.acquire(cctx, &a, 4*mib, 4*mib) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if p.canEverFit(4*mib+1) || !p.canEverFit(4*mib) {
		t.Fatal("canEverFit")
	}
}

func TestMinQueuedMaxRequestBytes(t *testing.T) {
	for _, maxReq := range []int32{1 << 20, 100 << 20, 3<<20 + 5} {
		b := newRequestBudget(MinQueuedMaxRequestBytes(maxReq), maxReq)
		if frame := int64(frameClassCap(int(maxReq))); !b.frames.canEverFit(frame) {
			t.Errorf("max request %d: a largest frame never fits", maxReq)
		}
	}
	if got := (Config{}).withDefaults().QueuedMaxRequestBytes; got != DefaultQueuedMaxRequestBytes || got < MinQueuedMaxRequestBytes(DefaultMaxRequestBytes) {
		t.Errorf("default %d", got)
	}
}

// TestLyingCountOverTCP (#17 finding 2): a 4 MB Metadata request whose topic count claims as
// many topics as kmsg's own check lets through (2 bytes each) is refused before decoding:
// the connection is closed, as Kafka closes on an undecodable request, and the broker
// allocates little more than the frame. Failed before decodecost was called: kmsg made a
// 2-million-topic array: 121 MB allocated for the 4 MB frame.
func TestLyingCountOverTCP(t *testing.T) {
	const frameBytes = 4 << 20
	s := startServer(t, Config{MaxRequestBytes: 8 << 20}, newTestHandler())
	c := dial(t, s)
	frame := c.f.AppendRequest(nil, metadataReq(4), 1)
	frame = frame[:len(frame)-5] // the empty topic array and the auto-create flag
	frame = binary.BigEndian.AppendUint32(frame, frameBytes/2)
	frame = append(frame, make([]byte, frameBytes)...)
	for i := range frame[len(frame)-frameBytes:] {
		frame[len(frame)-frameBytes+i] = 0x7f
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))

	allocated := alloctest.Bytes(func() {
		go c.nc.Write(frame)
		c.expectClosed()
	})
	if allocated > 4*frameBytes {
		t.Errorf("allocated %d bytes for a %d-byte request", allocated, len(frame))
	}
	dial(t, s).served(2)
}
