package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

// Broker is what the coordinator needs from the broker.
type Broker interface {
	// WriteMarkers appends a COMMIT/ABORT control batch for pid/epoch with
	// coordinatorEpoch to every partition and returns once they are durable, with an
	// error per failed partition (a deleted topic's partition is skipped with no error).
	WriteMarkers(ctx context.Context, pid int64, epoch int16, commit bool, coordinatorEpoch int32, parts []TopicPartition) map[TopicPartition]error
	PartitionExists(topic string, partition int32) bool
	AllocateProducerID() (int64, error)
}

// Config configures a Coordinator. Zero values take Kafka's defaults.
type Config struct {
	NumPartitions int32 // transaction.state.log.num.partitions (50)
	MaxTimeoutMs  int32 // transaction.max.timeout.ms (900000)
	// TwoPhaseCommitEnable is transaction.two.phase.commit.enable (false): whether
	// InitProducerId may ask for KIP-939 two-phase commit (Enable2Pc).
	TwoPhaseCommitEnable        bool
	AbortTimedOutIntervalMs     int64 // transaction.abort.timed.out.transaction.cleanup.interval.ms (10000)
	TransactionalIDExpirationMs int64 // transactional.id.expiration.ms (604800000, 7 days)
	RemoveExpiredIntervalMs     int64 // transaction.remove.expired.transaction.cleanup.interval.ms (3600000)
	// MarkerRetryBackoffMs is how long a failed marker write or Complete* append waits
	// before it is retried (100). It is also the period of the coordinator's ticker.
	MarkerRetryBackoffMs int64
	// AddRetryBackoffMaxMs bounds how long VerifyOrAdd(add=true) waits for a transaction
	// that is completing before answering CONCURRENT_TRANSACTIONS
	// (add.partitions.to.txn.retry.backoff.max.ms, 100).
	AddRetryBackoffMaxMs int64
	// CoordinatorEpoch goes on every marker (Kafka: the __transaction_state partition's
	// leader epoch). Partitions reject markers with an epoch lower than one they saw.
	CoordinatorEpoch int32
	// GroupPartition is the __consumer_offsets partition of a group (AddOffsetsToTxn).
	GroupPartition func(groupID string) TopicPartition
	Now            func() time.Time
	// After is the timer VerifyOrAdd waits on (time.After); tests inject their own.
	After  func(time.Duration) <-chan time.Time
	Logger *slog.Logger

	// ManualTicks starts no ticker goroutine: the caller drives marker retries, timeouts
	// and expiration with Tick, and waits for the background work a step started with
	// Quiesce. For deterministic tests and simulations only (the simulation in sim/ runs
	// the coordinator on a simulated clock this way); a broker leaves it false.
	ManualTicks bool
}

func (c *Config) defaults() {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.MaxTimeoutMs <= 0 {
		c.MaxTimeoutMs = 900000
	}
	if c.AbortTimedOutIntervalMs <= 0 {
		c.AbortTimedOutIntervalMs = 10000
	}
	if c.TransactionalIDExpirationMs <= 0 {
		c.TransactionalIDExpirationMs = 7 * 24 * 3600 * 1000
	}
	if c.RemoveExpiredIntervalMs <= 0 {
		c.RemoveExpiredIntervalMs = 3600000
	}
	if c.MarkerRetryBackoffMs <= 0 {
		c.MarkerRetryBackoffMs = 100
	}
	if c.AddRetryBackoffMaxMs <= 0 {
		c.AddRetryBackoffMaxMs = 100
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.After == nil {
		c.After = time.After
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Coordinator is the transaction coordinator's edge: it owns the pure core behind a
// mutex, persists transitions through coordlog, writes markers through the Broker, and
// runs a ticker for marker retries, transaction timeouts and id expiration.
//
// Handlers block until the state change the answer depends on is durable (one coordlog
// append), never on markers.
type Coordinator struct {
	cfg   Config
	b     Broker
	log   *slog.Logger
	parts map[int32]coordlog.Partition // fixed after New

	ctx    context.Context // cancelled by Close; marker writes use it
	cancel context.CancelFunc
	stop   chan struct{}
	loop   sync.WaitGroup // the ticker goroutine
	work   sync.WaitGroup // marker attempts, coordinator-initiated aborts, expirations

	mu   sync.Mutex
	core *core // guarded by mu
	// changed is closed (and replaced) whenever a transition completes; VerifyOrAdd waits
	// on it. Guarded by mu.
	changed          chan struct{}
	closed           bool  // guarded by mu
	lastAbortScanMs  int64 // guarded by mu
	lastExpireScanMs int64 // guarded by mu
}

// New loads every partition's transactions and starts the coordinator. Transactions left
// in PrepareCommit/PrepareAbort get their markers re-sent, then Complete* written, as
// Kafka does when it loads a __transaction_state partition.
func New(cfg Config, parts []coordlog.Partition, b Broker) (*Coordinator, error) {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg: cfg, b: b, log: cfg.Logger, parts: make(map[int32]coordlog.Partition, len(parts)),
		ctx: ctx, cancel: cancel, stop: make(chan struct{}),
		core: newCore(cfg.MaxTimeoutMs, cfg.TwoPhaseCommitEnable), changed: make(chan struct{}),
	}
	for _, p := range parts {
		if p.Index() < 0 || p.Index() >= cfg.NumPartitions {
			cancel()
			return nil, fmt.Errorf("txn: partition %d outside [0, %d)", p.Index(), cfg.NumPartitions)
		}
		c.parts[p.Index()] = p
		if err := p.Replay(func(s coordlog.Stored) error { return c.replay(p.Index(), s) }); err != nil {
			cancel()
			return nil, fmt.Errorf("txn: loading __transaction_state-%d: %w", p.Index(), err)
		}
	}
	now := c.nowMs()
	c.lastAbortScanMs, c.lastExpireScanMs = now, now
	c.mu.Lock()
	ids := make([]string, 0)
	for id, e := range c.core.entries {
		if e.meta.State == PrepareCommit || e.meta.State == PrepareAbort {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		job, err := c.core.beginMarkers(c.core.entries[id], now)
		if err != nil {
			c.mu.Unlock()
			cancel()
			return nil, err
		}
		c.log.Info("completing transaction found prepared at load", "transactional_id", id, "commit", job.commit, "partitions", len(job.remaining))
		c.startJob(job)
	}
	c.mu.Unlock()
	if !cfg.ManualTicks {
		c.loop.Add(1)
		go c.run()
	}
	return c, nil
}

func (c *Coordinator) replay(index int32, s coordlog.Stored) error {
	if s.Marker != nil {
		return nil
	}
	for _, r := range s.Records {
		id, meta, ok, err := decodeRecord(r.Key, r.Value)
		if err != nil {
			return err
		}
		if !ok {
			c.log.Warn("skipping __transaction_state record of unknown version", "partition", index, "offset", s.BaseOffset+int64(r.OffsetDelta))
			continue
		}
		c.core.load(id, meta)
	}
	return nil
}

// Close stops the ticker and waits for background work; later requests get
// NOT_COORDINATOR. Marker writes in flight are cancelled; the next New finishes them.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.cancel()
	c.loop.Wait()
	c.work.Wait()
}

// PartitionFor is the __transaction_state partition of a transactional id:
// Utils.abs(id.hashCode()) % NumPartitions with Java's String.hashCode over UTF-16.
func (c *Coordinator) PartitionFor(transactionalID string) int32 {
	return coordlog.PartitionFor(transactionalID, c.cfg.NumPartitions)
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

func (c *Coordinator) alloc() (int64, error) { return c.b.AllocateProducerID() }

// partition returns the coordlog partition owning id, or nil (NOT_COORDINATOR).
func (c *Coordinator) partition(id string) coordlog.Partition {
	return c.parts[c.PartitionFor(id)]
}

// usable reports the error every request for id gets before the core sees it.
func (c *Coordinator) usable(id string) int16 {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed || c.partition(id) == nil {
		return codeNotCoordinator
	}
	return 0
}

// notify wakes VerifyOrAdd waiters. Caller holds mu.
func (c *Coordinator) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// appendErrCode maps a failed coordlog append (TransactionStateManager.appendTransactionToLog).
func appendErrCode(err error) int16 {
	if errors.Is(err, coordlog.ErrClosed) {
		return codeNotCoordinator
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return codeCoordinatorNotAvailable
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return codeNotCoordinator
		}
		return codeUnknownServerError
	}
	return codeCoordinatorNotAvailable
}

// persist appends t and applies it once durable. On failure the id returns to its
// previous state, unless keepPending (a Complete* append, retried until it lands).
func (c *Coordinator) persist(ctx context.Context, t *transit, keepPending bool) int16 {
	p := c.partition(t.id)
	var err error
	if p == nil {
		err = coordlog.ErrClosed
	} else {
		// The append must finish even if the client goes away: the log and the cache
		// must agree on whether it happened.
		_, err = p.Append(context.WithoutCancel(ctx), coordlog.Batch{Records: []kmsg.Record{record(t)}, ProducerID: -1})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.log.Warn("appending transaction state failed", "transactional_id", t.id, "state", t.meta.State, "err", err)
		if !keepPending {
			c.core.failed(t)
		}
		return appendErrCode(err)
	}
	if err := c.core.completed(t); err != nil {
		c.log.Error("applying transaction state", "transactional_id", t.id, "err", err)
		return codeUnknownServerError
	}
	c.notify()
	return 0
}

// decide persists a Prepare* transit and starts its markers. It returns the job (whose
// complete transit holds the producer id and epoch the client continues with).
func (c *Coordinator) decide(ctx context.Context, t *transit) (int16, *markerJob) {
	if code := c.persist(ctx, t, false); code != 0 {
		return code, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.core.entries[t.id]
	if e == nil {
		return codeNotCoordinator, nil
	}
	job, err := c.core.beginMarkers(e, c.nowMs())
	if err != nil {
		c.log.Error("starting markers", "transactional_id", t.id, "err", err)
		return codeUnknownServerError, nil
	}
	c.startJob(job)
	return 0, job
}

// startJob runs one marker attempt in the background. Caller holds mu.
func (c *Coordinator) startJob(job *markerJob) {
	if c.closed || job.running {
		return
	}
	job.running = true
	job.attempts++
	c.work.Add(1)
	go c.runJob(job)
}

// permanentMarkerError reports marker errors after which the partition needs no marker:
// Kafka drops the partition for UNSUPPORTED_FOR_MESSAGE_FORMAT/UNSUPPORTED_VERSION, and
// exactq also for INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED (a newer epoch
// already closed the transaction there). Kafka instead stops sending the whole
// transaction's markers on those two, which leaves it in Prepare* until the coordinator
// reloads; finishing is the same outcome without the wedge.
func permanentMarkerError(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnsupportedForMessageFormat, kerr.UnsupportedVersion, kerr.InvalidProducerEpoch, kerr.TransactionCoordinatorFenced:
			return true
		}
	}
	return false
}

func (c *Coordinator) runJob(job *markerJob) {
	defer c.work.Done()
	c.mu.Lock()
	parts := slices.Clone(job.remaining)
	c.mu.Unlock()
	retry := func() {
		c.mu.Lock()
		job.running = false
		job.retryAtMs = c.nowMs() + c.cfg.MarkerRetryBackoffMs
		c.mu.Unlock()
	}
	if len(parts) > 0 {
		errs := c.b.WriteMarkers(c.ctx, job.pid, job.epoch, job.commit, c.cfg.CoordinatorEpoch, parts)
		var done []TopicPartition
		for _, tp := range parts {
			err := errs[tp]
			if err != nil && permanentMarkerError(err) {
				c.log.Warn("transaction marker not needed", "transactional_id", job.id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
				err = nil
			}
			if err == nil {
				done = append(done, tp)
			} else {
				c.log.Info("transaction marker failed; will retry", "transactional_id", job.id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		}
		c.mu.Lock()
		allDone := c.core.markersWritten(job, done)
		c.mu.Unlock()
		if !allDone {
			retry()
			return
		}
	}
	// Every marker is durable: the transaction is complete.
	if code := c.persist(c.ctx, job.complete, true); code != 0 {
		retry()
		return
	}
	c.mu.Lock()
	job.running = false
	c.mu.Unlock()
}

func (c *Coordinator) run() {
	defer c.loop.Done()
	t := time.NewTicker(time.Duration(c.cfg.MarkerRetryBackoffMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.tick()
		}
	}
}

// Tick runs the ticker's body once, at Config.Now: due marker retries, timed-out
// transaction aborts and id expiration. It is for Config.ManualTicks callers; with the
// ticker running it only does early what the ticker would do next.
func (c *Coordinator) Tick() { c.tick() }

// Quiesce waits until the background work started so far (marker writes and their
// Complete* appends, coordinator-initiated aborts, expirations) is done. It is for
// Config.ManualTicks callers that drive the coordinator from one goroutine: work started
// while Quiesce waits (by a request or Tick on another goroutine) may or may not be
// waited for.
func (c *Coordinator) Quiesce() { c.work.Wait() }

// tick retries due marker jobs, aborts timed-out transactions every
// AbortTimedOutIntervalMs and expires idle ids every RemoveExpiredIntervalMs.
func (c *Coordinator) tick() {
	now := c.nowMs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for _, e := range c.core.entries {
		if j := e.markers; j != nil && !j.running && j.retryAtMs <= now {
			c.startJob(j)
		}
	}
	if now-c.lastAbortScanMs >= c.cfg.AbortTimedOutIntervalMs {
		c.lastAbortScanMs = now
		for _, id := range c.core.timedOut(now) {
			t, code := c.core.fenceAbort(c.core.entries[id], now, c.alloc)
			if code != 0 {
				c.log.Warn("aborting timed-out transaction", "transactional_id", id, "err", kerr.ErrorForCode(code))
				continue
			}
			c.log.Info("aborting timed-out transaction", "transactional_id", id, "producer_id", t.meta.ProducerID, "epoch", t.meta.ProducerEpoch)
			c.work.Add(1)
			go func() {
				defer c.work.Done()
				c.decide(c.ctx, t)
			}()
		}
	}
	if now-c.lastExpireScanMs >= c.cfg.RemoveExpiredIntervalMs {
		c.lastExpireScanMs = now
		byPart := make(map[int32][]*transit)
		for _, t := range c.core.expired(now, c.cfg.TransactionalIDExpirationMs) {
			p := c.PartitionFor(t.id)
			byPart[p] = append(byPart[p], t)
		}
		for p, ts := range byPart {
			c.work.Add(1)
			go c.writeTombstones(c.parts[p], ts)
		}
	}
}

func (c *Coordinator) writeTombstones(p coordlog.Partition, ts []*transit) {
	defer c.work.Done()
	recs := make([]kmsg.Record, len(ts))
	for i, t := range ts {
		recs[i] = record(t)
	}
	_, err := p.Append(c.ctx, coordlog.Batch{Records: recs, ProducerID: -1})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		if err != nil {
			c.core.failed(t)
			continue
		}
		c.log.Info("transactional id expired", "transactional_id", t.id)
		if err := c.core.completed(t); err != nil {
			c.log.Error("expiring transactional id", "transactional_id", t.id, "err", err)
		}
	}
	if err == nil {
		c.notify()
	}
}
