package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/cluster/raftnet"
	"github.com/exactq/exactq/internal/cluster/raftstore"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/wire"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Cluster is what a node with other voters needs (docs/architecture.md, "Nodes, roles and
// configuration"): where the voters' controller listeners are, its own listener, and the
// controller it serves there. A lone voter has none of it: no listener, no raft traffic.
type Cluster struct {
	// Voters are every voter's controller listener (host:port) by node id, this node's
	// among them (Kafka's controller.quorum.voters). A new, empty directory bootstraps
	// with exactly these voters; a directory with a log keeps the voter set of its log and
	// uses these only to find its peers.
	Voters map[int32]string
	// Join is a node that is not among Voters (they are the running quorum's voters, to
	// find the leader): a new, empty directory starts unbootstrapped and takes part once
	// the leader adds it (AddRaftVoter: an observer, then a voter); a directory with a log
	// runs as its log says. It needs a controller listener.
	Join bool
	// ListenerName is the controller listener's name (the first of Kafka's
	// controller.listener.names), in DescribeQuorum's nodes and AddRaftVoter's
	// listeners; "" is CONTROLLER.
	ListenerName string
	// Listener is this node's controller listener, already bound (tests bind 127.0.0.1:0);
	// nil: Open binds ListenAddr. The node serves it until Close.
	Listener   net.Listener
	ListenAddr string
	// Transport carries the raft messages on each peer's control lane; nil: a peer.TCP
	// dialling Voters' addresses, owned (and closed) by the node.
	Transport peer.Transport
	// DirectoryID is this node's directory id (meta.json's), sent with every raft message;
	// DirectoryOf is the one registered for a node (from the image) so that raft messages
	// from a voter that lost its disk are refused; ClusterID is this node's cluster id, ""
	// while unknown. Nil funcs: nothing known, nothing checked.
	DirectoryID [16]byte
	DirectoryOf func(node int32) (dir [16]byte, ok bool)
	ClusterID   func() string
	// Controller answers the controller requests that reach the listener (ControllerKeys):
	// the broker's controller.Driver.Handle, which answers NOT_CONTROLLER in the request's
	// shape while this node does not serve. It is called off the connection's reader, so a
	// request waiting for its entry to commit never holds up the raft messages behind it.
	// Nil: the listener serves RaftMessage alone.
	Controller func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// Server holds the controller listener's limits; zero values take server's defaults.
	Server server.Config
}

// ControllerKeys are the controller requests the controller listener serves besides
// RaftMessage, with their versions: the broker-to-controller RPCs at the versions kmsg
// knows (Kafka serves them on the controller listener only), and the topic admin requests
// at Kafka 4.4's broker ranges (the broker forwards what its clients send).
func ControllerKeys() []server.APIRange {
	var out []server.APIRange
	for _, r := range []kmsg.Request{&kmsg.BrokerRegistrationRequest{}, &kmsg.BrokerHeartbeatRequest{},
		&kmsg.UnregisterBrokerRequest{}, &kmsg.AllocateProducerIDsRequest{}} {
		out = append(out, server.APIRange{Key: r.Key(), MinVersion: 0, MaxVersion: r.MaxVersion()})
	}
	// CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
	// UpdateFeatures, CreateAcls, DeleteAcls, AlterUserScramCredentials.
	for _, k := range []int16{19, 20, 37, 33, 44, 57, 30, 31, 51} {
		out = append(out, server.Kafka44[k])
	}
	return out
}

// ParseVoters reads Kafka's controller.quorum.voters list, "1@host:port,2@host:port",
// into node id → address. It refuses duplicate ids and addresses, negative ids, and an
// address without a host or a port number.
func ParseVoters(s string) (map[int32]string, error) {
	out := map[int32]string{}
	seen := map[string]int32{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		idText, addr, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("voter %q: want id@host:port", item)
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("voter %q: the node id must be a number from 0", item)
		}
		if err := CheckAddr(addr); err != nil {
			return nil, fmt.Errorf("voter %q: %w", item, err)
		}
		if _, dup := out[int32(id)]; dup {
			return nil, fmt.Errorf("voter %q: node id %d is listed twice", item, id)
		}
		if other, dup := seen[addr]; dup {
			return nil, fmt.Errorf("voter %q: address %s is node %d's too", item, addr, other)
		}
		out[int32(id)], seen[addr] = addr, int32(id)
	}
	return out, nil
}

// CheckAddr refuses a listener address that is not host:port with a host and a port
// number (0 is allowed only where the caller binds it).
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q: no host (a peer cannot dial it)", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("address %q: the port must be a number from 1 to 65535", addr)
	}
	return nil
}

// validate checks a cluster node's settings before anything is opened.
func (c *Cluster) validate(self int32) error {
	_, among := c.Voters[self]
	switch {
	case c.Join && among:
		return fmt.Errorf("node %d joins the quorum of %v, so it must not be among them", self, slices.Sorted(maps.Keys(c.Voters)))
	case c.Join && len(c.Voters) == 0:
		return fmt.Errorf("node %d joins a quorum but names none of its voters", self)
	case c.Join && c.Listener == nil && c.ListenAddr == "":
		return fmt.Errorf("node %d joins a quorum but has no controller listener", self)
	case !c.Join && !among:
		return fmt.Errorf("node %d is a controller but not among the voters %v", self, slices.Sorted(maps.Keys(c.Voters)))
	}
	for id, addr := range c.Voters {
		if err := CheckAddr(addr); err != nil {
			return fmt.Errorf("voter %d: %w", id, err)
		}
	}
	if len(c.Voters) > 1 && c.Listener == nil && c.ListenAddr == "" {
		return fmt.Errorf("node %d has other voters but no controller listener", self)
	}
	return nil
}

// checkLog applies "Bootstrap and growth" to the log just opened, before the first loop
// runs over it: a log keeps its voters, so a one-voter log (or a directory from before
// the metadata log, upgraded as one) cannot bootstrap with others, and a log with other
// voters cannot run as a lone node.
func (n *Node) checkLog(store *raftstore.Store) error {
	logVoters, empty, err := quorum.LogVoters(store.Storage())
	if err != nil {
		return err
	}
	self := RaftID(n.cfg.NodeID)
	others := len(n.voters) > 1
	join := n.cfg.Cluster != nil && n.cfg.Cluster.Join
	n.loneLog = slices.Equal(logVoters, []uint64{self}) || (empty && !others && !join && slices.Equal(n.voters, []uint64{self}))
	dir := n.cfg.DataDir
	switch {
	case empty && others:
		if fi, err := os.Stat(filepath.Join(dir, legacyTopicsDir)); err == nil && fi.IsDir() {
			return fmt.Errorf("node %d: %s is a data directory from before the metadata log: it is upgraded as a single node, "+
				"so start it without voters (--voters / controller.quorum.voters) first; a cluster grows from it by adding nodes", n.cfg.NodeID, dir)
		}
	case empty:
	case others && slices.Equal(logVoters, []uint64{self}):
		return fmt.Errorf("node %d: the metadata log in %s has this node as its only voter, so it cannot bootstrap with the voters %v "+
			"(their first entries would differ): start it without voters, or give the new cluster empty data directories", n.cfg.NodeID, dir, nodeIDs(n.voters))
	case !others && !slices.Equal(logVoters, []uint64{self}) && n.cfg.Send == nil:
		return fmt.Errorf("node %d: the metadata log in %s has the voters %v: start it with their controller listeners (--voters / controller.quorum.voters)",
			n.cfg.NodeID, dir, nodeIDs(logVoters))
	case !slices.Equal(logVoters, n.voters):
		n.cfg.Logger.Warn("the metadata log keeps its own voters; the configured ones only locate peers",
			"node", n.cfg.NodeID, "log_voters", nodeIDs(logVoters), "configured", nodeIDs(n.voters))
	}
	return nil
}

// legacyTopicsDir is where exactq before the metadata log kept its topics (upgrade.TopicsDir).
const legacyTopicsDir = "topics"

func nodeIDs(raftIDs []uint64) []int32 {
	out := make([]int32, 0, len(raftIDs))
	for _, id := range raftIDs {
		out = append(out, NodeID(id))
	}
	return out
}

// clusterNet is a cluster node's raft traffic: the Sender to its peers, the Receiver behind its
// controller listener, and that listener's server.
type clusterNet struct {
	snd       *raftnet.Sender
	transport *peer.TCP // the node's own, closed with it; nil when the caller gave one
	srv       *server.Server
	ln        net.Listener
	served    chan error
}

// openNet builds the Sender and binds the controller listener; serveNet starts serving
// once the first loop exists (the Receiver steps into it).
func (n *Node) openNet() error {
	c := n.cfg.Cluster
	cn := &clusterNet{served: make(chan error, 1)}
	tr := c.Transport
	if tr == nil {
		// Members added after this node started are in the log, not in Voters.
		cn.transport = peer.NewTCP(peer.Config{Self: n.cfg.NodeID, Addr: n.controllerAddr, ControllerAddr: n.controllerAddr})
		tr = cn.transport
	}
	cn.snd = raftnet.NewSender(raftnet.SenderConfig{Transport: tr, NodeID: n.cfg.NodeID, DirectoryID: c.DirectoryID,
		ClusterID: c.ClusterID, Logger: n.cfg.Logger,
		OnReplaced: func(peerNode int32) {
			n.cfg.Logger.Error("a peer says this node's directory was replaced: its raft messages are refused",
				"node", n.cfg.NodeID, "peer", peerNode)
		}})
	cn.ln = c.Listener
	if cn.ln == nil {
		ln, err := net.Listen("tcp", c.ListenAddr)
		if err != nil {
			cn.close()
			return fmt.Errorf("node %d: controller listener: %w", n.cfg.NodeID, err)
		}
		cn.ln = ln
	}
	n.net = cn
	n.cfg.Send = cn.snd.Send
	return nil
}

func (n *Node) serveNet() {
	cn, c := n.net, n.cfg.Cluster
	rcv := raftnet.NewReceiver(raftnet.ReceiverConfig{RaftID: RaftID(n.cfg.NodeID), Logger: n.cfg.Logger,
		// The running loop's: after a storage failure another loop takes the messages.
		Step:      func(m *pb.Message) error { return n.current().loop.Step(m) },
		ClusterID: c.ClusterID, DirectoryOf: c.DirectoryOf})
	h := &controllerHandler{rcv: rcv, ctl: c.Controller, node: n, logger: n.cfg.Logger}
	cn.srv = server.New(c.Server, h, n.cfg.Logger.With("listener", "controller"))
	go func() { cn.served <- cn.srv.Serve(cn.ln) }()
}

// close stops the listener first (peers see the node gone), then the Sender and the
// transport it owns.
func (cn *clusterNet) close() error {
	var err error
	if cn.srv != nil {
		_ = cn.srv.Close()
		if e := <-cn.served; !errors.Is(e, server.ErrServerClosed) {
			err = e
		}
	} else if cn.ln != nil {
		_ = cn.ln.Close()
	}
	cn.snd.Close()
	if cn.transport != nil {
		cn.transport.Close()
	}
	return err
}

// ControllerAddr is the controller listener's bound address, "" for a lone voter.
func (n *Node) ControllerAddr() string {
	if n.net == nil {
		return ""
	}
	return n.net.ln.Addr().String()
}

// ControllerAddrOf is a voter's controller listener (host:port), where controller
// requests for it go: what the log's conf changes say of it, else the configured voters'.
// A broker sends its controller requests on connections of its own (not Transport's):
// the raft messages of a connection wait for the answers before them, and a controller
// request's answer waits for its entry to commit, which needs those raft messages.
func (n *Node) ControllerAddrOf(node int32) (string, bool) { return n.controllerAddr(node) }

// Clustered reports whether the node has other voters to reach (a controller listener,
// raft traffic); false for a lone voter.
func (n *Node) Clustered() bool { return n.net != nil }

// Controller is the node id of the raft leader this node knows of, where controller
// requests go; ok false while it knows none (an election is on, or its loop is stopped).
// The leader answers NOT_CONTROLLER until its term's first entry is applied, which
// callers retry like any NOT_CONTROLLER. A cheap atomic read.
func (n *Node) Controller() (node int32, ok bool) {
	lead := n.current().loop.Leader()
	if lead == 0 {
		return -1, false
	}
	return NodeID(lead), true
}

// controllerHandler serves the controller listener: RaftMessage into the loop at once,
// the controller requests to Cluster.Controller.
type controllerHandler struct {
	rcv    *raftnet.Receiver
	node   *Node
	ctl    func(context.Context, kmsg.Request) (kmsg.Response, error)
	logger *slog.Logger
}

func (h *controllerHandler) APIs() []server.APIRange {
	apis := append([]server.APIRange{raftnet.API()}, QuorumKeys()...)
	if h.ctl != nil {
		apis = append(apis, ControllerKeys()...)
	}
	return apis
}

func (h *controllerHandler) Handle(ctx context.Context, req *server.Request) server.Reply {
	if m, ok := req.Body.(*wire.RaftMessageRequest); ok {
		return server.Reply{Resp: h.rcv.Handle(m), BodyDone: true}
	}
	// A controller request waits for its entry to be applied: answered from Wait, so the
	// connection's next raft messages are stepped meanwhile (the answers still leave in
	// order).
	switch r := req.Body.(type) {
	case *kmsg.DescribeQuorumRequest:
		return server.Reply{Wait: func() kmsg.Response { return h.node.DescribeQuorum(ctx, r) }}
	case *kmsg.DescribeClusterRequest:
		return server.Reply{Wait: func() kmsg.Response { return h.node.DescribeCluster(ctx, r) }}
	case *kmsg.AddRaftVoterRequest:
		return server.Reply{Wait: func() kmsg.Response { return h.node.AddVoter(ctx, r) }}
	case *kmsg.RemoveRaftVoterRequest:
		return server.Reply{Wait: func() kmsg.Response { return h.node.RemoveVoter(ctx, r) }}
	}
	return server.Reply{Wait: func() kmsg.Response {
		resp, err := h.ctl(ctx, req.Body)
		if err != nil {
			if ctx.Err() == nil {
				// Only a request the controller does not serve fails, and APIs lists
				// none such: a broken invariant, logged loudly; the peer's request
				// times out.
				h.logger.Error("controller listener: request not answered", "key", req.Key, "err", err)
			}
			return nil
		}
		return resp
	}}
}

func (h *controllerHandler) Features(*kmsg.ApiVersionsResponse) {}
func (h *controllerHandler) ConnClosed(*server.ConnInfo)        {}
