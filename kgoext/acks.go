package kgoext

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func tpLess(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// AckType is a share acknowledgement type (KIP-932), with Kafka's numbering (kgo.AckStatus
// has the same values for 1-4; 0 is our gap).
type AckType int8

const (
	// AckGap marks an acquired offset that holds no data record (a control record or a
	// compacted hole). The ShareConsumer sends gaps itself; they also appear in TxnAcks.
	AckGap AckType = 0
	// AckAccept: the record was processed; it is never delivered again.
	AckAccept AckType = 1
	// AckRelease: the record goes back to the group and is delivered again (to any
	// member) with a higher delivery count, or archived at the delivery limit.
	AckRelease AckType = 2
	// AckReject: the record cannot be processed; it is archived, never delivered again.
	AckReject AckType = 3
	// AckRenew (KIP-1222, ShareAcknowledge v2) extends the record's acquisition lock. The
	// record stays in flight and still needs a terminal acknowledgement.
	AckRenew AckType = 4
)

func (t AckType) String() string {
	switch t {
	case AckGap:
		return "GAP"
	case AckAccept:
		return "ACCEPT"
	case AckRelease:
		return "RELEASE"
	case AckReject:
		return "REJECT"
	case AckRenew:
		return "RENEW"
	}
	return fmt.Sprintf("AckType(%d)", int8(t))
}

// ShareGroupMetadata identifies a share group member for SendShareAcksToTransaction
// (KIP-1289): the broker stages the acknowledgements only while the member exists with
// exactly this member epoch, and only for offsets that member holds.
type ShareGroupMetadata struct {
	GroupID     string
	MemberID    string
	MemberEpoch int32
}

// ShareAckBatch acknowledges FirstOffset..LastOffset (inclusive): Types holds one type for
// the whole range, or one per offset (LastOffset-FirstOffset+1 entries).
type ShareAckBatch struct {
	FirstOffset, LastOffset int64
	Types                   []AckType
}

// typeAt is the type of off, which must lie in the batch.
func (b ShareAckBatch) typeAt(off int64) AckType {
	if len(b.Types) == 1 {
		return b.Types[0]
	}
	if i := off - b.FirstOffset; i >= 0 && i < int64(len(b.Types)) {
		return b.Types[i]
	}
	return AckGap
}

// TxnAcks are share acknowledgements to stage in a producer transaction, per partition,
// batches in ascending, non-overlapping offset order. Build them with
// ShareConsumer.AcknowledgementsForTransaction or ShareAcknowledgementsFromRecords.
type TxnAcks map[TopicPartition][]ShareAckBatch

// Len is the number of offsets the acknowledgements cover.
func (a TxnAcks) Len() int {
	n := 0
	for _, bs := range a {
		for _, b := range bs {
			n += int(b.LastOffset - b.FirstOffset + 1)
		}
	}
	return n
}

// ShareAcknowledgementsFromRecords acknowledges every record with t: contiguous offsets of
// a partition form one batch. Offsets between records are not covered (the gaps the share
// consumer saw are not known here: prefer AcknowledgementsForTransaction, which includes
// them); a record given twice counts once.
func ShareAcknowledgementsFromRecords(records []*kgo.Record, t AckType) TxnAcks {
	per := map[TopicPartition]map[int64]AckType{}
	for _, r := range records {
		if r == nil {
			continue
		}
		tp := TopicPartition{r.Topic, r.Partition}
		if per[tp] == nil {
			per[tp] = map[int64]AckType{}
		}
		per[tp][r.Offset] = t
	}
	out := make(TxnAcks, len(per))
	for tp, m := range per {
		out[tp] = ackBatches(m)
	}
	return out
}

// ackBatches turns offset → type into batches: each run of contiguous offsets is one batch,
// with a single type when the whole run shares it and one type per offset otherwise (as
// the Java client's Acknowledgements.getAcknowledgementBatches).
func ackBatches(m map[int64]AckType) []ShareAckBatch {
	if len(m) == 0 {
		return nil
	}
	offs := make([]int64, 0, len(m))
	for o := range m {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	var out []ShareAckBatch
	start := 0
	for i := 1; i <= len(offs); i++ {
		if i < len(offs) && offs[i] == offs[i-1]+1 {
			continue
		}
		run := offs[start:i]
		b := ShareAckBatch{FirstOffset: run[0], LastOffset: run[len(run)-1]}
		uniform := true
		for _, o := range run {
			if m[o] != m[run[0]] {
				uniform = false
				break
			}
		}
		if uniform {
			b.Types = []AckType{m[run[0]]}
		} else {
			b.Types = make([]AckType, len(run))
			for j, o := range run {
				b.Types[j] = m[o]
			}
		}
		out = append(out, b)
		start = i
	}
	return out
}

// validateTxnBatches checks one partition's batches as the broker does (KIP-932 2.7) and
// that every type may be staged in a transaction (exactq D3: ACCEPT, REJECT, gap).
func validateTxnBatches(tp TopicPartition, bs []ShareAckBatch) error {
	prev := int64(-1)
	for i, b := range bs {
		switch {
		case b.FirstOffset < 0 || b.LastOffset < b.FirstOffset:
			return fmt.Errorf("kgoext: %s[%d] batch %d: offsets %d..%d", tp.Topic, tp.Partition, i, b.FirstOffset, b.LastOffset)
		case i > 0 && b.FirstOffset <= prev:
			return fmt.Errorf("kgoext: %s[%d] batch %d: not ascending or overlapping", tp.Topic, tp.Partition, i)
		case len(b.Types) != 1 && int64(len(b.Types)) != b.LastOffset-b.FirstOffset+1:
			return fmt.Errorf("kgoext: %s[%d] batch %d: %d types for %d offsets", tp.Topic, tp.Partition, i, len(b.Types), b.LastOffset-b.FirstOffset+1)
		}
		for _, t := range b.Types {
			if t != AckGap && t != AckAccept && t != AckReject {
				return fmt.Errorf("%w: %s in %s[%d] at %d..%d", ErrAckNotTransactional, t, tp.Topic, tp.Partition, b.FirstOffset, b.LastOffset)
			}
		}
		prev = b.LastOffset
	}
	return nil
}

// ErrAckNotTransactional is returned for RELEASE and RENEW acknowledgements offered to a
// transaction: only ACCEPT, REJECT and gaps can be staged (they are terminal; an abort
// could otherwise undo a release).
var ErrAckNotTransactional = errors.New("kgoext: only ACCEPT, REJECT and gap acknowledgements can be part of a transaction")

func wireTypes(ts []AckType) []int8 {
	out := make([]int8, len(ts))
	for i, t := range ts {
		out[i] = int8(t)
	}
	return out
}

func sortedSet[V any](m map[TopicPartition]V) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i], out[j]) })
	return out
}
