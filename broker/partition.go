package broker

import (
	"sync"
	"sync/atomic"

	"github.com/exactq/exactq/log"
	"github.com/exactq/exactq/producerstate"
)

// partition is one partition of a topic: its log, its idempotent-producer state and its
// high watermark.
//
// Writes are serialized by mu: checking producer sequences and appending must be one step,
// or two retries of the same batch could both pass the duplicate check. Reads need no lock:
// the log is safe for concurrent reads and the high watermark is atomic.
type partition struct {
	topic *topic
	index int32
	log   *log.Log

	mu        sync.Mutex
	producers *producerstate.State // guarded by mu
	aborted   []abortedTxn         // guarded by mu; aborted-transaction index, marker order
	waiters   map[chan struct{}]struct{}

	// unstable is the first offset of an open transaction, MaxInt64 when none: the last
	// stable offset is min(hw, unstable). Written under mu, read without it.
	unstable atomic.Int64

	// hw is the high watermark: the end of the prefix consumers may read. With fsync on,
	// it is the durable end of the log, so a consumer never sees a record that a crash
	// could take back and later hand out again at the same offset with other contents.
	hw atomic.Int64

	syncKick chan struct{} // capacity 1: "the log grew, make it durable and advance hw"
	done     chan struct{}

	// lifeMu serializes the two ends of a partition's life, close (shutdown, a failed
	// creation) and delete (DeleteTopics), which can race at shutdown: whichever comes
	// second does nothing, so a deleted partition never gets a producer-state snapshot
	// written into its removed directory, and done is closed once.
	lifeMu sync.Mutex
	ended  bool // guarded by lifeMu
}

func (p *partition) highWatermark() int64 { return p.hw.Load() }

// advanceHW raises the high watermark and wakes fetches waiting on this partition.
func (p *partition) advanceHW(end int64) {
	for {
		cur := p.hw.Load()
		if end <= cur {
			return
		}
		if p.hw.CompareAndSwap(cur, end) {
			break
		}
	}
	p.mu.Lock()
	for w := range p.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

// watch registers ch to be signalled (non-blocking) when the high watermark advances.
func (p *partition) watch(ch chan struct{}) {
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = make(map[chan struct{}]struct{})
	}
	p.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, ch)
	p.mu.Unlock()
}

// kickSync asks the partition's syncer to make the log durable up to its current end.
func (p *partition) kickSync() {
	select {
	case p.syncKick <- struct{}{}:
	default:
	}
}

// syncLoop is the partition's one background goroutine when fsync is on: after every kick
// it waits for the log to be durable up to its end (sharing the fsync with any acks=all
// producers waiting on the same range) and publishes the new high watermark.
func (p *partition) syncLoop(onErr func(error)) {
	for {
		select {
		case <-p.done:
			return
		case <-p.syncKick:
		}
		end := p.log.EndOffset()
		if err := p.log.WaitDurable(end); err != nil {
			onErr(err)
			continue
		}
		p.advanceHW(p.log.DurableEnd())
	}
}
