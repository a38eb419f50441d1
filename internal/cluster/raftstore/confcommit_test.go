package raftstore

import (
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// A conf change is durable as committed before it is applied: quorum-state's Commit is
// raised to the committed entries that carry one (also when the commit came in an
// earlier Ready), and a restart sees it; committed normal entries alone leave the stored
// Commit as it was.
func TestCommittedConfChangeIsDurable(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	ents := []*pb.Entry{
		mkEntry(1, 1, pb.EntryNormal, []byte("a")),
		mkEntry(2, 1, pb.EntryNormal, []byte("b")),
		mkEntry(3, 1, pb.EntryConfChangeV2, []byte{}),
		mkEntry(4, 1, pb.EntryNormal, []byte("c")),
	}
	steps := []struct {
		rd         raft.Ready
		wantCommit uint64
	}{
		{raft.Ready{Entries: ents, HardState: mkHardState(1, 1, 0)}, 0},
		{raft.Ready{HardState: mkHardState(1, 1, 2), CommittedEntries: ents[:2]}, 0},
		// The commit reaches 4, the Ready delivers only 3 (paged), then 4.
		{raft.Ready{HardState: mkHardState(1, 1, 4)}, 0},
		{raft.Ready{CommittedEntries: ents[2:3]}, 3},
		{raft.Ready{CommittedEntries: ents[3:]}, 3},
	}
	for i, st := range steps {
		if err := s.SaveReady(st.rd); err != nil {
			t.Fatal(err)
		}
		if got := s.DurableHardState().GetCommit(); got != st.wantCommit {
			t.Fatalf("step %d: durable Commit %d, want %d", i, got, st.wantCommit)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	defer s.Close()
	hs, _, err := s.Storage().InitialState()
	if err != nil || hs.GetCommit() != 3 || hs.GetTerm() != 1 || hs.GetVote() != 1 {
		t.Fatalf("reopened: %v, %v; want term 1 vote 1 commit 3", hs, err)
	}
}
