package sharestate

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// A key's batches cost 40 bytes each as StateBatch values, and in the worst case (a
// consumer that accepts and rejects alternately, P7) there is a batch per offset. So
// only the keys changed last are kept decoded ("hot", within hotBudget batches); every
// other key holds its batches encoded, about 4 bytes a batch when each covers one
// offset: the offset delta from the previous batch's end, the length, the state and the
// delivery count as varints, and the staging fields only on a TX_PENDING batch. A key is
// decoded again when a step changes it, and read from a decoded copy otherwise.
//
// Why the store keeps a copy of its own instead of sharing the share-partition leader's
// (which holds the same state, packed too, sharepartition's packed.go): the two are
// different owners on different goroutines, usually on different nodes in a cluster;
// the store's state is what its log replays to, while the leader's runs ahead of it
// (acquisitions and lock expiries it does not persist, writes not yet durable), and the
// store answers Read, writes snapshots and resolves markers without the leader. Sharing
// would need locking or copy-on-write across them and break "rebuilt by replay" when an
// append fails. Two compact copies cost a few bytes a record.

// hotBudget is how many decoded batches a Store keeps room for (their slices'
// capacity; 2.5 MiB as StateBatch values), split evenly over its partitions' Cores
// (CoreConfig.HotBatches), over the keys changed last. While a Core is busy the key it
// changes stays decoded whatever its size; once its queue is empty the driver tidies it
// (keyspace.tidy), so that a burst of writes (a load, P7's setup) leaves nothing over
// the budget. A variable so that the model tests can make every other key cold.
var hotBudget = 1 << 16

// view returns e's batches for reading: valid until the next view or change on p, and
// not to be changed.
func (p *keyspace) view(e *entry) []StateBatch {
	if e.hot {
		return e.batches
	}
	if n := countBatches(e.packed); cap(p.scratch) < n {
		p.scratch = make([]StateBatch, 0, n)
	}
	p.scratch = decodeBatches(p.scratch[:0], e.packed)
	return p.scratch
}

// batches returns a copy of e's batches, of exactly their size.
func (p *keyspace) batches(e *entry) []StateBatch {
	if e.hot {
		return slices.Clone(e.batches)
	}
	return decodeBatches(make([]StateBatch, 0, countBatches(e.packed)), e.packed)
}

// edit decodes e's batches if it is cold, makes it the most recent hot key and returns
// its batches, which the caller may change in place and must store back in e.batches,
// then call fit.
func (p *keyspace) edit(e *entry) []StateBatch {
	if !e.hot {
		e.batches = p.batches(e)
	}
	p.warm(e)
	return e.batches
}

// warm makes e the most recent hot key; its batches are e.batches from now on.
func (p *keyspace) warm(e *entry) {
	if e.hot {
		p.hot.MoveToBack(e.hotAt)
	} else {
		e.hot, e.hotAt = true, p.hot.PushBack(e)
	}
	e.packed = nil
}

// fit counts the room for batches the caller stored in e (hot) and encodes the least
// recently changed keys until the hot ones are within hotBudget.
func (p *keyspace) fit(e *entry) {
	p.hotBatches += cap(e.batches) - e.hotCounted
	e.hotCounted = cap(e.batches)
	for p.hotBatches > p.hotLimit && p.hot.Front().Value != e {
		p.cool(p.hot.Front().Value.(*entry))
	}
}

// tidy encodes the least recently changed keys, the last one included, until the hot
// ones are within the budget, and drops scratch space larger than it.
func (p *keyspace) tidy() {
	for p.hotBatches > p.hotLimit {
		p.cool(p.hot.Front().Value.(*entry))
	}
	if cap(p.scratch) > p.hotLimit {
		p.scratch = nil
	}
	if cap(p.merged) > p.hotLimit {
		p.merged = nil
	}
	if cap(p.buf) > 4*p.hotLimit {
		p.buf = nil
	}
}

// unlink takes e out of the hot keys (its batches stay as they are).
func (p *keyspace) unlink(e *entry) {
	if !e.hot {
		return
	}
	p.hot.Remove(e.hotAt)
	p.hotBatches -= e.hotCounted
	e.hot, e.hotAt, e.hotCounted = false, nil, 0
}

// cool encodes e's batches and drops it from the hot keys.
func (p *keyspace) cool(e *entry) {
	if !e.hot {
		return
	}
	p.unlink(e)
	if len(e.batches) > 0 {
		p.buf = encodeBatches(p.buf[:0], e.batches)
		e.packed = slices.Clone(p.buf)
	}
	e.batches = nil
}

// drop forgets e's batches (a deleted key).
func (p *keyspace) drop(e *entry) {
	p.unlink(e)
	e.batches, e.packed = nil, nil
}

// encodeBatches appends the encoding of bs (sorted, non-overlapping) to dst.
func encodeBatches(dst []byte, bs []StateBatch) []byte {
	next := int64(0)
	for i := range bs {
		b := &bs[i]
		dst = binary.AppendUvarint(dst, zigzag(b.FirstOffset-next))
		dst = binary.AppendUvarint(dst, uint64(b.LastOffset-b.FirstOffset))
		dst = append(dst, byte(b.DeliveryState))
		staged := b.TxnProducerID != 0 || b.TxnProducerEpoch != 0 || b.TxnAckType != 0 || b.TxnCommitState != 0 || b.TxnAbortState != 0
		head := uint64(zigzag(int64(b.DeliveryCount))) << 1
		if staged {
			head |= 1
		}
		dst = binary.AppendUvarint(dst, head)
		if staged {
			dst = binary.AppendUvarint(dst, zigzag(b.TxnProducerID))
			dst = binary.AppendUvarint(dst, zigzag(int64(b.TxnProducerEpoch)))
			dst = append(dst, byte(b.TxnAckType), byte(b.TxnCommitState), byte(b.TxnAbortState))
		}
		next = b.LastOffset + 1
	}
	return dst
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// decodeBatches appends the batches encoded in src to dst. src is always this package's
// own encoding, so a malformed one is a bug.
func decodeBatches(dst []StateBatch, src []byte) []StateBatch {
	next := int64(0)
	var uvarint func() uint64
	varint := func() int64 { return unzigzag(uvarint()) }
	uvarint = func() uint64 {
		v, n := binary.Uvarint(src)
		if n <= 0 {
			panic(fmt.Sprintf("sharestate: corrupt encoded batches (%d bytes left)", len(src)))
		}
		src = src[n:]
		return v
	}
	for len(src) > 0 {
		var b StateBatch
		b.FirstOffset = next + varint()
		b.LastOffset = b.FirstOffset + int64(uvarint())
		b.DeliveryState = int8(src[0])
		src = src[1:]
		head := uvarint()
		b.DeliveryCount = int16(unzigzag(head >> 1))
		if head&1 != 0 {
			b.TxnProducerID = varint()
			b.TxnProducerEpoch = int16(varint())
			b.TxnAckType, b.TxnCommitState, b.TxnAbortState = int8(src[0]), int8(src[1]), int8(src[2])
			src = src[3:]
		}
		dst = append(dst, b)
		next = b.LastOffset + 1
	}
	return dst
}

// countBatches is the number of batches encoded in src (a walk over the varints, no
// decoding), so that a decode can allocate exactly what it needs.
func countBatches(src []byte) int {
	n := 0
	for len(src) > 0 {
		_, a := binary.Uvarint(src)     // offset delta
		_, b := binary.Uvarint(src[a:]) // length
		src = src[a+b+1:]               // and the state
		head, h := binary.Uvarint(src)
		src = src[h:]
		if head&1 != 0 { // staged: producer id, epoch, ack type, commit and abort states
			_, c := binary.Uvarint(src)
			_, d := binary.Uvarint(src[c:])
			src = src[c+d+3:]
		}
		n++
	}
	return n
}
