// Package broker owns topics and partitions and serves the data-plane and topic-admin
// requests (produce, fetch, metadata, offsets, topic and config admin) for the wire server.
package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/wire"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/controller"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/compress"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/producerstate"
)

// FsyncPolicy says when the broker makes appended data durable.
type FsyncPolicy int

const (
	// FsyncAlways: acks=all is answered after the data is fsynced (many requests share one
	// fsync), and consumers only see fsynced data. The default.
	FsyncAlways FsyncPolicy = iota
	// FsyncNever leaves flushing to the OS, as Apache Kafka does by default: faster, but a
	// machine crash (not a process crash) can lose acknowledged records.
	FsyncNever
)

// Config is the broker's static configuration.
type Config struct {
	DataDir          string
	NodeID           int32
	AdvertisedHost   string
	AdvertisedPort   int32
	Rack             string
	AutoCreateTopics bool
	Fsync            FsyncPolicy
	// BrokerConfigs are broker-level overrides of topic defaults by their Kafka broker config
	// names (log.retention.ms, num.partitions, message.max.bytes, ...).
	BrokerConfigs map[string]string
	// TxnShareAckKey is the API key TxnShareAcknowledge (KIP-1289) is served at: 0 means
	// wire.TxnShareAcknowledgeDefaultKey (95), negative turns the feature off (not advertised).
	TxnShareAckKey int16
	// Voters are the metadata quorum's voters, node id → controller listener (Kafka's
	// controller.quorum.voters), this node among them. Nil, or this node alone without
	// a controller listener, is a lone voter: the zero-config node, which opens no
	// controller listener and is its own controller.
	Voters map[int32]string
	// ControllerListen is where the controller listener binds (raft messages and the
	// controller requests of the other brokers); ControllerListener is one already bound
	// (tests bind 127.0.0.1:0). Needed with other voters.
	ControllerListen   string
	ControllerListener net.Listener
	// HeartbeatInterval is broker.heartbeat.interval.ms (0 = 2 s): how often the broker
	// heartbeats to the controller. SessionTimeout is broker.session.timeout.ms (0 = 9 s):
	// how long this node's controller, while it leads, waits for a broker's heartbeat
	// before fencing it (its partitions leaderless).
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
	// HousekeepingInterval is how often retention and compaction run (Kafka's
	// log.retention.check.interval.ms, default 5 minutes).
	HousekeepingInterval time.Duration
	Now                  func() time.Time
	Logger               *slog.Logger
}

// Broker is a single exactq node.
type Broker struct {
	cfg    Config
	logger *slog.Logger
	now    func() time.Time
	lock   *dataDirLock
	dir    metaProperties // the data directory's identity (meta.json)
	meta   *node.Node     // the metadata log (metalog.go)
	pub    *publisher     // applies the metadata images to the registries (publisher.go)
	ctl    controllerClient
	driver *controller.Driver // this node's controller; it decides while this node leads
	// ctlTransport carries the controller requests to the other voters' controller
	// listeners; nil for a lone voter.
	ctlTransport *peer.TCP
	reg          *registration // with the controller (registration.go); nil until started
	// proposeFault, set only by tests, fails chosen metadata proposals before they reach
	// the log, to check what a failed commit point leaves behind.
	proposeFault atomic.Pointer[func([]wire.MetadataRecord) error]
	pids         *producerIDs
	topics       topics
	defaults     brokerDefaults

	// partitionCount is how many partition logs the broker has open (internal topics
	// included); changed by the publisher only. maxPartitions is max.broker.partitions
	// (limits.go), which the controller enforces.
	partitionCount atomic.Int64
	maxPartitions  int64
	// ratelog rate-limits log lines of failures that repeat per request (ratelog.go).
	ratelog *rateLog

	sessions *fetchSessions

	// txn verifies transactional produce requests; nil until the transaction coordinator
	// is wired, and transactional batches are refused meanwhile.
	txn     atomic.Pointer[txnVerifierBox]
	metrics *Metrics
	// groupCfg holds GROUP config resource overrides.
	groupCfg *groupConfigs
	// coord holds the coordinators, started on first use.
	coord coordinators
	// features holds the finalized feature levels (features.go).
	features *featureSet
	// producerState configures every partition's producer state; its Budget is shared by
	// all of them (producers.go).
	producerState producerstate.Config
	// decompression is the budget of produce-path decompression memory (produce.go).
	decompression *compress.Budget
	// cleanerKeys is compaction's key map, log.cleaner.dedupe.buffer.size at most, shared
	// by every partition's compaction (one at a time: housekeeping runs them in turn).
	cleanerKeys *log.KeyMap
	// onOffsetsMarker tells the group coordinator that a transaction marker reached a
	// __consumer_offsets partition, deciding its pending transactional offset commits.
	onOffsetsMarker atomic.Pointer[func(partition int32, pid int64, commit bool)]

	bg     sync.WaitGroup
	stop   chan struct{}
	closed bool
}

// Open opens (or initializes) the data directory, recovers every partition log and returns
// a broker ready to serve.
func Open(cfg Config) (*Broker, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("broker: DataDir is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HousekeepingInterval <= 0 {
		cfg.HousekeepingInterval = 5 * time.Minute
	}
	defaults, err := newBrokerDefaults(cfg.BrokerConfigs)
	if err != nil {
		return nil, err
	}
	if k := cfg.TxnShareAckKey; k > 0 {
		if _, taken := server.Kafka44[k]; taken {
			return nil, fmt.Errorf("TxnShareAcknowledge API key %d is a Kafka API key; pick an unused one (default %d)", k, wire.TxnShareAcknowledgeDefaultKey)
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	cleanerKeys, err := log.NewKeyMap(defaults.topic.LogCleanerDedupeBufferSize())
	if err != nil {
		return nil, err
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cleanerKeys: cleanerKeys,
		cfg:         cfg,
		logger:      cfg.Logger,
		now:         cfg.Now,
		lock:        lock,
		defaults:    defaults,
		stop:        make(chan struct{}),
		ratelog:     newRateLog(cfg.Logger, cfg.Now),

		maxPartitions: defaults.maxBrokerPartitions(),
		decompression: compress.NewBudget(defaults.topic.DecompressionBudgetBytes(),
			decompressionWait),
		topics: topics{
			dir:    cfg.DataDir,
			byName: map[string]*topic{},
			byID:   map[[16]byte]*topic{},
		},
	}
	b.producerState = b.producerStateConfig()
	b.sessions = newFetchSessions(b)
	b.metrics = newMetrics(b)
	if err := b.load(); err != nil {
		b.closeLogs()
		b.closeMetadataLog()
		lock.release()
		return nil, err
	}
	if err := b.startController(); err != nil {
		b.closeLogs()
		b.closeMetadataLog()
		lock.release()
		return nil, err
	}
	// The first producer-id block, before serving (see producerIDs).
	if err := b.pids.reserveFirst(); err != nil {
		b.storageError("reserve producer ids", err)
	}
	if err := b.loadCoordinatorsAtStart(); err != nil {
		b.closeCoordinators()
		b.closeLogs()
		b.closeMetadataLog()
		lock.release()
		return nil, err
	}
	b.resolveOrphanedStagings() // sharerecovery.go
	b.bg.Add(1)
	go b.housekeeping()
	return b, nil
}

// loadCoordinatorsAtStart loads the coordinators whose internal topics exist, before the
// broker serves. A cluster node loads them on first use only: they need every partition of
// their internal topics here, which placement spreads over the nodes (step 13).
func (b *Broker) loadCoordinatorsAtStart() error {
	if b.clustered() {
		return nil
	}
	if b.topics.get(shareGroupStateTopic) != nil {
		if _, err := b.shares(); err != nil {
			return err
		}
	}
	if b.topics.get(transactionStateTopic) != nil {
		_, err := b.txnCoordinator()
		return err
	}
	if b.topics.get(offsetsTopic) != nil {
		_, err := b.groupCoordinator()
		return err
	}
	return nil
}

func (b *Broker) load() error {
	var err error
	if b.dir, err = loadOrCreateMeta(b.cfg.DataDir, b.cfg.NodeID); err != nil {
		return err
	}
	if b.groupCfg, err = openGroupConfigs(b, b.cfg.BrokerConfigs); err != nil {
		return err
	}
	// The controller exists before the node opens: with other voters, the node's
	// controller listener hands it the other brokers' requests from the start.
	b.driver = b.newDriver()
	if err := b.openMetadataLog(); err != nil {
		return err
	}
	im, _ := b.image()
	b.features = openFeatures(b)
	b.pids = openProducerIDs(b, im)
	recs := topicsOf(im)
	// A lone voter's image holds its whole log at start (its stored commit index is raised
	// to its last entry). A cluster node's may be behind (a stale commit index, a log that
	// missed entries while it was down): its orphans are removed once the controller has
	// unfenced it, which it does only once the node applied its registration (publisher's
	// cleanup), so no data is deleted from a stale view.
	if !b.clustered() {
		if err := removeOrphanPartitionDirs(b.cfg.DataDir, recs); err != nil {
			return err
		}
	}
	// The publisher opens every partition of the current image (in parallel), before the
	// broker serves; a partition whose log does not open is offline, and retried.
	started := time.Now()
	b.pub = newPublisher(b)
	opened, follow := b.pub.start()
	offline := b.pub.offline // the goroutine owns it from here
	follow()
	clean := 0
	var scanned int64
	for _, p := range opened {
		r := p.log.Recovery()
		scanned += r.ScannedBytes
		if r.Clean {
			clean++
		}
	}
	if int64(len(opened)) > b.maxPartitions {
		b.logger.Warn("the broker hosts more partitions than max.broker.partitions: no new ones can be created",
			"partitions", len(opened), "max_broker_partitions", b.maxPartitions)
	}
	// clean: partitions whose clean-shutdown marker held (nothing read); scanned_bytes: log
	// data read and checked by recovery; took: logs and producer state.
	b.logger.Info("data directory loaded", "dir", b.cfg.DataDir, "cluster_id", b.ClusterID(), "topics", len(recs),
		"partitions", len(opened), "offline", offline, "max_broker_partitions", b.maxPartitions, "clean", clean,
		"scanned_bytes", scanned, "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// ClusterID is the cluster's id, from the metadata log's ClusterRecord.
func (b *Broker) ClusterID() string {
	im, _ := b.image()
	return im.Cluster.ID
}

// Close stops background work, makes every log durable and closes it.
func (b *Broker) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.pids != nil {
		b.pids.close() // a block fetched ahead needs the controller client, stopped next
	}
	// A controlled shutdown first: the controller fences this broker while it still
	// serves what it has.
	b.stopRegistration()
	// Then the publisher, which touches logs and coordinators: what the image says from
	// here on is done at the next start (orphan directories removed, new logs opened).
	b.stopPublisher()
	close(b.stop)
	b.closeCoordinators()
	err := b.closeLogs()
	b.bg.Wait()
	err = errors.Join(err, b.closeMetadataLog())
	b.lock.release()
	return err
}

func (b *Broker) stopRegistration() {
	if b.reg != nil {
		b.reg.shutdown()
	}
}

func (b *Broker) stopPublisher() {
	if b.pub != nil {
		b.pub.close()
	}
}

func (b *Broker) closeMetadataLog() error {
	b.stopRegistration()
	b.stopPublisher()
	if b.meta == nil {
		return nil
	}
	return b.meta.Close()
}

func (b *Broker) closeLogs() error {
	var parts []*partition
	for _, t := range b.topics.all() {
		ps, _ := t.snapshot()
		for _, p := range ps {
			if p != nil {
				parts = append(parts, p)
			}
		}
	}
	return errors.Join(parallel(len(parts), partitionWorkers, func(i int) error { return b.closePartition(parts[i]) })...)
}

// closePartition closes a partition at shutdown, logging a snapshot it could not save.
func (b *Broker) closePartition(p *partition) error {
	return p.close(func(err error) {
		b.storageError("producer-state snapshot", err, "topic", p.topic.name, "partition", p.index)
	})
}

// housekeeping runs retention and compaction on every partition periodically.
func (b *Broker) housekeeping() {
	defer b.bg.Done()
	tick := time.NewTicker(b.cfg.HousekeepingInterval)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			b.RunHousekeeping()
		}
	}
}

// RunHousekeeping applies retention and compaction to every partition once, forgets idle
// producers (producer.id.expiration.ms), which bounds producer-state memory, and prunes
// superseded share state.
func (b *Broker) RunHousekeeping() {
	b.pruneShareState()
	for _, t := range b.topics.all() {
		parts, settings := t.snapshot()
		for _, p := range parts {
			if p == nil {
				continue
			}
			p.mu.Lock()
			p.producers.Expire(b.now().UnixMilli())
			p.pruneAborted(p.log.StartOffset())
			p.mu.Unlock()
			if settings.log.Delete {
				if _, err := p.log.EnforceRetention(); err != nil {
					b.logger.Error("retention failed", "topic", t.name, "partition", p.index, "err", err)
				}
			}
			if settings.log.Compact {
				if err := p.log.Compact(b.cleanerKeys); err != nil {
					b.logger.Error("compaction failed", "topic", t.name, "partition", p.index, "err", err)
				}
			}
		}
	}
}

// producerSnapshotFile holds the partition's producer state and aborted-transaction index
// as of a clean shutdown, so a restart replays only the log written after it instead of the
// whole log.
const producerSnapshotFile = "producer-state.snapshot"

// partitionSnapshot is the content of producerSnapshotFile. Both parts are valid up to the
// producer state's EndOffset.
type partitionSnapshot struct {
	Producers []byte       `json:"producers"` // producerstate.Snapshot
	Aborted   []abortedTxn `json:"aborted"`
}

// rebuildProducerState restores the snapshot of the last clean shutdown, if any, and replays
// the log after it. The snapshot stays valid after a later crash: it covers only data that
// was durable when it was written, and recovery truncates only the unsynced tail.
func (p *partition) rebuildProducerState() error {
	from := p.log.StartOffset()
	var snap partitionSnapshot
	if err := readJSON(filepath.Join(p.log.Dir(), producerSnapshotFile), &snap); err == nil {
		st, err := producerstate.Restore(snap.Producers, p.producers.Config())
		if err == nil && st.EndOffset() <= p.log.EndOffset() {
			p.producers = st
			p.aborted = snap.Aborted
			from = max(from, st.EndOffset())
			p.snapshotCurrent = st.EndOffset() == p.log.EndOffset()
		}
	}
	// Headers only (and whole transaction markers): the replay needs nothing else, and
	// without a snapshot (after a crash) this reads the whole log. Not batch.Parse:
	// compaction leaves offset gaps that its producer-side rules reject, and the log has
	// already checked what it stores.
	err := p.log.ScanHeaders(from, func(h *kmsg.RecordBatch) error {
		if h.ProducerID < 0 {
			return nil
		}
		done, ok, err := p.producers.Replay(*h)
		if ok {
			p.noteCompleted(done)
		}
		return err
	})
	p.refreshUnstable()
	p.pruneAborted(p.log.StartOffset())
	return err
}

// writeProducerSnapshot saves the producer state after the log was closed (and so synced).
//
// It is not fsynced: it only saves start-up work, and every way a crash can leave it is
// safe. rebuildProducerState ignores a missing, torn or empty file (and replays the log
// from its start) and replays from an older snapshot's end, which covers only data that was
// durable when it was written; the log itself was made durable before this file is written.
// Two fsyncs per partition were half of the time a shutdown took.
//
// A partition with nothing to remember and nothing to replay (no producers, no aborted
// transactions, an empty log) gets no snapshot at all, and loses a stale one.
func (p *partition) writeProducerSnapshot() error {
	path := filepath.Join(p.log.Dir(), producerSnapshotFile)
	p.mu.Lock()
	empty := p.producers.NumProducers() == 0 && len(p.aborted) == 0 && p.log.EndOffset() == p.log.StartOffset()
	snap := partitionSnapshot{Aborted: p.aborted}
	if !empty {
		snap.Producers = p.producers.Snapshot()
	}
	p.mu.Unlock()
	if empty {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	return replaceFileNoSync(path, b)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("corrupt %s: %w", path, err)
	}
	return nil
}
