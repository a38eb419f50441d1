// Package raftstore is the durable store of the metadata raft log: one directory
// (<data>/__cluster_metadata-0/, KRaft's name) holding
//
//	<20-digit base>.log ...   the entries, on internal/log: one batch per entry, base
//	                          offset = raft index - 1, PartitionLeaderEpoch = raft term
//	                          (entry.go); fsynced once per Ready
//	quorum-state              raft's HardState {Term, Vote, Commit}
//	<end offset>-<epoch>.checkpoint
//	                          snapshots: raft index (= end offset, exclusive) and term in
//	                          the name; ConfState and the snapshot data inside; the newest
//	                          two are kept
//
// and, in memory, the etcd raft MemoryStorage that RawNode reads (Storage): the files are
// the durability, the MemoryStorage the read path.
//
// # The quorum loop's use
//
// Per Ready, before sending its messages: SaveReady(rd), which writes in the order raft
// requires (the snapshot, then the entries, then the HardState) and updates the
// MemoryStorage. After applying committed entries: Checkpoint(index, confState, data)
// when a snapshot is due, then Compact(keep).
//
// # Invariants
//
//  1. Everything SaveReady was given is durable when it returns: the entries with one
//     fdatasync (group commit of the whole Ready; a truncation or a segment roll costs
//     its own), quorum-state with fsync and a directory fsync when Term or Vote changed,
//     or when the Ready's committed entries hold a conf change above the stored Commit.
//     Otherwise a stale Commit on disk is safe (raft relearns it), so commit progress
//     costs no write; but raft takes its voter set from the applied entries, so a
//     committed conf change must not be forgotten at a restart (committedConfChange).
//     Commit is written only after the entries it covers are durable, so the stored
//     Commit never exceeds the stored log.
//  2. A snapshot from the leader is written as a checkpoint before the log is reset to
//     start after it (log.TruncateFullyAndStartAt): entries that raft acknowledged are
//     never lost, and a crash between the two leaves a checkpoint whose index is not in
//     the log with its term. Raft only sends a snapshot to a log that does not hold
//     (index, term), so Open recognises that state and finishes the reset.
//  3. Open fills the MemoryStorage from the newest checkpoint whose CRC checks, the log
//     entries after it (and up to Options.CatchUpEntries before it), and quorum-state with its Commit raised to the checkpoint's
//     index (raft refuses a Commit below its snapshot). A log that does not reach back to
//     that checkpoint, a damaged quorum-state or a Commit beyond the log is refused: raft
//     would be unsafe on it, and nothing can be guessed (a voter must not forget its
//     vote).
//  4. Compaction removes only log entries below the older of the two kept checkpoints
//     (and at least keep entries behind the newest), so that Open can fall back to the
//     older checkpoint if the newer one is damaged.
//
// Not safe for concurrent use: the quorum loop owns the store; the MemoryStorage has its
// own lock.
package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/exactq/exactq/internal/log"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Options are the store's settings and dependencies.
type Options struct {
	// SegmentBytes is the log's segment size (KRaft's metadata.log.segment.bytes); 0 =
	// DefaultSegmentBytes. Compaction deletes whole segments, and a truncation re-reads
	// the segment it cuts, so metadata segments are small.
	SegmentBytes int64
	// KeepCheckpoints is how many checkpoint files are kept; 0 = 2.
	KeepCheckpoints int
	// CatchUpEntries is how many entries behind the checkpoint Open puts in the
	// MemoryStorage, when the log still has them, so that a follower lagging less catches up
	// from the log rather than from a snapshot after this node restarts. The quorum loop
	// passes the same number to Compact (5,000, etcd's SnapshotCatchUpEntries).
	CatchUpEntries uint64
	Now            func() time.Time // batch timestamps; nil = time.Now
	Files          *log.FileCache   // nil = log.DefaultFileCache()
	Logger         *slog.Logger     // nil = slog.Default()
}

// DefaultSegmentBytes is the metadata log's segment size: twice the largest entry (8 MiB).
const DefaultSegmentBytes = 16 << 20

// Store is one metadata raft log on disk and its MemoryStorage.
type Store struct {
	dir    string
	opts   Options
	log    *log.Log
	mem    *raft.MemoryStorage
	hs     *pb.HardState    // what quorum-state holds (Term and Vote are what matter)
	ckpts  []checkpointFile // valid checkpoint files, newest first
	logger *slog.Logger
}

// Open opens (creating if needed) the store in dir and fills its MemoryStorage
// (invariant 3).
func Open(dir string, opts Options) (*Store, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if opts.KeepCheckpoints <= 0 {
		opts.KeepCheckpoints = 2
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{dir: dir, opts: opts, mem: raft.NewMemoryStorage(), logger: opts.Logger}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = opts.SegmentBytes
	cfg.SegmentMs = 0 // roll by size only
	cfg.Delete, cfg.RetentionMs, cfg.RetentionBytes = false, -1, -1
	l, err := log.Open(dir, cfg, log.Options{Now: opts.Now, Files: opts.Files, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	s.log = l
	if err := s.load(); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("raftstore: %s: %w", dir, err)
	}
	return s, nil
}

func (s *Store) load() error {
	// quorum-state. Written through a rename, so anything but a whole valid file is damage.
	hs := &pb.HardState{}
	switch b, err := os.ReadFile(filepath.Join(s.dir, quorumStateName)); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if hs, err = decodeHardState(b); err != nil {
			return fmt.Errorf("%s: %w", quorumStateName, err)
		}
	}
	s.hs = hs

	// The newest checkpoint whose CRC checks.
	files, err := listCheckpoints(s.dir)
	if err != nil {
		return err
	}
	var snap *pb.Snapshot
	for _, f := range files {
		sn, err := readCheckpoint(s.dir, f)
		if err != nil {
			s.logger.Error("raft checkpoint unusable, trying an older one", "dir", s.dir, "file", f.name, "err", err)
			continue
		}
		if snap == nil {
			snap = sn
		}
		s.ckpts = append(s.ckpts, f)
	}

	// The log must continue the checkpoint (invariant 2 and 3).
	var index, term uint64
	if snap != nil {
		index, term = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	}
	start, end := uint64(s.log.StartOffset()), uint64(s.log.EndOffset())
	switch {
	case start == index:
	case start > index:
		return fmt.Errorf("the log starts at index %d but the newest usable checkpoint is at %d: entries are missing", start+1, index)
	case end >= index && s.termAt(index) == term:
		// Our own checkpoint, entries kept behind it.
	default:
		// A leader's snapshot whose log reset did not happen: finish it.
		if err := s.log.TruncateFullyAndStartAt(int64(index)); err != nil {
			return err
		}
		start = index
	}
	// The MemoryStorage starts at the checkpoint, or up to CatchUpEntries before it when
	// the log holds them: then the oldest of those stands in as the MemoryStorage's base
	// (a snapshot of no data at its index and term) and the checkpoint is installed over
	// the entries with CreateSnapshot, as it was when it was taken.
	from := index
	if snap != nil {
		from = max(start+1, index-min(index, s.opts.CatchUpEntries))
		if from >= index {
			from = index
			if err := s.mem.ApplySnapshot(snap); err != nil {
				return err
			}
		} else if err := s.mem.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(from), Term: new(s.termAt(from)),
			ConfState: snap.GetMetadata().GetConfState()}}); err != nil {
			return err
		}
	}
	var ents []*pb.Entry
	err = s.log.Scan(int64(from), func(b []byte) error {
		e, err := decodeEntry(b)
		if err != nil {
			return err
		}
		if e.GetIndex() != from+uint64(len(ents))+1 {
			return fmt.Errorf("entry %d follows entry %d", e.GetIndex(), from+uint64(len(ents)))
		}
		ents = append(ents, e)
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.mem.Append(ents); err != nil {
		return err
	}
	if from < index {
		md := snap.GetMetadata()
		if _, err := s.mem.CreateSnapshot(index, md.GetConfState(), snap.GetData()); err != nil {
			return err
		}
	}
	last := from + uint64(len(ents))
	commit := max(hs.GetCommit(), index)
	if commit > last {
		return fmt.Errorf("%s commits index %d, the log ends at %d", quorumStateName, commit, last)
	}
	return s.mem.SetHardState(&pb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(commit)})
}

// termAt returns the term of the stored entry at index (0 if it is not stored, or for 0).
func (s *Store) termAt(index uint64) uint64 {
	if index == 0 || int64(index)-1 < s.log.StartOffset() || int64(index) > s.log.EndOffset() {
		return 0
	}
	var term uint64
	found := errors.New("found")
	err := s.log.Scan(int64(index)-1, func(b []byte) error {
		e, err := decodeEntry(b)
		if err != nil {
			return err
		}
		if e.GetIndex() == index {
			term = e.GetTerm()
		}
		return found
	})
	if err != nil && !errors.Is(err, found) {
		return 0
	}
	return term
}

// Storage is what raft.Config.Storage is set to.
func (s *Store) Storage() *raft.MemoryStorage { return s.mem }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// DurableHardState returns what quorum-state holds (its Commit may be stale).
func (s *Store) DurableHardState() *pb.HardState { return s.hs }

// SaveReady makes rd's snapshot, entries and HardState durable, in that order, and
// applies them to the MemoryStorage; the caller sends rd.Messages after it returns.
// After an error the store must not be used: the caller stops (the node restarts and
// Open recovers from the files).
func (s *Store) SaveReady(rd raft.Ready) error {
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := s.saveSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	if len(rd.Entries) > 0 {
		ents, err := s.append(rd.Entries)
		if err != nil {
			return err
		}
		if err := s.mem.Append(ents); err != nil {
			return err
		}
	}
	confCommit := committedConfChange(rd.CommittedEntries, s.hs.GetCommit())
	if hs := rd.HardState; hs != nil && !raft.IsEmptyHardState(hs) {
		if hs.GetTerm() != s.hs.GetTerm() || hs.GetVote() != s.hs.GetVote() || confCommit > 0 {
			durable := &pb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(max(hs.GetCommit(), confCommit))}
			if err := log.WriteFileDurable(s.dir, quorumStateName, encodeHardState(durable)); err != nil {
				return err
			}
			s.hs, confCommit = durable, 0
		}
		if err := s.mem.SetHardState(&pb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(hs.GetCommit())}); err != nil {
			return err
		}
	}
	if confCommit > 0 {
		// The commit that delivers these entries came in an earlier Ready (raft pages
		// committed entries): Term and Vote are the durable ones.
		durable := &pb.HardState{Term: new(s.hs.GetTerm()), Vote: new(s.hs.GetVote()), Commit: new(max(s.hs.GetCommit(), confCommit))}
		if err := log.WriteFileDurable(s.dir, quorumStateName, encodeHardState(durable)); err != nil {
			return err
		}
		s.hs = durable
	}
	return nil
}

// committedConfChange is the last index of ents (committed entries the caller applies
// next) when they hold a conf change above the durable Commit, else 0. A conf change is
// made durable as committed before it is applied: raft takes its voter set from the
// applied entries, and a node restarting from a stale Commit would campaign with an older
// voter set, whose majority need not overlap the current one's (a node grown from one
// voter by two additions would elect itself alone). Conf changes are rare: the extra
// quorum-state write costs nothing in the steady state.
func committedConfChange(ents []*pb.Entry, durable uint64) uint64 {
	for _, e := range ents {
		if (e.GetType() == pb.EntryConfChange || e.GetType() == pb.EntryConfChangeV2) && e.GetIndex() > durable {
			return ents[len(ents)-1].GetIndex()
		}
	}
	return 0
}

// saveSnapshot writes a leader's snapshot as a checkpoint, then resets the log to start
// after it (invariant 2) and the MemoryStorage to it.
func (s *Store) saveSnapshot(snap *pb.Snapshot) error {
	if err := s.writeCheckpoint(snap); err != nil {
		return err
	}
	if err := s.log.TruncateFullyAndStartAt(int64(snap.GetMetadata().GetIndex())); err != nil {
		return err
	}
	return s.mem.ApplySnapshot(snap)
}

// append writes entries to the log, truncating first if they overwrite stored ones, with
// one fsync, and returns them as the log stores them (what Open returns later).
func (s *Store) append(ents []*pb.Entry) ([]*pb.Entry, error) {
	first := ents[0].GetIndex()
	for i, e := range ents {
		if e.GetIndex() != first+uint64(i) {
			return nil, fmt.Errorf("raftstore: entries not consecutive: %d after %d", e.GetIndex(), first+uint64(i)-1)
		}
	}
	start, end := uint64(s.log.StartOffset()), uint64(s.log.EndOffset())
	switch {
	case first-1 < start:
		return nil, fmt.Errorf("raftstore: entry %d is at or below the snapshot (index %d)", first, start)
	case first-1 > end:
		return nil, fmt.Errorf("raftstore: entry %d leaves a gap after the last stored entry %d", first, end)
	case first-1 < end:
		// raft overwrites a conflicting, uncommitted tail.
		if got, err := s.log.TruncateTo(int64(first) - 1); err != nil {
			return nil, err
		} else if uint64(got) != first-1 {
			return nil, fmt.Errorf("raftstore: truncation to index %d left the log at %d", first-1, got)
		}
	}
	nowMs := s.opts.Now().UnixMilli()
	out := make([]*pb.Entry, len(ents))
	var pending [][]byte
	var pendingBytes int64
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if _, _, err := s.log.Append(pending); err != nil {
			return err
		}
		pending, pendingBytes = pending[:0], 0
		return nil
	}
	for i, e := range ents {
		b, err := encodeEntry(e, nowMs)
		if err != nil {
			return nil, err
		}
		if out[i], err = decodeEntry(b); err != nil {
			return nil, err
		}
		// One Append holds at most a segment's worth (log.ErrRecordListTooLarge).
		if pendingBytes+int64(len(b)) > s.opts.SegmentBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		pending = append(pending, b)
		pendingBytes += int64(len(b))
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if got := uint64(s.log.EndOffset()); got != first-1+uint64(len(ents)) {
		return nil, fmt.Errorf("raftstore: log ends at offset %d after appending entries %d-%d", got, first, first-1+uint64(len(ents)))
	}
	if err := s.log.Sync(); err != nil {
		return nil, err
	}
	return out, nil
}

// Checkpoint records a snapshot of the state at applied index index (its term is the
// stored entry's): the MemoryStorage's snapshot becomes it (what raft sends a follower
// that is too far behind), and it is written as a checkpoint file. cs is the ConfState
// after applying index; data is the state machine's image.
func (s *Store) Checkpoint(index uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	snap, err := s.mem.CreateSnapshot(index, cs, data)
	if err != nil {
		return nil, err
	}
	if err := s.writeCheckpoint(snap); err != nil {
		return nil, err
	}
	return snap, nil
}

// writeCheckpoint writes snap's checkpoint file durably, then removes the files beyond
// the newest KeepCheckpoints.
func (s *Store) writeCheckpoint(snap *pb.Snapshot) error {
	md := snap.GetMetadata()
	f := checkpointFile{name: checkpointName(md.GetIndex(), md.GetTerm()), index: md.GetIndex(), term: md.GetTerm()}
	if err := log.WriteFileDurable(s.dir, f.name, encodeCheckpoint(snap)); err != nil {
		return err
	}
	kept := []checkpointFile{f}
	for _, c := range s.ckpts {
		if c.name != f.name && c.index < f.index {
			kept = append(kept, c)
		}
	}
	// Files of a newer index than a leader's snapshot describe a history that raft just
	// replaced; they go too (they could otherwise be taken for the newest at Open).
	all, err := listCheckpoints(s.dir)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for i, c := range kept {
		if i < s.opts.KeepCheckpoints {
			keep[c.name] = true
		}
	}
	removed := false
	for _, c := range all {
		if !keep[c.name] {
			if err := os.Remove(filepath.Join(s.dir, c.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			removed = true
		}
	}
	if removed {
		if err := log.SyncDir(s.dir); err != nil {
			return err
		}
	}
	s.ckpts = kept[:min(len(kept), s.opts.KeepCheckpoints)]
	return nil
}

// Compact drops entries no longer needed: from the MemoryStorage those more than keep
// behind the newest checkpoint, from the log (whole segments) those below the older
// kept checkpoint as well (invariant 4). It returns the log's first stored index.
func (s *Store) Compact(keep uint64) (uint64, error) {
	if len(s.ckpts) == 0 {
		return uint64(s.log.StartOffset()) + 1, nil
	}
	newest := s.ckpts[0].index
	if newest > keep {
		memTo := newest - keep
		if first, _ := s.mem.FirstIndex(); memTo >= first {
			if err := s.mem.Compact(memTo); err != nil && !errors.Is(err, raft.ErrCompacted) {
				return 0, err
			}
		}
	}
	bound := newest - min(keep, newest)
	if len(s.ckpts) > 1 {
		bound = min(bound, s.ckpts[len(s.ckpts)-1].index)
	}
	if int64(bound) > s.log.StartOffset() {
		if _, err := s.log.DeleteRecordsBefore(int64(bound)); err != nil {
			return 0, err
		}
	}
	return uint64(s.log.StartOffset()) + 1, nil
}

// Close closes the log. The store is unusable afterwards.
func (s *Store) Close() error { return s.log.Close() }
