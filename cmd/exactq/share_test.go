package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fastShareConfig shortens share-group heartbeats and assignment pacing (as
// broker/share_test.go's) so tests do not wait out Kafka's 5 s heartbeat interval.
var fastShareConfig = map[string]string{
	"group.share.heartbeat.interval.ms":       "200",
	"group.share.min.heartbeat.interval.ms":   "200",
	"group.share.assignment.interval.ms":      "0",
	"group.share.min.record.lock.duration.ms": "1000",
}

// shareRows returns the share-partition rows of share describe's output (TOPIC PARTITION
// START-OFFSET LAG MEMBERS), keyed "topic partition".
func shareRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	in := false
	for _, r := range fieldRows(out) {
		switch {
		case len(r) > 0 && r[0] == "TOPIC":
			in = true
		case len(r) == 0 || strings.HasPrefix(r[0], "In-flight") || strings.HasPrefix(r[0], "Group:"):
			in = false
		case in:
			rows[r[0]+" "+r[1]] = r[2:]
		}
	}
	return rows
}

// recordRows returns the in-flight rows of share describe --records for one partition
// ("In-flight records of topic[p]: ..."), one per offset: STATE DELIVERIES MEMBER
// LOCK-DEADLINE PRODUCER-ID PRODUCER-EPOCH STAGED-ACK ON-ABORT.
func recordRows(t *testing.T, out, partition string) map[int64][]string {
	t.Helper()
	rows := map[int64][]string{}
	in := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "In-flight records of "):
			in = strings.HasPrefix(line, "In-flight records of "+partition+":")
		case len(f) == 0:
			in = false
		case !in || f[0] == "OFFSETS" || f[0] == "Counters:":
		default:
			first, last, _ := strings.Cut(f[0], "-")
			lo, err := strconv.ParseInt(first, 10, 64)
			hi := lo
			if err == nil && last != "" {
				hi, err = strconv.ParseInt(last, 10, 64)
			}
			if err != nil || len(f) != 9 {
				t.Fatalf("bad record row %q", line)
			}
			for o := lo; o <= hi; o++ {
				rows[o] = f[1:]
			}
		}
	}
	return rows
}

// Accepting consumes for good: the start offset moves past the records and the lag is 0.
// Releasing hands the records back: the next consumer gets them with delivery count 2.
func TestShareConsumeDescribeList(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	b := []string{"-b", tb.Addr}
	createTopic(t, tb.Addr, "jobs", 1)
	createTopic(t, tb.Addr, "mail", 1)
	mustRun(t, runProduce, "a\nb\nc\n", "jobs", "-b", tb.Addr)
	mustRun(t, runProduce, "x\ny\n", "mail", "-b", tb.Addr)

	out, errOut, err := run(t, t.Context(), runShare, "", append([]string{"consume", "jobs", "-g", "workers", "--from-earliest", "-n", "3", "--format", `%d %o %v\n`}, b...)...)
	if err != nil || out != "1 0 a\n1 1 b\n1 2 c\n" {
		t.Fatalf("consume --ack accept: %v %q\nstderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "% share-consuming jobs in group workers (explicit acknowledgement, ACCEPT)") || !strings.Contains(errOut, "% consumed 3 records") {
		t.Errorf("status lines: %q", errOut)
	}
	out = mustRun(t, runShare, "", append([]string{"describe", "workers"}, b...)...)
	if !strings.HasPrefix(out, "Group: workers\tState: Empty\t") || !strings.Contains(out, "Members: 0\n") {
		t.Errorf("describe summary:\n%s", out)
	}
	if got := shareRows(t, out)["jobs 0"]; strings.Join(got, " ") != "3 0 0" {
		t.Errorf("describe after accept: jobs 0 = %q (want start offset 3, lag 0, no members)\n%s", got, out)
	}

	// Release: the next member of the group gets the same records, delivered twice.
	out = mustRun(t, runShare, "", append([]string{"consume", "mail", "-g", "mailers", "--from-earliest", "--ack", "release", "-n", "2", "--format", `%d %v\n`, "-q"}, b...)...)
	if out != "1 x\n1 y\n" {
		t.Errorf("consume --ack release: %q", out)
	}
	if got := shareRows(t, mustRun(t, runShare, "", append([]string{"describe", "mailers"}, b...)...))["mail 0"]; strings.Join(got, " ") != "0 2 0" {
		t.Errorf("describe after release: mail 0 = %q (want start offset 0, lag 2)", got)
	}
	out = mustRun(t, runShare, "", append([]string{"consume", "mail", "-g", "mailers", "-n", "2", "--mode", "implicit", "--format", `%d %v\n`, "-q"}, b...)...)
	if out != "2 x\n2 y\n" {
		t.Errorf("consume after release: %q, want delivery count 2", out)
	}
	if got := shareRows(t, mustRun(t, runShare, "", append([]string{"describe", "mailers"}, b...)...))["mail 0"]; strings.Join(got, " ") != "2 0 0" {
		t.Errorf("describe after implicit accept: mail 0 = %q", got)
	}

	// A classic consumer group is not listed.
	c := testClient(t, tb.Addr, kgo.ConsumerGroup("classic"), kgo.ConsumeTopics("jobs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := c.PollFetches(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, runShare, "", append([]string{"list"}, b...)...); out != "mailers\nworkers\n" {
		t.Errorf("share list: %q", out)
	}
	rows := fieldRows(mustRun(t, runShare, "", append([]string{"list", "-v", "--state", "Empty"}, b...)...))
	if len(rows) != 3 || strings.Join(rows[0], " ") != "GROUP STATE COORDINATOR" || strings.Join(rows[1], " ") != "mailers Empty 1" {
		t.Errorf("share list -v: %q", rows)
	}

	// An unknown group fails, naming it; a known one given with it is still described.
	out, _, err = run(t, t.Context(), runShare, "", append([]string{"describe", "ghost", "workers"}, b...)...)
	if !errors.Is(err, kerr.GroupIDNotFound) || !strings.Contains(err.Error(), "ghost") || !strings.Contains(out, "Group: workers") {
		t.Errorf("describe ghost workers: %v\n%s", err, out)
	}
	// A topic that does not exist is an error, not a wait.
	_, _, err = run(t, t.Context(), runShare, "", append([]string{"consume", "nope", "-g", "workers"}, b...)...)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("consume nope: %v", err)
	}
}

// -n acquires no more records than it prints. The ten records are one batch: the broker
// would hand the whole batch to the first run (and kgo fetch ahead), the seven unprinted
// records would go back with delivery count 2, and every later run would raise it again
// until share.delivery.count.limit archived records nobody printed.
func TestShareConsumeTakesOnlyN(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	createTopic(t, tb.Addr, "jobs", 1)
	mustRun(t, runProduce, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", "jobs", "-b", tb.Addr)
	args := []string{"consume", "jobs", "-g", "w", "--from-earliest", "-n", "3", "--format", `%d %v,`, "-q", "-b", tb.Addr}
	for _, want := range []string{"1 a,1 b,1 c,", "1 d,1 e,1 f,", "1 g,1 h,1 i,"} {
		if out := mustRun(t, runShare, "", args...); out != want {
			t.Fatalf("consume -n 3: %q, want %q (delivery count, value)", out, want)
		}
	}
	if got := shareRows(t, mustRun(t, runShare, "", "describe", "w", "-b", tb.Addr))["jobs 0"]; strings.Join(got, " ") != "9 1 0" {
		t.Errorf("describe: jobs 0 = %q (want start offset 9, lag 1)", got)
	}
}

// SIGINT (ctx cancelled) stops share consume cleanly; the records it printed are
// acknowledged on the way out.
func TestShareConsumeStopsOnCancel(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	createTopic(t, tb.Addr, "jobs", 1)
	mustRun(t, runProduce, "a\n", "jobs", "-b", tb.Addr)
	ctx, cancel := context.WithCancel(t.Context())
	bg := start(ctx, runShare, strings.NewReader(""), "consume", "jobs", "-g", "w", "--from-earliest", "--ack", "reject", "-b", tb.Addr)
	bg.stdout.waitFor(t, "the record", func(s string) bool { return s == "a\n" })
	cancel()
	if err := bg.wait(t); err != nil {
		t.Fatalf("after cancel: %v\nstderr:\n%s", err, bg.stderr.String())
	}
	// Rejected: archived, so the start offset moved past it.
	if got := shareRows(t, mustRun(t, runShare, "", "describe", "w", "-b", tb.Addr))["jobs 0"]; strings.Join(got, " ") != "1 0 0" {
		t.Errorf("describe after reject: jobs 0 = %q", got)
	}
}

// describe --records shows the in-flight window from the admin listener: records held
// by a member that has not acknowledged them, then the same records staged in a producer
// transaction.
func TestShareDescribeRecords(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	srv := httptest.NewServer(metricsHandler(tb.Broker, slog.Default()))
	defer srv.Close()
	b := []string{"-b", tb.Addr}
	createTopic(t, tb.Addr, "jobs", 1)
	mustRun(t, runProduce, "a\nb\nc\n", "jobs", "-b", tb.Addr)

	if err := alterGroupConfig(t.Context(), testClient(t, tb.Addr), "holders", "share.auto.offset.reset", "earliest"); err != nil {
		t.Fatal(err)
	}

	// A member that holds the records: kgoext's share consumer in explicit mode, which
	// acknowledges nothing it is not told to (kgo's accepts them on its next poll).
	sc, err := kgoext.NewShareConsumer(testClient(t, tb.Addr), "holders", kgoext.ShareTopics("jobs"), kgoext.ExplicitAcks(),
		kgoext.ShareMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		sc.Close(ctx)
	}()
	var recs []*kgo.Record
	for len(recs) < 3 {
		got, err := sc.Poll(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, got...)
	}
	member := sc.GroupMetadata().MemberID

	out := mustRun(t, runShare, "", append([]string{"describe", "holders", "--records", "--admin", srv.URL}, b...)...)
	if !strings.Contains(out, "\nMEMBER") || !strings.Contains(out, member) {
		t.Errorf("describe: the member %s is missing:\n%s", member, out)
	}
	if got := shareRows(t, out)["jobs 0"]; len(got) != 3 || got[0] != "0" || got[2] != "1" {
		t.Errorf("describe: jobs 0 = %q (want start offset 0, 1 member)\n%s", got, out)
	}
	rows := recordRows(t, out, "jobs[0]")
	for _, r := range recs {
		row := rows[r.Offset]
		if len(row) != 8 || row[0] != "ACQUIRED" || row[1] != "1" || row[2] != member || row[3] == "-" || strings.Join(row[4:], " ") != "- - - -" {
			t.Errorf("offset %d held unacknowledged: %q\n%s", r.Offset, row, out)
		}
		if deadline, err := time.Parse("2006-01-02T15:04:05.000Z", row[3]); err != nil || deadline.Before(time.Now().Add(-time.Minute)) {
			t.Errorf("offset %d lock deadline %q: %v", r.Offset, row[3], err)
		}
	}

	// Stage the acknowledgements in a transaction (KIP-1289): TX_PENDING with the producer
	// id and epoch.
	p := testClient(t, tb.Addr, append([]kgo.Opt{kgo.TransactionalID("stager")}, kgoext.TransactionalOpts()...)...)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := sc.Acknowledge(r, kgoext.AckAccept); err != nil {
			t.Fatal(err)
		}
	}
	acks, err := sc.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	if err := kgoext.SendShareAcksToTransaction(t.Context(), p, acks, sc.GroupMetadata()); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := p.ProducerID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out = mustRun(t, runShare, "", append([]string{"describe", "holders", "--admin", strings.TrimPrefix(srv.URL, "http://")}, b...)...)
	rows = recordRows(t, out, "jobs[0]")
	want := fmt.Sprintf("TX_PENDING 1 %s - %d %d ACCEPT AVAILABLE", member, pid, epoch)
	for _, r := range recs {
		if got := strings.Join(rows[r.Offset], " "); got != want {
			t.Errorf("offset %d staged: %q, want %q\n%s", r.Offset, got, want, out)
		}
	}
	if !strings.Contains(out, fmt.Sprintf(", %d TX_PENDING\n", len(recs))) {
		t.Errorf("window summary lacks %d TX_PENDING:\n%s", len(recs), out)
	}
	if err := kgoext.EndTransaction(t.Context(), p, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	// The abort markers are written after EndTxn answers: the records come back AVAILABLE.
	eventually(t, "the aborted acknowledgements are resolved", func() error {
		out := mustRun(t, runShare, "", append([]string{"describe", "holders", "--admin", srv.URL}, b...)...)
		rows := recordRows(t, out, "jobs[0]")
		for _, r := range recs {
			if got := strings.Join(rows[r.Offset], " "); got != "AVAILABLE 1 - - - - - -" {
				return fmt.Errorf("offset %d: %q", r.Offset, got)
			}
		}
		return nil
	})
	// The admin listener answering an error is reported.
	_, _, err = run(t, t.Context(), runShare, "", append([]string{"describe", "holders", "--admin", srv.URL + "/nothing-here"}, b...)...)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("describe with a wrong admin URL: %v", err)
	}
}

func TestShareUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"frob"},
		{"consume"},
		{"consume", "t"},
		{"consume", "t", "u", "-g", "g"},
		{"consume", "t", "-g", "g", "--ack", "maybe"},
		{"consume", "t", "-g", "g", "--ack", "renew"},
		{"consume", "t", "-g", "g", "--mode", "lazy"},
		{"consume", "t", "-g", "g", "--mode", "implicit", "--ack", "release"},
		{"consume", "t", "-g", "g", "-n", "-1"},
		{"consume", "t", "-g", "g", "--format", "%x"},
		{"describe"},
		{"describe", "g", "--records"},
		{"describe", "g", "--admin", "ftp://host:1"},
		{"list", "extra"},
		{"reset-offsets", "-g", "g", "--to-earliest"},
		{"reset-offsets", "--topic", "t", "--to-earliest"},
		{"reset-offsets", "-g", "g", "--topic", "t"},
		{"reset-offsets", "-g", "g", "--topic", "t", "--to-earliest", "--to-latest"},
		{"reset-offsets", "-g", "g", "--topic", "t", "--to-offset", "-3"},
		{"reset-offsets", "-g", "g", "--topic", "t:x", "--to-offset", "3"},
		{"delete-offsets", "-g", "g"},
		{"delete-offsets", "--topic", "t"},
	} {
		// No broker is needed: the port is never dialled.
		_, _, err := run(t, t.Context(), runShare, "", append(args, "-b", "127.0.0.1:1")...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
			continue
		}
		hint := `Run "exactq share -h" for usage.`
		if len(args) > 0 && args[0] != "frob" {
			hint = `Run "exactq share ` + args[0] + ` -h" for usage.`
		}
		var stderr bytes.Buffer
		if code := exitCode("share", err, &stderr); code != 2 || !strings.Contains(stderr.String(), hint) {
			t.Errorf("%v: exit code %d, stderr %q, want %q", args, code, stderr.String(), hint)
		}
	}
	// %d is share consume's only.
	var ue *usageError
	if _, _, err := run(t, t.Context(), runConsume, "", "t", "--format", "%d", "-b", "127.0.0.1:1"); !errors.As(err, &ue) {
		t.Errorf("consume --format %%d: %v, want a usage error", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, shareUsage},
		{[]string{"consume", "-h"}, shareConsumeUsage},
		{[]string{"describe", "--help"}, shareDescribeUsage},
	} {
		out, _, err := run(t, t.Context(), runShare, "", tc.args...)
		if !errors.Is(err, errHelp) || exitCode("share", err, io.Discard) != 0 || out != tc.want {
			t.Errorf("share %v: %v, %q", tc.args, err, out)
		}
	}
}

// reset-offsets moves an empty share group's start offset (--to-offset, --to-earliest,
// --to-latest, --dry-run changing nothing) and delete-offsets forgets it; both refuse a
// group with members.
func TestShareResetAndDeleteOffsets(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	b := []string{"-b", tb.Addr}
	createTopic(t, tb.Addr, "jobs", 2)
	mustRun(t, runProduce, "a\nb\nc\nd\n", "jobs", "-b", tb.Addr, "--partition", "0")
	mustRun(t, runShare, "", append([]string{"consume", "jobs", "-g", "workers", "--from-earliest", "-n", "4", "-q"}, b...)...)
	startOf := func(p string) string {
		t.Helper()
		got := shareRows(t, mustRun(t, runShare, "", append([]string{"describe", "workers"}, b...)...))["jobs "+p]
		if len(got) == 0 {
			return "-"
		}
		return got[0]
	}
	if got := startOf("0"); got != "4" {
		t.Fatalf("start offset after consuming: %s", got)
	}
	out := mustRun(t, runShare, "", append([]string{"reset-offsets", "-g", "workers", "--topic", "jobs:0", "--to-offset", "1", "--dry-run"}, b...)...)
	if rows := fieldRows(out); len(rows) != 2 || strings.Join(rows[1], " ") != "workers jobs 0 1" || startOf("0") != "4" {
		t.Fatalf("dry run: %q, start offset %s", out, startOf("0"))
	}
	out = mustRun(t, runShare, "", append([]string{"reset-offsets", "-g", "workers", "--topic", "jobs:0", "--to-offset", "1"}, b...)...)
	if rows := fieldRows(out); len(rows) != 2 || strings.Join(rows[0], " ") != "GROUP TOPIC PARTITION NEW-START-OFFSET" || startOf("0") != "1" {
		t.Fatalf("reset to 1: %q, start offset %s", out, startOf("0"))
	}
	out = mustRun(t, runShare, "", append([]string{"consume", "jobs", "-g", "workers", "-n", "3", "--format", `%d %v\n`, "-q"}, b...)...)
	if out != "1 b\n1 c\n1 d\n" {
		t.Fatalf("consume after the reset: %q", out)
	}
	mustRun(t, runShare, "", append([]string{"reset-offsets", "-g", "workers", "--topic", "jobs", "--to-earliest"}, b...)...)
	if startOf("0") != "0" || startOf("1") != "0" {
		t.Fatalf("to-earliest: %s %s", startOf("0"), startOf("1"))
	}
	mustRun(t, runShare, "", append([]string{"reset-offsets", "-g", "workers", "--topic", "jobs", "--to-latest"}, b...)...)
	if startOf("0") != "4" || startOf("1") != "0" {
		t.Fatalf("to-latest: %s %s", startOf("0"), startOf("1"))
	}

	out = mustRun(t, runShare, "", append([]string{"delete-offsets", "-g", "workers", "--topic", "jobs"}, b...)...)
	if rows := fieldRows(out); len(rows) != 2 || strings.Join(rows[1], " ") != "jobs Successful" {
		t.Fatalf("delete-offsets: %q", out)
	}
	if got := startOf("0"); got != "-" {
		t.Fatalf("start offset after delete-offsets: %s", got)
	}
	out, _, err := run(t, t.Context(), runShare, "", append([]string{"delete-offsets", "-g", "workers", "--topic", "jobs"}, b...)...)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(out, "There is no offset information to delete.") {
		t.Fatalf("second delete-offsets: %v %q", err, out)
	}

	// A member in the group: both refused.
	// kgo's share consumer joins on its first poll, which waits for records: the group has
	// a member once describe says so.
	sc := testClient(t, tb.Addr, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
	pollCtx, stopPoll := context.WithCancel(t.Context())
	defer stopPoll()
	go sc.PollFetches(pollCtx)
	eventually(t, "the member joins", func() error {
		out := mustRun(t, runShare, "", append([]string{"describe", "workers"}, b...)...)
		if !strings.Contains(out, "Members: 1\n") {
			return errors.New(out)
		}
		return nil
	})
	if _, _, err := run(t, t.Context(), runShare, "", append([]string{"reset-offsets", "-g", "workers", "--topic", "jobs", "--to-offset", "0"}, b...)...); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("reset with a member: %v", err)
	}
	if _, _, err := run(t, t.Context(), runShare, "", append([]string{"delete-offsets", "-g", "workers", "--topic", "jobs"}, b...)...); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Errorf("delete with a member: %v", err)
	}
}
