package twopc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
)

// pendingBatch is one partition's buffered records: the batch the next Produce request
// carries for the partition. Its sequence is assigned when it is first sent and kept for
// every resend, so the broker writes it once however often it is sent.
type pendingBatch struct {
	recs     []*kgo.Record
	promises []func(*kgo.Record, error)
	bytes    int
	seq      int32
	seqFor   producerID // the id seq belongs to; noProducerID: not assigned
	attempts int
}

// completion is one promise to call once p.mu is released (a promise may call back into
// the producer).
type completion struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
	err     error
}

func runCompletions(cs []completion) {
	for _, c := range cs {
		if c.promise != nil {
			c.promise(c.r, c.err)
		}
	}
}

// Produce buffers r in the open transaction and calls promise (which may be nil) with r
// and the outcome once r is written or failed; on success r.Partition, r.Offset,
// r.ProducerID and r.ProducerEpoch are set (r.Offset is -1 when the broker answered that
// an earlier attempt, whose answer was lost, wrote the batch). Records are sent by Flush,
// PrepareTransaction and CommitTransaction, and by Produce itself when r would make its
// partition's batch larger than the kgo client's kgo.ProducerBatchMaxBytes (Produce then
// sends what is buffered first and waits for the write, as Flush does). r.Partition is
// chosen by the kgo client's partitioner; a record's Timestamp is set to now when zero.
//
// A record that cannot be buffered (no transaction open, unknown topic) gets its error at
// once and leaves the transaction as it was; a record that fails once buffered makes the
// transaction abortable. Promises run after the producer's lock is released (they may
// call the producer), on the goroutine of the call that completed the record: with
// several goroutines, one's Flush may run another's promises.
func (p *Producer) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	p.mu.Lock()
	done, err := p.produce(ctx, r, promise)
	p.mu.Unlock()
	if err != nil && promise != nil {
		promise(r, err)
	}
	runCompletions(done)
}

// ProduceSync produces rs and flushes them, returning each record's outcome, as
// (*kgo.Client).ProduceSync does. A record whose outcome is not known (ctx ended first)
// has Flush's error; it stays buffered, and a later Flush sends it.
func (p *Producer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	var (
		mu       sync.Mutex
		returned bool
		results  = make(kgo.ProduceResults, len(rs))
		answered = make([]chan struct{}, len(rs))
	)
	for i, r := range rs {
		results[i].Record = r
		answered[i] = make(chan struct{})
		p.Produce(ctx, r, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if !returned {
				results[i].Err = err
			}
			close(answered[i])
		})
	}
	err := p.Flush(ctx)
	for i, r := range rs {
		if err != nil && p.buffered(r) {
			mu.Lock()
			results[i].Err = err
			mu.Unlock()
			continue
		}
		// Completed, by this goroutine or by another's call, which runs its promise.
		<-answered[i]
	}
	mu.Lock()
	returned = true
	mu.Unlock()
	return results
}

// buffered reports whether r is still waiting to be written.
func (p *Producer) buffered(r *kgo.Record) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.buf[topicPartition{r.Topic, r.Partition}] {
		for _, br := range b.recs {
			if br == r {
				return true
			}
		}
	}
	return false
}

// Flush sends every buffered record and waits for their outcomes (the promises of records
// another goroutine's call completed may still be running when it returns). It returns the
// transaction's error if a record failed (ErrTransactionAbortable or ErrProducerFatal),
// or ctx's error, after which the records not yet written stay buffered with their
// sequence numbers and Flush may be called again.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	done, err := p.flush(ctx)
	p.mu.Unlock()
	runCompletions(done)
	return err
}

func (p *Producer) produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) ([]completion, error) {
	if err := p.txn.openErr(); err != nil {
		return nil, err
	}
	if r.Topic == "" {
		return nil, errors.New("twopc: record without topic")
	}
	n, err := p.partitionCount(ctx, r.Topic)
	if err != nil {
		return nil, err
	}
	part, err := p.partition(r, n)
	if err != nil {
		return nil, err
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	r.Partition = part
	tp := topicPartition{r.Topic, part}
	size := recordSize(r)
	var done []completion
	if b := p.openBatch(tp); b != nil && b.bytes+size > int(p.batchMaxBytes(r.Topic)) {
		// r would make the partition's batch too large: send what is buffered first. A
		// ctx error leaves it buffered, for the next Flush.
		done, _ = p.flush(ctx)
		if err := p.txn.openErr(); err != nil {
			return done, err
		}
	}
	b := p.openBatch(tp)
	if b == nil {
		b = &pendingBatch{seqFor: noProducerID}
		p.buf[tp] = append(p.buf[tp], b)
	}
	b.recs = append(b.recs, r)
	b.promises = append(b.promises, promise)
	b.bytes += size
	return done, nil
}

// openBatch is tp's batch that still takes records: the last one, unless it was sent (a
// resend must be the same batch); nil when there is none.
func (p *Producer) openBatch(tp topicPartition) *pendingBatch {
	q := p.buf[tp]
	if len(q) == 0 || q[len(q)-1].seqFor != noProducerID {
		return nil
	}
	return q[len(q)-1]
}

// partitionCount is topic's number of partitions, looked up again after kgo's
// MetadataMinAge or a leadership error (p.mu held). Asking kgo's cache for every record
// cost a third of Produce's time.
func (p *Producer) partitionCount(ctx context.Context, topic string) (int, error) {
	if k, ok := p.counts[topic]; ok && !p.staleMeta && time.Since(k.at) < p.metadataMinAge {
		return k.partitions, nil
	}
	metas, err := p.metadata(ctx, []string{topic})
	if err != nil {
		return 0, err
	}
	n := len(metas[topic].leaders)
	p.counts[topic] = partitionCount{partitions: n, at: time.Now()}
	return n, nil
}

// partition picks r's partition among n with the topic's kgo partitioner, as kgo's
// producer does: a partitioner that wants to know about new batches is told when the
// partition it picked has nothing buffered, and asked again.
func (p *Producer) partition(r *kgo.Record, n int) (int32, error) {
	tp := p.parts[r.Topic]
	if tp == nil {
		tp = p.partitioner.ForTopic(r.Topic)
		p.parts[r.Topic] = tp
	}
	pick := func() int {
		if bp, ok := tp.(kgo.TopicBackupPartitioner); ok {
			return bp.PartitionByBackup(r, n, &backupIter{p: p, topic: r.Topic, n: n})
		}
		return tp.Partition(r, n)
	}
	part := pick()
	if nb, ok := tp.(kgo.TopicPartitionerOnNewBatch); ok && part >= 0 && part < n && len(p.buf[topicPartition{r.Topic, int32(part)}]) == 0 {
		nb.OnNewBatch()
		part = pick()
	}
	if part < 0 || part >= n {
		return -1, fmt.Errorf("twopc: partitioner chose partition %d of %s's %d", part, r.Topic, n)
	}
	return int32(part), nil
}

// backupIter walks a topic's partitions with their buffered record counts, for kgo's
// least-backup partitioners.
type backupIter struct {
	p     *Producer
	topic string
	n, i  int
}

func (it *backupIter) Next() (int, int64) {
	i := it.i
	it.i++
	var buffered int64
	for _, b := range it.p.buf[topicPartition{it.topic, int32(i)}] {
		buffered += int64(len(b.recs))
	}
	return i, buffered
}

func (it *backupIter) Rem() int { return it.n - it.i }

// recordSize bounds r's encoded size in a batch: varints at their longest.
func recordSize(r *kgo.Record) int {
	n := 5 + 1 + 10 + 5 + 5 + len(r.Key) + 5 + len(r.Value) + 5
	for _, h := range r.Headers {
		n += 5 + len(h.Key) + 5 + len(h.Value)
	}
	return n
}

// flush sends the buffered batches until each is written or failed (p.mu held). Every
// round sends one Produce request per leader carrying the first batch of each partition;
// a batch whose answer is retriable goes again in the next round, after a backoff.
func (p *Producer) flush(ctx context.Context) ([]completion, error) {
	if len(p.buf) == 0 {
		return nil, p.txn.err()
	}
	if err := p.txn.sendErr(); err != nil {
		return p.failBuffered(err), err
	}
	if err := p.bumpEpoch(ctx); err != nil {
		if p.txn.fatal != nil {
			return p.failBuffered(p.txn.fatal), p.txn.fatal
		}
		return nil, err
	}
	var done []completion
	for round, retried := 0, false; len(p.buf) > 0; round++ {
		if retried {
			if err := sleep(ctx, p.backoff(round)); err != nil {
				return done, err
			}
		}
		if err := p.addPartitions(ctx); err != nil {
			if !isKafkaErr(err) {
				return done, err
			}
			err = p.txn.fail(fmt.Errorf("twopc: adding partitions to the transaction: %w", err))
			return append(done, p.failBuffered(err)...), err
		}
		byLeader, err := p.leaders(ctx)
		if err != nil {
			if !isKafkaErr(err) {
				return done, err
			}
			err = p.txn.fail(err)
			return append(done, p.failBuffered(err)...), err
		}
		results := p.sendAll(ctx, byLeader)
		// Answers lost to ctx leave their batches buffered with their sequences: the next
		// Flush resends them and the broker de-duplicates what was written.
		interrupted := ctx.Err() != nil
		var applied []completion
		applied, retried = p.apply(results, interrupted)
		done = append(done, applied...)
		if interrupted {
			return done, ctx.Err()
		}
		if err := p.txn.err(); err != nil {
			return append(done, p.failBuffered(err)...), err
		}
	}
	return done, nil
}

// failBuffered completes every buffered record with err (p.mu held). A batch that was
// already sent may be written or not: sequences are then out of step, so the epoch is
// bumped after the abort.
func (p *Producer) failBuffered(err error) []completion {
	var done []completion
	for tp, q := range p.buf {
		for _, b := range q {
			if b.seqFor != noProducerID {
				p.txn.bump = true
			}
			done = append(done, b.complete(-1, p.id, err)...)
		}
		delete(p.buf, tp)
	}
	return done
}

// complete finishes every record of b: offsets from base on success.
func (b *pendingBatch) complete(base int64, id producerID, err error) []completion {
	done := make([]completion, len(b.recs))
	for i, r := range b.recs {
		if err == nil {
			r.Offset = -1
			if base >= 0 {
				r.Offset = base + int64(i)
			}
			r.ProducerID, r.ProducerEpoch = id.id, id.epoch
		}
		done[i] = completion{r: r, promise: b.promises[i], err: err}
	}
	return done
}

// leaders groups the partitions with buffered records by their leaders' node ids.
func (p *Producer) leaders(ctx context.Context) (map[int32][]topicPartition, error) {
	topics := make([]string, 0, len(p.buf))
	seen := map[string]bool{}
	for tp := range p.buf {
		if !seen[tp.topic] {
			seen[tp.topic] = true
			topics = append(topics, tp.topic)
		}
	}
	metas, err := p.metadata(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := map[int32][]topicPartition{}
	for tp := range p.buf {
		ls := metas[tp.topic].leaders
		if int(tp.partition) >= len(ls) {
			return nil, fmt.Errorf("twopc: %s[%d]: %w", tp.topic, tp.partition, kerr.UnknownTopicOrPartition)
		}
		out[ls[tp.partition]] = append(out[ls[tp.partition]], tp)
	}
	return out, nil
}

// partResult is one partition's answer to a Produce request.
type partResult struct {
	tp   topicPartition
	base int64
	err  error
}

// sendAll sends one Produce request to each leader at once and gathers the answers.
func (p *Producer) sendAll(ctx context.Context, byLeader map[int32][]topicPartition) []partResult {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out []partResult
	)
	for leader, tps := range byLeader {
		sortPartitions(tps)
		req, err := p.produceRequest(tps)
		if err != nil {
			for _, tp := range tps {
				out = append(out, partResult{tp: tp, base: -1, err: err})
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := p.send(ctx, leader, req, tps)
			mu.Lock()
			out = append(out, res...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// produceRequest encodes one batch per partition of tps, assigning sequences to batches
// sent for the first time under the current producer id (p.mu held; the caller holds it
// across sendAll, whose goroutines only read the request).
func (p *Producer) produceRequest(tps []topicPartition) (*cappedProduce, error) {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &p.txnID
	req.Acks = -1
	req.TimeoutMillis = int32(min(p.produceTimeout.Milliseconds(), math.MaxInt32))
	for _, tp := range tps {
		b := p.buf[tp][0]
		if b.seqFor != p.id {
			b.seq, b.seqFor = p.seqs[tp], p.id
			p.seqs[tp] = nextSequence(b.seq, int32(len(b.recs)))
		}
		enc, err := b.encode(p.id, p.codec)
		if err != nil {
			return nil, fmt.Errorf("%w for %s[%d]: %w", errEncode, tp.topic, tp.partition, err)
		}
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.topic {
			t := kmsg.NewProduceRequestTopic()
			t.Topic = tp.topic
			req.Topics = append(req.Topics, t)
		}
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = tp.partition
		pp.Records = enc
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, pp)
	}
	max := int16(tv2MaxProduce)
	if !p.txn.v2 {
		max = tv1MaxProduce
	}
	return &cappedProduce{ProduceRequest: req, max: max}, nil
}

// encode is b as a v2 record batch, transactional, compressed with codec.
func (b *pendingBatch) encode(id producerID, codec int8) ([]byte, error) {
	first := b.recs[0].Timestamp.UnixMilli()
	recs := make([]kmsg.Record, len(b.recs))
	for i, r := range b.recs {
		recs[i] = kmsg.Record{TimestampDelta64: r.Timestamp.UnixMilli() - first, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			recs[i].Headers = append(recs[i].Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
	}
	h := batch.NoProducer(0, first)
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = id.id, id.epoch, b.seq
	h.Attributes |= batch.AttrTransactional
	return batch.Encode(nil, h, recs, codec)
}

// send writes req to leader and reads each partition's answer. A transport error is
// every partition's answer: the batches may or may not be written.
func (p *Producer) send(ctx context.Context, leader int32, req *cappedProduce, tps []topicPartition) []partResult {
	out := make([]partResult, 0, len(tps))
	resp, err := p.cl.Broker(int(leader)).RetriableRequest(ctx, req)
	if err != nil {
		for _, tp := range tps {
			out = append(out, partResult{tp: tp, base: -1, err: err})
		}
		return out
	}
	answered := map[topicPartition]partResult{}
	for _, t := range resp.(*kmsg.ProduceResponse).Topics {
		for _, pp := range t.Partitions {
			tp := topicPartition{t.Topic, pp.Partition}
			answered[tp] = partResult{tp: tp, base: pp.BaseOffset, err: kerrWithMessage(pp.ErrorCode, pp.ErrorMessage)}
		}
	}
	for _, tp := range tps {
		r, ok := answered[tp]
		if !ok {
			r = partResult{tp: tp, base: -1, err: fmt.Errorf("twopc: produce response from broker %d lacks %s[%d]: %w", leader, tp.topic, tp.partition, kerr.UnknownServerError)}
		}
		out = append(out, r)
	}
	return out
}

// kerrWithMessage is the kerr error of code, with the broker's message when it sent one.
func kerrWithMessage(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// apply judges each partition's answer (p.mu held): written batches complete, retriable
// ones stay buffered for the next round (retried reports whether there is one), failed
// ones fail the transaction. With interrupted, answers that are not the broker's (ctx
// ended) leave their batches as they are.
func (p *Producer) apply(results []partResult, interrupted bool) (done []completion, retried bool) {
	for _, res := range results {
		b := p.buf[res.tp][0]
		switch v := judge(res.err); {
		case v == written:
			base := res.base
			if errors.Is(res.err, kerr.DuplicateSequenceNumber) {
				base = -1 // written by an earlier attempt whose answer was lost
			}
			done = append(done, b.complete(base, p.id, nil)...)
			p.pop(res.tp)
		case interrupted && !isKafkaErr(res.err):
		case v == retry && b.attempts < p.retries:
			b.attempts++
			retried = true
			p.staleMeta = p.staleMeta || leadershipErr(res.err)
		default:
			err := res.err
			if v == retry {
				err = fmt.Errorf("giving up after %d attempts: %w", b.attempts+1, err)
			}
			// The batch may be written or not, or its sequence is used up: later
			// sequences of the partition would not line up.
			p.txn.bump = true
			err = p.txn.fail(fmt.Errorf("twopc: producing to %s[%d]: %w", res.tp.topic, res.tp.partition, err))
			done = append(done, b.complete(-1, p.id, err)...)
			p.pop(res.tp)
		}
	}
	return done, retried
}

// sortPartitions orders tps by topic, then partition: requests list them so.
func sortPartitions(tps []topicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
}

// pop removes the first batch of tp.
func (p *Producer) pop(tp topicPartition) {
	q := p.buf[tp]
	q[0] = nil
	if q = q[1:]; len(q) == 0 {
		delete(p.buf, tp)
	} else {
		p.buf[tp] = q
	}
}

type verdict uint8

const (
	written verdict = iota
	retry
	failed
)

// errEncode marks a batch that could not be encoded: encoding it again fails again.
var errEncode = errors.New("twopc: encoding a batch")

// judge decides what a partition's answer means for its batch:
//   - DUPLICATE_SEQUENCE_NUMBER: an earlier attempt was written and its answer lost.
//   - leadership and topic errors: refresh metadata and resend (same sequence).
//   - transport errors: the batch may be written or not; resending the same sequence is
//     safe, the broker de-duplicates it.
//   - CONCURRENT_TRANSACTIONS: under transactions v2 the leader adds the partition to the
//     transaction and the previous transaction's markers are still being written; Java
//     resends too.
//   - fencing (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...) fails the batch, and the
//     transaction classifies it as fatal; a closed kgo client, a batch that cannot be
//     encoded and everything else not retriable fail it too.
func judge(err error) verdict {
	switch {
	case err == nil, errors.Is(err, kerr.DuplicateSequenceNumber):
		return written
	case isFatal(err), errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID),
		errors.Is(err, kgo.ErrClientClosed), errors.Is(err, errEncode):
		return failed
	case leadershipErr(err), !isKafkaErr(err), kerr.IsRetriable(err), errors.Is(err, kerr.ConcurrentTransactions):
		return retry
	}
	return failed
}

// leadershipErr reports answers after which the partition's leader must be looked up
// again.
func leadershipErr(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) ||
		errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.LeaderNotAvailable) ||
		errors.Is(err, kerr.FencedLeaderEpoch) ||
		errors.Is(err, kerr.UnknownLeaderEpoch) ||
		errors.Is(err, kerr.KafkaStorageError) ||
		errors.Is(err, kerr.NotEnoughReplicas) ||
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend) ||
		!isKafkaErr(err)
}

// nextSequence adds n to a sequence number the way Kafka does: sequences wrap from
// MaxInt32 to 0 (Java's DefaultRecordBatch.incrementSequence).
func nextSequence(seq int32, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}
