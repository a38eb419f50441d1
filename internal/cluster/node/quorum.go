package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/server"
)

// MetadataTopic is the metadata log's topic name in DescribeQuorum (KRaft's).
const MetadataTopic = "__cluster_metadata"

// defaultListenerName is the controller listener's name when Cluster.ListenerName is
// empty (Kafka's usual controller.listener.names).
const defaultListenerName = "CONTROLLER"

// QuorumKeys are the quorum requests every controller listener serves, at Kafka 4.4's
// versions: DescribeQuorum (55), AddRaftVoter (80), RemoveRaftVoter (81), and
// DescribeCluster (60) with the controller endpoint type, which Kafka's admin client sends
// to a --bootstrap-controller first to find the controllers.
func QuorumKeys() []server.APIRange {
	describeCluster := server.Kafka44[60]
	describeCluster.MinVersion = 1 // v0 has no endpoint type
	return []server.APIRange{server.Kafka44[55], server.Kafka44[80], server.Kafka44[81], describeCluster}
}

// controllerAddr is node's controller listener: what a conf change's context says of it
// (a member that joined after this node started), else the configured voters'.
func (n *Node) controllerAddr(node int32) (string, bool) {
	if inc := n.inc.Load(); inc != nil {
		if m, ok := inc.loop.Members()[RaftID(node)]; ok && m.Endpoint != "" {
			return m.Endpoint, true
		}
	}
	if c := n.cfg.Cluster; c != nil {
		a, ok := c.Voters[node]
		return a, ok
	}
	return "", false
}

func (n *Node) listenerName() string {
	if c := n.cfg.Cluster; c != nil && c.ListenerName != "" {
		return c.ListenerName
	}
	return defaultListenerName
}

// directoryOf is the directory id known for a member: its conf change context's, this
// node's own, or the registered one (the image's).
func (n *Node) directoryOf(raftID uint64, members map[uint64]quorum.Member) [16]byte {
	if m, ok := members[raftID]; ok {
		return m.DirectoryID
	}
	c := n.cfg.Cluster
	if c == nil {
		return [16]byte{}
	}
	if raftID == RaftID(n.cfg.NodeID) {
		return c.DirectoryID
	}
	if c.DirectoryOf != nil {
		if d, ok := c.DirectoryOf(NodeID(raftID)); ok {
			return d
		}
	}
	return [16]byte{}
}

// DescribeQuorum answers DescribeQuorum (55) from this node's raft status, as Kafka's
// raft leader does: the metadata partition's leader, epoch (the raft term), high
// watermark (the commit index), voters and observers (learners) with their log end
// offsets (raft's Match) and when the leader last heard from them and last saw them caught
// up to the commit index, and (v2) the voters' controller listeners. A node that is not
// the raft leader answers NOT_LEADER_OR_FOLLOWER in the partition; a request for anything
// but __cluster_metadata partition 0, UNKNOWN_TOPIC_OR_PARTITION in each partition asked.
// The broker answers its clients' DescribeQuorum by forwarding to the leader's.
func (n *Node) DescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if len(req.Topics) != 1 || req.Topics[0].Topic != MetadataTopic || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeQuorumResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := partitionError(p.Partition, kerr.UnknownTopicOrPartition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	st, err := n.current().loop.Describe(ctx)
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = MetadataTopic
	switch {
	case err != nil && ctx.Err() != nil:
		rt.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{partitionError(0, kerr.RequestTimedOut)}
	case err != nil:
		rt.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{partitionError(0, kerr.BrokerNotAvailable)}
	case !st.Leading:
		rt.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{partitionError(0, kerr.NotLeaderForPartition)}
	default:
		p := kmsg.NewDescribeQuorumResponseTopicPartition()
		p.LeaderID = n.cfg.NodeID
		p.LeaderEpoch = int32(min(st.Term, 1<<31-1))
		p.HighWatermark = int64(st.Commit)
		now := n.cfg.Now().UnixMilli()
		for _, r := range st.Voters {
			p.CurrentVoters = append(p.CurrentVoters, n.replicaState(r, st, now))
		}
		for _, r := range st.Learners {
			p.Observers = append(p.Observers, n.replicaState(r, st, now))
		}
		rt.Partitions = []kmsg.DescribeQuorumResponseTopicPartition{p}
		for _, r := range st.Voters {
			resp.Nodes = append(resp.Nodes, n.quorumNode(NodeID(r.RaftID)))
		}
	}
	resp.Topics = []kmsg.DescribeQuorumResponseTopic{rt}
	return resp
}

func partitionError(partition int32, e *kerr.Error) kmsg.DescribeQuorumResponseTopicPartition {
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.Partition = partition
	p.ErrorCode = e.Code
	p.ErrorMessage = &e.Description
	p.LeaderID = -1
	p.LeaderEpoch = -1
	p.HighWatermark = -1
	return p
}

// replicaState is one member in DescribeQuorum. Kafka's offsets are exclusive ends and
// raft indexes start at 1 (offset = index − 1), so a log end offset is the last index held
// and the high watermark the commit index. The leader reports itself fetched and caught
// up now, as Kafka's does.
func (n *Node) replicaState(r quorum.Replica, st quorum.Status, now int64) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	rs.ReplicaID = NodeID(r.RaftID)
	rs.ReplicaDirectoryID = n.directoryOf(r.RaftID, st.Members)
	rs.LogEndOffset = -1
	if r.Match > 0 || !r.LastHeard.IsZero() {
		rs.LogEndOffset = int64(r.Match)
	}
	millis := func(t time.Time) int64 {
		if t.IsZero() {
			return -1
		}
		return t.UnixMilli()
	}
	rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = millis(r.LastHeard), millis(r.LastCaughtUp)
	if r.RaftID == st.ID {
		rs.LogEndOffset = int64(st.LastIndex)
		rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = now, now
	}
	return rs
}

func (n *Node) quorumNode(node int32) kmsg.DescribeQuorumResponseNode {
	qn := kmsg.NewDescribeQuorumResponseNode()
	qn.NodeID = node
	if addr, ok := n.controllerAddr(node); ok {
		if host, port, ok := splitAddr(addr); ok {
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = n.listenerName(), host, port
			qn.Listeners = append(qn.Listeners, l)
		}
	}
	return qn
}

func splitAddr(addr string) (string, uint16, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return host, uint16(p), err == nil
}

// DescribeCluster answers DescribeCluster (60) on the controller listener as Kafka's
// controller does (KIP-919): only for the controller endpoint type, with the voters and
// their controller listeners as the nodes and the raft leader as ControllerID (-1 when
// it is unknown).
func (n *Node) DescribeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	const controllerEndpoint = 2
	if req.EndpointType != controllerEndpoint {
		e := kerr.MismatchedEndpointType
		if req.EndpointType != 1 {
			e = kerr.UnsupportedEndpointType
		}
		msg := fmt.Sprintf("this is a controller listener; the request asks for endpoint type %d", req.EndpointType)
		resp.ErrorCode, resp.ErrorMessage = e.Code, &msg
		return resp
	}
	resp.EndpointType = controllerEndpoint
	if c := n.cfg.Cluster; c != nil && c.ClusterID != nil {
		resp.ClusterID = c.ClusterID()
	}
	resp.ControllerID = -1
	st, err := n.current().loop.Describe(ctx)
	if err != nil {
		e := quorumError(err)
		resp.ErrorCode = e.Code
		return resp
	}
	for _, r := range st.Voters {
		v := r.RaftID
		addr, ok := n.controllerAddr(NodeID(v))
		host, port, okAddr := splitAddr(addr)
		if !ok || !okAddr {
			continue
		}
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = NodeID(v), host, int32(port)
		resp.Brokers = append(resp.Brokers, b)
	}
	if lead, ok := n.Controller(); ok && slices.ContainsFunc(resp.Brokers, func(b kmsg.DescribeClusterResponseBroker) bool { return b.NodeID == lead }) {
		resp.ControllerID = lead
	}
	return resp
}

// quorumError is the Kafka error of a failed conf change.
func quorumError(err error) *kerr.Error {
	switch {
	case errors.Is(err, quorum.ErrNotController):
		return kerr.NotLeaderForPartition
	case errors.Is(err, quorum.ErrChangePending), errors.Is(err, context.DeadlineExceeded), errors.Is(err, quorum.ErrQueueFull):
		return kerr.RequestTimedOut
	case errors.Is(err, quorum.ErrAlreadyMember):
		return kerr.DuplicateVoter
	case errors.Is(err, quorum.ErrNotMember), errors.Is(err, quorum.ErrLastVoter):
		return kerr.VoterNotFound
	case errors.Is(err, quorum.ErrBadChange):
		return kerr.InvalidRequest
	case errors.Is(err, quorum.ErrStopped), errors.Is(err, context.Canceled):
		return kerr.BrokerNotAvailable
	}
	return kerr.UnknownServerError
}

// errorOf is a response's error code and message: msg, or the code's description as
// Kafka's RaftUtil gives when there is none.
func errorOf(e *kerr.Error, msg string) (int16, *string) {
	if msg == "" {
		msg = e.Description
	}
	return e.Code, &msg
}

// changeStart checks what AddRaftVoter and RemoveRaftVoter have in common, as Kafka's
// raft leader does: the cluster id, this node leading with its term's first entry
// applied, no other change in progress (changeMu, which the caller must unlock when ok).
func (n *Node) changeStart(ctx context.Context, clusterID *string) (quorum.Status, *kerr.Error, string, bool) {
	if clusterID != nil && n.cfg.Cluster != nil && n.cfg.Cluster.ClusterID != nil {
		if own := n.cfg.Cluster.ClusterID(); own != "" && *clusterID != own {
			return quorum.Status{}, kerr.InconsistentClusterID, fmt.Sprintf("the given id %q doesn't match the cluster id %q", *clusterID, own), false
		}
	}
	if !n.changeMu.TryLock() {
		return quorum.Status{}, kerr.RequestTimedOut, "request timed out waiting for leader to handle previous voter change request", false
	}
	st, err := n.current().loop.Describe(ctx)
	switch {
	case err != nil:
		n.changeMu.Unlock()
		return st, quorumError(err), err.Error(), false
	case !st.Leading:
		n.changeMu.Unlock()
		return st, kerr.NotLeaderForPartition, "", false
	case !st.Serving || st.ChangePending:
		n.changeMu.Unlock()
		return st, kerr.RequestTimedOut, "request timed out waiting for leader to establish its term and fence previous voter changes", false
	}
	return st, nil, "", true
}

func isVoter(st quorum.Status, id uint64) bool {
	return slices.ContainsFunc(st.Voters, func(r quorum.Replica) bool { return r.RaftID == id })
}

func learnerOf(st quorum.Status, id uint64) (quorum.Replica, bool) {
	i := slices.IndexFunc(st.Learners, func(r quorum.Replica) bool { return r.RaftID == id })
	if i < 0 {
		return quorum.Replica{}, false
	}
	return st.Learners[i], true
}

// AddVoter answers AddRaftVoter (80). KRaft's observers fetch on their own, so its leader
// only checks that the new voter has caught up; a raft leader replicates to a learner
// only once its configuration has it, so here the leader first adds the node as a learner
// (an observer in DescribeQuorum; its controller listener from the request), waits within
// the request's timeout for its log to reach the commit index, then promotes it, answering
// once the promotion is applied (committed). A node that does not catch up in time stays
// an observer and the answer is REQUEST_TIMED_OUT, as Kafka's for a voter lagging behind;
// a retry promotes it once it has. Refused as Kafka's leader refuses: another change in
// progress or not applied yet (REQUEST_TIMED_OUT), a voter already (DUPLICATE_VOTER), no
// directory id or no controller listener (INVALID_REQUEST), not the leader
// (NOT_LEADER_OR_FOLLOWER).
func (n *Node) AddVoter(ctx context.Context, req *kmsg.AddRaftVoterRequest) *kmsg.AddRaftVoterResponse {
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	fail := func(e *kerr.Error, msg string) *kmsg.AddRaftVoterResponse {
		resp.ErrorCode, resp.ErrorMessage = errorOf(e, msg)
		return resp
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if req.VoterID < 0 || req.VoterDirectoryID == ([16]byte{}) {
		return fail(kerr.InvalidRequest, "add voter request didn't include a valid voter")
	}
	i := slices.IndexFunc(req.Listeners, func(l kmsg.AddRaftVoterRequestListener) bool { return l.Name == n.listenerName() })
	if i < 0 {
		return fail(kerr.InvalidRequest, fmt.Sprintf("add voter request didn't include the endpoint for the listener %s", n.listenerName()))
	}
	l := req.Listeners[i]
	endpoint := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
	if err := CheckAddr(endpoint); err != nil {
		return fail(kerr.InvalidRequest, fmt.Sprintf("listener %s: %v", l.Name, err))
	}
	st, e, msg, ok := n.changeStart(ctx, req.ClusterID)
	if !ok {
		return fail(e, msg)
	}
	defer n.changeMu.Unlock()
	id := RaftID(req.VoterID)
	if isVoter(st, id) {
		return fail(kerr.DuplicateVoter, fmt.Sprintf("the voter id %d is already part of the set of voters", req.VoterID))
	}
	loop := n.current().loop
	if _, ok := learnerOf(st, id); ok {
		if m, known := st.Members[id]; known && m.DirectoryID != req.VoterDirectoryID {
			return fail(kerr.InvalidRequest, fmt.Sprintf("node %d is an observer with another directory id", req.VoterID))
		}
	} else {
		m := quorum.Member{RaftID: id, NodeID: req.VoterID, DirectoryID: req.VoterDirectoryID, Endpoint: endpoint}
		if _, err := loop.ProposeConfChange(ctx, quorum.AddLearner(m)); err != nil {
			return fail(quorumError(err), fmt.Sprintf("adding node %d as an observer: %v", req.VoterID, err))
		}
	}
	if err := n.awaitCaughtUp(ctx, loop, id); err != nil {
		return fail(quorumError(err), fmt.Sprintf("aborted add voter operation for %d since it is lagging behind (it stays an observer): %v", req.VoterID, err))
	}
	if _, err := loop.ProposeConfChange(ctx, quorum.Promote(id)); err != nil {
		return fail(quorumError(err), fmt.Sprintf("promoting node %d: %v", req.VoterID, err))
	}
	return resp
}

// awaitCaughtUp waits until the learner id's log reaches the commit index this leader
// had when the wait began (raft's Match; the loop records when it last did).
func (n *Node) awaitCaughtUp(ctx context.Context, loop *quorum.Loop, id uint64) error {
	var target uint64
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := loop.Describe(ctx)
		if err != nil {
			return err
		}
		if !st.Leading {
			return quorum.ErrNotController
		}
		if target == 0 {
			target = st.Commit
		}
		r, ok := learnerOf(st, id)
		if !ok {
			return quorum.ErrNotMember
		}
		if r.Match >= target && !r.LastCaughtUp.IsZero() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RemoveVoter answers RemoveRaftVoter (81): the member leaves the configuration once the
// removal is applied (committed); a leader removing itself then steps down and the others
// elect one among them (raft's StepDownOnRemoval, Kafka's resign). The last voter is never
// removed (VOTER_NOT_FOUND, as Kafka's empty voter set). An observer (a learner, say one
// whose AddRaftVoter timed out) may be removed too, which Kafka's RemoveRaftVoter does not
// do: its observers are not in the log. A directory id other than the member's known one
// is VOTER_NOT_FOUND, none INVALID_REQUEST, as in Kafka.
func (n *Node) RemoveVoter(ctx context.Context, req *kmsg.RemoveRaftVoterRequest) *kmsg.RemoveRaftVoterResponse {
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	fail := func(e *kerr.Error, msg string) *kmsg.RemoveRaftVoterResponse {
		resp.ErrorCode, resp.ErrorMessage = errorOf(e, msg)
		return resp
	}
	// Kafka waits controller.quorum.request.timeout.ms; a removal commits in a round trip.
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if req.VoterID < 0 || req.VoterDirectoryID == ([16]byte{}) {
		return fail(kerr.InvalidRequest, "remove voter request didn't include a valid voter")
	}
	st, e, msg, ok := n.changeStart(ctx, req.ClusterID)
	if !ok {
		return fail(e, msg)
	}
	defer n.changeMu.Unlock()
	id := RaftID(req.VoterID)
	_, learner := learnerOf(st, id)
	if !isVoter(st, id) && !learner {
		return fail(kerr.VoterNotFound, fmt.Sprintf("node %d is not part of the set of voters", req.VoterID))
	}
	if dir := n.directoryOf(id, st.Members); dir != ([16]byte{}) && dir != req.VoterDirectoryID {
		return fail(kerr.VoterNotFound, fmt.Sprintf("node %d has another directory id", req.VoterID))
	}
	if _, err := n.current().loop.ProposeConfChange(ctx, quorum.Remove(id)); err != nil {
		return fail(quorumError(err), fmt.Sprintf("removing node %d: %v", req.VoterID, err))
	}
	return resp
}
