package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/server"
)

// brokerCluster is three brokers in one test process, each a voter of one metadata quorum
// over real TCP: controller listeners and client listeners bound on 127.0.0.1:0 before any
// broker opens, one data directory each.
type brokerCluster struct {
	t       *testing.T
	voters  map[int32]string
	dirs    map[int32]string
	clients map[int32]string // client listener addresses
	brokers map[int32]*Broker
	servers map[int32]*server.Server
	mu      sync.Mutex
}

const clusterHeartbeat = 100 * time.Millisecond

func newBrokerCluster(t *testing.T, n int) *brokerCluster {
	c := &brokerCluster{t: t, voters: map[int32]string{}, dirs: map[int32]string{}, clients: map[int32]string{},
		brokers: map[int32]*Broker{}, servers: map[int32]*server.Server{}}
	ctls := map[int32]net.Listener{}
	for id := range int32(n) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctls[id] = ln
		c.voters[id] = ln.Addr().String()
		c.dirs[id] = t.TempDir()
	}
	var wg sync.WaitGroup
	for id := range int32(n) {
		wg.Go(func() { c.start(id, ctls[id]) })
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for id := range int32(n) {
			wg.Go(func() { c.stop(id) })
		}
		wg.Wait()
	})
	return c
}

// start opens broker id (ctl nil: rebinding the controller address its peers know) and
// serves its client listener.
func (c *brokerCluster) start(id int32, ctl net.Listener) {
	t := c.t
	var err error
	if ctl == nil {
		if ctl, err = net.Listen("tcp", c.voters[id]); err != nil {
			t.Error(err)
			return
		}
	}
	c.mu.Lock()
	addr := c.clients[id]
	c.mu.Unlock()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	port := ln.Addr().(*net.TCPAddr).Port
	logger := slog.New(slog.NewTextHandler(testLogOut, nil)).With("node", id)
	b, err := Open(Config{DataDir: c.dirs[id], NodeID: id, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(port),
		AutoCreateTopics: true, Voters: c.voters, ControllerListener: ctl,
		HeartbeatInterval: clusterHeartbeat, SessionTimeout: 10 * clusterHeartbeat, Logger: logger})
	if err != nil {
		ln.Close()
		t.Errorf("open broker %d: %v", id, err)
		return
	}
	srv := server.New(server.Config{ClusterID: b.ClusterID(), NodeID: id}, b, logger)
	go srv.Serve(ln)
	c.mu.Lock()
	c.clients[id], c.brokers[id], c.servers[id] = ln.Addr().String(), b, srv
	c.mu.Unlock()
}

func (c *brokerCluster) stop(id int32) {
	c.mu.Lock()
	b, srv := c.brokers[id], c.servers[id]
	delete(c.brokers, id)
	delete(c.servers, id)
	c.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	if b != nil {
		b.Close()
	}
}

// await polls f until it succeeds or 20 s pass.
func (c *brokerCluster) await(what string, f func() error) {
	c.t.Helper()
	if err := await.Until(20*time.Second, 10*time.Millisecond, f); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// controller is the node id of the current controller and one other broker.
func (c *brokerCluster) controller() (ctl, other int32) {
	c.t.Helper()
	c.await("a controller", func() error {
		for id, b := range c.brokers {
			if _, ok := b.meta.Serving(); ok {
				ctl = id
				return nil
			}
		}
		return fmt.Errorf("none serving")
	})
	for id := range c.brokers {
		if id != ctl {
			return ctl, id
		}
	}
	return ctl, -1
}

// Three voters form one cluster: the first controller proposes the cluster id once, every
// broker registers over the network and is unfenced; a topic created through a broker that
// is not the controller is forwarded, and every broker has it when the answer comes; a
// producer-id block comes from the controller; DescribeQuorum on a client listener is the
// controller's answer; a controller that stops is replaced, and the broker that stopped is
// fenced by the new controller's session timeout.
func TestThreeVotersOneCluster(t *testing.T) {
	c := newBrokerCluster(t, 3)
	ids := map[string]bool{}
	for id, b := range c.brokers {
		c.await(fmt.Sprintf("broker %d sees three unfenced brokers", id), func() error {
			im, _ := b.image()
			for want := range int32(3) {
				if br := im.Brokers[want]; br == nil || br.Fenced {
					return fmt.Errorf("broker %d: %+v", want, br)
				}
			}
			return nil
		})
		ids[b.ClusterID()] = true
	}
	if len(ids) != 1 || ids[""] {
		t.Fatalf("cluster ids %v, want one", ids)
	}

	ctl, other := c.controller()
	ob := c.brokers[other]
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "spread", 6, 1
	req.Topics = append(req.Topics, rt)
	req.Version = 7
	resp := ob.forwardAdmin(context.Background(), "test", req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics through broker %d (controller %d): %+v", other, ctl, resp.Topics)
	}
	if ob.topics.get("spread") == nil {
		t.Fatalf("broker %d answered before its publisher had the topic", other)
	}
	for id, b := range c.brokers {
		c.await(fmt.Sprintf("broker %d has the topic", id), func() error {
			if b.topics.get("spread") == nil {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	again := ob.forwardAdmin(context.Background(), "test", req).(*kmsg.CreateTopicsResponse)
	if again.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("second create: %+v", again.Topics)
	}

	pid, err := ob.pids.allocate()
	if err != nil {
		t.Fatalf("producer id on broker %d: %v", other, err)
	}
	if !ob.pids.issued(pid) {
		t.Fatalf("producer id %d is above the image's bound on the broker that got it", pid)
	}

	dq := kmsg.NewPtrDescribeQuorumRequest()
	dt := kmsg.NewDescribeQuorumRequestTopic()
	dt.Topic = "__cluster_metadata"
	dt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	dq.Topics = append(dq.Topics, dt)
	dq.Version = 2
	reply := ob.handleDescribeQuorum(context.Background(), &server.Request{Version: 2}, dq)
	dqr := reply.Wait().(*kmsg.DescribeQuorumResponse)
	if p := dqr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderID != ctl || len(p.CurrentVoters) != 3 {
		t.Fatalf("DescribeQuorum through broker %d: %+v, want leader %d and three voters", other, p, ctl)
	}

	c.stop(ctl)
	newCtl, _ := c.controller()
	if newCtl == ctl {
		t.Fatalf("the stopped node %d is still the controller", ctl)
	}
	nb := c.brokers[newCtl]
	c.await("the stopped broker is fenced", func() error {
		im, _ := nb.image()
		if br := im.Brokers[ctl]; br == nil || !br.Fenced {
			return fmt.Errorf("broker %d: %+v", ctl, br)
		}
		return nil
	})
}

// testLogOut receives the brokers' logs (os.Stderr to watch a failing run).
var testLogOut io.Writer = io.Discard
