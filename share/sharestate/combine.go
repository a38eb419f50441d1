package sharestate

import (
	"container/heap"
	"slices"
)

// combine merges old and new state batches as Kafka's PersisterStateBatchCombiner does:
// the result is the shortest sorted, non-overlapping cover of the union of both lists,
// clipped at startOffset (-1: no clipping), where every offset takes the batch of highest
// priority among those covering it and adjacent ranges with equal content are coalesced.
//
// Priority (Kafka): the higher delivery count wins; on a tie the higher delivery state id.
// KIP-1289 (kip-1289.md §4.5) extends the tie-break with the staged producer id, epoch, ack
// type and target states, all descending, and batches differing in any of them are distinct.
// Since persisted transitions only move a record to a higher (count, state), "highest
// priority wins" means "latest wins"; the one exception, a marker taking TX_PENDING back to
// AVAILABLE, never goes through combine (Store applies markers in place).
//
// Neither input is modified. Kafka's combiner is a pairwise TreeSet merge; this is a sweep
// over the range boundaries with a max-heap of the covering batches, O(n log n).
func combine(old, new []StateBatch, startOffset int64) []StateBatch {
	all := make([]StateBatch, 0, len(old)+len(new))
	for _, src := range [2][]StateBatch{old, new} {
		for _, b := range src {
			if startOffset >= 0 {
				if b.LastOffset < startOffset {
					continue
				}
				b.FirstOffset = max(b.FirstOffset, startOffset)
			}
			all = append(all, b)
		}
	}
	if len(all) <= 1 {
		return all
	}
	slices.SortFunc(all, func(a, b StateBatch) int {
		switch {
		case a.FirstOffset < b.FirstOffset:
			return -1
		case a.FirstOffset > b.FirstOffset:
			return 1
		}
		return 0
	})
	// Boundaries: every first offset and every last offset + 1.
	bounds := make([]int64, 0, 2*len(all))
	for _, b := range all {
		bounds = append(bounds, b.FirstOffset, b.LastOffset+1)
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	out := make([]StateBatch, 0, len(all))
	h := &batchHeap{}
	next := 0
	for i, at := range bounds[:len(bounds)-1] {
		for next < len(all) && all[next].FirstOffset == at {
			heap.Push(h, &all[next])
			next++
		}
		for h.Len() > 0 && (*h)[0].LastOffset < at {
			heap.Pop(h)
		}
		if h.Len() == 0 {
			continue
		}
		top := *(*h)[0]
		top.FirstOffset, top.LastOffset = at, bounds[i+1]-1
		if n := len(out); n > 0 && out[n-1].LastOffset+1 == top.FirstOffset && sameContent(&out[n-1], &top) {
			out[n-1].LastOffset = top.LastOffset
			continue
		}
		out = append(out, top)
	}
	return out
}

// comparePriority orders batches by the combiner's priority, higher first wins:
// delivery count, delivery state, then the KIP-1289 staging fields.
func comparePriority(a, b *StateBatch) int {
	keys := [...][2]int64{
		{int64(a.DeliveryCount), int64(b.DeliveryCount)},
		{int64(a.DeliveryState), int64(b.DeliveryState)},
		{a.TxnProducerID, b.TxnProducerID},
		{int64(a.TxnProducerEpoch), int64(b.TxnProducerEpoch)},
		{int64(a.TxnAckType), int64(b.TxnAckType)},
		{int64(a.TxnCommitState), int64(b.TxnCommitState)},
		{int64(a.TxnAbortState), int64(b.TxnAbortState)},
	}
	for _, k := range keys {
		if k[0] != k[1] {
			if k[0] < k[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func sameContent(a, b *StateBatch) bool { return comparePriority(a, b) == 0 }

// coalesce merges adjacent batches with equal content in a sorted, non-overlapping list,
// in place.
func coalesce(bs []StateBatch) []StateBatch {
	out := bs[:0]
	for _, b := range bs {
		if n := len(out); n > 0 && out[n-1].LastOffset+1 == b.FirstOffset && sameContent(&out[n-1], &b) {
			out[n-1].LastOffset = b.LastOffset
			continue
		}
		out = append(out, b)
	}
	return out
}

// batchHeap is a max-heap of batches by priority.
type batchHeap []*StateBatch

func (h batchHeap) Len() int           { return len(h) }
func (h batchHeap) Less(i, j int) bool { return comparePriority(h[i], h[j]) > 0 }
func (h batchHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *batchHeap) Push(x any)        { *h = append(*h, x.(*StateBatch)) }
func (h *batchHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
