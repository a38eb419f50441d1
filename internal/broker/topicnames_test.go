package broker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactq/exactq/internal/broker"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

// dataDirEntries lists the data directory's entries whose names start with prefix.
func dataDirEntries(t *testing.T, dir, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Kafka allows topic names of up to 249 characters. Names of 247-249 characters used to
// fail with KAFKA_STORAGE_ERROR (the topic record's temporary file, "<name>.json.tmp",
// passed the 255-byte file name limit) and leave their partition directories behind. Each
// must now be created, produced to, fetched, survive a restart and be deleted without a
// trace.
func TestLongestTopicNames(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	var names []string
	for n := 247; n <= 249; n++ {
		names = append(names, strings.Repeat(string(rune('a'+n-247)), n))
	}
	for _, name := range names {
		resp, err := adm.CreateTopic(ctxT(t), 3, 1, nil, name)
		if err != nil || resp.Err != nil {
			t.Fatalf("create %d-character topic: %v %v", len(name), err, resp.Err)
		}
		for p := range int32(3) {
			if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: name, Partition: p, Value: []byte(name[:5])}).FirstErr(); err != nil {
				t.Fatalf("produce to %d-character topic: %v", len(name), err)
			}
		}
	}
	check := func() {
		for _, name := range names {
			got := consumeAll(t, tb.Addr, name, 3)
			if len(got) != 3 {
				t.Fatalf("%d-character topic: records from %d partitions, want 3", len(name), len(got))
			}
		}
	}
	check()
	tb.Restart()
	check()
	for _, name := range names {
		if _, err := adm.DeleteTopic(ctxT(t), name); err != nil {
			t.Fatalf("delete %d-character topic: %v", len(name), err)
		}
	}
	tb.Restart()
	if got := topicNames(t, cl); len(got) != 0 {
		t.Fatalf("topics left: %d", len(got))
	}
	for _, name := range names {
		if left := dataDirEntries(t, tb.DataDir, name[:10]); len(left) != 0 {
			t.Fatalf("left behind: %v", left)
		}
	}
}

// A creation that fails leaves no partition directory: when the topic's metadata entry
// cannot be written (the controller answers UNKNOWN_SERVER_ERROR, its answer for a failed
// write; before the fix the broker's partitions were closed but left on disk), and after a
// crash mid-create (directories without a record), which start-up cleans up. (A partition
// whose log cannot be created once its topic is committed is offline instead:
// TestOfflinePartition.)
func TestFailedTopicCreationLeavesNothing(t *testing.T) {
	tb := testbroker.Start(t)
	cl := newClient(t, tb.Addr)
	create := func(name string, partitions int32) error {
		t.Helper()
		resp, err := kadm.NewClient(cl).CreateTopic(ctxT(t), partitions, 1, nil, name)
		if err != nil && !errors.Is(err, resp.Err) {
			t.Fatal(err)
		}
		return resp.Err
	}
	// The topic's metadata entry (the commit point) cannot be written.
	long := strings.Repeat("r", 249)
	for _, name := range []string{"rec", long} {
		broker.FailMetadataProposalsForTest(tb.Broker, func(recs []wire.MetadataRecord) error {
			if tr, ok := recs[0].(*wire.TopicRecord); ok && tr.Name == name {
				return errors.New("injected: the metadata log refuses the write")
			}
			return nil
		})
		if err := create(name, 3); err != kerr.UnknownServerError {
			t.Fatalf("create %d-character topic with its entry refused: %v, want UNKNOWN_SERVER_ERROR", len(name), err)
		}
		if left := dataDirEntries(t, tb.DataDir, name+"-"); len(left) != 0 {
			t.Fatalf("failed creation left %v", left)
		}
		broker.FailMetadataProposalsForTest(tb.Broker, nil)
	}
	// A crash after the partitions were made but before the record: start-up removes them.
	for _, dir := range []string{long + "-0", long + "-1"} {
		if err := os.MkdirAll(filepath.Join(tb.DataDir, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tb.Restart()
	if left := dataDirEntries(t, tb.DataDir, long[:10]); len(left) != 0 {
		t.Fatalf("after a crash mid-create, start-up left %v", left)
	}
	if err := create(long, 2); err != nil {
		t.Fatalf("create after the failures: %v", err)
	}
	if err := create("rec", 3); err != nil {
		t.Fatalf("create after the failures: %v", err)
	}
}
