package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fieldRows splits output into lines of whitespace-separated fields.
func fieldRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// findRow returns the first row whose leading fields are prefix.
func findRow(rows [][]string, prefix ...string) []string {
	for _, r := range rows {
		if len(r) >= len(prefix) && strings.Join(r[:len(prefix)], " ") == strings.Join(prefix, " ") {
			return r
		}
	}
	return nil
}

func TestGroupCommands(t *testing.T) {
	tb := testbroker.Start(t)
	b := []string{"-b", tb.Addr}
	createTopic(t, tb.Addr, "orders", 2)
	mustRun(t, runProduce, "a\nb\nc\n", "orders", "-b", tb.Addr, "--partition", "0")
	mustRun(t, runProduce, "d\ne\nf\ng\n", "orders", "-b", tb.Addr, "--partition", "1")

	// A group member that consumed everything and committed part of it.
	c := testClient(t, tb.Addr, kgo.ClientID("billing-app"), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 7; {
		fetches := c.PollFetches(t.Context())
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		got += len(fetches.Records())
	}
	var commitErr error
	c.CommitOffsetsSync(t.Context(), map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 2}, 1: {Epoch: -1, Offset: 4}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if commitErr = err; err != nil {
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					commitErr = errors.Join(commitErr, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	member, _ := c.GroupMetadata()

	if out := mustRun(t, runGroup, "", append([]string{"list"}, b...)...); out != "billing\n" {
		t.Errorf("list: %q", out)
	}
	if out := mustRun(t, runGroup, "", append([]string{"list", "--state", "Empty,Dead"}, b...)...); out != "" {
		t.Errorf("list --state Empty,Dead: %q", out)
	}
	rows := fieldRows(mustRun(t, runGroup, "", append([]string{"list", "-v"}, b...)...))
	if len(rows) != 2 || strings.Join(rows[0], " ") != "GROUP STATE PROTOCOL-TYPE COORDINATOR" || strings.Join(rows[1], " ") != "billing Stable consumer 1" {
		t.Errorf("list -v: %q", rows)
	}

	out, _, err := run(t, t.Context(), runGroup, "", append([]string{"describe", "billing", "ghost"}, b...)...)
	if !errors.Is(err, kerr.GroupIDNotFound) || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("describe billing ghost: %v", err)
	}
	if want := "Group: billing\tState: Stable\tProtocol: cooperative-sticky (consumer)\tCoordinator: 1\tMembers: 1\n"; !strings.HasPrefix(out, want) {
		t.Errorf("describe summary:\n%s\nwant prefix %q", out, want)
	}
	rows = fieldRows(out)
	if m := findRow(rows, member); len(m) != 5 || m[1] != "-" || m[2] != "billing-app" || m[3] == "-" || m[4] != "orders-0,orders-1" {
		t.Errorf("member row %q in:\n%s", m, out)
	}
	host := findRow(rows, member)[3]
	for _, want := range [][]string{
		{"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER", "HOST", "CLIENT-ID"},
		{"orders", "0", "2", "3", "1", member, host, "billing-app"},
		{"orders", "1", "4", "4", "0", member, host, "billing-app"},
	} {
		if findRow(rows, want...) == nil {
			t.Errorf("describe lacks row %q:\n%s", want, out)
		}
	}

	_, _, err = run(t, t.Context(), runGroup, "", append([]string{"delete", "billing"}, b...)...)
	if !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("delete a group with a member: %v", err)
	}

	// Without members the committed offsets still show, assigned to no one.
	c.Close() // leaves the group
	out = mustRun(t, runGroup, "", append([]string{"describe", "billing"}, b...)...)
	if !strings.HasPrefix(out, "Group: billing\tState: Empty\tProtocol: - (consumer)\tCoordinator: 1\tMembers: 0\n") {
		t.Errorf("describe an empty group:\n%s", out)
	}
	if findRow(fieldRows(out), "orders", "0", "2", "3", "1", "-", "-", "-") == nil {
		t.Errorf("describe an empty group lacks the committed offset of orders-0:\n%s", out)
	}

	out = mustRun(t, runGroup, "", append([]string{"delete", "billing"}, b...)...)
	if out != "Deleted group billing.\n" {
		t.Errorf("delete: %q", out)
	}
	if out := mustRun(t, runGroup, "", append([]string{"list"}, b...)...); out != "" {
		t.Errorf("list after delete: %q", out)
	}
	if _, _, err := run(t, t.Context(), runGroup, "", append([]string{"delete", "billing"}, b...)...); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}

// TestGroupDescribeConsumerProtocol: a consumer-protocol group mid-migration (a classic
// franz-go consumer and a KIP-848 one) is described as kafka-consumer-groups.sh
// --describe --members --verbose shows it: the assignor and both epochs, and per member its
// epoch, current and target assignment and whether it is upgraded; then the committed
// offsets, as for a classic group.
func TestGroupDescribeConsumerProtocol(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500"}))
	b := []string{"-b", tb.Addr}
	createTopic(t, tb.Addr, "orders", 4)
	mustRun(t, runProduce, "a\nb\n", "orders", "-b", tb.Addr, "--partition", "0")
	opts := func(extra ...kgo.Opt) []kgo.Opt {
		return append([]kgo.Opt{kgo.ConsumerGroup("mixed"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
			kgo.HeartbeatInterval(300 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, extra...)
	}
	poll := func(c *kgo.Client) {
		go func() {
			for !c.PollFetches(t.Context()).IsClientClosed() {
				if t.Context().Err() != nil {
					return
				}
			}
		}()
	}
	classic := testClient(t, tb.Addr, opts(kgo.ClientID("classic-app"))...)
	poll(classic)
	upgraded := testClient(t, tb.Addr, opts(kgo.ClientID("kip848-app"), kgo.ServerSideBalancer())...)
	poll(upgraded)
	var out string
	if err := await.Until(time.Minute, 50*time.Millisecond, func() error {
		out = mustRun(t, runGroup, "", append([]string{"describe", "mixed"}, b...)...)
		if !strings.HasPrefix(out, "Group: mixed\tState: Stable\tType: consumer\tAssignor: uniform\t") {
			return fmt.Errorf("not a stable consumer group yet:\n%s", out)
		}
		for _, app := range []string{"classic-app", "kip848-app"} {
			if !strings.Contains(out, app) {
				return fmt.Errorf("no member %s yet", app)
			}
		}
		if strings.Count(out, "orders:") != 4 { // two members, current and target
			return fmt.Errorf("assignments not settled:\n%s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows := fieldRows(out)
	head := []string{"MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED"}
	if findRow(rows, head...) == nil {
		t.Fatalf("no members header %q in:\n%s", head, out)
	}
	summary := rows[0]
	epoch := summary[len(summary)-5] // "Target assignment epoch: N" then "Coordinator: 1 Members: 2"
	for _, r := range rows {
		if len(r) != len(head) || r[0] == "MEMBER" {
			continue
		}
		if r[1] != "-" || r[4] != "2" || r[7] != epoch || r[6] != r[8] || !strings.HasPrefix(r[6], "orders:") {
			t.Errorf("member row %q (target epoch %s) in:\n%s", r, epoch, out)
		}
		if want := map[string]string{"classic-app": "false", "kip848-app": "true"}[r[2]]; r[9] != want {
			t.Errorf("member %s UPGRADED %s, want %s", r[2], r[9], want)
		}
	}
	if findRow(rows, "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER", "HOST", "CLIENT-ID") == nil {
		t.Errorf("no partitions table:\n%s", out)
	}
	// The classic group view still serves classic groups by the same command.
	if _, _, err := run(t, t.Context(), runGroup, "", append([]string{"describe", "mixed", "ghost"}, b...)...); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("describe mixed ghost: %v", err)
	}
}
