package kgoext_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareImplicitAcks: every record of two partitions is delivered once; the next poll
// and CommitSync accept them, so a later member of the group gets none of them again.
func TestShareImplicitAcks(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-imp", 2, 20)
	c := newConsumer(t, b.Addr, "g-imp", "in")
	seen := pollUntil(t, c, 0, countAtLeast(20))
	for v, n := range valueCounts(seen) {
		if n != 1 {
			t.Errorf("%s delivered %d times", v, n)
		}
	}
	for _, r := range seen {
		if dc := kgoext.DeliveryCount(r); dc != 1 {
			t.Fatalf("%s: delivery count %d, want 1", r.Value, dc)
		}
	}
	if _, err := c.CommitSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if md := c.GroupMetadata(); md.GroupID != "g-imp" || len(md.MemberID) != 36 || md.MemberEpoch <= 0 {
		t.Fatalf("group metadata %+v", md)
	}
	if got := len(c.Assignment()); got != 2 {
		t.Fatalf("assigned %d partitions, want 2", got)
	}
	if again := sentinelOnly(t, b.Addr, cl, "g-imp", "in"); len(again) > 0 {
		t.Fatalf("accepted records delivered again: %v", valueCounts(again))
	}
}

// TestShareExplicitAcks: a poll with an unacknowledged record fails; a RELEASEd record
// comes back with delivery count 2, a REJECTed one never does.
func TestShareExplicitAcks(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-exp", 1, 3)
	c := newConsumer(t, b.Addr, "g-exp", "in", kgoext.ExplicitAcks())
	ctx := testCtx(t)
	var first []*kgo.Record
	for len(first) == 0 {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first = recs
	}
	if _, err := c.Poll(ctx); !errors.Is(err, kgoext.ErrUnacknowledged) {
		t.Fatalf("poll with unacknowledged records: %v, want ErrUnacknowledged", err)
	}
	seen := append([]*kgo.Record(nil), first...)
	ackAll := func(recs []*kgo.Record) {
		for _, r := range recs {
			t := kgoext.AckAccept
			switch string(r.Value) {
			case "v0":
				if kgoext.DeliveryCount(r) == 1 {
					t = kgoext.AckRelease
				}
			case "v1":
				t = kgoext.AckReject
			}
			if err := c.Acknowledge(r, t); err != nil {
				panic(err)
			}
		}
	}
	ackAll(first)
	if err := c.Acknowledge(first[0], kgoext.AckAccept); !errors.Is(err, kgoext.ErrNotDelivered) {
		t.Fatalf("second terminal ack: %v, want ErrNotDelivered", err)
	}
	redelivered := func(seen []*kgo.Record) bool {
		for _, r := range seen {
			if string(r.Value) == "v0" && kgoext.DeliveryCount(r) == 2 {
				return true
			}
		}
		return false
	}
	for !redelivered(seen) {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ackAll(recs)
		seen = append(seen, recs...)
	}
	if n := valueCounts(seen); n["v1"] != 1 || n["v2"] != 1 {
		t.Fatalf("deliveries %v: v1 (rejected) and v2 (accepted) once each", n)
	}
	if _, err := c.CommitSync(ctx); err != nil {
		t.Fatal(err)
	}
	if again := sentinelOnly(t, b.Addr, cl, "g-exp", "in"); len(again) > 0 {
		t.Fatalf("acknowledged records delivered again: %v", valueCounts(again))
	}
}

// TestShareImplicitModeRefusesAcknowledge: Acknowledge needs ExplicitAcks.
func TestShareImplicitModeRefusesAcknowledge(t *testing.T) {
	b, _ := shareSetup(t, "in", "g-imp2", 1, 1)
	c := newConsumer(t, b.Addr, "g-imp2", "in")
	recs := pollUntil(t, c, 0, countAtLeast(1))
	if err := c.Acknowledge(recs[0], kgoext.AckAccept); !errors.Is(err, kgoext.ErrImplicitMode) {
		t.Fatalf("Acknowledge in implicit mode: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(ctx); !errors.Is(err, kgoext.ErrClosed) {
		t.Fatalf("poll after close: %v", err)
	}
}
