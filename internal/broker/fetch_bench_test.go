package broker_test

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

// BenchmarkFetch measures the broker's whole fetch path (request decode, log read, response
// encode, socket write) over loopback, without client-side decoding: a raw TCP client sends
// one FetchRequest at a time for fetchBenchPartBytes per partition, as a consumer does, and
// reads each response into a reused buffer. The log (1 KiB records) is in the page cache, as
// in the side-by-side consume run. MB/s counts response bytes.
func BenchmarkFetch(b *testing.B) {
	for _, parts := range []int{1, 8} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) { benchFetch(b, parts) })
	}
}

const (
	fetchBenchPartBytes = 1 << 20  // partition max bytes of each fetch
	fetchBenchLogBytes  = 16 << 20 // record bytes produced per partition
	fetchBenchVersion   = 17
)

func benchFetch(b *testing.B, parts int) {
	tb := testbroker.Start(b, testbroker.WithFsync(broker.FsyncNever))
	topicID := fetchBenchProduce(b, tb.Addr, parts)

	conn := dialBench(b, tb.Addr)
	offsets := make([]int64, parts)
	ends := make([]int64, parts) // the first fetch past the end wraps to 0
	fetch := func() {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(fetchBenchVersion)
		req.ReplicaID = -1
		req.MaxWaitMillis = 500
		req.MinBytes = 1
		req.MaxBytes = 64 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = topicID
		for p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(p)
			rp.FetchOffset = offsets[p]
			rp.PartitionMaxBytes = fetchBenchPartBytes
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		conn.roundTrip(b, req)
		// Advance by what was asked for: a 1 MiB fetch of 1 KiB records returns about 1 MiB,
		// and the exact next offset would need decoding, which this benchmark leaves out.
		for p := range offsets {
			offsets[p] += fetchBenchPartBytes / 1100
			if offsets[p] >= ends[p] {
				offsets[p] = 0
			}
		}
	}
	for p := range ends {
		ends[p] = fetchBenchLogBytes/1024 - fetchBenchPartBytes/1024
	}
	fetch() // warm up: connection, page cache
	conn.bytes = 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		fetch()
	}
	b.StopTimer()
	b.ReportMetric(float64(conn.bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(conn.bytes)/float64(b.N), "B/fetch")
}

// fetchBenchProduce creates a topic of parts partitions, fills each with
// fetchBenchLogBytes of 1 KiB records and returns the topic id.
func fetchBenchProduce(b *testing.B, addr string, parts int) [16]byte {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("fetchbench"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // as the bench driver: kgo's default batch size
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := b.Context()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, int32(parts), 1, nil, "fetchbench"); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 1024)
	_, _ = rand.Read(value) // incompressible, as in the bench driver
	for p := range parts {
		var recs []*kgo.Record
		for range fetchBenchLogBytes / 1024 {
			recs = append(recs, &kgo.Record{Partition: int32(p), Value: value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	td, err := adm.ListTopics(ctx, "fetchbench")
	if err != nil {
		b.Fatal(err)
	}
	return td["fetchbench"].ID
}
