package sharepipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/client"
	"github.com/exactq/exactq/internal/testbroker"
)

func setGroupEarliest(t *testing.T, cl *kgo.Client, group string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	v := "earliest"
	c.Name, c.Op, c.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, &v
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, resp)
	}
}

// The example pipeline turns every input into exactly one committed output, even with an
// aborted round in the middle, and a consume-only run acknowledges everything.
func TestPipelineExactlyOnce(t *testing.T) {
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{
		"group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "200",
		"group.share.assignment.interval.ms": "0",
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte(fmt.Sprintf("record-%02d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	setGroupEarliest(t, cl, "workers")
	setGroupEarliest(t, cl, "auditors")

	run := func(group, output, txnID string, abortRound int) {
		t.Helper()
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		done := 0
		err := Run(rctx, Config{Brokers: []string{tb.Addr}, Group: group, Input: "in", Output: output, TransactionalID: txnID,
			AbortRound: abortRound,
			OnCommit: func(inputs []*client.Record) {
				if done += len(inputs); done >= n {
					stop()
				}
			}})
		if err != nil && rctx.Err() == nil {
			t.Fatalf("pipeline %s: %v", group, err)
		}
		if done != n {
			t.Fatalf("pipeline %s committed %d inputs, want %d", group, done, n)
		}
	}
	run("workers", "out", "worker-1", 1)
	run("auditors", "", "auditor-1", 0)

	reader, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"out": {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	seen := map[string]int{}
	for len(seen) < n && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for i := 0; i < n; i++ {
		if v := strings.ToUpper(fmt.Sprintf("record-%02d", i)); seen[v] != 1 {
			t.Fatalf("output %s appears %d times in committed output", v, seen[v])
		}
	}
	for _, g := range []string{"workers", "auditors"} {
		offs, err := adm.DescribeShareGroupOffsets(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		if so := offs[g].Offsets["in"][0]; so.StartOffset != n || so.Lag != 0 {
			t.Fatalf("group %s: share start offset %d lag %d, want %d and 0", g, so.StartOffset, so.Lag, n)
		}
	}
}
