package broker

import (
	"io"
	"log/slog"
	"testing"
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
