package sharestate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/coordlog"
)

// gatedPartition is an in-memory partition whose appends, once gated, each wait for a
// release: the test holds a write "in the fsync" while it queues more requests. It
// records the size of every append.
type gatedPartition struct {
	*coordlog.Memory
	mu      sync.Mutex
	gated   bool
	entered chan struct{}
	release chan struct{}
	sizes   []int
}

func newGated() *gatedPartition {
	return &gatedPartition{Memory: coordlog.NewMemory(0), entered: make(chan struct{}, 16), release: make(chan struct{}, 16)}
}

func (g *gatedPartition) gate(on bool) {
	g.mu.Lock()
	g.gated = on
	g.mu.Unlock()
}

func (g *gatedPartition) Append(ctx context.Context, b coordlog.Batch) (int64, error) {
	g.mu.Lock()
	gated := g.gated
	g.sizes = append(g.sizes, len(b.Records))
	g.mu.Unlock()
	if gated {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Memory.Append(ctx, b)
}

func (g *gatedPartition) appends() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.sizes...)
}

func newGatedStore(t *testing.T, updatesPerSnapshot int) (*Store, *gatedPartition) {
	t.Helper()
	g := newGated()
	s, err := New(Config{NumPartitions: 1, UpdatesPerSnapshot: updatesPerSnapshot}, []coordlog.Partition{g})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.gate(false)
		close(g.release)
		s.Close()
	})
	return s, g
}

// queued waits until n requests wait in the partition's queue.
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	err := await.Until(5*time.Second, time.Millisecond, func() error {
		if got := len(s.parts[0].in); got != n {
			return fmt.Errorf("%d requests queued, want %d", got, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Writes queued while an append is in flight are written together, in one append, and
// each is answered only once it is durable.
func TestGroupCommit(t *testing.T) {
	s, g := newGatedStore(t, 500)
	keys := make([]Key, 11)
	for i := range keys {
		keys[i] = key(fmt.Sprint("g", i), 0)
		must(t, s.Initialize(ctx, keys[i], 0, 0))
	}
	before := len(g.appends())
	g.gate(true)
	errs := make(chan error, len(keys))
	go func() { errs <- s.Write(ctx, keys[0], 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1))) }()
	<-g.entered // the first write's round is in its append
	for _, k := range keys[1:] {
		go func() { errs <- s.Write(ctx, k, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1))) }()
	}
	queued(t, s, len(keys)-1)
	select {
	case err := <-errs:
		t.Fatalf("a write was answered before its append returned: %v", err)
	default:
	}
	g.release <- struct{}{} // first round done; the second takes the ten queued writes
	<-g.entered
	g.release <- struct{}{}
	for range keys {
		must(t, <-errs)
	}
	if got := g.appends()[before:]; len(got) != 2 || got[0] != 1 || got[1] != len(keys)-1 {
		t.Fatalf("appends of %v records, want [1 %d]", got, len(keys)-1)
	}
	for _, k := range keys {
		if st := mustRead(t, s, k); len(st.Batches) != 1 {
			t.Fatalf("%s: %+v", k, st)
		}
	}
}

func mustRead(t *testing.T, s *Store, k Key) State {
	t.Helper()
	st, err := s.Read(ctx, k, -1)
	must(t, err)
	return st
}

// A read queued after a write is answered after that write is committed, and sees it.
func TestReadAfterWriteWaitsForItsCommit(t *testing.T) {
	s, g := newGatedStore(t, 500)
	k := key("g", 0)
	must(t, s.Initialize(ctx, k, 0, 0))
	g.gate(true)
	first := make(chan error, 1)
	go func() { first <- s.Write(ctx, k, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1))) }()
	<-g.entered
	second := make(chan error, 1)
	go func() { second <- s.Write(ctx, k, 0, 0, 0, -1, bl(sb(1, 1, StateArchived, 1))) }()
	queued(t, s, 1)
	read := make(chan State, 1)
	go func() { read <- mustRead(t, s, k) }()
	queued(t, s, 2)
	g.release <- struct{}{}
	must(t, <-first)
	<-g.entered // the round of the second write and the read is in its append
	select {
	case st := <-read:
		t.Fatalf("the read was answered before the write before it was durable: %+v", st)
	default:
	}
	g.release <- struct{}{}
	must(t, <-second)
	if st := <-read; len(st.Batches) != 2 {
		t.Fatalf("the read does not show the write before it: %+v", st)
	}
}

// A failed append fails every request of its round, and the partition is rebuilt from
// the log at once: nothing of the round is visible afterwards.
func TestFailedRoundFailsEveryReplyAndReplays(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprint("written=", lost), func(t *testing.T) {
			s, g := newGatedStore(t, 500)
			a, b := key("a", 0), key("b", 0)
			must(t, s.Initialize(ctx, a, 0, 0))
			must(t, s.Initialize(ctx, b, 0, 0))
			g.gate(true)
			hold := make(chan error, 1)
			go func() { hold <- s.Write(ctx, a, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1))) }()
			<-g.entered
			errs := make([]chan error, 3)
			for i := range errs {
				errs[i] = make(chan error, 1)
			}
			go func() { errs[0] <- s.Write(ctx, a, 0, 0, 0, -1, bl(sb(1, 1, StateArchived, 1))) }()
			queued(t, s, 1)
			go func() { _, err := s.ReadSummary(ctx, b, -1); errs[1] <- err }()
			queued(t, s, 2)
			go func() { errs[2] <- s.Write(ctx, b, 0, 0, 0, -1, bl(sb(0, 0, StateArchived, 1))) }()
			queued(t, s, 3)
			g.release <- struct{}{}
			must(t, <-hold)
			if lost {
				g.Memory.FailAfterAppend = errors.New("ack lost")
			} else {
				g.Memory.FailAppend = errors.New("disk on fire")
			}
			<-g.entered
			g.release <- struct{}{}
			for i, ch := range errs {
				err := <-ch
				wantCode(t, err, kerr.CoordinatorNotAvailable)
				if wantUnknown := i != 1; errors.Is(err, ErrOutcomeUnknown) != wantUnknown {
					t.Fatalf("request %d: %v, outcome unknown %v", i, err, wantUnknown)
				}
			}
			g.gate(false)
			want := 1
			if lost {
				want = 2
			}
			if st := mustRead(t, s, a); len(st.Batches) != want {
				t.Fatalf("after the reload %s has %+v, want %d batches", a, st.Batches, want)
			}
			if st := mustRead(t, s, b); len(st.Batches) != want-1 {
				t.Fatalf("after the reload %s has %+v", b, st.Batches)
			}
		})
	}
}

// A marker in the middle of a round splits its writes (the control batch goes between
// them), and the snapshot offsets the store keeps are those of the log: a replay of it
// gives the same memory.
func TestMarkerInsideARoundKeepsLogOrder(t *testing.T) {
	s, g := newGatedStore(t, 1)
	a, b := key("a", 0), key("b", 0)
	must(t, s.Initialize(ctx, a, 0, 0))
	must(t, s.Initialize(ctx, b, 0, 0))
	must(t, s.Write(ctx, a, 0, 0, 0, -1, bl(staged(0, 0, 1, 7, 0, AckAccept))))
	g.gate(true)
	hold := make(chan error, 1)
	go func() { hold <- s.Write(ctx, b, 0, 0, 0, -1, bl(sb(5, 5, StateAcknowledged, 1))) }()
	<-g.entered
	done := make(chan error, 3)
	go func() { done <- s.Write(ctx, a, 0, 0, 0, -1, bl(sb(1, 1, StateAcknowledged, 1))) }() // a snapshot (1 update per snapshot)
	queued(t, s, 1)
	go func() {
		_, err := s.ApplyMarker(ctx, 0, 7, 0, true, func(context.Context) error {
			g.Memory.AppendMarker(7, 0, true, 0)
			return nil
		})
		done <- err
	}()
	queued(t, s, 2)
	go func() { done <- s.Write(ctx, b, 0, 0, 0, -1, bl(sb(6, 6, StateAcknowledged, 1))) }() // a snapshot too
	queued(t, s, 3)
	g.gate(false)
	g.release <- struct{}{}
	must(t, <-hold)
	for range 3 {
		must(t, <-done)
	}
	if st := mustRead(t, s, a); len(st.Batches) != 1 || st.Batches[0].DeliveryState != StateAcknowledged || st.Batches[0].LastOffset != 1 {
		t.Fatalf("%s: %+v", a, st)
	}
	var live *Core
	s.parts[0].inspect(func(c *Core) { live = c })
	replayed := NewCore(CoreConfig{UpdatesPerSnapshot: 1})
	err := g.Memory.Replay(func(st coordlog.Stored) error { return replayed.Step(Replayed{Stored: st}).Reply.(Done).Err })
	must(t, err)
	sameKeyspace(t, "replay", &replayed.keyspace, &live.keyspace, true)
	off, _ := s.LastRedundantOffset(0)
	if want := replayed.LastRedundantOffset(); off != want {
		t.Fatalf("last redundant offset %d, replay %d", off, want)
	}
}

// A round takes at most maxRoundInputs requests.
func TestRoundIsBounded(t *testing.T) {
	s, g := newGatedStore(t, 1_000_000)
	keys := make([]Key, maxRoundInputs+10)
	for i := range keys {
		keys[i] = key(fmt.Sprint("g", i), 0)
		must(t, s.Initialize(ctx, keys[i], 0, 0))
	}
	before := len(g.appends())
	g.gate(true)
	hold := make(chan error, 1)
	go func() { hold <- s.Write(ctx, keys[0], 0, 0, 0, -1, nil) }()
	<-g.entered
	var wg sync.WaitGroup
	for _, k := range keys[1:] {
		wg.Go(func() { must(t, s.Write(ctx, k, 0, 0, 0, -1, bl(sb(0, 0, StateAcknowledged, 1)))) })
	}
	queued(t, s, maxRoundInputs) // the queue is full; the rest of the writers wait to enqueue
	g.gate(false)
	g.release <- struct{}{}
	must(t, <-hold)
	wg.Wait()
	got := g.appends()[before:]
	if len(got) < 3 || got[1] != maxRoundInputs {
		t.Fatalf("appends of %v records: want a full round of %d", got, maxRoundInputs)
	}
}

// Close answers what is queued NOT_COORDINATOR and returns once the loops are gone.
func TestCloseRefusesQueuedRequests(t *testing.T) {
	g := newGated()
	s, err := New(Config{NumPartitions: 1}, []coordlog.Partition{g})
	must(t, err)
	k := key("g", 0)
	must(t, s.Initialize(ctx, k, 0, 0))
	g.gate(true)
	hold := make(chan error, 1)
	go func() { hold <- s.Write(ctx, k, 0, 0, 0, -1, nil) }()
	<-g.entered
	queuedErr := make(chan error, 1)
	go func() { queuedErr <- s.Write(ctx, k, 0, 0, 0, -1, nil) }()
	queued(t, s, 1)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	must(t, await.Until(5*time.Second, time.Millisecond, func() error {
		select {
		case <-s.parts[0].quit:
			return nil
		default:
			return errors.New("Close has not stopped the driver yet")
		}
	}))
	g.gate(false)
	g.release <- struct{}{}
	<-closed
	must(t, <-hold) // the round in flight completes
	wantCode(t, <-queuedErr, kerr.NotCoordinator)
	wantCode(t, s.Write(ctx, k, 0, 0, 0, -1, nil), kerr.NotCoordinator)
}
