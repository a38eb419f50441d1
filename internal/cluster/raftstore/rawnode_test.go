package raftstore

import (
	"fmt"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// node is a one-voter RawNode over a store, driven as the quorum loop will drive it.
type node struct {
	t       *testing.T
	s       *Store
	rn      *raft.RawNode
	cs      *pb.ConfState
	applied []*pb.Entry // committed entries, in order, as Ready gave them
}

func newNode(t *testing.T, s *Store, applied uint64) *node {
	t.Helper()
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s.Storage(),
		Applied: applied, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, CheckQuorum: true, PreVote: true, Logger: quietRaft})
	if err != nil {
		t.Fatal(err)
	}
	_, cs, _ := s.Storage().InitialState()
	return &node{t: t, s: s, rn: rn, cs: cs}
}

// drain handles every Ready: save, (no peers to send to), apply, advance.
func (n *node) drain() {
	n.t.Helper()
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		if err := n.s.SaveReady(rd); err != nil {
			n.t.Fatalf("SaveReady: %v", err)
		}
		n.applyCommitted(rd.CommittedEntries)
		n.rn.Advance(rd)
	}
}

// applyCommitted applies committed entries: records them, and applies conf changes.
func (n *node) applyCommitted(es []*pb.Entry) {
	n.t.Helper()
	for _, e := range es {
		n.applied = append(n.applied, e)
		var cc pb.ConfChangeI
		switch e.GetType() {
		case pb.EntryConfChange:
			cc = &pb.ConfChange{}
		case pb.EntryConfChangeV2:
			cc = &pb.ConfChangeV2{}
		default:
			continue
		}
		if err := proto.Unmarshal(e.GetData(), cc.(proto.Message)); err != nil {
			n.t.Fatal(err)
		}
		n.cs = n.rn.ApplyConfChange(cc)
	}
}

// elect makes the node leader of its one-voter quorum.
func (n *node) elect() {
	n.t.Helper()
	if err := n.rn.Campaign(); err != nil {
		n.t.Fatal(err)
	}
	n.drain()
	if st := n.rn.Status(); st.RaftState != raft.StateLeader {
		n.t.Fatalf("state %v after campaigning alone", st.RaftState)
	}
}

// metadataBatch is a proposal as the controller makes it: a v2 batch of records.
func metadataBatch(t *testing.T, i int) []byte {
	t.Helper()
	recs := []kmsg.Record{{Value: []byte(fmt.Sprintf("record %d.a", i))}, {Value: []byte(fmt.Sprintf("record %d.b", i))}}
	b, err := batch.Encode(nil, batch.NoProducer(0, 1_700_000_000_000), recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// proposed returns the normal entries with data among es.
func proposed(es []*pb.Entry) [][]byte {
	var out [][]byte
	for _, e := range es {
		if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
			out = append(out, e.GetData())
		}
	}
	return out
}

// TestRawNodeOverStore runs a real single-voter RawNode on the store: bootstrap, elect,
// propose, checkpoint and compact, restart from the files (twice), and checks that the
// committed entries and the HardState come back and that the node leads again.
func TestRawNodeOverStore(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	opts.CatchUpEntries = 3
	s := openStore(t, dir, opts)
	n := newNode(t, s, 0)
	if err := n.rn.Bootstrap([]raft.Peer{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	n.drain()
	n.elect()
	var want [][]byte
	for i := 0; i < 40; i++ {
		b := metadataBatch(t, i)
		want = append(want, b)
		if err := n.rn.Propose(b); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			n.drain() // several proposals per Ready, sometimes
		}
	}
	n.drain()
	if got := proposed(n.applied); len(got) != len(want) {
		t.Fatalf("%d proposals applied, want %d", len(got), len(want))
	}
	hs := n.rn.Status().HardState
	ckptIndex := n.applied[len(n.applied)/2].GetIndex()
	// The state machine's image at ckptIndex: here, the proposals applied up to it.
	var image []byte
	for _, e := range upTo(n.applied, ckptIndex) {
		image = append(image, e.GetData()...)
	}
	if _, err := s.Checkpoint(ckptIndex, n.cs, image); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(3); err != nil {
		t.Fatal(err)
	}
	allApplied := n.applied
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for restart := 0; restart < 2; restart++ {
		s = openStore(t, dir, opts)
		ms := s.Storage()
		sn, _ := ms.Snapshot()
		if sn.GetMetadata().GetIndex() != ckptIndex || string(sn.GetData()) != string(image) {
			t.Fatalf("restart %d: snapshot at %d (%d bytes), want %d", restart, sn.GetMetadata().GetIndex(), len(sn.GetData()), ckptIndex)
		}
		if first, _ := ms.FirstIndex(); first > ckptIndex {
			t.Fatalf("restart %d: the MemoryStorage begins at %d, nothing of the 3 entries kept behind the checkpoint %d", restart, first, ckptIndex)
		}
		got, _, _ := ms.InitialState()
		if got.GetTerm() != hs.GetTerm() || got.GetVote() != hs.GetVote() || got.GetCommit() < ckptIndex || got.GetCommit() > hs.GetCommit() {
			t.Fatalf("restart %d: HardState %v, was %v", restart, got, hs)
		}
		// The state machine restarts from the checkpoint: raft hands back every committed
		// entry after it.
		n = newNode(t, s, ckptIndex)
		n.drain()
		n.elect()
		n.drain()
		gotData, wantData := proposed(n.applied), proposed(allApplied[len(upTo(allApplied, ckptIndex)):])
		if len(gotData) != len(wantData) {
			t.Fatalf("restart %d: %d proposals re-applied after the checkpoint, want %d", restart, len(gotData), len(wantData))
		}
		for i := range gotData {
			if string(gotData[i]) != string(wantData[i]) {
				t.Fatalf("restart %d: re-applied proposal %d differs", restart, i)
			}
		}
		// And it goes on: a new proposal commits after its own fsync.
		b := metadataBatch(t, 100+restart)
		if err := n.rn.Propose(b); err != nil {
			t.Fatal(err)
		}
		n.drain()
		if p := proposed(n.applied); string(p[len(p)-1]) != string(b) {
			t.Fatalf("restart %d: the new proposal was not applied", restart)
		}
		allApplied = append(upTo(allApplied, ckptIndex), n.applied...)
		hs = n.rn.Status().HardState
		if hs.GetTerm() <= 1 {
			t.Fatalf("restart %d: term %d, the node campaigned again", restart, hs.GetTerm())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// upTo returns the entries of es with index <= index.
func upTo(es []*pb.Entry, index uint64) []*pb.Entry {
	var out []*pb.Entry
	for _, e := range es {
		if e.GetIndex() <= index {
			out = append(out, e)
		}
	}
	return out
}
