package log

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/testclock"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyed is a decoded record with its offset.
type keyed struct {
	offset     int64
	key, value string
	tombstone  bool
}

func records(t *testing.T, l *Log) []keyed {
	t.Helper()
	var out []keyed
	for _, b := range scanAll(t, l) {
		h, recs, err := decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.Attributes&batch.AttrControl != 0 {
			continue
		}
		for _, r := range recs {
			out = append(out, keyed{offset: h.FirstOffset + int64(r.OffsetDelta), key: string(r.Key), value: string(r.Value), tombstone: r.Value == nil})
		}
	}
	return out
}

// compacted is what compaction leaves of all (in offset order) when the active segment
// starts at activeBase: in the closed segments, the latest record per key among them; the
// active segment untouched.
func compacted(all []keyed, activeBase int64) []keyed {
	latest := map[string]int64{}
	for _, r := range all {
		if r.offset < activeBase {
			latest[r.key] = r.offset
		}
	}
	var want []keyed
	for _, r := range all {
		if r.offset >= activeBase || latest[r.key] == r.offset {
			want = append(want, r)
		}
	}
	return want
}

func compactConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 100
	cfg.Delete, cfg.Compact = false, true
	return cfg
}

func kv(key, value string, ts int64) rec {
	r := rec{key: []byte(key), ts: ts}
	if value != "" {
		r.value = []byte(value)
	}
	return r
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	clk := testclock.New()
	dir := t.TempDir()
	l := openT(t, dir, compactConfig(), clk)
	// 60 updates to 5 keys, 3 per batch, over many segments, one batch gzip-compressed.
	var all []keyed
	for i := 0; i < 20; i++ {
		var recs []rec
		for j := 0; j < 3; j++ {
			n := i*3 + j
			recs = append(recs, kv(fmt.Sprintf("key%d", n%5), fmt.Sprintf("value-%02d", n), clk.Ms()))
		}
		b := makeBatch(recs, plain)
		if i == 7 {
			krs := make([]kmsg.Record, len(recs))
			for j, r := range recs {
				krs[j] = kmsg.Record{Key: r.key, Value: r.value}
			}
			var err error
			if b, err = batch.Encode(nil, batch.NoProducer(0, clk.Ms()), krs, batch.CodecGzip); err != nil {
				t.Fatal(err)
			}
		}
		first, _ := appendT(t, l, b)
		for j, r := range recs {
			all = append(all, keyed{offset: first + int64(j), key: string(r.key), value: string(r.value)})
		}
	}
	if err := l.Sync(); err != nil { // writes the closed segments' indexes
		t.Fatal(err)
	}
	l.mu.RLock()
	activeBase := l.segs[len(l.segs)-1].base
	l.mu.RUnlock()
	sizeBefore, endBefore := l.Size(), l.EndOffset()
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		got := records(t, l)
		want := compacted(all, activeBase)
		if len(got) != len(want) {
			t.Fatalf("%s: %d records after compaction, want %d: %v", what, len(got), len(want), got)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: record %d = %+v, want %+v", what, i, got[i], want[i])
			}
		}
		if l.EndOffset() != endBefore || l.StartOffset() != 0 {
			t.Fatalf("%s: start/end moved: %d/%d", what, l.StartOffset(), l.EndOffset())
		}
		// Reads at every offset still find the batch at or after it.
		for off := int64(0); off < endBefore; off++ {
			b, err := l.Read(off, 1, math.MaxInt64)
			if err != nil || len(b) == 0 || lastOffset(b) < off {
				t.Fatalf("%s: Read(%d) after compaction: %v", what, off, err)
			}
		}
	}
	check("compacted")
	if l.Size() >= sizeBefore {
		t.Fatalf("compaction did not shrink the log: %d -> %d", sizeBefore, l.Size())
	}
	// Compacting again changes nothing; new data appends at the same end.
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	check("compacted twice")
	l.Close()
	for _, e := range mustReadDir(t, dir) {
		if len(e) > 8 && e[len(e)-8:] == ".cleaned" {
			t.Fatalf("leftover %s", e)
		}
	}
	l = openT(t, dir, compactConfig(), clk)
	defer l.Close()
	check("reopened")
	checkTimestamps(t, l, "compacted")
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestCompactTombstonesAndLag(t *testing.T) {
	clk := testclock.New()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 10_000
	cfg.MinCompactionLagMs = 5_000
	l := openT(t, t.TempDir(), cfg, clk)
	defer l.Close()
	appendT(t, l, makeBatch([]rec{kv("a", "1", clk.Ms()), kv("b", "1", clk.Ms())}, plain))
	appendT(t, l, makeBatch([]rec{kv("a", "", clk.Ms())}, plain)) // tombstone for a
	for i := 0; i < 8; i++ {                                      // roll a few segments
		appendT(t, l, makeBatch([]rec{kv("c", fmt.Sprintf("%0100d", i), clk.Ms())}, plain))
	}
	l.Sync()
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(records(t, l)); n != 11 {
		t.Fatalf("compacted within min.compaction.lag.ms: %d records", n)
	}
	clk.Advance(6 * time.Second)
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	got := records(t, l)
	if got[0].key != "b" || got[1].key != "a" || !got[1].tombstone || got[1].offset != 2 {
		t.Fatalf("after compaction: %+v (want b, then a's tombstone at 2)", got[:2])
	}
	clk.Advance(5 * time.Second) // tombstone older than delete.retention.ms
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	got = records(t, l)
	if got[0].key != "b" || got[1].key != "c" {
		t.Fatalf("tombstone kept after delete.retention.ms: %+v", got[:2])
	}
}

// forceRoll makes the next append start a new segment.
func forceRoll(t *testing.T, l *Log, clk *testclock.Clock, b []byte) {
	t.Helper()
	cfg := l.config()
	short := cfg
	short.SegmentMs = 1
	l.SetConfig(short)
	clk.Advance(2 * time.Millisecond)
	n := l.NumSegments()
	appendT(t, l, b)
	l.SetConfig(cfg)
	if l.NumSegments() != n+1 {
		t.Fatalf("forceRoll did not roll")
	}
}

func TestCompactTransactions(t *testing.T) {
	clk := testclock.New()
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	l := openT(t, t.TempDir(), cfg, clk)
	defer l.Close()
	txn := func(pid int64, recs ...rec) []byte {
		return makeBatch(recs, batchOpts{attrs: batch.AttrTransactional, producerID: pid, producerEpoch: 0, firstSeq: 0})
	}
	ts := clk.Ms()
	appendT(t, l, makeBatch([]rec{kv("k", "plain-k", ts), kv("x", "plain-x", ts)}, plain)) // 0,1
	appendT(t, l, txn(7, kv("k", "aborted-1", ts)))                                        // 2
	appendT(t, l, txn(7, kv("k", "aborted-2", ts)))                                        // 3: pid 7's last batch
	appendT(t, l, batch.ControlBatch(7, 0, false, 0, ts))                                  // 4: abort
	appendT(t, l, txn(8, kv("x", "committed-x", ts)))                                      // 5
	appendT(t, l, txn(8, kv("y", "committed-y", ts)))                                      // 6: pid 8's last batch
	appendT(t, l, batch.ControlBatch(8, 0, true, 0, ts))                                   // 7: commit
	forceRoll(t, l, clk, txn(9, kv("k", "open", ts)))                                      // 8: no marker yet
	appendT(t, l, makeBatch([]rec{kv("k", "later", ts)}, plain))                           // 9
	forceRoll(t, l, clk, makeBatch([]rec{kv("z", "active", ts)}, plain))                   // 10
	l.Sync()
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range records(t, l) {
		got = append(got, fmt.Sprintf("%d:%s", r.offset, r.value))
	}
	// k@0 stays: the open transaction at 8 stops cleaning there, and the aborted k@2, k@3
	// do not count. x@1 is shadowed by the committed x@5. The aborted batch 2 goes; 3 is
	// kept whole as pid 7's last batch (producer state). Markers stay.
	want := []string{"0:plain-k", "3:aborted-2", "5:committed-x", "6:committed-y", "8:open", "9:later", "10:active"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after compaction %v, want %v", got, want)
	}
	markers := 0
	for _, b := range scanAll(t, l) {
		if attributes(b)&batch.AttrControl != 0 {
			markers++
		}
	}
	if markers != 2 {
		t.Fatalf("%d markers after compaction, want 2", markers)
	}
}

// TestCompactCrashStages rebuilds the directory as a crash would leave it at each step
// of the .cleaned swap and checks that Open yields the old or the new contents, whole.
func TestCompactCrashStages(t *testing.T) {
	clk := testclock.New()
	dir := memTempDir(t)
	cfg := compactConfig()
	l := openT(t, dir, cfg, clk)
	for i := 0; i < 30; i++ {
		appendT(t, l, makeBatch([]rec{kv(fmt.Sprintf("key%d", i%3), fmt.Sprintf("v%03d", i), clk.Ms())}, plain))
	}
	l.Close()
	old := snapshotDir(t, dir)
	l = openT(t, dir, cfg, clk)
	oldRecs := records(t, l)
	if err := l.Compact(tinyKeyMap(t)); err != nil {
		t.Fatal(err)
	}
	newRecs := records(t, l)
	l.Close()
	cleaned := snapshotDir(t, dir)
	if len(newRecs) >= len(oldRecs) {
		t.Fatalf("compaction removed nothing")
	}
	x := fmt.Sprintf("%020d", 0) // the first segment; it is rewritten, not dropped
	stages := []struct {
		name  string
		files map[string][]byte
		want  []keyed
	}{
		{"cleaned files written", merge(old, map[string][]byte{
			x + ".log.cleaned": cleaned[x+".log"], x + ".index.cleaned": cleaned[x+".index"],
			x + ".timeindex.cleaned": cleaned[x+".timeindex"]}, nil), oldRecs},
		{"old indexes removed", merge(old, map[string][]byte{
			x + ".log.cleaned": cleaned[x+".log"], x + ".index.cleaned": cleaned[x+".index"]},
			[]string{x + ".index", x + ".timeindex"}), oldRecs},
		{"log renamed", merge(old, map[string][]byte{
			x + ".log": cleaned[x+".log"], x + ".index.cleaned": cleaned[x+".index"]},
			[]string{x + ".index", x + ".timeindex"}), nil},
		{"half a temp index", merge(old, map[string][]byte{
			x + ".log": cleaned[x+".log"], x + ".index.cleaned.tmp": cleaned[x+".index"][:3]},
			[]string{x + ".index", x + ".timeindex"}), nil},
	}
	for _, st := range stages {
		d := memTempDir(t)
		restoreDir(t, d, st.files)
		l := openT(t, d, cfg, clk)
		got := records(t, l)
		want := st.want
		if want == nil { // the new segment 0, the old rest
			want = nil
			for _, r := range newRecs {
				if r.offset < l.segs[1].base {
					want = append(want, r)
				}
			}
			for _, r := range oldRecs {
				if r.offset >= l.segs[1].base {
					want = append(want, r)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: recovered %v\nwant %v", st.name, got, want)
		}
		l.Close()
		for _, name := range mustReadDir(t, d) {
			if strings.HasSuffix(name, ".cleaned") || strings.HasSuffix(name, ".tmp") {
				t.Fatalf("%s: leftover %s", st.name, name)
			}
		}
	}
}

// merge returns base with add added and drop removed.
func merge(base, add map[string][]byte, drop []string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	for _, k := range drop {
		delete(out, k)
	}
	return out
}
