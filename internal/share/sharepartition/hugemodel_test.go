package sharepartition

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"pgregory.net/rapid"
)

// TestModelHugeSpans drives a SharePartition over a log whose batches claim up
// to 2^40 offsets each (compaction gaps, or a hostile 72-byte batch) with the
// model test's operations, where a per-offset model cannot follow. After every
// step it checks what must hold whatever the span: the step allocated no more
// than a small budget; the partition holds no more state runs than distinct
// states (plus one per batch); its counts agree with its ranges; and restoring
// from its snapshot gives the same ranges (ACQUIRED as AVAILABLE, owners cleared).
// Acknowledgements of a member's own ACQUIRED ranges must succeed, and claims
// over 2^62 offsets must fail without changing anything.
func TestModelHugeSpans(t *testing.T) {
	defer packSmallBatches()()
	setRapidDefaults()
	rapid.Check(t, func(t *rapid.T) {
		limit := int16(rapid.IntRange(1, 4).Draw(t, "deliveryLimit"))
		cfg := Config{RecordLockDurationMs: 1000, DeliveryCountLimit: limit, MaxInFlightRecords: 2000, RenewEnabled: true}
		sp, err := New(cfg, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		h := &hugeModel{sp: sp, cfg: cfg, members: []string{"a", "b"}}
		var o int64
		for i := rapid.IntRange(2, 8).Draw(t, "logBatches"); i > 0; i-- {
			span := rapid.SampledFrom([]int64{1, 7, 1 << 20, 1 << 40}).Draw(t, "span")
			h.log = append(h.log, FetchedBatch{BaseOffset: o, LastOffset: o + span - 1, ProducerID: -1})
			o += span + rapid.SampledFrom([]int64{0, 0, 1 << 30}).Draw(t, "compactedGap")
		}
		h.steps = 0
		t.Repeat(map[string]func(*rapid.T){
			"":        h.check,
			"acquire": h.step(h.opAcquire),
			"ack":     h.step(h.opAck),
			"claim":   h.step(h.opClaim),
			"tick":    h.step(h.opTick),
			"leave":   h.step(h.opLeave),
			"stage":   h.step(h.opStage),
			"marker":  h.step(h.opMarker),
			"restore": h.step(h.opRestore),
			"logStart": h.step(func(t *rapid.T) {
				h.sp.AdvanceLogStart(h.sp.StartOffset() + rapid.Int64Range(0, 1<<39).Draw(t, "lsoDelta"))
			}),
		})
	})
}

type hugeModel struct {
	sp      *SharePartition
	cfg     Config
	log     []FetchedBatch
	now     int64
	members []string
	steps   int
}

// hugeStepBudgetBytes bounds one step's allocations, the test's own checks
// included (Describe), as the runtime counts them (a span at a time): a per-offset
// step over 2^20 offsets would take 40 MB.
const hugeStepBudgetBytes = 1 << 20

// step wraps an operation with the allocation check.
func (h *hugeModel) step(op func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		before := allocatedBytes()
		op(t)
		if d := allocatedBytes() - before; d > hugeStepBudgetBytes {
			t.Fatalf("step allocated %d bytes (budget %d); %d runs", d, hugeStepBudgetBytes, h.sp.runCount())
		}
	}
}

func (h *hugeModel) opAcquire(t *rapid.T) {
	fo := h.sp.NextFetchOffset()
	var read []FetchedBatch
	for _, fb := range h.log {
		if fb.LastOffset >= fo && len(read) < 3 {
			read = append(read, fb)
		}
	}
	req := AcquireRequest{Member: rapid.SampledFrom(h.members).Draw(t, "member"), FetchOffset: fo, Batches: read,
		MaxRecords: rapid.IntRange(1, 20).Draw(t, "maxRecords"), BatchSize: rapid.IntRange(1, 10).Draw(t, "batchSize"),
		Mode: AcquireMode(rapid.IntRange(0, 1).Draw(t, "mode"))}
	h.now += rapid.Int64Range(0, 300).Draw(t, "dt")
	res := h.sp.Acquire(h.now, req)
	d := h.sp.Describe()
	for _, ar := range res.Records {
		for _, rr := range d.Records {
			if rr.FirstOffset <= ar.LastOffset && rr.LastOffset >= ar.FirstOffset &&
				(rr.State != Acquired || rr.Member != req.Member || rr.DeliveryCount != ar.DeliveryCount) {
				t.Fatalf("acquired %+v but the partition holds %+v there", ar, rr)
			}
		}
	}
}

// owned returns the ranges ACQUIRED by member.
func (h *hugeModel) owned(member string) []RecordRange {
	var out []RecordRange
	for _, rr := range h.sp.Describe().Records {
		if rr.State == Acquired && rr.Member == member {
			out = append(out, rr)
		}
	}
	return out
}

// pickOwned draws a sub-range of one of member's ACQUIRED ranges.
func (h *hugeModel) pickOwned(t *rapid.T, member string) (AckBatch, bool) {
	own := h.owned(member)
	if len(own) == 0 {
		return AckBatch{}, false
	}
	rr := rapid.SampledFrom(own).Draw(t, "range")
	first := rr.FirstOffset
	if rapid.Bool().Draw(t, "cutFirst") {
		first = rapid.Int64Range(rr.FirstOffset, rr.LastOffset).Draw(t, "first")
	}
	last := rr.LastOffset
	if rapid.Bool().Draw(t, "cutLast") {
		last = rapid.Int64Range(first, rr.LastOffset).Draw(t, "last")
	}
	return AckBatch{FirstOffset: first, LastOffset: last}, true
}

func (h *hugeModel) opAck(t *rapid.T) {
	member := rapid.SampledFrom(h.members).Draw(t, "member")
	ab, ok := h.pickOwned(t, member)
	if !ok {
		return
	}
	types := []AckType{AckGap, AckAccept, AckRelease, AckReject, AckRenew}
	if span := ab.LastOffset - ab.FirstOffset + 1; span <= 8 && rapid.Bool().Draw(t, "perOffset") {
		for range span {
			ab.Types = append(ab.Types, rapid.SampledFrom(types).Draw(t, "type"))
		}
	} else {
		ab.Types = []AckType{rapid.SampledFrom(types).Draw(t, "type")}
	}
	h.now += rapid.Int64Range(0, 300).Draw(t, "dt")
	if _, err := h.sp.Acknowledge(h.now, member, []AckBatch{ab}); err != nil {
		t.Fatalf("acknowledge of own acquired records %+v: %v", ab, err)
	}
}

// opClaim sends acknowledgements and stagings over 2^62 offsets: they fail and change nothing.
func (h *hugeModel) opClaim(t *rapid.T) {
	member := rapid.SampledFrom(h.members).Draw(t, "member")
	first := rapid.Int64Range(0, h.sp.EndOffset()+1).Draw(t, "first")
	ab := ack(first, first+1<<62, rapid.SampledFrom([]AckType{AckAccept, AckRenew, AckReject}).Draw(t, "type"))
	before := h.sp.Describe()
	var err error
	if rapid.Bool().Draw(t, "stage") {
		_, err = h.sp.StageTxnAcks(member, 1, 0, []AckBatch{ab})
	} else {
		_, err = h.sp.Acknowledge(h.now, member, []AckBatch{ab})
	}
	if !errors.Is(err, kerr.InvalidRequest) && !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("claim %+v: %v", ab, err)
	}
	if after := h.sp.Describe(); !reflect.DeepEqual(before.Records, after.Records) {
		t.Fatalf("failed claim changed the partition: %+v → %+v", before.Records, after.Records)
	}
}

func (h *hugeModel) opTick(t *rapid.T) {
	h.now += rapid.Int64Range(0, 1200).Draw(t, "dt")
	h.sp.Tick(h.now)
}

func (h *hugeModel) opLeave(t *rapid.T) {
	h.sp.ReleaseMember(rapid.SampledFrom(h.members).Draw(t, "member"))
}

func (h *hugeModel) opStage(t *rapid.T) {
	member := rapid.SampledFrom(h.members).Draw(t, "member")
	ab, ok := h.pickOwned(t, member)
	if !ok {
		return
	}
	ab.Types = []AckType{rapid.SampledFrom([]AckType{AckGap, AckAccept, AckReject}).Draw(t, "type")}
	pid := rapid.Int64Range(1, 2).Draw(t, "pid")
	if _, err := h.sp.StageTxnAcks(member, pid, 0, []AckBatch{ab}); err != nil {
		t.Fatalf("stage of own acquired records %+v: %v", ab, err)
	}
	if rapid.IntRange(0, 4).Draw(t, "writeFails") == 0 {
		if n := h.sp.UnstageTxnAcks(h.now, pid, 0, []AckBatch{ab}); n != ab.LastOffset-ab.FirstOffset+1 {
			t.Fatalf("unstaged %d of %+v", n, ab)
		}
	}
}

func (h *hugeModel) opMarker(t *rapid.T) {
	h.sp.CompleteTxn(rapid.Int64Range(1, 2).Draw(t, "pid"), 0, rapid.Bool().Draw(t, "commit"))
}

func (h *hugeModel) opRestore(t *rapid.T) {
	sp, err := Restore(h.cfg, h.sp.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	h.sp = sp
}

// persistedView is Describe as a restore would see it: ACQUIRED as AVAILABLE,
// no owners or deadlines, adjacent equal ranges merged.
func persistedView(d Description) []RecordRange {
	var out []RecordRange
	for _, rr := range d.Records {
		if rr.State == Acquired {
			rr.State = Available
		}
		rr.Member, rr.LockDeadlineMs = "", 0
		if n := len(out); n > 0 {
			p := out[n-1]
			p.FirstOffset, p.LastOffset = rr.FirstOffset, rr.LastOffset
			if out[n-1].LastOffset+1 == rr.FirstOffset && p == rr {
				out[n-1].LastOffset = rr.LastOffset
				continue
			}
		}
		out = append(out, rr)
	}
	return out
}

func (h *hugeModel) check(t *rapid.T) {
	sp := h.sp
	d := sp.Describe()
	if n, max := sp.runCount(), len(d.Records)+2*len(sp.batches)+1; n > max {
		t.Fatalf("%d state runs for %d distinct ranges in %d batches", n, len(d.Records), len(sp.batches))
	}
	var pending, complete int64
	for _, rr := range d.Records {
		n := rr.LastOffset - rr.FirstOffset + 1
		if rr.State == TxPending {
			pending += n
		}
		if rr.State.Terminal() {
			complete += n
		}
		if rr.DeliveryCount > h.cfg.DeliveryCountLimit {
			t.Fatalf("range %+v delivered past the limit %d", rr, h.cfg.DeliveryCountLimit)
		}
	}
	if sp.TxPendingRecords() != pending || sp.DeliveryCompleteCount() != complete || sp.countComplete() != complete {
		t.Fatalf("TX_PENDING %d, complete %d/%d; ranges hold %d, %d", sp.TxPendingRecords(), sp.DeliveryCompleteCount(), sp.countComplete(), pending, complete)
	}
	if len(d.Records) > 0 && d.Records[0].State.Terminal() && d.Records[0].FirstOffset == sp.StartOffset() {
		t.Fatalf("SPSO %d stopped on a terminal range %+v", sp.StartOffset(), d.Records[0])
	}
	for _, rr := range d.Records {
		if rr.State == Available {
			if nfo := sp.NextFetchOffset(); nfo > rr.FirstOffset {
				t.Fatalf("NextFetchOffset %d past the AVAILABLE range %+v", nfo, rr)
			}
			break
		}
	}
	rp, err := Restore(h.cfg, sp.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := persistedView(rp.Describe()), persistedView(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored from the snapshot:\n%+v\nlive:\n%+v", got, want)
	}
}
