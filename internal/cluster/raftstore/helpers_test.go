package raftstore

import (
	"bytes"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"testing"

	"github.com/exactq/exactq/internal/log"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// fataler is the part of testing.TB that *rapid.T has too.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// testOptions make small segments, so that appends roll and compaction deletes files.
func testOptions(files *log.FileCache) Options {
	return Options{SegmentBytes: 1200, Files: files}
}

func openStore(t fataler, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func mkEntry(index, term uint64, typ pb.EntryType, data []byte) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: typ.Enum(), Data: data}
}

func mkHardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func mkSnapshot(index, term uint64, voters []uint64, data []byte) *pb.Snapshot {
	return &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term),
		ConfState: pb.EnsureConfState(&pb.ConfState{Voters: voters})}}
}

func sameEntry(a, b *pb.Entry) bool {
	return a.GetIndex() == b.GetIndex() && a.GetTerm() == b.GetTerm() && a.GetType() == b.GetType() && bytes.Equal(a.GetData(), b.GetData())
}

func describe(e *pb.Entry) string {
	return fmt.Sprintf("{%d/%d %v %dB}", e.GetIndex(), e.GetTerm(), e.GetType(), len(e.GetData()))
}

// requireEntries fails unless the MemoryStorage holds exactly want from want[0]'s index
// to its last index.
func requireEntries(t fataler, what string, ms *raft.MemoryStorage, from uint64, want []*pb.Entry) {
	t.Helper()
	last, _ := ms.LastIndex()
	if last != from-1+uint64(len(want)) {
		t.Fatalf("%s: last index %d, want %d", what, last, from-1+uint64(len(want)))
	}
	if len(want) == 0 {
		return
	}
	got, err := ms.Entries(from, last+1, 1<<62)
	if err != nil {
		t.Fatalf("%s: Entries(%d, %d): %v", what, from, last+1, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !sameEntry(got[i], want[i]) {
			t.Fatalf("%s: entry %d is %s, want %s", what, i, describe(got[i]), describe(want[i]))
		}
		if term, err := ms.Term(want[i].GetIndex()); err != nil || term != want[i].GetTerm() {
			t.Fatalf("%s: Term(%d) = %d, %v", what, want[i].GetIndex(), term, err)
		}
	}
}

// entriesOnly is a Ready with n normal entries from index first at term, with data that
// depends on the index only.
func entriesOnly(first, term uint64, n int) raft.Ready {
	var ents []*pb.Entry
	for i := range n {
		ents = append(ents, mkEntry(first+uint64(i), term, pb.EntryNormal, []byte(fmt.Sprintf("entry %d", first+uint64(i)))))
	}
	return raft.Ready{Entries: ents}
}

// memTempDir returns a temporary directory on tmpfs when the machine has one, for the
// model test, which reopens stores hundreds of times: it checks the store's logic on real
// files (every fsync is made), not the disk (internal/log's tests do the same). The
// RawNode and damage tests use t.TempDir().
func memTempDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "exactq-raftstore-test-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// quietRaft keeps raft's election chatter out of test output.
var quietRaft = &raft.DefaultLogger{Logger: stdlog.New(io.Discard, "", 0)}
