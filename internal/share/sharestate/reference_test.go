package sharestate

// This file is the share coordinator as it was before the Core and its driver: a mutex
// held across each append, one fsync per write. It is kept, frozen, as the reference
// TestCoreMatchesStore drives next to the Core: same inputs, same replies, same records.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

// refStore is exactq's share coordinator: the persisted state of share-partitions in
// __share_group_state. See the package documentation for the contract.
type refStore struct {
	cfg   Config
	parts map[int32]*refPart // fixed after New
}

// refPart is one __share_group_state partition and the state of the keys it owns.
type refPart struct {
	// mu serialises everything on the partition, including the append: a record is
	// applied to memory in log order, right after it is durable, so memory always equals
	// a replay of the log (see ApplyMarker for markers).
	mu  sync.Mutex
	log coordlog.Partition
	// keyspace is the state of the keys; guarded by mu, except txPending (metrics).
	keyspace
	// broken is set when an append failed in a way that leaves the log and memory
	// possibly different; the partition refuses work until Load replays it again.
	broken error
	closed bool
}

// newRefStore returns a refStore over the given partitions of __share_group_state, after replaying
// each of them: snapshots replace a key's state, updates merge into it, tombstones delete
// it, and transaction markers resolve the TX_PENDING batches they end.
func newRefStore(cfg Config, parts []coordlog.Partition) (*refStore, error) {
	cfg.defaults()
	s := &refStore{cfg: cfg, parts: make(map[int32]*refPart, len(parts))}
	for _, lp := range parts {
		idx := lp.Index()
		if idx < 0 || idx >= cfg.NumPartitions {
			return nil, fmt.Errorf("sharestate: partition %d outside 0..%d", idx, cfg.NumPartitions-1)
		}
		if s.parts[idx] != nil {
			return nil, fmt.Errorf("sharestate: partition %d given twice", idx)
		}
		s.parts[idx] = &refPart{log: lp}
	}
	for _, lp := range parts {
		if err := s.Load(lp); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Load (re)builds the state of one partition by replaying it. New calls it for every
// partition. A partition whose append failed with an unknown outcome reloads itself on its
// next use (see usable), so callers need not call Load again; it stays available for
// tests and tools. Only partitions passed to New can be loaded. Operations on the
// partition wait for the replay.
func (s *refStore) Load(lp coordlog.Partition) error {
	p := s.parts[lp.Index()]
	if p == nil {
		return fmt.Errorf("sharestate: partition %d was not given to New", lp.Index())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = lp
	return p.load(s)
}

// load replays p.log into fresh memory. The caller holds p.mu.
func (p *refPart) load(s *refStore) error {
	p.reset()
	p.broken = nil
	if err := p.log.Replay(func(st coordlog.Stored) error {
		if st.Transactional && st.Marker == nil {
			// exactq never writes share state transactionally (package doc); a
			// transactional batch here was written by something else. Its records are
			// applied like plain ones; say so.
			s.cfg.Logger.Warn("transactional data batch in __share_group_state", "partition", p.log.Index(), "offset", st.BaseOffset, "producer", st.ProducerID)
		}
		return p.replay(st)
	}); err != nil {
		p.broken = err
		return fmt.Errorf("sharestate: load __share_group_state-%d: %w", p.log.Index(), err)
	}
	return nil
}

// PartitionFor returns the __share_group_state partition owning k.
func (s *refStore) PartitionFor(k Key) int32 { return PartitionFor(k, s.cfg.NumPartitions) }

// lock finds and locks the partition owning k. The caller unlocks p.mu.
func (s *refStore) lock(k Key) (*refPart, error) {
	idx := s.PartitionFor(k)
	p := s.parts[idx]
	if p == nil {
		return nil, errorf(kerr.NotCoordinator, "__share_group_state-%d is not loaded here", idx)
	}
	p.mu.Lock()
	if err := p.usable(s); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	return p, nil
}

func (p *refPart) usable(s *refStore) error {
	if p.closed {
		return errorf(kerr.NotCoordinator, "share-state store closed")
	}
	if p.broken != nil {
		// An append failed with an unknown outcome: memory may differ from the log. The
		// log is the truth, so replay it now rather than refuse the partition until the
		// next restart; if the replay fails too, the partition stays unavailable and the
		// next call tries again.
		cause := p.broken
		if err := p.load(s); err != nil {
			return errorf(kerr.CoordinatorNotAvailable, "__share_group_state-%d needs reloading after %v: %v", p.log.Index(), cause, err)
		}
		s.cfg.Logger.Warn("share-state partition reloaded after a failed append", "partition", p.log.Index(), "cause", cause)
	}
	return nil
}

// append writes records as one plain batch and waits until they are durable. A failure
// other than a closed partition may have left the records in the log; the partition is
// then marked broken, so nothing answers from memory that may differ from the log.
func (p *refPart) append(ctx context.Context, recs ...kmsg.Record) (int64, error) {
	base, err := p.log.Append(context.WithoutCancel(ctx), coordlog.Batch{Records: recs, ProducerID: -1})
	if err != nil {
		if errors.Is(err, coordlog.ErrClosed) {
			return -1, errorf(kerr.NotCoordinator, "__share_group_state-%d: %v", p.log.Index(), err)
		}
		p.broken = err
		return -1, fmt.Errorf("%w (%w): append to __share_group_state-%d: %v", kerr.CoordinatorNotAvailable, ErrOutcomeUnknown, p.log.Index(), err)
	}
	p.end = max(p.end, base+int64(len(recs)))
	return base, nil
}

// Initialize is InitializeShareGroupState: it writes a full ShareSnapshot (snapshot epoch
// one above the previous, or 0) with the given state epoch and start offset (-1: let the
// leader apply share.auto.offset.reset) and no batches, replacing any previous state.
// A state epoch below the stored one is FENCED_STATE_EPOCH. The leader epoch is kept.
func (s *refStore) Initialize(ctx context.Context, k Key, stateEpoch int32, startOffset int64) error {
	if k.Partition < 0 || stateEpoch < 0 || startOffset < -1 {
		return errorf(kerr.InvalidRequest, "initialize %s: partition %d, state epoch %d, start offset %d", k, k.Partition, stateEpoch, startOffset)
	}
	p, err := s.lock(k)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	v := &snapshotValue{StateEpoch: stateEpoch, StartOffset: startOffset, DeliveryCompleteCount: -1}
	if e := p.keys[k]; e != nil {
		if stateEpoch < e.stateEpoch {
			return errorf(kerr.FencedStateEpoch, "initialize %s: state epoch %d < %d", k, stateEpoch, e.stateEpoch)
		}
		v.SnapshotEpoch = e.snapshotEpoch + 1
		v.LeaderEpoch = e.leaderEpoch
	}
	now := s.cfg.Now().UnixMilli()
	v.CreateTimestamp, v.WriteTimestamp = now, now
	return p.writeSnapshot(ctx, k, v)
}

// Reinitialize is Initialize for AlterShareGroupOffsets: the state epoch written is the
// larger of stateEpoch and one above the stored one, so every writer of the replaced state
// is fenced (FENCED_STATE_EPOCH) from then on, whatever epoch the caller knew. Staged
// (TX_PENDING) batches are replaced like every other batch: a later marker of their
// transaction finds nothing to resolve for the key. It returns the state epoch written.
func (s *refStore) Reinitialize(ctx context.Context, k Key, stateEpoch int32, startOffset int64) (int32, error) {
	if k.Partition < 0 || stateEpoch < 0 || startOffset < -1 {
		return 0, errorf(kerr.InvalidRequest, "reinitialize %s: partition %d, state epoch %d, start offset %d", k, k.Partition, stateEpoch, startOffset)
	}
	p, err := s.lock(k)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	if err := p.refuseIfStaged(k, "reinitialize"); err != nil {
		return 0, err
	}
	v := &snapshotValue{StateEpoch: stateEpoch, StartOffset: startOffset, DeliveryCompleteCount: -1}
	if e := p.keys[k]; e != nil {
		if e.stateEpoch == math.MaxInt32 {
			return 0, errorf(kerr.FencedStateEpoch, "reinitialize %s: state epoch exhausted", k)
		}
		v.StateEpoch = max(stateEpoch, e.stateEpoch+1)
		v.SnapshotEpoch = e.snapshotEpoch + 1
		v.LeaderEpoch = e.leaderEpoch
	}
	now := s.cfg.Now().UnixMilli()
	v.CreateTimestamp, v.WriteTimestamp = now, now
	return v.StateEpoch, p.writeSnapshot(ctx, k, v)
}

func (p *refPart) writeSnapshot(ctx context.Context, k Key, v *snapshotValue) error {
	rec := kmsg.Record{
		Key:   encodeKey(nil, recordKey{Type: recordTypeSnapshot, Key: k}),
		Value: encodeSnapshotValue(nil, v),
	}
	off, err := p.append(ctx, rec)
	if err != nil {
		return err
	}
	p.applySnapshot(k, v, off)
	return nil
}

func (p *refPart) writeUpdate(ctx context.Context, k Key, v *updateValue) error {
	rec := kmsg.Record{
		Key:   encodeKey(nil, recordKey{Type: recordTypeUpdate, Key: k}),
		Value: encodeUpdateValue(nil, v),
	}
	if _, err := p.append(ctx, rec); err != nil {
		return err
	}
	p.applyUpdate(k, v)
	return nil
}

// Read is ReadShareGroupState: the state of k for the share-partition leader at
// leaderEpoch. An uninitialized key is INVALID_REQUEST; a leader epoch below the stored
// one is FENCED_LEADER_EPOCH; a higher one is recorded durably (a ShareUpdate, or a
// ShareSnapshot when one is due) before the state is returned, so older leaders are
// fenced from then on. Leader epoch -1 reads without fencing or recording (tools).
func (s *refStore) Read(ctx context.Context, k Key, leaderEpoch int32) (State, error) {
	if k.Partition < 0 || leaderEpoch < -1 {
		return State{}, errorf(kerr.InvalidRequest, "read %s: partition %d, leader epoch %d", k, k.Partition, leaderEpoch)
	}
	p, err := s.lock(k)
	if err != nil {
		return State{}, err
	}
	defer p.mu.Unlock()
	e := p.keys[k]
	if e == nil {
		return State{}, errorf(kerr.InvalidRequest, "read %s: share-partition state not initialized", k)
	}
	if leaderEpoch >= 0 && leaderEpoch < e.leaderEpoch {
		return State{}, errorf(kerr.FencedLeaderEpoch, "read %s: leader epoch %d < %d", k, leaderEpoch, e.leaderEpoch)
	}
	if leaderEpoch > e.leaderEpoch {
		if err := s.write(ctx, p, k, e, leaderEpoch, -1, -1, nil); err != nil {
			return State{}, err
		}
	}
	return p.state(e), nil
}

// ReadSummary is ReadShareGroupStateSummary. An uninitialized key is not an error: it
// answers start offset -1, delivery-complete count -1 and epochs 0 (Kafka's
// readStateSummary). A leader epoch below the stored one is FENCED_LEADER_EPOCH; a higher
// one is not recorded. -1 skips the check.
func (s *refStore) ReadSummary(ctx context.Context, k Key, leaderEpoch int32) (Summary, error) {
	if k.Partition < 0 || leaderEpoch < -1 {
		return Summary{}, errorf(kerr.InvalidRequest, "read summary %s: partition %d, leader epoch %d", k, k.Partition, leaderEpoch)
	}
	p, err := s.lock(k)
	if err != nil {
		return Summary{}, err
	}
	defer p.mu.Unlock()
	e := p.keys[k]
	if e == nil {
		return Summary{StartOffset: UninitializedStartOffset, DeliveryCompleteCount: UninitializedDeliveryCompleteCount}, nil
	}
	if leaderEpoch >= 0 && leaderEpoch < e.leaderEpoch {
		return Summary{}, errorf(kerr.FencedLeaderEpoch, "read summary %s: leader epoch %d < %d", k, leaderEpoch, e.leaderEpoch)
	}
	return Summary{StateEpoch: e.stateEpoch, LeaderEpoch: e.leaderEpoch, StartOffset: e.startOffset, DeliveryCompleteCount: e.dcc}, nil
}

// Write is WriteShareGroupState: it merges batches (only the ranges that changed) into
// k's state, moves the start offset to max(startOffset, stored) (-1: unchanged) and
// records the leader epoch. It writes a ShareUpdate holding the request's batches, or,
// when the key already has UpdatesPerSnapshot updates since its last snapshot, a
// ShareSnapshot of the merged state pruned below the start offset.
//
// Errors: a negative partition, leader or state epoch, a malformed batch, or an
// uninitialized key is INVALID_REQUEST; a leader epoch below the stored one is
// FENCED_LEADER_EPOCH; a state epoch below the stored one is FENCED_STATE_EPOCH; a
// TX_PENDING batch staged by a producer epoch below a marker already seen for that
// producer on this partition is INVALID_PRODUCER_EPOCH (its transaction is over).
//
// deliveryCompleteCount (-1: unknown) never regresses: a writer whose start offset is
// behind the stored one is stale and its count is ignored, and at the same start offset
// the higher count is kept (terminal offsets stay terminal until the start offset moves).
func (s *refStore) Write(ctx context.Context, k Key, stateEpoch, leaderEpoch int32, startOffset int64, deliveryCompleteCount int64, batches []StateBatch) error {
	if k.Partition < 0 || stateEpoch < 0 || leaderEpoch < 0 || startOffset < -1 ||
		deliveryCompleteCount < -1 || deliveryCompleteCount > math.MaxInt32 {
		return errorf(kerr.InvalidRequest, "write %s: partition %d, state epoch %d, leader epoch %d, start offset %d, delivery-complete count %d",
			k, k.Partition, stateEpoch, leaderEpoch, startOffset, deliveryCompleteCount)
	}
	norm, err := normalizeWrite(batches)
	if err != nil {
		return errorf(kerr.InvalidRequest, "write %s: %v", k, err)
	}
	p, err := s.lock(k)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	e := p.keys[k]
	if e == nil {
		return errorf(kerr.InvalidRequest, "write %s: share-partition state not initialized", k)
	}
	if leaderEpoch < e.leaderEpoch {
		return errorf(kerr.FencedLeaderEpoch, "write %s: leader epoch %d < %d", k, leaderEpoch, e.leaderEpoch)
	}
	if stateEpoch < e.stateEpoch {
		return errorf(kerr.FencedStateEpoch, "write %s: state epoch %d < %d", k, stateEpoch, e.stateEpoch)
	}
	for i := range norm {
		b := &norm[i]
		if b.DeliveryState != StateTxPending {
			continue
		}
		if me, ok := p.markerEpoch[b.TxnProducerID]; ok && b.TxnProducerEpoch < me {
			return errorf(kerr.InvalidProducerEpoch, "write %s: staging by producer %d epoch %d after its marker at epoch %d",
				k, b.TxnProducerID, b.TxnProducerEpoch, me)
		}
	}
	dcc := int64(-1)
	switch {
	case deliveryCompleteCount == -1:
	case startOffset == -1 || startOffset == e.startOffset:
		if deliveryCompleteCount > e.dcc {
			dcc = deliveryCompleteCount
		}
	case startOffset > e.startOffset:
		dcc = deliveryCompleteCount
	}
	newStart := int64(-1)
	if startOffset > e.startOffset {
		newStart = startOffset
	}
	return s.write(ctx, p, k, e, leaderEpoch, newStart, dcc, norm)
}

// write persists a change to an initialized key: a ShareUpdate, or a ShareSnapshot once
// the key has UpdatesPerSnapshot updates. newStart, dcc and leaderEpoch are -1 when
// unchanged; batches are already validated.
func (s *refStore) write(ctx context.Context, p *refPart, k Key, e *entry, leaderEpoch int32, newStart, dcc int64, batches []StateBatch) error {
	start := e.startOffset
	if newStart != -1 {
		start = newStart
	}
	if e.updates >= s.cfg.UpdatesPerSnapshot {
		if dcc == -1 {
			dcc = e.dcc
		}
		return p.writeSnapshot(ctx, k, &snapshotValue{
			SnapshotEpoch:         e.snapshotEpoch + 1,
			StateEpoch:            e.stateEpoch,
			LeaderEpoch:           max(e.leaderEpoch, leaderEpoch),
			StartOffset:           start,
			DeliveryCompleteCount: clampDCC(dcc),
			CreateTimestamp:       e.createMs,
			WriteTimestamp:        s.cfg.Now().UnixMilli(),
			Batches:               combine(p.view(e), batches, start),
		})
	}
	return p.writeUpdate(ctx, k, &updateValue{
		SnapshotEpoch:         e.snapshotEpoch,
		LeaderEpoch:           leaderEpoch,
		StartOffset:           newStart,
		DeliveryCompleteCount: clampDCC(dcc),
		Batches:               combine(nil, batches, start),
	})
}

// Delete is DeleteShareGroupState: a tombstone on k's ShareSnapshot key. Deleting a key
// that has no state succeeds without writing.
func (s *refStore) Delete(ctx context.Context, k Key) error {
	if k.Partition < 0 {
		return errorf(kerr.InvalidRequest, "delete %s: partition %d", k, k.Partition)
	}
	p, err := s.lock(k)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	if p.keys[k] == nil {
		return nil
	}
	if err := p.refuseIfStaged(k, "delete"); err != nil {
		return err
	}
	rec := kmsg.Record{Key: encodeKey(nil, recordKey{Type: recordTypeSnapshot, Key: k})}
	if _, err := p.append(ctx, rec); err != nil {
		return err
	}
	p.applyTombstone(k)
	return nil
}

// Keys lists the keys that have state, sorted (for tools and tests).
func (s *refStore) Keys() []Key {
	var out []Key
	for _, p := range s.parts {
		p.mu.Lock()
		for k := range p.keys {
			out = append(out, k)
		}
		p.mu.Unlock()
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// TxPendingRecords is the number of offsets TX_PENDING in the durable state of every key:
// acknowledgements staged in transactions whose marker has not been applied. It is right
// from the moment New replays the log, whether or not any share partition was loaded
// since (the broker's TX_PENDING gauge reads it).
func (s *refStore) TxPendingRecords() int64 {
	var n int64
	for _, p := range s.parts {
		n += p.txPending.Load()
	}
	return n
}

// TxPendingByKey is TxPendingRecords per share-partition: the keys holding TX_PENDING
// offsets, with their counts.
func (s *refStore) TxPendingByKey() map[Key]int64 {
	out := map[Key]int64{}
	for _, p := range s.parts {
		p.mu.Lock()
		for _, keys := range p.pending {
			for k := range keys {
				out[k] = p.keys[k].txPending
			}
		}
		p.mu.Unlock()
	}
	return out
}

// Stagings lists the TX_PENDING stagings of the durable state, sorted by partition,
// producer id and epoch: what a restart must check with the transaction coordinator,
// since a marker that never reached the log leaves them pending for ever.
func (s *refStore) Stagings() []Staging {
	var out []Staging
	for idx, p := range s.parts {
		p.mu.Lock()
		found := map[[2]int64]int64{} // (pid, epoch) -> offsets
		for pid, keys := range p.pending {
			for k := range keys {
				for _, b := range p.view(p.keys[k]) {
					if b.DeliveryState == StateTxPending && b.TxnProducerID == pid {
						found[[2]int64{pid, int64(b.TxnProducerEpoch)}] += b.LastOffset - b.FirstOffset + 1
					}
				}
			}
		}
		p.mu.Unlock()
		for pe, n := range found {
			out = append(out, Staging{Partition: idx, ProducerID: pe[0], Epoch: int16(pe[1]), Records: n})
		}
	}
	slices.SortFunc(out, compareStagings)
	return out
}

// DeleteTopics tombstones, durably, the state of every key whose topic id deleted reports
// true: the share state of deleted topics goes with them (Kafka's ShareCoordinatorShard.
// maybeCleanupShareState on a topic deletion), so a topic re-created with the same name
// starts clean and nothing of the old one is replayed after a restart. Unlike Delete it
// does not refuse keys with acknowledgements staged in an open transaction: the records
// are gone with the topic, and the transaction's marker then resolves nothing there. It
// returns the keys deleted; on error, those of the partitions done so far.
func (s *refStore) DeleteTopics(ctx context.Context, deleted func(topicID [16]byte) bool) ([]Key, error) {
	var out []Key
	for idx := range s.cfg.NumPartitions {
		if s.parts[idx] == nil {
			continue
		}
		keys, err := s.deleteTopicsIn(ctx, idx, deleted)
		out = append(out, keys...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *refStore) deleteTopicsIn(ctx context.Context, idx int32, deleted func(topicID [16]byte) bool) ([]Key, error) {
	p := s.parts[idx]
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(s); err != nil {
		return nil, err
	}
	var keys []Key
	for k := range p.keys {
		if deleted(k.TopicID) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	for done := 0; done < len(keys); {
		chunk := keys[done:min(done+maxTombstonesPerBatch, len(keys))]
		recs := make([]kmsg.Record, len(chunk))
		for i, k := range chunk {
			recs[i] = kmsg.Record{Key: encodeKey(nil, recordKey{Type: recordTypeSnapshot, Key: k})}
		}
		if _, err := p.append(ctx, recs...); err != nil {
			return keys[:done], err
		}
		for _, k := range chunk {
			p.applyTombstone(k)
		}
		done += len(chunk)
	}
	return keys, nil
}

// ApplyMarker is the KIP-1289 marker path for one __share_group_state partition. With
// the partition locked it calls appendMarker, which must append the transaction's control
// batch to that partition and return once it is durable, and then resolves the TX_PENDING
// batches the marker ends (see CompleteTxn). Holding the lock across both keeps the
// store's own records and the marker in the same order in memory as in the log, so a
// replay reproduces exactly what was answered. If appendMarker fails nothing is resolved
// and the error is returned; the transaction coordinator retries the marker.
//
// It returns the keys whose batches changed, sorted, for the broker to update the live
// share-partitions.
func (s *refStore) ApplyMarker(ctx context.Context, partition int32, pid int64, epoch int16, commit bool, appendMarker func(context.Context) error) ([]Key, error) {
	res, err := s.ApplyMarkerResult(ctx, partition, pid, epoch, commit, appendMarker)
	return res.Keys, err
}

// ApplyMarkerResult is ApplyMarker returning also how many offsets the marker resolved,
// for metrics.
func (s *refStore) ApplyMarkerResult(ctx context.Context, partition int32, pid int64, epoch int16, commit bool, appendMarker func(context.Context) error) (MarkerResult, error) {
	p := s.parts[partition]
	if p == nil {
		return MarkerResult{}, errorf(kerr.NotCoordinator, "__share_group_state-%d is not loaded here", partition)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(s); err != nil {
		return MarkerResult{}, err
	}
	if err := appendMarker(ctx); err != nil {
		return MarkerResult{}, err
	}
	return p.applyMarker(pid, epoch, commit), nil
}

// CompleteTxn resolves, in memory, the TX_PENDING batches of the given partition staged by
// pid with an epoch <= epoch: on commit each takes its staged commit state (ACKNOWLEDGED,
// ARCHIVED or ARCHIVING), on abort its staged abort state (AVAILABLE, or ARCHIVED at the
// delivery limit); delivery counts are unchanged. It writes nothing: the marker in the log
// is the durable record of the outcome, and Load replays it the same way.
//
// The caller must have made the marker durable, and no refStore write to the partition may
// be appended between the marker and this call, or memory and a replay could disagree;
// ApplyMarker provides exactly that ordering and is what the broker should call.
// CompleteTxn on an unknown partition resolves nothing.
func (s *refStore) CompleteTxn(partition int32, pid int64, epoch int16, commit bool) []Key {
	p := s.parts[partition]
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.usable(s) != nil {
		return nil
	}
	return p.applyMarker(pid, epoch, commit).Keys
}

// LastRedundantOffset is the offset below which partition's log holds nothing the store
// needs: the oldest latest-snapshot offset among its live keys, or the end of what it
// has seen when it has no keys. The broker prunes with DeleteRecords up to it (Kafka's
// ShareCoordinatorOffsetsManager, share.coordinator.state.topic.prune.interval.ms). ok is
// false when the partition is not loaded here.
//
// Pruning forgets the marker epochs below the offset, which only weakens the staging
// fence for producers whose last marker is that old.
func (s *refStore) LastRedundantOffset(partition int32) (offset int64, ok bool) {
	p := s.parts[partition]
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.usable(s) != nil {
		return 0, false
	}
	offset = p.end
	for _, e := range p.keys {
		offset = min(offset, e.snapshotOffset)
	}
	return offset, true
}

// SnapshotCold writes a fresh ShareSnapshot, with unchanged state, for every key whose
// last snapshot is older than ColdSnapshotInterval, so idle keys do not hold
// LastRedundantOffset back (Kafka's snapshotColdPartitions). The broker calls it every ColdSnapshotInterval. It returns the
// number of snapshots written.
func (s *refStore) SnapshotCold(ctx context.Context) (int, error) {
	n := 0
	for idx := range s.cfg.NumPartitions {
		p := s.parts[idx]
		if p == nil {
			continue
		}
		c, err := s.snapshotColdPart(ctx, p)
		n += c
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (s *refStore) snapshotColdPart(ctx context.Context, p *refPart) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(s); err != nil {
		return 0, nil
	}
	now := s.cfg.Now()
	cutoff := now.Add(-s.cfg.ColdSnapshotInterval).UnixMilli()
	var keys []Key
	for k, e := range p.keys {
		if e.snapshotMs < cutoff {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	for i, k := range keys {
		e := p.keys[k]
		err := p.writeSnapshot(ctx, k, &snapshotValue{
			SnapshotEpoch: e.snapshotEpoch + 1, StateEpoch: e.stateEpoch, LeaderEpoch: e.leaderEpoch,
			StartOffset: e.startOffset, DeliveryCompleteCount: clampDCC(e.dcc),
			CreateTimestamp: e.createMs, WriteTimestamp: now.UnixMilli(), Batches: slices.Clone(p.view(e)),
		})
		if err != nil {
			return i, err
		}
	}
	return len(keys), nil
}

// Close stops the store: later calls answer NOT_COORDINATOR. It does not close the
// partitions, which the broker owns.
func (s *refStore) Close() {
	for _, p := range s.parts {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
	}
}
