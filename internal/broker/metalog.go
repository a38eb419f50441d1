package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/upgrade"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/wire"
)

// The broker's durable metadata (topics and their ids, partitions, topic, group and broker
// configs, finalized features, the producer-id bound, the cluster id) lives in the metadata
// log, <data>/__cluster_metadata-0, applied to an image by internal/cluster/node. A
// zero-config broker is that log's only voter: every change is one entry, durable (one
// fsync) when it is applied. The controller decides every change (controllercall.go); the
// broker's registries are what the image says, kept in memory for the hot paths and
// changed by the publisher (publisher.go) after the entry that changes them is applied.

// metadataProposeTimeout bounds how long one metadata change may wait for its entry: a
// lone voter applies it after one fsync, so only a failing disk makes it wait.
const metadataProposeTimeout = 30 * time.Second

// propose appends records to the metadata log as one atomic entry and returns once it is
// applied, with the entry's index: a new log's bootstrap, before the controller runs.
func (b *Broker) propose(records ...wire.MetadataRecord) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), metadataProposeTimeout)
	defer cancel()
	idx, err := brokerQuorum{b}.Propose(ctx, records)
	if err != nil {
		return 0, fmt.Errorf("metadata log: %w", err)
	}
	return idx, nil
}

// brokerQuorum is the metadata log as this broker and its controller propose to it: the
// node, with the test-only fault of proposeFault in front.
type brokerQuorum struct{ b *Broker }

func (q brokerQuorum) Propose(ctx context.Context, records []wire.MetadataRecord) (uint64, error) {
	if h := q.b.proposeFault.Load(); h != nil {
		if err := (*h)(records); err != nil {
			return 0, err
		}
	}
	return q.b.meta.Propose(ctx, records)
}

func (q brokerQuorum) Image() (*metadata.Image, uint64) { return q.b.meta.Image() }
func (q brokerQuorum) Serving() (term uint64, ok bool)  { return q.b.meta.Serving() }

// image is the metadata image the broker last applied, and its index.
func (b *Broker) image() (*metadata.Image, uint64) { return b.meta.Image() }

// openMetadataLog opens the metadata log. A new log gets its first entry: the cluster (the
// data directory's id from meta.json) and the features at their initial levels. A data
// directory from before the metadata log (it has a topics/ directory of JSON records) is
// upgraded in place: its metadata is imported into the log (the commit point), then
// upgrade.Finish tags the partition directories with their topic ids and moves the old
// files into pre-cluster/, leaving a plain file named topics so that an older exactq
// refuses the directory instead of deleting every partition.
func (b *Broker) openMetadataLog() error {
	dataDir := b.cfg.DataDir
	legacy := false
	if fi, err := os.Stat(filepath.Join(dataDir, upgrade.TopicsDir)); err == nil && fi.IsDir() {
		legacy = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), metadataProposeTimeout)
	defer cancel()
	var opened atomic.Pointer[node.Node] // for the cluster's callbacks, which may run before Open returns
	cluster, err := b.clusterConfig(&opened)
	if err != nil {
		return err
	}
	n, err := node.Open(ctx, node.Config{NodeID: b.cfg.NodeID, DataDir: dataDir, Logger: b.logger, Cluster: cluster})
	if err != nil {
		return err
	}
	opened.Store(n)
	b.meta = n
	im, _ := n.Image()
	if im.Cluster.ID == "" && !b.multiVoter() {
		// A lone voter bootstraps its own log; a new cluster of several voters gets its
		// first records from its first controller (newDriver).
		recs := append([]wire.MetadataRecord{&wire.ClusterRecord{ClusterID: b.dir.ClusterID, CreatedMillis: b.now().UnixMilli()}},
			admin.InitialFeatures()...)
		if legacy {
			if recs, err = upgrade.Import(dataDir, b.cfg.NodeID); err != nil {
				return err
			}
			b.logger.Info("upgrading the data directory to the metadata log", "dir", dataDir, "records", len(recs))
		}
		for _, entry := range bootstrapEntries(im, recs) {
			if _, err := b.propose(entry...); err != nil {
				return fmt.Errorf("bootstrapping the metadata log: %w", err)
			}
		}
	}
	if legacy {
		im, _ := n.Image()
		if err := upgrade.Finish(dataDir, im, b.cfg.NodeID); err != nil {
			return fmt.Errorf("finishing the upgrade of %s: %w", dataDir, err)
		}
		b.logger.Info("data directory upgraded; the files it replaced are in pre-cluster/", "dir", dataDir)
		return nil
	}
	guard := filepath.Join(dataDir, upgrade.TopicsDir)
	if _, err := os.Stat(guard); errors.Is(err, os.ErrNotExist) {
		// Where exactq before the metadata log kept its topics/ directory: an older exactq
		// started here fails to create it, instead of finding no topics and deleting every
		// partition directory.
		return log.WriteFileDurable(dataDir, upgrade.TopicsDir, []byte("exactq keeps its topics in "+node.LogDir+"/\n"))
	}
	return nil
}

// clusterConfig is the node's cluster part: nil for the zero-config node (no voters).
// Its callbacks read the node through opened, set once node.Open returns.
func (b *Broker) clusterConfig(opened *atomic.Pointer[node.Node]) (*node.Cluster, error) {
	if len(b.cfg.Voters) == 0 {
		return nil, nil
	}
	dirID, err := b.dir.directoryID()
	if err != nil {
		return nil, err
	}
	imageOf := func() *metadata.Image {
		if n := opened.Load(); n != nil {
			im, _ := n.Image()
			return im
		}
		return nil
	}
	return &node.Cluster{
		Voters: b.cfg.Voters, Listener: b.cfg.ControllerListener, ListenAddr: b.cfg.ControllerListen,
		DirectoryID: dirID,
		DirectoryOf: func(id int32) ([16]byte, bool) {
			if im := imageOf(); im != nil {
				if br := im.Brokers[id]; br != nil && len(br.LogDirs) > 0 {
					return br.LogDirs[0], true
				}
			}
			return [16]byte{}, false
		},
		ClusterID: func() string {
			if im := imageOf(); im != nil {
				return im.Cluster.ID
			}
			return ""
		},
		Controller: b.driver.HandleAny,
	}, nil
}

// bootstrapEntryBytes is the size at which bootstrapEntries starts a new entry, well
// under metadata.MaxEntryBytes.
const bootstrapEntryBytes = 4 << 20

// bootstrapEntries splits a new cluster's records into entries that fit the log, each cut
// before a topic (a topic's records stay in one entry), with the ClusterRecord in the
// last: a log with a cluster id is bootstrapped, and one without is bootstrapped again
// after a crash. Records im already holds from such an earlier attempt are left out: its
// topics (by id) and a producer-id bound it has reached; feature levels and configs apply
// again unchanged.
func bootstrapEntries(im *metadata.Image, recs []wire.MetadataRecord) [][]wire.MetadataRecord {
	var cluster wire.MetadataRecord
	var entries [][]wire.MetadataRecord
	var cur []wire.MetadataRecord
	size := 0
	skipTopic := false
	for _, r := range recs {
		switch r := r.(type) {
		case *wire.ClusterRecord:
			cluster = r
			continue
		case *wire.TopicRecord:
			if skipTopic = im.TopicsByID[r.TopicID] != nil; skipTopic {
				continue
			}
			if size > bootstrapEntryBytes {
				entries, cur, size = append(entries, cur), nil, 0
			}
		case *wire.PartitionRecord:
			if skipTopic {
				continue
			}
		case *wire.ConfigRecord:
			if skipTopic && r.ResourceType == metadata.ResourceTopic {
				continue
			}
		case *wire.ProducerIdsRecord:
			if r.NextProducerID <= im.ProducerIDs.Next {
				continue
			}
		}
		cur = append(cur, r)
		size += len(wire.AppendMetadataRecord(nil, r))
	}
	return append(entries, append(cur, cluster))
}
