package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/exactq/exactq/client"
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
	iso       client.IsolationLevel
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
		o.iso = client.ReadUncommitted
	case "read_committed":
		o.iso = client.ReadCommitted
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
	c, err := client.NewConsumer(client.ConsumerConfig{Brokers: f.brokerList(), Net: netConfig(), IsolationLevel: o.iso})
	if err != nil {
		return err
	}
	defer c.Close()
	assignment := make(map[client.TopicPartition]client.Offset, len(starts))
	for _, p := range sortedPartitions(starts) {
		assignment[client.TopicPartition{Topic: o.topic, Partition: p}] = client.Offset(starts[p])
		if o.follow {
			fmt.Fprintf(status, "%% consuming %s [%d] from offset %d, following\n", o.topic, p, starts[p])
		} else {
			fmt.Fprintf(status, "%% consuming %s [%d] from offset %d to %d\n", o.topic, p, starts[p], ends[p])
		}
	}
	c.Assign(assignment)
	n, err := consumeLoop(ctx, c, o, ends, stdout)
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
	details, err := adm.DescribeTopics(ctx, o.topic)
	if err != nil {
		return nil, nil, topicErr(err)
	}
	var parts []int32
	for _, d := range details {
		for _, p := range d.Partitions {
			if o.partition < 0 || p.Partition == o.partition {
				parts = append(parts, p.Partition)
			}
		}
	}
	if len(parts) == 0 {
		if o.partition >= 0 {
			return nil, nil, fmt.Errorf("topic %s has no partition %d", o.topic, o.partition)
		}
		return nil, nil, fmt.Errorf("topic %s has no partitions", o.topic)
	}
	list := func(spec func(int32) int64) (map[int32]int64, error) {
		specs := make(map[client.TopicPartition]int64, len(parts))
		for _, p := range parts {
			specs[client.TopicPartition{Topic: o.topic, Partition: p}] = spec(p)
		}
		listed, err := adm.ListOffsets(ctx, o.iso, specs)
		if err != nil {
			return nil, fmt.Errorf("list offsets: %w", err)
		}
		out := make(map[int32]int64, len(listed))
		for tp, lo := range listed {
			out[tp.Partition] = lo.Offset
		}
		return out, nil
	}
	firsts, err := list(func(int32) int64 { return int64(client.Earliest) })
	if err != nil {
		return nil, nil, err
	}
	if ends, err = list(func(int32) int64 { return int64(client.Latest) }); err != nil {
		return nil, nil, err
	}
	var atTime map[int32]int64
	if o.from.kind == 't' {
		if atTime, err = list(func(int32) int64 { return o.from.value }); err != nil {
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

// consumeLoop polls and writes records until the end offsets (unless following), the
// count, ctx's cancellation (not an error) or a failure, and returns the records written.
func consumeLoop(ctx context.Context, c *client.Consumer, o consumeOptions, ends map[int32]int64, stdout io.Writer) (int64, error) {
	pending := map[int32]bool{} // partitions not yet read up to their end offset
	if !o.follow {
		for p, end := range ends {
			if pos, _ := c.Position(client.TopicPartition{Topic: o.topic, Partition: p}); pos < end {
				pending[p] = true
			}
		}
		if len(pending) == 0 {
			return 0, nil
		}
	}
	var written int64
	var buf []byte
	for {
		// Poll also returns, without records, after a fetch that only skipped control
		// batches or aborted records, so the positions below reach the end offsets even
		// when the last offsets before them hold no records for us.
		recs, err := c.Poll(ctx)
		switch {
		case ctx.Err() != nil:
			return written, nil // interrupted: a clean stop
		case err != nil:
			return written, err
		}
		buf = buf[:0]
		limitHit := false
		for _, r := range recs {
			if !o.follow && r.Offset >= ends[r.Partition] {
				continue // past the end offset read at start
			}
			buf = o.format.appendRecord(buf, r)
			written++
			if o.count > 0 && written == o.count {
				limitHit = true
				break
			}
		}
		if len(buf) > 0 {
			if _, err := stdout.Write(buf); err != nil {
				return written, err
			}
		}
		if limitHit {
			return written, nil
		}
		if !o.follow {
			for p := range pending {
				if pos, _ := c.Position(client.TopicPartition{Topic: o.topic, Partition: p}); pos >= ends[p] {
					delete(pending, p)
				}
			}
			if len(pending) == 0 {
				return written, nil
			}
		}
	}
}

func sortedPartitions(m map[int32]int64) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
