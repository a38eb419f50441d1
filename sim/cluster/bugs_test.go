package cluster

import (
	"testing"
	"time"
)

// TestBugSnapshotStallsFollower is bug S1, found by the simulation (seeds 169, 219 and
// 248 of 100-299 at -chaos=60s; seed 248 here, 3 voters): a follower that needs a
// snapshot is never caught up again while the same leader leads, if the MsgSnap or the
// follower's answer to it is lost.
//
// Seed 248: n2 leads term 4; n1 was cut off and paused while n2 compacted its log, so
// at 52.361s n2 sends n1 a MsgSnap, which the network drops. Raft's progress for n1 is
// then StateSnapshot, in which the leader sends it nothing (Progress.IsPaused is always
// true there; heartbeat responses do not help) until the application reports the
// snapshot's fate with RawNode.ReportSnapshot (MsgSnapStatus). quorum.Loop never calls
// it and has no method through which its transport could, so n1 applies nothing more
// for the rest of the run: 30 s after everything healed it is at index 17 with the
// commit at 74. Seed 219 shows the other half: the MsgSnap arrives, n3 already has the
// snapshot's index committed and answers MsgAppResp, which is dropped; same stall.
//
// A fix belongs in internal/cluster/quorum (not this package's to change): report
// SnapshotFinish once a MsgSnap is handed to the transport and SnapshotFailure when the
// transport drops it (etcd's rafthttp does both), so the progress returns to
// StateProbe and the next heartbeat response resumes replication.
func TestBugSnapshotStallsFollower(t *testing.T) {
	t.Skip("bug S1: quorum.Loop never calls RawNode.ReportSnapshot; a lost MsgSnap stalls its follower (see the comment)")
	w := runSeed(t, 248, 3, 60*time.Second)
	report(t, w)
}
