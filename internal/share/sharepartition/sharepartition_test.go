package sharepartition

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAcquireSingleRecord(t *testing.T) {
	sp := newSP(t, 0)
	res := fetch(t, sp, 0, "m1", 0, 0, 1, 500)
	wantAcquired(t, res, AcquiredRecords{0, 0, 1})
	wantState(t, sp, 0, 0, Acquired, 1)
	wantOffsets(t, sp, 0, 0)
	if !res.Update.Empty() {
		t.Fatalf("acquisition persisted %v", res.Update)
	}
}

func TestAcknowledgeSingleRecordBatch(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m1", 0, 0, 1, 500)
	u := mustAck(t, sp, 1, "m1", ack(0, 0, AckAccept))
	if len(u.Batches) != 1 || u.Batches[0].DeliveryState != Acknowledged || u.StartOffset != 1 {
		t.Fatalf("update %+v", u)
	}
	wantOffsets(t, sp, 1, 1)
	if sp.InFlightRecords() != 0 {
		t.Fatal("cache not cleared")
	}
}

func TestAcknowledgeWithAnotherMember(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m1", 0, 9, 10, 500)
	_, err := sp.Acknowledge(1, "m2", []AckBatch{ack(0, 9, AckAccept)})
	wantErr(t, err, kerr.InvalidRecordState)
	wantState(t, sp, 0, 9, Acquired, 1)
}

func TestLockExpiry(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m1", 0, 9, 10, 500)
	if d, ok := sp.NextDeadline(); !ok || d != lockMs {
		t.Fatalf("next deadline %d %v", d, ok)
	}
	u := sp.Tick(lockMs)
	wantState(t, sp, 0, 9, Available, 1)
	if len(u.Batches) != 1 || u.Batches[0].DeliveryState != Available {
		t.Fatalf("update %+v", u)
	}
	res := fetch(t, sp, lockMs, "m2", 0, 9, 10, 500)
	wantAcquired(t, res, AcquiredRecords{0, 9, 2})
}

// TestFetchEnd: the read bound is the window end plus what the free record locks and
// MaxRecords allow; at the lock limit only the window (re-deliveries) is read.
func TestFetchEnd(t *testing.T) {
	sp := newSP(t, 0)
	if got := sp.FetchEnd(500); got != 500 {
		t.Fatalf("empty: FetchEnd = %d, want 500", got)
	}
	wantAcquired(t, fetch(t, sp, 0, "a", 0, 999, 1000, 500), AcquiredRecords{0, 999, 1})
	if got := sp.FetchEnd(500); got != 1500 {
		t.Fatalf("1000 in flight: FetchEnd = %d, want 1500", got)
	}
	if got := sp.FetchEnd(5000); got != 2000 {
		t.Fatalf("1000 in flight, 5000 wanted: FetchEnd = %d, want 2000 (the lock limit)", got)
	}
	wantAcquired(t, fetch(t, sp, 0, "b", 1000, 1999, 1000, 500), AcquiredRecords{1000, 1999, 1})
	if got := sp.FetchEnd(500); got != 2000 || sp.CanAcquire() {
		t.Fatalf("at the lock limit: FetchEnd = %d (want 2000), CanAcquire %v", got, sp.CanAcquire())
	}
	mustAck(t, sp, 1, "a", ack(0, 999, AckAccept))
	if got := sp.FetchEnd(500); got != 2500 {
		t.Fatalf("after the ack: FetchEnd = %d, want 2500", got)
	}
	if got := sp.FetchEnd(0); got != 2000 {
		t.Fatalf("MaxRecords 0: FetchEnd = %d, want 2000", got)
	}
}

// TestHolds: a member holds a partition while any record is ACQUIRED by it, whole
// batch or split.
func TestHolds(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "a", 0, 9, 10, 10)
	fetch(t, sp, 0, "b", 10, 19, 10, 10)
	if !sp.Holds("a") || !sp.Holds("b") || sp.Holds("c") {
		t.Fatal("after acquisition: a and b hold, c does not")
	}
	mustAck(t, sp, 1, "a", ack(0, 8, AckAccept))
	if !sp.Holds("a") {
		t.Fatal("a still holds offset 9")
	}
	mustAck(t, sp, 1, "a", ack(9, 9, AckRelease))
	if sp.Holds("a") {
		t.Fatal("a released its last record")
	}
	mustAck(t, sp, 1, "b", ack(10, 19, AckAccept))
	if sp.Holds("b") {
		t.Fatal("b acknowledged everything")
	}
}
