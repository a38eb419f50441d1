package sharestate

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// coldKeys keeps one key decoded, so that the model tests read and change cold keys
// too; it returns the undo.
func coldKeys() func() {
	old := hotKeys
	hotKeys = 1
	return func() { hotKeys = old }
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
		got := decodeBatches(nil, encodeBatches(nil, bs))
		if !slices.Equal(got, bs) {
			t.Fatalf("decoded %+v, encoded %+v", got, bs)
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
