package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const consumeUsage = `Usage: exactq consume TOPIC [flags]

Prints records to stdout, one --format per record, written out after every fetch. Without
-f it stops at the end offsets it read when it started. SIGINT stops it cleanly.

      --from WHERE          beginning (default), end, OFFSET, -N (N before the end) or
                            @TIMESTAMP (ms: the first record at or after it); per partition
  -p, --partition N         only partition N (default: every partition)
  -f, --follow              keep waiting for new records
  -n, --count N             stop after N records
      --format TEMPLATE     kcat -f style (default "%v\n"): %t topic, %p partition,
                            %o offset, %T timestamp ms, %k key, %v (or %s) value,
                            %K / %S key / value length (-1: null), %h headers k=v,k=v,
                            %% a percent sign; \n \t \r \\ escapes
      --isolation LEVEL     read_uncommitted (default) or read_committed
  -q, --quiet               no status lines on stderr
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`

// startPos is a parsed --from.
type startPos struct {
	kind  byte  // 'b' beginning, 'e' end, 'o' offset, 'r' relative to the end, 't' timestamp
	value int64 // the offset, the distance before the end, or the timestamp in ms
}

func parseFrom(s string) (startPos, error) {
	switch s {
	case "beginning", "earliest", "start":
		return startPos{kind: 'b'}, nil
	case "end", "latest":
		return startPos{kind: 'e'}, nil
	}
	if ts, ok := strings.CutPrefix(s, "@"); ok {
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ms < 0 {
			return startPos{}, usagef("--from %q: want @ and a timestamp in milliseconds", s)
		}
		return startPos{kind: 't', value: ms}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return startPos{}, usagef("--from %q: want beginning, end, an offset, -N or @timestamp-ms", s)
	}
	if n < 0 {
		return startPos{kind: 'r', value: -n}, nil
	}
	return startPos{kind: 'o', value: n}, nil
}

type consumeOptions struct {
	topic     string
	from      startPos
	partition int32 // -1: all
	follow    bool
	count     int64 // 0: no limit
	format    recordFormat
	committed bool // read_committed
	quiet     bool
}

func parseConsumeArgs(args []string, stdout io.Writer) (*cmdFlags, consumeOptions, error) {
	f := newCmdFlags("consume", consumeUsage, stdout)
	var from, format, iso string
	var partition int
	var count int64
	var follow, quiet bool
	f.StringVar(&from, "from", "beginning", "")
	f.IntVarP(&partition, "partition", "p", -1, "")
	f.BoolVarP(&follow, "follow", "f", false, "")
	f.Int64VarP(&count, "count", "n", 0, "")
	f.StringVar(&format, "format", `%v\n`, "")
	f.StringVar(&iso, "isolation", "read_uncommitted", "")
	f.BoolVarP(&quiet, "quiet", "q", false, "")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return nil, consumeOptions{}, err
	}
	o := consumeOptions{topic: pos[0], follow: follow, count: count, quiet: quiet}
	if o.from, err = parseFrom(from); err != nil {
		return nil, o, err
	}
	if partition < -1 || partition > 1<<31-1 {
		return nil, o, usagef("--partition %d: want a partition number", partition)
	}
	o.partition = int32(partition)
	if count < 0 {
		return nil, o, usagef("-n %d: want a count of at least 1", count)
	}
	if o.format, err = parseFormat(format); err != nil {
		return nil, o, err
	}
	switch iso {
	case "read_uncommitted":
	case "read_committed":
		o.committed = true
	default:
		return nil, o, usagef("--isolation %q: want read_uncommitted or read_committed", iso)
	}
	return f, o, nil
}

// runConsume runs "exactq consume TOPIC".
func runConsume(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f, o, err := parseConsumeArgs(args, stdout)
	if err != nil {
		return err
	}
	status := stderr
	if o.quiet {
		status = io.Discard
	}
	starts, ends, err := resolveOffsets(ctx, f, o)
	if err != nil {
		return err
	}
	assignment := make(map[int32]kgo.Offset, len(starts))
	for _, p := range sortedPartitions(starts) {
		assignment[p] = kgo.NewOffset().At(starts[p])
		if o.follow {
			fmt.Fprintf(status, "%% consuming %s [%d] from offset %d, following\n", o.topic, p, starts[p])
		} else {
			fmt.Fprintf(status, "%% consuming %s [%d] from offset %d to %d\n", o.topic, p, starts[p], ends[p])
		}
	}
	iso := kgo.ReadUncommitted()
	if o.committed {
		iso = kgo.ReadCommitted()
	}
	c, err := newKgo(f,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: assignment}),
		kgo.FetchIsolationLevel(iso),
		// Control records (transaction markers) tell consumeLoop how far a partition was
		// read; they are not printed.
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return err
	}
	defer c.Close()
	prober, err := newKgo(f) // connects only when probeEnd runs
	if err != nil {
		return err
	}
	defer prober.Close()
	n, err := consumeLoop(ctx, c, prober, o, starts, ends, stdout)
	fmt.Fprintf(status, "%% consumed %d records\n", n)
	return err
}

// resolveOffsets returns each chosen partition's start offset and the end offset (high
// watermark, or last stable offset for read_committed) read now.
func resolveOffsets(ctx context.Context, f *cmdFlags, o consumeOptions) (starts, ends map[int32]int64, err error) {
	adm, err := newAdmin(f)
	if err != nil {
		return nil, nil, err
	}
	defer adm.Close()
	details, err := describeTopics(ctx, adm, o.topic)
	if err != nil {
		return nil, nil, topicErr(err)
	}
	var parts []int32
	for _, d := range details {
		for _, p := range d.Partitions.Numbers() {
			if o.partition < 0 || p == o.partition {
				parts = append(parts, p)
			}
		}
	}
	if len(parts) == 0 {
		if o.partition >= 0 {
			return nil, nil, fmt.Errorf("topic %s has no partition %d", o.topic, o.partition)
		}
		return nil, nil, fmt.Errorf("topic %s has no partitions", o.topic)
	}
	pick := offsetsOf(o.topic, parts)
	firsts, err := pick(adm.ListStartOffsets(ctx, o.topic))
	if err != nil {
		return nil, nil, err
	}
	listEnds := adm.ListEndOffsets // the high watermark
	if o.committed {
		listEnds = adm.ListCommittedOffsets // the last stable offset
	}
	if ends, err = pick(listEnds(ctx, o.topic)); err != nil {
		return nil, nil, err
	}
	var atTime map[int32]int64
	if o.from.kind == 't' {
		if atTime, err = pick(adm.ListOffsetsAfterMilli(ctx, o.from.value, o.topic)); err != nil {
			return nil, nil, err
		}
	}
	starts = make(map[int32]int64, len(parts))
	for _, p := range parts {
		first, end := firsts[p], ends[p]
		var s int64
		switch o.from.kind {
		case 'b':
			s = first
		case 'e':
			s = end
		case 'o':
			s = o.from.value
		case 'r':
			s = end - o.from.value
		case 't':
			s = atTime[p]
			if s < 0 { // no record at or after the timestamp
				s = end
			}
		}
		starts[p] = min(max(s, first), end) // an offset outside the log starts at its edge
	}
	return starts, ends, nil
}

// probeIdle is how long consumeLoop waits for records before it probes the partitions
// not yet read to their end.
const probeIdle = time.Second

// consumeLoop polls and writes records until the end offsets (unless following), the
// count, ctx's cancellation (not an error) or a failure, and returns the records written.
//
// kgo does not say how far it has read a partition, and the last offsets before an end
// may hold no record a consumer gets: transaction markers, or records of aborted
// transactions under read_committed. So the consumer keeps control records (not printed)
// and a partition is done once a record or marker at or past its end's last offset
// arrived. Aborted records directly before a read_committed end whose abort marker lies
// past it (behind a transaction still open) never show such an offset: when no record came
// for probeIdle, probeEnd reads the rest below the end itself, with prober: not c, whose
// fetch connection is busy with c's own long polls.
func consumeLoop(ctx context.Context, c, prober *kgo.Client, o consumeOptions, starts, ends map[int32]int64, stdout io.Writer) (int64, error) {
	pending := map[int32]int64{} // partitions not yet read up to their end offset: the next offset
	if !o.follow {
		for p, end := range ends {
			if starts[p] < end {
				pending[p] = starts[p]
			}
		}
		if len(pending) == 0 {
			return 0, nil
		}
	}
	var written int64
	var buf []byte
	for {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if !o.follow {
			pollCtx, cancel = context.WithTimeout(ctx, probeIdle)
		}
		fetches := c.PollFetches(pollCtx)
		idle := pollCtx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return written, nil // interrupted: a clean stop
		case idle:
			for p, next := range pending {
				after, err := probeEnd(ctx, prober, o, p, next, ends[p])
				switch {
				case err != nil:
					return written, err
				case after >= ends[p]:
					delete(pending, p)
				default:
					pending[p] = after
				}
			}
			if len(pending) == 0 {
				return written, nil
			}
			continue
		}
		if err := fetchErr(fetches); err != nil {
			return written, err
		}
		buf = buf[:0]
		limitHit := false
		for _, r := range fetches.Records() {
			if !o.follow {
				if next, ok := pending[r.Partition]; ok {
					pending[r.Partition] = max(next, r.Offset+1)
				}
				if r.Offset >= ends[r.Partition]-1 {
					delete(pending, r.Partition)
				}
				if r.Offset >= ends[r.Partition] {
					continue // past the end offset read at start
				}
			}
			if r.Attrs.IsControl() || limitHit {
				continue
			}
			buf = o.format.appendRecord(buf, r)
			written++
			limitHit = o.count > 0 && written == o.count
		}
		if len(buf) > 0 {
			if _, err := stdout.Write(buf); err != nil {
				return written, err
			}
		}
		if limitHit || (!o.follow && len(pending) == 0) {
			return written, nil
		}
	}
}

// probeEnd returns how far partition p holds nothing the consumer delivers (aborted
// records and markers only) from offset next on: where the batches of one Fetch of its own
// (no session) from next end when they hold no such record below end, next itself when
// they do (the consumer delivers those) or when it learns nothing. It decodes the answer as
// kgo does: kgo.ProcessFetchPartition drops aborted records under read_committed and says
// where the batches end.
func probeEnd(ctx context.Context, cl *kgo.Client, o consumeOptions, p int32, next, end int64) (int64, error) {
	details, err := kadm.NewClient(cl).ListTopics(ctx, o.topic)
	if err != nil {
		return next, err
	}
	d := details[o.topic]
	leader, ok := d.Partitions[p]
	if d.Err != nil || !ok || leader.Leader < 0 {
		return next, nil // the consumer sees the same and reports it
	}
	iso := kgo.ReadUncommitted()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.SessionEpoch, req.MaxBytes = -1, -1, 1<<20
	req.MaxWaitMillis, req.MinBytes = 0, 0 // answer at once
	if o.committed {
		iso, req.IsolationLevel = kgo.ReadCommitted(), 1
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = o.topic, d.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, next, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(int(leader.Leader)).Request(ctx, req)
	if err != nil {
		return next, err
	}
	for _, t := range kresp.(*kmsg.FetchResponse).Topics {
		for i := range t.Partitions {
			part := &t.Partitions[i]
			if part.Partition != p || part.ErrorCode != 0 {
				continue
			}
			fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				KeepControlRecords: true, Offset: next, IsolationLevel: iso, Topic: o.topic, Partition: p,
			}, part, kgo.DefaultDecompressor(), nil)
			for _, r := range fp.Records {
				if r.Offset < end && !r.Attrs.IsControl() {
					return next, nil // for the consumer to deliver
				}
			}
			return max(after, next), nil
		}
	}
	return next, nil
}

func sortedPartitions(m map[int32]int64) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
