package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
)

func newTCP(t testing.TB, addr string) *TCP {
	tr := NewTCP(Config{Self: 9, Addr: func(node int32) (string, bool) { return addr, node == 1 }})
	t.Cleanup(tr.Close)
	return tr
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pending is how many calls the lane holds (queued and in flight).
func pending(tr *TCP, node int32, ln Lane) int {
	tr.mu.Lock()
	l := tr.lanes[laneKey{node, ln}]
	tr.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func waitPending(t testing.TB, tr *TCP, ln Lane, want int) {
	t.Helper()
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if n := pending(tr, 1, ln); n != want {
			return fmt.Errorf("%d pending, want %d", n, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func checkEcho(t testing.TB, resp kmsg.Response, err error, gen int32) {
	t.Helper()
	if err != nil {
		t.Fatalf("gen %d: %v", gen, err)
	}
	var got int32
	switch r := resp.(type) {
	case *kmsg.HeartbeatResponse:
		got = r.ThrottleMillis
	case *raftResponse:
		got = r.ThrottleMillis
	default:
		t.Fatalf("gen %d: %T", gen, resp)
	}
	if got != gen {
		t.Fatalf("gen %d got the answer to %d", gen, got)
	}
}

// Up to MaxInFlight requests are written before the first is answered, never more, and
// every caller gets its own answer.
func TestPipelinedInOrder(t *testing.T) {
	var fp *fakePeer
	fp = startFake(t, func(r fakeReq) kmsg.Response {
		if r.body.(*kmsg.HeartbeatRequest).Generation == 0 {
			// Hold the first answer until the client has written a full window.
			if err := await.Until(10*time.Second, time.Millisecond, func() error {
				if n := fp.received.Load(); n < MaxInFlight {
					return fmt.Errorf("%d received", n)
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}
		return echo(r)
	})
	tr := newTCP(t, fp.addr)
	ctx := ctxT(t)
	const n = 500
	var wg sync.WaitGroup
	send := func(gen int32) {
		defer wg.Done()
		resp, err := tr.Send(ctx, 1, Control, heartbeat(gen))
		checkEcho(t, resp, err, gen)
	}
	wg.Add(n)
	go send(0)
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if fp.received.Load() == 0 {
			return errors.New("the first request has not arrived")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for gen := int32(1); gen < n; gen++ {
		go send(gen)
	}
	wg.Wait()
	if m := fp.maxOpen.Load(); m != MaxInFlight {
		t.Errorf("at most %d requests were unanswered at the peer, want %d", m, MaxInFlight)
	}
	if d := fp.dials.Load(); d != 1 {
		t.Errorf("%d connections, want 1", d)
	}
	waitPending(t, tr, Control, 0)
}

// hold makes a fake peer's answers wait until the returned func is called (at most once);
// the test's cleanup calls it too, so the fake can stop.
func hold(t testing.TB) (wait func(), release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return func() { <-ch }, release
}

// A lane holding MaxQueued calls refuses the next at once with a retriable error, drops a
// raft message and reports it, and takes calls again once answers come.
func TestFullLaneByCount(t *testing.T) {
	wait, release := hold(t)
	fp := startFake(t, func(r fakeReq) kmsg.Response { wait(); return echo(r) })
	var dropped atomic.Int32
	tr := NewTCP(Config{Self: 9, Addr: func(int32) (string, bool) { return fp.addr, true },
		OnRaftDrop: func(node int32) { dropped.Store(node) }})
	t.Cleanup(tr.Close)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for gen := range int32(MaxQueued) {
		wg.Go(func() {
			resp, err := tr.Send(ctx, 1, Coordination, heartbeat(gen))
			checkEcho(t, resp, err, gen)
		})
	}
	waitPending(t, tr, Coordination, MaxQueued)
	start := time.Now()
	if _, err := tr.Send(ctx, 1, Coordination, heartbeat(-1)); !errors.Is(err, ErrQueueFull) || !Retriable(err) {
		t.Fatalf("full lane: %v, want ErrQueueFull", err)
	}
	if _, err := tr.Send(ctx, 1, Coordination, raftMsg(-1)); !errors.Is(err, ErrRaftDropped) || !Retriable(err) {
		t.Fatalf("full lane, raft message: %v, want ErrRaftDropped", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %v", d)
	}
	if dropped.Load() != 1 {
		t.Errorf("OnRaftDrop got node %d, want 1", dropped.Load())
	}
	// Other lanes are not full.
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := tr.Send(ctx, 1, Control, raftMsg(7))
		checkEcho(t, resp, err, 7)
	}()
	release()
	<-done
	wg.Wait()
	waitPending(t, tr, Coordination, 0)
	resp, err := tr.Send(ctx, 1, Coordination, heartbeat(5))
	checkEcho(t, resp, err, 5)
}

// bigHeartbeat is a request of about size bytes.
func bigHeartbeat(gen int32, size int) *kmsg.HeartbeatRequest {
	r := heartbeat(gen)
	r.MemberID = strings.Repeat("m", size)
	return r
}

// A lane holding MaxQueuedBytes refuses the next request; one request larger than the
// bound goes through an empty lane.
func TestFullLaneByBytes(t *testing.T) {
	wait, release := hold(t)
	fp := startFake(t, func(r fakeReq) kmsg.Response { wait(); return echo(r) })
	tr := newTCP(t, fp.addr)
	ctx := ctxT(t)
	const size = 9 << 20
	const fits = MaxQueuedBytes / (size + 100)
	var wg sync.WaitGroup
	for gen := range int32(fits) {
		wg.Go(func() {
			resp, err := tr.Send(ctx, 1, Replication, bigHeartbeat(gen, size))
			checkEcho(t, resp, err, gen)
		})
	}
	waitPending(t, tr, Replication, fits)
	if _, err := tr.Send(ctx, 1, Replication, bigHeartbeat(-1, size)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("lane with %d bytes queued: %v, want ErrQueueFull", fits*size, err)
	}
	// A small one still fits.
	small := make(chan struct{})
	go func() {
		defer close(small)
		resp, err := tr.Send(ctx, 1, Replication, heartbeat(100))
		checkEcho(t, resp, err, 100)
	}()
	release()
	<-small
	wg.Wait()
	waitPending(t, tr, Replication, 0)
	resp, err := tr.Send(ctx, 1, Replication, bigHeartbeat(200, MaxQueuedBytes+1))
	checkEcho(t, resp, err, 200)
}

// When the peer's listener and connections go away, calls fail with a retriable error;
// when it is back on the same address the lane reconnects by itself.
func TestReconnect(t *testing.T) {
	wait, release := hold(t)
	fp := startFake(t, func(r fakeReq) kmsg.Response {
		if r.body.(*kmsg.HeartbeatRequest).Generation == 99 {
			wait()
		}
		return echo(r)
	})
	addr := fp.addr
	tr := newTCP(t, addr)
	ctx := ctxT(t)
	resp, err := tr.Send(ctx, 1, Control, heartbeat(1))
	checkEcho(t, resp, err, 1)

	inflight := make(chan error, 1)
	go func() { _, err := tr.Send(ctx, 1, Control, heartbeat(99)); inflight <- err }()
	waitPending(t, tr, Control, 1)
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if fp.received.Load() < 2 {
			return errors.New("the held request has not arrived")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { fp.stop(); close(stopped) }()
	err = <-inflight
	var ce *ConnError
	if !errors.As(err, &ce) || !Retriable(err) {
		t.Fatalf("in flight when the peer went away: %v, want a ConnError", err)
	}
	release()
	<-stopped

	if _, err := tr.Send(ctx, 1, Control, heartbeat(2)); !Retriable(err) {
		t.Fatalf("peer down: %v, want a retriable error", err)
	}
	fp.listen(addr)
	start := time.Now()
	if err := await.Until(10*time.Second, 10*time.Millisecond, func() error {
		resp, err := tr.Send(ctx, 1, Control, heartbeat(3))
		if err != nil {
			if !Retriable(err) {
				return await.Stop(err)
			}
			return err
		}
		checkEcho(t, resp, nil, 3)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The redial waits out at most one backoff (BackoffMax) after the listener is back.
	if d := time.Since(start); d > BackoffMax+2*time.Second {
		t.Errorf("reconnected after %v", d)
	}
}

// A call whose ctx ends returns at once; one that ends before it is written is never
// written, and the lane frees its place.
func TestContextCancel(t *testing.T) {
	wait, release := hold(t)
	fp := startFake(t, func(r fakeReq) kmsg.Response { wait(); return echo(r) })
	tr := newTCP(t, fp.addr)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for gen := range int32(MaxInFlight) {
		wg.Go(func() {
			resp, err := tr.Send(ctx, 1, Control, heartbeat(gen))
			checkEcho(t, resp, err, gen)
		})
	}
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if n := fp.received.Load(); n != MaxInFlight {
			return fmt.Errorf("%d received", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The window is full: this one waits in the queue, unwritten.
	cctx, cancel := context.WithCancel(ctx)
	queued := make(chan error, 1)
	go func() { _, err := tr.Send(cctx, 1, Control, heartbeat(-1)); queued <- err }()
	waitPending(t, tr, Control, MaxInFlight+1)
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while queued: %v", err)
	}
	// And one cancelled in flight.
	ictx, icancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer icancel()
	release()
	wg.Wait()
	waitPending(t, tr, Control, 0)
	if n := fp.received.Load(); n != MaxInFlight {
		t.Errorf("the peer read %d requests, want %d: the cancelled one was written", n, MaxInFlight)
	}

	// In flight: the answer is held, the caller leaves at its deadline.
	wait2, release2 := hold(t)
	fp.handle = func(r fakeReq) kmsg.Response { wait2(); return echo(r) }
	start := time.Now()
	if _, err := tr.Send(ictx, 1, Control, heartbeat(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline in flight: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
	release2()
	waitPending(t, tr, Control, 0)
}

// A lane whose peer holds its answers does not delay another lane to the same peer.
func TestSlowLaneDoesNotDelayOthers(t *testing.T) {
	wait, release := hold(t)
	fp := startFake(t, func(r fakeReq) kmsg.Response {
		if strings.HasSuffix(r.clientID, Replication.String()) {
			wait()
		}
		return echo(r)
	})
	tr := newTCP(t, fp.addr)
	ctx := ctxT(t)
	slow := make(chan error, MaxInFlight+10)
	for gen := range int32(MaxInFlight + 10) {
		go func() { _, err := tr.Send(ctx, 1, Replication, heartbeat(gen)); slow <- err }()
	}
	waitPending(t, tr, Replication, MaxInFlight+10)
	for _, ln := range []Lane{Control, Coordination} {
		for gen := range int32(100) {
			resp, err := tr.Send(ctx, 1, ln, heartbeat(gen))
			checkEcho(t, resp, err, gen)
		}
	}
	if len(slow) != 0 {
		t.Fatal("a held replication call returned")
	}
	release()
	for range MaxInFlight + 10 {
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
	}
}

// Versions come from the peer's ApiVersions: the highest both support, and a key the peer
// does not list is refused without being written (exactq closes a connection that sends
// an unknown key).
func TestVersionsFromApiVersions(t *testing.T) {
	var versions sync.Map
	fp := startFake(t, func(r fakeReq) kmsg.Response { versions.Store(r.key, r.version); return echo(r) })
	fp.apis = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 3}, {ApiKey: 12, MinVersion: 1, MaxVersion: 2}}
	tr := newTCP(t, fp.addr)
	ctx := ctxT(t)
	resp, err := tr.Send(ctx, 1, Control, heartbeat(1))
	checkEcho(t, resp, err, 1)
	if v, _ := versions.Load(int16(12)); v != int16(2) {
		t.Errorf("Heartbeat sent at v%v, want v2", v)
	}
	if _, err := tr.Send(ctx, 1, Control, raftMsg(1)); !errors.Is(err, ErrUnsupported) || Retriable(err) {
		t.Fatalf("unlisted key: %v, want ErrUnsupported", err)
	}
	resp, err = tr.Send(ctx, 1, Control, heartbeat(2))
	checkEcho(t, resp, err, 2)
	if d := fp.dials.Load(); d != 1 {
		t.Errorf("%d connections, want 1", d)
	}
	if n := fp.received.Load(); n != 2 {
		t.Errorf("the peer read %d requests, want 2", n)
	}
}

// A node the resolver does not know fails at once, retriably; the control lane of a node
// with a controller listener dials it, the other lanes the broker listener.
func TestAddresses(t *testing.T) {
	broker := startFake(t, nil)
	controller := startFake(t, nil)
	tr := NewTCP(Config{Self: 9,
		Addr:           func(node int32) (string, bool) { return broker.addr, node == 1 },
		ControllerAddr: func(node int32) (string, bool) { return controller.addr, node == 1 }})
	t.Cleanup(tr.Close)
	ctx := ctxT(t)
	if _, err := tr.Send(ctx, 2, Control, heartbeat(1)); !errors.Is(err, ErrUnknownNode) || !Retriable(err) {
		t.Fatalf("unknown node: %v", err)
	}
	for ln := Lane(0); ln < NumLanes; ln++ {
		resp, err := tr.Send(ctx, 1, ln, heartbeat(int32(ln)))
		checkEcho(t, resp, err, int32(ln))
	}
	if b, c := broker.received.Load(), controller.received.Load(); b != 2 || c != 1 {
		t.Errorf("broker listener got %d, controller listener %d; want 2 and 1", b, c)
	}
}

// Close fails what is in flight with ErrClosed, and every later Send.
func TestClose(t *testing.T) {
	wait, release := hold(t)
	defer release() // before the fake's cleanup stops it
	fp := startFake(t, func(r fakeReq) kmsg.Response { wait(); return echo(r) })
	tr := NewTCP(Config{Self: 9, Addr: func(int32) (string, bool) { return fp.addr, true }})
	ctx := ctxT(t)
	inflight := make(chan error, 1)
	go func() { _, err := tr.Send(ctx, 1, Control, heartbeat(1)); inflight <- err }()
	waitPending(t, tr, Control, 1)
	tr.Close()
	if err := <-inflight; !errors.Is(err, ErrClosed) {
		t.Errorf("in flight at Close: %v", err)
	}
	if _, err := tr.Send(ctx, 1, Control, heartbeat(2)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	prev := time.Duration(0)
	for n := 1; n < 20; n++ {
		d := backoff(n)
		if d < BackoffMin || d > BackoffMax {
			t.Fatalf("backoff(%d) = %v", n, d)
		}
		if n <= 4 && d <= prev*6/10 {
			t.Errorf("backoff(%d) = %v after %v: not growing", n, d, prev)
		}
		prev = d
	}
	if d := backoff(1); d > BackoffMin*13/10 {
		t.Errorf("first backoff %v", d)
	}
}
