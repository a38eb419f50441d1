package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/testbroker"
)

// fastShareConfig shortens share-group heartbeats and assignment pacing so tests do not
// wait out Kafka's 5 s heartbeat interval.
var fastShareConfig = map[string]string{
	"group.share.heartbeat.interval.ms":       "200",
	"group.share.min.heartbeat.interval.ms":   "200",
	"group.share.assignment.interval.ms":      "0",
	"group.share.min.record.lock.duration.ms": "1000",
}

func shareConsumer(t *testing.T, addr, group, topic string) *kgo.Client {
	return newClient(t, addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond), kgo.ShareMaxRecords(20))
}

// pollAccept polls a share consumer, ACCEPTs every record and returns the values, until
// want values arrived.
func pollAccept(t *testing.T, cl *kgo.Client, want int) []string {
	t.Helper()
	ctx := ctxT(t)
	var got []string
	for len(got) < want {
		fs := cl.PollRecords(ctx, want-len(got))
		if ctx.Err() != nil {
			t.Fatalf("share consumer got %d of %d records", len(got), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			r.Ack(kgo.AckAccept)
		})
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatalf("flush acks: %v", err)
	}
	return got
}

// Two franz-go share consumers drain a queue between them, every record exactly once, and
// acknowledged records are never delivered again after a broker restart.
func TestKgoShareGroupDrainsQueueAcrossRestart(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(fastShareConfig))
	cl := newClient(t, tb.Addr)
	ctx := ctxT(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	if code := alterGroupConfig(t, cl, "sg", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("set auto offset reset: %v", kerr.ErrorForCode(code))
	}

	produceN(t, newClient(t, tb.Addr, kgo.DefaultProduceTopic("q")), "q", 200)

	// a takes 120 records and leaves; closing releases what it fetched but never handed to
	// the application, so b gets exactly the rest without waiting for lock expiry.
	a := shareConsumer(t, tb.Addr, "sg", "q")
	seen := map[string]int{}
	t0 := time.Now()
	for _, v := range pollAccept(t, a, 120) {
		seen[v]++
	}
	a.Close()
	b := shareConsumer(t, tb.Addr, "sg", "q")
	for _, v := range pollAccept(t, b, 200-len(seen)) {
		seen[v]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %s delivered %d times", v, n)
		}
	}
	if len(seen) != 200 {
		t.Fatalf("%d distinct records, want 200", len(seen))
	}
	b.Close()
	t.Log("drained", time.Since(t0))

	// Housekeeping prunes superseded share state; what is left must still restore the group.
	tb.Broker.RunHousekeeping()
	tb.Restart()
	if err := newClient(t, tb.Addr).ProduceSync(ctx, &kgo.Record{Topic: "q", Value: []byte("after-restart")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := shareConsumer(t, tb.Addr, "sg", "q")
	got := pollAccept(t, c, 1)
	if got[0] != "after-restart" {
		t.Fatalf("after restart the share group received %q first; acknowledged records came back", got[0])
	}
	c.Close()

	adm := kadm.NewClient(newClient(t, tb.Addr))
	offs, err := adm.DescribeShareGroupOffsets(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	// Everything was acknowledged: the share-partition start offset is past all 201 records
	// and nothing is left to deliver.
	if so := offs["sg"].Offsets["q"][0]; so.Err != nil || so.StartOffset != 201 || so.Lag != 0 {
		t.Fatalf("share group offsets: %+v (group error %v), want start 201 and lag 0", so, offs["sg"].Err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["sg"]; !ok {
		t.Fatalf("ListGroups does not show the share group: %v", listed.Groups())
	}
	del, err := adm.DeleteGroups(ctx, "sg")
	if err != nil || del["sg"].Err != nil {
		t.Fatalf("delete share group: %v %v", err, del["sg"].Err)
	}
	if listed, _ = adm.ListGroups(ctx); len(listed) != 0 {
		t.Fatalf("groups after delete: %v", listed.Groups())
	}
}
