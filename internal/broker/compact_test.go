package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/testbroker"
)

// A compacted topic keeps the latest value per key, and a broker restarted without a
// producer-state snapshot rebuilds that state from the compacted log (offset gaps and all).
func TestCompactedTopicKeepsLatestPerKeyAcrossRestart(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := ctxT(t)
	cl := newClient(t, tb.Addr, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	cfg := map[string]*string{
		"cleanup.policy":         kadm.StringPtr("compact"),
		"internal.segment.bytes": kadm.StringPtr("2048"),
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, cfg, "kv"); err != nil {
		t.Fatal(err)
	}
	const keys, rounds = 10, 21
	// Each round is one batch. Even rounds rewrite only half the keys, so compaction keeps
	// part of older batches and leaves offset gaps inside them.
	want := map[string]string{}
	for r := 0; r < rounds; r++ {
		var recs []*kgo.Record
		for k := 0; k < keys; k++ {
			if r%2 == 0 && k >= keys/2 {
				continue
			}
			key, val := fmt.Sprint("k", k), fmt.Sprint("r", r)
			want[key] = val
			recs = append(recs, &kgo.Record{Topic: "kv", Key: []byte(key), Value: []byte(val)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Fillers (unique keys) push the last rounds out of the active segment, which
	// compaction never touches.
	for i := 0; i < 30; i++ {
		key := fmt.Sprint("filler", i)
		want[key] = "f"
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kv", Key: []byte(key), Value: []byte("f")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tb.Broker.RunHousekeeping()
	tb.Stop()
	if gaps := batchesWithGaps(t, filepath.Join(tb.DataDir, "kv-0")); gaps == 0 {
		t.Fatal("compaction left no batch with an offset gap; the test does not exercise the rebuild")
	}
	os.Remove(filepath.Join(tb.DataDir, "kv-0", "producer-state.snapshot"))
	tb.Restart()

	cons := newClient(t, tb.Addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kv": {0: kgo.NewOffset().AtStart()}}))
	latest := map[string]string{}
	count := 0
	for latest["filler29"] != "f" {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out; latest so far %v", latest)
		}
		fs.EachRecord(func(r *kgo.Record) {
			latest[string(r.Key)] = string(r.Value)
			count++
		})
	}
	for k, v := range want {
		if latest[k] != v {
			t.Errorf("key %s: latest %q, want %q", k, latest[k], v)
		}
	}
	if count >= keys*rounds {
		t.Errorf("read %d records: compaction removed nothing", count)
	}

	// The idempotent producer keeps working against the rebuilt state.
	if err := newClient(t, tb.Addr).ProduceSync(ctx, &kgo.Record{Topic: "kv", Key: []byte("k0"), Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after restart: %v", err)
	}
}

// batchesWithGaps counts stored batches whose records do not cover every offset.
func batchesWithGaps(t *testing.T, dir string) int {
	t.Helper()
	l, err := log.Open(dir, log.DefaultConfig(), log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	gaps := 0
	err = l.Scan(l.StartOffset(), func(raw []byte) error {
		var h kmsg.RecordBatch
		if err := h.ReadFrom(raw); err != nil {
			return err
		}
		if h.NumRecords-1 != h.LastOffsetDelta {
			gaps++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return gaps
}
