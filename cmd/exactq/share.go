package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const shareUsage = `Usage:
  exactq share consume TOPIC -g GROUP [--ack accept|release|reject] [--mode explicit|implicit]
                       [-n N] [--format TEMPLATE] [--from-earliest]
  exactq share describe GROUP... [--records --admin http://HOST:PORT]
  exactq share list [--state STATE ...] [-v]
  exactq share reset-offsets -g GROUP --topic TOPIC[:P,P...] (--to-offset N | --to-earliest | --to-latest)
                             [--dry-run]
  exactq share delete-offsets -g GROUP --topic TOPIC [--topic TOPIC ...]

Flags (every subcommand):
  -b, --brokers host:port[,...]   bootstrap brokers (default 127.0.0.1:9092)
`

// shareCommands are the subcommands of "exactq share".
var shareCommands = []subcommand{
	{"consume", shareConsume}, {"describe", quiet(shareDescribe)}, {"list", quiet(shareList)},
	{"reset-offsets", quiet(shareResetOffsets)}, {"delete-offsets", quiet(shareDeleteOffsets)},
}

// runShare runs "exactq share SUBCOMMAND ...".
func runShare(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	return dispatch(ctx, "share", shareUsage, shareCommands, args, stdout, stderr)
}

const shareConsumeUsage = `Usage: exactq share consume TOPIC -g GROUP [flags]

Joins share group GROUP (KIP-932) as one member and prints the records delivered to it, one
--format per record, written out after every poll. The group's members share the topic's
partitions: each record is locked to the member it was delivered to until that member
acknowledges it. Stops after -n records or on SIGINT; closing the member releases the
records it holds unacknowledged (the group delivers them again, with a higher delivery
count).

  -g, --group GROUP         the share group (required)
      --ack TYPE            explicit mode: the acknowledgement of every record, sent once
                            it was written: accept (default: done, never delivered again),
                            release (delivered again, with a higher delivery count, to
                            this member too: without -n it gets the same records again
                            until share.delivery.count.limit archives them) or reject
                            (archived, never delivered again)
      --mode MODE           explicit (default): acknowledge each record with --ack;
                            implicit: the client accepts every record a poll returned on
                            the next poll or on close (--ack must be accept)
  -n, --count N             stop after N records (a fetch acquires at most N, cutting
                            record batches, and none is sent ahead; what a short fetch
                            left over is released)
      --format TEMPLATE     as consume's (default "%v\n"), plus %d: the record's delivery
                            count (1 on its first delivery)
      --from-earliest       first set share.auto.offset.reset=earliest on the group (it
                            applies to share partitions the group has not started yet; by
                            default a group starts at the end of the log)
  -q, --quiet               no status lines on stderr
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`

// shareCloseTimeout bounds closing the share consumer after the last record or SIGINT:
// the acknowledgements go out and the member leaves.
const shareCloseTimeout = 10 * time.Second

func parseAckType(s string) (kgo.AckStatus, error) {
	switch strings.ToLower(s) {
	case "accept":
		return kgo.AckAccept, nil
	case "release":
		return kgo.AckRelease, nil
	case "reject":
		return kgo.AckReject, nil
	}
	return 0, usagef("--ack %q: want accept, release or reject", s)
}

func shareConsume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newCmdFlags("share consume", shareConsumeUsage, stdout)
	var group, ackName, mode, format string
	var count int64
	var fromEarliest, quiet bool
	f.StringVarP(&group, "group", "g", "", "")
	f.StringVar(&ackName, "ack", "accept", "")
	f.StringVar(&mode, "mode", "explicit", "")
	f.Int64VarP(&count, "count", "n", 0, "")
	f.StringVar(&format, "format", `%v\n`, "")
	f.BoolVar(&fromEarliest, "from-earliest", false, "")
	f.BoolVarP(&quiet, "quiet", "q", false, "")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	topic := pos[0]
	if group == "" {
		return usagef("missing -g GROUP")
	}
	ack, err := parseAckType(ackName)
	if err != nil {
		return err
	}
	var implicit bool
	switch mode {
	case "explicit":
	case "implicit":
		implicit = true
		if ack != kgo.AckAccept {
			return usagef("--ack %s needs --mode explicit (implicit mode accepts every record)", ackName)
		}
	default:
		return usagef("--mode %q: want explicit or implicit", mode)
	}
	if count < 0 {
		return usagef("-n %d: want a count of at least 1", count)
	}
	recFormat, err := parseShareFormat(format)
	if err != nil {
		return err
	}
	status := stderr
	if quiet {
		status = io.Discard
	}

	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	// A share consumer waits for a topic that does not exist; say so instead.
	if _, err := describeTopics(ctx, adm, topic); err != nil {
		return topicErr(err)
	}
	if fromEarliest {
		if err := alterGroupConfig(ctx, adm.kgo, group, "share.auto.offset.reset", "earliest"); err != nil {
			return fmt.Errorf("set share.auto.offset.reset=earliest on group %s: %w", group, err)
		}
	}

	// kgo's share consumer, not kgoext's: this command acknowledges every record before it
	// polls again, so kgo's accepting what is unacknowledged at a poll never applies, and
	// it holds no acknowledgement back for a transaction (what kgoext.ShareConsumer is for).
	acks := &shareAckErrors{}
	opts := []kgo.Opt{kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareAckCallback(acks.record)}
	if count > 0 {
		// Acquire no more than is left to print: by default the broker hands out whole
		// record batches and kgo fetches ahead, and every record acquired beyond -n would be
		// released on leaving with its delivery count raised, unprinted; a few such runs
		// and share.delivery.count.limit archives records nobody saw. Strict mode (KIP-1206
		// record limit) cuts batches and fetches only when polled.
		opts = append(opts, kgo.ShareMaxRecords(int32(min(count, 500))), kgo.ShareMaxRecordsStrict())
	}
	cl, err := newKgo(f, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	how := "explicit acknowledgement, " + strings.ToUpper(ack.String())
	if implicit {
		how = "implicit acknowledgement"
	}
	fmt.Fprintf(status, "%% share-consuming %s in group %s (%s)\n", topic, group, how)

	written, loopErr := shareConsumeLoop(ctx, cl, topic, implicit, ack, count, recFormat, stdout)
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shareCloseTimeout)
	defer cancel()
	if implicit {
		cl.MarkAcks(kgo.AckAccept) // the last poll's records; leaving releases unmarked ones
	}
	// The acknowledgements go out (their results reach acks), then the member leaves,
	// releasing the records it holds unacknowledged.
	closeErr := errors.Join(cl.FlushAcks(closeCtx), cl.LeaveGroupContext(closeCtx))
	fmt.Fprintf(status, "%% consumed %d records\n", written)
	if err := acks.err(); err != nil {
		return errors.Join(loopErr, err)
	}
	return errors.Join(loopErr, closeErr)
}

// shareAckErrors collects the partitions whose acknowledgements the brokers refused; record
// is the consumer's ShareAckCallback.
type shareAckErrors struct {
	mu     sync.Mutex
	failed int // partition results with an error
	first  error
}

func (a *shareAckErrors) record(_ *kgo.Client, rs kgo.ShareAckResults) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range rs {
		if r.Err != nil {
			a.failed++
			if a.first == nil {
				a.first = fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err)
			}
		}
	}
}

func (a *shareAckErrors) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.first == nil {
		return nil
	}
	return fmt.Errorf("acknowledgements failed %d times, first: %w", a.failed, a.first)
}

// shareConsumeLoop polls, writes and (explicit mode) acknowledges records until count
// (0: no limit), ctx's cancellation (not an error) or a failure, and returns the records
// written. A record is acknowledged only once written. A poll takes no more records than
// are left to print; those fetched beyond are released when the member leaves. Implicit
// mode leaves the acknowledging to kgo, which accepts a poll's records on the next poll.
func shareConsumeLoop(ctx context.Context, cl *kgo.Client, topic string, implicit bool, ack kgo.AckStatus, count int64, format recordFormat, stdout io.Writer) (int64, error) {
	var written int64
	var buf []byte
	for count == 0 || written < count {
		limit := -1 // PollRecords: no limit
		if count > 0 {
			limit = int(min(count-written, 1<<30))
		}
		fetches := cl.PollRecords(ctx, limit)
		if ctx.Err() != nil {
			return written, nil // interrupted: a clean stop
		}
		if err := fetchErr(fetches); err != nil {
			return written, err
		}
		recs := fetches.Records()
		buf = buf[:0]
		for _, r := range recs {
			buf = format.appendRecord(buf, r)
		}
		if _, err := stdout.Write(buf); err != nil {
			return written, err
		}
		written += int64(len(recs))
		if count > 0 && written >= count {
			// No fetch after the last record: it would acquire again what this member
			// releases below.
			cl.PauseFetchTopics(topic)
		}
		if !implicit {
			for _, r := range recs {
				r.Ack(ack)
			}
		}
	}
	return written, nil
}

// fetchErr is the first error of a poll, naming its partition.
func fetchErr(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if fe.Topic == "" {
			return fe.Err
		}
		return fmt.Errorf("%s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
	}
	return nil
}

const shareDescribeUsage = `Usage: exactq share describe GROUP... [flags]

Describes each share group: its state, epochs and assignor; its members with the
partitions assigned to them (members share partitions); and per share partition the
share-partition start offset (every record before it is acknowledged or archived) and the
lag (records at or after it not yet delivered for good). A partition the group has not
started shows "-".

With --records it also prints, per share partition, the in-flight window as the broker
holds it: offset ranges with their state (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED,
TX_PENDING), delivery count, the member holding them and its lock deadline (ACQUIRED and
TX_PENDING), and for TX_PENDING the producer id and epoch of the transaction that staged
the acknowledgement, its type and the state an abort returns the record to. These come
from GET /v1/share/state on the admin listener of the partition's leader (exactq serve
--metrics-listen); only share partitions loaded since that broker started are listed.

      --records             print the in-flight windows (needs --admin)
      --admin URL           the broker's admin listener, http://HOST:PORT (implies --records)
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`

func shareDescribe(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("share describe", shareDescribeUsage, stdout)
	var records bool
	var adminURL string
	f.BoolVar(&records, "records", false, "")
	f.StringVar(&adminURL, "admin", "", "")
	names, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	var base *url.URL
	if adminURL != "" {
		if base, err = parseAdminURL(adminURL); err != nil {
			return err
		}
		records = true
	} else if records {
		return usagef("--records needs --admin http://HOST:PORT (the broker's --metrics-listen address)")
	}
	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	descs, err := describeShareGroups(ctx, adm, names)
	printed := 0
	return eachAnswer(names, descs, err, func(d shareGroup) error { return d.err }, func(name string, d shareGroup) error {
		offsets, err := describeShareOffsets(ctx, adm, name)
		if err != nil {
			err = fmt.Errorf("%s: share offsets: %w", name, err)
		}
		if printed > 0 {
			fmt.Fprintln(stdout)
		}
		printed++
		if werr := writeShareGroup(stdout, d, offsets); werr != nil || !records {
			return errors.Join(err, werr)
		}
		states, serr := fetchShareState(ctx, base, name)
		if serr != nil {
			return errors.Join(err, fmt.Errorf("%s: in-flight records: %w", name, serr))
		}
		return errors.Join(err, writeShareState(stdout, name, states))
	})
}

// shareGroup is one group of a ShareGroupDescribe answer, with the coordinator that gave
// it.
type shareGroup struct {
	kmsg.ShareGroupDescribeResponseGroup
	coordinator int32
	err         error // the group's error, with the broker's message
}

// describeShareGroups sends ShareGroupDescribe (kgo shards it to the groups'
// coordinators); kadm's DescribeShareGroups drops the broker's error message.
func describeShareGroups(ctx context.Context, adm *admin, groups []string) (map[string]shareGroup, error) {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = groups
	out := map[string]shareGroup{}
	var errs []error
	for _, shard := range adm.kgo.RequestSharded(ctx, req) {
		if shard.Err != nil {
			errs = append(errs, shard.Err)
			continue
		}
		for _, g := range shard.Resp.(*kmsg.ShareGroupDescribeResponse).Groups {
			out[g.GroupID] = shareGroup{ShareGroupDescribeResponseGroup: g, coordinator: shard.Meta.NodeID, err: codeErr(g.ErrorCode, g.ErrorMessage)}
		}
	}
	return out, errors.Join(errs...)
}

// shareOffset is one share partition of DescribeShareGroupOffsets.
type shareOffset struct {
	start, lag int64 // -1: not initialized (lag: or unknown)
	err        error
}

// describeShareOffsets returns the start offset and lag of every share partition the group
// has state for (DescribeShareGroupOffsets with null topics), keeping the broker's error
// messages, which kadm drops.
func describeShareOffsets(ctx context.Context, adm *admin, group string) (map[topicPartition]shareOffset, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID, rg.Topics = group, nil // null: every initialized share partition
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, adm.kgo)
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]shareOffset{}
	var errs []error
	for _, g := range resp.Groups {
		if g.GroupID != group {
			continue
		}
		if err := codeErr(g.ErrorCode, g.ErrorMessage); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				o := shareOffset{start: p.StartOffset, lag: p.Lag, err: codeErr(p.ErrorCode, p.ErrorMessage)}
				if resp.Version < 1 {
					o.lag = -1 // v0 has no lag
				}
				if o.err != nil {
					errs = append(errs, fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, o.err))
				}
				out[topicPartition{t.Topic, p.Partition}] = o
			}
		}
	}
	return out, errors.Join(errs...)
}

// writeShareGroup prints one described share group: a summary line, the members table
// and the share partitions table.
func writeShareGroup(w io.Writer, d shareGroup, offsets map[topicPartition]shareOffset) error {
	fmt.Fprintf(w, "Group: %s\tState: %s\tGroup-Epoch: %d\tAssignment-Epoch: %d\tAssignor: %s\tCoordinator: %d\tMembers: %d\n",
		d.GroupID, d.GroupState, d.GroupEpoch, d.AssignmentEpoch, orDash(d.Assignor), d.coordinator, len(d.Members))
	tw := newTable(w)
	members := map[topicPartition]int{}
	if len(d.Members) > 0 {
		sorted := slices.Clone(d.Members)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].MemberID < sorted[j].MemberID })
		fmt.Fprintln(tw, "\nMEMBER\tEPOCH\tCLIENT-ID\tHOST\tRACK\tPARTITIONS")
		for _, m := range sorted {
			assigned := kadm.TopicsSet{}
			for _, t := range m.Assignment.TopicPartitions {
				assigned.Add(t.Topic, t.Partitions...)
				for _, p := range t.Partitions {
					members[topicPartition{t.Topic, p}]++
				}
			}
			rack := ""
			if m.RackID != nil {
				rack = *m.RackID
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.MemberID, m.MemberEpoch, orDash(m.ClientID), orDash(m.ClientHost), orDash(rack), partitionList(assigned))
		}
	}
	rows := map[topicPartition]bool{}
	for tp := range members {
		rows[tp] = true
	}
	for tp := range offsets {
		rows[tp] = true
	}
	if len(rows) > 0 {
		tps := slices.Collect(maps.Keys(rows))
		sortPartitions(tps)
		fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tSTART-OFFSET\tLAG\tMEMBERS")
		for _, tp := range tps {
			start, lag := "-", "-"
			if o, ok := offsets[tp]; ok && o.err == nil {
				start, lag = dashIfNegative(o.start), dashIfNegative(o.lag)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\n", tp.topic, tp.partition, start, lag, members[tp])
		}
	}
	return tw.Flush()
}

func dashIfNegative(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// parseAdminURL accepts http://HOST:PORT, https://HOST:PORT or HOST:PORT.
func parseAdminURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--admin %q: want http://HOST:PORT", s)
	}
	return u, nil
}

// shareStateJSON is one element of GET /v1/share/state (broker.SharePartitionState as
// encoding/json writes it).
type shareStateJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	State     struct {
		StartOffset, Lag int64
		Window           struct {
			StartOffset, EndOffset int64
			InFlightRecords        int64
			TxPendingRecords       int64
			Records                []shareRangeJSON
			Counters               sharepartition.Counters
		}
	} `json:"state"`
}

type shareRangeJSON struct {
	FirstOffset, LastOffset int64
	State                   stateName
	DeliveryCount           int16
	Member                  string
	LockDeadlineMs          int64
	StagedProducerID        int64
	StagedProducerEpoch     int16
	StagedAckType           ackName
	StagedAbortState        stateName
}

// stateName is a record state sent as its id (or, should the broker send names, a name).
type stateName string

func (s *stateName) UnmarshalJSON(b []byte) error {
	v, err := idOrName(b, func(id int8) string { return sharepartition.State(id).String() })
	if err == nil {
		*s = stateName(v)
	}
	return err
}

// ackName is an acknowledgement type sent as its id (or a name).
type ackName string

func (a *ackName) UnmarshalJSON(b []byte) error {
	v, err := idOrName(b, func(id int8) string { return sharepartition.AckType(id).String() })
	if err == nil {
		*a = ackName(v)
	}
	return err
}

// idOrName decodes a JSON id as its name (a negative id, meaning none, as "") or a JSON
// string as itself.
func idOrName(b []byte, name func(id int8) string) (string, error) {
	var id int8
	if err := json.Unmarshal(b, &id); err == nil {
		if id < 0 {
			return "", nil
		}
		return name(id), nil
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}

// fetchShareState gets the group's in-flight windows from the broker's admin listener.
func fetchShareState(ctx context.Context, base *url.URL, group string) ([]shareStateJSON, error) {
	u := base.JoinPath("/v1/share/state")
	u.RawQuery = url.Values{"group": {group}}.Encode()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	var out []shareStateJSON
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// writeShareState prints the in-flight window of each share partition.
func writeShareState(w io.Writer, group string, states []shareStateJSON) error {
	if len(states) == 0 {
		_, err := fmt.Fprintf(w, "\nNo in-flight records of group %s on this broker (share partitions load on their first fetch or acknowledgement after it starts).\n", group)
		return err
	}
	for _, s := range states {
		win := s.State.Window
		fmt.Fprintf(w, "\nIn-flight records of %s[%d]: start offset %d, end offset %d, %d in flight, %d TX_PENDING\n",
			s.Topic, s.Partition, win.StartOffset, win.EndOffset, win.InFlightRecords, win.TxPendingRecords)
		c := win.Counters
		fmt.Fprintf(w, "Counters: acquired %d, acknowledged %d, released %d, rejected %d, archived %d, lock-expired %d, renewed %d, txn-staged %d, txn-committed %d, txn-aborted %d, archived-on-abort %d\n",
			c.Acquired, c.Acknowledged, c.Released, c.Rejected, c.Archived, c.LockExpired, c.Renewed, c.TxnStaged, c.TxnCommitted, c.TxnAborted, c.ArchivedOnAbort)
		if len(win.Records) == 0 {
			continue
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "OFFSETS\tSTATE\tDELIVERIES\tMEMBER\tLOCK-DEADLINE\tPRODUCER-ID\tPRODUCER-EPOCH\tSTAGED-ACK\tON-ABORT")
		for _, r := range win.Records {
			offsets := strconv.FormatInt(r.FirstOffset, 10)
			if r.LastOffset != r.FirstOffset {
				offsets += "-" + strconv.FormatInt(r.LastOffset, 10)
			}
			member, deadline, pid, epoch, staged, onAbort := "-", "-", "-", "-", "-", "-"
			switch r.State {
			case "ACQUIRED":
				member = orDash(r.Member)
				if r.LockDeadlineMs > 0 {
					deadline = time.UnixMilli(r.LockDeadlineMs).UTC().Format("2006-01-02T15:04:05.000Z")
				}
			case "TX_PENDING": // the member field of other states is stale
				member = orDash(r.Member)
				pid, epoch = strconv.FormatInt(r.StagedProducerID, 10), strconv.Itoa(int(r.StagedProducerEpoch))
				staged, onAbort = orDash(string(r.StagedAckType)), orDash(string(r.StagedAbortState))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", offsets, r.State, r.DeliveryCount, member, deadline, pid, epoch, staged, onAbort)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func shareList(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("share list", `Usage: exactq share list [flags]

Prints every share group name, one a line, sorted.

      --state STATE         only groups in STATE: Empty, Stable or Dead (repeatable or
                            comma-separated)
  -v, --verbose             a table with each group's state and coordinator
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	return listGroups(ctx, f, args, stdout, []string{"share"}, "GROUP\tSTATE\tCOORDINATOR", func(g kadm.ListedGroup) string {
		return fmt.Sprintf("%s\t%s\t%d", g.Group, orDash(g.State), g.Coordinator)
	})
}

const shareResetOffsetsUsage = `Usage: exactq share reset-offsets -g GROUP --topic TOPIC[:P,P...] TARGET [flags]

Sets where share group GROUP starts reading the topic's partitions (their share-partition
start offset, AlterShareGroupOffsets): every record before it counts as done, every record
from it on is delivered again, and whatever the group had in flight is forgotten. The
group must have no members (stop its consumers first); a group that does not exist yet is
created. Prints GROUP TOPIC PARTITION NEW-START-OFFSET per partition.

TARGET is one of:
      --to-offset N         offset N in every partition
      --to-earliest         each partition's log start offset
      --to-latest           each partition's end: only records produced from now on

  -g, --group GROUP         the share group (required)
      --topic TOPIC[:P,...] the topic (required; repeatable), optionally only partitions P
      --dry-run             print the new start offsets without setting them
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`

// shareResetOffsets runs "exactq share reset-offsets" (kafka-share-groups.sh
// --reset-offsets, which resolves --to-earliest and --to-latest with ListOffsets too).
func shareResetOffsets(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("share reset-offsets", shareResetOffsetsUsage, stdout)
	var group, toOffset string
	var topics listFlag
	var earliest, latest, dryRun bool
	f.StringVarP(&group, "group", "g", "", "")
	f.Var(&topics, "topic", "")
	f.StringVar(&toOffset, "to-offset", "", "")
	f.BoolVar(&earliest, "to-earliest", false, "")
	f.BoolVar(&latest, "to-latest", false, "")
	f.BoolVar(&dryRun, "dry-run", false, "")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if group == "" || len(topics) == 0 {
		return usagef("--group and --topic are required")
	}
	targets := 0
	for _, set := range []bool{toOffset != "", earliest, latest} {
		if set {
			targets++
		}
	}
	if targets != 1 {
		return usagef("give exactly one of --to-offset N, --to-earliest, --to-latest")
	}
	var offset int64
	if toOffset != "" {
		n, err := strconv.ParseInt(toOffset, 10, 64)
		if err != nil || n < 0 {
			return usagef("--to-offset %q: want an offset (0 or more)", toOffset)
		}
		offset = n
	}
	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	parts, err := shareTopicPartitions(ctx, adm, topics)
	if err != nil {
		return err
	}
	starts := make(map[topicPartition]int64, len(parts))
	if earliest || latest {
		list := adm.ListStartOffsets
		if latest {
			list = adm.ListEndOffsets
		}
		listed, err := list(ctx, partitionTopics(parts)...)
		if err != nil {
			return fmt.Errorf("list offsets: %w", err)
		}
		for _, tp := range parts {
			lo, ok := listed.Lookup(tp.topic, tp.partition)
			switch {
			case !ok:
				return fmt.Errorf("list offsets: %s[%d]: %w", tp.topic, tp.partition, kerr.UnknownTopicOrPartition)
			case lo.Err != nil:
				return fmt.Errorf("list offsets: %s[%d]: %w", tp.topic, tp.partition, lo.Err)
			}
			starts[tp] = lo.Offset
		}
	} else {
		for _, tp := range parts {
			starts[tp] = offset
		}
	}
	var results map[topicPartition]error
	if !dryRun {
		results, err = alterShareOffsets(ctx, adm, group, parts, starts)
		if results == nil {
			return err
		}
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-START-OFFSET")
	for _, tp := range parts {
		if rerr := results[tp]; rerr != nil {
			fmt.Fprintf(tw, "%s\t%s\t%d\t- (%v)\n", group, tp.topic, tp.partition, rerr)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", group, tp.topic, tp.partition, starts[tp])
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// partitionTopics returns the topics of sorted partitions, once each.
func partitionTopics(tps []topicPartition) []string {
	var out []string
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1] != tp.topic {
			out = append(out, tp.topic)
		}
	}
	return out
}

// alterShareOffsets sends AlterShareGroupOffsets for parts (sorted) and returns each
// partition's error and, as the error, the group's (nil results) or the partitions' joined;
// kadm's AlterShareGroupOffsets drops the broker's error messages.
func alterShareOffsets(ctx context.Context, adm *admin, group string, parts []topicPartition, starts map[topicPartition]int64) (map[topicPartition]error, error) {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	for _, tp := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.topic {
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = tp.topic
			req.Topics = append(req.Topics, rt)
		}
		rt := &req.Topics[len(req.Topics)-1]
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = tp.partition, starts[tp]
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp, err := req.RequestWith(ctx, adm.kgo)
	if err != nil {
		return nil, err
	}
	if err := codeErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, fmt.Errorf("group %s: %w", group, err)
	}
	out := map[topicPartition]error{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[topicPartition{t.Topic, p.Partition}] = codeErr(p.ErrorCode, p.ErrorMessage)
		}
	}
	var errs []error
	for _, tp := range parts {
		if err := out[tp]; err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", tp.topic, tp.partition, err))
		}
	}
	return out, errors.Join(errs...)
}

// shareTopicPartitions expands --topic values (TOPIC or TOPIC:P,P) to partitions, sorted;
// a bare topic is every partition it has.
func shareTopicPartitions(ctx context.Context, adm *admin, topics []string) ([]topicPartition, error) {
	var out []topicPartition
	var whole []string
	for _, t := range topics {
		name, list, ok := strings.Cut(t, ":")
		if name == "" {
			return nil, usagef("--topic %q: want TOPIC or TOPIC:P,P", t)
		}
		if !ok {
			whole = append(whole, name)
			continue
		}
		for _, p := range splitList([]string{list}) {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil || n < 0 {
				return nil, usagef("--topic %q: partition %q is not a partition number", t, p)
			}
			out = append(out, topicPartition{name, int32(n)})
		}
	}
	if len(whole) > 0 {
		details, err := describeTopics(ctx, adm, whole...)
		if err != nil {
			return nil, err
		}
		for _, d := range details {
			for _, p := range d.Partitions.Numbers() {
				out = append(out, topicPartition{d.Topic, p})
			}
		}
	}
	sortPartitions(out)
	return out, nil
}

const shareDeleteOffsetsUsage = `Usage: exactq share delete-offsets -g GROUP --topic TOPIC [--topic TOPIC ...] [flags]

Deletes share group GROUP's state for the topics (DeleteShareGroupOffsets): the group
forgets where it was, and its next member starts them again from the group's
share.auto.offset.reset (latest unless set). The group must exist and have no members.
Prints TOPIC STATUS per topic.

  -g, --group GROUP         the share group (required)
      --topic TOPIC         a topic (required; repeatable or comma-separated)
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`

// shareDeleteOffsets runs "exactq share delete-offsets" (kafka-share-groups.sh
// --delete-offsets).
func shareDeleteOffsets(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("share delete-offsets", shareDeleteOffsetsUsage, stdout)
	var group string
	var topics listFlag
	f.StringVarP(&group, "group", "g", "", "")
	f.Var(&topics, "topic", "")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	names := splitList(topics)
	if group == "" || len(names) == 0 {
		return usagef("--group and --topic are required")
	}
	adm, err := newAdmin(f)
	if err != nil {
		return err
	}
	defer adm.Close()
	results, err := deleteShareOffsets(ctx, adm, group, names)
	if results == nil {
		return err
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "TOPIC\tSTATUS")
	for _, t := range names {
		status := "Successful"
		if rerr, ok := results[t]; !ok {
			status = "Error: no answer for the topic"
		} else if rerr != nil {
			status = "Error: " + rerr.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\n", t, status)
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// deleteShareOffsets sends DeleteShareGroupOffsets and returns each topic's error and, as
// the error, the group's (nil results) or the topics' joined; kadm's
// DeleteShareGroupOffsets drops the broker's error messages, which say why ("There is no
// offset information to delete.").
func deleteShareOffsets(ctx context.Context, adm *admin, group string, topics []string) (map[string]error, error) {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	seen := map[string]bool{}
	for _, t := range topics {
		if !seen[t] {
			seen[t] = true
			rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
			rt.Topic = t
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, adm.kgo)
	if err != nil {
		return nil, err
	}
	if err := codeErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, fmt.Errorf("group %s: %w", group, err)
	}
	out := map[string]error{}
	for _, t := range resp.Topics {
		out[t.Topic] = codeErr(t.ErrorCode, t.ErrorMessage)
	}
	var errs []error
	for _, rt := range req.Topics {
		if err := out[rt.Topic]; err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rt.Topic, err))
		}
	}
	return out, errors.Join(errs...)
}
