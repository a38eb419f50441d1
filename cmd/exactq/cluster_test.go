package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/node/nodetest"
	"github.com/exactq/exactq/internal/testbroker"
)

func dirText(id int32) string {
	d := nodetest.DirectoryID(id)
	return base64.RawURLEncoding.EncodeToString(d[:])
}

// statusRows is cluster status's table: rows by node id.
func statusRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for _, r := range fieldRows(out) {
		if len(r) >= 8 && r[0] != "NODE" && r[0] != "Leader:" {
			rows[r[0]] = r
		}
	}
	return rows
}

// cluster status through a follower's controller listener prints the leader, epoch and
// high watermark and every voter with lag 0 once followers caught up; add-voter makes a
// joining node a voter; remove-voter takes one out; the commands refuse bad flags as
// usage errors and print the quorum's errors.
func TestClusterCommands(t *testing.T) {
	q := nodetest.Start(t, 3)
	lead, term := q.Leader()
	follower := q.Addrs[(lead+1)%3]
	bc := []string{"--bootstrap-controller", follower}

	var out string
	err := await.Until(10*time.Second, 20*time.Millisecond, func() error {
		out = mustRun(t, runCluster, "", append([]string{"status"}, bc...)...)
		rows := statusRows(t, out)
		if len(rows) != 3 {
			return fmt.Errorf("%d rows", len(rows))
		}
		for id, r := range rows {
			if r[4] != "0" {
				return fmt.Errorf("node %s lags %s", id, r[4])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("cluster status: %v\n%s", err, out)
	}
	for _, want := range []string{fmt.Sprintf("Leader:         %d\n", lead), fmt.Sprintf("Epoch:          %d\n", term)} {
		if !strings.Contains(out, want) {
			t.Fatalf("cluster status lacks %q:\n%s", want, out)
		}
	}
	rows := statusRows(t, out)
	if r := rows[fmt.Sprint(lead)]; r[1] != "leader" || r[2] != dirText(lead) || r[7] != q.Addrs[lead] {
		t.Fatalf("the leader's row %q", r)
	}

	joiner := q.Join()
	add := []string{"add-voter", "--node-id", fmt.Sprint(joiner), "--directory-id", dirText(joiner), "--controller-endpoint", q.Addrs[joiner], "--timeout", "10s"}
	if got := mustRun(t, runCluster, "", append(add, bc...)...); !strings.Contains(got, fmt.Sprintf("node %d is a voter", joiner)) {
		t.Fatalf("add-voter printed %q", got)
	}
	_, _, err = run(t, t.Context(), runCluster, "", append(add, bc...)...)
	if !errors.Is(err, kerr.DuplicateVoter) {
		t.Fatalf("add-voter of a voter: %v, want DUPLICATE_VOTER", err)
	}
	if rows := statusRows(t, mustRun(t, runCluster, "", append([]string{"status"}, bc...)...)); rows[fmt.Sprint(joiner)][1] != "voter" {
		t.Fatalf("after add-voter: %v", rows)
	}

	other := (lead + 2) % 3
	rm := []string{"remove-voter", "--node-id", fmt.Sprint(other), "--directory-id", dirText(other)}
	mustRun(t, runCluster, "", append(rm, bc...)...)
	if rows := statusRows(t, mustRun(t, runCluster, "", append([]string{"status"}, bc...)...)); len(rows) != 3 || rows[fmt.Sprint(other)] != nil {
		t.Fatalf("after remove-voter of node %d: %v", other, rows)
	}

	for _, args := range [][]string{
		{"status"},
		{"status", "--bootstrap-controller", "nohostport"},
		{"add-voter", "--node-id", "5", "--directory-id", "short", "--controller-endpoint", "h:1", "--bootstrap-controller", follower},
		{"add-voter", "--node-id", "5", "--directory-id", dirText(5), "--bootstrap-controller", follower},
		{"remove-voter", "--directory-id", dirText(5), "--bootstrap-controller", follower},
	} {
		_, _, err := run(t, t.Context(), runCluster, "", args...)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Fatalf("cluster %q: %v, want a usage error", args, err)
		}
	}
}

// cluster status -b asks a broker's client listener: the quorum (DescribeQuorum, which the
// broker forwards to the controller; a lone voter answers itself), the brokers with the
// controller marked, and the partitions without a leader (none on a serving node); without
// either address it is a usage error.
func TestClusterStatusThroughABroker(t *testing.T) {
	tb := testbroker.Start(t)
	mustRun(t, runTopic, "", "create", "st", "-p", "2", "-b", tb.Addr)
	out := mustRun(t, runCluster, "", "status", "-b", tb.Addr)
	for _, want := range []string{"Leader:         1\n", "\nBrokers:\n", "1     " + tb.Addr, "yes", "Partitions without a leader: none"} {
		if !strings.Contains(out, want) {
			t.Fatalf("cluster status -b: no %q in\n%s", want, out)
		}
	}
	rows := statusRows(t, out)
	if r, ok := rows["1"]; !ok || r[1] != "leader" {
		t.Fatalf("quorum rows %v", rows)
	}
	var ue *usageError
	if _, _, err := run(t, t.Context(), runCluster, "", "status"); !errors.As(err, &ue) {
		t.Fatalf("status without an address: %v, want a usage error", err)
	}
}
