package crashtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	tornTopic      = "torn"
	tornPartitions = 2
	tornRecords    = 3000
	tornTrials     = 12
	tornAppend     = 60 // records appended after recovery in each trial
)

// TestTornTail writes acknowledged records, kills the broker, and then, in each trial on a
// fresh copy of that data directory, damages the last segment file of partition 0
// (truncates it at a random byte, at a batch boundary, appends garbage, flips a byte of a
// batch, or appends a header that claims a huge batch). After a restart every complete
// batch before the damage must be served unchanged, the high watermark must be the end of
// the last intact batch, partition 1 must be untouched, and new records must be appended
// at the offsets right after the intact batches, also across a further restart.
func TestTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(seed(t)), 1))
	pristine := t.TempDir()
	b := startBroker(t, pristine, "", "always")
	seg := "32768" // several segments per partition
	createTopic(t, b.Addr, tornTopic, tornPartitions, map[string]*string{"internal.segment.bytes": &seg})

	acked := produceChunks(t, b.Addr, rng)
	b.Kill()

	for trial := range tornTrials {
		dir := filepath.Join(t.TempDir(), "data")
		copyDir(t, pristine, dir)
		segPath, segBase := lastSegment(t, filepath.Join(dir, tornTopic+"-0"))
		what, next := damage(t, rng, trial%6, segPath, segBase)
		t.Logf("trial %2d: %s of %s; expect high watermark %d", trial, what, filepath.Base(segPath), next)

		b := startBroker(t, dir, "", "always")
		want := []map[int64]string{prefix(acked[0], next), acked[1]}
		checkExactly(t, trial, "after recovery", b.Addr, want)

		// Append after the intact batches: offsets continue right after them.
		cl := newSyncProducer(t, b.Addr)
		for i := range tornAppend {
			v := value(1000+trial, 0, int64(i))
			r := &kgo.Record{Topic: tornTopic, Partition: 0, Value: []byte(v)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, r).FirstErr()
			cancel()
			if err != nil {
				t.Fatalf("trial %d: produce after recovery: %v\n%s", trial, err, b.Logs())
			}
			if r.Offset != next+int64(i) {
				t.Fatalf("trial %d: appended record %d at offset %d, want %d", trial, i, r.Offset, next+int64(i))
			}
			want[0][r.Offset] = v
		}
		cl.Close()
		checkExactly(t, trial, "after appending", b.Addr, want)
		if code, took, err := b.Terminate(termTimeout); err != nil || code != 0 {
			t.Fatalf("trial %d: SIGTERM: exit %d after %v: %v", trial, code, took, err)
		}
		checkNoErrors(t, trial, b)
		b = startBroker(t, dir, "", "always")
		checkExactly(t, trial, "after a further restart", b.Addr, want)
		b.Kill()
		if t.Failed() {
			t.Fatalf("trial %d failed", trial)
		}
	}
}

func newSyncProducer(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // predictable segment sizes
	)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// produceChunks produces tornRecords acknowledged records in chunks of 1-40 (so batches
// of varied sizes) alternating between the partitions, and returns them by offset.
func produceChunks(t *testing.T, addr string, rng *rand.Rand) []map[int64]string {
	t.Helper()
	cl := newSyncProducer(t, addr)
	defer cl.Close()
	acked := []map[int64]string{{}, {}}
	for seq, chunk := 0, 0; seq < tornRecords; chunk++ {
		n := min(1+rng.IntN(40), tornRecords-seq)
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: tornTopic, Partition: int32(chunk % tornPartitions), Value: []byte(value(0, 0, int64(seq+i)))}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := cl.ProduceSync(ctx, rs...)
		cancel()
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range res {
			acked[r.Record.Partition][r.Record.Offset] = string(r.Record.Value)
		}
		seq += n
	}
	for p, m := range acked {
		if int64(len(m)) != maxOffset(m)+1 {
			t.Fatalf("partition %d: %d acked records but offsets up to %d", p, len(m), maxOffset(m))
		}
	}
	return acked
}

func maxOffset(m map[int64]string) int64 {
	last := int64(-1)
	for o := range m {
		last = max(last, o)
	}
	return last
}

func prefix(m map[int64]string, end int64) map[int64]string {
	out := map[int64]string{}
	for o, v := range m {
		if o < end {
			out[o] = v
		}
	}
	return out
}

// checkExactly reads the topic back and requires exactly want (offset -> value).
func checkExactly(t *testing.T, trial int, when, addr string, want []map[int64]string) {
	t.Helper()
	got, hwm := readAll(t, addr, tornTopic, tornPartitions)
	for p := range want {
		if hwm[p] != int64(len(want[p])) {
			t.Errorf("trial %d %s: partition %d high watermark %d, want %d", trial, when, p, hwm[p], len(want[p]))
		}
		bad := 0
		for o, v := range want[p] {
			if got[p][o] != v {
				if bad++; bad <= 3 {
					t.Errorf("trial %d %s: partition %d offset %d: got %.30q, want %.30q", trial, when, p, o, got[p][o], v)
				}
			}
		}
	}
}

// batchAt is one record batch in a segment file.
type batchAt struct {
	pos, size  int64 // byte range in the file
	base, last int64 // offsets
}

// scanBatches lists the complete batches of a segment file by their headers (base offset
// int64, batch length int32, ..., last offset delta int32 at byte 23).
func scanBatches(t *testing.T, path string) ([]batchAt, int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []batchAt
	pos := int64(0)
	for int64(len(data))-pos >= 27 {
		h := data[pos:]
		size := 12 + int64(int32(binary.BigEndian.Uint32(h[8:])))
		if size < 61 || pos+size > int64(len(data)) {
			t.Fatalf("%s: unexpected torn batch at %d in an undamaged file", path, pos)
		}
		base := int64(binary.BigEndian.Uint64(h))
		out = append(out, batchAt{pos: pos, size: size, base: base, last: base + int64(int32(binary.BigEndian.Uint32(h[23:])))})
		pos += size
	}
	if pos != int64(len(data)) {
		t.Fatalf("%s: %d trailing bytes in an undamaged file", path, int64(len(data))-pos)
	}
	return out, pos
}

// lastSegment returns the .log file with the highest base offset in a partition directory.
func lastSegment(t *testing.T, dir string) (string, int64) {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segment files in %s (%v)", dir, err)
	}
	sort.Strings(logs) // names are zero-padded base offsets
	if len(logs) < 2 {
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			fi, _ := e.Info()
			names = append(names, fmt.Sprintf("%s (%d bytes)", e.Name(), fi.Size()))
		}
		t.Fatalf("%s has %d segment, want several (is internal.segment.bytes honoured?): %v", dir, len(logs), names)
	}
	last := logs[len(logs)-1]
	base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(last), ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return last, base
}

// damage applies damage kind to the segment at path and returns a description and the
// offset after the last batch that is still complete and intact (the expected high
// watermark).
func damage(t *testing.T, rng *rand.Rand, kind int, path string, segBase int64) (string, int64) {
	t.Helper()
	batches, size := scanBatches(t, path)
	if len(batches) == 0 {
		t.Fatalf("%s is empty", path)
	}
	end := batches[len(batches)-1].last + 1
	// nextAfter is the expected end when everything from byte pos on is lost.
	nextAfter := func(pos int64) int64 {
		next := segBase
		for _, b := range batches {
			if b.pos+b.size <= pos {
				next = b.last + 1
			}
		}
		return next
	}
	garbage := func(n int) []byte {
		g := make([]byte, n)
		for i := range g {
			g[i] = byte(rng.IntN(256))
		}
		return g
	}
	switch kind {
	case 0:
		pos := rng.Int64N(size)
		truncate(t, path, pos)
		return fmt.Sprintf("truncate at byte %d/%d", pos, size), nextAfter(pos)
	case 1:
		b := batches[rng.IntN(len(batches))]
		truncate(t, path, b.pos)
		return fmt.Sprintf("truncate at batch boundary %d/%d", b.pos, size), nextAfter(b.pos)
	case 2:
		n := 1 + rng.IntN(512)
		appendBytes(t, path, garbage(n))
		return fmt.Sprintf("append %d garbage bytes", n), end
	case 3:
		pos := rng.Int64N(size)
		n := 1 + rng.IntN(512)
		truncate(t, path, pos)
		appendBytes(t, path, garbage(n))
		return fmt.Sprintf("truncate at byte %d/%d and append %d garbage bytes", pos, size, n), nextAfter(pos)
	case 4:
		// Flip a byte that the batch CRC or the offset check covers: everything except the
		// partition leader epoch (bytes 12-15), which Kafka's CRC leaves out.
		b := batches[rng.IntN(len(batches))]
		rel := rng.Int64N(b.size - 4)
		if rel >= 12 {
			rel += 4
		}
		flipByte(t, path, b.pos+rel)
		return fmt.Sprintf("flip byte %d of the batch at %d (offsets %d-%d)", rel, b.pos, b.base, b.last), nextAfter(b.pos)
	default:
		// A header that claims a batch far longer than the file: a torn write of a large batch.
		h := make([]byte, 61)
		binary.BigEndian.PutUint64(h, uint64(end))
		binary.BigEndian.PutUint32(h[8:], 1<<20)
		h[16] = 2 // magic
		appendBytes(t, path, h)
		return "append the header of a 1 MiB batch", end
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the regular files and directories under src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}
