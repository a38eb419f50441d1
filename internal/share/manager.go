package share

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
)

// Logs is what the share path needs from the broker's partition logs (the broker
// implements it over its partitions; tests use an in-memory fake).
//
// Errors wrap the *kerr.Error of the Kafka code they mean: kerr.UnknownTopicID or
// kerr.UnknownTopicOrPartition for a partition that does not exist, kerr.OffsetOutOfRange
// when offset is below the log start (retention, DeleteRecords), anything else is
// reported to the client as KAFKA_STORAGE_ERROR.
type Logs interface {
	// Read returns whole record batches starting with the one containing offset (KIP-74:
	// the first batch whole even if larger than maxBytes), never a batch whose base offset
	// is at or past maxOffset, the high watermark (read_uncommitted) or the last stable
	// offset (read_committed); plus the high watermark, the LSO, the log start offset and,
	// for read_committed, the aborted transactions (producer id, first offset) overlapping
	// the read. An offset at or past the end of what may be read returns no records and no
	// error.
	Read(topicID [16]byte, partition int32, offset int64, maxBytes int32, maxOffset int64, readCommitted bool) (ReadResult, error)
	// Watch signals ch (non-blocking) whenever the partition's high watermark or LSO
	// advances; the returned func unregisters. ShareFetch long polls use it.
	Watch(topicID [16]byte, partition int32, ch chan struct{}) (unwatch func())
	// ListOffset answers like ListOffsets for share.auto.offset.reset: timestampMs -2 is
	// the log start offset, -1 the high watermark, otherwise the first offset whose
	// timestamp is at or after timestampMs, or -1 when there is none.
	ListOffset(topicID [16]byte, partition int32, timestampMs int64) (int64, error)
	// TopicName resolves a topic id; false when no such topic exists.
	TopicName(id [16]byte) (string, bool)
}

// ReadResult is what Logs.Read returns.
type ReadResult struct {
	// Records is nil when nothing was read. Otherwise whoever holds it must Release it or
	// hand it on (a FetchResponse does).
	Records          Records
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	Aborted          []sharepartition.AbortedTxn // read_committed only
}

// Records is a log read: whole record batches, as stored. The broker keeps them in its
// segment files (zero copy) until the response carrying them is written; the share path
// looks only at their headers (Batches), keeps the part that holds the acquired records
// (Slice) and hands that to the response.
type Records interface {
	// Len is the length in bytes.
	Len() int64
	// Batches describes the batches in log order.
	Batches() ([]ReadBatch, error)
	// Slice narrows the records to bytes [from, to) (batch boundaries, from Batches) and
	// releases the rest.
	Slice(from, to int64)
	// AppendTo appends a copy of the bytes to dst.
	AppendTo(dst []byte) ([]byte, error)
	// Release gives the read back (files may close); once, and never after handing it on.
	Release()
}

// ReadBatch is one batch of a Records: what Acquire needs to know of it, and where it is.
type ReadBatch struct {
	sharepartition.FetchedBatch
	Pos, Len int64 // bytes [Pos, Pos+Len) of the Records
}

// GroupConfig holds a share group's effective settings (group configs resolved against the
// broker's defaults and clamped to its min/max, by the broker). Zero numbers and empty
// strings take Kafka 4.4's defaults; the booleans are taken as given.
type GroupConfig struct {
	AutoOffsetReset         string // share.auto.offset.reset: latest (default), earliest, by_duration:<ISO-8601>
	IsolationLevel          string // share.isolation.level: read_uncommitted (default) or read_committed
	RecordLockDurationMs    int32  // share.record.lock.duration.ms (30000)
	DeliveryCountLimit      int32  // share.delivery.count.limit (5)
	PartitionMaxRecordLocks int32  // share.partition.max.record.locks (2000)
	RenewAcknowledgeEnable  bool   // share.renew.acknowledge.enable (true; the zero value is false)
}

// DefaultGroupConfig returns Kafka 4.4's defaults.
func DefaultGroupConfig() GroupConfig {
	return GroupConfig{
		AutoOffsetReset:         "latest",
		IsolationLevel:          "read_uncommitted",
		RecordLockDurationMs:    30000,
		DeliveryCountLimit:      5,
		PartitionMaxRecordLocks: 2000,
		RenewAcknowledgeEnable:  true,
	}
}

func (g GroupConfig) partitionConfig() sharepartition.Config {
	c := sharepartition.DefaultConfig()
	if g.RecordLockDurationMs > 0 {
		c.RecordLockDurationMs = int64(g.RecordLockDurationMs)
	}
	if g.DeliveryCountLimit > 0 {
		c.DeliveryCountLimit = int16(min(g.DeliveryCountLimit, 1<<15-1))
	}
	if g.PartitionMaxRecordLocks > 0 {
		c.MaxInFlightRecords = int64(g.PartitionMaxRecordLocks)
	}
	c.RenewEnabled = g.RenewAcknowledgeEnable
	return c
}

func (g GroupConfig) readCommitted() bool { return g.IsolationLevel == "read_committed" }

// Config configures a Manager.
type Config struct {
	// Groups returns a share group's effective configs; it is read on every fetch, so
	// dynamic changes apply from the next one. Nil: DefaultGroupConfig for every group.
	Groups func(groupID string) GroupConfig
	// MaxShareSessions is group.share.max.share.sessions (default 2000).
	MaxShareSessions int
	// MaxFetchBytes is the broker's fetch.max.bytes (default 55 MiB); it caps a request's
	// MaxBytes.
	MaxFetchBytes int32
	// MaxWait caps a request's MaxWaitMs (default 5 minutes).
	MaxWait time.Duration
	// Now is the clock (default time.Now). Lock deadlines are Now in Unix milliseconds.
	Now func() time.Time
	// NewTimer makes the timers of long polls, of the SHARE_SESSION_LIMIT_REACHED delay
	// and of the lock-expiry goroutine (default time.NewTimer). Tests inject a fake clock
	// through Now and NewTimer.
	NewTimer func(d time.Duration) Timer
	// ManualTick starts no lock-expiry goroutine: the caller calls Tick (tests).
	ManualTick bool
	// OrphanCheckInterval is how often, once the broker has called
	// ResolveOrphanedStagings, the Manager checks the TX_PENDING stagings with the
	// transaction coordinator again, so a staging whose marker was lost is resolved
	// while the broker runs (default 30 s; a share partition loading with TX_PENDING
	// records also starts a check).
	OrphanCheckInterval time.Duration
	// TxnMemberCheck is TxnShareAcknowledge's member check (decision D7): nil when the
	// member exists in share group groupID with exactly memberEpoch, else the error to
	// answer at the top level (kerr.FencedMemberEpoch for a stale or future epoch,
	// kerr.UnknownMemberID for an unknown member). The broker sets it to a call into the
	// share-group coordinator. Nil: no check here, and the broker must check before
	// calling TxnShareAcknowledge.
	TxnMemberCheck func(ctx context.Context, groupID, memberID string, memberEpoch int32) error
	Logger         *slog.Logger
}

// Timer is the part of *time.Timer the Manager uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

func (c *Config) defaults() {
	if c.Groups == nil {
		c.Groups = func(string) GroupConfig { return DefaultGroupConfig() }
	}
	if c.MaxShareSessions <= 0 {
		c.MaxShareSessions = 2000
	}
	if c.MaxFetchBytes <= 0 {
		c.MaxFetchBytes = 55 << 20
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 5 * time.Minute
	}
	if c.OrphanCheckInterval <= 0 {
		c.OrphanCheckInterval = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewTimer == nil {
		c.NewTimer = func(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// leaderEpoch is this single node's leader epoch for every partition, as in package
// broker; the share-state store fences writers by it once clustering moves leaders.
const leaderEpoch = 0

// Manager is the share-fetch path of one broker: the share sessions, the live share
// partitions (loaded lazily from the share-state store), their persistence and their
// acquisition-lock timer.
//
// Locking: m.mu guards the partition and session maps; each partition's mu guards its
// SharePartition and is never held while waiting for a store write or a log watch. Lock
// order is m.mu before partition.mu; the timer heap has its own lock, taken last.
type Manager struct {
	cfg   Config
	logs  Logs
	store *sharestate.Store

	mu       sync.Mutex
	parts    map[sharestate.Key]*partition
	sessions sessionCache
	closed   bool

	timers  timerHeap
	txn     txnCounters
	orphans orphanRecovery

	writes sync.WaitGroup // in-flight store writes
	stop   chan struct{}
	done   chan struct{}
}

// NewManager returns a Manager over the broker's logs and the share-state store, and
// starts its lock-expiry goroutine unless cfg.ManualTick.
func NewManager(cfg Config, logs Logs, store *sharestate.Store) *Manager {
	cfg.defaults()
	m := &Manager{
		cfg:      cfg,
		logs:     logs,
		store:    store,
		parts:    make(map[sharestate.Key]*partition),
		sessions: newSessionCache(cfg.MaxShareSessions),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	m.timers.init()
	m.orphans.kick = make(chan struct{}, 1)
	if cfg.ManualTick {
		close(m.done)
	} else {
		go m.timerLoop()
	}
	return m
}

// Close stops the timer goroutine and waits for the store writes already started. Live
// share partitions are dropped; their acquired records come back AVAILABLE on the next
// load, exactly as after a crash.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	m.orphans.loop.Wait()
	m.writes.Wait()
}

func (m *Manager) nowMs() int64 { return m.cfg.Now().UnixMilli() }

// partition is one live share partition: a SharePartition and what drives it.
type partition struct {
	key sharestate.Key
	m   *Manager

	mu sync.Mutex
	sp *sharepartition.SharePartition // nil until loaded
	// dropped is set when the instance is no longer the live one (a store write failed,
	// the state was re-initialized): holders must look the partition up again.
	dropped bool
	// tail is closed when the last enqueued store write has finished; every write waits
	// for its predecessor, so a partition's Updates reach the store in the order they
	// were produced.
	tail chan struct{}
	// failed is the first failed write's error, set before its done channel closes;
	// later writes of this instance are not attempted.
	failed error
	// waiters are long-polling fetches to wake when records may have become acquirable.
	waiters map[chan struct{}]struct{}

	// heapIdx and deadlineMs are owned by the timer heap (its lock).
	heapIdx    int
	deadlineMs int64
}

// errRetryLookup says a partition instance was dropped while being waited for.
var errRetryLookup = errors.New("share: partition instance dropped")

// lockedPartition returns the live partition for key, loaded and locked. The caller
// unlocks p.mu. Errors are Kafka errors for the partition's response.
func (m *Manager) lockedPartition(key sharestate.Key) (*partition, error) {
	for range 3 {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, kerr.NotLeaderForPartition
		}
		p := m.parts[key]
		if p == nil {
			p = &partition{key: key, m: m, heapIdx: -1}
			closedCh := make(chan struct{})
			close(closedCh)
			p.tail = closedCh
			m.parts[key] = p
		}
		m.mu.Unlock()

		p.mu.Lock()
		if p.dropped {
			p.mu.Unlock()
			continue
		}
		if p.sp == nil {
			if err := m.load(p); err != nil {
				p.dropped = true
				p.mu.Unlock()
				m.forget(p)
				return nil, err
			}
		}
		return p, nil
	}
	return nil, kerr.CoordinatorNotAvailable
}

// forget removes p from the live map if it is still the live instance.
func (m *Manager) forget(p *partition) {
	m.mu.Lock()
	if m.parts[p.key] == p {
		delete(m.parts, p.key)
	}
	m.mu.Unlock()
	m.timers.remove(p)
}

// load reads the partition's persisted state (Kafka's SharePartition.maybeInitialize): an
// uninitialized start offset is resolved with share.auto.offset.reset; ACQUIRED never
// comes back (it is never persisted) and offsets acquired but never persisted become
// acquirable gaps (sharepartition.Restore). Called with p.mu held.
func (m *Manager) load(p *partition) error {
	k := p.key
	// The partition must exist in the log; this also gives Kafka's per-partition
	// UNKNOWN_TOPIC_OR_PARTITION before the store is asked.
	logStart, err := m.logs.ListOffset(k.TopicID, k.Partition, -2)
	if err != nil {
		return logError(err)
	}
	st, err := m.store.Read(context.Background(), k, leaderEpoch)
	if err != nil {
		m.cfg.Logger.Warn("share partition load failed", "key", k.String(), "err", err)
		return persisterError(err)
	}
	gc := m.cfg.Groups(k.GroupID)
	pc := gc.partitionConfig()
	if st.StartOffset < 0 {
		start, err := m.resolveReset(k, gc, logStart)
		if err != nil {
			return err
		}
		sp, err := sharepartition.New(pc, start, st.StateEpoch)
		if err != nil {
			m.cfg.Logger.Error("share partition create failed", "key", k.String(), "err", err)
			return kerr.UnknownServerError
		}
		p.sp = sp
		return nil
	}
	for _, b := range st.Batches {
		if b.DeliveryState == sharestate.StateTxPending {
			// Its marker may have been lost while the partition was not loaded: check
			// with the coordinator now rather than at the next interval.
			m.kickOrphanCheck()
			break
		}
	}
	sp, err := sharepartition.RestoreFrom(pc, st.StartOffset, st.StateEpoch, fromStoreBatches(st.Batches))
	if err != nil {
		m.cfg.Logger.Error("share partition restore failed", "key", k.String(), "err", err)
		return kerr.UnknownServerError
	}
	// Retention may have moved the log start past what was persisted.
	if logStart > sp.StartOffset() {
		sp.AdvanceLogStart(logStart)
	}
	p.sp = sp
	return nil
}

// resolveReset applies share.auto.offset.reset (Kafka's startOffsetDuringInitialization).
func (m *Manager) resolveReset(k sharestate.Key, gc GroupConfig, logStart int64) (int64, error) {
	strategy := gc.AutoOffsetReset
	if strategy == "" {
		strategy = "latest"
	}
	r, err := sharepartition.ParseAutoOffsetReset(strategy)
	if err != nil {
		m.cfg.Logger.Warn("invalid share.auto.offset.reset, using latest", "group", k.GroupID, "value", strategy)
		r = sharepartition.AutoOffsetReset{Kind: sharepartition.ResetLatest}
	}
	end, err := m.logs.ListOffset(k.TopicID, k.Partition, -1)
	if err != nil {
		return 0, logError(err)
	}
	var tsErr error
	start := r.Resolve(logStart, end, m.nowMs(), func(ts int64) int64 {
		o, err := m.logs.ListOffset(k.TopicID, k.Partition, ts)
		if err != nil {
			tsErr = err
			return -1
		}
		return o
	})
	if tsErr != nil {
		return 0, logError(tsErr)
	}
	return start, nil
}

// persisterError maps a share-state store error as SharePartition.fetchPersisterError does.
func persisterError(err error) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError
	}
	switch ke {
	case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
		return kerr.CoordinatorNotAvailable
	case kerr.GroupIDNotFound, kerr.UnknownTopicOrPartition:
		return ke
	case kerr.FencedLeaderEpoch, kerr.FencedStateEpoch:
		return kerr.NotLeaderForPartition
	default:
		return kerr.UnknownServerError
	}
}

// logError maps a Logs error to the partition's error code.
func logError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.KafkaStorageError
}

// errCode returns the Kafka code of err (0 for nil).
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errMessage returns err's message for the response's nullable message field.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// write is one store write of a partition, ordered after the previous one.
type write struct {
	done chan struct{}
	err  error // valid after done is closed
}

// wait blocks until the write is durable or failed. It does not give up on ctx: the
// caller's answer depends on the outcome.
func (w *write) wait() error {
	if w == nil {
		return nil
	}
	<-w.done
	return w.err
}

// persist reschedules p's lock timer after a step and starts writing the step's Update
// to the store after the partition's previous writes; it returns nil when there is
// nothing to write. Called with p.mu held, right after the step that produced u.
func (p *partition) persist(u sharepartition.Update) *write {
	return p.persistOr(u, nil)
}

// persistOr is persist with a handler for a failed write: called with p.mu held, it
// returns the error to answer and true when it dealt with the failure and the instance
// stays live (the write certainly did not happen and memory was put back to match the
// store); false falls back to dropping the instance.
func (p *partition) persistOr(u sharepartition.Update, onFail func(err error) (error, bool)) *write {
	p.reportRefusals()
	p.m.timers.schedule(p)
	if u.Empty() {
		return nil
	}
	prev := p.tail
	w := &write{done: make(chan struct{})}
	p.tail = w.done
	p.m.writes.Add(1)
	go func() {
		defer p.m.writes.Done()
		defer close(w.done)
		<-prev
		p.mu.Lock()
		failed := p.failed
		p.mu.Unlock()
		if failed != nil {
			w.err = failed
			return
		}
		// Not the request's context: a client hanging up must not leave the outcome of a
		// write unknown.
		err := p.m.store.Write(context.Background(), p.key, u.StateEpoch, leaderEpoch, u.StartOffset,
			u.DeliveryCompleteCount, ToStoreBatches(u.Batches))
		if err == nil {
			return
		}
		p.mu.Lock()
		if onFail != nil && !p.dropped && p.failed == nil {
			if werr, kept := onFail(err); kept {
				p.mu.Unlock()
				p.m.cfg.Logger.Warn("share state write refused; share partition kept", "key", p.key.String(), "err", err)
				w.err = werr
				return
			}
		}
		p.m.cfg.Logger.Error("share state write failed; dropping the share partition", "key", p.key.String(), "err", err)
		w.err = persisterError(err)
		if p.failed == nil {
			p.failed = w.err
		}
		// The store is the truth: the next use reloads from it (sharepartition doc,
		// step 3). Memory is not rolled back.
		p.dropped = true
		p.wake()
		p.mu.Unlock()
		p.m.forget(p)
	}()
	return w
}

// reportRefusals logs the record-state changes the share partition's transition table
// refused since the last report (sharepartition.TakeRefusals). The refused records kept
// their state, so memory and the store still agree, but a step did not do all it meant
// to: that is a bug worth an error in the log. Called with p.mu held after every step.
func (p *partition) reportRefusals() {
	if n, err := p.sp.TakeRefusals(); n > 0 {
		p.m.cfg.Logger.Error("share partition refused record state changes", "key", p.key.String(), "refused", n, "last", err)
	}
}

// persistAndWake is persist for steps that may have made records acquirable (acks,
// releases, lock expiry, log start moves): long polls waiting on p are woken.
func (p *partition) persistAndWake(u sharepartition.Update) *write {
	p.wake()
	return p.persist(u)
}

// wake signals every long poll waiting on p. Called with p.mu held.
func (p *partition) wake() {
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (p *partition) addWaiter(ch chan struct{}) {
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = make(map[chan struct{}]struct{})
	}
	p.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) removeWaiter(ch chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, ch)
	p.mu.Unlock()
}

// ToStoreBatches converts a SharePartition Update's ranges to the store's shape. A
// TX_PENDING range's commit and abort states are the ones decided at staging
// (sharepartition.StateBatch.StagedDeliveryState and StagedAbortState, decision D5), so
// the store resolves a marker exactly as the live partition does. It is exported for the
// simulation (sim), which wires a share partition to a store as the Manager does.
func ToStoreBatches(in []sharepartition.StateBatch) []sharestate.StateBatch {
	out := make([]sharestate.StateBatch, len(in))
	for i, b := range in {
		sb := sharestate.StateBatch{
			FirstOffset:   b.FirstOffset,
			LastOffset:    b.LastOffset,
			DeliveryState: int8(b.DeliveryState),
			DeliveryCount: b.DeliveryCount,
		}
		if b.DeliveryState == sharepartition.TxPending {
			sb.TxnProducerID = b.StagedProducerID
			sb.TxnProducerEpoch = b.StagedProducerEpoch
			sb.TxnAckType = int8(b.StagedAckType)
			if b.StagedDeliveryState >= 0 {
				sb.TxnCommitState = int8(b.StagedDeliveryState)
			}
			sb.TxnAbortState = sharestate.StateAvailable
			if b.StagedAbortState == sharepartition.Archived {
				sb.TxnAbortState = sharestate.StateArchived
			}
		}
		out[i] = sb
	}
	return out
}

// FromStoreState converts the store's state to a SharePartition snapshot (the inverse of
// ToStoreBatches; exported for the simulation too).
func FromStoreState(st sharestate.State) sharepartition.Snapshot {
	snap := sharepartition.Snapshot{
		StartOffset:           st.StartOffset,
		StateEpoch:            st.StateEpoch,
		DeliveryCompleteCount: st.DeliveryCompleteCount,
		Batches:               make([]sharepartition.StateBatch, 0, len(st.Batches)),
	}
	snap.Batches = slices.AppendSeq(snap.Batches, fromStoreBatches(st.Batches))
	return snap
}

// fromStoreBatches converts the store's batches one at a time, for
// sharepartition.RestoreFrom: a load then holds no converted copy of them all.
func fromStoreBatches(in []sharestate.StateBatch) iter.Seq[sharepartition.StateBatch] {
	return func(yield func(sharepartition.StateBatch) bool) {
		for _, b := range in {
			if !yield(fromStoreBatch(b)) {
				return
			}
		}
	}
}

func fromStoreBatch(b sharestate.StateBatch) sharepartition.StateBatch {
	sb := sharepartition.StateBatch{
		FirstOffset:         b.FirstOffset,
		LastOffset:          b.LastOffset,
		DeliveryState:       sharepartition.State(b.DeliveryState),
		DeliveryCount:       b.DeliveryCount,
		StagedProducerID:    -1,
		StagedProducerEpoch: -1,
		StagedAckType:       -1,
		StagedDeliveryState: -1,
		StagedAbortState:    -1,
	}
	if b.DeliveryState == sharestate.StateTxPending {
		sb.StagedProducerID = b.TxnProducerID
		sb.StagedProducerEpoch = b.TxnProducerEpoch
		sb.StagedAckType = sharepartition.AckType(b.TxnAckType)
		sb.StagedDeliveryState = sharepartition.State(b.TxnCommitState)
		sb.StagedAbortState = sharepartition.State(b.TxnAbortState)
	}
	return sb
}
