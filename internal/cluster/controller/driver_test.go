package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/testclock"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

var quietRaft = &raft.DefaultLogger{Logger: stdlog.New(io.Discard, "", 0)}

// startDriver runs a driver over q until the test ends.
func startDriver(t *testing.T, q Quorum, tune func(*Options)) *Driver {
	t.Helper()
	opts := Options{Quorum: q, Logger: slog.New(slog.DiscardHandler)}
	if tune != nil {
		tune(&opts)
	}
	d := NewDriver(opts)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	return d
}

// loneNode is a one-voter metadata stack on a real raft log in a temp directory, with
// the cluster record and the topics of setup committed.
func loneNode(t *testing.T, setup ...wire.MetadataRecord) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Open(ctx, node.Config{NodeID: 0, DataDir: t.TempDir(), RaftLogger: quietRaft})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	recs := append([]wire.MetadataRecord{&wire.ClusterRecord{ClusterID: testCluster},
		&wire.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 27}}, setup...)
	if _, err := n.Propose(ctx, recs); err != nil {
		t.Fatal(err)
	}
	return n
}

func ask[R kmsg.Response](t *testing.T, d *Driver, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := d.Handle(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

// TestDriverOverLoneVoter: a broker registers, is unfenced once caught up and leads its
// partition, all on a real quorum loop; concurrent allocations, decided on latest while
// earlier ones are in flight, get disjoint blocks; silence past the session fences it on
// the driver's ticks.
func TestDriverOverLoneVoter(t *testing.T) {
	n := loneNode(t, topic("a", []int32{0})...)
	clock := testclock.New()
	d := startDriver(t, n, func(o *Options) { o.TickInterval, o.Now = -1, clock.Now })

	reg := ask[*kmsg.BrokerRegistrationResponse](t, d, registration(0, 0))
	wantCode(t, "registration", reg, nil)
	im, at := n.Image()
	if br := im.Brokers[0]; br == nil || br.Epoch != reg.BrokerEpoch || int64(at) != reg.BrokerEpoch || !br.Fenced {
		t.Fatalf("registered at epoch %d; image at %d has %+v", reg.BrokerEpoch, at, br)
	}
	hb := ask[*kmsg.BrokerHeartbeatResponse](t, d, heartbeat(0, reg.BrokerEpoch, at))
	im, _ = n.Image()
	if hb.ErrorCode != 0 || hb.IsFenced || im.Brokers[0].Fenced || im.Topic("a").Partitions[0].Leader != 0 {
		t.Fatalf("after a caught-up heartbeat: %+v, broker %+v, leader %d", hb, im.Brokers[0], im.Topic("a").Partitions[0].Leader)
	}

	var wg sync.WaitGroup
	blocks := make([]int64, 20)
	for i := range blocks {
		wg.Go(func() {
			req := kmsg.NewPtrAllocateProducerIDsRequest()
			req.BrokerID, req.BrokerEpoch = 0, reg.BrokerEpoch
			resp := ask[*kmsg.AllocateProducerIDsResponse](t, d, req)
			if resp.ErrorCode != 0 || resp.ProducerIDLen != ProducerIDBlockSize {
				t.Errorf("allocation: %+v", resp)
			}
			blocks[i] = resp.ProducerIDStart
		})
	}
	wg.Wait()
	slices.Sort(blocks)
	for i, b := range blocks {
		if b != int64(i)*ProducerIDBlockSize {
			t.Fatalf("blocks %v, want 20 consecutive blocks of 1000 from 0", blocks)
		}
	}
	if im, _ := n.Image(); im.ProducerIDs.Next != 20*ProducerIDBlockSize {
		t.Fatalf("next producer id %d", im.ProducerIDs.Next)
	}

	// The session started at the heartbeat; a tick past the session timeout fences.
	d.Tick()
	clock.Advance(9*time.Second + time.Millisecond)
	if err := await.Until(10*time.Second, time.Millisecond, func() error {
		d.Tick()
		im, _ := n.Image()
		if !im.Brokers[0].Fenced || im.Topic("a").Partitions[0].Leader != -1 {
			return fmt.Errorf("broker %+v, leader %d", im.Brokers[0], im.Topic("a").Partitions[0].Leader)
		}
		return nil
	}); err != nil {
		t.Fatalf("not fenced after the session timeout: %v", err)
	}
	wantCode(t, "stale heartbeat", ask[*kmsg.BrokerHeartbeatResponse](t, d, heartbeat(0, reg.BrokerEpoch-1, at)), kerr.StaleBrokerEpoch)
	if _, err := d.Handle(context.Background(), kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a Metadata request was handled")
	}
}

// cluster3 is three nodes of one quorum in this process, their raft messages delivered
// in memory through a filter the test sets.
type cluster3 struct {
	mu    sync.Mutex
	nodes [3]*node.Node
	cut   int32 // node id cut off from the others, -1 none
}

func (c *cluster3) send(ms []*pb.Message) {
	c.mu.Lock()
	nodes, cut := c.nodes, c.cut
	c.mu.Unlock()
	for _, m := range ms {
		from, to := node.NodeID(m.GetFrom()), node.NodeID(m.GetTo())
		if from == cut || to == cut || nodes[to] == nil {
			continue
		}
		_ = nodes[to].Loop().Step(m) // a full queue drops it, as a network would
	}
}

func (c *cluster3) setCut(id int32) {
	c.mu.Lock()
	c.cut = id
	c.mu.Unlock()
}

func newCluster3(t *testing.T) *cluster3 {
	c := &cluster3{cut: -1}
	for i := range int32(3) {
		n, err := node.Open(context.Background(), node.Config{NodeID: i, DataDir: t.TempDir(), Voters: []int32{0, 1, 2},
			Send: c.send, TickInterval: 10 * time.Millisecond, RaftLogger: quietRaft})
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.nodes[i] = n
		c.mu.Unlock()
		t.Cleanup(func() { n.Close() })
	}
	return c
}

func (c *cluster3) leader(t *testing.T, not int32) int32 {
	t.Helper()
	var lead int32 = -1
	if err := await.Until(20*time.Second, 5*time.Millisecond, func() error {
		for i, n := range c.nodes {
			if _, ok := n.Serving(); ok && int32(i) != not {
				lead = int32(i)
				return nil
			}
		}
		return errors.New("no serving leader")
	}); err != nil {
		t.Fatal(err)
	}
	return lead
}

// TestDriverLosesLeadership: a request waiting on a batch that cannot commit (its
// leader is cut off) is answered NOT_CONTROLLER when the leader steps down, the cut-off
// node answers NOT_CONTROLLER from then on, and the new leader's controller serves the
// broker's retry (meeting its own registration if the old batch committed, as after a
// KRaft failover).
func TestDriverLosesLeadership(t *testing.T) {
	c := newCluster3(t)
	lead := c.leader(t, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.nodes[lead].Propose(ctx, []wire.MetadataRecord{&wire.ClusterRecord{ClusterID: testCluster},
		&wire.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 27}}); err != nil {
		t.Fatal(err)
	}
	var drivers [3]*Driver
	for i, n := range c.nodes {
		drivers[i] = startDriver(t, n, func(o *Options) { o.TickInterval = 10 * time.Millisecond })
	}
	follower := (lead + 1) % 3
	wantCode(t, "registration on a follower", ask[*kmsg.BrokerRegistrationResponse](t, drivers[follower], registration(5, 0)), kerr.NotController)
	reg := ask[*kmsg.BrokerRegistrationResponse](t, drivers[lead], registration(5, 0))
	wantCode(t, "registration", reg, nil)

	c.setCut(lead)
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = 5, reg.BrokerEpoch
	resp := ask[*kmsg.AllocateProducerIDsResponse](t, drivers[lead], req)
	wantCode(t, "allocation on a cut-off leader", resp, kerr.NotController)
	wantCode(t, "registration on the old leader", ask[*kmsg.BrokerRegistrationResponse](t, drivers[lead], registration(5, 0)), kerr.NotController)

	next := c.leader(t, lead)
	resp = ask[*kmsg.AllocateProducerIDsResponse](t, drivers[next], req)
	wantCode(t, "allocation on the new leader", resp, nil)
	if resp.ProducerIDStart != 0 {
		t.Fatalf("first block from %d", resp.ProducerIDStart)
	}
	hb := ask[*kmsg.BrokerHeartbeatResponse](t, drivers[next], heartbeat(5, reg.BrokerEpoch, uint64(reg.BrokerEpoch)))
	wantCode(t, "heartbeat on the new leader", hb, nil)
	if hb.IsFenced {
		t.Fatal("still fenced after a caught-up heartbeat to the new controller")
	}
	var im *metadata.Image
	im, _ = c.nodes[next].Image()
	if im.Brokers[5].Fenced {
		t.Fatalf("image of the new leader: %+v", im.Brokers[5])
	}
}

// TestDriverStopped: once Run has returned, every request is answered NOT_CONTROLLER.
func TestDriverStopped(t *testing.T) {
	n := loneNode(t)
	d := NewDriver(Options{Quorum: n, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	wantCode(t, "registration", ask[*kmsg.BrokerRegistrationResponse](t, d, registration(0, 0)), nil)
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	wantCode(t, "after Run", ask[*kmsg.BrokerHeartbeatResponse](t, d, heartbeat(0, 1, 1)), kerr.NotController)
	resp := ask[*kmsg.CreateTopicsResponse](t, d, createTopics(false, newTopic("a", 1), newTopic("b", 1)))
	if got := codes(resp); !slices.Equal(got, codeList(kerr.NotController, kerr.NotController)) {
		t.Fatalf("CreateTopics after Run: %v", got)
	}
}
