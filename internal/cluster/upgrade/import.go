// Package upgrade turns a data directory from before the cluster (one node, its metadata
// in JSON files) into the bootstrap of the metadata log, and finishes the upgrade once the
// log holds it (docs/architecture.md, "One node: the same code path, and the in-place
// upgrade").
//
// The steps, in the order the caller runs them:
//
//  1. Import reads meta.json, topics/*.json, features.json, producer-ids.json and
//     group-configs.json and returns the records of the bootstrap image. It only reads.
//  2. The caller writes them as the log's first checkpoint (raftstore): the commit point.
//     A crash before it leaves the old directory, imported again at the next start.
//  3. WritePartitionMetadata tags every partition directory with its topic id.
//  4. MovePreCluster moves the old files into pre-cluster/ and leaves a plain file named
//     topics, so an older exactq fails to start instead of deleting every partition it has
//     no topic file for.
//
// Steps 3 and 4 are idempotent and crash-safe: after a crash anywhere in them they are run
// again from the log's image (Finish runs both).
package upgrade

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
)

// The files of a pre-cluster directory (internal/broker writes them).
const (
	MetaFile         = "meta.json"
	TopicsDir        = "topics"
	FeaturesFile     = "features.json"
	ProducerIDsFile  = "producer-ids.json"
	GroupConfigsFile = "group-configs.json"
	// PreClusterDir is where MovePreCluster keeps the old files.
	PreClusterDir = "pre-cluster"
)

// ErrUpgraded: Import was given a directory whose topics are already in pre-cluster/ (the
// log is the metadata now; there is nothing to import).
var ErrUpgraded = errors.New("upgrade: the data directory is already upgraded")

// The JSON forms internal/broker writes; their field names are the file format.
type (
	metaJSON struct {
		Version   int    `json:"version"`
		ClusterID string `json:"cluster_id"`
		NodeID    int32  `json:"node_id"`
	}
	topicJSON struct {
		Name       string            `json:"name"`
		ID         string            `json:"id"` // 32 hex digits
		Partitions int32             `json:"partitions"`
		Configs    map[string]string `json:"configs,omitempty"`
	}
	featuresJSON struct {
		Version int              `json:"version"`
		Epoch   int64            `json:"epoch"`
		Levels  map[string]int16 `json:"levels"`
	}
	producerIDsJSON struct {
		Reserved int64 `json:"reserved_up_to"`
	}
)

// Import reads the pre-cluster data directory dataDir of node nodeID and returns the
// bootstrap records that say what its files say, in the order metadata.Image.Records
// writes an image: the ClusterRecord (meta.json's cluster id; CreatedMillis the time
// meta.json was written, which is when the directory was formatted), the finalized
// features, each topic (by name) with its partitions (replicas and ISR [nodeID], leader
// nodeID, leader and partition epoch 0: the epoch exactq answered before the cluster) and
// TOPIC configs, the GROUP configs, and the
// producer-id bound. A file the broker would start without is read as the broker reads
// its absence: no topics, the initial features, no groups' configs, no producer id issued.
// The records are checked by applying them to metadata.Empty(); a directory whose files
// do not make an image (two topics with one id) is an error, as is one that belongs to
// another node.
func Import(dataDir string, nodeID int32) ([]wire.MetadataRecord, error) {
	meta, createdMs, err := readMeta(dataDir, nodeID)
	if err != nil {
		return nil, err
	}
	recs := []wire.MetadataRecord{versioned(&wire.ClusterRecord{ClusterID: meta.ClusterID, CreatedMillis: createdMs})}
	features, err := readFeatures(dataDir)
	if err != nil {
		return nil, err
	}
	recs = append(recs, features...)
	topics, err := readTopics(dataDir, nodeID)
	if err != nil {
		return nil, err
	}
	recs = append(recs, topics...)
	groups, err := readGroupConfigs(dataDir)
	if err != nil {
		return nil, err
	}
	recs = append(recs, groups...)
	pids, err := readProducerIDs(dataDir, nodeID)
	if err != nil {
		return nil, err
	}
	recs = append(recs, pids...)
	if _, _, err := metadata.Apply(metadata.Empty(), recs); err != nil {
		return nil, fmt.Errorf("upgrade: %s does not make a metadata image: %w", dataDir, err)
	}
	return recs, nil
}

func versioned(r wire.MetadataRecord) wire.MetadataRecord {
	r.SetVersion(r.MaxVersion())
	return r
}

// readJSON decodes path into v; found is false when there is no such file.
func readJSON(path string, v any) (found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("upgrade: corrupt %s: %w", path, err)
	}
	return true, nil
}

func readMeta(dataDir string, nodeID int32) (metaJSON, int64, error) {
	path := filepath.Join(dataDir, MetaFile)
	var m metaJSON
	found, err := readJSON(path, &m)
	switch {
	case err != nil:
		return m, 0, err
	case !found:
		// The caller formats a new directory (meta.json) before importing it.
		return m, 0, fmt.Errorf("upgrade: %s: %w", path, os.ErrNotExist)
	case m.NodeID != nodeID:
		return m, 0, fmt.Errorf("upgrade: data directory %s belongs to node %d, not %d", dataDir, m.NodeID, nodeID)
	case m.ClusterID == "":
		return m, 0, fmt.Errorf("upgrade: %s has no cluster id", path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return m, 0, err
	}
	return m, st.ModTime().UnixMilli(), nil
}

// readFeatures is the broker's openFeatures: no file is every feature at its initial
// level; a level exactq does not support is an error; a fixed feature is finalized at its
// level whatever the file says of it. features.json's epoch is not carried over: the log's
// FinalizedFeaturesEpoch is the offset of the image (KRaft's).
func readFeatures(dataDir string) ([]wire.MetadataRecord, error) {
	path := filepath.Join(dataDir, FeaturesFile)
	var j featuresJSON
	found, err := readJSON(path, &j)
	if err != nil {
		return nil, err
	}
	if !found {
		return admin.InitialFeatures(), nil
	}
	levels := map[string]int16{}
	for name, level := range j.Levels {
		if why := admin.CheckFeatureLevel(name, level); why != "" {
			return nil, fmt.Errorf("upgrade: %s: %s", path, why)
		}
		levels[name] = level
	}
	for _, s := range admin.SupportedFeatures {
		if s.Fixed {
			levels[s.Name] = s.Initial
		}
	}
	return admin.FeatureRecords(levels), nil
}

// readTopics is a TopicRecord, PartitionRecords and TOPIC ConfigRecords per topics/*.json,
// by topic name. Files ending in .tmp are the broker's interrupted atomic writes (its
// start-up removes them; Import only reads, so it skips them).
func readTopics(dataDir string, nodeID int32) ([]wire.MetadataRecord, error) {
	dir := filepath.Join(dataDir, TopicsDir)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil // the broker makes topics/ at its first start: nothing was created
	case err != nil:
		return nil, err
	case !st.IsDir():
		return nil, fmt.Errorf("%w: %s is a file", ErrUpgraded, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var topics []topicJSON
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		var t topicJSON
		if _, err := readJSON(path, &t); err != nil {
			return nil, err
		}
		if t.Partitions < 0 {
			return nil, fmt.Errorf("upgrade: %s: %d partitions", path, t.Partitions)
		}
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b topicJSON) int { return strings.Compare(a.Name, b.Name) })
	var out []wire.MetadataRecord
	for _, t := range topics {
		id, err := parseTopicID(t.ID)
		if err != nil {
			return nil, fmt.Errorf("upgrade: topic %s: %w", t.Name, err)
		}
		out = append(out, versioned(&wire.TopicRecord{Name: t.Name, TopicID: id}))
		replicas := make([][]int32, t.Partitions)
		for p := range replicas {
			replicas[p] = []int32{nodeID}
		}
		out = append(out, admin.PartitionRecords(id, 0, replicas)...)
		out = append(out, admin.ConfigRecords(metadata.ResourceTopic, t.Name, nil, t.Configs)...)
	}
	return out, nil
}

func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("bad topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// readGroupConfigs is GROUP ConfigRecords from group-configs.json (group id → overrides),
// by group id.
func readGroupConfigs(dataDir string) ([]wire.MetadataRecord, error) {
	var groups map[string]map[string]string
	if _, err := readJSON(filepath.Join(dataDir, GroupConfigsFile), &groups); err != nil {
		return nil, err
	}
	var out []wire.MetadataRecord
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, admin.ConfigRecords(metadata.ResourceGroup, g, nil, groups[g])...)
	}
	return out, nil
}

// readProducerIDs is the ProducerIdsRecord of producer-ids.json's bound: every id below it
// may have been handed out, none at or above it was, so the next block starts there. No
// file (or a bound of 0) is no record: no id was ever reserved. The record is this node's,
// with the unknown broker epoch -1 (nothing is registered yet).
func readProducerIDs(dataDir string, nodeID int32) ([]wire.MetadataRecord, error) {
	path := filepath.Join(dataDir, ProducerIDsFile)
	var j producerIDsJSON
	if _, err := readJSON(path, &j); err != nil {
		return nil, err
	}
	switch {
	case j.Reserved < 0:
		return nil, fmt.Errorf("upgrade: %s: bound %d", path, j.Reserved)
	case j.Reserved == 0:
		return nil, nil
	}
	r := wire.NewProducerIdsRecord()
	r.BrokerID, r.BrokerEpoch, r.NextProducerID = nodeID, -1, j.Reserved
	return []wire.MetadataRecord{versioned(&r)}, nil
}
