package cluster

import (
	"strings"
	"testing"
	"time"
)

// TestUnreportedSnapshotStalls keeps what the simulation found first (seeds 169, 219
// and 248 of 100-299 at -chaos=60s, before the transport reported anything): a
// follower that needs a snapshot is never caught up again while the same leader leads
// if nobody tells raft that the MsgSnap, or the follower's answer to it, was lost.
//
// Seed 248, 3 voters: n2 leads term 4; n1 was cut off and paused while n2 compacted its
// log, so at 52.361s n2 sends n1 a MsgSnap, which the network drops. Raft's progress for
// n1 is then StateSnapshot, in which the leader sends it nothing (Progress.IsPaused is
// always true there, heartbeat responses do not help) until RawNode.ReportSnapshot says
// how the snapshot fared; 30 s after everything healed n1 is still at index 17 with the
// commit at 74. (Seed 219 is the other half: the MsgSnap arrives, the follower already
// has its index committed and answers MsgAppResp, which is dropped; same stall.)
//
// quorum.Loop gained ReportSnapshot and ReportUnreachable meanwhile (a292207); the
// simulated transport reports every lost raft message and every delivered MsgSnap, and
// the same seed settles. The real transport has the same duty (peer's OnRaftDrop for
// drops; a MsgSnap written to its connection is SnapshotFinish).
func TestUnreportedSnapshotStalls(t *testing.T) {
	silent := runSeed(t, 248, 3, 60*time.Second, func(w *world) { w.reportDelivery = false })
	if len(silent.errs) == 0 || !strings.Contains(silent.errs[0], "did not settle") {
		t.Fatalf("seed 248 without delivery reports: violations %q, want the cluster not settling (a follower stalled behind a lost MsgSnap)", silent.errs)
	}
	t.Logf("without reports: %s", silent.errs[0])
	reported := runSeed(t, 248, 3, 60*time.Second)
	report(t, reported)
}
