package sharestate

import (
	"container/heap"
	"slices"
	"sort"
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
// Neither input is modified. Kafka's combiner is a pairwise TreeSet merge. Here, when both
// lists are sorted and free of overlaps (always true of stored state, and of what a
// share-partition leader writes) it is a linear two-way merge; otherwise a sweep over the
// range boundaries with a max-heap of the covering batches, O(n log n).
func combine(old, new []StateBatch, startOffset int64) []StateBatch {
	if disjoint(old) && disjoint(new) {
		return merge2(make([]StateBatch, 0, len(old)+2*len(new)+1), old, new, startOffset)
	}
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
	if c := cmpInt(a.DeliveryCount, b.DeliveryCount); c != 0 {
		return c
	}
	if c := cmpInt(a.DeliveryState, b.DeliveryState); c != 0 {
		return c
	}
	if a.DeliveryState != StateTxPending && b.DeliveryState != StateTxPending {
		return 0 // staging fields are zero on every other state
	}
	if c := cmpInt(a.TxnProducerID, b.TxnProducerID); c != 0 {
		return c
	}
	if c := cmpInt(a.TxnProducerEpoch, b.TxnProducerEpoch); c != 0 {
		return c
	}
	if c := cmpInt(a.TxnAckType, b.TxnAckType); c != 0 {
		return c
	}
	if c := cmpInt(a.TxnCommitState, b.TxnCommitState); c != 0 {
		return c
	}
	return cmpInt(a.TxnAbortState, b.TxnAbortState)
}

func cmpInt[T int8 | int16 | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
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

// disjoint reports whether bs is sorted with no two batches overlapping.
func disjoint(bs []StateBatch) bool {
	for i := 1; i < len(bs); i++ {
		if bs[i].FirstOffset <= bs[i-1].LastOffset {
			return false
		}
	}
	return true
}

// merge2 is combine for two disjoint lists, appended to out: walk both, splitting
// overlaps so that each piece takes the higher-priority side.
func merge2(out, a, b []StateBatch, start int64) []StateBatch {
	emit := func(x StateBatch) {
		if start >= 0 {
			if x.LastOffset < start {
				return
			}
			x.FirstOffset = max(x.FirstOffset, start)
		}
		if n := len(out); n > 0 && out[n-1].LastOffset+1 == x.FirstOffset && sameContent(&out[n-1], &x) {
			out[n-1].LastOffset = x.LastOffset
			return
		}
		out = append(out, x)
	}
	var ha, hb StateBatch
	haveA, haveB := false, false
	i, j := 0, 0
	for {
		if !haveA && i < len(a) {
			ha, haveA = a[i], true
			i++
		}
		if !haveB && j < len(b) {
			hb, haveB = b[j], true
			j++
		}
		switch {
		case !haveA && !haveB:
			return out
		case !haveB || haveA && ha.LastOffset < hb.FirstOffset:
			emit(ha)
			haveA = false
		case !haveA || hb.LastOffset < ha.FirstOffset:
			emit(hb)
			haveB = false
		case ha.FirstOffset < hb.FirstOffset:
			head := ha
			head.LastOffset = hb.FirstOffset - 1
			emit(head)
			ha.FirstOffset = hb.FirstOffset
		case hb.FirstOffset < ha.FirstOffset:
			head := hb
			head.LastOffset = ha.FirstOffset - 1
			emit(head)
			hb.FirstOffset = ha.FirstOffset
		default: // same first offset
			end := min(ha.LastOffset, hb.LastOffset)
			w := hb
			if comparePriority(&ha, &hb) > 0 {
				w = ha
			}
			w.LastOffset = end
			emit(w)
			if ha.LastOffset == end {
				haveA = false
			} else {
				ha.FirstOffset = end + 1
			}
			if hb.LastOffset == end {
				haveB = false
			} else {
				hb.FirstOffset = end + 1
			}
		}
	}
}

// mergeInto is combine(dst, add, start) for a dst that is canonical (sorted, disjoint,
// coalesced) and owned by the caller: it reuses dst's array and touches only the part of
// it that add overlaps or adjoins, so an update costs O(len(add) + log len(dst)) plus a
// memmove, not a copy of the whole state. Replay applies thousands of updates per key.
// scratch (may be nil) holds the merged part between the two steps.
func mergeInto(dst, add []StateBatch, start int64, scratch *[]StateBatch) []StateBatch {
	if start >= 0 {
		k := sort.Search(len(dst), func(i int) bool { return dst[i].LastOffset >= start })
		dst = dst[k:]
		if len(dst) > 0 && dst[0].FirstOffset < start {
			dst[0].FirstOffset = start
		}
	}
	if len(add) == 0 {
		return dst
	}
	if !disjoint(add) {
		add = combine(nil, add, -1)
	}
	lo, hi := add[0].FirstOffset-1, add[len(add)-1].LastOffset+1 // adjoining batches may coalesce
	i := sort.Search(len(dst), func(i int) bool { return dst[i].LastOffset >= lo })
	j := sort.Search(len(dst), func(j int) bool { return dst[j].FirstOffset > hi })
	var buf []StateBatch
	if scratch != nil {
		buf = (*scratch)[:0]
	}
	merged := merge2(buf, dst[i:j], add, start)
	if scratch != nil {
		*scratch = merged[:0]
	}
	return slices.Replace(dst, i, j, merged...)
}
