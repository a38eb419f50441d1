package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
)

// A topic deleted while the broker shuts down: close and delete are serialized per
// partition, so Close neither fails writing a producer-state snapshot into a removed
// directory ("producer-state.snapshot.tmp: no such file or directory") nor panics closing
// a partition twice; after a restart the topic is gone with no directory left. Before the
// fix this failed one of those ways.
func TestDeleteTopicRacingShutdown(t *testing.T) {
	for round := range 3 {
		tb := testbroker.Start(t)
		cl := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 64, 1, nil, "doomed"); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := range int32(64) {
			recs = append(recs, &kgo.Record{Topic: "doomed", Partition: p, Value: []byte("v")})
		}
		if err := cl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tb.Server.Shutdown(ctx)
		cancel()
		deleted := make(chan error, 1)
		go func() { deleted <- broker.DeleteTopicForTest(tb.Broker, "doomed") }()
		if err := tb.Broker.Close(); err != nil {
			t.Fatalf("round %d: close racing delete: %v", round, err)
		}
		if err := <-deleted; err != nil {
			t.Fatalf("round %d: delete racing close: %v", round, err)
		}
		tb.Restart()
		if names := topicNames(t, newClient(t, tb.Addr)); len(names) != 0 {
			t.Fatalf("round %d: topics after restart: %v", round, names)
		}
		entries, err := os.ReadDir(tb.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "doomed") {
				t.Fatalf("round %d: %s left behind", round, filepath.Join(tb.DataDir, e.Name()))
			}
		}
		tb.Stop()
	}
}
