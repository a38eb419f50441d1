package broker_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// TestManyPartitions: 20,000 partitions (EXACTQ_MANY_PARTITIONS=100000 for Acceptance 3's
// run; the disk must hold ~100,000 directories) are created with max.broker.partitions
// raised, a sample of them produced to and fetched, the broker restarted, and through all of
// it new connections are still accepted and the process stays within its descriptor limit.
// Before lazily opened segment files each partition held a descriptor and 20,000 of them
// made accept fail with "too many open files".
func TestManyPartitions(t *testing.T) {
	n := 20000
	if s := os.Getenv("EXACTQ_MANY_PARTITIONS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		n = 2000
	}
	const perTopic = 1000
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"max.broker.partitions": strconv.Itoa(n + 1000)}))
	cl := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topics := (n + perTopic - 1) / perTopic
	started := time.Now()
	for i := range topics {
		if _, err := adm.CreateTopic(ctxT(t), int32(min(perTopic, n-i*perTopic)), 1, nil, fmt.Sprintf("many-%03d", i)); err != nil {
			t.Fatalf("create topic %d: %v", i, err)
		}
		if i%10 == 9 {
			newConnectionAnswers(t, tb.Addr)
		}
	}
	t.Logf("%d partitions created in %v; %d descriptors open", n, time.Since(started).Round(time.Millisecond), openDescriptors(t))

	// Every 97th partition gets a record; each is read back.
	var sample []*kgo.Record
	for k := 0; k < n; k += 97 {
		sample = append(sample, &kgo.Record{Topic: fmt.Sprintf("many-%03d", k/perTopic), Partition: int32(k % perTopic), Value: []byte(strconv.Itoa(k))})
	}
	if err := cl.ProduceSync(ctxT(t), sample...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for _, r := range sample[:min(len(sample), 50)] {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.SessionEpoch, req.MaxBytes = -1, -1, 1<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = r.Topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = r.Partition, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			td, err := adm.ListTopics(ctxT(t), r.Topic)
			if err != nil {
				t.Fatal(err)
			}
			req.Topics[0].TopicID = td[r.Topic].ID
			resp, err := req.RequestWith(ctxT(t), cl)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Topics[0].Partitions[0]
			if got.ErrorCode != 0 || got.HighWatermark != 1 || len(got.RecordBatches) == 0 {
				t.Fatalf("%s/%d: error %d, high watermark %d, %d bytes", r.Topic, r.Partition, got.ErrorCode, got.HighWatermark, len(got.RecordBatches))
			}
		}
		newConnectionAnswers(t, tb.Addr)
	}
	check()
	started = time.Now()
	tb.Restart()
	t.Logf("restart with %d partitions: %v; %d descriptors open", n, time.Since(started).Round(time.Millisecond), openDescriptors(t))
	check()
}

// newConnectionAnswers dials the broker afresh and expects an ApiVersions answer.
func newConnectionAnswers(t *testing.T, addr string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("new connection: %v", err)
	}
	defer nc.Close()
	f := &rawFetcher{t: t, nc: nc}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	f.br = bufio.NewReader(nc)
	// v2: ApiVersions responses keep the old header even in flexible versions, which
	// rawFetcher does not know.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(2)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(2)
	if err := resp.ReadFrom(f.do(req)); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions on a new connection: %v %d", err, resp.ErrorCode)
	}
}

func openDescriptors(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(e)
}
