package raftstore

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/log"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// model is what raft expects of the store: the newest snapshot, the entries after it,
// the last HardState it was given, and what quorum-state holds (Term and Vote as given
// last when they changed, with the Commit of that moment).
type model struct {
	snap    *pb.Snapshot // nil: none yet
	ents    []*pb.Entry  // the entries after snap, in order
	behind  []*pb.Entry  // the entries up to snap since the last leader snapshot, in order
	hs      *pb.HardState
	durable *pb.HardState
	term    uint64 // the newest term a generated leader has
}

func (m *model) snapIndex() uint64 { return m.snap.GetMetadata().GetIndex() }
func (m *model) last() uint64      { return m.snapIndex() + uint64(len(m.ents)) }

// termAt is the term of the entry at index (the snapshot's at its index).
func (m *model) termAt(index uint64) uint64 {
	if index == m.snapIndex() {
		return m.snap.GetMetadata().GetTerm()
	}
	return m.ents[index-m.snapIndex()-1].GetTerm()
}

// setHardState records a HardState given to SaveReady.
func (m *model) setHardState(hs *pb.HardState) {
	if hs.GetTerm() != m.hs.GetTerm() || hs.GetVote() != m.hs.GetVote() {
		m.durable = hs
	}
	m.hs = hs
}

// run is one random history against a real store and the model.
type run struct {
	dir   string
	opts  Options
	s     *Store
	m     model
	rng   *rand.Rand
	files *log.FileCache
}

func (r *run) open(t *rapid.T) {
	r.s = openStore(t, r.dir, r.opts)
	// After Open, the MemoryStorage holds what the files hold: the durable HardState with
	// its Commit raised to the snapshot.
	d := r.m.durable
	r.m.hs = mkHardState(d.GetTerm(), d.GetVote(), max(d.GetCommit(), r.m.snapIndex()))
	r.check(t, true)
}

// check compares the store with the model; reopened: the store was just opened, so its
// MemoryStorage begins right after the snapshot.
func (r *run) check(t *rapid.T, reopened bool) {
	t.Helper()
	ms := r.s.Storage()
	sn, _ := ms.Snapshot()
	if sn.GetMetadata().GetIndex() != r.m.snapIndex() || r.m.snap != nil && (sn.GetMetadata().GetTerm() != r.m.snap.GetMetadata().GetTerm() ||
		!bytes.Equal(sn.GetData(), r.m.snap.GetData()) || !proto.Equal(sn.GetMetadata().GetConfState(), r.m.snap.GetMetadata().GetConfState())) {
		t.Fatalf("snapshot %v, want %v", sn.GetMetadata(), r.m.snap.GetMetadata())
	}
	first, _ := ms.FirstIndex()
	if first > r.m.snapIndex()+1 || reopened && first+r.opts.CatchUpEntries < r.m.snapIndex()+1 {
		t.Fatalf("first index %d, snapshot at %d, %d entries kept behind at Open", first, r.m.snapIndex(), r.opts.CatchUpEntries)
	}
	if n := r.m.snapIndex() + 1 - first; n > 0 {
		if n > uint64(len(r.m.behind)) {
			t.Fatalf("the MemoryStorage holds %d entries behind the snapshot, the history has %d", n, len(r.m.behind))
		}
		got, err := ms.Entries(first, r.m.snapIndex()+1, 1<<62)
		if err != nil {
			t.Fatalf("Entries behind the snapshot: %v", err)
		}
		want := r.m.behind[uint64(len(r.m.behind))-n:]
		for i := range got {
			if !sameEntry(got[i], want[i]) {
				t.Fatalf("entry %s behind the snapshot, want %s", describe(got[i]), describe(want[i]))
			}
		}
	}
	requireEntries(t, "entries", ms, r.m.snapIndex()+1, r.m.ents)
	hs, cs, _ := ms.InitialState()
	if !proto.Equal(mkHardState(hs.GetTerm(), hs.GetVote(), hs.GetCommit()), mkHardState(r.m.hs.GetTerm(), r.m.hs.GetVote(), r.m.hs.GetCommit())) {
		t.Fatalf("HardState %v, want %v", hs, r.m.hs)
	}
	if r.m.snap != nil && !proto.Equal(cs, r.m.snap.GetMetadata().GetConfState()) {
		t.Fatalf("ConfState %v, want %v", cs, r.m.snap.GetMetadata().GetConfState())
	}
	if d := r.s.DurableHardState(); d.GetTerm() != r.m.durable.GetTerm() || d.GetVote() != r.m.durable.GetVote() {
		t.Fatalf("quorum-state %v, want term and vote of %v", d, r.m.durable)
	}
}

// entriesReady draws a Ready appending entries as raft would: from an index above the
// commit index (overwriting an uncommitted tail), at the current term, with a HardState
// that may change term, vote and commit.
func (r *run) entriesReady(t *rapid.T) raft.Ready {
	m := &r.m
	lo := max(m.hs.GetCommit(), m.snapIndex()) + 1
	first := rapid.Uint64Range(lo, m.last()+1).Draw(t, "first")
	if first <= m.last() || rapid.IntRange(0, 4).Draw(t, "newTerm") == 0 {
		m.term++ // an overwrite comes from a newer leader
	}
	n := rapid.IntRange(1, 6).Draw(t, "entries")
	var ents []*pb.Entry
	for i := 0; i < n; i++ {
		var e *pb.Entry
		switch rapid.IntRange(0, 5).Draw(t, "type") {
		case 0:
			e = mkEntry(first+uint64(i), m.term, pb.EntryNormal, nil) // a new leader's empty entry
		case 1:
			e = mkEntry(first+uint64(i), m.term, pb.EntryConfChangeV2, []byte{byte(i), 1, 2})
		default:
			data := make([]byte, rapid.IntRange(1, 400).Draw(t, "bytes"))
			r.rng.Read(data)
			e = mkEntry(first+uint64(i), m.term, pb.EntryNormal, data)
		}
		ents = append(ents, e)
	}
	last := first - 1 + uint64(n)
	commit := rapid.Uint64Range(m.hs.GetCommit(), last).Draw(t, "commit")
	vote := m.hs.GetVote()
	if m.term != m.hs.GetTerm() {
		vote = rapid.Uint64Range(0, 3).Draw(t, "vote")
	}
	return raft.Ready{Entries: ents, HardState: mkHardState(m.term, vote, commit)}
}

func (r *run) applyEntries(rd raft.Ready) {
	first := rd.Entries[0].GetIndex()
	r.m.ents = append(r.m.ents[:first-r.m.snapIndex()-1], rd.Entries...)
	r.m.setHardState(rd.HardState)
}

func (r *run) appendOp(t *rapid.T) {
	rd := r.entriesReady(t)
	if err := r.s.SaveReady(rd); err != nil {
		t.Fatalf("SaveReady: %v", err)
	}
	r.applyEntries(rd)
	r.check(t, false)
}

// leaderSnapshot draws a snapshot from a newer leader: past the commit index, at a term
// no stored entry has (raft sends one only to a log that lacks it).
func (r *run) leaderSnapshot(t *rapid.T) (raft.Ready, *pb.Snapshot) {
	m := &r.m
	m.term++
	index := rapid.Uint64Range(max(m.hs.GetCommit(), m.snapIndex())+1, m.last()+5).Draw(t, "snapIndex")
	data := make([]byte, rapid.IntRange(0, 300).Draw(t, "snapBytes"))
	r.rng.Read(data)
	snap := mkSnapshot(index, m.term, []uint64{1, uint64(rapid.IntRange(2, 9).Draw(t, "voter"))}, data)
	return raft.Ready{Snapshot: snap, HardState: mkHardState(m.term, 0, index)}, snap
}

func (r *run) leaderSnapshotOp(t *rapid.T) {
	rd, snap := r.leaderSnapshot(t)
	if err := r.s.SaveReady(rd); err != nil {
		t.Fatalf("SaveReady(snapshot): %v", err)
	}
	r.m.snap, r.m.ents, r.m.behind = snap, nil, nil
	r.m.setHardState(rd.HardState)
	r.check(t, false)
}

// snapshotCrashOp: a leader's snapshot whose checkpoint is written, then a crash before
// the log is reset and the HardState written. Open must finish the reset.
func (r *run) snapshotCrashOp(t *rapid.T) {
	_, snap := r.leaderSnapshot(t)
	if err := r.s.writeCheckpoint(snap); err != nil {
		t.Fatal(err)
	}
	r.m.snap, r.m.ents, r.m.behind = snap, nil, nil
	r.open(t)
}

func (r *run) checkpointOp(t *rapid.T) {
	m := &r.m
	if m.hs.GetCommit() <= m.snapIndex() {
		t.Skip("nothing applied past the snapshot")
	}
	index := rapid.Uint64Range(m.snapIndex()+1, m.hs.GetCommit()).Draw(t, "checkpoint")
	data := []byte(strings.Repeat("i", rapid.IntRange(0, 50).Draw(t, "imageBytes")))
	cs := pb.EnsureConfState(&pb.ConfState{Voters: []uint64{1}, Learners: []uint64{uint64(rapid.IntRange(2, 9).Draw(t, "learner"))}})
	snap, err := r.s.Checkpoint(index, cs, data)
	if err != nil {
		t.Fatalf("Checkpoint(%d): %v", index, err)
	}
	if snap.GetMetadata().GetTerm() != m.termAt(index) {
		t.Fatalf("checkpoint term %d, entry %d has term %d", snap.GetMetadata().GetTerm(), index, m.termAt(index))
	}
	m.behind = append(m.behind, m.ents[:index-m.snapIndex()]...)
	m.ents = m.ents[index-m.snapIndex():]
	m.snap = snap
	r.check(t, false)
}

func (r *run) compactOp(t *rapid.T) {
	keep := rapid.Uint64Range(0, 6).Draw(t, "keep")
	first, err := r.s.Compact(keep)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if first > r.m.snapIndex()+1 {
		t.Fatalf("Compact left the log at %d, past the snapshot at %d", first, r.m.snapIndex())
	}
	r.check(t, false)
}

func (r *run) reopenOp(t *rapid.T) {
	if err := r.s.Close(); err != nil {
		t.Fatal(err)
	}
	r.open(t)
}

// crashOp drops the store without closing it: everything SaveReady returned from is on
// disk, nothing else was pending.
func (r *run) crashOp(t *rapid.T) { r.open(t) }

// tornCrashOp: a crash during SaveReady's entries. The entries reached the file only in
// part (the newest segment is cut at a random byte past what was durable before, or
// garbage follows it), and quorum-state was not rewritten. After Open the log holds what
// was durable before the Ready (after its truncation, which is durable before the
// append), then a prefix of the Ready's entries: nothing invented.
func (r *run) tornCrashOp(t *rapid.T) {
	rd := r.entriesReady(t)
	qs, qsErr := os.ReadFile(filepath.Join(r.dir, quorumStateName))
	if err := r.s.SaveReady(rd); err != nil {
		t.Fatalf("SaveReady: %v", err)
	}
	first := rd.Entries[0].GetIndex()
	seg, from := newestSegment(t, r.dir, int64(first)-1)
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if rapid.Bool().Draw(t, "garbage") {
		junk := make([]byte, rapid.IntRange(1, 100).Draw(t, "junkBytes"))
		r.rng.Read(junk)
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(junk)
		f.Close()
	} else if err := os.Truncate(seg, from+rapid.Int64Range(0, fi.Size()-from).Draw(t, "tornAt")); err != nil {
		t.Fatal(err)
	}
	if qsErr == nil {
		if err := os.WriteFile(filepath.Join(r.dir, quorumStateName), qs, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		os.Remove(filepath.Join(r.dir, quorumStateName))
	}
	// The model: the Ready's truncation happened, some prefix of its entries stuck.
	r.m.ents = r.m.ents[:first-r.m.snapIndex()-1]
	s := openStore(t, r.dir, r.opts)
	last, _ := s.Storage().LastIndex()
	if last < first-1 || last > rd.Entries[len(rd.Entries)-1].GetIndex() {
		t.Fatalf("after a torn append of %d-%d the log ends at %d", first, rd.Entries[len(rd.Entries)-1].GetIndex(), last)
	}
	r.m.ents = append(r.m.ents, rd.Entries[:last-first+1]...)
	s.Close()
	r.open(t)
}

// newestSegment returns the newest .log file in dir and the position of its first batch
// at or above offset (its size if none).
func newestSegment(t fataler, dir string, offset int64) (string, int64) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(names)
	seg := names[len(names)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	pos := 0
	for pos < len(b) {
		n, err := batch.Size(b[pos:])
		if err != nil || batch.BaseOffset(b[pos:]) >= offset {
			break
		}
		pos += n
	}
	return seg, int64(pos)
}

// TestStoreModel runs random histories of appends (overwriting uncommitted tails),
// HardState changes, leader snapshots (also cut off by a crash before the log reset),
// local checkpoints, compactions, reopens and crashes (also tearing the last append)
// against the model of what raft expects, on real files with fsync.
func TestStoreModel(t *testing.T) {
	root := memTempDir(t)
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		dir := filepath.Join(root, fmt.Sprint(n))
		r := &run{dir: dir, rng: rand.New(rand.NewSource(rapid.Int64().Draw(t, "seed"))), files: log.NewFileCache(8)}
		r.opts = testOptions(r.files)
		r.opts.CatchUpEntries = rapid.Uint64Range(0, 8).Draw(t, "catchUp")
		r.m.hs, r.m.durable = mkHardState(0, 0, 0), mkHardState(0, 0, 0)
		r.open(t)
		defer func() { r.s.Close() }()
		t.Repeat(map[string]func(*rapid.T){
			"append":        r.appendOp,
			"leaderSnap":    r.leaderSnapshotOp,
			"snapCrash":     r.snapshotCrashOp,
			"checkpoint":    r.checkpointOp,
			"compact":       r.compactOp,
			"reopen":        r.reopenOp,
			"crash":         r.crashOp,
			"tornCrash":     r.tornCrashOp,
			"":              func(t *rapid.T) { r.check(t, false) },
			"appendAgain":   r.appendOp, // appends twice as often as the rest
			"appendAgain2":  r.appendOp,
			"checkpointToo": r.checkpointOp,
		})
	})
}
