package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/cluster/quorum"
)

// client is a peer.TCP reaching every test node's controller listener, joiners too.
func (c *testCluster) client() *peer.TCP {
	tr := peer.NewTCP(peer.Config{Self: 99, Addr: func(id int32) (string, bool) {
		a := c.addr(id)
		return a, a != ""
	}})
	c.t.Cleanup(tr.Close)
	return tr
}

// serving waits until one running node serves and returns it.
func (c *testCluster) serving() int32 {
	c.t.Helper()
	lead := int32(-1)
	err := await.Until(30*time.Second, 5*time.Millisecond, func() error {
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			if _, ok := n.Serving(); ok {
				lead = int32(i)
				return nil
			}
		}
		return errors.New("no node serves")
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return lead
}

func describeQuorum(t *testing.T, tr *peer.TCP, id int32) *kmsg.DescribeQuorumResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = MetadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	resp, err := tr.Send(context.Background(), id, peer.Control, req)
	if err != nil {
		t.Fatalf("DescribeQuorum to node %d: %v", id, err)
	}
	return resp.(*kmsg.DescribeQuorumResponse)
}

// quorumPartition is the leader's answer's partition, failing on an error.
func quorumPartition(t *testing.T, resp *kmsg.DescribeQuorumResponse) kmsg.DescribeQuorumResponseTopicPartition {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Topic != MetadataTopic {
		t.Fatalf("DescribeQuorum answered %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("DescribeQuorum: %v", err)
	}
	return p
}

func replicaIDs(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.ReplicaID)
	}
	slices.Sort(out)
	return out
}

// DescribeQuorum on the controller listener: the leader answers the partition
// (__cluster_metadata 0) with itself as leader, its term as epoch, the commit index as
// high watermark, every voter with its directory id, log end offset and timestamps, and
// the voters' controller listeners; a follower answers NOT_LEADER_OR_FOLLOWER, another
// partition UNKNOWN_TOPIC_OR_PARTITION. After more commits the high watermark and every
// voter's log end offset and fetch time have moved.
func TestDescribeQuorumOverTCP(t *testing.T) {
	c := newTestCluster(t, 3)
	index := c.propose(topic("a", 1, 1))
	c.holds(index, "a")
	lead := c.controller()
	tr := c.client()

	for id := range int32(3) {
		resp := describeQuorum(t, tr, id)
		if id != lead {
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.ErrorMessage == nil {
				t.Fatalf("follower %d answered %+v, want NOT_LEADER_OR_FOLLOWER", id, p)
			}
		}
	}
	term, _ := c.nodes[lead].Serving()
	var before kmsg.DescribeQuorumResponseTopicPartition
	// Every voter's state settles: followers acknowledge the commit with heartbeats.
	err := await.Until(10*time.Second, 10*time.Millisecond, func() error {
		resp := describeQuorum(t, tr, lead)
		p := quorumPartition(t, resp)
		if p.LeaderID != lead || p.LeaderEpoch != int32(term) || p.HighWatermark < int64(index) {
			return await.Stop(fmt.Errorf("leader %d epoch %d hw %d, want %d, %d, >= %d", p.LeaderID, p.LeaderEpoch, p.HighWatermark, lead, term, index))
		}
		if got := replicaIDs(p.CurrentVoters); !slices.Equal(got, []int32{0, 1, 2}) || len(p.Observers) != 0 {
			return await.Stop(fmt.Errorf("voters %v observers %v", got, replicaIDs(p.Observers)))
		}
		for _, r := range p.CurrentVoters {
			if r.LogEndOffset < p.HighWatermark || r.LastFetchTimestamp <= 0 || r.LastCaughtUpTimestamp <= 0 {
				return fmt.Errorf("voter %+v behind hw %d", r, p.HighWatermark)
			}
			if r.ReplicaID == lead && r.ReplicaDirectoryID != dirOf(lead) {
				return await.Stop(fmt.Errorf("the leader's directory id %x", r.ReplicaDirectoryID))
			}
		}
		if len(resp.Nodes) != 3 {
			return await.Stop(fmt.Errorf("nodes %+v", resp.Nodes))
		}
		for _, n := range resp.Nodes {
			l := n.Listeners
			if len(l) != 1 || l[0].Name != "CONTROLLER" || net.JoinHostPort(l[0].Host, strconv.Itoa(int(l[0].Port))) != c.voters[n.NodeID] {
				return await.Stop(fmt.Errorf("node %d listeners %+v, want %s", n.NodeID, l, c.voters[n.NodeID]))
			}
		}
		before = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	for i := range 5 {
		index = c.propose(topic(fmt.Sprintf("b-%d", i), byte(10+i), 1))
	}
	c.holds(index)
	err = await.Until(10*time.Second, 10*time.Millisecond, func() error {
		p := quorumPartition(t, describeQuorum(t, tr, lead))
		if p.HighWatermark < int64(index) {
			return fmt.Errorf("hw %d below %d", p.HighWatermark, index)
		}
		for i, r := range p.CurrentVoters {
			was := before.CurrentVoters[i]
			if r.LogEndOffset < int64(index) || r.LastFetchTimestamp <= was.LastFetchTimestamp || r.LastCaughtUpTimestamp <= was.LastCaughtUpTimestamp {
				return fmt.Errorf("voter %d: %+v, before %+v", r.ReplicaID, r, was)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "other", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 3}}}}
	resp, err := tr.Send(context.Background(), lead, peer.Control, req)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0]; p.Partition != 3 || p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("another partition: %+v", p)
	}
}

func addVoter(t *testing.T, tr *peer.TCP, to, id int32, addr string, timeout time.Duration) *kmsg.AddRaftVoterResponse {
	t.Helper()
	resp, err := sendAddVoter(tr, to, id, addr, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func sendAddVoter(tr *peer.TCP, to, id int32, addr string, timeout time.Duration) (*kmsg.AddRaftVoterResponse, error) {
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.Version = 1
	req.VoterID, req.VoterDirectoryID = id, dirOf(id)
	req.TimeoutMillis = int32(timeout.Milliseconds())
	host, port, _ := splitAddr(addr)
	req.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: host, Port: port}}
	resp, err := tr.Send(context.Background(), to, peer.Control, req)
	if err != nil {
		return nil, fmt.Errorf("AddRaftVoter to node %d: %w", to, err)
	}
	return resp.(*kmsg.AddRaftVoterResponse), nil
}

func removeVoter(t *testing.T, tr *peer.TCP, to, id int32) *kmsg.RemoveRaftVoterResponse {
	t.Helper()
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = id, dirOf(id)
	resp, err := tr.Send(context.Background(), to, peer.Control, req)
	if err != nil {
		t.Fatalf("RemoveRaftVoter to node %d: %v", to, err)
	}
	return resp.(*kmsg.RemoveRaftVoterResponse)
}

func wantCode(t *testing.T, what string, code int16, msg *string, want *kerr.Error) {
	t.Helper()
	if code != codeOf(want) {
		m := ""
		if msg != nil {
			m = *msg
		}
		t.Fatalf("%s: %v (%s), want %v", what, kerr.ErrorForCode(code), m, want)
	}
}

func codeOf(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// The voter set grows and shrinks at runtime over TCP: a node started empty with the
// voters' addresses and Join is nobody's member until AddRaftVoter at the leader adds it
// as an observer and promotes it once it has caught up; it then holds the whole log and
// commits count it. A second change while one is in progress is refused with
// REQUEST_TIMED_OUT; an AddRaftVoter for a node that never answers times out the same
// way and leaves an observer, which RemoveRaftVoter removes; removing the leader makes it
// step down and the others elect a leader that commits; every node restarted from its
// directory keeps the voter set its log says.
func TestGrowAndShrinkOverTCP(t *testing.T) {
	c := newTestCluster(t, 3)
	index := c.propose(topic("a", 1, 1))
	c.holds(index, "a")
	tr := c.client()

	joiner := c.join()
	lead := c.serving()
	if p := quorumPartition(t, describeQuorum(t, tr, lead)); len(p.Observers) != 0 || len(p.CurrentVoters) != 3 {
		t.Fatalf("before AddRaftVoter: voters %v observers %v", replicaIDs(p.CurrentVoters), replicaIDs(p.Observers))
	}
	if resp := describeQuorum(t, tr, joiner); resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("the joiner answered DescribeQuorum %+v", resp.Topics[0].Partitions[0])
	}
	wantCode(t, "AddRaftVoter at a follower", addVoter(t, tr, (lead+1)%3, joiner, c.addr(joiner), 5*time.Second).ErrorCode, nil, kerr.NotLeaderForPartition)
	resp := addVoter(t, tr, lead, joiner, c.addr(joiner), 10*time.Second)
	wantCode(t, "AddRaftVoter", resp.ErrorCode, resp.ErrorMessage, nil)
	p := quorumPartition(t, describeQuorum(t, tr, lead))
	if got := replicaIDs(p.CurrentVoters); !slices.Equal(got, []int32{0, 1, 2, joiner}) || len(p.Observers) != 0 {
		t.Fatalf("after AddRaftVoter: voters %v observers %v", got, replicaIDs(p.Observers))
	}
	if r := p.CurrentVoters[slices.IndexFunc(p.CurrentVoters, func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState) bool { return r.ReplicaID == joiner })]; r.ReplicaDirectoryID != dirOf(joiner) {
		t.Fatalf("the new voter's directory id %x", r.ReplicaDirectoryID)
	}
	again := addVoter(t, tr, lead, joiner, c.addr(joiner), time.Second)
	wantCode(t, "AddRaftVoter of a voter", again.ErrorCode, again.ErrorMessage, kerr.DuplicateVoter)
	index = c.propose(topic("b", 2, 1))
	c.holds(index, "a", "b") // the joiner too

	// A node that never answers: its AddRaftVoter waits for it to catch up, and a
	// RemoveRaftVoter meanwhile (on another connection: one connection's answers leave in
	// order) is refused.
	ghost := int32(len(c.nodes))
	ghostLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.joiners[ghost] = ghostLn.Addr().String()
	ghostLn.Close()
	type answer struct {
		resp *kmsg.AddRaftVoterResponse
		err  error
	}
	waiting := make(chan answer, 1)
	slow := c.client()
	go func() {
		resp, err := sendAddVoter(slow, lead, ghost, c.addr(ghost), 3*time.Second)
		waiting <- answer{resp, err}
	}()
	err = await.Until(10*time.Second, 5*time.Millisecond, func() error {
		if p := quorumPartition(t, describeQuorum(t, tr, lead)); !slices.Contains(replicaIDs(p.Observers), ghost) {
			return errors.New("the unreachable node is no observer yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	busy := removeVoter(t, tr, lead, 0)
	wantCode(t, "RemoveRaftVoter during an AddRaftVoter", busy.ErrorCode, busy.ErrorMessage, kerr.RequestTimedOut)
	a := <-waiting
	if a.err != nil {
		t.Fatal(a.err)
	}
	timedOut := a.resp
	wantCode(t, "AddRaftVoter of a node that never catches up", timedOut.ErrorCode, timedOut.ErrorMessage, kerr.RequestTimedOut)
	gone := removeVoter(t, tr, lead, ghost)
	wantCode(t, "RemoveRaftVoter of the observer", gone.ErrorCode, gone.ErrorMessage, nil)
	if p := quorumPartition(t, describeQuorum(t, tr, lead)); len(p.Observers) != 0 {
		t.Fatalf("observers %v after removing the unreachable one", replicaIDs(p.Observers))
	}
	missing := removeVoter(t, tr, lead, ghost)
	wantCode(t, "RemoveRaftVoter of a non-member", missing.ErrorCode, missing.ErrorMessage, kerr.VoterNotFound)

	// The leader removes itself.
	removed := lead
	self := removeVoter(t, tr, lead, removed)
	wantCode(t, "RemoveRaftVoter of the leader", self.ErrorCode, self.ErrorMessage, nil)
	c.stop(removed)
	lead = c.serving()
	index = c.propose(topic("c", 3, 1))
	c.holds(index, "a", "b", "c")
	want := slices.DeleteFunc([]int32{0, 1, 2, joiner}, func(id int32) bool { return id == removed })
	if got := replicaIDs(quorumPartition(t, describeQuorum(t, tr, lead)).CurrentVoters); !slices.Equal(got, want) {
		t.Fatalf("voters %v after removing node %d, want %v", got, removed, want)
	}

	// Every remaining node restarted from its directory: the voter set is its log's.
	for _, id := range want {
		c.stop(id)
	}
	for _, id := range want {
		c.open(id, nil)
	}
	lead = c.serving()
	index = c.propose(topic("d", 4, 1))
	c.holds(index, "a", "b", "c", "d")
	for _, id := range want {
		inc := c.nodes[id].current()
		voters, _, err := quorum.LogVoters(inc.store.Storage())
		if err != nil || !slices.Equal(nodeIDs(voters), want) {
			t.Fatalf("node %d's log voters %v (%v), want %v", id, nodeIDs(voters), err, want)
		}
	}
	if got := replicaIDs(quorumPartition(t, describeQuorum(t, tr, lead)).CurrentVoters); !slices.Equal(got, want) {
		t.Fatalf("voters %v after the restart, want %v", got, want)
	}
}

// A lone voter with a controller listener grows: a second node joins it and is promoted,
// and both commit.
func TestLoneVoterGrows(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, voters: map[int32]string{0: ln.Addr().String()}, joiners: map[int32]string{}, nodes: make([]*Node, 1),
		heartbeats: make([]atomic.Int64, maxTestNodes), running: make([]atomic.Pointer[Node], maxTestNodes), dirs: []string{t.TempDir()}}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(int32(i))
		}
	})
	c.open(0, ln)
	if _, ok := c.nodes[0].Serving(); !ok {
		t.Fatal("a lone voter with a listener does not serve once open")
	}
	index := c.propose(topic("a", 1, 1))
	tr := c.client()
	joiner := c.join()
	resp := addVoter(t, tr, 0, joiner, c.addr(joiner), 10*time.Second)
	wantCode(t, "AddRaftVoter to a lone voter", resp.ErrorCode, resp.ErrorMessage, nil)
	c.holds(index, "a")
	index = c.propose(topic("b", 2, 1))
	c.holds(index, "a", "b")
	if got := replicaIDs(quorumPartition(t, describeQuorum(t, tr, c.serving())).CurrentVoters); !slices.Equal(got, []int32{0, joiner}) {
		t.Fatalf("voters %v", got)
	}

	// Restarted alone with its old configuration (itself the only voter), the first node
	// opens without serving: its log has two voters, and it waits for the other.
	c.stop(0)
	c.stop(joiner)
	c.open(0, nil)
	// Describe is answered after the loop's first Ready: what it applied at start
	// (quorum-state's Commit covers every committed conf change) is the voter set it
	// campaigns with.
	st, err := c.nodes[0].Loop().Describe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeIDs(ids(st.Voters)); !slices.Equal(got, []int32{0, joiner}) || st.Leading {
		t.Fatalf("the first node restarted alone: voters %v, leading %v; want [0 %d], not leading", got, st.Leading, joiner)
	}
	if _, ok := c.nodes[0].Serving(); ok {
		t.Fatal("the first node serves alone with a two-voter log")
	}
	c.open(joiner, nil)
	index = c.propose(topic("c", 3, 1))
	c.holds(index, "a", "b", "c")
}

func ids(rs []quorum.Replica) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.RaftID)
	}
	return out
}
