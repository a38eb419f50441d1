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

	"github.com/exactq/exactq/client"
	"github.com/twmb/franz-go/pkg/kerr"
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

type produceOptions struct {
	topic     string
	delim     []byte // nil: no key
	partition int32  // -1: the default partitioner
	acks      client.Acks
	codec     client.Compression
	headers   []client.Header
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
		o.acks = client.AcksAll
	case "1":
		o.acks = client.AcksLeader
	case "0":
		o.acks = client.AcksNone
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
		o.headers = append(o.headers, client.Header{Key: kv[0], Value: []byte(kv[1])})
	}
	return f, o, nil
}

func parseCodec(s string) (client.Compression, error) {
	for _, c := range []client.Compression{client.NoCompression, client.Gzip, client.Snappy, client.LZ4, client.Zstd} {
		if strings.EqualFold(s, c.String()) {
			return c, nil
		}
	}
	return 0, usagef("--compression %q: want none, gzip, snappy, lz4 or zstd", s)
}

// runProduce runs "exactq produce TOPIC".
func runProduce(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, o, err := parseProduceArgs(args, stdout)
	if err != nil {
		return err
	}
	cfg := client.ProducerConfig{
		Brokers:     f.brokerList(),
		Net:         netConfig(),
		Acks:        o.acks,
		Compression: o.codec,
	}
	if o.partition >= 0 {
		cfg.Partitioner = client.ManualPartitioner()
	}
	p, err := client.NewProducer(cfg)
	if err != nil {
		return err
	}
	st := newProduceStats()
	readErr := produceLines(ctx, p, o, stdin, st)
	// Lines already read are delivered even after SIGINT: Flush and Close ignore ctx's
	// cancellation and are bounded by the producer's DeliveryTimeout.
	flushErr := p.Flush(context.WithoutCancel(ctx))
	p.Close()
	st.writeSummary(stderr, o.topic)
	switch {
	case st.failed > 0:
		return fmt.Errorf("%d of %d records failed; first error: %w", st.failed, st.failed+st.delivered, produceErr(o.topic, st.firstErr))
	case readErr != nil:
		return fmt.Errorf("reading stdin: %w", readErr)
	}
	return flushErr
}

// produceLines produces stdin's lines until EOF, ctx's cancellation or the first failed
// record, and returns the read error, if any.
func produceLines(ctx context.Context, p *client.Producer, o produceOptions, stdin io.Reader, st *produceStats) error {
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

func makeRecord(o produceOptions, line []byte) *client.Record {
	r := &client.Record{Topic: o.topic, Partition: o.partition, Value: line, Headers: o.headers}
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
}

type partStats struct {
	count    int
	min, max int64 // offsets; -1 when unknown (acks=0)
}

func newProduceStats() *produceStats {
	return &produceStats{failedCh: make(chan struct{}), parts: map[int32]*partStats{}}
}

func (s *produceStats) record(r *client.Record, err error) {
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
	if r.Offset >= 0 {
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

// produceErr explains the failures a user can fix.
func produceErr(topic string, err error) error {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("topic %s does not exist and the broker did not create it (auto.create.topics.enable off?): %w", topic, err)
	case errors.Is(err, client.ErrInvalidPartition):
		return fmt.Errorf("topic %s has no such partition: %w", topic, err)
	}
	return err
}
