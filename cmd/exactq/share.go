package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/exactq/exactq/client"
	"github.com/exactq/exactq/internal/share/sharepartition"
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
                            release (delivered again, with a higher delivery count) or
                            reject (archived, never delivered again)
      --mode MODE           explicit (default): acknowledge each record with --ack;
                            implicit: the client accepts every record a poll returned on
                            the next poll or on close (--ack must be accept)
  -n, --count N             stop after N records. Explicit mode releases the records
                            fetched beyond N; implicit mode prints (and accepts) every
                            record of the last poll, so it may print more than N
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

func parseAckType(s string) (client.AckType, error) {
	switch strings.ToLower(s) {
	case "accept":
		return client.AckAccept, nil
	case "release":
		return client.AckRelease, nil
	case "reject":
		return client.AckReject, nil
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
	var ackMode client.AckMode
	switch mode {
	case "explicit":
		ackMode = client.AckExplicit
	case "implicit":
		ackMode = client.AckImplicit
		if ack != client.AckAccept {
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
	if _, err := adm.DescribeTopics(ctx, topic); err != nil {
		return topicErr(err)
	}
	if fromEarliest {
		res := client.ConfigResource{Type: client.GroupResource, Name: group}
		if _, err := adm.IncrementalAlterConfigs(ctx, false, map[client.ConfigResource][]client.AlterConfig{
			res: {{Name: "share.auto.offset.reset", Op: client.OpSet, Value: "earliest"}},
		}); err != nil {
			return fmt.Errorf("set share.auto.offset.reset=earliest on group %s: %w", group, err)
		}
	}

	var ackMu sync.Mutex
	var ackFailed int
	var ackErr error
	cfg := client.ShareConsumerConfig{
		Brokers: f.brokerList(), Net: netConfig(), Group: group, Topics: []string{topic}, AckMode: ackMode,
		OnAcknowledged: func(rs []client.AckResult) {
			ackMu.Lock()
			defer ackMu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					ackFailed += len(r.Offsets)
					if ackErr == nil {
						ackErr = fmt.Errorf("%s[%d]: %w", r.Partition.Topic, r.Partition.Partition, r.Err)
					}
				}
			}
		},
	}
	if count > 0 && count < 500 {
		cfg.MaxRecords = int32(count) // fetch no more than needed (a soft cap)
	}
	sc, err := client.NewShareConsumer(cfg)
	if err != nil {
		return err
	}
	how := "explicit acknowledgement, " + ack.String()
	if ackMode == client.AckImplicit {
		how = "implicit acknowledgement"
	}
	fmt.Fprintf(status, "%% share-consuming %s in group %s (%s)\n", topic, group, how)

	written, loopErr := shareConsumeLoop(ctx, sc, ackMode, ack, count, recFormat, stdout)
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shareCloseTimeout)
	defer cancel()
	closeErr := sc.Close(closeCtx) // sends the acknowledgements, releases the rest, leaves
	fmt.Fprintf(status, "%% consumed %d records\n", written)

	ackMu.Lock()
	defer ackMu.Unlock()
	if ackErr != nil {
		// Close's error repeats the acknowledgement failures the callback saw.
		return errors.Join(loopErr, fmt.Errorf("%d acknowledgements failed, first: %w", ackFailed, ackErr))
	}
	return errors.Join(loopErr, closeErr)
}

// shareConsumeLoop polls, writes and (explicit mode) acknowledges records until count
// (0: no limit), ctx's cancellation (not an error) or a failure, and returns the records
// written. A record is acknowledged only once written; those that were not are released
// when the consumer closes.
func shareConsumeLoop(ctx context.Context, sc *client.ShareConsumer, mode client.AckMode, ack client.AckType, count int64, format recordFormat, stdout io.Writer) (int64, error) {
	var written int64
	var buf []byte
	for count == 0 || written < count {
		recs, err := sc.Poll(ctx)
		switch {
		case ctx.Err() != nil:
			return written, nil // interrupted: a clean stop
		case err != nil:
			return written, err
		}
		// Implicit mode accepts every record the poll returned: print them all.
		if mode == client.AckExplicit && count > 0 && int64(len(recs)) > count-written {
			recs = recs[:count-written]
		}
		buf = buf[:0]
		for _, r := range recs {
			buf = format.appendRecord(buf, r)
		}
		if _, err := stdout.Write(buf); err != nil {
			return written, err
		}
		written += int64(len(recs))
		if mode == client.AckExplicit {
			for _, r := range recs {
				if err := sc.Acknowledge(r, ack); err != nil {
					return written, err
				}
			}
		}
	}
	return written, nil
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
	descs, err := adm.DescribeShareGroups(ctx, names...)
	errs := []error{err}
	printed := 0
	for _, d := range descs {
		if d.Err != nil {
			continue // in err
		}
		offsets, err := adm.DescribeShareGroupOffsets(ctx, d.Group)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: share offsets: %w", d.Group, err))
		}
		if printed > 0 {
			fmt.Fprintln(stdout)
		}
		printed++
		if err := writeShareGroup(stdout, d, offsets); err != nil {
			return err
		}
		if records {
			states, err := fetchShareState(ctx, base, d.Group)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: in-flight records: %w", d.Group, err))
				continue
			}
			if err := writeShareState(stdout, d.Group, states); err != nil {
				return err
			}
		}
	}
	return errors.Join(errs...)
}

// writeShareGroup prints one described share group: a summary line, the members table
// and the share partitions table.
func writeShareGroup(w io.Writer, d client.ShareGroupDescription, offsets map[client.TopicPartition]client.ShareGroupOffset) error {
	fmt.Fprintf(w, "Group: %s\tState: %s\tGroup-Epoch: %d\tAssignment-Epoch: %d\tAssignor: %s\tCoordinator: %d\tMembers: %d\n",
		d.Group, d.State, d.GroupEpoch, d.AssignmentEpoch, orDash(d.Assignor), d.Coordinator, len(d.Members))
	tw := newTable(w)
	members := map[client.TopicPartition]int{}
	if len(d.Members) > 0 {
		fmt.Fprintln(tw, "\nMEMBER\tEPOCH\tCLIENT-ID\tHOST\tRACK\tPARTITIONS")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.MemberID, m.MemberEpoch, orDash(m.ClientID), orDash(m.ClientHost), orDash(m.RackID), partitionList(m.Assignment))
			for _, tp := range m.Assignment {
				members[tp]++
			}
		}
	}
	rows := map[client.TopicPartition]bool{}
	for tp := range members {
		rows[tp] = true
	}
	for tp := range offsets {
		rows[tp] = true
	}
	if len(rows) > 0 {
		tps := make([]client.TopicPartition, 0, len(rows))
		for tp := range rows {
			tps = append(tps, tp)
		}
		sort.Slice(tps, func(i, j int) bool {
			if tps[i].Topic != tps[j].Topic {
				return tps[i].Topic < tps[j].Topic
			}
			return tps[i].Partition < tps[j].Partition
		})
		fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tSTART-OFFSET\tLAG\tMEMBERS")
		for _, tp := range tps {
			start, lag := "-", "-"
			if o, ok := offsets[tp]; ok && o.Err == nil {
				start, lag = dashIfNegative(o.StartOffset), dashIfNegative(o.Lag)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\n", tp.Topic, tp.Partition, start, lag, members[tp])
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
	return listGroups(ctx, f, args, stdout, []string{"share"}, "GROUP\tSTATE\tCOORDINATOR", func(g client.ListedGroup) string {
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
	starts := make(map[client.TopicPartition]int64, len(parts))
	if earliest || latest {
		spec := int64(-2)
		if latest {
			spec = -1
		}
		specs := make(map[client.TopicPartition]int64, len(parts))
		for _, tp := range parts {
			specs[tp] = spec
		}
		listed, err := adm.ListOffsets(ctx, client.ReadUncommitted, specs)
		if err != nil {
			return fmt.Errorf("list offsets: %w", err)
		}
		for tp, l := range listed {
			starts[tp] = l.Offset
		}
	} else {
		for _, tp := range parts {
			starts[tp] = offset
		}
	}
	var results map[client.TopicPartition]error
	if !dryRun {
		results, err = adm.AlterShareGroupOffsets(ctx, group, starts)
		if results == nil {
			return err
		}
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-START-OFFSET")
	for _, tp := range parts {
		if rerr := results[tp]; rerr != nil {
			fmt.Fprintf(tw, "%s\t%s\t%d\t- (%v)\n", group, tp.Topic, tp.Partition, rerr)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", group, tp.Topic, tp.Partition, starts[tp])
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// shareTopicPartitions expands --topic values (TOPIC or TOPIC:P,P) to partitions, sorted;
// a bare topic is every partition it has.
func shareTopicPartitions(ctx context.Context, adm *client.Admin, topics []string) ([]client.TopicPartition, error) {
	var out []client.TopicPartition
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
			out = append(out, client.TopicPartition{Topic: name, Partition: int32(n)})
		}
	}
	if len(whole) > 0 {
		details, err := adm.DescribeTopics(ctx, whole...)
		if err != nil {
			return nil, err
		}
		for _, d := range details {
			for _, p := range d.Partitions {
				out = append(out, client.TopicPartition{Topic: d.Name, Partition: p.Partition})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
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
	results, err := adm.DeleteShareGroupOffsets(ctx, group, names...)
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
