package node

import (
	"context"
	"errors"
	"io"
	stdlog "log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/await"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/quorum"
	"github.com/exactq/exactq/internal/testdisk"
	"github.com/exactq/exactq/wire"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

var quietRaft = &raft.DefaultLogger{Logger: stdlog.New(io.Discard, "", 0)}

func open(t *testing.T, dir string, tune func(*Config)) *Node {
	t.Helper()
	cfg := Config{NodeID: 0, DataDir: dir, RaftLogger: quietRaft}
	if tune != nil {
		tune(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func topic(name string, id byte, partitions int) []wire.MetadataRecord {
	recs := []wire.MetadataRecord{&wire.TopicRecord{Name: name, TopicID: [16]byte{id}}}
	for p := range partitions {
		recs = append(recs, &wire.PartitionRecord{PartitionID: int32(p), TopicID: [16]byte{id}, Replicas: []int32{0}, ISR: []int32{0}, Leader: 0})
	}
	return recs
}

// A lone voter serves as soon as Open returns, a proposal is in the image when Propose
// returns, and a restart from the files gives the same image and serves again.
func TestLoneVoterServesAndRestarts(t *testing.T) {
	dir := t.TempDir()
	n := open(t, dir, nil)
	if _, ok := n.Serving(); !ok {
		t.Fatal("a lone voter does not serve after Open")
	}
	ctx := context.Background()
	idx, err := n.Propose(ctx, append([]wire.MetadataRecord{&wire.ClusterRecord{ClusterID: "c1"}}, topic("a", 1, 3)...))
	if err != nil {
		t.Fatal(err)
	}
	im, at := n.Image()
	if at != idx || im.Topic("a") == nil || len(im.Topic("a").Partitions) != 3 || im.Cluster.ID != "c1" {
		t.Fatalf("after Propose at %d: image at %d, topic %+v", idx, at, im.Topic("a"))
	}
	reg := wire.NewRegisterBrokerRecord()
	reg.BrokerID, reg.BrokerEpoch = 0, -1
	regIdx, err := n.Propose(ctx, []wire.MetadataRecord{&reg})
	if err != nil {
		t.Fatal(err)
	}
	if im, _ := n.Image(); im.Brokers[0].Epoch != int64(regIdx) {
		t.Fatalf("broker epoch %d, want its registration's index %d", im.Brokers[0].Epoch, regIdx)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LogDir, "quorum-state")); err != nil {
		t.Fatalf("no quorum-state in the metadata log directory: %v", err)
	}

	n = open(t, dir, nil)
	defer n.Close()
	im, at = n.Image()
	if at < regIdx || im.Topic("a") == nil || im.Cluster.ID != "c1" || im.Brokers[0].Epoch != int64(regIdx) {
		t.Fatalf("after restart: index %d, image %+v", at, im)
	}
	// The new term's proposals land after the old log.
	idx2, err := n.Propose(ctx, topic("b", 2, 1))
	if err != nil || idx2 <= regIdx {
		t.Fatalf("proposal after restart: %d, %v", idx2, err)
	}
}

// A batch that does not apply to the image is refused before it reaches the log, and the
// node goes on serving.
func TestRefusedBatchNeverProposed(t *testing.T) {
	n := open(t, t.TempDir(), nil)
	defer n.Close()
	ctx := context.Background()
	if _, err := n.Propose(ctx, topic("a", 1, 1)); err != nil {
		t.Fatal(err)
	}
	_, before := n.Image()
	_, err := n.Propose(ctx, topic("a", 3, 1)) // the name is taken
	if !errors.Is(err, metadata.ErrRefused) {
		t.Fatalf("duplicate topic: %v, want ErrRefused", err)
	}
	if _, after := n.Image(); after != before {
		t.Fatalf("a refused batch moved the applied index %d -> %d", before, after)
	}
	if _, err := n.Propose(ctx, topic("b", 2, 1)); err != nil {
		t.Fatalf("after a refusal: %v", err)
	}
}

// Checkpoints are written at the cadence and a restart starts from one: the image is the
// same and the log before the checkpoint is not needed.
func TestRestartFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	small := func(c *Config) { c.SnapshotBytes = 512 }
	n := open(t, dir, small)
	ctx := context.Background()
	for i := range 40 {
		if _, err := n.Propose(ctx, topic(string(rune('a'+i%26))+string(rune('a'+i/26)), byte(i+1), 2)); err != nil {
			t.Fatal(err)
		}
	}
	want, at := n.Image()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	cps, _ := filepath.Glob(filepath.Join(dir, LogDir, "*.checkpoint"))
	if len(cps) == 0 {
		t.Fatal("no checkpoint written after 40 entries at a 512-byte cadence")
	}
	n = open(t, dir, small)
	defer n.Close()
	got, gotAt := n.Image()
	if gotAt < at || len(got.TopicsByName) != len(want.TopicsByName) {
		t.Fatalf("restart: %d topics at %d, want %d at %d", len(got.TopicsByName), gotAt, len(want.TopicsByName), at)
	}
	for name, id := range want.TopicsByName {
		if got.TopicsByName[name] != id || len(got.TopicsByID[id].Partitions) != 2 {
			t.Fatalf("topic %s lost or changed in the restart", name)
		}
	}
}

// Subscribers see each proposal's delta in order, and UpdateOf reads them typed.
func TestSubscribeDeltas(t *testing.T) {
	n := open(t, t.TempDir(), nil)
	defer n.Close()
	_, ch, cancel := n.Subscribe(64)
	defer cancel()
	ctx := context.Background()
	var idxs []uint64
	for i := range 3 {
		idx, err := n.Propose(ctx, topic(string(rune('x'+i)), byte(i+1), 1))
		if err != nil {
			t.Fatal(err)
		}
		idxs = append(idxs, idx)
	}
	var created []string
	for len(created) < 3 {
		select {
		case a := <-ch:
			u := UpdateOf(a)
			for _, d := range u.Deltas {
				for _, tc := range d.Topics() {
					if tc.Before == nil {
						created = append(created, tc.After.Name)
					}
				}
			}
			if u.Image == nil {
				t.Fatal("update without an image")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("deltas seen: %v", created)
		}
	}
	if created[0] != "x" || created[1] != "y" || created[2] != "z" {
		t.Fatalf("created in order %v", created)
	}
}

// A node of a several-voter log that is not the controller refuses proposals.
func TestNotControllerRefuses(t *testing.T) {
	n := open(t, t.TempDir(), func(c *Config) { c.Voters = []int32{0, 1, 2}; c.Send = func([]*pb.Message) {} })
	defer n.Close()
	if _, err := n.Propose(context.Background(), topic("a", 1, 1)); !errors.Is(err, quorum.ErrNotController) {
		t.Fatalf("a voter without a quorum: %v, want ErrNotController", err)
	}
}

// A lone voter restarted on a full disk cannot take its new term: Open still returns, with
// the image of its files, proposals fail meanwhile, and once space returns the node
// reopens its log by itself and serves again, the old entries intact.
func TestFullDiskThenSpaceReturns(t *testing.T) {
	disk := testdisk.Small(t, 8<<20)
	fast := func(c *Config) { c.RestartBackoff = 20 * time.Millisecond }
	n := open(t, disk, fast)
	ctx := context.Background()
	if _, err := n.Propose(ctx, append([]wire.MetadataRecord{&wire.ClusterRecord{ClusterID: "c"}}, topic("a", 1, 2)...)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	free := testdisk.Fill(t, disk, "filler", 0)
	n = open(t, disk, fast)
	defer n.Close()
	if im, _ := n.Image(); im.Topic("a") == nil || im.Cluster.ID != "c" {
		t.Fatalf("the image on a full disk lost what the files hold: %+v", im)
	}
	if _, err := n.Propose(ctx, topic("b", 2, 1)); err == nil {
		t.Fatal("a proposal succeeded on a full disk")
	}
	free()
	err := await.Until(10*time.Second, 10*time.Millisecond, func() error {
		_, err := n.Propose(ctx, topic("b", 2, 1))
		return err
	})
	if err != nil {
		t.Fatalf("after space returned: %v", err)
	}
	if im, _ := n.Image(); im.Topic("a") == nil || im.Topic("b") == nil {
		t.Fatal("topics missing after the log reopened")
	}
}
