package broker

import (
	"sync"
	"sync/atomic"

	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/producerstate"
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

	// epoch is the partition's leader epoch in the image the registry matches (set by the
	// publisher): what appended batches are stamped with.
	epoch atomic.Int32

	// hw is the high watermark: the end of the prefix consumers may read. With fsync on,
	// it is the durable end of the log, so a consumer never sees a record that a crash
	// could take back and later hand out again at the same offset with other contents.
	hw atomic.Int64

	// lifeMu serializes the two ends of a partition's life, close (shutdown, a failed
	// creation) and delete (DeleteTopics), which can race at shutdown: whichever comes
	// second does nothing, so a deleted partition never gets a producer-state snapshot
	// written into its removed directory.
	lifeMu sync.Mutex
	ended  bool // guarded by lifeMu

	// snapshotCurrent: the producer-state snapshot loaded at open covered the whole log
	// (set at open, read at close).
	snapshotCurrent bool
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

// kickSync asks the log to make itself durable up to its current end; with fsync on, the
// log's OnDurable (set in openPartition) then publishes the new high watermark. The log's
// shared flushers do it, sharing the fsync with any acks=all producers waiting on the same
// range: no goroutine per partition (one each was ~2.5 KB and a scheduler entry, 250 MB at
// 100,000 partitions).
func (p *partition) kickSync() { p.log.SyncAsync() }
