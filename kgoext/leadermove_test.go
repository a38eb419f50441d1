package kgoext_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/kgoext"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A two-node view of one real broker, for leader moves before exactq has a cluster: two
// listeners, nodes 11 and 12, each serving the same *broker.Broker through nodeView, which
// rewrites what a cluster would differ in. Metadata and FindCoordinator name the two nodes;
// the leader of the moved partitions is cluster.leader (11 at first, the coordinator
// always); a node that does not lead a partition answers NOT_LEADER_OR_FOLLOWER for it in
// ShareFetch, ShareAcknowledge and TxnShareAcknowledge, as a real follower does. Everything
// else, the share sessions included, is the real broker's.
type twoNodes struct {
	tb     *testbroker.Broker
	addrs  map[int32]string
	topic  string
	leader atomic.Int32
	// notLeader counts NOT_LEADER_OR_FOLLOWER answers, by API key.
	mu        sync.Mutex
	notLeader map[int16]int
	// txnShareAckCodes are top-level error codes answered, in order, to the next
	// TxnShareAcknowledge requests instead of serving them (a broker that staged nothing).
	txnShareAckCodes []int16
}

// nextTxnShareAckCode pops the next scripted TxnShareAcknowledge error (0: serve it).
func (tn *twoNodes) nextTxnShareAckCode() int16 {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if len(tn.txnShareAckCodes) == 0 {
		return 0
	}
	code := tn.txnShareAckCodes[0]
	tn.txnShareAckCodes = tn.txnShareAckCodes[1:]
	return code
}

func startTwoNodes(t *testing.T, tb *testbroker.Broker, topic string) *twoNodes {
	t.Helper()
	tn := &twoNodes{tb: tb, addrs: map[int32]string{}, topic: topic, notLeader: map[int16]int{}}
	tn.leader.Store(11)
	for _, id := range []int32{11, 12} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tn.addrs[id] = ln.Addr().String()
		srv := server.New(server.Config{ClusterID: tb.Broker.ClusterID(), NodeID: id}, &nodeView{tn: tn, id: id, conns: map[*server.ConnInfo]*server.ConnInfo{}, sessions: map[*server.ConnInfo]map[[16]byte]bool{}}, nil)
		go srv.Serve(ln)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		})
	}
	return tn
}

func (tn *twoNodes) countNotLeader(key int16) int {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.notLeader[key]
}

type nodeView struct {
	tn       *twoNodes
	id       int32
	mu       sync.Mutex
	conns    map[*server.ConnInfo]*server.ConnInfo  // the connection as the real broker sees it
	sessions map[*server.ConnInfo]map[[16]byte]bool // topics in each connection's share session
}

func (v *nodeView) APIs() []server.APIRange                 { return v.tn.tb.Broker.APIs() }
func (v *nodeView) Features(resp *kmsg.ApiVersionsResponse) { v.tn.tb.Broker.Features(resp) }

// conn gives the real broker connection ids of this node's own range: two servers number
// their connections alike, and the broker keys sessions by id.
func (v *nodeView) conn(ci *server.ConnInfo) *server.ConnInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.conns[ci]
	if c == nil {
		c = &server.ConnInfo{ID: ci.ID | uint64(v.id)<<48, RemoteAddr: ci.RemoteAddr, LocalAddr: ci.LocalAddr}
		v.conns[ci] = c
	}
	c.ClientSoftwareName, c.ClientSoftwareVersion = ci.ClientSoftwareName, ci.ClientSoftwareVersion
	return c
}

func (v *nodeView) ConnClosed(ci *server.ConnInfo) {
	c := v.conn(ci)
	v.mu.Lock()
	delete(v.conns, ci)
	delete(v.sessions, ci)
	v.mu.Unlock()
	v.tn.tb.Broker.ConnClosed(c)
}

func (v *nodeView) hostPort(id int32) (string, int32) {
	h, p, _ := net.SplitHostPort(v.tn.addrs[id])
	port, _ := strconv.Atoi(p)
	return h, int32(port)
}

// leads reports whether this node leads partition p of topic (moved topic: the current
// leader; others: node 11).
func (v *nodeView) leads(topic string) bool {
	if topic == v.tn.topic {
		return v.id == v.tn.leader.Load()
	}
	return v.id == 11
}

func (v *nodeView) refuse(key int16) {
	v.tn.mu.Lock()
	v.tn.notLeader[key]++
	v.tn.mu.Unlock()
}

func (v *nodeView) Handle(ctx context.Context, req *server.Request) server.Reply {
	r := *req
	r.Conn = v.conn(req.Conn)
	names := v.topicNames(ctx)
	notLeader := kerr.NotLeaderForPartition.Code
	switch body := req.Body.(type) {
	case *kmsg.ShareFetchRequest:
		// An incremental fetch lists no topic its session already has: what the node
		// would fetch is the session's topics, tracked here.
		inSession := v.shareSession(req.Conn, body)
		if id, ok := onlyTopic(len(inSession), func(i int) [16]byte { return inSession[i] }); ok && !v.leads(names[id]) {
			v.refuse(req.Key)
			resp := body.ResponseKind().(*kmsg.ShareFetchResponse)
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = id
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = 0, notLeader // the moved topic has one partition
			for _, t := range body.Topics {
				for _, p := range t.Partitions {
					if len(p.AcknowledgementBatches) > 0 {
						rp.AcknowledgeErrorCode = notLeader
					}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			return server.Reply{Resp: resp}
		}
	case *kmsg.ShareAcknowledgeRequest:
		if id, ok := onlyTopic(len(body.Topics), func(i int) [16]byte { return body.Topics[i].TopicID }); ok && !v.leads(names[id]) {
			v.refuse(req.Key)
			resp := body.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
			for _, t := range body.Topics {
				rt := kmsg.NewShareAcknowledgeResponseTopic()
				rt.TopicID = t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, notLeader
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return server.Reply{Resp: resp}
		}
	case *wire.TxnShareAcknowledgeRequest:
		if code := v.tn.nextTxnShareAckCode(); code != 0 {
			resp := body.ResponseKind().(*wire.TxnShareAcknowledgeResponse)
			resp.ErrorCode = code
			return server.Reply{Resp: resp}
		}
		if id, ok := onlyTopic(len(body.Topics), func(i int) [16]byte { return body.Topics[i].TopicID }); ok && !v.leads(names[id]) {
			v.refuse(req.Key)
			resp := body.ResponseKind().(*wire.TxnShareAcknowledgeResponse)
			for _, t := range body.Topics {
				rt := wire.TxnShareAcknowledgeResponseResponse{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, wire.TxnShareAcknowledgeResponseResponsePartition{PartitionIndex: p.PartitionIndex, ErrorCode: notLeader})
				}
				resp.Responses = append(resp.Responses, rt)
			}
			return server.Reply{Resp: resp}
		}
	}
	rep := v.tn.tb.Broker.Handle(ctx, &r)
	if rep.Resp != nil {
		v.rewrite(rep.Resp)
	}
	if w := rep.Wait; w != nil {
		rep.Wait = func() kmsg.Response {
			resp := w()
			v.rewrite(resp)
			return resp
		}
	}
	return rep
}

// shareSession applies req to the topics of its connection's share session and returns them.
func (v *nodeView) shareSession(ci *server.ConnInfo, req *kmsg.ShareFetchRequest) [][16]byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	set := v.sessions[ci]
	if set == nil || req.ShareSessionEpoch == 0 {
		set = map[[16]byte]bool{}
		v.sessions[ci] = set
	}
	for _, t := range req.Topics {
		set[t.TopicID] = true
	}
	for _, f := range req.ForgottenTopicsData {
		delete(set, f.TopicID)
	}
	out := make([][16]byte, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	return out
}

// onlyTopic is the single topic id of a request with n topics (false for none or several:
// such requests are passed through).
func onlyTopic(n int, id func(int) [16]byte) ([16]byte, bool) {
	if n == 0 {
		return [16]byte{}, false
	}
	first := id(0)
	for i := 1; i < n; i++ {
		if id(i) != first {
			return [16]byte{}, false
		}
	}
	return first, true
}

// topicNames asks the real broker for topic id → name (Metadata of every topic).
func (v *nodeView) topicNames(ctx context.Context) map[[16]byte]string {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rep := v.tn.tb.Broker.Handle(ctx, &server.Request{Key: kmsg.Metadata.Int16(), Version: 12, Body: req, Conn: &server.ConnInfo{ID: 1 << 62}})
	resp, _ := rep.Resp.(*kmsg.MetadataResponse)
	out := map[[16]byte]string{}
	if resp != nil {
		for _, t := range resp.Topics {
			if t.Topic != nil {
				out[t.TopicID] = *t.Topic
			}
		}
	}
	return out
}

// rewrite makes a response name the view's nodes.
func (v *nodeView) rewrite(resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		r.Brokers = nil
		for _, id := range []int32{11, 12} {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID = id
			b.Host, b.Port = v.hostPort(id)
			r.Brokers = append(r.Brokers, b)
		}
		r.ControllerID = 11
		moved := v.tn.leader.Load()
		for i := range r.Topics {
			t := &r.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				p.Leader, p.Replicas, p.ISR = 11, []int32{11, 12}, []int32{11, 12}
				if t.Topic != nil && *t.Topic == v.tn.topic {
					p.Leader = moved
					p.LeaderEpoch += moved - 11 // a move is a new leader epoch
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		host, port := v.hostPort(11)
		r.NodeID, r.Host, r.Port = 11, host, port
		for i := range r.Coordinators {
			if r.Coordinators[i].ErrorCode == 0 {
				r.Coordinators[i].NodeID, r.Coordinators[i].Host, r.Coordinators[i].Port = 11, host, port
			}
		}
	case *kmsg.ShareFetchResponse:
		for i := range r.NodeEndpoints {
			r.NodeEndpoints[i].NodeID = v.id
			r.NodeEndpoints[i].Host, r.NodeEndpoints[i].Port = v.hostPort(v.id)
		}
	}
}

// TestShareConsumerFollowsLeaderMove: the partition's leader moves from node 11 to node
// 12; the old leader answers NOT_LEADER_OR_FOLLOWER; the consumer refreshes its metadata,
// opens a share session on the new leader and gets the records produced after the move.
func TestShareConsumerFollowsLeaderMove(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-move", 1, 3)
	tn := startTwoNodes(t, b, "in")
	c := newConsumer(t, tn.addrs[11], "g-move", "in")
	pollUntil(t, c, 0, countAtLeast(3))
	if _, err := c.CommitSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	tn.leader.Store(12)
	produceValues(t, cl, "in", 1, 3, 6)
	seen := pollUntil(t, c, 0, hasValue("v5"))
	if n := tn.countNotLeader(kmsg.ShareFetch.Int16()); n == 0 {
		t.Fatal("the old leader never answered NOT_LEADER_OR_FOLLOWER: the move was not exercised")
	}
	for _, r := range seen {
		if v := string(r.Value); v == "v0" || v == "v1" || v == "v2" {
			t.Fatalf("%s accepted before the move, delivered again after it", v)
		}
	}
}

// TestSendShareAcksFollowsLeaderMove: acknowledgements staged after the move go first to
// the old leader from the metadata kgo cached, which answers NOT_LEADER_OR_FOLLOWER, then
// to the new one; the transaction commits and the records are done.
func TestSendShareAcksFollowsLeaderMove(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-move2", 1, 3)
	tn := startTwoNodes(t, b, "in")
	c := newConsumer(t, tn.addrs[11], "g-move2", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, tn.addrs[11], "tx-move")
	ctx := testCtx(t)
	recs, acks, md := pollAndBegin(t, c, txn, kgoext.AckAccept, countAtLeast(3))
	// kgo's metadata cache now names node 11 the leader; then the partition moves.
	if _, err := txn.RequestCachedMetadata(ctx, kmsg.NewPtrMetadataRequest(), time.Minute); err != nil {
		t.Fatal(err)
	}
	tn.leader.Store(12)
	if err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md); err != nil {
		t.Fatalf("stage across the move: %v", err)
	}
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if n := tn.countNotLeader(wire.TxnShareAcknowledgeDefaultKey); n == 0 {
		t.Fatal("the old leader never answered NOT_LEADER_OR_FOLLOWER: the move was not exercised")
	}
	waitTxnState(t, cl, "tx-move", "CompleteCommit")
	for _, r := range sentinelOnly(t, b.Addr, cl, "g-move2", "in") {
		for _, h := range recs {
			if string(h.Value) == string(r.Value) {
				t.Fatalf("%s committed across the move, delivered again", r.Value)
			}
		}
	}
}

// TestSendShareAcksRetriesAndFatal: top-level answers that mean "nothing staged, try
// again" (NOT_ENOUGH_REPLICAS: the coordinator was unreachable; CONCURRENT_TRANSACTIONS;
// COORDINATOR_LOAD_IN_PROGRESS) are resent and the staging then commits; a fenced producer
// is returned as its kerr error, not ErrCommitFailed.
func TestSendShareAcksRetriesAndFatal(t *testing.T) {
	b, cl := shareSetup(t, "in", "g-retry", 1, 3)
	tn := startTwoNodes(t, b, "in")
	c := newConsumer(t, tn.addrs[11], "g-retry", "in", kgoext.ExplicitAcks())
	txn := newTxnClient(t, tn.addrs[11], "tx-retry")
	ctx := testCtx(t)
	recs, acks, md := pollAndBegin(t, c, txn, kgoext.AckAccept, countAtLeast(3))
	tn.mu.Lock()
	tn.txnShareAckCodes = []int16{kerr.NotEnoughReplicas.Code, kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code}
	tn.mu.Unlock()
	if err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md); err != nil {
		t.Fatalf("stage after retriable refusals: %v", err)
	}
	if left := tn.nextTxnShareAckCode(); left != 0 {
		t.Fatalf("scripted refusal %d never asked for", left)
	}
	if err := kgoext.EndTransaction(ctx, txn, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, cl, "tx-retry", "CompleteCommit")
	for _, r := range sentinelOnly(t, b.Addr, cl, "g-retry", "in") {
		for _, h := range recs {
			if string(h.Value) == string(r.Value) {
				t.Fatalf("%s committed after retries, delivered again", r.Value)
			}
		}
	}

	produceValues(t, cl, "in", 1, 10, 11)
	_, acks, md = pollAndBegin(t, c, txn, kgoext.AckAccept, hasValue("v10"))
	tn.mu.Lock()
	tn.txnShareAckCodes = []int16{kerr.ProducerFenced.Code}
	tn.mu.Unlock()
	err := kgoext.SendShareAcksToTransaction(ctx, txn, acks, md)
	if !errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kgoext.ErrCommitFailed) {
		t.Fatalf("fenced producer: %v, want PRODUCER_FENCED and not ErrCommitFailed", err)
	}
}
