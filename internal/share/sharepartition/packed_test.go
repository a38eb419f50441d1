package sharepartition

import "testing"

// ackCycling acknowledges [first, last] for member with one type per offset, cycling
// through types by offset.
func ackCycling(t *testing.T, sp *SharePartition, now int64, first, last int64, types ...AckType) {
	t.Helper()
	ab := AckBatch{FirstOffset: first, LastOffset: last}
	for o := first; o <= last; o++ {
		ab.Types = append(ab.Types, types[o%int64(len(types))])
	}
	mustAck(t, sp, now, "m", ab)
}

func wantPacked(t *testing.T, sp *SharePartition, o int64) *packed {
	t.Helper()
	b := sp.find(o)
	if b == nil || b.pk == nil {
		t.Fatalf("the batch of offset %d is not packed", o)
	}
	return b.pk
}

// A batch whose records alternate between two states but the held first (P7's shape)
// costs two bytes an offset, and restoring it gives one packed batch back.
func TestPackedBatchSize(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 399, 400, 400)
	ackCycling(t, sp, 0, 1, 399, AckAccept, AckReject)
	if p := wantPacked(t, sp, 0); len(p.codes) != 400 || len(p.owners) != 1 {
		t.Fatalf("%d codes, %d owners", len(p.codes), len(p.owners))
	}
	r, err := Restore(sp.Config(), sp.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.batches) != 1 {
		t.Fatalf("restored as %d batches", len(r.batches))
	}
	wantPacked(t, r, 0)
	for o, want := range map[int64]State{0: Available, 1: Archived, 2: Acknowledged, 399: Archived} {
		wantState(t, r, o, o, want, 1)
	}
}

// A step that renews many locks of a packed batch in one carved range outgrows the
// lock heap's bound: rebuilding the heap reads the batch, which must not write back the
// runs the step is still changing (every renewed lock must hold).
func TestPackedRenewsSurviveALockRebuild(t *testing.T) {
	sp := newSP(t, 0)
	fetch(t, sp, 0, "m", 0, 599, 600, 600)
	ackCycling(t, sp, 0, 0, 599, AckRenew, AckRelease)
	// The odd offsets come back with delivery count 2: 600 runs of one offset, packed.
	sp.Acquire(0, AcquireRequest{Member: "m", FetchOffset: 1, Batches: logBatches(0, 599, 600), MaxRecords: 600, BatchSize: 600})
	wantPacked(t, sp, 0)
	mustAck(t, sp, 1000, "m", ack(0, 599, AckRenew))
	for o := int64(0); o <= 599; o++ {
		if r := sp.find(o).at(o); r.state != Acquired || r.deadlineMs != 1000+lockMs || r.count != int16(1+o%2) {
			t.Fatalf("offset %d: %v/%d until %d, want ACQUIRED/%d until %d", o, r.state, r.count, r.deadlineMs, 1+o%2, 1000+lockMs)
		}
	}
}
