package cluster

import (
	"fmt"
	"slices"

	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/quorum"
	pb "go.etcd.io/raft/v3/raftpb"
)

// reconfig is a voter change the fault schedule started, as an operator replacing a node
// runs it: RemoveRaftVoter, then AddRaftVoter (a learner, promoted once its log reaches
// the commit index), each a conf change through the quorum loop of whichever node serves
// then. It keeps its log, so it comes back with what it had (raft truncates what
// diverged). The cluster is settled only once the node is a voter again.
type reconfig struct {
	target *simNode
	phase  reconfigPhase
	// reply is the pending conf change's answer channel, from proposer's life gen; a
	// proposal whose proposer crashed is never answered, and another one is made.
	reply    <-chan quorum.Proposed
	proposer *simNode
	gen      int
}

type reconfigPhase int

const (
	phaseRemove reconfigPhase = iota
	phaseAdd
	phasePromote
)

func (p reconfigPhase) String() string {
	return [...]string{"remove", "add as learner", "promote"}[p]
}

// startReconfig begins replacing a random node (the fault schedule's move), unless one
// is under way.
func (w *world) startReconfig() {
	if w.rc != nil {
		return
	}
	t := w.nodes[w.rng.IntN(len(w.nodes))]
	w.rc = &reconfig{target: t}
	w.stats["fault.reconfig"]++
	w.tracef("reconfig: replacing n%d (remove, add as learner, promote)", t.id)
}

// driveReconfig moves the voter change on at the serving node n's tick: it reads the
// applied configuration and proposes the next conf change, one at a time.
func (w *world) driveReconfig(n *simNode) {
	rc := w.rc
	if rc == nil {
		return
	}
	if _, ok := n.loop.Serving(); !ok {
		return
	}
	if rc.reply != nil {
		if rc.proposer.up && rc.proposer.gen == rc.gen {
			select {
			case a := <-rc.reply:
				w.tracef("reconfig: %s of n%d answered at n%d: index %d, %v", rc.phase, rc.target.id, rc.proposer.id, a.Index, a.Err)
			default:
				return // still in flight
			}
		}
		rc.reply = nil
	}
	id := node.RaftID(rc.target.id)
	for {
		st := n.loop.DescribeNow()
		voter := slices.ContainsFunc(st.Voters, func(r quorum.Replica) bool { return r.RaftID == id })
		li := slices.IndexFunc(st.Learners, func(r quorum.Replica) bool { return r.RaftID == id })
		var cc *pb.ConfChangeV2
		switch rc.phase {
		case phaseRemove:
			if !voter && li < 0 {
				rc.phase = phaseAdd
				continue
			}
			cc = quorum.Remove(id)
		case phaseAdd:
			if li >= 0 || voter {
				rc.phase = phasePromote
				continue
			}
			cc = quorum.AddLearner(quorum.Member{RaftID: id, NodeID: rc.target.id, Endpoint: fmt.Sprintf("n%d", rc.target.id)})
		case phasePromote:
			if voter {
				w.tracef("reconfig: n%d is a voter again", rc.target.id)
				w.stats["reconfig.done"]++
				w.rc = nil
				return
			}
			if li < 0 || st.Learners[li].Match < st.Commit {
				return // not caught up yet
			}
			cc = quorum.Promote(id)
		}
		reply, err := n.loop.ProposeConfChangeAsync(cc)
		if err != nil {
			w.tracef("reconfig: %s of n%d at n%d: %v", rc.phase, rc.target.id, n.id, err)
			return
		}
		rc.reply, rc.proposer, rc.gen = reply, n, n.gen
		w.tracef("reconfig: n%d proposes %s of n%d", n.id, rc.phase, rc.target.id)
		return
	}
}
