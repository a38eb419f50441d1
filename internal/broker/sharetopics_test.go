package broker_test

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

// consumeAllOfQ produces n records to q and has share group sg (reset earliest) consume
// and acknowledge all of them.
func consumeAllOfQ(t *testing.T, tb *testbroker.Broker, cl *kgo.Client, n int) {
	t.Helper()
	if code := alterGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("set auto offset reset: %v", kerr.ErrorForCode(code))
	}
	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("q")), "q", n)
	a := shareConsumer(t, tb.Addr, "sg", "q")
	pollAccept(t, a, n)
	a.Close()
}

// A deleted topic's share-group state goes with it, durably (issue 17: "the same for
// share-group state of deleted partitions", as Kafka's share coordinator tombstones it):
// a share group consumes part of q, q is deleted and re-created, and the group gets the
// new topic's records from its start (share.auto.offset.reset=earliest), also after a
// restart; nothing of the old topic is left in the share-state store or in the group.
func TestShareStateDeletedWithTopic(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	cl := newClient(t, tb.Addr)
	adm := kadm.NewClient(cl)
	ctx := ctxT(t)
	create := func() [16]byte {
		t.Helper()
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, "q")
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	oldID := [16]byte(create())
	consumeAllOfQ(t, tb, cl, 20)
	if n := broker.ShareStateTopicsForTest(tb.Broker)[oldID]; n != 1 {
		t.Fatalf("share state of q before the delete: %d partitions, want 1", n)
	}

	if _, err := adm.DeleteTopic(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	wantNoState := func(when string) {
		t.Helper()
		if n := broker.ShareStateTopicsForTest(tb.Broker)[oldID]; n != 0 {
			t.Fatalf("%s: the deleted topic still has share state for %d partitions", when, n)
		}
		if ids := broker.ShareGroupTopicsForTest(tb.Broker, "sg"); slices.Contains(ids, oldID) {
			t.Fatalf("%s: the share group still lists the deleted topic as initialized", when)
		}
	}
	wantNoState("after the delete")
	newID := [16]byte(create())
	if newID == oldID {
		t.Fatal("the re-created topic kept the old id")
	}
	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("q")), "q", 3)
	b := shareConsumer(t, tb.Addr, "sg", "q")
	if got := pollAccept(t, b, 3); !slices.Equal(got, []string{"v0", "v1", "v2"}) {
		t.Fatalf("after re-creating q the group got %v, want v0 v1 v2", got)
	}
	b.Close()

	tb.Restart()
	wantNoState("after a restart")
	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("q")), "q", 1)
	c := shareConsumer(t, tb.Addr, "sg", "q")
	if got := pollAccept(t, c, 1); got[0] != "v0" || len(got) != 1 {
		t.Fatalf("after the restart the group got %v, want only the new v0 at offset 3", got)
	}
	c.Close()
	offs, err := kadm.NewClient(newClient(t, tb.Addr)).DescribeShareGroupOffsets(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if so := offs["sg"].Offsets["q"][0]; so.Err != nil || so.StartOffset != 4 || so.Lag != 0 {
		t.Fatalf("share group offsets of the new q: %+v, want start 4 and lag 0", so)
	}
}

// A crash after the topic record was removed (the deletion's commit point) but before its
// share state was deleted leaves orphan state; the share stack's start removes it.
func TestOrphanShareStateRemovedAtStart(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	cl := newClient(t, tb.Addr)
	ctx := ctxT(t)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "q")
	if err != nil {
		t.Fatal(err)
	}
	consumeAllOfQ(t, tb, cl, 2)
	tb.Stop()
	// The crash: the topic's removal is in the metadata log, nothing else happened.
	n, err := node.Open(ctx, node.Config{NodeID: 1, DataDir: tb.DataDir}) // testbroker runs node 1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Propose(ctx, []wire.MetadataRecord{&wire.RemoveTopicRecord{TopicID: resp.ID}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	tb.Restart()
	if n := broker.ShareStateTopicsForTest(tb.Broker)[resp.ID]; n != 0 {
		t.Fatalf("orphan share state of the deleted topic survived the restart: %d partitions", n)
	}
	if ids := broker.ShareGroupTopicsForTest(tb.Broker, "sg"); slices.Contains(ids, [16]byte(resp.ID)) {
		t.Fatal("the share group still lists the deleted topic as initialized")
	}
}
