package broker

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/producerstate"
)

// topic is a topic and its partitions. Partitions only grow (CreatePartitions); the slice
// is replaced, never mutated, so readers holding an old slice stay valid.
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

func (t *topic) snapshot() ([]*partition, topicSettings) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.partitions, t.settings
}

// topicRecord is a topic's durable description, <data>/topics/<name>.json. It is written
// before a topic's partitions are used and removed before they are deleted, so the file is
// the single source of truth for which topics exist.
type topicRecord struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

func (t *topic) record() topicRecord {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return topicRecord{Name: t.name, ID: hex.EncodeToString(t.id[:]), Partitions: int32(len(t.partitions)), Configs: t.configs}
}

// topics is the registry of all topics.
type topics struct {
	dir     string // <data>
	metaDir string // <data>/topics

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

func (ts *topics) recordPath(name string) string {
	return filepath.Join(ts.metaDir, name+".json")
}

// loadTopicRecords reads every topic record in <data>/topics.
func loadTopicRecords(metaDir string) ([]topicRecord, error) {
	entries, err := os.ReadDir(metaDir)
	if err != nil {
		return nil, err
	}
	var out []topicRecord
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(metaDir, name)) // an interrupted atomic write
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		var rec topicRecord
		if err := readJSON(filepath.Join(metaDir, name), &rec); err != nil {
			return nil, err
		}
		out = append(out, rec)
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

// removeOrphanPartitionDirs deletes partition directories of topics that no longer exist:
// a crash after a topic's record was removed but before its logs were deleted leaves them.
func removeOrphanPartitionDirs(dataDir string, known map[string]int32) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		i := strings.LastIndexByte(name, '-')
		if i <= 0 {
			continue
		}
		p, err := strconv.Atoi(name[i+1:])
		if err != nil || p < 0 {
			continue
		}
		if n, ok := known[name[:i]]; ok && int32(p) < n {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dataDir, name)); err != nil {
			return err
		}
	}
	return nil
}

var errTopicExists = errors.New("topic exists")

// openPartition opens (recovering) one partition log and rebuilds its producer state from
// the log, so idempotent producers keep their sequence checks across a restart.
func (b *Broker) openPartition(t *topic, index int32, settings topicSettings) (*partition, error) {
	var p *partition
	opts := log.Options{Now: b.now, Logger: b.logger}
	if b.cfg.Fsync == FsyncAlways {
		// Flushes run only after appends, so after p is set below.
		opts.OnDurable = func(end int64) { p.advanceHW(end) }
	}
	l, err := log.Open(partitionDir(b.cfg.DataDir, t.name, index), settings.log, opts)
	if err != nil {
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
