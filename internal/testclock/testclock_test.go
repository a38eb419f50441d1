package testclock

import (
	"sync"
	"testing"
	"time"
)

func TestAdvanceMovesNowForEveryReader(t *testing.T) {
	c := New()
	if c.Ms() != StartMs {
		t.Fatalf("new clock at %d, want %d", c.Ms(), StartMs)
	}
	var wg sync.WaitGroup
	for range 4 { // readers racing the test's moves (go test -race checks the locking)
		wg.Go(func() {
			for range 100 {
				if c.Ms() < StartMs {
					t.Error("clock went back")
				}
			}
		})
	}
	for range 100 {
		c.Advance(time.Millisecond)
	}
	wg.Wait()
	if c.Ms() != StartMs+100 {
		t.Fatalf("after 100 advances of 1 ms: %d, want %d", c.Ms(), StartMs+100)
	}
}
