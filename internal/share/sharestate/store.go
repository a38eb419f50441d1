package sharestate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/coordlog"
)

// Config configures a Store. Zero values take Kafka's defaults.
type Config struct {
	// NumPartitions is share.coordinator.state.topic.num.partitions (default 50). It must
	// equal the partition count of __share_group_state: it decides which partition owns a
	// key.
	NumPartitions int32
	// UpdatesPerSnapshot is share.coordinator.snapshot.update.records.per.snapshot
	// (default 500): after that many ShareUpdate records for a key since its last
	// ShareSnapshot, the next write is a new ShareSnapshot.
	UpdatesPerSnapshot int
	// ColdSnapshotInterval is share.coordinator.cold.partition.snapshot.interval.ms
	// (default 5 minutes): SnapshotCold re-snapshots keys whose last snapshot is older, so
	// an idle key does not hold back pruning (LastRedundantOffset) forever.
	ColdSnapshotInterval time.Duration
	// Now is the clock (default time.Now); it stamps snapshot create and write times.
	Now func() time.Time
	// Logger receives load-time warnings (default: discard).
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.UpdatesPerSnapshot <= 0 {
		c.UpdatesPerSnapshot = 500
	}
	if c.ColdSnapshotInterval <= 0 {
		c.ColdSnapshotInterval = 5 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is exactq's share coordinator: the persisted state of share-partitions in
// __share_group_state. See the package documentation for the contract. Each partition is
// a Core run by a driver goroutine (driver.go); the methods queue an input and wait for
// its committed reply.
type Store struct {
	cfg   Config
	parts map[int32]*driver // fixed after New
}

// New returns a Store over the given partitions of __share_group_state, after replaying
// each of them: snapshots replace a key's state, updates merge into it, tombstones delete
// it, and transaction markers resolve the TX_PENDING batches they end.
func New(cfg Config, parts []coordlog.Partition) (*Store, error) {
	cfg.defaults()
	s := &Store{cfg: cfg, parts: make(map[int32]*driver, len(parts))}
	seen := map[int32]bool{}
	for _, lp := range parts {
		idx := lp.Index()
		if idx < 0 || idx >= cfg.NumPartitions {
			return nil, fmt.Errorf("sharestate: partition %d outside 0..%d", idx, cfg.NumPartitions-1)
		}
		if seen[idx] {
			return nil, fmt.Errorf("sharestate: partition %d given twice", idx)
		}
		seen[idx] = true
	}
	for _, lp := range parts {
		d, err := newDriver(CoreConfig{
			Partition:              lp.Index(),
			UpdatesPerSnapshot:     cfg.UpdatesPerSnapshot,
			ColdSnapshotIntervalMs: cfg.ColdSnapshotInterval.Milliseconds(),
			HotBatches:             max(hotBudget/int(cfg.NumPartitions), 1),
		}, lp, cfg.Logger)
		if err != nil {
			s.Close()
			return nil, err
		}
		d.start()
		s.parts[lp.Index()] = d
	}
	return s, nil
}

// Load (re)builds the state of one partition by replaying it. New does it for every
// partition, and a partition whose append failed reloads itself, so callers need not
// call Load; it stays available for tests and tools. Only partitions passed to New can be
// loaded. Requests queued before it are served first.
func (s *Store) Load(lp coordlog.Partition) error {
	d := s.parts[lp.Index()]
	if d == nil {
		return fmt.Errorf("sharestate: partition %d was not given to New", lp.Index())
	}
	return d.do(&request{load: lp}).err
}

// PartitionFor returns the __share_group_state partition owning k.
func (s *Store) PartitionFor(k Key) int32 { return PartitionFor(k, s.cfg.NumPartitions) }

// errorf wraps a Kafka error with detail; errors.Is(err, kerr.X) and errors.As to
// *kerr.Error both see the code.
func errorf(code *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{code}, args...)...)
}

// driverFor is the driver of the partition owning k.
func (s *Store) driverFor(k Key) (*driver, error) {
	return s.driverOf(s.PartitionFor(k))
}

func (s *Store) driverOf(idx int32) (*driver, error) {
	if d := s.parts[idx]; d != nil {
		return d, nil
	}
	return nil, errorf(kerr.NotCoordinator, "__share_group_state-%d is not loaded here", idx)
}

// run steps in on the partition owning k.
func (s *Store) run(k Key, in Input) (any, error) {
	d, err := s.driverFor(k)
	if err != nil {
		return nil, err
	}
	st, err := d.step(in)
	return st.Reply, err
}

func (s *Store) nowMs() int64 { return s.cfg.Now().UnixMilli() }

// ErrOutcomeUnknown is wrapped (with COORDINATOR_NOT_AVAILABLE) by the error of a
// state-changing call whose append failed in a way that may have left the record in the
// log: whether the change happened is unknown until Load replays the partition. Every
// other error of Write, Initialize and Delete means nothing was written.
var ErrOutcomeUnknown = errors.New("sharestate: outcome of the append unknown")

// Initialize is InitializeShareGroupState: it writes a full ShareSnapshot (snapshot epoch
// one above the previous, or 0) with the given state epoch and start offset (-1: let the
// leader apply share.auto.offset.reset) and no batches, replacing any previous state.
// A state epoch below the stored one is FENCED_STATE_EPOCH. The leader epoch is kept.
func (s *Store) Initialize(ctx context.Context, k Key, stateEpoch int32, startOffset int64) error {
	r, err := s.run(k, Initialize{Key: k, StateEpoch: stateEpoch, StartOffset: startOffset, NowMs: s.nowMs()})
	if err != nil {
		return err
	}
	return r.(Done).Err
}

// Reinitialize is Initialize for AlterShareGroupOffsets: the state epoch written is the
// larger of stateEpoch and one above the stored one, so every writer of the replaced state
// is fenced (FENCED_STATE_EPOCH) from then on, whatever epoch the caller knew. A key
// holding acknowledgements staged in an open transaction is refused
// (CONCURRENT_TRANSACTIONS) until the transaction ends. It returns the state epoch written.
func (s *Store) Reinitialize(ctx context.Context, k Key, stateEpoch int32, startOffset int64) (int32, error) {
	r, err := s.run(k, Reinitialize{Key: k, StateEpoch: stateEpoch, StartOffset: startOffset, NowMs: s.nowMs()})
	if err != nil {
		return 0, err
	}
	rr := r.(ReinitializeReply)
	return rr.StateEpoch, rr.Err
}

// Read is ReadShareGroupState: the state of k for the share-partition leader at
// leaderEpoch. An uninitialized key is INVALID_REQUEST; a leader epoch below the stored
// one is FENCED_LEADER_EPOCH; a higher one is recorded durably (a ShareUpdate, or a
// ShareSnapshot when one is due) before the state is returned, so older leaders are
// fenced from then on. Leader epoch -1 reads without fencing or recording (tools).
func (s *Store) Read(ctx context.Context, k Key, leaderEpoch int32) (State, error) {
	r, err := s.run(k, Read{Key: k, LeaderEpoch: leaderEpoch, NowMs: s.nowMs()})
	if err != nil {
		return State{}, err
	}
	rr := r.(ReadReply)
	return rr.State, rr.Err
}

// ReadSummary is ReadShareGroupStateSummary. An uninitialized key is not an error: it
// answers start offset -1, delivery-complete count -1 and epochs 0 (Kafka's
// readStateSummary). A leader epoch below the stored one is FENCED_LEADER_EPOCH; a higher
// one is not recorded. -1 skips the check.
func (s *Store) ReadSummary(ctx context.Context, k Key, leaderEpoch int32) (Summary, error) {
	r, err := s.run(k, ReadSummary{Key: k, LeaderEpoch: leaderEpoch})
	if err != nil {
		return Summary{}, err
	}
	rr := r.(SummaryReply)
	return rr.Summary, rr.Err
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
func (s *Store) Write(ctx context.Context, k Key, stateEpoch, leaderEpoch int32, startOffset int64, deliveryCompleteCount int64, batches []StateBatch) error {
	r, err := s.run(k, Write{Key: k, StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, StartOffset: startOffset,
		DeliveryCompleteCount: deliveryCompleteCount, Batches: batches, NowMs: s.nowMs()})
	if err != nil {
		return err
	}
	return r.(Done).Err
}

// Delete is DeleteShareGroupState: a tombstone on k's ShareSnapshot key. Deleting a key
// that has no state succeeds without writing; a key holding acknowledgements staged in
// an open transaction is refused (CONCURRENT_TRANSACTIONS).
func (s *Store) Delete(ctx context.Context, k Key) error {
	r, err := s.run(k, Delete{Key: k})
	if err != nil {
		return err
	}
	return r.(Done).Err
}

// each runs fn on the Core of every usable partition, in partition order, once what was
// queued before is committed.
func (s *Store) each(fn func(*Core)) {
	for idx := range s.cfg.NumPartitions {
		if d := s.parts[idx]; d != nil {
			d.inspect(fn)
		}
	}
}

// Keys lists the keys that have state, sorted (for tools and tests).
func (s *Store) Keys() []Key {
	var out []Key
	s.each(func(c *Core) { out = append(out, c.Keys()...) })
	slices.SortFunc(out, compareKeys)
	return out
}

// TxPendingRecords is the number of offsets TX_PENDING in the durable state of every key:
// acknowledgements staged in transactions whose marker has not been applied. It is right
// from the moment New replays the log, whether or not any share partition was loaded
// since (the broker's TX_PENDING gauge reads it). It does not queue.
func (s *Store) TxPendingRecords() int64 {
	var n int64
	for _, d := range s.parts {
		n += d.txPending.Load()
	}
	return n
}

// TxPendingByKey is TxPendingRecords per share-partition: the keys holding TX_PENDING
// offsets, with their counts.
func (s *Store) TxPendingByKey() map[Key]int64 {
	out := map[Key]int64{}
	s.each(func(c *Core) {
		for k, n := range c.TxPendingByKey() {
			out[k] = n
		}
	})
	return out
}

// Staging is one producer's acknowledgements staged (TX_PENDING) at one epoch on one
// __share_group_state partition, over every key of the partition.
type Staging struct {
	Partition  int32
	ProducerID int64
	Epoch      int16
	Records    int64 // TX_PENDING offsets
}

// Stagings lists the TX_PENDING stagings of the durable state, sorted by partition,
// producer id and epoch: what a restart must check with the transaction coordinator,
// since a marker that never reached the log leaves them pending for ever.
func (s *Store) Stagings() []Staging {
	var out []Staging
	s.each(func(c *Core) { out = append(out, c.Stagings()...) })
	return out
}

// DeleteTopics tombstones, durably, the state of every key whose topic id deleted reports
// true: the share state of deleted topics goes with them (Kafka's ShareCoordinatorShard.
// maybeCleanupShareState on a topic deletion), so a topic re-created with the same name
// starts clean and nothing of the old one is replayed after a restart. Unlike Delete it
// does not refuse keys with acknowledgements staged in an open transaction: the records
// are gone with the topic, and the transaction's marker then resolves nothing there. It
// returns the keys deleted; on error, those of the partitions done so far. deleted is
// called on the partitions' goroutines, one partition at a time.
func (s *Store) DeleteTopics(ctx context.Context, deleted func(topicID [16]byte) bool) ([]Key, error) {
	var out []Key
	for idx := range s.cfg.NumPartitions {
		d := s.parts[idx]
		if d == nil {
			continue
		}
		st, err := d.step(DeleteTopics{Deleted: deleted})
		if err != nil {
			return out, err
		}
		out = append(out, st.Reply.(DeleteTopicsReply).Keys...)
	}
	return out, nil
}

// ApplyMarker is the KIP-1289 marker path for one __share_group_state partition. In the
// partition's order of requests it resolves the TX_PENDING batches the marker ends (see
// CompleteTxn) and calls appendMarker, which must append the transaction's control batch
// to that partition and return once it is durable, after the records of the requests
// before it: the store's own records and the marker are in the same order in memory as
// in the log, so a replay reproduces exactly what was answered. If appendMarker fails the
// error is returned and the partition is replayed, so nothing the log lacks is resolved;
// the transaction coordinator retries the marker.
//
// It returns the keys whose batches changed, sorted, for the broker to update the live
// share-partitions.
func (s *Store) ApplyMarker(ctx context.Context, partition int32, pid int64, epoch int16, commit bool, appendMarker func(context.Context) error) ([]Key, error) {
	res, err := s.ApplyMarkerResult(ctx, partition, pid, epoch, commit, appendMarker)
	return res.Keys, err
}

// ApplyMarkerResult is ApplyMarker returning also how many offsets the marker resolved,
// for metrics.
func (s *Store) ApplyMarkerResult(ctx context.Context, partition int32, pid int64, epoch int16, commit bool, appendMarker func(context.Context) error) (MarkerResult, error) {
	d, err := s.driverOf(partition)
	if err != nil {
		return MarkerResult{}, err
	}
	st, err := d.marker(ctx, Marker{ProducerID: pid, Epoch: epoch, Commit: commit}, appendMarker)
	if err != nil {
		return MarkerResult{}, err
	}
	return st.Reply.(MarkerReply).Result, nil
}

// ApplyOrphanMarker is ApplyMarkerResult for a marker written again for acknowledgements
// staged by pid at stagedEpoch or below whose own marker never reached the log
// (Marker.Orphan): checked against the partition's state when it applies, it is not
// appended when nothing is staged that low any more, and is refused with ErrLaterStaging
// when it would resolve a later transaction's stagings too.
func (s *Store) ApplyOrphanMarker(ctx context.Context, partition int32, pid int64, epoch int16, commit bool, stagedEpoch int16, appendMarker func(context.Context) error) (MarkerResult, error) {
	d, err := s.driverOf(partition)
	if err != nil {
		return MarkerResult{}, err
	}
	st, err := d.marker(ctx, Marker{ProducerID: pid, Epoch: epoch, Commit: commit, Orphan: true, StagedEpoch: stagedEpoch}, appendMarker)
	if err != nil {
		return MarkerResult{}, err
	}
	r := st.Reply.(MarkerReply)
	return r.Result, r.Err
}

// CompleteTxn resolves, in memory, the TX_PENDING batches of the given partition staged by
// pid with an epoch <= epoch: on commit each takes its staged commit state (ACKNOWLEDGED,
// ARCHIVED or ARCHIVING), on abort its staged abort state (AVAILABLE, or ARCHIVED at the
// delivery limit); delivery counts are unchanged. It writes nothing: the marker in the log
// is the durable record of the outcome, and Load replays it the same way.
//
// The caller must have made the marker durable, and no Store write to the partition may
// be queued between the marker and this call, or memory and a replay could disagree;
// ApplyMarker provides exactly that ordering and is what the broker should call.
// CompleteTxn on an unknown partition resolves nothing.
func (s *Store) CompleteTxn(partition int32, pid int64, epoch int16, commit bool) []Key {
	d := s.parts[partition]
	if d == nil {
		return nil
	}
	st, err := d.marker(context.Background(), Marker{ProducerID: pid, Epoch: epoch, Commit: commit}, nil)
	if err != nil {
		return nil
	}
	return st.Reply.(MarkerReply).Result.Keys
}

// LastRedundantOffset is the offset below which partition's log holds nothing the store
// needs: the oldest latest-snapshot offset among its live keys, or the end of what it
// has seen when it has no keys. The broker prunes with DeleteRecords up to it (Kafka's
// ShareCoordinatorOffsetsManager, share.coordinator.state.topic.prune.interval.ms). ok is
// false when the partition is not loaded here.
//
// Pruning forgets the marker epochs below the offset, which only weakens the staging
// fence for producers whose last marker is that old.
func (s *Store) LastRedundantOffset(partition int32) (offset int64, ok bool) {
	d := s.parts[partition]
	if d == nil {
		return 0, false
	}
	ok = d.inspect(func(c *Core) { offset = c.LastRedundantOffset() })
	return offset, ok
}

// SnapshotCold writes a fresh ShareSnapshot, with unchanged state, for every key whose
// last snapshot is older than ColdSnapshotInterval, so idle keys do not hold
// LastRedundantOffset back (Kafka's snapshotColdPartitions). The broker calls it every
// ColdSnapshotInterval. It returns the number of snapshots written.
func (s *Store) SnapshotCold(ctx context.Context) (int, error) {
	n := 0
	now := s.nowMs()
	for idx := range s.cfg.NumPartitions {
		d := s.parts[idx]
		if d == nil {
			continue
		}
		st, err := d.step(Tick{NowMs: now})
		if err != nil {
			return n, err
		}
		n += st.Reply.(TickReply).ColdSnapshots
	}
	return n, nil
}

// Close stops the store: later calls answer NOT_COORDINATOR. It waits for the requests
// being committed; it does not close the partitions, which the broker owns.
func (s *Store) Close() {
	for _, d := range s.parts {
		d.stop()
	}
}
