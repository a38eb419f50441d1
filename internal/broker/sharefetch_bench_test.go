package broker_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

// BenchmarkShareFetch measures the broker's whole share-fetch path (request decode,
// piggybacked acknowledgements, acquisition, log read, response encode, socket write) over
// loopback, without decoding records: one share-group member on a raw TCP connection sends
// one ShareFetch at a time as kgo does (MaxBytes 50 MiB, MaxRecords 500, 1 partition),
// each carrying ACCEPT for the ranges the previous one acquired, and reads each response
// into a reused buffer (kmsg decodes the response's fields, not its records). The log (1 KiB
// records in kgo's ~1 MB batches, as in bench P3) is in the page cache. When the group has
// acquired the whole log, a fresh share group starts over, off the clock (a fetch past the
// end would long-poll). MB/s counts response bytes.
func BenchmarkShareFetch(b *testing.B) {
	tb := testbroker.Start(b, testbroker.WithFsync(broker.FsyncNever),
		testbroker.WithConfig(map[string]string{"group.share.assignment.interval.ms": "0"})) // joins at once
	topicID := fetchBenchProduce(b, tb.Addr, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()

	conn := dialBench(b, tb.Addr)
	var (
		groups int
		m      *benchShareMember
		acks   []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
		next   int64 // one past the last offset acquired
	)
	end := int64(fetchBenchLogBytes / 1024) // records produced
	join := func() {
		groups++
		m = joinBenchShareGroup(b, cl, fmt.Sprintf("sfb-%d", groups), "member", "fetchbench", topicID)
		acks, next = nil, 0
	}
	// fetch sends one ShareFetch, acknowledging what the previous one acquired.
	fetch := func() {
		var err error
		if acks, next, err = conn.shareFetch(m, topicID, acks, 500); err != nil {
			b.Fatal(err)
		}
		if len(acks) == 0 {
			b.Fatal("share fetch acquired nothing")
		}
	}
	join()
	fetch() // warm up: connection, page cache, share partition load
	conn.bytes = 0
	b.ReportAllocs()
	b.ResetTimer()
	fetches := 0
	for b.Loop() {
		if next >= end {
			b.StopTimer()
			join()
			b.StartTimer()
		}
		fetch()
		fetches++
	}
	b.StopTimer()
	b.ReportMetric(float64(conn.bytes)/b.Elapsed().Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(conn.bytes)/float64(fetches), "B/fetch")
}

// BenchmarkShareConsume measures draining a partition with share consumers that
// acknowledge as kgo's do: a consumer sends its next ShareFetch as soon as a response's
// records go to the application (prefetch), before the application acknowledged them, so
// acknowledgements ride one fetch late. With several consumers the partition's record locks
// (share.partition.max.record.locks, 2000: two of the log's ~1000-record batches) fill up,
// and what a stalled consumer's fetch does decides the pace. Raw connections, no record
// decoding, MaxWait 500 ms (kgo's cap when a fetch carries acknowledgements). One op drains
// the whole log (16 MiB of 1 KiB records) with a fresh group; members join off the clock.
// MB/s counts record bytes.
func BenchmarkShareConsume(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) { benchShareConsume(b, consumers) })
	}
}

func benchShareConsume(b *testing.B, consumers int) {
	tb := testbroker.Start(b, testbroker.WithFsync(broker.FsyncNever),
		testbroker.WithConfig(map[string]string{"group.share.assignment.interval.ms": "0"}))
	topicID := fetchBenchProduce(b, tb.Addr, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	end := int64(fetchBenchLogBytes / 1024)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		conns := make([]*benchConn, consumers)
		members := make([]*benchShareMember, consumers)
		for c := range consumers {
			conns[c] = dialBench(b, tb.Addr)
			members[c] = joinBenchShareGroup(b, cl, fmt.Sprintf("scb-%d", i), fmt.Sprintf("m%d", c), "fetchbench", topicID)
		}
		var (
			acquired atomic.Int64
			done     = make(chan struct{})
			stop     sync.Once
			wg       sync.WaitGroup
			failed   atomic.Value
		)
		finish := func() { stop.Do(func() { close(done) }) }
		b.StartTimer()
		for c := range consumers {
			wg.Go(func() {
				// ready: acknowledgements the application finished before this fetch; prev:
				// the records it is working on while this fetch is out.
				var ready, prev []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
				for {
					got, _, err := conns[c].shareFetch(members[c], topicID, ready, 500)
					select {
					case <-done:
						return
					default:
					}
					if err != nil {
						failed.Store(err)
						finish()
						return
					}
					ready, prev = prev, got
					for _, a := range got {
						if acquired.Add(a.LastOffset-a.FirstOffset+1) >= end {
							finish()
						}
					}
				}
			})
		}
		<-done
		b.StopTimer()
		for _, c := range conns {
			c.nc.Close() // ends the long polls still out
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(end*1024*int64(b.N))/b.Elapsed().Seconds()/1e6, "MB/s")
}

// benchConn sends requests on one raw connection and reads each response frame into a
// reused buffer, counting the bytes.
type benchConn struct {
	nc          net.Conn
	br          *bufio.Reader
	frame, resp []byte
	corr        int32
	bytes       int64
}

func dialBench(b *testing.B, addr string) *benchConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	return &benchConn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
}

// roundTrip sends req and returns its response frame (from the correlation id on), valid
// until the next call.
func (c *benchConn) roundTrip(b *testing.B, req kmsg.Request) []byte {
	frame, err := c.exchange(req)
	if err != nil {
		b.Fatal(err)
	}
	return frame
}

func (c *benchConn) exchange(req kmsg.Request) ([]byte, error) {
	c.corr++
	c.frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(c.frame[:0], req, c.corr)
	if _, err := c.nc.Write(c.frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(c.resp) < n {
		c.resp = make([]byte, n)
	}
	if _, err := io.ReadFull(c.br, c.resp[:n]); err != nil {
		return nil, err
	}
	c.bytes += int64(n) + 4
	return c.resp[:n], nil
}

// shareFetch sends one ShareFetch of partition 0 as kgo does (version 1, MaxBytes 50 MiB,
// MaxRecords 500) carrying acks, and returns ACCEPT acknowledgements for what it acquired
// and one past the last offset acquired (0 if none).
func (c *benchConn) shareFetch(m *benchShareMember, topicID [16]byte, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch,
	maxWaitMs int32) ([]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, int64, error) {
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWaitMs, 1, 50<<20, 500, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 50 << 20
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	frame, err := c.exchange(req)
	if err != nil {
		return nil, 0, err
	}
	m.session++
	resp := kmsg.NewPtrShareFetchResponse()
	resp.SetVersion(1)
	if err := resp.ReadFrom(frame[5:]); err != nil { // correlation id, header tags
		return nil, 0, err
	}
	if resp.ErrorCode != 0 {
		return nil, 0, fmt.Errorf("share fetch error %d", resp.ErrorCode)
	}
	var out []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	var next int64
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
				return nil, 0, fmt.Errorf("partition error %d, ack error %d", p.ErrorCode, p.AcknowledgeErrorCode)
			}
			for _, a := range p.AcquiredRecords {
				ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
				ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.FirstOffset, a.LastOffset, []int8{1}
				out = append(out, ab)
				next = max(next, a.LastOffset+1)
			}
		}
	}
	return out, next, nil
}

// benchShareMember is a share-group member driven with raw requests.
type benchShareMember struct {
	group, id string
	session   int32
}

// joinBenchShareGroup sets the group to read from the earliest offset and joins it, until
// the member is assigned the topic.
func joinBenchShareGroup(b *testing.B, cl *kgo.Client, group, member, topic string, topicID [16]byte) *benchShareMember {
	b.Helper()
	ctx := b.Context()
	if err := testbroker.SetGroupConfigs(ctx, cl, group, "share.auto.offset.reset", "earliest"); err != nil {
		b.Fatalf("alter group config: %v", err)
	}
	m := &benchShareMember{group: group, id: member}
	var epoch int32
	for {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, m.id, epoch
		req.SubscribedTopicNames = []string{topic}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			b.Fatalf("share heartbeat: %v %+v", err, resp)
		}
		epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			for _, t := range resp.Assignment.TopicPartitions {
				if t.TopicID == topicID && len(t.Partitions) > 0 {
					return m
				}
			}
		}
	}
}
