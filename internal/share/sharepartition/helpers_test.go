package sharepartition

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

const lockMs = 30000

func testConfig() Config {
	return Config{RecordLockDurationMs: lockMs, DeliveryCountLimit: 5, MaxInFlightRecords: 2000, RenewEnabled: true}
}

func newSP(t testing.TB, start int64) *SharePartition {
	t.Helper()
	sp, err := New(testConfig(), start, 0)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// logBatches returns fetched log batches of size n each covering [first, last].
func logBatches(first, last, n int64) []FetchedBatch {
	var out []FetchedBatch
	for b := first; b <= last; b += n {
		out = append(out, FetchedBatch{BaseOffset: b, LastOffset: min(b+n-1, last), ProducerID: -1})
	}
	return out
}

// fetch acquires [first, last] (one log batch per batchLen records) for member.
func fetch(t testing.TB, sp *SharePartition, now int64, member string, first, last, batchLen int64, maxRecords int) AcquireResult {
	t.Helper()
	return sp.Acquire(now, AcquireRequest{Member: member, FetchOffset: first, Batches: logBatches(first, last, batchLen),
		MaxRecords: maxRecords, BatchSize: maxRecords})
}

func ack(first, last int64, types ...AckType) AckBatch {
	return AckBatch{FirstOffset: first, LastOffset: last, Types: types}
}

func mustAck(t testing.TB, sp *SharePartition, now int64, member string, bs ...AckBatch) Update {
	t.Helper()
	u, err := sp.Acknowledge(now, member, bs)
	if err != nil {
		t.Fatalf("acknowledge %v: %v", bs, err)
	}
	return u
}

func wantErr(t testing.TB, err error, code *kerr.Error) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("error = %v, want %s", err, code.Message)
	}
}

// stateAt returns the state and delivery count of offset o.
func stateAt(sp *SharePartition, o int64) (State, int16) {
	b := sp.find(o)
	if b == nil {
		return -1, -1
	}
	r := b.at(o)
	return r.state, r.count
}

func wantState(t testing.TB, sp *SharePartition, first, last int64, s State, count int16) {
	t.Helper()
	for o := first; o <= last; o++ {
		if gs, gc := stateAt(sp, o); gs != s || gc != count {
			t.Fatalf("offset %d: %v/%d, want %v/%d", o, gs, gc, s, count)
		}
	}
}

func wantAcquired(t testing.TB, res AcquireResult, want ...AcquiredRecords) {
	t.Helper()
	if len(res.Records) != len(want) {
		t.Fatalf("acquired %v, want %v", res.Records, want)
	}
	for i := range want {
		if res.Records[i] != want[i] {
			t.Fatalf("acquired %v, want %v", res.Records, want)
		}
	}
}

func wantOffsets(t testing.TB, sp *SharePartition, spso, speo int64) {
	t.Helper()
	if sp.StartOffset() != spso || sp.EndOffset() != speo {
		t.Fatalf("SPSO/SPEO = %d/%d, want %d/%d", sp.StartOffset(), sp.EndOffset(), spso, speo)
	}
}

// packSmallBatches makes batches of two runs or more packable, so that the model
// tests' small batches go through the packed form too; it returns the undo.
func packSmallBatches() func() {
	old := packMinRuns
	packMinRuns = 2
	return func() { packMinRuns = old }
}
