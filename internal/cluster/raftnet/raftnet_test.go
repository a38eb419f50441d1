package raftnet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/cluster/raftstore"
	"github.com/exactq/exactq/wire"
)

// heartbeat is a raft message from node from to node to (generation 0 raft ids).
func heartbeat(from, to int32, term uint64) *pb.Message {
	return &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: new(RaftID(from)), To: new(RaftID(to)), Term: new(term)}
}

func marshal(t testing.TB, ms ...*pb.Message) [][]byte {
	var out [][]byte
	for _, m := range ms {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// raftRequest is a well-formed RaftMessage from node 2 to node 1 carrying ms.
func raftRequest(t testing.TB, ms ...*pb.Message) *wire.RaftMessageRequest {
	req := wire.NewPtrRaftMessageRequest()
	req.ClusterID, req.SenderNodeID, req.SenderDirectoryID = "c1", 2, dirID(2)
	req.DestinationRaftID = int64(RaftID(1))
	req.Messages = marshal(t, ms...)
	return req
}

// unstartedLoop is a real quorum loop (node 1 of three) that nothing drains.
func unstartedLoop(t *testing.T, queue int) *quorum.Loop {
	s, err := raftstore.Open(t.TempDir(), raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	l, err := quorum.New(quorum.Options{ID: RaftID(1), Store: s, Voters: []uint64{1, 2, 3}, Machine: listMachine{},
		Send: func([]*pb.Message) {}, QueueSize: queue, Logger: quiet, RaftLogger: quietRaft})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestReceiverRefusals: each check refuses the whole request with its code and steps
// nothing; a full loop queue is REQUEST_TIMED_OUT, a stopped loop BROKER_NOT_AVAILABLE.
func TestReceiverRefusals(t *testing.T) {
	loop := unstartedLoop(t, 100)
	stepped := 0
	rcv := NewReceiver(ReceiverConfig{RaftID: RaftID(1), Logger: quiet,
		Step:        func(m *pb.Message) error { stepped++; return loop.Step(m) },
		ClusterID:   func() string { return "c1" },
		DirectoryOf: func(n int32) ([16]byte, bool) { return dirID(n), n == 2 }})
	prop := heartbeat(2, 1, 1)
	prop.Type = pb.MessageType_MsgProp.Enum()
	hup := heartbeat(2, 1, 1)
	hup.Type = pb.MessageType_MsgHup.Enum()
	for _, c := range []struct {
		name string
		edit func(*wire.RaftMessageRequest)
		want *kerr.Error
	}{
		{"another cluster", func(r *wire.RaftMessageRequest) { r.ClusterID = "c2" }, kerr.InconsistentClusterID},
		{"another raft id (generation 1)", func(r *wire.RaftMessageRequest) { r.DestinationRaftID = 1<<32 | 2 }, kerr.InvalidVoterKey},
		{"replaced sender", func(r *wire.RaftMessageRequest) { r.SenderDirectoryID = [16]byte{9} }, kerr.InconsistentVoterSet},
		{"not protobuf", func(r *wire.RaftMessageRequest) { r.Messages = append(r.Messages, []byte{0xff, 0xff}) }, kerr.InvalidRequest},
		{"from another node", func(r *wire.RaftMessageRequest) { r.Messages = marshal(t, heartbeat(2, 1, 1), heartbeat(3, 1, 1)) }, kerr.InvalidRequest},
		{"to another node", func(r *wire.RaftMessageRequest) { r.Messages = marshal(t, heartbeat(2, 3, 1)) }, kerr.InvalidRequest},
		{"a proposal", func(r *wire.RaftMessageRequest) { r.Messages = marshal(t, prop) }, kerr.InvalidRequest},
		{"raft-local", func(r *wire.RaftMessageRequest) { r.Messages = marshal(t, hup) }, kerr.InvalidRequest},
	} {
		req := raftRequest(t, heartbeat(2, 1, 1))
		c.edit(req)
		if got := rcv.Handle(req).ErrorCode; got != c.want.Code {
			t.Errorf("%s: code %d, want %s", c.name, got, c.want.Message)
		}
	}
	if stepped != 0 {
		t.Fatalf("refused requests stepped %d messages", stepped)
	}

	// Unknown cluster id on either side and an unregistered sender are not refused.
	unknown := raftRequest(t, heartbeat(2, 1, 1), heartbeat(2, 1, 1))
	unknown.ClusterID = ""
	if got := rcv.Handle(unknown).ErrorCode; got != 0 || stepped != 2 {
		t.Fatalf("a request without a cluster id: code %d, %d stepped", got, stepped)
	}
	third := raftRequest(t, heartbeat(3, 1, 1))
	third.SenderNodeID, third.SenderDirectoryID = 3, [16]byte{7}
	if got := rcv.Handle(third).ErrorCode; got != 0 {
		t.Fatalf("a sender with no registered directory: code %d", got)
	}

	full := unstartedLoop(t, 1)
	rcv.cfg.Step = full.Step
	if got := rcv.Handle(raftRequest(t, heartbeat(2, 1, 1), heartbeat(2, 1, 1))).ErrorCode; got != kerr.RequestTimedOut.Code {
		t.Fatalf("full loop queue: code %d, want REQUEST_TIMED_OUT", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = full.Run(ctx)
	if got := rcv.Handle(raftRequest(t, heartbeat(2, 1, 1))).ErrorCode; got != kerr.BrokerNotAvailable.Code {
		t.Fatalf("stopped loop: code %d, want BROKER_NOT_AVAILABLE", got)
	}
}

// reports records a Sender's delivery reports.
type reports struct {
	mu          sync.Mutex
	unreachable []uint64
	snapshots   []raft.SnapshotStatus
}

func (r *reports) ReportUnreachable(id uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreachable = append(r.unreachable, id)
	return nil
}

func (r *reports) ReportSnapshot(_ uint64, st raft.SnapshotStatus) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snapshots = append(r.snapshots, st)
	return nil
}

func (r *reports) get() ([]uint64, []raft.SnapshotStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.unreachable), slices.Clone(r.snapshots)
}

// toNode1 is a Sender (node 2) whose transport is the in-process one to node 1's real
// Receiver; node 1's loop is replaced by a recorder of what it is stepped, and each
// request waits for gate when gate is not nil.
type toNode1 struct {
	snd      *Sender
	rep      *reports
	mu       sync.Mutex
	got      []uint64 // stepped messages' terms, in order
	requests int
}

func newToNode1(t *testing.T, cfg SenderConfig, gate chan struct{}) *toNode1 {
	n := &toNode1{rep: &reports{}}
	rcv := NewReceiver(ReceiverConfig{RaftID: RaftID(1), Logger: quiet, Step: func(m *pb.Message) error {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.got = append(n.got, m.GetTerm())
		return nil
	}})
	local := peer.NewLocal(1, []kmsg.ApiVersionsResponseApiKey{{ApiKey: API().Key, MaxVersion: API().MaxVersion}},
		func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			n.mu.Lock()
			n.requests++
			n.mu.Unlock()
			return rcv.Handle(req.(*wire.RaftMessageRequest)), nil
		})
	cfg.Transport, cfg.NodeID, cfg.Logger = local, 2, quiet
	n.snd = NewSender(cfg)
	n.snd.SetReporter(n.rep)
	t.Cleanup(n.snd.Close)
	return n
}

func (n *toNode1) stepped() ([]uint64, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got), n.requests
}

func (n *toNode1) wait(t *testing.T, count int) []uint64 {
	t.Helper()
	var got []uint64
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if got, _ = n.stepped(); len(got) < count {
			return errors.New("not delivered yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("%d of %d messages delivered", len(got), count)
	}
	return got
}

// TestSenderKeepsOrderAndBatches: messages sent while a request is in flight go in later
// requests, several per request, in the order raft produced them.
func TestSenderKeepsOrderAndBatches(t *testing.T) {
	gate := make(chan struct{})
	n := newToNode1(t, SenderConfig{}, gate)
	var want []uint64
	for term := range uint64(200) {
		want = append(want, term)
		n.snd.Send([]*pb.Message{heartbeat(2, 1, term)})
	}
	close(gate)
	if got := n.wait(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("delivered out of order: %v", got)
	}
	if _, requests := n.stepped(); requests > 10 {
		t.Fatalf("200 messages queued behind one request went in %d requests", requests)
	}
}

// TestSenderDropsOnOverload: with one request in flight and the queue full, Send still
// returns at once; what does not fit is dropped and reported unreachable, what fit is
// delivered in order.
func TestSenderDropsOnOverload(t *testing.T) {
	gate := make(chan struct{})
	n := newToNode1(t, SenderConfig{QueueMessages: 4}, gate)
	n.snd.Send([]*pb.Message{heartbeat(2, 1, 0)})
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if d := n.snd.dest(RaftID(1)); func() bool { d.mu.Lock(); defer d.mu.Unlock(); return len(d.queue) > 0 }() {
			return errors.New("the first message is not taken yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		for term := uint64(1); term < 20; term++ {
			n.snd.Send([]*pb.Message{heartbeat(2, 1, term)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Send blocked on a full queue")
	}
	close(gate)
	if got := n.wait(t, 5); !slices.Equal(got, []uint64{0, 1, 2, 3, 4}) {
		t.Fatalf("delivered %v, want the first five", got)
	}
	if unreachable, _ := n.rep.get(); !slices.Contains(unreachable, RaftID(1)) {
		t.Fatal("the drops were not reported")
	}
}

// TestSenderSnapshots: a delivered MsgSnap is reported finished; one over the size
// limit is not sent, and is reported failed.
func TestSenderSnapshots(t *testing.T) {
	n := newToNode1(t, SenderConfig{}, nil)
	n.snd.max = 1000
	snap := func(size int, term uint64) *pb.Message {
		return &pb.Message{Type: pb.MessageType_MsgSnap.Enum(), From: new(RaftID(2)), To: new(RaftID(1)), Term: new(term),
			Snapshot: &pb.Snapshot{Data: make([]byte, size), Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(1))}}}
	}
	n.snd.Send([]*pb.Message{snap(500, 1)})
	n.wait(t, 1)
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if _, s := n.rep.get(); !slices.Equal(s, []raft.SnapshotStatus{raft.SnapshotFinish}) {
			return errors.New("not reported")
		}
		return nil
	}); err != nil {
		t.Fatal("a delivered snapshot was not reported finished")
	}
	n.snd.Send([]*pb.Message{snap(2000, 2), heartbeat(2, 1, 3)})
	if got := n.wait(t, 2); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("delivered terms %v: the oversized snapshot went out", got)
	}
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		if _, s := n.rep.get(); !slices.Equal(s, []raft.SnapshotStatus{raft.SnapshotFinish, raft.SnapshotFailure}) {
			return errors.New("not reported")
		}
		return nil
	}); err != nil {
		t.Fatal("the oversized snapshot was not reported failed")
	}
}

// FuzzReceive: any RaftMessage body, and any bytes as one message in a well-formed
// request, are answered without panicking; whatever is stepped is for this node and
// from the sender, never raft-local nor a proposal.
func FuzzReceive(f *testing.F) {
	req := raftRequest(f, heartbeat(2, 1, 1))
	f.Add(req.AppendTo(nil))
	f.Add(req.Messages[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		var stepped []*pb.Message
		rcv := NewReceiver(ReceiverConfig{RaftID: RaftID(1), Logger: quiet,
			Step:        func(m *pb.Message) error { stepped = append(stepped, m); return nil },
			ClusterID:   func() string { return "c1" },
			DirectoryOf: func(n int32) ([16]byte, bool) { return dirID(n), true }})
		var reqs []*wire.RaftMessageRequest
		if whole := new(wire.RaftMessageRequest); whole.ReadFrom(b) == nil {
			reqs = append(reqs, whole)
		}
		one := raftRequest(t)
		one.Messages = [][]byte{b}
		reqs = append(reqs, one)
		for _, r := range reqs {
			stepped = nil
			code := rcv.Handle(r).ErrorCode
			if code != 0 && len(stepped) > 0 {
				t.Fatalf("refused with %d after stepping %d messages", code, len(stepped))
			}
			for _, m := range stepped {
				if m.GetTo() != RaftID(1) || NodeOf(m.GetFrom()) != r.SenderNodeID || m.GetFrom() == 0 ||
					raft.IsLocalMsg(m.GetType()) || m.GetType() == pb.MessageType_MsgProp {
					t.Fatalf("stepped %v from request of node %d", m, r.SenderNodeID)
				}
			}
		}
	})
}
