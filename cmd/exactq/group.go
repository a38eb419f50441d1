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

	"github.com/exactq/exactq/client"
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
	return listGroups(ctx, f, args, stdout, nil, "GROUP\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR", func(g client.ListedGroup) string {
		return fmt.Sprintf("%s\t%s\t%s\t%d", g.Group, orDash(g.State), orDash(g.ProtocolType), g.Coordinator)
	})
}

// listGroups runs "group list" and "share list": the names of the groups of types (every
// type when nil) in the --state states, or with -v a table of header and one row a group.
func listGroups(ctx context.Context, f *cmdFlags, args []string, stdout io.Writer, types []string, header string, row func(client.ListedGroup) string) error {
	var states listFlag
	var verbose bool
	f.Var(&states, "state", "")
	f.BoolVarP(&verbose, "verbose", "v", false, "")
	_, adm, err := f.parseAdmin(args, 0, 0)
	if err != nil {
		return err
	}
	defer adm.Close()
	groups, err := adm.ListGroups(ctx, client.GroupFilter{States: splitList(states), Types: types})
	if !verbose {
		for _, g := range groups {
			fmt.Fprintln(stdout, g.Group)
		}
		return err
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, header)
	for _, g := range groups {
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
	errs := []error{err}
	for i, d := range descs {
		if d.Err != nil {
			continue // in err
		}
		offsets, err := adm.FetchOffsets(ctx, d.Group)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: committed offsets: %w", d.Group, err))
		}
		rows := groupRows(d, offsets)
		ends := logEndOffsets(ctx, adm, rows)
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := writeGroup(stdout, d, rows, ends); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// groupRow is one partition of a described group: assigned to a member, committed, or
// both.
type groupRow struct {
	tp        client.TopicPartition
	committed int64 // -1: none
	member    *client.GroupMemberDescription
}

// groupRows returns the partitions assigned to members or committed by the group,
// sorted.
func groupRows(d client.GroupDescription, offsets map[client.TopicPartition]client.CommittedOffset) []groupRow {
	rows := map[client.TopicPartition]*groupRow{}
	row := func(tp client.TopicPartition) *groupRow {
		if r, ok := rows[tp]; ok {
			return r
		}
		r := &groupRow{tp: tp, committed: -1}
		rows[tp] = r
		return r
	}
	for i := range d.Members {
		m := &d.Members[i]
		for _, tp := range m.Assignment {
			row(tp).member = m
		}
	}
	for tp, co := range offsets {
		if co.Err == nil && co.Offset >= 0 {
			row(tp).committed = co.Offset
		}
	}
	out := make([]groupRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].tp, out[j].tp
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// logEndOffsets lists the high watermark of each row's partition; partitions it cannot
// list (a deleted topic) are missing from the result and print as "-".
func logEndOffsets(ctx context.Context, adm *client.Admin, rows []groupRow) map[client.TopicPartition]int64 {
	out := map[client.TopicPartition]int64{}
	if len(rows) == 0 {
		return out
	}
	specs := make(map[client.TopicPartition]int64, len(rows))
	for _, r := range rows {
		specs[r.tp] = int64(client.Latest)
	}
	listed, _ := adm.ListOffsets(ctx, client.ReadUncommitted, specs) // per-partition errors: "-"
	for tp, lo := range listed {
		if lo.Err == nil {
			out[tp] = lo.Offset
		}
	}
	return out
}

// writeGroup prints one described group: a summary line, the members table and the
// partitions table.
func writeGroup(w io.Writer, d client.GroupDescription, rows []groupRow, ends map[client.TopicPartition]int64) error {
	protocol := orDash(d.Protocol)
	if d.ProtocolType != "" {
		protocol += " (" + d.ProtocolType + ")"
	}
	fmt.Fprintf(w, "Group: %s\tState: %s\tProtocol: %s\tCoordinator: %d\tMembers: %d\n",
		d.Group, d.State, protocol, d.Coordinator, len(d.Members))
	tw := newTable(w)
	if len(d.Members) > 0 {
		fmt.Fprintln(tw, "\nMEMBER\tINSTANCE\tCLIENT-ID\tHOST\tPARTITIONS")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, orDash(m.InstanceID), orDash(m.ClientID), orDash(m.ClientHost), partitionList(m.Assignment))
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
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.tp.Topic, r.tp.Partition, current, end, lag, member, host, clientID)
		}
	}
	return tw.Flush()
}

// partitionList prints partitions as Kafka's TopicPartition.toString does: topic-N,
// comma-separated; "-" for none.
func partitionList(tps []client.TopicPartition) string {
	if len(tps) == 0 {
		return "-"
	}
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
	}
	return strings.Join(s, ",")
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
	for _, r := range results {
		if r.Err == nil {
			fmt.Fprintf(stdout, "Deleted group %s.\n", r.Group)
		}
	}
	return err
}
