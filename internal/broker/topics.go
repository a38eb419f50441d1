package broker

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/node"
	"github.com/exactq/exactq/internal/cluster/upgrade"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/producerstate"
)

// topic is a topic and its partitions. Partitions only grow (CreatePartitions); the slice
// is replaced, never mutated, so readers holding an old slice stay valid. The publisher
// is the only writer (publisher.go); a nil partition is one whose log is offline here.
type topic struct {
	name     string
	id       [16]byte
	internal bool

	mu         sync.RWMutex
	configs    map[string]string // explicit overrides; guarded by mu
	settings   topicSettings     // resolved from configs; guarded by mu
	partitions []*partition      // guarded by mu
}

func (t *topic) partition(i int32) *partition {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if i < 0 || int(i) >= len(t.partitions) {
		return nil
	}
	return t.partitions[i]
}

// snapshot is the topic's partitions (nil where offline) and settings.
func (t *topic) snapshot() ([]*partition, topicSettings) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.partitions, t.settings
}

// topicRecord is what the metadata image says of a topic: the broker opens its
// partitions from it at start-up.
type topicRecord struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Configs    map[string]string
}

// topicsOf lists the image's topics by name, each with its explicit config overrides.
func topicsOf(im *metadata.Image) []topicRecord {
	var out []topicRecord
	for _, name := range slices.Sorted(maps.Keys(im.TopicsByName)) {
		t := im.TopicsByID[im.TopicsByName[name]]
		cfg := maps.Clone(im.Configs[metadata.ConfigResource{Type: metadata.ResourceTopic, Name: name}])
		out = append(out, topicRecord{Name: name, ID: t.ID, Partitions: int32(len(t.Partitions)), Configs: cfg})
	}
	return out
}

// topics is the registry of all topics.
type topics struct {
	dir string // <data>

	mu     sync.RWMutex
	byName map[string]*topic
	byID   map[[16]byte]*topic
}

func (ts *topics) get(name string) *topic {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byName[name]
}

func (ts *topics) getByID(id [16]byte) *topic {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byID[id]
}

// all returns the topics sorted by name.
func (ts *topics) all() []*topic {
	ts.mu.RLock()
	out := make([]*topic, 0, len(ts.byName))
	for _, t := range ts.byName {
		out = append(out, t)
	}
	ts.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func partitionDir(dataDir, topic string, p int32) string {
	return filepath.Join(dataDir, topic+"-"+strconv.Itoa(int(p)))
}

// removeOrphanPartitionDirs deletes partition directories the image does not name: a
// crash after a topic's removal was applied but before its logs were deleted leaves them,
// as does one between creating a topic's logs and its entry. A directory whose
// partition.metadata names another topic id is an older topic of the same name, deleted
// and created again, and goes too. The metadata log's own directory is not a partition.
func removeOrphanPartitionDirs(dataDir string, topics []topicRecord) error {
	known := map[string]topicRecord{}
	for _, t := range topics {
		known[t.Name] = t
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == node.LogDir {
			continue
		}
		i := strings.LastIndexByte(name, '-')
		if i <= 0 {
			continue
		}
		p, err := strconv.Atoi(name[i+1:])
		if err != nil || p < 0 {
			continue
		}
		if t, ok := known[name[:i]]; ok && int32(p) < t.Partitions {
			b, err := os.ReadFile(filepath.Join(dataDir, name, upgrade.PartitionMetadataFile))
			if err != nil {
				continue // no file yet (or unreadable): openPartition writes or checks it
			}
			if id, err := upgrade.ParsePartitionMetadata(b); err != nil || id == t.ID {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(dataDir, name)); err != nil {
			return err
		}
	}
	return nil
}

// openPartition opens (recovering) one partition log and rebuilds its producer state from
// the log, so idempotent producers keep their sequence checks across a restart.
func (b *Broker) openPartition(t *topic, index int32, settings topicSettings) (*partition, error) {
	var p *partition
	opts := log.Options{Now: b.now, Logger: b.logger}
	if b.cfg.Fsync == FsyncAlways {
		// Flushes run only after appends, so after p is set below.
		opts.OnDurable = func(end int64) { p.advanceHW(end) }
	}
	dir := partitionDir(b.cfg.DataDir, t.name, index)
	l, err := log.Open(dir, settings.log, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.name, index, err)
	}
	if err := upgrade.WritePartitionID(dir, t.id); err != nil {
		l.Close()
		return nil, fmt.Errorf("open %s-%d: %w", t.name, index, err)
	}
	p = &partition{
		topic:     t,
		index:     index,
		log:       l,
		producers: producerstate.NewWithConfig(b.producerState),
	}
	p.unstable.Store(math.MaxInt64)
	if err := p.rebuildProducerState(); err != nil {
		l.Close()
		return nil, fmt.Errorf("rebuild producer state of %s-%d: %w", t.name, index, err)
	}
	if b.cfg.Fsync == FsyncAlways {
		p.hw.Store(l.DurableEnd())
	} else {
		p.hw.Store(l.EndOffset())
	}
	return p, nil
}

// close makes the log durable, closes it and saves the producer state next to it. A no-op
// once the partition was closed or deleted. The snapshot only saves start-up work, so a
// failure to write it (a full disk) is logged, not returned.
func (p *partition) close(onSnapshotErr func(error)) error {
	return p.end(func() error {
		unchanged := p.log.Unchanged()
		if err := p.log.Close(); err != nil {
			return err
		}
		if unchanged && p.snapshotCurrent {
			// Nothing was appended since the snapshot was written: it is still the state,
			// and a partition nothing touched is closed without a write.
			return nil
		}
		if err := p.writeProducerSnapshot(); err != nil {
			onSnapshotErr(err)
		}
		return nil
	})
}

// delete closes the log and removes its directory. A no-op once the partition was closed:
// the caller removed the topic record first, so start-up removes the directory instead.
func (p *partition) delete() error {
	return p.end(func() error {
		p.mu.Lock()
		p.producers.Release()
		p.mu.Unlock()
		return p.log.Delete()
	})
}

// end runs the partition's last step (close or delete) unless one already ran.
func (p *partition) end(last func() error) error {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.ended {
		return nil
	}
	p.ended = true
	return last()
}
