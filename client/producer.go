package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProducerConfig configures a Producer. The zero value of every field but Brokers selects
// its default.
type ProducerConfig struct {
	Brokers []string
	Net     NetConfig

	// Linger is how long a partition's batch waits for more records before it is sent.
	// Zero sends as soon as the partition may send; records still batch up while the
	// partition's earlier batches are in flight.
	Linger time.Duration
	// BatchMaxBytes bounds one batch's uncompressed size (estimated). A single larger
	// record goes alone in its batch. Default 1,000,000 (under the broker's default
	// max.message.bytes of 1,048,588).
	BatchMaxBytes int32
	Compression   Compression
	Acks          Acks
	// DisableIdempotence turns idempotence off. Idempotence is on by default, and off
	// whenever Acks is not AcksAll (as in the Java client).
	DisableIdempotence bool
	// Retries bounds resends of one batch. Zero: no bound but DeliveryTimeout. Negative:
	// never resend.
	Retries int
	// DeliveryTimeout bounds the time from a record's Produce to its callback. Default 2m.
	DeliveryTimeout time.Duration
	// MaxInFlight bounds produce requests in flight per broker; at most 5 with
	// idempotence (the broker's duplicate window). Default 5.
	MaxInFlight int
	// Partitioner defaults to DefaultPartitioner().
	Partitioner Partitioner
	// MaxBufferedBytes bounds the records (key, value, headers) waiting for a response;
	// Produce blocks while it is exceeded. Default 64 MiB.
	MaxBufferedBytes int64
	// DisableAutoTopicCreation stops the producer from asking the broker to create unknown
	// topics in its Metadata requests. By default it asks, as the Java client
	// (allow.auto.create.topics) and kcat do; the broker's auto.create.topics.enable still
	// decides.
	DisableAutoTopicCreation bool
	// UnknownTopicRetries is how many metadata refreshes Produce tries for a topic the
	// broker does not know before failing the record. Default 4.
	UnknownTopicRetries int

	// TransactionalID makes the producer transactional (it requires idempotence): records
	// are produced inside BeginTransaction ... CommitTransaction or AbortTransaction. See
	// txn.go for the transaction methods.
	TransactionalID string
	// TransactionTimeout is how long the coordinator lets a transaction stay open before
	// aborting it. Default 1m (Kafka's transaction.timeout.ms). Not used with Enable2PC.
	TransactionTimeout time.Duration
	// Enable2PC makes the producer a KIP-939 two-phase-commit participant: InitProducerId is
	// sent with Enable2Pc, the coordinator never times the transaction out, and
	// PrepareTransaction / RecoverPreparedTransaction / CompleteTransaction become
	// available. The broker must have transaction.two.phase.commit.enable=true. Needs a
	// TransactionalID. See twopc.go.
	Enable2PC bool
	// TxnShareAckAPIKey is the API key of TxnShareAcknowledge (KIP-1289), which has no
	// official key yet. Default txnshare.DefaultAPIKey (95, exactq decision D1).
	TxnShareAckAPIKey int16
}

// Producer defaults.
const (
	defaultBatchMaxBytes     = 1_000_000
	defaultDeliveryTimeout   = 2 * time.Minute
	defaultMaxInFlight       = 5
	maxIdempotentInFlight    = 5
	defaultMaxBufferedBytes  = 64 << 20
	defaultUnknownTopicTries = 4
)

// ErrDeliveryTimeout is returned (wrapping the last attempt's error, if any) for records
// not delivered within DeliveryTimeout.
var ErrDeliveryTimeout = errors.New("client: delivery timeout")

// ErrInvalidPartition is returned for a record whose partitioner chose a partition the
// topic does not have.
var ErrInvalidPartition = errors.New("client: partition out of range")

// Producer sends records to brokers in batches. It is safe for concurrent use.
//
// Goroutines: one sender decides what to send (run), per broker a writer that encodes and
// writes requests and a waiter that reads responses in order (sink), and one delivery
// goroutine that runs record callbacks, in produce order per partition, never with the
// producer's lock held. A slow callback delays other callbacks, not sending.
type Producer struct {
	cfg         ProducerConfig
	idempotent  bool
	cl          *cluster
	partitioner Partitioner
	txn         *txnState       // nil unless TransactionalID is set
	ctx         context.Context // cancelled by Close after the final flush
	cancel      context.CancelFunc

	metaMu sync.Mutex // serialises Produce's blocking metadata lookups

	// Everything below is guarded by mu.
	mu           sync.Mutex
	parts        map[TopicPartition]*partBuf
	ids          idState
	sinks        map[int32]*sink
	inflightReqs int // produce requests written or queued and not yet answered
	buffered     int64
	bufferedRecs int
	changed      chan struct{} // closed and replaced when buffered shrinks (waiters re-check)
	flushing     int
	closing      bool
	metaRunning  bool
	metaAgain    bool
	initRunning  bool

	wake    chan struct{} // capacity 1: pokes the sender
	quit    chan struct{}
	runDone chan struct{} // closed when the sender exits

	doneQ       []*recBatch   // finished batches awaiting callbacks, under mu
	doneSignal  chan struct{} // capacity 1: pokes deliverLoop
	deliverQuit chan struct{}
	deliverDone chan struct{}
	wg          sync.WaitGroup
}

// partBuf is one partition's batches, guarded by Producer.mu.
type partBuf struct {
	tp    TopicPartition
	open  *recBatch   // accepting records, or nil
	queue []*recBatch // sealed batches in sequence order; in-flight ones first
	// inflight counts queue batches in flight, all to broker.
	inflight int
	broker   int32
	// rewind is set when an in-flight batch failed and will be resent: nothing more is
	// sent until every in-flight batch is answered, then sending restarts at the head,
	// so order (and sequence order) is kept.
	rewind       bool
	backoffUntil time.Time
	// seqGen is the idState generation nextSeq belongs to.
	seqGen  uint64
	nextSeq int32
}

// recBatch is one batch of records for one partition.
type recBatch struct {
	pb      *partBuf
	records []kmsg.Record // timestamps as deltas from firstTs
	proms   []promise
	firstTs int64
	bytes   int // estimated encoded size of records
	created time.Time

	// Fields below change only while the batch is not in flight (sender, under mu); the
	// writer reads them while it is.
	inflight bool
	done     bool // outcome known, waiting for earlier batches to complete first
	doneBase int64
	doneErr  error
	attempts int
	lastErr  error
	seqGen   uint64 // generation seq belongs to; 0: not assigned
	seq      int32
	pid      producerID
	// encoded caches the wire batch for the header it was built with.
	encoded    []byte
	encodedFor batchKey
}

type batchKey struct {
	pid producerID
	seq int32
}

type promise struct {
	r  *Record
	cb func(*Record, error)
}

// NewProducer validates cfg and starts a producer. It does not connect until the first
// record.
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	nc, err := newNetConfig(cfg.Brokers, cfg.Net)
	if err != nil {
		return nil, err
	}
	if cfg.BatchMaxBytes <= 0 {
		cfg.BatchMaxBytes = defaultBatchMaxBytes
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = defaultDeliveryTimeout
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = defaultMaxBufferedBytes
	}
	if cfg.UnknownTopicRetries <= 0 {
		cfg.UnknownTopicRetries = defaultUnknownTopicTries
	}
	if cfg.Compression < NoCompression || cfg.Compression > Zstd {
		return nil, fmt.Errorf("client: unknown compression %d", cfg.Compression)
	}
	if cfg.Acks < AcksAll || cfg.Acks > AcksNone {
		return nil, fmt.Errorf("client: unknown acks %d", cfg.Acks)
	}
	idempotent := !cfg.DisableIdempotence && cfg.Acks == AcksAll
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if idempotent && cfg.MaxInFlight > maxIdempotentInFlight {
		return nil, fmt.Errorf("client: MaxInFlight %d > %d with idempotence", cfg.MaxInFlight, maxIdempotentInFlight)
	}
	if cfg.TransactionalID != "" && !idempotent {
		return nil, errors.New("client: TransactionalID requires idempotence (AcksAll, DisableIdempotence false)")
	}
	if cfg.Enable2PC && cfg.TransactionalID == "" {
		return nil, errors.New("client: Enable2PC requires a TransactionalID")
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = defaultTransactionTimeout
	}
	part := cfg.Partitioner
	if part == nil {
		part = DefaultPartitioner()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{
		cfg:         cfg,
		idempotent:  idempotent,
		cl:          newCluster(nc),
		partitioner: part,
		ctx:         ctx,
		cancel:      cancel,
		parts:       make(map[TopicPartition]*partBuf),
		sinks:       make(map[int32]*sink),
		changed:     make(chan struct{}),
		wake:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		runDone:     make(chan struct{}),
		doneSignal:  make(chan struct{}, 1),
		deliverQuit: make(chan struct{}),
		deliverDone: make(chan struct{}),
	}
	p.ids.cur = noProducerID
	if cfg.TransactionalID != "" {
		p.txn = newTxnState(p.cl, cfg.TransactionalID, cfg.TransactionTimeout)
		p.txn.enable2PC = cfg.Enable2PC
	}
	go p.run()
	go p.deliverLoop()
	return p, nil
}

// Produce buffers r for sending and calls cb (which may be nil) once with r and the
// outcome; on success r.Partition and r.Offset are set. It blocks while the topic's
// metadata is unknown and while MaxBufferedBytes is exceeded, until ctx is done (then cb
// gets ctx's error). Records for one partition are written and their callbacks called in
// Produce order.
func (p *Producer) Produce(ctx context.Context, r *Record, cb func(*Record, error)) {
	if cb == nil {
		cb = func(*Record, error) {}
	}
	if err := p.produce(ctx, r, cb); err != nil {
		cb(r, err)
	}
}

// ProduceSync produces r and waits for its outcome.
func (p *Producer) ProduceSync(ctx context.Context, r *Record) error {
	done := make(chan error, 1)
	p.Produce(ctx, r, func(_ *Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The record stays buffered and may still be written; its outcome is lost.
		return ctx.Err()
	}
}

func (p *Producer) produce(ctx context.Context, r *Record, cb func(*Record, error)) error {
	if r.Topic == "" {
		return errors.New("client: record without topic")
	}
	tm, err := p.topicMeta(ctx, r.Topic)
	if err != nil {
		return err
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	size := recordSize(r)

	p.mu.Lock()
	for {
		if p.closing {
			p.mu.Unlock()
			return ErrClosed
		}
		if p.txn != nil {
			if err := p.txn.err(); err != nil {
				p.mu.Unlock()
				return err
			}
			if err := p.txn.notOpenErr(); err != nil {
				p.mu.Unlock()
				return err
			}
		}
		if p.buffered == 0 || p.buffered+int64(size) <= p.cfg.MaxBufferedBytes {
			break
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	n := int32(len(tm.partitions))
	part := p.partitioner.Partition(r, n)
	if pb := p.parts[TopicPartition{r.Topic, part}]; part >= 0 && part < n && (pb == nil || pb.open == nil) {
		p.partitioner.OnNewBatch(r.Topic, n, part)
		part = p.partitioner.Partition(r, n)
	}
	if part < 0 || part >= n {
		p.mu.Unlock()
		return fmt.Errorf("%w: %s[%d] of %d", ErrInvalidPartition, r.Topic, part, n)
	}
	r.Partition = part
	tp := TopicPartition{r.Topic, part}
	pb := p.parts[tp]
	if pb == nil {
		pb = &partBuf{tp: tp, broker: -1}
		p.parts[tp] = pb
	}
	wake := p.cfg.Linger <= 0
	if pb.open != nil && pb.open.bytes+size > int(p.cfg.BatchMaxBytes) {
		pb.seal()
		wake = true
	}
	if pb.open == nil {
		pb.open = &recBatch{pb: pb, firstTs: r.Timestamp.UnixMilli(), created: time.Now()}
		wake = true // the sender must arm the linger timer
	}
	pb.open.add(r, cb, size)
	p.buffered += int64(size)
	p.bufferedRecs++
	p.mu.Unlock()
	if wake {
		p.poke()
	}
	return nil
}

// add appends r to the open batch.
func (b *recBatch) add(r *Record, cb func(*Record, error), size int) {
	kr := kmsg.Record{
		TimestampDelta64: r.Timestamp.UnixMilli() - b.firstTs,
		Key:              r.Key,
		Value:            r.Value,
	}
	if len(r.Headers) > 0 {
		kr.Headers = make([]kmsg.Header, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = kmsg.Header{Key: h.Key, Value: h.Value}
		}
	}
	b.records = append(b.records, kr)
	b.proms = append(b.proms, promise{r: r, cb: cb})
	b.bytes += size
}

// seal closes the open batch: it joins the queue and takes no more records.
func (pb *partBuf) seal() {
	if pb.open == nil {
		return
	}
	pb.queue = append(pb.queue, pb.open)
	pb.open = nil
}

// recordSize is an upper bound of r's encoded size in a batch: varints at their longest.
func recordSize(r *Record) int {
	n := 5 + 1 + 10 + 5 + 5 + len(r.Key) + 5 + len(r.Value) + 5
	for _, h := range r.Headers {
		n += 5 + len(h.Key) + 5 + len(h.Value)
	}
	return n
}

// topicMeta returns the topic's metadata, refreshing it (up to UnknownTopicRetries times)
// while it is unknown or has no partitions.
func (p *Producer) topicMeta(ctx context.Context, topic string) (*topicMeta, error) {
	if tm := p.cl.topic(topic); tm != nil && tm.err == nil && len(tm.partitions) > 0 {
		return tm, nil
	}
	p.metaMu.Lock()
	defer p.metaMu.Unlock()
	var lastErr error
	for try := 0; try < p.cfg.UnknownTopicRetries; try++ {
		if tm := p.cl.topic(topic); tm != nil && tm.err == nil && len(tm.partitions) > 0 {
			return tm, nil
		}
		if try > 0 {
			if err := sleepCtx(ctx, p.cl.cfg.retryBackoff); err != nil {
				return nil, err
			}
		}
		if _, err := p.refreshTopics(ctx, []string{topic}); err != nil {
			lastErr = err
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		tm := p.cl.topic(topic)
		switch {
		case tm == nil:
			lastErr = kerr.UnknownTopicOrPartition
		case tm.err != nil:
			lastErr = tm.err
			if !kerr.IsRetriable(tm.err) {
				return nil, fmt.Errorf("client: topic %s: %w", topic, tm.err)
			}
		case len(tm.partitions) == 0:
			lastErr = kerr.LeaderNotAvailable
		default:
			return tm, nil
		}
	}
	return nil, fmt.Errorf("client: topic %s: %w", topic, lastErr)
}

// refreshTopics fetches metadata for topics, asking for auto-creation unless disabled.
func (p *Producer) refreshTopics(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	if p.cfg.DisableAutoTopicCreation {
		return p.cl.refreshMetadata(ctx, topics)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := p.cl.do(ctx, anyBroker(), req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.MetadataResponse)
	p.cl.apply(r)
	return r, nil
}

// Flush makes every buffered record ready to send now (ignoring Linger) and waits until
// all records produced before the call have their outcome, or ctx is done.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.flushing++
	p.mu.Unlock()
	p.poke()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		if p.bufferedRecs == 0 {
			p.mu.Unlock()
			return nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops accepting records, delivers (or times out, per DeliveryTimeout) every
// buffered record, and closes the connections. Produce after Close fails with ErrClosed.
func (p *Producer) Close() {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return
	}
	p.closing = true
	p.mu.Unlock()
	_ = p.Flush(context.Background())
	close(p.quit)
	<-p.runDone // no sink is created or fed after this
	p.mu.Lock()
	sinks := p.sinks
	p.sinks = map[int32]*sink{}
	p.mu.Unlock()
	for _, s := range sinks {
		close(s.reqs)
	}
	p.cancel()
	p.wg.Wait()
	close(p.deliverQuit) // Flush returned: every callback has run
	<-p.deliverDone
	p.cl.close()
}

// poke wakes the sender.
func (p *Producer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// broadcast wakes everyone waiting on p.changed. Called with mu held.
func (p *Producer) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// run is the sender loop: on every poke or timer it sends what can be sent.
func (p *Producer) run() {
	defer close(p.runDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := p.sendReady()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if next > 0 {
			timer.Reset(next)
		}
		select {
		case <-p.wake:
		case <-timer.C:
		case <-p.quit:
			return
		}
	}
}

// sendReady builds produce requests for every partition that may send and hands them to
// the brokers' sinks. It returns how long until something becomes sendable by time alone
// (linger, backoff, delivery timeout), or 0 for "only a poke".
func (p *Producer) sendReady() time.Duration {
	now := time.Now()
	var (
		expired  []*recBatch
		needMeta bool
		reqs     []*produceReq
		wakeIn   time.Duration
	)
	p.mu.Lock()
	// partBufs are never deleted: they carry the partition's next sequence number, which
	// must survive idle periods for as long as the producer id does.
	for _, pb := range p.parts {
		expired = pb.expire(now, p.cfg.DeliveryTimeout, expired, p)
	}
	for _, b := range expired {
		b.finish(-1, b.expiredErr())
	}
	var canSend bool
	switch {
	case p.txn != nil:
		if len(expired) > 0 {
			p.txn.fail(expired[0].expiredErr())
		}
		canSend = p.txnCanSend()
		if err := p.txn.err(); err != nil {
			// A doomed transaction sends nothing more; fail what waits so that
			// Commit and Abort (which flush) do not wait for delivery timeouts.
			p.dropUnsent(err)
		}
	case !p.idempotent:
		canSend = true
	default:
		canSend = p.ensureID() // ensureID pokes when the id arrives
	}
	p.deliver(expired)
	if !canSend {
		wakeIn = p.cl.cfg.retryBackoff // keep expiring records while waiting for an id
	}
	byBroker := make(map[int32]*produceReq)
	lingerAll := p.flushing > 0 || p.closing
	for _, pb := range p.parts {
		if !canSend {
			break
		}
		if pb.open == nil && len(pb.queue) == 0 {
			continue
		}
		if wait := pb.backoffUntil.Sub(now); wait > 0 {
			wakeIn = minPositive(wakeIn, wait)
			continue
		}
		if pb.rewind {
			if pb.inflight > 0 {
				continue
			}
			pb.rewind = false
		}
		if p.txn != nil && !p.txnPartitionReady(pb.tp) {
			continue // queued for AddPartitionsToTxn
		}
		next := pb.nextUnsent()
		if next < 0 {
			// Nothing sealed to send; seal the open batch if it lingered long enough.
			if pb.open == nil {
				continue
			}
			if wait := pb.open.created.Add(p.cfg.Linger).Sub(now); wait > 0 && !lingerAll {
				wakeIn = minPositive(wakeIn, wait)
				continue
			}
		}
		leader := p.cl.leader(pb.tp.Topic, pb.tp.Partition)
		if leader < 0 {
			needMeta = true
			pb.backoffUntil = now.Add(p.cl.cfg.retryBackoff)
			wakeIn = minPositive(wakeIn, p.cl.cfg.retryBackoff)
			continue
		}
		if pb.inflight > 0 && pb.broker != leader {
			continue // leader moved: let the old broker's answers drain first
		}
		s := p.sinkFor(leader)
		req := byBroker[leader]
		if req == nil {
			if s.inflight >= p.cfg.MaxInFlight {
				continue
			}
			req = &produceReq{broker: leader, sink: s, maxVersion: -1}
			if p.txn != nil {
				req.transactionalID = &p.txn.id
				if !p.txn.v2 {
					req.maxVersion = tv1MaxProduce
				}
			}
			byBroker[leader] = req
			reqs = append(reqs, req)
			s.inflight++
			p.inflightReqs++
		}
		if next < 0 {
			pb.seal()
			next = len(pb.queue) - 1
		}
		b := pb.queue[next]
		p.assignSequence(pb, b)
		b.inflight = true
		pb.inflight++
		pb.broker = leader
		req.batches = append(req.batches, b)
		wakeIn = minPositive(wakeIn, b.created.Add(p.cfg.DeliveryTimeout).Sub(now))
	}
	if p.txn != nil && canSend {
		p.maybeAddPartitions()
	}
	p.mu.Unlock()

	if needMeta {
		p.triggerMetadata()
	}
	for _, r := range reqs {
		r.sink.reqs <- r // capacity MaxInFlight ≥ the sink's in-flight count: never blocks
	}
	if len(reqs) > 0 {
		p.poke() // more may be sendable (one batch per partition per request)
	}
	return wakeIn
}

func minPositive(a, b time.Duration) time.Duration {
	if b <= 0 {
		b = time.Millisecond
	}
	if a <= 0 || b < a {
		return b
	}
	return a
}

// expire removes head batches that are not in flight and are older than the delivery
// timeout, appending them to out. Only the head may expire, so callbacks keep order.
func (pb *partBuf) expire(now time.Time, timeout time.Duration, out []*recBatch, p *Producer) []*recBatch {
	for pb.inflight == 0 && len(pb.queue) > 0 && now.Sub(pb.queue[0].created) >= timeout {
		b := pb.queue[0]
		pb.queue = pb.queue[1:]
		if b.seqGen != 0 && b.seqGen == p.ids.gen {
			// It may or may not have been written; later sequences would not line up.
			p.ids.bumpNeeded = true
		}
		out = append(out, b)
	}
	if pb.inflight == 0 && len(pb.queue) == 0 && pb.open != nil && now.Sub(pb.open.created) >= timeout {
		out = append(out, pb.open)
		pb.open = nil
	}
	return out
}

func (b *recBatch) expiredErr() error {
	if b.lastErr != nil {
		return fmt.Errorf("%w: %w", ErrDeliveryTimeout, b.lastErr)
	}
	return ErrDeliveryTimeout
}

// assignSequence gives b its sequence number the first time it is sent under the current
// producer id generation; a resend keeps the sequence (that is what lets the broker
// de-duplicate it).
func (p *Producer) assignSequence(pb *partBuf, b *recBatch) {
	if !p.idempotent {
		b.pid = noProducerID
		return
	}
	if pb.seqGen != p.ids.gen {
		// A new producer id or epoch: this partition's sequences restart at 0. Nothing
		// is in flight (bumps wait for that), so every queued batch is re-sequenced.
		pb.seqGen = p.ids.gen
		pb.nextSeq = 0
	}
	if b.seqGen == p.ids.gen {
		return
	}
	b.seqGen = p.ids.gen
	b.seq = pb.nextSeq
	b.pid = p.ids.cur
	pb.nextSeq = nextSequence(pb.nextSeq, int32(len(b.records)))
}

// ensureID makes sure an idempotent producer has a usable id, called with mu held. It
// reports whether sending may proceed; when not, an InitProducerId or an epoch bump is
// pending and the sender is poked when it is done.
func (p *Producer) ensureID() bool {
	if p.ids.bumpNeeded {
		if p.inflightReqs > 0 {
			return false // answers pending; bump when the last one arrives
		}
		if !p.ids.localBump() {
			p.ids.cur = noProducerID // epoch exhausted or no id: get a new one
			p.ids.bumpNeeded = false
		}
	}
	if p.ids.gen != 0 && p.ids.cur.id >= 0 {
		return true
	}
	if !p.initRunning {
		p.initRunning = true
		p.wg.Add(1)
		go p.initID()
	}
	return false
}

// initID fetches a producer id, retrying until it succeeds or the producer closes.
func (p *Producer) initID() {
	defer p.wg.Done()
	for {
		id, err := initProducerID(p.ctx, p.cl)
		p.mu.Lock()
		if err == nil {
			p.ids.set(id)
			p.initRunning = false
			p.mu.Unlock()
			p.poke()
			return
		}
		p.ids.initErr = err
		p.mu.Unlock()
		if sleepCtx(p.ctx, p.cl.cfg.retryBackoff) != nil {
			p.mu.Lock()
			p.initRunning = false
			p.mu.Unlock()
			return
		}
		p.poke() // let the sender expire records while we keep trying
	}
}

// triggerMetadata refreshes metadata for every topic with buffered records, at most one
// refresh at a time, and pokes the sender afterwards.
func (p *Producer) triggerMetadata() {
	p.mu.Lock()
	if p.metaRunning {
		p.metaAgain = true
		p.mu.Unlock()
		return
	}
	p.metaRunning = true
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			p.mu.Lock()
			seen := make(map[string]bool)
			var topics []string
			for tp := range p.parts {
				if !seen[tp.Topic] {
					seen[tp.Topic] = true
					topics = append(topics, tp.Topic)
				}
			}
			p.metaAgain = false
			p.mu.Unlock()
			if len(topics) > 0 {
				ctx, cancel := context.WithTimeout(p.ctx, p.cl.cfg.requestTimeout)
				_, _ = p.refreshTopics(ctx, topics) // failures: partitions back off and retry
				cancel()
			}
			p.mu.Lock()
			if !p.metaAgain {
				p.metaRunning = false
				p.mu.Unlock()
				p.poke()
				return
			}
			p.mu.Unlock()
		}
	}()
}

// deliver queues finished batches for the delivery goroutine (mu held). Batches are
// queued in the order they leave their partitions' queues, and one goroutine runs all
// callbacks, so a partition's callbacks run in produce order whichever goroutine (waiter
// or sender, for expired batches) finished the batch.
func (p *Producer) deliver(bs []*recBatch) {
	if len(bs) == 0 {
		return
	}
	p.doneQ = append(p.doneQ, bs...)
	select {
	case p.doneSignal <- struct{}{}:
	default:
	}
}

// deliverLoop runs callbacks, then releases the batches from the buffer accounting.
func (p *Producer) deliverLoop() {
	defer close(p.deliverDone)
	for {
		select {
		case <-p.doneSignal:
		case <-p.deliverQuit:
			return
		}
		p.mu.Lock()
		bs := p.doneQ
		p.doneQ = nil
		p.mu.Unlock()
		for _, b := range bs {
			b.complete(b.doneBase, b.doneErr)
		}
		p.release(bs...)
	}
}

// release drops finished batches from the buffer accounting. It runs after their
// callbacks, so Flush returning means every callback has run.
func (p *Producer) release(bs ...*recBatch) {
	if len(bs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range bs {
		p.buffered -= int64(b.bytes)
		p.bufferedRecs -= len(b.proms)
	}
	p.broadcast()
}

// complete calls every record's callback, with offsets on success.
func (b *recBatch) complete(baseOffset int64, err error) {
	for i, pr := range b.proms {
		if err == nil {
			pr.r.Offset = -1
			if baseOffset >= 0 {
				pr.r.Offset = baseOffset + int64(i)
			}
		}
		pr.cb(pr.r, err)
	}
}

// ---- sinks: per-broker writer and waiter ----

// sink carries produce requests to one broker: the writer goroutine encodes and writes
// them in the order the sender queued them, the waiter goroutine reads the answers in the
// same order. Both channels hold at most MaxInFlight requests.
type sink struct {
	id       int32
	inflight int // under Producer.mu
	reqs     chan *produceReq
	waits    chan *produceReq
	// unanswered are the requests the writer took whose answers the waiter has not yet
	// applied, in write order, under Producer.mu (see heldBack).
	unanswered []*produceReq
}

type produceReq struct {
	broker  int32
	sink    *sink
	batches []*recBatch
	call    *call
	err     error
	wroteOn *conn // the connection it was written on; nil if it was not written
	// maxVersion caps the Produce version (transactions v1: below v12); -1 for none.
	maxVersion      int16
	transactionalID *string // set for transactional batches (the broker requires it)
}

// sinkFor returns the broker's sink, starting it on first use (mu held).
func (p *Producer) sinkFor(id int32) *sink {
	s := p.sinks[id]
	if s != nil {
		return s
	}
	s = &sink{id: id, reqs: make(chan *produceReq, p.cfg.MaxInFlight), waits: make(chan *produceReq, p.cfg.MaxInFlight)}
	p.sinks[id] = s
	p.wg.Add(2)
	go p.writeLoop(s)
	go p.waitLoop(s)
	return s
}

func (p *Producer) writeLoop(s *sink) {
	defer p.wg.Done()
	defer close(s.waits)
	for r := range s.reqs {
		r.call, r.err = p.write(r)
		s.waits <- r
	}
}

// write encodes r's batches and writes the request.
func (p *Producer) write(r *produceReq) (*call, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cl.cfg.requestTimeout)
	defer cancel()
	c, err := p.cl.brokerConn(ctx, r.broker)
	if err == nil && p.heldBack(r, c) {
		err = errHeldBack
	}
	p.mu.Lock()
	r.sink.unanswered = append(r.sink.unanswered, r)
	if err == nil {
		r.wroteOn = c // set before the send: a failed send may still have reached the broker
	}
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	v := c.version(kmsg.Produce.Int16())
	if r.maxVersion >= 0 {
		v = min(v, r.maxVersion)
	}
	if v < 0 {
		return nil, fmt.Errorf("client: broker %d: no usable Produce version: %w", r.broker, kerr.UnsupportedVersion)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(v)
	req.Acks = p.cfg.Acks.wire()
	req.TransactionID = r.transactionalID
	req.TimeoutMillis = int32(min(p.cl.cfg.requestTimeout.Milliseconds(), math.MaxInt32))
	topicIdx := make(map[string]int)
	for _, b := range r.batches {
		enc, err := b.encode(p.cfg.Compression, r.transactionalID != nil)
		if err != nil {
			return nil, err
		}
		i, ok := topicIdx[b.pb.tp.Topic]
		if !ok {
			i = len(req.Topics)
			topicIdx[b.pb.tp.Topic] = i
			t := kmsg.NewProduceRequestTopic()
			t.Topic = b.pb.tp.Topic
			req.Topics = append(req.Topics, t)
		}
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = b.pb.tp.Partition
		pp.Records = enc
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, pp)
	}
	return c.send(ctx, req)
}

// heldBack reports whether r must not be written on c, because the broker could then
// append its batches before earlier ones of the same partitions. A broker without state
// for our producer id (the first batches, or after it lost them) accepts any sequence, so
// the broker's sequence check cannot be relied on to refuse them. Two cases:
//   - an earlier batch of one of r's partitions failed and waits to be resent (rewind
//     stays set until every in-flight batch of the partition, r's included, is answered);
//   - an earlier request to this broker is unanswered and was not written on c (it failed
//     to be written, or went on a connection that has since been replaced): its batches
//     may never reach the broker, or reach it after r's. On one connection the broker
//     handles requests in order, so earlier requests on c are safe.
//
// A held-back request is answered errHeldBack without being written and resent in order.
func (p *Producer) heldBack(r *produceReq, c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range r.batches {
		if b.pb.rewind {
			return true
		}
	}
	for _, e := range r.sink.unanswered {
		if e.wroteOn != c {
			return true
		}
	}
	return false
}

func (p *Producer) waitLoop(s *sink) {
	defer p.wg.Done()
	for r := range s.waits {
		var resp kmsg.Response
		err := r.err
		if err == nil {
			ctx, cancel := context.WithTimeout(p.ctx, 2*p.cl.cfg.requestTimeout)
			resp, err = r.call.wait(ctx)
			cancel()
		}
		var pr *kmsg.ProduceResponse
		if err == nil && resp != nil {
			pr = resp.(*kmsg.ProduceResponse)
		}
		p.handleResponse(r, pr, err)
	}
}

// handleResponse applies one produce request's outcome to its batches (in order) and
// then runs the callbacks of completed batches, outside the lock.
func (p *Producer) handleResponse(r *produceReq, resp *kmsg.ProduceResponse, reqErr error) {
	type partResult struct {
		err  error
		base int64
	}
	results := make(map[TopicPartition]partResult)
	if resp != nil {
		for _, t := range resp.Topics {
			for _, pp := range t.Partitions {
				results[TopicPartition{t.Topic, pp.Partition}] = partResult{kerr.ErrorForCode(pp.ErrorCode), pp.BaseOffset}
			}
		}
	}
	var finished []*recBatch
	needMeta := false
	now := time.Now()

	p.mu.Lock()
	for _, b := range r.batches {
		pb := b.pb
		err, base := reqErr, int64(-1)
		if err == nil && resp != nil {
			res, ok := results[pb.tp]
			if !ok {
				err = fmt.Errorf("client: produce response lacks %s[%d]: %w", pb.tp.Topic, pb.tp.Partition, kerr.UnknownServerError)
			} else {
				err, base = res.err, res.base
			}
		}
		v := judge(err, attempt{
			idempotent:    p.idempotent,
			sentWith:      b.pid,
			current:       p.ids.cur,
			earlierFailed: pb.rewind,
		})
		b.inflight = false
		pb.inflight--
		if v.outcome == batchDone && errors.Is(err, kerr.DuplicateSequenceNumber) {
			base = -1
		}
		if v.outcome == batchRetry && p.txn != nil && (p.txn.phase == txnAborting || p.txn.err() != nil) {
			// The transaction is being aborted or is doomed: do not resend.
			v.outcome = batchFail
			if p.txn.phase == txnAborting {
				err = fmt.Errorf("%w: %w", ErrTransactionAborted, err)
			}
			if b.seqGen != 0 && b.seqGen == p.ids.gen {
				p.txn.bump = true
			}
		}
		if v.outcome == batchRetry && !errors.Is(err, errHeldBack) {
			b.attempts++
			b.lastErr = err
			if p.cfg.Retries < 0 || (p.cfg.Retries > 0 && b.attempts > p.cfg.Retries) || now.Sub(b.created) >= p.cfg.DeliveryTimeout {
				v.outcome = batchFail
				err = fmt.Errorf("client: %s[%d]: giving up after %d attempts: %w", pb.tp.Topic, pb.tp.Partition, b.attempts, err)
			}
		}
		switch v.outcome {
		case batchDone:
			b.finish(base, nil)
		case batchRetry:
			pb.rewind = true
			pb.backoffUntil = now.Add(p.cl.cfg.retryBackoff)
			needMeta = needMeta || v.refreshMeta
			if v.bumpEpoch {
				p.ids.bumpNeeded = true
			}
		case batchFail:
			b.finish(-1, err)
			if p.txn != nil {
				p.txn.fail(err) // a record of the transaction was not written: abort
			}
			if p.idempotent && b.seqGen == p.ids.gen {
				// The batch's sequence is used up or unknown to the broker; the
				// partition's later sequences would not line up. Restart sequences.
				p.ids.bumpNeeded = true
			}
		}
		// Complete in partition order: a later batch can succeed before an earlier one
		// that is being resent (its first attempt was written but the answer lost), and
		// callbacks must still run in produce order.
		finished = pb.popDone(finished)
	}
	p.deliver(finished)
	r.sink.inflight--
	if i := slices.Index(r.sink.unanswered, r); i >= 0 {
		r.sink.unanswered = slices.Delete(r.sink.unanswered, i, i+1)
	}
	p.inflightReqs--
	p.mu.Unlock()

	if needMeta {
		p.triggerMetadata()
	}
	p.poke()
}

// finish records a batch's outcome; popDone completes it once every earlier batch of the
// partition is complete.
func (b *recBatch) finish(base int64, err error) {
	b.done, b.doneBase, b.doneErr = true, base, err
}

// popDone moves finished batches off the head of the queue onto out.
func (pb *partBuf) popDone(out []*recBatch) []*recBatch {
	for len(pb.queue) > 0 && pb.queue[0].done {
		out = append(out, pb.queue[0])
		pb.queue[0] = nil
		pb.queue = pb.queue[1:]
	}
	return out
}

// nextUnsent returns the index of the first sealed batch neither in flight nor finished,
// or -1.
func (pb *partBuf) nextUnsent() int {
	for i, b := range pb.queue {
		if !b.inflight && !b.done {
			return i
		}
	}
	return -1
}

// encode returns the wire form of b for its current producer id and sequence, reusing the
// previous encoding when a resend carries the same header.
func (b *recBatch) encode(codec Compression, transactional bool) ([]byte, error) {
	key := batchKey{pid: b.pid, seq: b.seq}
	if b.encoded != nil && b.encodedFor == key {
		return b.encoded, nil
	}
	h := batch.NoProducer(0, b.firstTs)
	if b.pid.id >= 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = b.pid.id, b.pid.epoch, b.seq
		if transactional {
			h.Attributes |= batch.AttrTransactional
		}
	}
	enc, err := batch.Encode(nil, h, b.records, int8(codec))
	if err != nil {
		return nil, fmt.Errorf("client: encode batch for %s[%d]: %w", b.pb.tp.Topic, b.pb.tp.Partition, err)
	}
	b.encoded, b.encodedFor = enc, key
	return enc, nil
}
