package broker

import (
	"testing"
)

// Producer ids are unique and increasing across block boundaries and reopenings, and every
// id handed out is below the durable reservation.
func TestProducerIDsNeverReissued(t *testing.T) {
	dir := t.TempDir()
	last := int64(0)
	for open := range 3 {
		p, err := openProducerIDs(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := producerIDBlock*open + 5 // 5, 1005, 2005: within one block, across one, across two
		for range n {
			id, err := p.allocate()
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("open %d: producer id %d after %d", open, id, last)
			}
			last = id
		}
		reopened, err := openProducerIDs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if reopened.next <= last {
			t.Fatalf("open %d: reservation on disk %d does not cover id %d", open, reopened.next, last)
		}
	}
}
