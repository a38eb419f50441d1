package hostile

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/testdisk"
)

// Finding 8, the smaller items, each against a real broker with the victim beside it.

// fetchMaxBytes is the broker-side fetch.max.bytes of TestFetchMaxBytesHuge: small, so a
// topic holding several times more is cheap to write.
const fetchMaxBytes = 1 << 20

// A Fetch with MaxBytes 2^31-1 (and partition MaxBytes as large) got a response as large
// as the log. The broker's fetch.max.bytes caps it (Kafka: at most the bound, or the first
// batch when that alone is larger). Guards 7242a7e.
func TestFetchMaxBytesHuge(t *testing.T) {
	const topic, valueBytes = "fetched-whole", 100 << 10
	batches := sized(40, 400) // 4 MB (40 MB full): 4x the broker's bound
	runAttack(t, attack{
		name: "#8 Fetch MaxBytes 2^31-1", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		broker: brokerOpts{config: []string{"fetch.max.bytes=" + strconv.Itoa(fetchMaxBytes)}},
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), topic, 1, nil)
			c := dialRaw(t, h.addr())
			value := make([]byte, valueBytes)
			for range batches {
				rec := noProducer(0, 1, record(0, -1, nil, len(value), value)).bytes(t)
				if code, err := produceRaw(t, c, topic, 0, rec); err != nil || code != 0 {
					t.Fatalf("produce %d bytes: code %d, %v", len(rec), code, err)
				}
			}
			// Two attackers, 20 huge fetches a second each (each answer ~1 MiB): enough to show
			// a response or the heap growing with MaxBytes, without taking both CPUs.
			repeat(sized(2*time.Second, 10*time.Second), 2, func(int, int) {
				hugeFetch(t, h.addr(), topic, fetchMaxBytes+valueBytes+4096)
				time.Sleep(50 * time.Millisecond) // paces the attacker (see above)
			})
		},
	})
}

// hugeFetch sends a Fetch of topic partition 0 from offset 0 asking for 2^31-1 bytes and
// fails the test when the response frame passes boundBytes or holds no records.
func hugeFetch(t *testing.T, addr, topic string, boundBytes int) {
	c := dialRaw(t, addr)
	defer c.Close()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12) // topics by name
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, math.MaxInt32
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, math.MaxInt32, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if err := c.send(req); err != nil {
		t.Errorf("fetch: %v", err)
		return
	}
	frame, err := c.readFrame(30 * time.Second)
	if err != nil {
		t.Errorf("fetch response: %v", err)
		return
	}
	if len(frame) > boundBytes {
		t.Errorf("Fetch response of %d bytes, bound %d (fetch.max.bytes %d plus one batch)", len(frame), boundBytes, fetchMaxBytes)
	}
	if len(frame) < fetchMaxBytes/2 {
		t.Errorf("Fetch response of %d bytes: the broker served far less than fetch.max.bytes %d", len(frame), fetchMaxBytes)
	}
}

// Producer ids the broker never handed out cost ~350 B of state each for a day (2M ids:
// +640 MB). Each is now refused with INVALID_PRODUCER_ID_MAPPING and nothing is kept:
// resident memory grows with neither the count of ids nor of partitions they were sent
// to. Guards e9761a3 (reapplied by 1daff14).
func TestInventedProducerIDs(t *testing.T) {
	const topic, partitions = "invented-pids", 100
	requests := sized(3000, 20000) // 300,000 ids (2M full), 100 to a request
	const growthBytes = 48 << 20   // before: ~350 B an id, 100 MB at 300,000
	runAttack(t, attack{
		name: "#8 invented producer ids", rssBytes: defaultRSSBound, minRatio: floodRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), topic, partitions, nil)
			before := h.b.peakRSS.Load()
			codes := map[int16]int{}
			var mu sync.Mutex
			// Two connections, a pause of 2 ms after each request: the attacker's own batch
			// encoding takes CPU the victim would have had on two shared cores.
			repeatN(requests, 2, func(i int, c *rawConn) {
				code := produceInventedIDs(t, c, topic, partitions, int64(i)*partitions+1<<40)
				time.Sleep(2 * time.Millisecond) // paces the attacker (see above)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}, h.addr())
			growth := h.b.peakRSS.Load() - before
			t.Logf("Produce answers by error code: %v; RSS grew %s for %d ids", codes, mib(growth), requests*partitions)
			if codes[kerr.InvalidProducerIDMapping.Code] != requests {
				t.Errorf("%d of %d Produce requests of invented producer ids refused with INVALID_PRODUCER_ID_MAPPING on every partition: %v",
					codes[kerr.InvalidProducerIDMapping.Code], requests, codes)
			}
			if growth > growthBytes {
				t.Errorf("broker RSS grew %s for %d invented producer ids, bound %s", mib(growth), requests*partitions, mib(growthBytes))
			}
		},
	})
}

// repeatN runs n calls of f spread over workers attacker connections (redialled when one
// fails).
func repeatN(n, workers int, f func(i int, c *rawConn), addr string) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *rawConn
			for i := range next {
				if c == nil {
					conn, err := dialAttacker(addr)
					if err != nil {
						continue
					}
					c = &rawConn{Conn: conn, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile"))}
				}
				f(i, c)
			}
			if c != nil {
				c.Close()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// produceInventedIDs sends one Produce with a one-record idempotent batch to each of the
// partitions of topic, partition p from producer id firstID+p (epoch 0, sequence 0), none
// of them ever allocated; it returns the partitions' error code (-2 no answer, -3 mixed).
func produceInventedIDs(t *testing.T, c *rawConn, topic string, partitions int, firstID int64) int16 {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		b := rawBatch{producerID: firstID + int64(p), producerEpoch: 0, baseSequence: 0, numRecords: 1, records: goodRecords(1)}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), b.bytes(t)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := c.roundTrip(req, 30*time.Second)
	if err != nil {
		return -2
	}
	pr := resp.(*kmsg.ProduceResponse)
	code := int16(-3)
	for i, p := range pr.Topics[0].Partitions {
		if i == 0 {
			code = p.ErrorCode
		} else if p.ErrorCode != code {
			return -3
		}
	}
	return code
}

// 10,000 one-member share groups took 1.15 GB (~100 KB each). An idle group now costs a
// few KB (3.8 KB measured on a shared connection; the rest was each connection's write
// buffer, now pooled): here groups joined over a few connections must cost at most
// perGroupBytes of resident memory each. Guards 24fd55c and 25d533d. On shared connections
// this passed before those commits too (4.9 KB a group at 24fd55c^, 4.1 KB now): the
// issue's ~100 KB was each member's own connection, whose pooled write buffer RSS does not
// show at CI sizes (500 groups on their own connections: ~44 KB a group before and after;
// broker TestIdleShareGroupMemory measures the heap and failed before 25d533d).
func TestManyShareGroups(t *testing.T) {
	const topic, conns = "shared-by-many", 4
	groups := sized(2000, 10000)
	const perGroupBytes = 24 << 10 // before: ~100 KB a group
	runAttack(t, attack{
		name: "#8 many one-member share groups", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		share: true,
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), topic, 1, nil)
			before := h.b.peakRSS.Load()
			var mu sync.Mutex
			codes := map[int16]int{}
			repeatN(groups, conns, func(i int, c *rawConn) {
				code := shareHeartbeatOnce(c, fmt.Sprintf("lonely-%05d", i), topic)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}, h.addr())
			// Let the groups' assignments and state settle before measuring: there is no
			// event to wait for, only a heap that stops growing.
			time.Sleep(500 * time.Millisecond)
			growth := h.b.peakRSS.Load() - before
			t.Logf("ShareGroupHeartbeat answers by error code: %v; RSS grew %s for %d groups (%d B a group)",
				codes, mib(growth), groups, growth/int64(groups))
			if codes[0] != groups {
				t.Errorf("%d of %d share groups joined: %v", codes[0], groups, codes)
			}
			if growth > int64(groups)*perGroupBytes {
				t.Errorf("broker RSS grew %d B a share group, bound %d", growth/int64(groups), perGroupBytes)
			}
		},
	})
}

// shareHeartbeatOnce joins a new member to group subscribed to topic and returns the error
// code (-2 when there was no answer).
func shareHeartbeatOnce(c *rawConn, group, topic string) int16 {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID, req.MemberEpoch = group, newMemberID(), 0
	req.SubscribedTopicNames = []string{topic}
	resp, err := c.roundTrip(req, 10*time.Second)
	if err != nil {
		return -2
	}
	return resp.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode
}

// A full disk while running: writes are refused with KAFKA_STORAGE_ERROR at once, nothing
// acknowledged is lost (runAttack's restart checks the victim's records), and writes resume
// when space returns. The data directory is on a small tmpfs the test mounts (root only);
// a filler file beside it takes most of the space, an attacker's producer the rest, and
// removing the filler frees it. The victim's own writes fail while the disk is full, so its
// rate and p99 are reported, not bounded. Guards 83e8dd7 and 6b56903; the issue listed a
// full disk while running among the answers to keep, and this passed before both (the
// start on a full disk is broker TestStartWithFullDisk's).
func TestFullDiskWhileRunning(t *testing.T) {
	disk := testdisk.Small(t, 96<<20)
	const topic = "filling"
	runAttack(t, attack{
		name: "#8 full disk while running", rssBytes: defaultRSSBound,
		broker: brokerOpts{dataDir: filepath.Join(disk, "data")},
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), topic, 1, nil)
			free := testdisk.Fill(t, disk, "filler", 8<<20)
			cl := attackerClient(t, h.addr(), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
				kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(15*time.Second))
			value := make([]byte, 100<<10)
			_, _ = rand.Read(value)
			var err error
			written := 0
			for ; err == nil && written < 1000; written++ {
				err = produceOne(cl, topic, value)
			}
			t.Logf("full after %d records of %d KiB: %v", written, len(value)>>10, err)
			if !errors.Is(err, kerr.KafkaStorageError) {
				t.Fatalf("producing to a full disk: %v, want KAFKA_STORAGE_ERROR", err)
			}
			// Hold the disk full while the victim writes too: its writes fail, the broker
			// stays up and says why in its log.
			time.Sleep(time.Second)
			if logs := h.b.p.Logs(); !strings.Contains(logs, "no space left on device") {
				t.Errorf("a full disk logged nothing; log tail:\n%s", tail(logs, 10))
			}
			free()
			if err := await.Until(20*time.Second, 10*time.Millisecond, func() error {
				return produceOne(cl, topic, value)
			}); err != nil {
				t.Fatalf("writes did not resume once space was freed: %v", err)
			}
		},
	})
}

// produceOne writes one record of value to topic and waits for its answer.
func produceOne(cl *kgo.Client, topic string, value []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr()
}

// Topic names of 247-249 characters (Kafka allows 249) failed with KAFKA_STORAGE_ERROR
// and left orphan directories. Each must now be created, produced to and consumed over the
// wire, and deleted without leaving anything in the data directory. Guards 6886587.
func TestLongestTopicNames(t *testing.T) {
	var names []string
	for n := 247; n <= 249; n++ {
		names = append(names, fmt.Sprintf("long%d-", n)+strings.Repeat("x", n-len("longNNN-")))
	}
	runAttack(t, attack{
		name: "#8 249-character topic names", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm := kadm.NewClient(newClient(t, h.addr()))
			for _, name := range names {
				createTopic(t, h.addr(), name, 2, nil)
				produceValues(t, h.addr(), name, 10)
				if got := readAll(t, h.addr(), name); len(got[0])+len(got[1]) != 10 {
					t.Errorf("read %d records of %d-character topic, want 10", len(got[0])+len(got[1]), len(name))
				}
				resps, err := adm.DeleteTopics(ctx, name)
				if err == nil {
					err = resps.Error()
				}
				if err != nil {
					t.Fatalf("delete the %d-character topic: %v", len(name), err)
				}
			}
			for _, name := range names {
				err := await.Until(10*time.Second, 10*time.Millisecond, func() error {
					if left := filesNamed(t, h.b.opts.dataDir, name[:len("longNNN-")]); len(left) > 0 {
						return fmt.Errorf("files left: %v", left)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("the deleted topic's files never went: %v", err)
				}
			}
		},
		after: func(t *testing.T, h *harness) {
			for _, name := range names {
				if left := filesNamed(t, h.b.opts.dataDir, name[:len("longNNN-")]); len(left) > 0 {
					t.Errorf("after a restart the deleted %d-character topic left %v", len(name), left)
				}
			}
			if n := countTopics(t, h.addr()); n != 1 {
				t.Errorf("%d topics after the restart, want the victim's only", n)
			}
		},
	})
}

// filesNamed lists the paths under dir whose base name starts with prefix.
func filesNamed(t *testing.T, dir, prefix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), prefix) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	return out
}
