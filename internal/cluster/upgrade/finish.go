package upgrade

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/log"
)

// PartitionMetadataFile is the file in a partition directory that names its topic id
// (Kafka's PartitionMetadataFile): partition directories are matched to the image by it.
const PartitionMetadataFile = "partition.metadata"

// PartitionMetadata is the content of a partition.metadata file for topic id: Kafka's
// version 0 format, the id as Kafka's Uuid.toString prints it (URL-safe base64, no
// padding).
func PartitionMetadata(id metadata.TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n")
}

// ParsePartitionMetadata reads a partition.metadata file's content as Kafka's reader does:
// "version: 0" then "topic_id: <id>", each "key: value" line split at ':' and whitespace.
func ParsePartitionMetadata(b []byte) (metadata.TopicID, error) {
	var id metadata.TopicID
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 2 {
		return id, fmt.Errorf("partition.metadata: %d lines, want 2", len(lines))
	}
	value := func(line []byte, key string) ([]byte, error) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(k) != key {
			return nil, fmt.Errorf("partition.metadata: line %q, want %s", line, key)
		}
		return bytes.TrimSpace(v), nil
	}
	v, err := value(lines[0], "version")
	if err != nil {
		return id, err
	}
	if string(v) != "0" {
		return id, fmt.Errorf("partition.metadata: version %s, this broker reads 0", v)
	}
	v, err = value(lines[1], "topic_id")
	if err != nil {
		return id, err
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(v))
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("partition.metadata: topic id %q", v)
	}
	copy(id[:], raw)
	return id, nil
}

// ErrInconsistentTopicID: a partition directory's partition.metadata names another topic
// id than the image gives its topic (Kafka's InconsistentTopicIdException). Nothing
// overwrites it: the directory holds some other topic's data.
var ErrInconsistentTopicID = errors.New("upgrade: partition directory names another topic id")

// WritePartitionID makes dir's partition.metadata say id: nothing is written if it already
// does; otherwise it is written durably (log.WriteFileDurable: temporary file, fsync,
// rename, directory fsync), so a crash leaves no file or the whole one, and running it
// again finishes the job. (A torn partition.metadata.tmp is truncated by the next write,
// or removed by the log's Open.) A file naming another id is ErrInconsistentTopicID.
func WritePartitionID(dir string, id metadata.TopicID) error {
	path := filepath.Join(dir, PartitionMetadataFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		have, perr := ParsePartitionMetadata(b)
		if perr != nil {
			return fmt.Errorf("upgrade: %s: %w", path, perr)
		}
		if have != id {
			return fmt.Errorf("%w: %s says %x, the image %x", ErrInconsistentTopicID, path, have, id)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return log.WriteFileDurable(dir, PartitionMetadataFile, PartitionMetadata(id))
}

// partitionWorkers bounds the partition.metadata writes in flight: each costs two fsyncs,
// and a directory of thousands of partitions would otherwise write them one at a time.
const partitionWorkers = 8

// WritePartitionMetadata is upgrade step 3: every partition of im that has nodeID among
// its replicas and a directory under dataDir (<topic>-<partition>) gets its
// partition.metadata. A partition without a directory is left to whatever creates its log
// (it writes the file then). Idempotent; the first error is returned once every started
// write has ended.
func WritePartitionMetadata(dataDir string, im *metadata.Image, nodeID int32) error {
	type job struct {
		dir string
		id  metadata.TopicID
	}
	var jobs []job
	for _, t := range im.TopicsByID {
		for i, p := range t.Partitions {
			if !isReplica(p, nodeID) {
				continue
			}
			dir := filepath.Join(dataDir, t.Name+"-"+strconv.Itoa(i))
			switch st, err := os.Stat(dir); {
			case errors.Is(err, os.ErrNotExist):
				continue
			case err != nil:
				return err
			case !st.IsDir():
				return fmt.Errorf("upgrade: partition directory %s is a file", dir)
			}
			jobs = append(jobs, job{dir, t.ID})
		}
	}
	var (
		wg    sync.WaitGroup
		next  = make(chan job)
		mu    sync.Mutex
		first error
	)
	for range min(partitionWorkers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				if err := WritePartitionID(j.dir, j.id); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return first
}

func isReplica(p *metadata.Partition, nodeID int32) bool {
	for _, r := range p.Replicas {
		if r == nodeID {
			return true
		}
	}
	return false
}

// topicsMarker is what the plain file named topics says to whoever looks.
const topicsMarker = "This data directory was upgraded to exactq's cluster metadata log (__cluster_metadata-0/).\n" +
	"The files it replaced are in pre-cluster/. This file stops an older exactq from starting\n" +
	"on the directory: it would find no topics and delete every partition. Downgrade is not supported.\n"

// preClusterFiles are the metadata files moved into pre-cluster/, topics/ last.
var preClusterFiles = []string{FeaturesFile, ProducerIDsFile, GroupConfigsFile, TopicsDir}

// MovePreCluster is upgrade step 4: features.json, producer-ids.json, group-configs.json
// and topics/ move into pre-cluster/ (those that exist), then a plain file named topics
// takes topics/'s place. Every step checks what is already done, and each rename is made
// durable (both directories fsynced) before the marker is written, so a crash at any point
// leaves a state that running it again finishes. An older exactq fails at the marker
// (MkdirAll on a file) instead of starting with no topic files.
func MovePreCluster(dataDir string) error {
	pre := filepath.Join(dataDir, PreClusterDir)
	if err := os.MkdirAll(pre, 0o755); err != nil {
		return err
	}
	for _, name := range preClusterFiles {
		src := filepath.Join(dataDir, name)
		st, err := os.Lstat(src)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return err
		case name == TopicsDir && !st.IsDir():
			continue // the marker: topics/ was moved before
		}
		if err := os.Rename(src, filepath.Join(pre, name)); err != nil {
			return fmt.Errorf("upgrade: move %s into %s: %w", name, PreClusterDir, err)
		}
	}
	// The moves are durable before the marker exists: a marker without them would leave
	// topics/ beside it after a crash.
	if err := log.SyncDir(pre); err != nil {
		return err
	}
	if err := log.SyncDir(dataDir); err != nil {
		return err
	}
	marker := filepath.Join(dataDir, TopicsDir)
	switch st, err := os.Lstat(marker); {
	case err == nil && st.Mode().IsRegular():
		return nil
	case err == nil:
		return fmt.Errorf("upgrade: %s is neither the topics directory nor the marker file", marker)
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return log.WriteFileDurable(dataDir, TopicsDir, []byte(topicsMarker))
}

// Finish runs the upgrade steps after the commit point, WritePartitionMetadata then
// MovePreCluster, both idempotent: the caller runs it at every start of an upgraded
// directory until it has succeeded once (and may run it at every start: it then only
// reads).
func Finish(dataDir string, im *metadata.Image, nodeID int32) error {
	if err := WritePartitionMetadata(dataDir, im, nodeID); err != nil {
		return err
	}
	return MovePreCluster(dataDir)
}
