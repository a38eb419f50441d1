package broker_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/batch"
	"github.com/exactq/exactq/broker"
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
	raw := dialRaw(t, tb.Addr)
	for version := int16(4); version <= 18; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
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
	tb.Stop()

	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, tb.DataDir) {
			t.Errorf("still open after stop: %s", target)
		}
	}
}
