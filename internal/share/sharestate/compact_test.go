package sharestate

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// coldKeys keeps only the key changed last decoded, so that the model tests read and
// change cold keys too; it returns the undo.
func coldKeys() func() {
	old := hotBudget
	hotBudget = 0
	return func() { hotBudget = old }
}

// The encoding of a key's batches gives back exactly the batches it was made of,
// whatever their offsets, counts and staging fields.
func TestEncodedBatchesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var bs []StateBatch
		next := rapid.Int64Range(0, math.MaxInt64/4).Draw(t, "start")
		for range rapid.IntRange(0, 40).Draw(t, "batches") {
			first := next + rapid.Int64Range(0, 1<<40).Draw(t, "gap")
			b := StateBatch{FirstOffset: first, LastOffset: first + rapid.Int64Range(0, 1<<40).Draw(t, "len"),
				DeliveryState: rapid.Int8().Draw(t, "state"), DeliveryCount: rapid.Int16().Draw(t, "count")}
			if rapid.Bool().Draw(t, "staged") {
				b.TxnProducerID, b.TxnProducerEpoch = rapid.Int64().Draw(t, "pid"), rapid.Int16().Draw(t, "epoch")
				b.TxnAckType, b.TxnCommitState, b.TxnAbortState = rapid.Int8().Draw(t, "ack"), rapid.Int8().Draw(t, "commit"), rapid.Int8().Draw(t, "abort")
			}
			bs = append(bs, b)
			next = b.LastOffset + 1
		}
		enc := encodeBatches(nil, bs)
		if got := decodeBatches(nil, enc); !slices.Equal(got, bs) {
			t.Fatalf("decoded %+v, encoded %+v", got, bs)
		}
		if n := countBatches(enc); n != len(bs) {
			t.Fatalf("counted %d batches, encoded %d", n, len(bs))
		}
	})
}

// A batch per offset, alternating two states (P7's worst case), costs 4 bytes encoded.
func TestEncodedBatchSize(t *testing.T) {
	bs := make([]StateBatch, 4000)
	for i := range bs {
		bs[i] = StateBatch{FirstOffset: int64(i), LastOffset: int64(i), DeliveryState: []int8{StateAcknowledged, StateArchived}[i%2], DeliveryCount: 1}
	}
	if n := len(encodeBatches(nil, bs)); n != 4*len(bs) {
		t.Fatalf("%d batches encoded in %d bytes, want %d", len(bs), n, 4*len(bs))
	}
}

// The hot keys' count of room for decoded batches stays equal to what they hold, and within the
// budget but for the key changed last, whatever is written, resolved and deleted.
func TestHotBudget(t *testing.T) {
	old := hotBudget
	defer func() { hotBudget = old }()
	rapid.Check(t, func(t *rapid.T) {
		hotBudget = rapid.IntRange(0, 12).Draw(t, "budget")
		var p keyspace
		p.reset()
		p.hotLimit = hotBudget
		keys := []Key{key("a", 0), key("b", 1), key("c", 2)}
		for _, k := range keys {
			p.applySnapshot(k, &snapshotValue{StartOffset: 0, DeliveryCompleteCount: -1}, 0)
		}
		t.Repeat(map[string]func(*rapid.T){
			"update": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				if p.keys[k] == nil {
					p.applySnapshot(k, &snapshotValue{StartOffset: 0, DeliveryCompleteCount: -1}, 0)
				}
				o := rapid.Int64Range(0, 20).Draw(t, "offset")
				b := sb(o, o, StateAcknowledged, int16(rapid.IntRange(1, 3).Draw(t, "count")))
				if rapid.Bool().Draw(t, "staged") {
					b = StateBatch{FirstOffset: o, LastOffset: o, DeliveryState: StateTxPending, DeliveryCount: 1,
						TxnProducerID: 7, TxnProducerEpoch: 0, TxnAckType: AckAccept, TxnCommitState: StateAcknowledged}
				}
				p.applyUpdate(k, &updateValue{LeaderEpoch: -1, StartOffset: -1, DeliveryCompleteCount: -1, Batches: []StateBatch{b}})
			},
			"marker": func(t *rapid.T) { p.applyMarker(7, 1, rapid.Bool().Draw(t, "commit")) },
			"delete": func(t *rapid.T) { p.applyTombstone(rapid.SampledFrom(keys).Draw(t, "key")) },
			"tidy": func(t *rapid.T) {
				p.tidy()
				if p.hotBatches > p.hotLimit {
					t.Fatalf("tidied hot keys hold %d batches, budget %d", p.hotBatches, p.hotLimit)
				}
			},
			"": func(t *rapid.T) {
				n, last := 0, (*entry)(nil)
				for el := p.hot.Front(); el != nil; el = el.Next() {
					e := el.Value.(*entry)
					if !e.hot || e.hotCounted != cap(e.batches) || e.packed != nil {
						t.Fatalf("hot key: hot %v, counted %d of %d, packed %d bytes", e.hot, e.hotCounted, cap(e.batches), len(e.packed))
					}
					n, last = n+cap(e.batches), e
				}
				if n != p.hotBatches || (n > hotBudget && p.hot.Front().Value != last) {
					t.Fatalf("hot keys hold %d batches, counted %d, budget %d", n, p.hotBatches, hotBudget)
				}
				for _, e := range p.keys {
					if !e.hot && e.batches != nil {
						t.Fatalf("cold key with decoded batches")
					}
				}
			},
		})
	})
}
