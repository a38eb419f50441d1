package kgoext

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareFetchWrites counts the ShareFetch requests a client wrote.
type shareFetchWrites struct{ n atomic.Int64 }

func (h *shareFetchWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.ShareFetch.Int16() && err == nil {
		h.n.Add(1)
	}
}

// A fetch that a Poll started and that is still waiting for its share session when the
// Poll returns carries none of the acknowledgements recorded after that Poll: they stay
// for AcknowledgementsForTransaction. Before, the fetch took them when it got the
// session, and a transaction that then aborted left its inputs ACKNOWLEDGED without their
// outputs (TestLifecycleRandomCrashes seed 2 lost ten inputs so).
func TestFetchInFlightCarriesNoLaterAcks(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.share.heartbeat.interval.ms":     "200",
		"group.share.min.heartbeat.interval.ms": "200",
		"group.share.assignment.interval.ms":    "0",
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 1, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if err := testbroker.SetGroupConfigs(ctx, admCl, "g", "share.auto.offset.reset", "earliest"); err != nil {
		t.Fatal(err)
	}
	writes := &shareFetchWrites{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.WithHooks(writes))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := NewShareConsumer(cl, "g", ShareTopics("in"), ExplicitAcks())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())

	produce := func(n int) {
		for i := range n {
			if err := admCl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: fmt.Appendf(nil, "w%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(5)
	var recs []*kgo.Record
	var s *shareSession
	for try := 0; len(recs) == 0; try++ {
		if try == 10 {
			t.Fatal("no Poll returned queued records while the next fetch waited for the session")
		}
		// Polls that return at once until a fetch's result is queued for the next Poll.
		done, stop := context.WithCancel(ctx)
		stop()
		if err := await.Until(30*time.Second, 10*time.Millisecond, func() error {
			got, _ := c.Poll(done)
			if len(got) > 0 { // a result queued earlier: settle it and fetch more
				for _, r := range got {
					if err := c.Acknowledge(r, AckAccept); err != nil {
						return await.Stop(err)
					}
				}
				if _, err := c.AcknowledgementsForTransaction(); err != nil {
					return await.Stop(err)
				}
				produce(5)
				return fmt.Errorf("records returned")
			}
			if len(c.results) == 0 {
				return fmt.Errorf("no fetch result queued")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// The session is busy (held here): the fetch the next Poll starts waits for it.
		c.mu.Lock()
		s = c.sessionLocked(c.meta.leader(TopicPartition{"in", 0}))
		c.mu.Unlock()
		s.sem <- struct{}{}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		recs, _ = c.Poll(pctx) // the queued records, if that result had any
		pcancel()
		if len(recs) == 0 {
			<-s.sem
			produce(5)
		}
	}
	before := writes.n.Load()
	for _, r := range recs {
		if err := c.Acknowledge(r, AckAccept); err != nil {
			t.Fatal(err)
		}
	}
	<-s.sem // the waiting fetch gets the session and writes its request
	if err := await.Until(30*time.Second, time.Millisecond, func() error {
		if writes.n.Load() == before {
			return fmt.Errorf("the waiting fetch wrote no ShareFetch")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	acks, err := c.AcknowledgementsForTransaction()
	if err != nil {
		t.Fatal(err)
	}
	if acks.Len() != len(recs) {
		t.Fatalf("AcknowledgementsForTransaction has %d of the %d acknowledgements recorded after the fetch started: the fetch sent the others outside the transaction", acks.Len(), len(recs))
	}
}
