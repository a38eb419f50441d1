package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/upgrade"
	"github.com/exactq/exactq/internal/cluster/upgrade/fixture"
	"github.com/exactq/exactq/internal/testbroker"
	"github.com/exactq/exactq/wire"
)

// checkUpgraded checks, on the wire, that a broker on an upgraded directory serves what the
// old broker said: the cluster id, every topic with its id, partitions, configs and
// records, the group configs, the features, and producer ids above the one issued.
func checkUpgraded(t *testing.T, tb *testbroker.Broker, want fixture.Want) {
	t.Helper()
	ctx := ctxT(t)
	cl := newClient(t, tb.Addr)
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != want.ClusterID {
		t.Errorf("cluster id %s, the old broker's %s", md.Cluster, want.ClusterID)
	}
	if len(md.Topics) != len(want.Topics) {
		t.Errorf("topics %v, want %d", md.Topics.Names(), len(want.Topics))
	}
	for name, wt := range want.Topics {
		td, ok := md.Topics[name]
		if !ok || td.ID != wt.ID || len(td.Partitions) != wt.Partitions {
			t.Errorf("topic %s: %+v, want id %x with %d partitions", name, td, wt.ID, wt.Partitions)
			continue
		}
		rc, err := adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, c := range rc[0].Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				got[c.Key] = c.MaybeValue()
			}
		}
		if !reflect.DeepEqual(got, wt.Configs) {
			t.Errorf("topic %s configs %v, want %v", name, got, wt.Configs)
		}
		n := 0
		for _, vs := range wt.Records {
			n += len(vs)
		}
		for p, recs := range consumeAll(t, tb.Addr, name, n) {
			var vals []string
			for _, r := range recs {
				vals = append(vals, string(r.Value))
			}
			if !reflect.DeepEqual(vals, wt.Records[p]) {
				t.Errorf("%s-%d holds %v, want %v", name, p, vals, wt.Records[p])
			}
		}
		for p := range wt.Partitions {
			dir := filepath.Join(tb.DataDir, name+"-"+string(rune('0'+p)))
			b, err := os.ReadFile(filepath.Join(dir, upgrade.PartitionMetadataFile))
			if err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			if id, err := upgrade.ParsePartitionMetadata(b); err != nil || id != wt.ID {
				t.Errorf("%s: partition.metadata names %x (%v), want %x", dir, id, err, wt.ID)
			}
		}
	}
	for g, wc := range want.GroupConfigs {
		for k, v := range wc {
			if got := describeGroupConfig(t, cl, g, k); got != v {
				t.Errorf("group %s: %s=%s, want %s", g, k, got, v)
			}
		}
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	avr, err := av.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	features := map[string]int16{}
	for _, f := range avr.FinalizedFeatures {
		features[f.Name] = f.MaxVersionLevel
	}
	if !reflect.DeepEqual(features, want.Features) {
		t.Errorf("features %v, want %v", features, want.Features)
	}
	pid, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || pid.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %+v", err, pid)
	}
	if pid.ProducerID <= want.ProducerID || pid.ProducerID < 1000 {
		t.Errorf("producer id %d after the upgrade: the old broker issued %d and reserved up to 1000", pid.ProducerID, want.ProducerID)
	}
	if st, err := os.Stat(filepath.Join(tb.DataDir, upgrade.TopicsDir)); err != nil || !st.Mode().IsRegular() {
		t.Errorf("topics is not the marker file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tb.DataDir, upgrade.PreClusterDir, upgrade.TopicsDir)); err != nil {
		t.Errorf("the old topic records are not in pre-cluster/: %v", err)
	}
}

// A data directory of the last exactq that kept its metadata in JSON files is upgraded in
// place at start: the clients see the same cluster, topics, records and configs, and the
// upgraded directory restarts as itself.
func TestUpgradeInPlace(t *testing.T) {
	dir := t.TempDir()
	want := fixture.Extract(t, dir)
	tb := testbroker.Start(t, testbroker.WithDataDir(dir), testbroker.WithoutAutoCreate())
	checkUpgraded(t, tb, want)
	tb.Restart()
	checkUpgraded(t, tb, want)
}

// A crash during the upgrade is finished at the next start: one after the commit point
// (the log has the cluster) but before the old files moved, and one in the middle of the
// import (the log has some topics and no cluster yet).
func TestUpgradeAfterCrash(t *testing.T) {
	t.Run("after the commit point", func(t *testing.T) {
		dir := t.TempDir()
		want := fixture.Extract(t, dir)
		tb := testbroker.Start(t, testbroker.WithDataDir(dir), testbroker.WithoutAutoCreate())
		tb.Stop()
		// Undo the finishing steps: the old files back, no partition.metadata.
		if err := os.Remove(filepath.Join(dir, upgrade.TopicsDir)); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{upgrade.TopicsDir, upgrade.FeaturesFile, upgrade.ProducerIDsFile, upgrade.GroupConfigsFile} {
			if err := os.Rename(filepath.Join(dir, upgrade.PreClusterDir, name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		paths, _ := filepath.Glob(filepath.Join(dir, "*", upgrade.PartitionMetadataFile))
		for _, p := range paths {
			os.Remove(p)
		}
		tb.Restart()
		checkUpgraded(t, tb, want)
	})
	t.Run("in the middle of the import", func(t *testing.T) {
		dir := t.TempDir()
		want := fixture.Extract(t, dir)
		// The log holds one topic of the import, with its partitions, and no cluster.
		recs, err := upgrade.Import(dir, fixture.NodeID)
		if err != nil {
			t.Fatal(err)
		}
		var first []wire.MetadataRecord
		for _, r := range recs {
			switch r := r.(type) {
			case *wire.TopicRecord:
				if len(first) > 0 {
					goto propose
				}
				first = append(first, r)
			case *wire.PartitionRecord:
				if len(first) > 0 {
					first = append(first, r)
				}
			}
		}
	propose:
		n, err := node.Open(context.Background(), node.Config{NodeID: fixture.NodeID, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Propose(context.Background(), first); err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		tb := testbroker.Start(t, testbroker.WithDataDir(dir), testbroker.WithoutAutoCreate())
		checkUpgraded(t, tb, want)
	})
}
