package server

import (
	"context"
	"errors"
	"sync"
)

// The request memory budget (queued.max.request.bytes): every request is charged from when
// its size prefix is read until its bytes are released (its response written, or Handle
// returned with Reply.BodyDone, or no response due), for its frame buffer and for what
// decoding it allocates (decodecost's bound, charged before kmsg decodes). A connection whose
// next request does not fit waits, not reading its socket, so TCP pushes back on its client
// and the heap does not grow.
//
// Kafka (SocketServer's MemoryPool, unbounded by default) reserves a frame's announced size
// when its size prefix is read. exactq charges a large frame as its buffer fills instead, so
// a client announcing large frames and sending little holds only what it sent: reserving
// announced sizes let ~100 connections that each announced 1 MiB and trickled bytes stall
// every other client's large requests for connections.max.idle.ms. It also charges decoding,
// since a body's array counts can make kmsg allocate tens of times the frame's size (issue
// #17 finding 2).
//
// The budget is split in two pools, one for frames and one for decoded requests. Waiting
// cannot deadlock:
//   - a frame waits only to be admitted (its first piece, and its whole announced size
//     against its connection's share); once admitted it never waits: a piece that would
//     take the frame pool past seven eighths closes the connection instead (only when many
//     large frames arrive at once and together overrun the budget);
//   - a request waiting for decode memory holds frame memory, but the decode pool is only
//     ever held by requests being handled, which release it without waiting for a reader.
//
// In each pool:
//   - a new charge is admitted while the pool stays within three quarters, leaving an
//     eighth for frames already being read to grow into;
//   - one connection may hold at most the pool's connection share, so it cannot take the
//     whole pool (a largest request still fits);
//   - the last eighth is kept for small charges (at most smallChargeBytes, a connection's
//     first), so while large requests of some clients fill the rest, the small requests of
//     every client (Metadata, heartbeats, commits, fetches) are still read and answered.

// DefaultQueuedMaxRequestBytes is the default request memory budget (Kafka's default is -1,
// unbounded). 256 MiB lets a 100 MiB request (socket.request.max.bytes) through with
// room beside it; MinQueuedMaxRequestBytes says what a larger max request needs.
const DefaultQueuedMaxRequestBytes int64 = 256 << 20

// smallChargeBytes is the largest charge a pool's reserve serves. Frames up to this size fit
// the connection's read buffer and are charged only once they have wholly arrived, so
// connections that announce small frames and send nothing hold none of the reserve.
const smallChargeBytes = readerBufBytes

// ErrRequestMemory: decoding the request would allocate more than one connection may hold
// of the request memory budget. The connection is closed, as for a frame over
// MaxRequestBytes; nothing is allocated for it.
var ErrRequestMemory = errors.New("request would take more memory than one connection's share of queued.max.request.bytes")

// MinQueuedMaxRequestBytes is the smallest budget that lets a frame of maxRequestBytes
// through: the frame pool is half the budget, and a frame may grow to seven eighths of it.
func MinQueuedMaxRequestBytes(maxRequestBytes int32) int64 {
	frame := int64(frameClassCap(int(maxRequestBytes)))
	return (2*8*frame + 6) / 7
}

// requestBudget is a server's request memory budget.
type requestBudget struct {
	frames  *memPool // frame buffers, charged when the size prefix is read
	decoded *memPool // decodecost's bound, charged before decoding
}

// newRequestBudget splits limitBytes (negative: unbounded, only counted) between the pools.
func newRequestBudget(limitBytes int64, maxRequestBytes int32) *requestBudget {
	if limitBytes < 0 {
		return &requestBudget{frames: newMemPool(-1, -1), decoded: newMemPool(-1, -1)}
	}
	half := limitBytes / 2
	frameShare := max(half/2, int64(frameClassCap(int(maxRequestBytes))))
	return &requestBudget{frames: newMemPool(half, frameShare), decoded: newMemPool(limitBytes-half, half/2)}
}

// usedBytes is the total charged now.
func (b *requestBudget) usedBytes() int64 { return b.frames.used() + b.decoded.used() }

// requestCharge is what one request holds of the budget.
type requestCharge struct {
	frameBytes, decodedBytes int64
}

// A memPool bounds the bytes charged against it, in total and per connection.
type memPool struct {
	limitBytes      int64 // negative: unbounded
	admitLimitBytes int64 // a new charge that is not small is admitted within this total
	growLimitBytes  int64 // a frame being read may grow within this total
	connShareBytes  int64 // most one connection may hold

	mu        sync.Mutex
	usedBytes int64
	waiters   int           // acquires waiting for freed
	freed     chan struct{} // closed and replaced at a release while waiters > 0
}

// newMemPool returns a pool of limitBytes (negative: unbounded) of which one connection may
// hold connShareBytes, capped at what a frame may grow to.
func newMemPool(limitBytes, connShareBytes int64) *memPool {
	grow := limitBytes - limitBytes/8
	return &memPool{
		limitBytes:      limitBytes,
		admitLimitBytes: limitBytes - limitBytes/4,
		growLimitBytes:  grow,
		connShareBytes:  min(connShareBytes, grow),
		freed:           make(chan struct{}),
	}
}

// A poolShare is what one connection holds of a pool; guarded by the pool's mu.
type poolShare struct{ heldBytes int64 }

// canEverFit reports whether a request of totalBytes could be admitted to a connection
// holding nothing and complete.
func (p *memPool) canEverFit(totalBytes int64) bool {
	return p.limitBytes < 0 || totalBytes <= p.connShareBytes || (totalBytes <= smallChargeBytes && totalBytes <= p.limitBytes)
}

// fits reports whether sh may be admitted a request charging firstBytes now and up to
// totalBytes in all. p.mu is held.
func (p *memPool) fits(sh *poolShare, firstBytes, totalBytes int64) bool {
	if p.limitBytes < 0 || totalBytes == 0 {
		return true
	}
	if totalBytes <= smallChargeBytes && sh.heldBytes == 0 {
		// A connection's first small charge may use the reserve: that is what keeps
		// small requests flowing while large ones fill the rest.
		return p.usedBytes+firstBytes <= p.limitBytes
	}
	return sh.heldBytes+totalBytes <= p.connShareBytes && p.usedBytes+firstBytes <= p.admitLimitBytes
}

// acquire admits a request to sh, charging firstBytes now; the rest, up to totalBytes, it
// may take with grow. It waits until the request fits or ctx ends. totalBytes must satisfy
// canEverFit.
func (p *memPool) acquire(ctx context.Context, sh *poolShare, firstBytes, totalBytes int64) error {
	for {
		p.mu.Lock()
		if p.fits(sh, firstBytes, totalBytes) {
			p.usedBytes += firstBytes
			sh.heldBytes += firstBytes
			p.mu.Unlock()
			return nil
		}
		freed := p.freed
		p.waiters++
		p.mu.Unlock()
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		p.waiters--
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// grow charges n more to an admitted request of sh without waiting, or reports false when
// that would take the pool past growLimitBytes.
func (p *memPool) grow(sh *poolShare, n int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limitBytes >= 0 && p.usedBytes+n > p.growLimitBytes {
		return false
	}
	p.usedBytes += n
	sh.heldBytes += n
	return true
}

// release gives back n charged to sh.
func (p *memPool) release(sh *poolShare, n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	p.usedBytes -= n
	sh.heldBytes -= n
	if p.waiters > 0 {
		close(p.freed)
		p.freed = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *memPool) used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usedBytes
}
