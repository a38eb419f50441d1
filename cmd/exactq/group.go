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

  -b, --brokers host:port   bootstrap brokers (default 127.0.0.1:9092)
`, stdout)
	names, adm, err := f.parseAdmin(args, 1, -1)
	if err != nil {
		return err
	}
	defer adm.Close()
	descs, err := adm.DescribeGroups(ctx, names...)
	printed := 0
	return eachAnswer(names, descs, err, func(d kadm.DescribedGroup) error { return withMessage(d.Err, d.ErrMessage) }, func(name string, d kadm.DescribedGroup) error {
		offsets, err := adm.FetchOffsets(ctx, d.Group)
		if err != nil {
			err = fmt.Errorf("%s: committed offsets: %w", d.Group, err)
		}
		rows := groupRows(d, offsets)
		ends := logEndOffsets(ctx, adm, rows)
		if printed > 0 {
			fmt.Fprintln(stdout)
		}
		printed++
		return errors.Join(err, writeGroup(stdout, d, rows, ends))
	})
}

// groupMember is a described member with the partitions assigned to it.
type groupMember struct {
	*kadm.DescribedGroupMember
	assigned kadm.TopicsSet
}

// groupRow is one partition of a described group: assigned to a member, committed, or
// both.
type groupRow struct {
	tp        topicPartition
	committed int64 // -1: none
	member    *groupMember
}

// groupMembers returns the group's members with their assignments (consumer protocol
// groups; a member of another protocol has none we can read).
func groupMembers(d kadm.DescribedGroup) []groupMember {
	out := make([]groupMember, len(d.Members))
	for i := range d.Members {
		m := groupMember{DescribedGroupMember: &d.Members[i], assigned: kadm.TopicsSet{}}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				m.assigned.Add(t.Topic, t.Partitions...)
			}
		}
		out[i] = m
	}
	return out
}

// groupRows returns the partitions assigned to members or committed by the group,
// sorted.
func groupRows(d kadm.DescribedGroup, offsets kadm.OffsetResponses) []groupRow {
	rows := map[topicPartition]*groupRow{}
	row := func(tp topicPartition) *groupRow {
		if r, ok := rows[tp]; ok {
			return r
		}
		r := &groupRow{tp: tp, committed: -1}
		rows[tp] = r
		return r
	}
	members := groupMembers(d)
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

// writeGroup prints one described group: a summary line, the members table and the
// partitions table.
func writeGroup(w io.Writer, d kadm.DescribedGroup, rows []groupRow, ends map[topicPartition]int64) error {
	protocol := orDash(d.Protocol)
	if d.ProtocolType != "" {
		protocol += " (" + d.ProtocolType + ")"
	}
	fmt.Fprintf(w, "Group: %s\tState: %s\tProtocol: %s\tCoordinator: %d\tMembers: %d\n",
		d.Group, d.State, protocol, d.Coordinator.NodeID, len(d.Members))
	tw := newTable(w)
	if len(d.Members) > 0 {
		fmt.Fprintln(tw, "\nMEMBER\tINSTANCE\tCLIENT-ID\tHOST\tPARTITIONS")
		for _, m := range groupMembers(d) {
			instance := ""
			if m.InstanceID != nil {
				instance = *m.InstanceID
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, orDash(instance), orDash(m.ClientID), orDash(m.ClientHost), partitionList(m.assigned))
		}
	}
	if len(rows) > 0 {
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
				member, host, clientID = m.MemberID, orDash(m.ClientHost), orDash(m.ClientID)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.tp.topic, r.tp.partition, current, end, lag, member, host, clientID)
		}
	}
	return tw.Flush()
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
