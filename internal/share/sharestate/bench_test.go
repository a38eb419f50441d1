package sharestate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/coordlog"
)

// A write of 500 single-offset acknowledgements (alternating states, so nothing coalesces)
// on top of a key with 500 in-flight batches, through an in-memory partition.
func BenchmarkWrite500(b *testing.B) {
	s, err := New(Config{NumPartitions: 1, UpdatesPerSnapshot: 500}, []coordlog.Partition{coordlog.NewMemory(0)})
	if err != nil {
		b.Fatal(err)
	}
	k := key("g", 0)
	if err := s.Initialize(ctx, k, 0, 0); err != nil {
		b.Fatal(err)
	}
	batches := make([]StateBatch, 500)
	for i := range batches {
		batches[i] = sb(int64(i), int64(i), []int8{StateAcknowledged, StateArchived}[i%2], 1)
	}
	if err := s.Write(ctx, k, 0, 0, 0, -1, batches); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range batches {
			batches[j].DeliveryCount = int16(2 + i%100)
		}
		if err := s.Write(ctx, k, 0, 0, 0, -1, batches); err != nil {
			b.Fatal(err)
		}
	}
}

// Replay of 100k records: 1000 keys, each with a snapshot and 99 updates of 10 batches.
func BenchmarkReplay100k(b *testing.B) {
	m := coordlog.NewMemory(0)
	const keys, perKey = 1000, 100
	for i := range keys {
		k := Key{GroupID: "group", TopicID: testTopic, Partition: int32(i)}
		recs := []kmsg.Record{{
			Key:   encodeKey(nil, recordKey{Type: recordTypeSnapshot, Key: k}),
			Value: encodeSnapshotValue(nil, &snapshotValue{StartOffset: 0, DeliveryCompleteCount: -1}),
		}}
		for u := range perKey - 1 {
			bs := make([]StateBatch, 10)
			for j := range bs {
				o := int64(u*10 + j)
				bs[j] = sb(o, o, StateAcknowledged+int8(2*(j%2)), 1)
			}
			recs = append(recs, kmsg.Record{
				Key:   encodeKey(nil, recordKey{Type: recordTypeUpdate, Key: k}),
				Value: encodeUpdateValue(nil, &updateValue{LeaderEpoch: -1, StartOffset: int64(u * 5), DeliveryCompleteCount: -1, Batches: bs}),
			})
		}
		if _, err := m.Append(ctx, coordlog.Batch{Records: recs, ProducerID: -1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(Config{NumPartitions: 1}, []coordlog.Partition{m}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(keys*perKey), "records/op")
}

// syncedPartition is an in-memory partition that also writes every append to a file and
// fsyncs it, as the broker's log does under --fsync always: the cost group commit shares.
type syncedPartition struct {
	*coordlog.Memory
	f     *os.File
	syncs atomic.Int64
}

func (p *syncedPartition) Append(ctx context.Context, b coordlog.Batch) (int64, error) {
	base, err := p.Memory.Append(ctx, b)
	if err != nil {
		return base, err
	}
	for _, r := range b.Records {
		if _, err := p.f.Write(append(r.Key, r.Value...)); err != nil {
			return -1, err
		}
	}
	if err := p.f.Sync(); err != nil {
		return -1, err
	}
	p.syncs.Add(1)
	return base, nil
}

// Concurrent writes from many share partitions whose state lives on one __share_group_state
// partition, each a small acknowledgement (a ShareUpdate), over a log that fsyncs every
// append. fsyncs/op is what group commit cuts.
func BenchmarkConcurrentWrites(b *testing.B) {
	for _, writers := range []int{1, 16, 128} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			p := &syncedPartition{Memory: coordlog.NewMemory(0), f: f}
			s, err := New(Config{NumPartitions: 1}, []coordlog.Partition{p})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			keys := make([]Key, writers)
			for i := range keys {
				keys[i] = Key{GroupID: "g", TopicID: testTopic, Partition: int32(i)}
				if err := s.Initialize(ctx, keys[i], 0, 0); err != nil {
					b.Fatal(err)
				}
			}
			p.syncs.Store(0)
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, k := range keys {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						o := i % 1000
						if err := s.Write(ctx, k, 0, 0, -1, -1, []StateBatch{sb(o, o, StateAcknowledged, 1)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(p.syncs.Load())/float64(b.N), "fsyncs/op")
		})
	}
}
