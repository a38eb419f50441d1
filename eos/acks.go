package eos

import (
	"cmp"
	"slices"

	"github.com/exactq/exactq/kgoext"
)

// ackSet collects the share acknowledgements taken from the consumer after each poll of a
// transaction, until they are staged in one request. Polls of one transaction hold
// disjoint offsets (a record held by this member is not delivered to it again), but not
// always ascending ones: a record another member released can come back below offsets
// already collected. txnAcks sorts and coalesces.
type ackSet struct {
	byPart map[kgoext.TopicPartition][]kgoext.ShareAckBatch
	n      int // offsets covered
}

func (s *ackSet) add(acks kgoext.TxnAcks) {
	if len(acks) == 0 {
		return
	}
	if s.byPart == nil {
		s.byPart = make(map[kgoext.TopicPartition][]kgoext.ShareAckBatch, len(acks))
	}
	for tp, bs := range acks {
		s.byPart[tp] = append(s.byPart[tp], bs...)
	}
	s.n += acks.Len()
}

// len is the number of offsets (records and gaps) in the set.
func (s *ackSet) len() int { return s.n }

func (s *ackSet) clear() {
	s.byPart = nil
	s.n = 0
}

// txnAcks returns the set as SendShareAcksToTransaction wants it: per partition, batches
// in ascending offset order, adjacent batches with the same single type merged.
func (s *ackSet) txnAcks() kgoext.TxnAcks {
	out := make(kgoext.TxnAcks, len(s.byPart))
	for tp, bs := range s.byPart {
		out[tp] = coalesce(bs)
	}
	return out
}

func coalesce(bs []kgoext.ShareAckBatch) []kgoext.ShareAckBatch {
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b kgoext.ShareAckBatch) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	out := bs[:0]
	for _, b := range bs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.LastOffset+1 == b.FirstOffset && len(last.Types) == 1 && len(b.Types) == 1 && last.Types[0] == b.Types[0] {
				last.LastOffset = b.LastOffset
				continue
			}
		}
		out = append(out, b)
	}
	return out
}
