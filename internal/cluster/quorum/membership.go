package quorum

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Member is what a conf change entry says of the raft member it adds, in the entry's
// Context (docs/architecture.md, "Nodes, roles and configuration": VoterContext): the log
// is where every node learns the address of a member that joined after it started. The
// voters a cluster bootstrapped with have none: their addresses are every node's
// configuration.
type Member struct {
	RaftID      uint64   `json:"raft_id"`
	NodeID      int32    `json:"node_id"`
	DirectoryID [16]byte `json:"directory_id"`
	// Endpoint is the member's controller listener, host:port.
	Endpoint string `json:"endpoint"`
}

// EncodeMember is a conf change's Context for m.
func EncodeMember(m Member) []byte {
	b, _ := json.Marshal(m) // a struct of plain fields: cannot fail
	return b
}

func decodeMember(b []byte) (Member, bool) {
	var m Member
	if len(b) == 0 || json.Unmarshal(b, &m) != nil || m.RaftID == 0 {
		return Member{}, false
	}
	return m, true
}

// Errors of ProposeConfChange (besides ErrNotController and ErrStopped).
var (
	// ErrChangePending: a conf change is proposed and not applied yet; raft takes one at
	// a time (Kafka: REQUEST_TIMED_OUT).
	ErrChangePending = errors.New("quorum: another voter change is not applied yet")
	// ErrAlreadyMember: the member to add is one already (Kafka: DUPLICATE_VOTER).
	ErrAlreadyMember = errors.New("quorum: already a member of the quorum")
	// ErrNotMember: the member to remove or promote is not one (Kafka: VOTER_NOT_FOUND).
	ErrNotMember = errors.New("quorum: not a member of the quorum")
	// ErrLastVoter: removing the only voter would leave nobody to commit the removal.
	ErrLastVoter = errors.New("quorum: the last voter cannot be removed")
	// ErrBadChange: not one simple change (one add, promotion or removal).
	ErrBadChange = errors.New("quorum: a conf change is one add, promotion or removal")
)

// checkChange validates one conf change against cs, the applied configuration.
func checkChange(cs *pb.ConfState, cc *pb.ConfChangeV2) error {
	if len(cc.GetChanges()) != 1 || cc.GetTransition() != pb.ConfChangeTransition_ConfChangeTransitionAuto {
		return ErrBadChange
	}
	c := cc.GetChanges()[0]
	id := c.GetNodeId()
	voter, learner := slices.Contains(cs.GetVoters(), id), slices.Contains(cs.GetLearners(), id)
	switch c.GetType() {
	case pb.ConfChangeType_ConfChangeAddLearnerNode:
		if voter || learner {
			return ErrAlreadyMember
		}
	case pb.ConfChangeType_ConfChangeAddNode:
		// A voter is added by promoting a learner that has caught up, never directly:
		// a voter with an empty log would slow every commit until it caught up.
		if voter {
			return ErrAlreadyMember
		}
		if !learner {
			return ErrNotMember
		}
	case pb.ConfChangeType_ConfChangeRemoveNode:
		if !voter && !learner {
			return ErrNotMember
		}
		if voter && len(cs.GetVoters()) == 1 {
			return ErrLastVoter
		}
	default:
		return ErrBadChange
	}
	if id == 0 {
		return ErrBadChange
	}
	return nil
}

// ProposeConfChange proposes one membership change (ConfChangeV2 with one change: add a
// learner, promote a learner to voter, remove a member; an add carries its Member in
// Context) and returns its entry's index once applied here (an add's Member goes in the
// ConfChangeV2's Context). Only the serving leader takes
// one, and one at a time: while another is not applied, ErrChangePending. It goes
// through the loop with the other proposals and is applied in log order with them.
func (l *Loop) ProposeConfChange(ctx context.Context, cc *pb.ConfChangeV2) (uint64, error) {
	reply, err := l.ProposeConfChangeAsync(cc)
	if err != nil {
		return 0, err
	}
	select {
	case a := <-reply:
		return a.Index, a.Err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-l.done:
		select {
		case a := <-reply:
			return a.Index, a.Err
		default:
			return 0, ErrStopped
		}
	}
}

// ProposeConfChangeAsync queues ProposeConfChange and returns at once; the channel gets
// its answer once (as ProposeAsync's).
func (l *Loop) ProposeConfChangeAsync(cc *pb.ConfChangeV2) (<-chan Proposed, error) {
	p := &proposal{conf: cc, reply: make(chan Proposed, 1)}
	if err := l.enqueue(input{kind: inPropose, prop: p}); err != nil {
		return nil, err
	}
	return p.reply, nil
}

// DescribeNow is Describe read directly: only for the goroutine that calls Poll.
func (l *Loop) DescribeNow() Status { return l.status() }

// proposeConfChange is ProposeConfChange on the loop goroutine, the node serving.
func (l *Loop) proposeConfChange(p *proposal) error {
	if l.confInFlight {
		return ErrChangePending
	}
	if err := checkChange(l.cs, p.conf); err != nil {
		return err
	}
	if err := l.rn.ProposeConfChange(p.conf); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			return ErrNotController
		}
		return err
	}
	l.confInFlight = true
	return nil
}

// Replica is one quorum member as the leader sees it (DescribeQuorum's ReplicaState).
type Replica struct {
	RaftID  uint64
	Learner bool
	// Match is the highest index known to be in its log (raft's Progress.Match; the
	// leader's own last index); 0 when unknown (not the leader's view).
	Match uint64
	// LastHeard is when the leader last received a message from it; LastCaughtUp the
	// last time its Match reached the commit index. Zero: never in this term (and always
	// on a node that does not lead).
	LastHeard, LastCaughtUp time.Time
}

// Status is the quorum as this node sees it (DescribeQuorum's partition, and more).
type Status struct {
	ID     uint64 // this node's raft id
	Leader uint64 // 0 when none is known
	Term   uint64
	Commit uint64
	// Leading is true on the raft leader: only then do Voters and Learners carry Match
	// and the timestamps.
	Leading bool
	// Serving is true once the leader's term's first entry is applied.
	Serving bool
	// LastIndex is this node's last log index; Applied its applied index.
	LastIndex, Applied uint64
	// Voters and Learners of the applied configuration, by raft id.
	Voters, Learners []Replica
	// Members are the members known from conf change contexts, by raft id.
	Members map[uint64]Member
	// ChangePending is true while a conf change this leader proposed is not applied.
	ChangePending bool
}

func (l *Loop) status() Status {
	bs := l.rn.BasicStatus()
	last, _ := l.opts.Store.Storage().LastIndex()
	st := Status{ID: l.opts.ID, Leader: bs.Lead, Term: bs.GetTerm(), Commit: bs.GetCommit(), Leading: l.leading, Serving: l.serving,
		LastIndex: last, Applied: l.applied, Members: maps.Clone(l.members), ChangePending: l.confInFlight}
	match := map[uint64]uint64{}
	if l.leading {
		l.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { match[id] = pr.Match })
	}
	replica := func(id uint64, learner bool) Replica {
		r := Replica{RaftID: id, Learner: learner, Match: match[id], LastHeard: l.heard[id], LastCaughtUp: l.caughtUp[id]}
		if id == l.opts.ID && l.leading {
			r.Match = last
		}
		return r
	}
	for _, id := range l.cs.GetVoters() {
		st.Voters = append(st.Voters, replica(id, false))
	}
	for _, id := range l.cs.GetLearners() {
		st.Learners = append(st.Learners, replica(id, true))
	}
	return st
}

// noteHeard records, while leading, that a message from its peer arrived and whether
// the peer's Match has reached the commit index (DescribeQuorum's LastFetchTimestamp and
// LastCaughtUpTimestamp).
func (l *Loop) noteHeard(m *pb.Message) {
	if !l.leading {
		return
	}
	from, now := m.GetFrom(), l.opts.Now()
	l.heard[from] = now
	switch m.GetType() {
	case pb.MessageType_MsgAppResp, pb.MessageType_MsgHeartbeatResp:
	default:
		return
	}
	commit := l.rn.BasicStatus().GetCommit()
	l.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == from && pr.Match >= commit {
			l.caughtUp[from] = now
		}
	})
}

// noteMembers applies a conf change's membership to the known members.
func (l *Loop) noteMembers(cc pb.ConfChangeI) {
	v2 := cc.AsV2()
	for _, c := range v2.GetChanges() {
		switch c.GetType() {
		case pb.ConfChangeType_ConfChangeAddNode, pb.ConfChangeType_ConfChangeAddLearnerNode:
			if m, ok := decodeMember(v2.GetContext()); ok && m.RaftID == c.GetNodeId() {
				l.setMember(m)
			}
		case pb.ConfChangeType_ConfChangeRemoveNode:
			if _, ok := l.members[c.GetNodeId()]; ok {
				next := maps.Clone(l.members)
				delete(next, c.GetNodeId())
				l.members = next
				l.membersPub.Store(&next)
			}
		}
	}
}

func (l *Loop) setMember(m Member) {
	next := maps.Clone(l.members)
	if next == nil {
		next = map[uint64]Member{}
	}
	next[m.RaftID] = m
	l.members = next
	l.membersPub.Store(&next)
}

// setMembers replaces the known members (a checkpoint's).
func (l *Loop) setMembers(members map[uint64]Member) {
	l.members = members
	l.membersPub.Store(&members)
}

// Members are the quorum members known from conf change contexts, by raft id (the
// voters a cluster bootstrapped with are not among them). Safe from any goroutine; the
// map is not to be changed.
func (l *Loop) Members() map[uint64]Member {
	if p := l.membersPub.Load(); p != nil {
		return *p
	}
	return nil
}

// A checkpoint's data is the Machine's, preceded by the known members when there are
// any: a conf change entry is compacted away with the rest of the log, and the members'
// addresses must outlive it. A checkpoint without members (every lone voter's, and those
// written before members existed) is the Machine's data alone, as before.
var checkpointMagic = []byte("exactq-members\x00")

func (l *Loop) encodeCheckpoint(state any) ([]byte, error) {
	data, err := l.opts.Machine.Encode(state)
	if err != nil || len(l.members) == 0 {
		return data, err
	}
	ms, err := json.Marshal(slices.SortedFunc(maps.Values(l.members), func(a, b Member) int { return cmp.Compare(a.RaftID, b.RaftID) }))
	if err != nil {
		return nil, err
	}
	out := append(slices.Clone(checkpointMagic), binary.AppendUvarint(nil, uint64(len(ms)))...)
	return append(append(out, ms...), data...), nil
}

func (l *Loop) decodeCheckpoint(data []byte) (any, map[uint64]Member, error) {
	var members map[uint64]Member
	if rest, ok := bytes.CutPrefix(data, checkpointMagic); ok {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, nil, errors.New("members: bad length")
		}
		var list []Member
		if err := json.Unmarshal(rest[k:k+int(n)], &list); err != nil {
			return nil, nil, fmt.Errorf("members: %w", err)
		}
		members = map[uint64]Member{}
		for _, m := range list {
			members[m.RaftID] = m
		}
		data = rest[k+int(n):]
	}
	st, err := l.opts.Machine.Decode(data)
	return st, members, err
}

// AddLearner is the conf change adding m as a learner (DescribeQuorum's observer): it
// receives the log like a voter and does not vote.
func AddLearner(m Member) *pb.ConfChangeV2 {
	return oneChange(pb.ConfChangeType_ConfChangeAddLearnerNode, m.RaftID, EncodeMember(m))
}

// Promote is the conf change making the learner id a voter.
func Promote(id uint64) *pb.ConfChangeV2 {
	return oneChange(pb.ConfChangeType_ConfChangeAddNode, id, nil)
}

// Remove is the conf change removing the member id (voter or learner).
func Remove(id uint64) *pb.ConfChangeV2 {
	return oneChange(pb.ConfChangeType_ConfChangeRemoveNode, id, nil)
}

func oneChange(t pb.ConfChangeType, id uint64, context []byte) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: t.Enum(), NodeId: &id}}, Context: context}
}
