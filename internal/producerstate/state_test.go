package producerstate

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// step is one produce (or marker) in a scripted test.
type step struct {
	pid      int64
	epoch    int16
	base     int32
	n        int32 // records; the batch covers sequences base .. LastSeq(base, n-1)
	txn      bool
	marker   int // 0 data batch, 1 commit marker, 2 abort marker
	coord    int32
	wantCode int16
	wantDup  int64 // for a duplicate: the original first offset (+1, 0 = not a duplicate)
}

// run applies steps to s, appending accepted batches at increasing offsets from next.
func run(t *testing.T, s *State, next *int64, steps []step) []CompletedTxn {
	t.Helper()
	var done []CompletedTxn
	for i, st := range steps {
		if st.marker != 0 {
			err := s.CheckMarker(st.pid, st.epoch, st.coord)
			if got := KafkaCode(err); got != st.wantCode {
				t.Fatalf("step %d (marker): code %d (%v), want %d", i, got, err, st.wantCode)
			}
			if err == nil {
				if c, ok := s.CompleteTxn(st.pid, st.epoch, st.marker == 1, st.coord, *next, 1000+*next); ok {
					done = append(done, c)
				}
				*next++
			}
			continue
		}
		last := LastSeq(st.base, st.n-1)
		res, err := s.Check(st.pid, st.epoch, st.base, last, st.txn)
		if got := KafkaCode(err); got != st.wantCode {
			t.Fatalf("step %d: code %d (%v), want %d", i, got, err, st.wantCode)
		}
		if err != nil {
			continue
		}
		if st.wantDup != 0 {
			if !res.Duplicate || res.FirstOffset != st.wantDup-1 || res.LastOffset != st.wantDup-1+int64(st.n-1) ||
				res.TimestampMs != 1000+st.wantDup-1 {
				t.Fatalf("step %d: result %+v, want duplicate at offset %d", i, res, st.wantDup-1)
			}
			continue
		}
		if res.Duplicate {
			t.Fatalf("step %d: unexpected duplicate %+v", i, res)
		}
		s.Update(Batch{ProducerID: st.pid, Epoch: st.epoch, BaseSeq: st.base, LastSeq: last, Transactional: st.txn,
			FirstOffset: *next, LastOffset: *next + int64(st.n-1), TimestampMs: 1000 + *next})
		*next += int64(st.n)
	}
	return done
}

var (
	codeOOO      = kerr.OutOfOrderSequenceNumber.Code
	codeEpoch    = kerr.InvalidProducerEpoch.Code
	codeTxnState = kerr.InvalidTxnState.Code
	codeFenced   = kerr.TransactionCoordinatorFenced.Code
)

func TestRules(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"unknown producer is accepted at any sequence (ProducerAppendInfo: no current epoch)", []step{
			{pid: 1, epoch: 0, base: 42, n: 1},
			{pid: 1, epoch: 0, base: 43, n: 2},
		}},
		{"in-sequence batches are accepted", []step{
			{pid: 1, epoch: 0, base: 0, n: 3},
			{pid: 1, epoch: 0, base: 3, n: 1},
			{pid: 1, epoch: 0, base: 4, n: 5},
		}},
		{"a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER", []step{
			{pid: 1, epoch: 0, base: 0, n: 3},
			{pid: 1, epoch: 0, base: 4, n: 1, wantCode: codeOOO},
			{pid: 1, epoch: 0, base: 3, n: 1},
		}},
		{"an exact retry of each of the last five batches is a duplicate answered with the original offsets", []step{
			{pid: 1, epoch: 0, base: 0, n: 2}, // offsets 0-1
			{pid: 1, epoch: 0, base: 2, n: 1}, // 2
			{pid: 1, epoch: 0, base: 3, n: 4}, // 3-6
			{pid: 1, epoch: 0, base: 7, n: 1}, // 7
			{pid: 1, epoch: 0, base: 8, n: 2}, // 8-9
			{pid: 1, epoch: 0, base: 0, n: 2, wantDup: 0 + 1},
			{pid: 1, epoch: 0, base: 2, n: 1, wantDup: 2 + 1},
			{pid: 1, epoch: 0, base: 3, n: 4, wantDup: 3 + 1},
			{pid: 1, epoch: 0, base: 7, n: 1, wantDup: 7 + 1},
			{pid: 1, epoch: 0, base: 8, n: 2, wantDup: 8 + 1},
			{pid: 1, epoch: 0, base: 10, n: 1},
		}},
		{"a retry older than the last five batches is OUT_OF_ORDER_SEQUENCE_NUMBER", []step{
			{pid: 1, epoch: 0, base: 0, n: 1},
			{pid: 1, epoch: 0, base: 1, n: 1},
			{pid: 1, epoch: 0, base: 2, n: 1},
			{pid: 1, epoch: 0, base: 3, n: 1},
			{pid: 1, epoch: 0, base: 4, n: 1},
			{pid: 1, epoch: 0, base: 5, n: 1},
			{pid: 1, epoch: 0, base: 0, n: 1, wantCode: codeOOO},
			{pid: 1, epoch: 0, base: 1, n: 1, wantDup: 1 + 1},
		}},
		{"a retry must match the original sequence range exactly", []step{
			{pid: 1, epoch: 0, base: 0, n: 4},
			{pid: 1, epoch: 0, base: 0, n: 2, wantCode: codeOOO},
			{pid: 1, epoch: 0, base: 0, n: 4, wantDup: 1},
		}},
		{"an older epoch is INVALID_PRODUCER_EPOCH, even for a retry", []step{
			{pid: 1, epoch: 0, base: 0, n: 1},
			{pid: 1, epoch: 1, base: 0, n: 1},
			{pid: 1, epoch: 0, base: 1, n: 1, wantCode: codeEpoch},
			{pid: 1, epoch: 0, base: 0, n: 1, wantCode: codeEpoch},
		}},
		{"a new epoch must start at sequence 0", []step{
			{pid: 1, epoch: 0, base: 0, n: 5},
			{pid: 1, epoch: 1, base: 5, n: 1, wantCode: codeOOO},
			{pid: 1, epoch: 1, base: 0, n: 1},
			{pid: 1, epoch: 1, base: 1, n: 1},
		}},
		{"a new epoch forgets the old epoch's batches", []step{
			{pid: 1, epoch: 0, base: 0, n: 1},
			{pid: 1, epoch: 1, base: 0, n: 1},
			{pid: 1, epoch: 1, base: 0, n: 1, wantDup: 1 + 1},
			{pid: 1, epoch: 1, base: 1, n: 1},
		}},
		{"sequences wrap from MaxInt32 to 0", []step{
			{pid: 1, epoch: 0, base: math.MaxInt32 - 1, n: 1},
			{pid: 1, epoch: 0, base: math.MaxInt32, n: 3}, // MaxInt32, 0, 1
			{pid: 1, epoch: 0, base: 2, n: 1},
			{pid: 1, epoch: 0, base: math.MaxInt32, n: 3, wantDup: 1 + 1},
		}},
		{"producers are independent", []step{
			{pid: 1, epoch: 0, base: 0, n: 1},
			{pid: 2, epoch: 5, base: 0, n: 1},
			{pid: 1, epoch: 0, base: 1, n: 1},
			{pid: 2, epoch: 5, base: 2, n: 1, wantCode: codeOOO},
		}},
		{"a non-transactional batch during an open transaction is INVALID_TXN_STATE", []step{
			{pid: 1, epoch: 0, base: 0, n: 1, txn: true},
			{pid: 1, epoch: 0, base: 1, n: 1, wantCode: codeTxnState},
			{pid: 1, epoch: 0, base: 1, n: 1, txn: true},
		}},
		{"a marker with an older epoch is INVALID_PRODUCER_EPOCH", []step{
			{pid: 1, epoch: 3, base: 0, n: 1, txn: true},
			{pid: 1, epoch: 2, marker: 1, wantCode: codeEpoch},
			{pid: 1, epoch: 3, marker: 1},
		}},
		{"a marker from an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED", []step{
			{pid: 1, epoch: 0, base: 0, n: 1, txn: true},
			{pid: 1, epoch: 0, marker: 2, coord: 7},
			{pid: 1, epoch: 0, base: 1, n: 1, txn: true},
			{pid: 1, epoch: 0, marker: 1, coord: 6, wantCode: codeFenced},
			{pid: 1, epoch: 0, marker: 1, coord: 7},
		}},
		{"a marker bumping the epoch (transaction version 2) restarts sequences at 0", []step{
			{pid: 1, epoch: 0, base: 0, n: 3, txn: true},
			{pid: 1, epoch: 1, marker: 1},
			{pid: 1, epoch: 1, base: 3, n: 1, txn: true, wantCode: codeOOO},
			{pid: 1, epoch: 1, base: 0, n: 1, txn: true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := int64(0)
			run(t, New(), &next, c.steps)
		})
	}
}

func TestTransactionsAndLastStableOffset(t *testing.T) {
	s := New()
	next := int64(0)
	if _, ok := s.FirstUnstableOffset(); ok {
		t.Fatal("empty state has an unstable offset")
	}
	run(t, s, &next, []step{
		{pid: 1, epoch: 0, base: 0, n: 2},            // 0-1 idempotent only
		{pid: 2, epoch: 0, base: 0, n: 2, txn: true}, // 2-3 txn of 2 opens at 2
		{pid: 3, epoch: 0, base: 0, n: 1, txn: true}, // 4 txn of 3 opens at 4
		{pid: 2, epoch: 0, base: 2, n: 1, txn: true}, // 5 same txn
	})
	if fuo, ok := s.FirstUnstableOffset(); !ok || fuo != 2 {
		t.Fatalf("first unstable offset %d %v, want 2", fuo, ok)
	}
	if lso := s.LastStableOffset(6); lso != 2 {
		t.Fatalf("LSO %d", lso)
	}
	if e, _ := s.Producer(2); e.CurrentTxnFirstOffset != 2 {
		t.Fatalf("CurrentTxnFirstOffset %d", e.CurrentTxnFirstOffset)
	}
	// Abort pid 2 with a marker at 6: pid 3's transaction (from 4) is still open.
	done := run(t, s, &next, []step{{pid: 2, epoch: 0, marker: 2}})
	want := CompletedTxn{ProducerID: 2, FirstOffset: 2, LastOffset: 6, Aborted: true, LastStableOffset: 4}
	if len(done) != 1 || done[0] != want {
		t.Fatalf("completed %+v, want %+v", done, want)
	}
	if fuo, _ := s.FirstUnstableOffset(); fuo != 4 {
		t.Fatalf("first unstable offset %d, want 4", fuo)
	}
	// Commit pid 3 at 7: nothing open any more.
	done = run(t, s, &next, []step{{pid: 3, epoch: 0, marker: 1}})
	want = CompletedTxn{ProducerID: 3, FirstOffset: 4, LastOffset: 7, Aborted: false, LastStableOffset: 8}
	if len(done) != 1 || done[0] != want {
		t.Fatalf("completed %+v, want %+v", done, want)
	}
	if _, ok := s.FirstUnstableOffset(); ok || s.LastStableOffset(8) != 8 {
		t.Fatal("transactions still open")
	}
	// A marker for a producer with no open transaction completes nothing.
	if done := run(t, s, &next, []step{{pid: 1, epoch: 0, marker: 2}, {pid: 99, epoch: 0, marker: 1}}); len(done) != 0 {
		t.Fatalf("empty transaction completed %+v", done)
	}
	// After the commit, pid 2 may write non-transactionally again.
	run(t, s, &next, []step{{pid: 2, epoch: 0, base: 3, n: 1}})
}

func TestExpire(t *testing.T) {
	s := NewWithConfig(Config{ExpirationMs: 100})
	s.Update(Batch{ProducerID: 1, Epoch: 0, BaseSeq: 0, LastSeq: 0, FirstOffset: 0, LastOffset: 0, TimestampMs: 1000})
	s.Update(Batch{ProducerID: 2, Epoch: 0, BaseSeq: 0, LastSeq: 0, Transactional: true, FirstOffset: 1, LastOffset: 1, TimestampMs: 1000})
	s.Update(Batch{ProducerID: 3, Epoch: 0, BaseSeq: 0, LastSeq: 0, FirstOffset: 2, LastOffset: 2, TimestampMs: 1050})
	if n := s.Expire(1099); n != 0 {
		t.Fatalf("expired %d before expiration", n)
	}
	if n := s.Expire(1100); n != 1 || s.NumProducers() != 2 {
		t.Fatalf("expired %d, %d left", n, s.NumProducers())
	}
	if _, ok := s.Producer(1); ok {
		t.Fatal("producer 1 not expired")
	}
	// The producer with an open transaction stays however old it gets.
	if s.Expire(1_000_000); s.NumProducers() != 1 {
		t.Fatal("open transaction expired")
	}
	// An expired producer is unknown again: any sequence is accepted.
	if _, err := s.Check(1, 0, 77, 77, false); err != nil {
		t.Fatal(err)
	}
}

func TestLastSeq(t *testing.T) {
	for _, c := range []struct{ base, delta, want int32 }{
		{0, 0, 0}, {5, 3, 8}, {math.MaxInt32, 0, math.MaxInt32}, {math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1}, {math.MaxInt32 - 10, 10, math.MaxInt32},
	} {
		if got := LastSeq(c.base, c.delta); got != c.want {
			t.Errorf("LastSeq(%d, %d) = %d, want %d", c.base, c.delta, got, c.want)
		}
	}
}

func TestSnapshotRestore(t *testing.T) {
	s := New()
	next := int64(10)
	run(t, s, &next, []step{
		{pid: 5, epoch: 2, base: 0, n: 3},
		{pid: 5, epoch: 2, base: 3, n: 1},
		{pid: 9, epoch: 0, base: 0, n: 1, txn: true},
		{pid: 1, epoch: 0, base: 0, n: 1, txn: true},
		{pid: 1, epoch: 0, marker: 2, coord: 3},
	})
	snap := s.Snapshot()
	r, err := Restore(snap, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) || r.EndOffset() != s.EndOffset() || r.EndOffset() != next {
		t.Fatal("restored state differs")
	}
	if fuo, ok := r.FirstUnstableOffset(); !ok || fuo != 14 {
		t.Fatalf("restored first unstable offset %d %v", fuo, ok)
	}
	if res, err := r.Check(5, 2, 3, 3, false); err != nil || !res.Duplicate || res.FirstOffset != 13 {
		t.Fatalf("restored duplicate detection: %+v %v", res, err)
	}
	for i := range snap {
		bad := bytes.Clone(snap)
		bad[i] ^= 0x40
		if _, err := Restore(bad, Config{}); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	if _, err := Restore(snap[:len(snap)-1], Config{}); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatal(err)
	}
}

func FuzzRestore(f *testing.F) {
	s := New()
	s.Update(Batch{ProducerID: 1, Epoch: 0, BaseSeq: 0, LastSeq: 3, Transactional: true, FirstOffset: 0, LastOffset: 3, TimestampMs: 5})
	f.Add(s.Snapshot())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Restore(b, Config{})
		if err != nil {
			return
		}
		if !bytes.Equal(r.Snapshot(), b) {
			t.Fatal("accepted snapshot does not re-encode to itself")
		}
	})
}

// BenchmarkCheckUpdate measures the per-batch cost on the produce path with 1000 producers.
func BenchmarkCheckUpdate(b *testing.B) {
	s := New()
	const producers = 1000
	seq := make([]int32, producers)
	off := int64(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pid := int64(i % producers)
		i++
		res, err := s.Check(pid, 0, seq[pid], seq[pid]+9, false)
		if err != nil || res.Duplicate {
			b.Fatal(err)
		}
		s.Update(Batch{ProducerID: pid, BaseSeq: seq[pid], LastSeq: seq[pid] + 9, FirstOffset: off, LastOffset: off + 9, TimestampMs: off})
		seq[pid] += 10
		off += 10
	}
}
