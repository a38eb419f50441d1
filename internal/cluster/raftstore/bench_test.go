package raftstore

import (
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkSaveReady is the cost of one Ready of a one-voter quorum on a real disk: n
// entries of 200 bytes, one fdatasync, no HardState write (term and vote unchanged).
// Run: go test -run '^$' -bench SaveReady -benchtime 200x ./internal/cluster/raftstore
func BenchmarkSaveReady(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(map[int]string{1: "1entry", 16: "16entries"}[n], func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := make([]byte, 200)
			next := uint64(1)
			b.ReportAllocs()
			for b.Loop() {
				ents := make([]*pb.Entry, n)
				for i := range ents {
					ents[i] = mkEntry(next, 1, pb.EntryNormal, data)
					next++
				}
				if err := s.SaveReady(raft.Ready{Entries: ents, HardState: mkHardState(1, 1, next-1)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
