package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/broker"
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

// TestCompactionKeyMapBounded (#11): log.cleaner.dedupe.buffer.size bounds compaction's key
// map. At its smallest (just over 1 MiB: 39321 keys a pass), a topic of 50000 unique keys,
// each written twice, compacts in several passes to the second value of every key, and the
// map never holds more than the setting.
func TestCompactionKeyMapBounded(t *testing.T) {
	const bound = 1<<20 + 1
	tb := testbroker.Start(t, testbroker.WithConfig(map[string]string{"log.cleaner.dedupe.buffer.size": fmt.Sprint(bound)}))
	ctx := ctxT(t)
	cl := newClient(t, tb.Addr, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20))
	cfg := map[string]*string{
		"cleanup.policy":         kadm.StringPtr("compact"),
		"internal.segment.bytes": kadm.StringPtr(fmt.Sprint(256 << 10)),
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, cfg, "many"); err != nil {
		t.Fatal(err)
	}
	const keys, perBatch = 50000, 2500
	for round := range 2 {
		for k := 0; k < keys; k += perBatch {
			recs := make([]*kgo.Record, 0, perBatch)
			for j := k; j < k+perBatch; j++ {
				recs = append(recs, &kgo.Record{Topic: "many", Key: fmt.Appendf(nil, "k%05d", j), Value: fmt.Appendf(nil, "r%d", round)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Large fillers push every keyed batch out of the active segment (never compacted).
	for i := range 3 {
		filler := &kgo.Record{Topic: "many", Key: fmt.Appendf(nil, "filler%d", i), Value: make([]byte, 200<<10)}
		if err := cl.ProduceSync(ctx, filler).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tb.Broker.RunHousekeeping()
	km := broker.CleanerKeysForTest(tb.Broker)
	if km.MaxBytes() > bound || km.TableBytes() > km.MaxBytes() {
		t.Fatalf("key map: bound %d, holds %d bytes; log.cleaner.dedupe.buffer.size is %d", km.MaxBytes(), km.TableBytes(), bound)
	}
	if km.Passes() < 2 {
		t.Fatalf("%d keys compacted in %d pass(es) with room for %d", 2*keys, km.Passes(), km.MaxBytes()/24*9/10)
	}

	cons := newClient(t, tb.Addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"many": {0: kgo.NewOffset().AtStart()}}))
	seen := map[string]string{}
	keyed := 0
	for seen["filler2"] == "" {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out after %d records", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Key[0] == 'k' {
				keyed++
				seen[string(r.Key)] = string(r.Value)
			} else {
				seen[string(r.Key)] = "filler"
			}
		})
	}
	if keyed != keys {
		t.Fatalf("%d keyed records after compaction, want %d (one per key)", keyed, keys)
	}
	for k := range keys {
		if v := seen[fmt.Sprintf("k%05d", k)]; v != "r1" {
			t.Fatalf("key k%05d: %q after compaction, want r1", k, v)
		}
	}
	t.Logf("%d passes, key map %d bytes", km.Passes(), km.TableBytes())
}

// TestDedupeBufferSizeAtLeastKafkasMinimum: as in Kafka, 1 MiB or less is refused.
func TestDedupeBufferSizeAtLeastKafkasMinimum(t *testing.T) {
	_, err := broker.Open(broker.Config{DataDir: t.TempDir(), BrokerConfigs: map[string]string{"log.cleaner.dedupe.buffer.size": "1048576"}})
	if err == nil || !strings.Contains(err.Error(), "log.cleaner.dedupe.buffer.size") {
		t.Fatalf("log.cleaner.dedupe.buffer.size=1048576: %v, want it refused", err)
	}
	b, err := broker.Open(broker.Config{DataDir: t.TempDir(), BrokerConfigs: map[string]string{"log.cleaner.dedupe.buffer.size": "1048577"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}
