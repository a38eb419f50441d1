package metadata

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
)

// TopicChange is a topic created (Before nil), deleted (After nil) or changed.
type TopicChange struct {
	ID            TopicID
	Before, After *Topic
}

// PartitionChange is a partition created (Before nil), deleted with its topic (After
// nil) or changed (leader, epochs, replicas, ISR, ...).
type PartitionChange struct {
	Topic         TopicID
	Partition     int32
	Before, After *Partition
}

// BrokerChange is a broker registered (Before nil), unregistered (After nil) or changed
// (fenced, unfenced, re-registered, ...).
type BrokerChange struct {
	ID            int32
	Before, After *Broker
}

// Topics returns the topics that differ between Before and After, by id.
func (d *Delta) Topics() []TopicChange {
	var out []TopicChange
	for _, id := range sortedTopicIDs(d.topics) {
		b, a := d.Before.TopicsByID[id], d.After.TopicsByID[id]
		if b != a && !reflect.DeepEqual(b, a) {
			out = append(out, TopicChange{id, b, a})
		}
	}
	return out
}

// Partitions returns the partitions that differ between Before and After.
func (d *Delta) Partitions() []PartitionChange {
	var out []PartitionChange
	for _, c := range d.Topics() {
		var before, after []*Partition
		if c.Before != nil {
			before = c.Before.Partitions
		}
		if c.After != nil {
			after = c.After.Partitions
		}
		for i := range max(len(before), len(after)) {
			var b, a *Partition
			if i < len(before) {
				b = before[i]
			}
			if i < len(after) {
				a = after[i]
			}
			if b != a && !reflect.DeepEqual(b, a) {
				out = append(out, PartitionChange{c.ID, int32(i), b, a})
			}
		}
	}
	return out
}

// Brokers returns the brokers that differ between Before and After, by id.
func (d *Delta) Brokers() []BrokerChange {
	var out []BrokerChange
	for _, id := range sortedKeys(d.brokers) {
		b, a := d.Before.Brokers[id], d.After.Brokers[id]
		if b != a && !reflect.DeepEqual(b, a) {
			out = append(out, BrokerChange{id, b, a})
		}
	}
	return out
}

// Configs returns the resources whose configs differ between Before and After.
func (d *Delta) Configs() []ConfigResource {
	var out []ConfigResource
	for _, r := range sortedResources(d.configs) {
		if !maps.Equal(d.Before.Configs[r], d.After.Configs[r]) {
			out = append(out, r)
		}
	}
	return out
}

// Features returns the features whose finalized level differs, by name.
func (d *Delta) Features() []string {
	var out []string
	for _, f := range sortedKeys(d.features) {
		b, okB := d.Before.Features[f]
		a, okA := d.After.Features[f]
		if b != a || okB != okA {
			out = append(out, f)
		}
	}
	return out
}

// ProducerIDsChanged reports whether a producer-id block was handed out.
func (d *Delta) ProducerIDsChanged() bool { return d.Before.ProducerIDs != d.After.ProducerIDs }

// ClusterChanged reports whether the ClusterRecord was applied.
func (d *Delta) ClusterChanged() bool { return d.Before.Cluster != d.After.Cluster }

// Compose is d then e (e.Before must be d.After): the delta from d.Before to e.After, as
// if both batches had been one.
func Compose(d, e *Delta) *Delta {
	if d.After != e.Before {
		panic("metadata: Compose of deltas that do not follow each other")
	}
	union := func(a, b map[TopicID]struct{}) map[TopicID]struct{} { m := maps.Clone(a); maps.Copy(m, b); return m }
	c := &Delta{Before: d.Before, After: e.After, topics: union(d.topics, e.topics),
		brokers: maps.Clone(d.brokers), configs: maps.Clone(d.configs), features: maps.Clone(d.features)}
	maps.Copy(c.brokers, e.brokers)
	maps.Copy(c.configs, e.configs)
	maps.Copy(c.features, e.features)
	c.acls, c.scram = maps.Clone(d.acls), maps.Clone(d.scram)
	maps.Copy(c.acls, e.acls)
	maps.Copy(c.scram, e.scram)
	return c
}

func sortedTopicIDs[V any](m map[TopicID]V) []TopicID {
	return slices.SortedFunc(maps.Keys(m), func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
}

func sortedResources[V any](m map[ConfigResource]V) []ConfigResource {
	return slices.SortedFunc(maps.Keys(m), func(a, b ConfigResource) int {
		if a.Type != b.Type {
			return int(a.Type) - int(b.Type)
		}
		return bytes.Compare([]byte(a.Name), []byte(b.Name))
	})
}
