package broker_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

// rawFetcher sends requests on one raw connection and returns response bodies undecoded.
type rawFetcher struct {
	t    *testing.T
	nc   net.Conn
	br   *bufio.Reader
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawFetcher {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawFetcher{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// do sends req and returns the response body (after the correlation id and, for
// flexible versions, the header's tag byte).
func (f *rawFetcher) do(req kmsg.Request) []byte {
	f.t.Helper()
	f.send(req)
	return f.recv(req)
}

func (f *rawFetcher) send(req kmsg.Request) {
	f.t.Helper()
	f.corr++
	if _, err := f.nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, f.corr)); err != nil {
		f.t.Fatal(err)
	}
}

// recv reads the response to the last request sent.
func (f *rawFetcher) recv(req kmsg.Request) []byte {
	f.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(f.br, size[:]); err != nil {
		f.t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(f.br, frame); err != nil {
		f.t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != f.corr {
		f.t.Fatalf("correlation id %d, want %d", corr, f.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		return frame[5:]
	}
	return frame[4:]
}

// fetchWireSetup creates topics "big" (3 partitions: 2.5 MiB, 40 KiB, empty) and "small"
// (2 partitions: a few records, one record) and returns their ids.
func fetchWireSetup(t *testing.T, tb *testbroker.Broker) map[string][16]byte {
	t.Helper()
	cl := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	adm := kadm.NewClient(cl)
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "small"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	add := func(topic string, p int32, n, size int) {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: bytes.Repeat([]byte{byte(i)}, size)})
		}
	}
	add("big", 0, 2500, 1024)
	add("big", 1, 40, 1024)
	add("small", 0, 5, 10)
	add("small", 1, 1, 3)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "big", "small")
	if err != nil {
		t.Fatal(err)
	}
	return map[string][16]byte{"big": td["big"].ID, "small": td["small"].ID}
}

// fetchReq builds a sessionless fetch of the given partitions (topic, partition, offset).
func fetchReq(version int16, ids map[string][16]byte, parts ...any) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID = -1
	req.MaxBytes = 50 << 20
	req.SessionEpoch = -1
	for i := 0; i < len(parts); i += 3 {
		topic := parts[i].(string)
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != topic {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, ids[topic]
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset = int32(parts[i+1].(int)), int64(parts[i+2].(int))
		rp.PartitionMaxBytes = 3 << 20
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// TestFetchWireMatchesCopying: over a real connection (sendfile for the large partitions,
// copies for the small ones), every Fetch version answers a fetch of several topics and
// partitions (large, small, empty, offset out of range, unknown) with exactly the bytes the
// copying path encodes; kmsg decodes them and re-encodes them to the same bytes, and the
// records are valid batches.
func TestFetchWireMatchesCopying(t *testing.T) {
	tb := testbroker.Start(t)
	ids := fetchWireSetup(t, tb)
	for version := int16(4); version <= 18; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			// A connection per subtest: rawFetcher fails the test it was dialled for,
			// and t.Fatal must be called on the subtest's own t.
			raw := dialRaw(t, tb.Addr)
			req := fetchReq(version, ids, "big", 0, 0, "big", 1, 7, "big", 2, 0, "big", 7, 0,
				"small", 0, 1, "small", 1, 99)
			got := raw.do(req)
			if want := broker.FetchCopyingForTest(tb.Broker, req); !bytes.Equal(got, want) {
				t.Fatalf("wire body of %d bytes differs from the copying encoding (%d bytes)", len(got), len(want))
			}
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(version)
			if err := resp.ReadFrom(got); err != nil {
				t.Fatal(err)
			}
			if again := resp.AppendTo(nil); !bytes.Equal(again, got) {
				t.Fatal("kmsg re-encodes the decoded response to other bytes")
			}
			var records, errs int
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						errs++
					}
					bs, err := batch.Split(rp.RecordBatches)
					if err != nil {
						t.Fatalf("%s/%d: %v", rt.Topic, rp.Partition, err)
					}
					for _, b := range bs {
						h, err := batch.Parse(b)
						if err != nil {
							t.Fatalf("%s/%d: %v", rt.Topic, rp.Partition, err)
						}
						records += int(h.NumRecords)
					}
				}
			}
			// big/0 whole (2500 under 3 MiB), big/1 from its first batch, small/0 all.
			if records != 2500+40+5 || errs != 2 {
				t.Fatalf("%d records, %d errors; want %d records and 2 errors (offset out of range, unknown partition)", records, errs, 2500+40+5)
			}
		})
	}
}

// TestFetchReleasesFiles: after fetches of every kind (immediate, long polls woken by
// produce and expired, incremental sessions, fetches racing retention), and a clean stop,
// the process holds no file of the data directory open: every read's hold on its segment
// was released.
func TestFetchReleasesFiles(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"log.segment.bytes": "1048576"}))
	ids := fetchWireSetup(t, tb)
	cl := newClient(t, tb.Addr, kgo.ConsumeTopics("big", "small"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond))
	ctx := ctxT(t)
	for got := 0; got < 2546; { // kgo: incremental sessions, long polls that expire
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	raw := dialRaw(t, tb.Addr)
	long := fetchReq(16, ids, "small", 1, 1)
	long.MinBytes, long.MaxWaitMillis = 1<<20, 100
	raw.do(long) // expires with nothing
	// Records at once but fewer than MinBytes: the first read and every read woken by the
	// produce are replaced by later ones until the wait expires.
	long = fetchReq(16, ids, "small", 0, 0)
	long.MinBytes, long.MaxWaitMillis = 1<<20, 300
	raw.send(long)
	prod := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "small", Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	raw.recv(long)
	prod.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"big": {0: {Topic: "big", Partition: 0, At: 2000}}}); err != nil {
		t.Fatal(err)
	}
	raw.do(fetchReq(16, ids, "big", 0, 2000, "big", 1, 0))
	if _, err := adm.DeleteTopics(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	stopHoldingNoFiles(t, tb)
}

// stopHoldingNoFiles stops the broker and fails the test for every file of its data
// directory the process still holds open: a read whose hold was never released.
func stopHoldingNoFiles(t *testing.T, tb *testbroker.Broker) {
	t.Helper()
	tb.Stop()
	for _, f := range broker.OpenFilesUnder(t, tb.DataDir) {
		t.Errorf("still open after stop: %s", f)
	}
}

// shareWireSetup creates topic "sq": partition 0 holds 2500 records of 1 KiB in batches
// larger than the server's sendfile threshold, across 1 MiB segments; partition 1 holds
// 30 small single-record batches (copied into the write buffer).
func shareWireSetup(t *testing.T, tb *testbroker.Broker) *kgo.Client {
	t.Helper()
	cl := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
	ctx := ctxT(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "sq"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 2500 {
		recs = append(recs, &kgo.Record{Topic: "sq", Partition: 0, Value: bytes.Repeat([]byte{byte(i)}, 1024)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sq", Partition: 1, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// rawShareFetch builds a ShareFetch of both partitions of m's topic, acknowledging acks.
func rawShareFetch(m *shareMember, version int16, maxRecords int32, mode int8, maxWaitMs int32,
	acks map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(version)
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.session
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWaitMs, 1, 50<<20, maxRecords, maxRecords
	if version >= 2 {
		req.ShareAcquireMode = mode
	}
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topicID
	for p := range int32(2) {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		rp.AcknowledgementBatches = acks[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestShareFetchWireMatchesCopying: over a real connection (sendfile for the large
// partition's batches, copies for the small ones), every ShareFetch version, in both
// acquire modes, answers with exactly the bytes the copying path encodes: kmsg's encoding
// of the response with each partition's records being Log.Read's bytes of the batches from
// the first acquired offset to the last. Fetches acknowledge the previous ones until the
// group has every record.
func TestShareFetchWireMatchesCopying(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"log.segment.bytes": "1048576", "group.share.assignment.interval.ms": "0"}))
	cl := shareWireSetup(t, tb)
	for version := int16(1); version <= 2; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			group := fmt.Sprintf("sq-v%d", version)
			if code := alterGroupConfig(t, cl, group, "share.auto.offset.reset", "earliest"); code != 0 {
				t.Fatalf("alter group config: %d", code)
			}
			m := joinShareGroup(t, cl, group, "sq", "member-"+group)
			raw := dialRaw(t, tb.Addr)
			got := map[int32]int{}
			var acks map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
			for i := 0; got[0] < 2500 || got[1] < 30; i++ {
				if i > 200 {
					t.Fatalf("records acquired after 200 fetches: %v", got)
				}
				req := rawShareFetch(m, version, int32(37+50*(i%3)), int8(i%2), 1000, acks)
				body := raw.do(req)
				m.session++
				resp := kmsg.NewPtrShareFetchResponse()
				resp.SetVersion(version)
				if err := resp.ReadFrom(body); err != nil {
					t.Fatal(err)
				}
				if resp.ErrorCode != 0 {
					t.Fatalf("share fetch error %d", resp.ErrorCode)
				}
				acks = map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{}
				for ti := range resp.Topics {
					for pi := range resp.Topics[ti].Partitions {
						rp := &resp.Topics[ti].Partitions[pi]
						if rp.ErrorCode != 0 || rp.AcknowledgeErrorCode != 0 {
							t.Fatalf("partition %d: error %d, ack error %d", rp.Partition, rp.ErrorCode, rp.AcknowledgeErrorCode)
						}
						if len(rp.AcquiredRecords) == 0 {
							if len(rp.Records) != 0 {
								t.Fatalf("partition %d: %d record bytes without acquired records", rp.Partition, len(rp.Records))
							}
							continue
						}
						first, last := rp.AcquiredRecords[0].FirstOffset, rp.AcquiredRecords[0].LastOffset
						for _, a := range rp.AcquiredRecords {
							first, last = min(first, a.FirstOffset), max(last, a.LastOffset)
							got[rp.Partition] += int(a.LastOffset - a.FirstOffset + 1)
							ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
							ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.FirstOffset, a.LastOffset, []int8{1}
							acks[rp.Partition] = append(acks[rp.Partition], ab)
						}
						bs, err := batch.Split(rp.Records)
						if err != nil || len(bs) == 0 {
							t.Fatalf("partition %d: records do not split into batches: %v", rp.Partition, err)
						}
						if base, end := batch.BaseOffset(bs[0]), lastOffsetOf(t, bs[len(bs)-1]); base > first || end < last {
							t.Fatalf("partition %d: batches %d-%d do not hold the acquired %d-%d", rp.Partition, base, end, first, last)
						}
						rp.Records = broker.LogReadForTest(tb.Broker, "sq", rp.Partition, first, last+1)
					}
				}
				if want := resp.AppendTo(nil); !bytes.Equal(body, want) {
					t.Fatalf("fetch %d: wire body of %d bytes differs from the copying encoding (%d bytes)", i, len(body), len(want))
				}
			}
			if got[0] != 2500 || got[1] != 30 {
				t.Fatalf("acquired %v records, want 2500 and 30", got)
			}
		})
	}
}

func lastOffsetOf(t *testing.T, b []byte) int64 {
	t.Helper()
	h, err := batch.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return h.FirstOffset + int64(h.LastOffsetDelta)
}

// TestShareFetchReleasesFiles: after share fetches of every kind (immediate, long polls
// woken by a produce or expired, a long poll cut off by its connection's close, a session
// closed with epoch -1, fetches racing DeleteRecords and topic deletion) and a clean stop,
// the process holds no file of the data directory open: every read's hold on its segment
// was released, sent or not.
func TestShareFetchReleasesFiles(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"log.segment.bytes": "1048576", "group.share.assignment.interval.ms": "0"}))
	cl := shareWireSetup(t, tb)
	if code := alterGroupConfig(t, cl, "sr", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("alter group config: %d", code)
	}
	m := joinShareGroup(t, cl, "sr", "sq", "member-sr")
	raw := dialRaw(t, tb.Addr)
	fetch := func(maxRecords int32, maxWaitMs int32) *kmsg.ShareFetchResponse {
		t.Helper()
		body := raw.do(rawShareFetch(m, 2, maxRecords, 0, maxWaitMs, nil))
		m.session++
		resp := kmsg.NewPtrShareFetchResponse()
		resp.SetVersion(2)
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for range 6 { // immediate; nothing acknowledged: the lock limit is not reached
		fetch(100, 0)
	}
	ctx := ctxT(t)
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"sq": {0: {Topic: "sq", Partition: 0, At: 500}}}); err != nil {
		t.Fatal(err)
	}
	for range 4 { // past the deleted records, to the end
		fetch(500, 0)
	}
	fetch(500, 50) // expires with nothing

	// A long poll woken by a produce.
	raw.send(rawShareFetch(m, 2, 500, 0, 5000, nil))
	time.Sleep(50 * time.Millisecond)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sq", Partition: 1, Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	raw.recv(&kmsg.ShareFetchRequest{Version: 2})
	m.session++

	// A second member's long poll, cut off by closing its connection.
	m2 := joinShareGroup(t, cl, "sr", "sq", "member-sr2")
	raw2 := dialRaw(t, tb.Addr)
	raw2.send(rawShareFetch(m2, 2, 500, 0, 5000, nil))
	time.Sleep(50 * time.Millisecond)
	raw2.nc.Close()

	// The first member's session closed with epoch -1 (releases its records).
	m.session = -1
	raw.do(rawShareFetch(m, 2, 500, 0, 0, nil))

	if _, err := adm.DeleteTopics(ctx, "sq"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	stopHoldingNoFiles(t, tb)
}
