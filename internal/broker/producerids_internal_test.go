package broker

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
)

// Producer ids are unique and increasing across block boundaries and reopenings, and every
// id handed out is below the reservation in the metadata log.
func TestProducerIDsNeverReissued(t *testing.T) {
	dir := t.TempDir()
	last := int64(0)
	open := func() *Broker {
		b, err := Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for round := range 3 {
		b := open()
		n := producerIDBlock*round + 5 // 5, 1005, 2005: within one block, across one, across two
		for range n {
			id, err := b.pids.allocate()
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("round %d: producer id %d after %d", round, id, last)
			}
			last = id
		}
		if im, _ := b.image(); im.ProducerIDs.Next <= last {
			t.Fatalf("round %d: the log's reservation %d does not cover id %d", round, im.ProducerIDs.Next, last)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b := open()
	defer b.Close()
	if b.pids.next <= last {
		t.Fatalf("reopened at %d, below the last id issued %d", b.pids.next, last)
	}
}

// The next block is fetched in the background once 90% of the current one is handed out,
// and the ids after the block come from it without another reservation; Close waits for a
// fetch in progress.
func TestProducerIDsFetchedAhead(t *testing.T) {
	b, err := Open(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first, err := b.pids.allocate()
	if err != nil {
		t.Fatal(err)
	}
	b.pids.mu.Lock()
	end := b.pids.limit
	b.pids.mu.Unlock()
	for range end - first - producerIDPrefetchAt {
		if _, err := b.pids.allocate(); err != nil {
			t.Fatal(err)
		}
	}
	var next [2]int64
	if err := await.Until(10*time.Second, 5*time.Millisecond, func() error {
		b.pids.mu.Lock()
		defer b.pids.mu.Unlock()
		if b.pids.pending == nil {
			return errors.New("no block fetched ahead")
		}
		next = *b.pids.pending
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if im, _ := b.image(); next[0] < end || im.ProducerIDs.Next != next[1] {
		t.Fatalf("block fetched ahead %v after one ending at %d; the log's bound %d", next, end, im.ProducerIDs.Next)
	}
	var last int64
	for range producerIDPrefetchAt + 2 { // past the first block, far from the second's 90%
		if last, err = b.pids.allocate(); err != nil {
			t.Fatal(err)
		}
	}
	if last < next[0] || last >= next[1] {
		t.Fatalf("id %d past the first block, not from the one fetched ahead %v", last, next)
	}
	if im, _ := b.image(); im.ProducerIDs.Next != next[1] {
		t.Fatalf("a reservation beyond the block fetched ahead: bound %d", im.ProducerIDs.Next)
	}
}
