package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const produceUsage = `Usage: exactq produce TOPIC [flags] < lines

Each stdin line (without its newline) becomes one record. A summary goes to stderr at the
end; the exit code is 1 if any record failed (reading stops at the first failure). SIGINT
stops reading and delivers the lines already read.

  -k, --key-delimiter SEP   split each line at the first SEP into key and value (a line
                            without SEP is a value with a null key)
      --partition N         produce to partition N (default: by key, sticky without keys)
      --acks all|1|0        acknowledgements to wait for (default all, idempotent)
      --compression C       none, gzip, snappy, lz4 or zstd (default none)
  -H, --header key=value    header added to every record, repeatable
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`

// maxLineBytes bounds one stdin line; longer lines fail the command (the broker's default
// max.message.bytes is 1 MiB, so such a record could not be stored anyway).
const maxLineBytes = 16 << 20

// produceDeliveryTimeout bounds the time from reading a line to its record's delivery
// (kgo's default has no bound: a broker that stays away would hold the command forever).
const produceDeliveryTimeout = 2 * time.Minute

type produceOptions struct {
	topic     string
	delim     []byte // nil: no key
	partition int32  // -1: the default partitioner
	acks      kgo.Acks
	codec     kgo.CompressionCodec
	headers   []kgo.RecordHeader
}

func parseProduceArgs(args []string, stdout io.Writer) (*cmdFlags, produceOptions, error) {
	f := newCmdFlags("produce", produceUsage, stdout)
	var delim, acks, codec string
	var headers listFlag
	var partition int
	f.StringVarP(&delim, "key-delimiter", "k", "", "")
	f.IntVar(&partition, "partition", -1, "")
	f.StringVar(&acks, "acks", "all", "")
	f.StringVar(&codec, "compression", "none", "")
	f.VarP(&headers, "header", "H", "")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return nil, produceOptions{}, err
	}
	o := produceOptions{topic: pos[0], partition: -1}
	if delim != "" {
		o.delim = []byte(delim)
	}
	if partition < -1 || partition > 1<<31-1 {
		return nil, o, usagef("--partition %d: want a partition number", partition)
	}
	o.partition = int32(partition)
	switch acks {
	case "all", "-1":
		o.acks = kgo.AllISRAcks()
	case "1":
		o.acks = kgo.LeaderAck()
	case "0":
		o.acks = kgo.NoAck()
	default:
		return nil, o, usagef("--acks %q: want all, 1 or 0", acks)
	}
	if o.codec, err = parseCodec(codec); err != nil {
		return nil, o, err
	}
	kvs, err := keyValues("--header", headers)
	if err != nil {
		return nil, o, err
	}
	for _, kv := range kvs {
		o.headers = append(o.headers, kgo.RecordHeader{Key: kv[0], Value: []byte(kv[1])})
	}
	return f, o, nil
}

func parseCodec(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(s) {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, usagef("--compression %q: want none, gzip, snappy, lz4 or zstd", s)
}

// runProduce runs "exactq produce TOPIC".
func runProduce(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, o, err := parseProduceArgs(args, stdout)
	if err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.RequiredAcks(o.acks),
		kgo.ProducerBatchCompression(o.codec),
		kgo.RecordDeliveryTimeout(produceDeliveryTimeout),
		// As Kafka's producer does: a broker with auto.create.topics.enable creates a
		// missing topic on the producer's metadata request.
		kgo.AllowAutoTopicCreation(),
	}
	if o.acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite()) // idempotence needs acks=all
	}
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	p, err := newKgo(f, opts...)
	if err != nil {
		return err
	}
	st := newProduceStats()
	st.noAcks = o.acks == kgo.NoAck()
	// kgo retries an unreachable broker until the delivery timeout; fail at once instead
	// when no broker answers at all.
	if err := p.Ping(ctx); err != nil {
		p.Close()
		st.writeSummary(stderr, o.topic)
		return err
	}
	readErr := produceLines(ctx, p, o, stdin, st)
	// Lines already read are delivered even after SIGINT: Flush ignores ctx's cancellation
	// and is bounded by the delivery timeout.
	flushErr := p.Flush(context.WithoutCancel(ctx))
	p.Close()
	st.writeSummary(stderr, o.topic)
	switch {
	case st.failed > 0:
		return fmt.Errorf("%d of %d records failed; first error: %w", st.failed, st.failed+st.delivered, produceErr(ctx, f, o, st.firstErr))
	case readErr != nil:
		return fmt.Errorf("reading stdin: %w", readErr)
	}
	return flushErr
}

// produceLines produces stdin's lines until EOF, ctx's cancellation or the first failed
// record, and returns the read error, if any.
func produceLines(ctx context.Context, p *kgo.Client, o produceOptions, stdin io.Reader, st *produceStats) error {
	// stdin is read on its own goroutine so a signal stops the loop even while a read
	// blocks. That goroutine can outlive the call only while its read blocks; done makes it
	// exit at its next line.
	type line struct {
		b   []byte
		err error
	}
	lines := make(chan line)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), maxLineBytes)
		for sc.Scan() {
			select {
			case lines <- line{b: bytes.Clone(sc.Bytes())}:
			case <-done:
				return
			}
		}
		if err := sc.Err(); err != nil {
			select {
			case lines <- line{err: err}:
			case <-done:
			}
		}
	}()
	cb := st.record
	// Produce blocks while the producer's buffer is full; it must not drop a line already
	// read when ctx is cancelled.
	pctx := context.WithoutCancel(ctx)
	for {
		// A failure or a signal wins over a line that is ready too.
		select {
		case <-ctx.Done():
			return nil
		case <-st.failedCh:
			return nil
		default:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-st.failedCh:
			return nil
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			if l.err != nil {
				return l.err
			}
			p.Produce(pctx, makeRecord(o, l.b), cb)
		}
	}
}

func makeRecord(o produceOptions, line []byte) *kgo.Record {
	r := &kgo.Record{Topic: o.topic, Partition: o.partition, Value: line, Headers: o.headers}
	if o.delim != nil {
		if k, v, ok := bytes.Cut(line, o.delim); ok {
			r.Key, r.Value = k, v
		}
	}
	return r
}

// produceStats counts outcomes; record is the producer callback (run on the producer's
// delivery goroutine), the rest is read after Flush.
type produceStats struct {
	mu        sync.Mutex
	delivered int
	failed    int
	firstErr  error
	failedCh  chan struct{} // closed at the first failure
	parts     map[int32]*partStats
	noAcks    bool // acks=0: the broker reports no offsets (kgo's records then say 0)
}

type partStats struct {
	count    int
	min, max int64 // offsets; -1 when unknown (acks=0)
}

func newProduceStats() *produceStats {
	return &produceStats{failedCh: make(chan struct{}), parts: map[int32]*partStats{}}
}

func (s *produceStats) record(r *kgo.Record, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.failed == 0 {
			s.firstErr = err
			close(s.failedCh)
		}
		s.failed++
		return
	}
	s.delivered++
	ps := s.parts[r.Partition]
	if ps == nil {
		ps = &partStats{min: -1, max: -1}
		s.parts[r.Partition] = ps
	}
	ps.count++
	if !s.noAcks {
		if ps.min < 0 || r.Offset < ps.min {
			ps.min = r.Offset
		}
		ps.max = max(ps.max, r.Offset)
	}
}

func (s *produceStats) writeSummary(w io.Writer, topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(w, "%% produced %d records to %s", s.delivered, topic)
	if s.failed > 0 {
		fmt.Fprintf(w, ", %d failed", s.failed)
	}
	fmt.Fprintln(w)
	ids := make([]int32, 0, len(s.parts))
	for id := range s.parts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		ps := s.parts[id]
		if ps.min < 0 {
			fmt.Fprintf(w, "%%   partition %d: %d records (offsets not reported with acks=0)\n", id, ps.count)
			continue
		}
		fmt.Fprintf(w, "%%   partition %d: %d records, offsets %d..%d\n", id, ps.count, ps.min, ps.max)
	}
}

// errNoPartition: the topic lacks the --partition asked for.
var errNoPartition = errors.New("no such partition")

// produceErr explains the failures a user can fix. kgo fails a record for a partition the
// topic lacks with a plain error, so a failure with --partition asks the brokers whether
// the partition exists.
func produceErr(ctx context.Context, f *cmdFlags, o produceOptions, err error) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("topic %s does not exist and the broker did not create it (auto.create.topics.enable off?): %w", o.topic, err)
	}
	var ke *kerr.Error
	if o.partition < 0 || errors.As(err, &ke) {
		return err
	}
	adm, aerr := newAdmin(f)
	if aerr != nil {
		return err
	}
	defer adm.Close()
	details, derr := describeTopics(ctx, adm, o.topic)
	if derr != nil || len(details) != 1 {
		return err
	}
	if n := len(details[0].Partitions); int(o.partition) >= n {
		return fmt.Errorf("topic %s has %d partitions, no partition %d: %w (%v)", o.topic, n, o.partition, errNoPartition, err)
	}
	return err
}
