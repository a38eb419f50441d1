package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

const groupUsage = `Usage:
  exactq group list [--state STATE ...] [-v]
  exactq group describe GROUP...
  exactq group delete GROUP...

Flags (every subcommand):
  -b, --brokers host:port[,...]   bootstrap brokers (default 127.0.0.1:9092)
`

// groupCommands are the subcommands of "exactq group".
var groupCommands = []subcommand{
	{"list", quiet(groupList)}, {"describe", quiet(groupDescribe)}, {"delete", quiet(groupDelete)},
}

// runGroup runs "exactq group SUBCOMMAND ...".
func runGroup(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	return dispatch(ctx, "group", groupUsage, groupCommands, args, stdout, stderr)
}

// newTable is the column layout of every table the tools print: columns two spaces apart.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// splitList flattens repeatable, comma-separated flag values.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func groupList(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("group list", `Usage: exactq group list [flags]

Prints every group name, one a line, sorted.

      --state STATE         only groups in STATE: Stable, Empty, PreparingRebalance,
                            CompletingRebalance or Dead (repeatable or comma-separated)
  -v, --verbose             a table with each group's state, protocol type and coordinator
  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	return listGroups(ctx, f, args, stdout, nil, "GROUP\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR", func(g kadm.ListedGroup) string {
		return fmt.Sprintf("%s\t%s\t%s\t%d", g.Group, orDash(g.State), orDash(g.ProtocolType), g.Coordinator)
	})
}

// listGroups runs "group list" and "share list": the names of the groups of types (every
// type when nil) in the --state states, or with -v a table of header and one row a group.
func listGroups(ctx context.Context, f *cmdFlags, args []string, stdout io.Writer, types []string, header string, row func(kadm.ListedGroup) string) error {
	var states listFlag
	var verbose bool
	f.Var(&states, "state", "")
	f.BoolVarP(&verbose, "verbose", "v", false, "")
	_, adm, err := f.parseAdmin(args, 0, 0)
	if err != nil {
		return err
	}
	defer adm.Close()
	groups, err := adm.ListGroupsByType(ctx, types, splitList(states)...)
	if !verbose {
		for _, g := range groups.Sorted() {
			fmt.Fprintln(stdout, g.Group)
		}
		return err
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, header)
	for _, g := range groups.Sorted() {
		fmt.Fprintln(tw, row(g))
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func groupDescribe(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("group describe", `Usage: exactq group describe GROUP... [flags]

Describes each group as kafka-consumer-groups.sh --describe does: its state, protocol and
coordinator; its members with the partitions assigned to them; and per partition the
committed offset, the log end offset and the lag between them. A partition without a
committed offset shows "-".

A consumer-protocol (KIP-848) group shows, as --describe --members --verbose does, its
assignor, group epoch and target assignment epoch, and per member its epoch, its current
and its target assignment, and, when classic and consumer-protocol members share the group
(an online migration), whether each member is UPGRADED to the consumer protocol.

  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	names, adm, err := f.parseAdmin(args, 1, -1)
	if err != nil {
		return err
	}
	defer adm.Close()
	// ConsumerGroupDescribe first, as Kafka's admin client does; a group it does not find
	// (a classic one, or none) is described with DescribeGroups.
	consumers, _ := adm.DescribeConsumerGroups(ctx, names...)
	var classic []string
	for _, name := range names {
		if d, ok := consumers[name]; !ok || d.Err != nil {
			classic = append(classic, name)
			delete(consumers, name)
		}
	}
	var descs kadm.DescribedGroups
	if len(classic) > 0 {
		descs, err = adm.DescribeGroups(ctx, classic...)
	}
	printed := 0
	describe := func(group string, members []describedMember, write func(rows []groupRow, ends map[topicPartition]int64) error) error {
		offsets, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			err = fmt.Errorf("%s: committed offsets: %w", group, err)
		}
		rows := groupRows(members, offsets)
		ends := logEndOffsets(ctx, adm, rows)
		if printed > 0 {
			fmt.Fprintln(stdout)
		}
		printed++
		return errors.Join(err, write(rows, ends))
	}
	var errs []error
	for _, name := range names {
		if d, ok := consumers[name]; ok {
			members := consumerGroupMembers(d)
			errs = append(errs, describe(name, members, func(rows []groupRow, ends map[topicPartition]int64) error {
				return writeConsumerGroup(stdout, d, members, rows, ends)
			}))
		}
	}
	errs = append(errs, eachAnswer(classic, descs, err, func(d kadm.DescribedGroup) error { return withMessage(d.Err, d.ErrMessage) }, func(name string, d kadm.DescribedGroup) error {
		members := groupMembers(d)
		return describe(d.Group, members, func(rows []groupRow, ends map[topicPartition]int64) error {
			return writeGroup(stdout, d, members, rows, ends)
		})
	}))
	return errors.Join(errs...)
}

// describedMember is a member as the describe tables show it, of a classic group
// (DescribeGroups) or a consumer-protocol one (ConsumerGroupDescribe).
type describedMember struct {
	id, instance, clientID, host string
	assigned                     kadm.TopicsSet
	// Consumer-protocol groups only.
	epoch      int32
	target     kadm.TopicsSet
	memberType int8 // 0 classic, 1 consumer protocol (KIP-1099), -1 unknown
}

// groupRow is one partition of a described group: assigned to a member, committed, or
// both.
type groupRow struct {
	tp        topicPartition
	committed int64 // -1: none
	member    *describedMember
}

// groupMembers returns a classic group's members with their assignments (consumer
// protocol groups; a member of another protocol has none we can read).
func groupMembers(d kadm.DescribedGroup) []describedMember {
	out := make([]describedMember, len(d.Members))
	for i, dm := range d.Members {
		m := describedMember{id: dm.MemberID, clientID: dm.ClientID, host: dm.ClientHost, assigned: kadm.TopicsSet{}, memberType: -1}
		if dm.InstanceID != nil {
			m.instance = *dm.InstanceID
		}
		if c, ok := dm.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				m.assigned.Add(t.Topic, t.Partitions...)
			}
		}
		out[i] = m
	}
	return out
}

// consumerGroupMembers returns a consumer-protocol group's members, in kadm's order (by
// instance id, then member id).
func consumerGroupMembers(d kadm.DescribedConsumerGroup) []describedMember {
	out := make([]describedMember, len(d.Members))
	for i, dm := range d.Members {
		m := describedMember{id: dm.MemberID, clientID: dm.ClientID, host: dm.ClientHost, assigned: dm.Assignment,
			epoch: dm.MemberEpoch, target: dm.TargetAssignment, memberType: dm.MemberType}
		if m.assigned == nil {
			m.assigned = kadm.TopicsSet{}
		}
		if dm.InstanceID != nil {
			m.instance = *dm.InstanceID
		}
		out[i] = m
	}
	return out
}

// groupRows returns the partitions assigned to members or committed by the group,
// sorted.
func groupRows(members []describedMember, offsets kadm.OffsetResponses) []groupRow {
	rows := map[topicPartition]*groupRow{}
	row := func(tp topicPartition) *groupRow {
		if r, ok := rows[tp]; ok {
			return r
		}
		r := &groupRow{tp: tp, committed: -1}
		rows[tp] = r
		return r
	}
	for i := range members {
		m := &members[i]
		for _, tp := range m.assigned.Sorted() {
			for _, p := range tp.Partitions {
				row(topicPartition{tp.Topic, p}).member = m
			}
		}
	}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			row(topicPartition{o.Topic, o.Partition}).committed = o.At
		}
	})
	out := make([]groupRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].tp, out[j].tp
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.partition < b.partition
	})
	return out
}

// logEndOffsets lists the high watermark of each row's partition; partitions it cannot
// list (a deleted topic) are missing from the result and print as "-".
func logEndOffsets(ctx context.Context, adm *admin, rows []groupRow) map[topicPartition]int64 {
	out := map[topicPartition]int64{}
	if len(rows) == 0 {
		return out
	}
	topics := map[string]bool{}
	var list []string
	for _, r := range rows {
		if !topics[r.tp.topic] {
			topics[r.tp.topic] = true
			list = append(list, r.tp.topic)
		}
	}
	listed, _ := adm.ListEndOffsets(ctx, list...) // per-partition errors: "-"
	listed.Each(func(lo kadm.ListedOffset) {
		if lo.Err == nil {
			out[topicPartition{lo.Topic, lo.Partition}] = lo.Offset
		}
	})
	return out
}

// writeGroup prints one described classic group: a summary line, the members table and
// the partitions table.
func writeGroup(w io.Writer, d kadm.DescribedGroup, members []describedMember, rows []groupRow, ends map[topicPartition]int64) error {
	protocol := orDash(d.Protocol)
	if d.ProtocolType != "" {
		protocol += " (" + d.ProtocolType + ")"
	}
	fmt.Fprintf(w, "Group: %s\tState: %s\tProtocol: %s\tCoordinator: %d\tMembers: %d\n",
		d.Group, d.State, protocol, d.Coordinator.NodeID, len(members))
	tw := newTable(w)
	if len(members) > 0 {
		fmt.Fprintln(tw, "\nMEMBER\tINSTANCE\tCLIENT-ID\tHOST\tPARTITIONS")
		for _, m := range members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.id, orDash(m.instance), orDash(m.clientID), orDash(m.host), partitionList(m.assigned))
		}
	}
	writeOffsets(tw, rows, ends)
	return tw.Flush()
}

// writeConsumerGroup prints one consumer-protocol group: a summary line with its epochs,
// the members table of kafka-consumer-groups.sh --describe --members --verbose and the
// partitions table.
func writeConsumerGroup(w io.Writer, d kadm.DescribedConsumerGroup, members []describedMember, rows []groupRow, ends map[topicPartition]int64) error {
	fmt.Fprintf(w, "Group: %s\tState: %s\tType: consumer\tAssignor: %s\tGroup epoch: %d\tTarget assignment epoch: %d\tCoordinator: %d\tMembers: %d\n",
		d.Group, d.State, orDash(d.AssignorName), d.Epoch, d.AssignmentEpoch, d.Coordinator.NodeID, len(members))
	classic, upgraded := false, false
	for _, m := range members {
		classic = classic || m.memberType == 0
		upgraded = upgraded || m.memberType == 1
	}
	migrating := classic && upgraded // Kafka's UPGRADED column: both protocols in the group
	tw := newTable(w)
	if len(members) > 0 {
		header := "\nMEMBER\tINSTANCE\tCLIENT-ID\tHOST\t#PARTITIONS\tCURRENT-EPOCH\tCURRENT-ASSIGNMENT\tTARGET-EPOCH\tTARGET-ASSIGNMENT"
		if migrating {
			header += "\tUPGRADED"
		}
		fmt.Fprintln(tw, header)
		for _, m := range members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s", m.id, orDash(m.instance), orDash(m.clientID), orDash(m.host),
				numPartitions(m.assigned), m.epoch, assignmentString(m.assigned), d.AssignmentEpoch, assignmentString(m.target))
			if migrating {
				fmt.Fprintf(tw, "\t%t", m.memberType == 1)
			}
			fmt.Fprintln(tw)
		}
	}
	writeOffsets(tw, rows, ends)
	return tw.Flush()
}

func numPartitions(set kadm.TopicsSet) int {
	n := 0
	for _, ps := range set {
		n += len(ps)
	}
	return n
}

// assignmentString is kafka-consumer-groups.sh's assignment column: topic:p,p per topic,
// topics sorted and joined by ";", partitions sorted; "-" for none.
func assignmentString(set kadm.TopicsSet) string {
	var topics []string
	for _, tp := range set.Sorted() {
		if len(tp.Partitions) == 0 {
			continue
		}
		ps := make([]string, len(tp.Partitions))
		for i, p := range tp.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		topics = append(topics, tp.Topic+":"+strings.Join(ps, ","))
	}
	if len(topics) == 0 {
		return "-"
	}
	return strings.Join(topics, ";")
}

// writeOffsets prints the partitions table of a described group.
func writeOffsets(tw *tabwriter.Writer, rows []groupRow, ends map[topicPartition]int64) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER\tHOST\tCLIENT-ID")
	for _, r := range rows {
		current, end, lag := "-", "-", "-"
		e, haveEnd := ends[r.tp]
		if haveEnd {
			end = strconv.FormatInt(e, 10)
		}
		if r.committed >= 0 {
			current = strconv.FormatInt(r.committed, 10)
			if haveEnd {
				lag = strconv.FormatInt(max(e-r.committed, 0), 10)
			}
		}
		member, host, clientID := "-", "-", "-"
		if m := r.member; m != nil {
			member, host, clientID = m.id, orDash(m.host), orDash(m.clientID)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.tp.topic, r.tp.partition, current, end, lag, member, host, clientID)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func groupDelete(ctx context.Context, args []string, stdout io.Writer) error {
	f := newCmdFlags("group delete", `Usage: exactq group delete GROUP... [flags]

Deletes groups that have no members, with their committed offsets.

  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	names, adm, err := f.parseAdmin(args, 1, -1)
	if err != nil {
		return err
	}
	defer adm.Close()
	results, err := adm.DeleteGroups(ctx, names...)
	return eachAnswer(names, results, err, func(r kadm.DeleteGroupResponse) error { return withMessage(r.Err, r.ErrMessage) }, func(name string, _ kadm.DeleteGroupResponse) error {
		_, err := fmt.Fprintf(stdout, "Deleted group %s.\n", name)
		return err
	})
}
