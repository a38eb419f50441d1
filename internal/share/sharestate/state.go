package sharestate

import (
	"cmp"
	"container/list"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

// keyspace is the in-memory state of one __share_group_state partition: every live key
// and the indexes the KIP-1289 rules need. Its apply methods are the replay rules; the
// Core calls them when it steps an input and when it replays the log, so both paths
// change memory the same way.
type keyspace struct {
	// keys is the state of every live key.
	keys map[Key]*entry
	// pending indexes keys holding TX_PENDING batches by staging producer id.
	pending map[int64]map[Key]struct{}
	// markerEpoch is the highest marker epoch seen per producer id, to fence stagings
	// that arrive after their transaction's marker (hanging transactions).
	markerEpoch map[int64]int16
	// txPending is the number of TX_PENDING offsets over every key: the sum of the
	// entries' txPending, kept by reindex.
	txPending atomic.Int64
	// end is one past the last offset appended (as the log reported it) or replayed.
	end int64
	// hot are the keys whose batches are decoded (*entry), least recently changed first;
	// hotBatches counts their batches (compact.go).
	hot        *list.List
	hotBatches int
	hotLimit   int // the budget of hotBatches (CoreConfig.HotBatches)
	// scratch, buf and merged are reused by view, cool and applyUpdate.
	scratch, merged []StateBatch
	buf             []byte
}

func (p *keyspace) reset() {
	p.keys, p.pending, p.markerEpoch = map[Key]*entry{}, map[int64]map[Key]struct{}{}, map[int64]int16{}
	p.end = 0
	p.txPending.Store(0)
	p.hot, p.hotBatches, p.scratch, p.merged, p.buf = list.New(), 0, nil, nil, nil
}

// entry is one key's state.
type entry struct {
	snapshotEpoch int32
	stateEpoch    int32
	leaderEpoch   int32
	startOffset   int64
	dcc           int64
	createMs      int64
	// batches are the key's state batches while it is hot, packed their encoding
	// while it is cold (compact.go); read them with keyspace.view.
	batches    []StateBatch
	packed     []byte
	hot        bool
	hotAt      *list.Element // in keyspace.hot while hot
	hotCounted int           // cap(batches) as the hot total counts it
	// updates counts ShareUpdate records since the last ShareSnapshot.
	updates int
	// snapshotOffset is the log offset of the last ShareSnapshot; snapshotMs its write time.
	snapshotOffset int64
	snapshotMs     int64
	// pids are the producer ids with TX_PENDING batches in batches.
	pids []int64
	// txPending is the number of TX_PENDING offsets in batches.
	txPending int64
}

// replay applies one stored batch during a load. A transactional data batch is applied
// like a plain one (exactq never writes share state transactionally; the caller warns).
func (p *keyspace) replay(st coordlog.Stored) error {
	if st.Marker != nil {
		p.applyMarker(st.ProducerID, st.ProducerEpoch, st.Marker.Commit)
		p.end = max(p.end, st.BaseOffset+1)
		return nil
	}
	for i := range st.Records {
		r := &st.Records[i]
		off := st.BaseOffset + int64(r.OffsetDelta)
		p.end = max(p.end, off+1)
		if err := p.replayRecord(r, off); err != nil {
			return fmt.Errorf("offset %d: %w", off, err)
		}
	}
	return nil
}

func (p *keyspace) replayRecord(r *kmsg.Record, off int64) error {
	rk, err := decodeKey(r.Key)
	if err != nil {
		return err
	}
	switch {
	case rk.Type == recordTypeSnapshot && r.Value == nil:
		p.applyTombstone(rk.Key)
	case rk.Type == recordTypeSnapshot:
		v, err := decodeSnapshotValue(r.Value)
		if err != nil {
			return err
		}
		p.applySnapshot(rk.Key, v, off)
	case r.Value == nil:
		// Kafka writes tombstones only on the snapshot key; nothing to do.
	default:
		v, err := decodeUpdateValue(r.Value)
		if err != nil {
			return err
		}
		p.applyUpdate(rk.Key, v)
	}
	return nil
}

// applySnapshot replaces a key's state. Epochs never go back: the leader and state epochs
// are the highest seen for the key since it was last deleted (Kafka's leaderEpochMap and
// stateEpochMap).
func (p *keyspace) applySnapshot(k Key, v *snapshotValue, off int64) {
	e := p.keys[k]
	if e == nil {
		e = &entry{leaderEpoch: v.LeaderEpoch, stateEpoch: v.StateEpoch}
		p.keys[k] = e
	}
	e.snapshotEpoch = v.SnapshotEpoch
	e.stateEpoch = max(e.stateEpoch, v.StateEpoch)
	e.leaderEpoch = max(e.leaderEpoch, v.LeaderEpoch)
	e.startOffset = v.StartOffset
	e.dcc = int64(v.DeliveryCompleteCount)
	e.createMs = v.CreateTimestamp
	p.warm(e)
	e.batches = normalizeLoaded(v.Batches, v.StartOffset)
	p.fit(e)
	e.updates = 0
	e.snapshotOffset = off
	e.snapshotMs = v.WriteTimestamp
	p.reindex(k, e)
}

// applyUpdate merges a ShareUpdate into a key's state. An update for a key without a
// snapshot cannot come from this store (Write needs an initialized key) and is ignored.
func (p *keyspace) applyUpdate(k Key, v *updateValue) {
	e := p.keys[k]
	if e == nil {
		return
	}
	if v.LeaderEpoch != -1 {
		e.leaderEpoch = max(e.leaderEpoch, v.LeaderEpoch)
	}
	if v.StartOffset != -1 {
		e.startOffset = max(e.startOffset, v.StartOffset)
	}
	if v.DeliveryCompleteCount != -1 {
		e.dcc = int64(v.DeliveryCompleteCount)
	}
	if len(v.Batches) > 0 || v.StartOffset != -1 {
		e.batches = mergeInto(p.edit(e), v.Batches, e.startOffset, &p.merged)
		p.fit(e)
	}
	e.updates++
	p.reindex(k, e)
}

func (p *keyspace) applyTombstone(k Key) {
	e := p.keys[k]
	if e == nil {
		return
	}
	p.drop(e)
	p.reindex(k, e)
	delete(p.keys, k)
}

// applyMarker resolves every TX_PENDING batch staged by pid with an epoch <= epoch
// (decision D6), in every key of the partition, and returns the keys it changed with the
// numbers of offsets resolved.
func (p *keyspace) applyMarker(pid int64, epoch int16, commit bool) MarkerResult {
	if old, ok := p.markerEpoch[pid]; !ok || epoch > old {
		p.markerEpoch[pid] = epoch
	}
	var changed []Key
	var res MarkerResult
	for k := range p.pending[pid] {
		e := p.keys[k]
		resolved := int64(0)
		bs := p.edit(e)
		for i := range bs {
			b := &bs[i]
			if !b.resolvedBy(pid, epoch) {
				continue
			}
			n := b.LastOffset - b.FirstOffset + 1
			b.DeliveryState = b.resolvedState(commit)
			if commit {
				res.Committed += n
			} else {
				res.Aborted += n
				if b.DeliveryState == StateArchived {
					res.ArchivedOnAbort += n
				}
			}
			b.clearStaged()
			if b.DeliveryState == StateAcknowledged || b.DeliveryState == StateArchived {
				resolved += b.LastOffset - b.FirstOffset + 1
			}
			changed = append(changed, k)
		}
		if len(changed) == 0 || changed[len(changed)-1] != k {
			p.fit(e)
			continue
		}
		// The resolved offsets are at or above the start offset (batches below it are
		// pruned) and now terminal: they count as delivery-complete (KIP-1226), so lag is
		// right before the leader's next write.
		if e.dcc >= 0 {
			e.dcc = min(e.dcc+resolved, math.MaxInt32)
		}
		e.batches = coalesce(bs)
		p.fit(e)
		p.reindex(k, e)
	}
	changed = slices.Compact(changed)
	slices.SortFunc(changed, compareKeys)
	res.Keys = changed
	return res
}

// MarkerResult is what a transaction marker resolved on one __share_group_state
// partition.
type MarkerResult struct {
	// Keys are the share-partitions whose batches changed, sorted.
	Keys []Key
	// Committed and Aborted count the TX_PENDING offsets the marker resolved;
	// ArchivedOnAbort those of Aborted archived because their delivery count had reached
	// the limit at staging (D5).
	Committed, Aborted, ArchivedOnAbort int64
}

// reindex recomputes e's staging producers and TX_PENDING count and updates the
// partition's pending index and count.
func (p *keyspace) reindex(k Key, e *entry) {
	for _, pid := range e.pids {
		if m := p.pending[pid]; m != nil {
			delete(m, k)
			if len(m) == 0 {
				delete(p.pending, pid)
			}
		}
	}
	e.pids = e.pids[:0]
	var pending int64
	bs := p.view(e)
	for i := range bs {
		b := &bs[i]
		if b.DeliveryState != StateTxPending {
			continue
		}
		pending += b.LastOffset - b.FirstOffset + 1
		if !slices.Contains(e.pids, b.TxnProducerID) {
			e.pids = append(e.pids, b.TxnProducerID)
		}
	}
	p.txPending.Add(pending - e.txPending)
	e.txPending = pending
	for _, pid := range e.pids {
		m := p.pending[pid]
		if m == nil {
			m = map[Key]struct{}{}
			p.pending[pid] = m
		}
		m[k] = struct{}{}
	}
}

// normalizeLoaded makes a snapshot's batches canonical (they already are when this store
// wrote them; a foreign writer's may overlap).
func normalizeLoaded(bs []StateBatch, startOffset int64) []StateBatch {
	for i := range bs {
		if bs[i].DeliveryState != StateTxPending {
			bs[i].clearStaged()
		}
	}
	return combine(nil, bs, startOffset)
}

func compareKeys(a, b Key) int {
	if c := cmp.Compare(a.GroupID, b.GroupID); c != 0 {
		return c
	}
	if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// refuseIfStaged refuses to replace or delete k's state while it holds acknowledgements
// staged in an open transaction (TX_PENDING): the transaction's marker would then find
// nothing to resolve, and a commit would make its outputs visible while the inputs it
// acknowledged are delivered again. The transaction must end first (commit, abort or its
// timeout). The caller holds p.mu.
func (p *keyspace) refuseIfStaged(k Key, what string) error {
	if e := p.keys[k]; e != nil && len(e.pids) > 0 {
		// The lowest staging producer, so that the message does not depend on map order.
		return errorf(kerr.ConcurrentTransactions, "%s %s: acknowledgements are staged in an open transaction of producer %d; end that transaction first", what, k, slices.Min(e.pids))
	}
	return nil
}

func (p *keyspace) state(e *entry) State {
	return State{
		StateEpoch: e.stateEpoch, LeaderEpoch: e.leaderEpoch, StartOffset: e.startOffset,
		DeliveryCompleteCount: e.dcc, Batches: p.batches(e),
	}
}
