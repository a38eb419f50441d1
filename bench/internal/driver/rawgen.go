package driver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Generators of P1/P2 load (-generator).
const (
	GenKgo = "kgo" // one franz-go kgo client: records built, batched, compressed-or-not and decoded by the client
	GenRaw = "raw" // pre-encoded batches and header-only fetch counting: the broker bounds it
)

// RawConfig tunes the raw generator; zero fields take the defaults below.
type RawConfig struct {
	Conns      int // connections to the broker (default 2)
	InFlight   int // produce requests in flight per connection (default 4)
	BatchBytes int // produce: bytes per record batch at most (default 1000000, kgo's default)
	// Fetch: MaxBytes per request (default 50 MiB) and per partition (default 1 MiB), kgo's
	// defaults, so the raw consumer asks for what the kgo consumer asks for.
	FetchMaxBytes, PartitionMaxBytes int32
	// CRCEvery: the consumer checks the CRC of one batch in this many (default 16), and
	// of every partition's first batch.
	CRCEvery int
	// Idempotent makes the producer idempotent, as P1 is defined: one producer id
	// (InitProducerID), each partition's batches on one connection (sequences must arrive
	// in order), and per request its base sequence written and its CRC recomputed. Off,
	// every request of a size sends the very same batch bytes.
	Idempotent bool
}

func (c RawConfig) withDefaults() RawConfig {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&c.Conns, 2)
	def(&c.InFlight, 4)
	def(&c.BatchBytes, 1000000)
	def(&c.CRCEvery, 16)
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = 50 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	return c
}

// rawTopic is what the raw generator needs to know of a topic: its id and the one broker
// that leads every partition (the bench runs single-broker clusters).
type rawTopic struct {
	id         [16]byte
	partitions int32
	leader     string
}

func lookupRawTopic(ctx context.Context, brokers []string, topic string) (rawTopic, error) {
	cl, adm, err := newAdmin(brokers)
	if err != nil {
		return rawTopic{}, err
	}
	defer cl.Close()
	md, err := adm.Metadata(ctx, topic)
	if err == nil {
		err = md.Topics.Error()
	}
	if err != nil {
		return rawTopic{}, fmt.Errorf("bench: metadata for %s: %w", topic, err)
	}
	td := md.Topics[topic]
	rt := rawTopic{id: td.ID, partitions: int32(len(td.Partitions))}
	leader := int32(-1)
	for _, p := range td.Partitions {
		if leader >= 0 && p.Leader != leader {
			return rawTopic{}, fmt.Errorf("bench: the raw generator needs every partition of %s on one broker, it has leaders %d and %d", topic, leader, p.Leader)
		}
		leader = p.Leader
	}
	for _, b := range md.Brokers {
		if b.NodeID == leader {
			rt.leader = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	if rt.leader == "" || rt.partitions == 0 {
		return rawTopic{}, fmt.Errorf("bench: no leader for %s in the metadata", topic)
	}
	return rt, nil
}

// rawSend is one produce request: a batch of records into partition.
type rawSend struct {
	partition int32
	records   int
}

// rawPlan splits records over partitions (the first ones get one more when they do not
// divide) into batches of at most perBatch, in round-robin order over the partitions.
func rawPlan(records int, partitions int32, perBatch int) []rawSend {
	left := make([]int, partitions)
	for p := range left {
		left[p] = records / int(partitions)
		if p < records%int(partitions) {
			left[p]++
		}
	}
	var out []rawSend
	for more := true; more; {
		more = false
		for p := range left {
			if n := min(left[p], perBatch); n > 0 {
				out = append(out, rawSend{int32(p), n})
				left[p] -= n
				more = more || left[p] > 0
			}
		}
	}
	return out
}

// producePrefix is a Produce request framed for one batch, split around the batch: the
// bytes before it (size, header with the correlation id at frameCorrOff, body up to the
// batch's length) and after it (the flexible versions' three empty tag buffers), so a
// request is written as prefix, the shared batch, suffix with no copy of the batch.
type producePrefix struct {
	prefix, suffix []byte
}

// frameCorrOff is where the correlation id sits in a framed request: after the size and
// the API key and version.
const frameCorrOff = 8

func newProducePrefix(rc *rawConn, topic string, rt rawTopic, partition int32, batch []byte) (producePrefix, error) {
	req := kmsg.NewPtrProduceRequest()
	if err := rc.negotiate(req); err != nil {
		return producePrefix{}, err
	}
	req.Acks, req.TimeoutMillis = -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic, t.TopicID = topic, rt.id
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = partition, batch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	frame := rc.fmt.AppendRequest(nil, req, 0)
	suffix := 0
	if req.IsFlexible() {
		suffix = 3 // the partition's, the topic's and the request's tag buffers, all empty
	}
	at := len(frame) - suffix - len(batch)
	if at < 0 || !bytes.Equal(frame[at:at+len(batch)], batch) {
		return producePrefix{}, errors.New("bench: the Produce request does not end with its batch")
	}
	return producePrefix{prefix: frame[:at:at], suffix: frame[at+len(batch):]}, nil
}

// RawProduce is P1 with the raw generator: the batches are encoded once before the clock
// starts (one per batch size; nothing in a non-idempotent batch depends on its partition or
// request; idempotent, one copy per partition and size with the producer id set), then
// Conns connections each keep up to InFlight acks=all Produce requests in flight, rewriting
// only the correlation id of a request (idempotent: and the batch's base sequence and CRC).
// Latency is per request, from writing it to reading its answer. Every partition answer
// must carry no error.
func RawProduce(ctx context.Context, cfg ProduceConfig, rc RawConfig) (ProduceResult, error) {
	rc = rc.withDefaults()
	if cfg.Records <= 0 || cfg.RecordBytes < 0 || cfg.Partitions <= 0 {
		return ProduceResult{}, fmt.Errorf("bench: bad produce config %+v", cfg)
	}
	if cfg.Rate > 0 {
		return ProduceResult{}, errors.New("bench: the raw generator is not paced (-rate is for kgo)")
	}
	if err := ensureTopic(ctx, cfg.Brokers, cfg.Topic, cfg.Partitions); err != nil {
		return ProduceResult{}, err
	}
	rt, err := lookupRawTopic(ctx, cfg.Brokers, cfg.Topic)
	if err != nil {
		return ProduceResult{}, err
	}
	value := make([]byte, cfg.RecordBytes)
	_, _ = rand.Read(value)
	perBatch := max(1, (rc.BatchBytes-batchHeaderBytes)/recordSize(value, cfg.Records))
	plan := rawPlan(cfg.Records, rt.partitions, perBatch)
	ts := time.Now().UnixMilli()
	batches := map[int][]byte{}
	for _, s := range plan {
		if batches[s.records] == nil {
			batches[s.records] = encodeBatch(s.records, value, ts)
		}
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	conns := make([]*rawConn, rc.Conns)
	for i := range conns {
		if conns[i], err = dialRaw(ctx, rt.leader); err != nil {
			return ProduceResult{}, err
		}
		defer conns[i].Close()
	}
	if err := waitLeading(ctx, conns[0], cfg.Topic, rt.partitions); err != nil {
		return ProduceResult{}, err
	}
	var producer producerID
	if rc.Idempotent {
		if producer, err = initProducerID(conns[0]); err != nil {
			return ProduceResult{}, err
		}
	}
	// Which sends each connection makes, in plan order: idempotent, a partition's all on
	// one connection; otherwise dealt round robin.
	mine := make([][]rawSend, len(conns))
	for j, sd := range plan {
		i := j % len(conns)
		if rc.Idempotent {
			i = int(sd.partition) % len(conns)
		}
		mine[i] = append(mine[i], sd)
	}
	// Each connection's framed prefixes and batches, by partition and batch size, built
	// before the clock.
	type prefixKey struct {
		partition int32
		records   int
	}
	type framed struct {
		producePrefix
		batch []byte
	}
	frames := make([]map[prefixKey]framed, len(conns))
	for i, c := range conns {
		frames[i] = map[prefixKey]framed{}
		for _, sd := range mine[i] {
			k := prefixKey{sd.partition, sd.records}
			if _, ok := frames[i][k]; ok {
				continue
			}
			f := framed{batch: batches[k.records]}
			if rc.Idempotent {
				f.batch = bytes.Clone(f.batch)
				stampProducer(f.batch, producer)
			}
			if f.producePrefix, err = newProducePrefix(c, cfg.Topic, rt, k.partition, f.batch); err != nil {
				return ProduceResult{}, err
			}
			frames[i][k] = f
		}
	}

	var acked atomic.Int64
	stopProgress := startProgress(cfg.Progress, func() int { return int(acked.Load()) })
	var mu sync.Mutex
	lat := make([]time.Duration, 0, len(plan))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		type pending struct {
			corr    int32
			sent    time.Time
			records int
		}
		// slots bounds the requests in flight: the writer takes one before it writes, the
		// reader gives it back with the answer; inflight never blocks.
		slots := make(chan struct{}, rc.InFlight)
		inflight := make(chan pending, rc.InFlight)
		wg.Add(2)
		go func() { // writer: one request at a time, at most InFlight unanswered
			defer wg.Done()
			defer close(inflight)
			seq := map[int32]int32{} // idempotent: each partition's next base sequence
			for _, sd := range mine[i] {
				f := frames[i][prefixKey{sd.partition, sd.records}]
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				if rc.Idempotent {
					// The previous write of this batch has returned: its bytes are the kernel's.
					stampSequence(f.batch, seq[sd.partition])
					seq[sd.partition] += int32(sd.records)
				}
				c.corr++
				binary.BigEndian.PutUint32(f.prefix[frameCorrOff:], uint32(c.corr))
				inflight <- pending{corr: c.corr, sent: time.Now(), records: sd.records}
				bufs := net.Buffers{f.prefix, f.batch, f.suffix}
				if _, err := bufs.WriteTo(c.c); err != nil {
					cancel(fmt.Errorf("bench: writing a Produce request: %w", err))
					return
				}
			}
		}()
		go func() { // reader: answers in the order written
			defer wg.Done()
			resp := kmsg.NewPtrProduceResponse()
			version := c.versions[kmsg.Produce.Int16()]
			version = min(version, resp.MaxVersion())
			var mine []time.Duration
			defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
			for p := range inflight {
				resp.Default()
				resp.Topics = resp.Topics[:0]
				resp.SetVersion(version)
				if err := c.readAnswer(p.corr, resp); err != nil {
					cancel(fmt.Errorf("bench: reading a Produce answer: %w", err))
					return
				}
				mine = append(mine, time.Since(p.sent))
				if err := produceAnswerErr(resp); err != nil {
					cancel(err)
					return
				}
				acked.Add(int64(p.records))
				<-slots
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if err := context.Cause(ctx); err != nil {
		return ProduceResult{}, err
	}
	if n := acked.Load(); n != int64(cfg.Records) {
		return ProduceResult{}, fmt.Errorf("bench: %d of %d records acknowledged", n, cfg.Records)
	}
	slices.Sort(lat)
	return ProduceResult{
		Records: cfg.Records, Bytes: int64(cfg.Records) * int64(cfg.RecordBytes), Elapsed: elapsed,
		P50: quantile(lat, 0.50), P99: quantile(lat, 0.99), P999: quantile(lat, 0.999), Max: lat[len(lat)-1],
	}, nil
}

// producerID is an idempotent producer's id and epoch.
type producerID struct {
	id    int64
	epoch int16
}

// initProducerID asks the broker for a (non-transactional) producer id.
func initProducerID(c *rawConn) (producerID, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	if err := c.negotiate(req); err != nil {
		return producerID{}, err
	}
	resp := kmsg.NewPtrInitProducerIDResponse()
	if err := c.roundTrip(req, resp); err != nil {
		return producerID{}, fmt.Errorf("bench: InitProducerID: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return producerID{}, fmt.Errorf("bench: InitProducerID: %w", err)
	}
	return producerID{resp.ProducerID, resp.ProducerEpoch}, nil
}

// waitLeading waits, before the clock starts, until the broker leads every partition of
// topic: Kafka's metadata names a leader before that broker's replica manager has the
// partition, and the raw producer does not retry (a retried non-idempotent batch could
// land twice), so it must not send before ListOffsets answers for every partition.
func waitLeading(ctx context.Context, c *rawConn, topic string, partitions int32) error {
	req := kmsg.NewPtrListOffsetsRequest()
	if err := c.negotiate(req); err != nil {
		return err
	}
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	for p := range partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1 // latest
		t.Partitions = append(t.Partitions, lp)
	}
	req.Topics = append(req.Topics, t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := kmsg.NewPtrListOffsetsResponse()
		if err := c.roundTrip(req, resp); err != nil {
			return fmt.Errorf("bench: ListOffsets: %w", err)
		}
		var last error
		n := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					last = fmt.Errorf("partition %d: %w", rp.Partition, err)
				} else {
					n++
				}
			}
		}
		if n == int(partitions) {
			return nil
		}
		if last != nil && !kerr.IsRetriable(last) {
			return fmt.Errorf("bench: ListOffsets of %s: %w", topic, last)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %d of %d partitions of %s led after 30 s (last: %v)", n, partitions, topic, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// produceAnswerErr is the first error a Produce answer carries (nil: every batch appended).
func produceAnswerErr(resp *kmsg.ProduceResponse) error {
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			n++
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("bench: produce to partition %d: %w", p.Partition, err)
			}
		}
	}
	if n != 1 {
		return fmt.Errorf("bench: a Produce answer with %d partitions, want 1", n)
	}
	return nil
}

// rawPartition is a partition the raw consumer reads: its next offset and where to stop.
type rawPartition struct {
	partition int32
	next, end int64
	batches   int
}

// RawConsume is P2 with the raw generator: Conns connections, each owning a share of the
// partitions, issue sessionless Fetch requests (read_uncommitted, kgo's default sizes) one
// at a time from the log start to the end offset listed when the run starts, and count
// records from the batch headers without decoding them. Every batch must start where the
// previous one ended (offsets contiguous: a fresh topic has no gaps), hold LastOffsetDelta+1
// records, and one in CRCEvery (and each partition's first) must pass its CRC: a broker that
// answers garbage fails the run. Bytes are records × recordBytes (values, as in P2 with kgo).
func RawConsume(ctx context.Context, cfg ConsumeConfig, rc RawConfig, recordBytes int) (ConsumeResult, error) {
	rc = rc.withDefaults()
	cl, adm, err := newAdmin(cfg.Brokers)
	if err != nil {
		return ConsumeResult{}, err
	}
	starts, ends, err := offsetRange(ctx, adm, cfg.Topic)
	cl.Close()
	if err != nil {
		return ConsumeResult{}, err
	}
	rt, err := lookupRawTopic(ctx, cfg.Brokers, cfg.Topic)
	if err != nil {
		return ConsumeResult{}, err
	}
	var parts []*rawPartition
	for p, from := range starts {
		if e := ends[p]; e > from {
			parts = append(parts, &rawPartition{partition: p, next: from, end: e})
		}
	}
	if len(parts) == 0 {
		return ConsumeResult{}, errors.New("bench: nothing to consume")
	}
	slices.SortFunc(parts, func(a, b *rawPartition) int { return int(a.partition - b.partition) })
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	n := min(rc.Conns, len(parts))
	conns := make([]*rawConn, n)
	for i := range conns {
		if conns[i], err = dialRaw(ctx, rt.leader); err != nil {
			return ConsumeResult{}, err
		}
		defer conns[i].Close()
	}
	var read atomic.Int64
	stopProgress := startProgress(cfg.Progress, func() int { return int(read.Load()) })
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		var mine []*rawPartition
		for j := i; j < len(parts); j += n {
			mine = append(mine, parts[j])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rawFetchLoop(ctx, c, cfg.Topic, rt, mine, rc, &read); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if err := context.Cause(ctx); err != nil {
		return ConsumeResult{}, err
	}
	records := int(read.Load())
	return ConsumeResult{Records: records, Bytes: int64(records) * int64(recordBytes), Elapsed: elapsed}, nil
}

// rawFetchLoop fetches parts over c until each reaches its end.
func rawFetchLoop(ctx context.Context, c *rawConn, topic string, rt rawTopic, parts []*rawPartition, rc RawConfig, read *atomic.Int64) error {
	req := kmsg.NewPtrFetchRequest()
	if err := c.negotiate(req); err != nil {
		return err
	}
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, rc.FetchMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1 // sessionless: every request names its partitions
	resp := kmsg.NewPtrFetchResponse()
	byPartition := map[int32]*rawPartition{}
	for _, p := range parts {
		byPartition[p.partition] = p
	}
	for len(byPartition) > 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = topic, rt.id
		for _, p := range parts {
			if p.next < p.end {
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p.partition, p.next, rc.PartitionMaxBytes
				t.Partitions = append(t.Partitions, fp)
			}
		}
		req.Topics = append(req.Topics[:0], t)
		frame, corr := c.frameFor(req)
		if _, err := c.c.Write(frame); err != nil {
			return fmt.Errorf("bench: writing a Fetch request: %w", err)
		}
		resp.Default()
		resp.Topics = resp.Topics[:0]
		resp.SetVersion(req.Version)
		if err := c.readAnswer(corr, resp); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("bench: reading a Fetch answer: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("bench: fetch: %w", err)
		}
		for _, rtp := range resp.Topics {
			for _, fp := range rtp.Partitions {
				p := byPartition[fp.Partition]
				if p == nil {
					continue
				}
				if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
					return fmt.Errorf("bench: fetch partition %d at %d: %w", p.partition, p.next, err)
				}
				n, err := countBatches(p, fp.RecordBatches, rc.CRCEvery)
				if err != nil {
					return fmt.Errorf("bench: partition %d: %w", p.partition, err)
				}
				read.Add(n)
				if p.next >= p.end {
					delete(byPartition, p.partition)
				}
			}
		}
	}
	return nil
}

// countBatches counts the records of the whole batches in buf from p.next on, advancing
// p.next, and checks what a broker's answer must satisfy (see RawConsume); records at or
// past p.end are not counted.
func countBatches(p *rawPartition, buf []byte, crcEvery int) (int64, error) {
	var n int64
	for len(buf) > 0 && p.next < p.end {
		v, err := readBatch(buf, p.batches%crcEvery == 0)
		if errors.Is(err, errPartialBatch) {
			break // the answer's size limit cut the last batch off: fetch it again
		}
		if err != nil {
			return n, err
		}
		buf = buf[v.size:]
		p.batches++
		if v.numRecords != v.lastDelta+1 {
			return n, fmt.Errorf("batch at %d: %d records, last offset delta %d", v.base, v.numRecords, v.lastDelta)
		}
		switch {
		case v.last() < p.next:
			continue // before the fetch offset (a broker may answer from the batch's start)
		case v.base > p.next:
			return n, fmt.Errorf("offsets jump from %d to a batch at %d", p.next, v.base)
		}
		last := min(v.last(), p.end-1)
		n += last - p.next + 1
		p.next = last + 1
	}
	return n, nil
}
