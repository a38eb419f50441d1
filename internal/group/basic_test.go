package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinSyncStableCommitFetchRestart(t *testing.T) {
	e := newEnv(t, nil)
	j := e.joinNew("g").get(t).(*kmsg.JoinGroupResponse)
	if j.ErrorCode != 0 || j.Generation != 1 || j.LeaderID != j.MemberID || len(j.Members) != 1 || *j.Protocol != "range" {
		t.Fatalf("join: %+v", j)
	}
	s := e.sync("g", j.MemberID, 1, map[string][]byte{j.MemberID: []byte("A")}).get(t).(*kmsg.SyncGroupResponse)
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync: %+v", s)
	}
	if code := e.heartbeat("g", j.MemberID, 1); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := e.commit("g", j.MemberID, 1, "t", 0, 42); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if off, code := e.fetch("g", "t", 0, false); off != 42 || code != 0 {
		t.Fatalf("fetch: %d %d", off, code)
	}
	e.settle()
	e.restart()
	if off, code := e.fetch("g", "t", 0, false); off != 42 || code != 0 {
		t.Fatalf("fetch after restart: %d %d", off, code)
	}
	d, _ := e.c.DescribeGroups(t.Context(), 5, &kmsg.DescribeGroupsRequest{Groups: []string{"g"}})
	dg := d.(*kmsg.DescribeGroupsResponse).Groups[0]
	if dg.State != "Stable" || len(dg.Members) != 1 || string(dg.Members[0].MemberAssignment) != "A" {
		t.Fatalf("describe after restart: %+v", dg)
	}
	// The member survives the restart and keeps heartbeating in its generation.
	if code := e.heartbeat("g", j.MemberID, 1); code != 0 {
		t.Fatalf("heartbeat after restart: %d", code)
	}
}
