package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"golang.org/x/sys/unix"

	"github.com/exactq/exactq/internal/testbroker"
)

// segmentBytesOnDisk is the size of a partition directory's .log files, what Kafka reports as
// a partition's size.
func segmentBytesOnDisk(t *testing.T, dir string) int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) < 2 {
		t.Fatalf("segments in %s: %v %v", dir, logs, err)
	}
	var n int64
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func TestDescribeLogDirs(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	adm := kadm.NewClient(cl)
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"internal.segment.bytes": kadm.StringPtr("2048")}, "sized"); err != nil {
		t.Fatal(err)
	}
	// One record a batch, so the 2 KiB segments roll and each partition has several.
	prod := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 200; i++ {
		r := &kgo.Record{Topic: "sized", Partition: int32(i % 2), Value: make([]byte, 100+i)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int32]int64{}
	for p := int32(0); p < 2; p++ {
		want[p] = segmentBytesOnDisk(t, filepath.Join(tb.DataDir, fmt.Sprintf("sized-%d", p)))
		if want[p] < 2048 {
			t.Fatalf("partition %d holds only %d bytes on disk", p, want[p])
		}
	}
	absDir, err := filepath.Abs(tb.DataDir)
	if err != nil {
		t.Fatal(err)
	}

	describe := func(version int16, topics []kmsg.DescribeLogDirsRequestTopic) kmsg.DescribeLogDirsResponseDir {
		t.Helper()
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Topics = topics
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(35, version)
		// To the broker itself: kgo's sharded RequestWith merges the dirs and drops their space.
		c := newClient(t, tb.Addr, kgo.MaxVersions(versions))
		resp, err := req.RequestWith(ctx, c.SeedBrokers()[0])
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if resp.ErrorCode != 0 || len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v", version, resp)
		}
		if resp.Version != version {
			t.Fatalf("answered v%d, asked v%d", resp.Version, version)
		}
		d := resp.Dirs[0]
		if d.Dir != absDir {
			t.Fatalf("v%d: log dir %q, want %q", version, d.Dir, absDir)
		}
		return d
	}
	sizes := func(d kmsg.DescribeLogDirsResponseDir, topic string) map[int32]int64 {
		out := map[int32]int64{}
		for _, dt := range d.Topics {
			if dt.Topic != topic {
				continue
			}
			for _, dp := range dt.Partitions {
				if dp.OffsetLag != 0 || dp.IsFuture {
					t.Fatalf("%s/%d: lag %d future %v", topic, dp.Partition, dp.OffsetLag, dp.IsFuture)
				}
				out[dp.Partition] = dp.Size
			}
		}
		return out
	}

	// Null topics: every partition held here, with its size on disk and the file system's space.
	all := describe(4, nil)
	if got := sizes(all, "sized"); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("sizes %v, want %v", got, want)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(tb.DataDir, &fs); err != nil {
		t.Fatal(err)
	}
	if total := int64(fs.Blocks) * fs.Frsize; all.TotalBytes != total {
		t.Fatalf("total bytes %d, statfs says %d", all.TotalBytes, total)
	}
	if all.UsableBytes <= 0 || all.UsableBytes > all.TotalBytes {
		t.Fatalf("usable bytes %d of %d", all.UsableBytes, all.TotalBytes)
	}

	// Named: a partition and a topic not held here are left out, as Kafka does.
	named := []kmsg.DescribeLogDirsRequestTopic{
		{Topic: "sized", Partitions: []int32{1, 7}},
		{Topic: "nowhere", Partitions: []int32{0}},
	}
	d := describe(1, named)
	if len(d.Topics) != 1 || d.Topics[0].Topic != "sized" {
		t.Fatalf("named topics answered: %+v", d.Topics)
	}
	if got := sizes(d, "sized"); len(got) != 1 || got[1] != want[1] {
		t.Fatalf("named sizes %v, want only partition 1 = %d", got, want[1])
	}
	if d.TotalBytes != -1 { // kmsg's default when the field is absent (v4+ only)
		t.Fatalf("v1 carries total bytes %d", d.TotalBytes)
	}
	if d := describe(4, []kmsg.DescribeLogDirsRequestTopic{}); len(d.Topics) != 0 {
		t.Fatalf("empty topic list answered %+v", d.Topics)
	}
}
