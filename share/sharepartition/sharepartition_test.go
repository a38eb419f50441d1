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
