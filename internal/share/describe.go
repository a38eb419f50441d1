package share

import (
	"context"
	"sort"

	"github.com/exactq/exactq/internal/share/sharepartition"
	"github.com/exactq/exactq/internal/share/sharestate"
)

// PartitionDescription is one share partition of a group as operators see it (`exactq
// share describe`).
type PartitionDescription struct {
	TopicID   [16]byte
	Partition int32
	// StartOffset is the SPSO; Lag is the log end offset minus the SPSO minus the records
	// already delivered for good (ACKNOWLEDGED or ARCHIVED) at or after it (KIP-1226).
	StartOffset, Lag int64
	// Window is the in-flight window with per-record states, delivery counts, owners and
	// staged transactions.
	Window sharepartition.Description
}

// Describe lists the share partitions of groupID that are live on this broker (loaded by
// a fetch or an acknowledgement since start-up), sorted by topic id and partition. For
// partitions that are not live, Offsets answers from the share-state store.
func (m *Manager) Describe(groupID string) []PartitionDescription {
	m.mu.Lock()
	var ps []*partition
	for k, p := range m.parts {
		if k.GroupID == groupID {
			ps = append(ps, p)
		}
	}
	m.mu.Unlock()
	var out []PartitionDescription
	for _, p := range ps {
		p.mu.Lock()
		if p.dropped || p.sp == nil {
			p.mu.Unlock()
			continue
		}
		d, complete := p.sp.Describe(), p.sp.DeliveryCompleteCount()
		p.mu.Unlock()
		out = append(out, PartitionDescription{
			TopicID:     p.key.TopicID,
			Partition:   p.key.Partition,
			StartOffset: d.StartOffset,
			Lag:         m.lag(p.key, d.StartOffset, complete),
			Window:      d,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TopicID != out[j].TopicID {
			return string(out[i].TopicID[:]) < string(out[j].TopicID[:])
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Offsets answers DescribeShareGroupOffsets (v0-v1) for one share partition: the SPSO and
// the lag (latest offset - SPSO - delivery-complete count, Kafka's
// computeShareGroupLagAndBuildResponse). A live partition answers from memory, which is
// ahead of the store only by in-flight writes; otherwise the store's summary is used. An
// uninitialized partition answers start offset -1 and lag -1.
func (m *Manager) Offsets(ctx context.Context, groupID string, topicID [16]byte, partition int32) (startOffset, lag int64, err error) {
	key := sharestate.Key{GroupID: groupID, TopicID: topicID, Partition: partition}
	m.mu.Lock()
	p := m.parts[key]
	m.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		if !p.dropped && p.sp != nil {
			spso, complete := p.sp.StartOffset(), p.sp.DeliveryCompleteCount()
			p.mu.Unlock()
			return spso, m.lag(key, spso, complete), nil
		}
		p.mu.Unlock()
	}
	s, err := m.store.ReadSummary(ctx, key, -1)
	if err != nil {
		return 0, 0, persisterError(err)
	}
	if s.StartOffset < 0 {
		return -1, -1, nil
	}
	// The stored start offset lags behind transaction markers, which resolve staged
	// records in the store without rewriting the start offset (the marker in the log is the
	// resolution). Loading the partition applies the resolution and advances the SPSO.
	if p, err := m.lockedPartition(key); err == nil {
		d := p.sp.Describe()
		complete := p.sp.DeliveryCompleteCount()
		p.mu.Unlock()
		return d.StartOffset, m.lag(key, d.StartOffset, complete), nil
	}
	return s.StartOffset, m.lag(key, s.StartOffset, max(s.DeliveryCompleteCount, 0)), nil
}

func (m *Manager) lag(k sharestate.Key, spso, complete int64) int64 {
	end, err := m.logs.ListOffset(k.TopicID, k.Partition, -1)
	if err != nil {
		return -1
	}
	return max(end-spso-complete, 0)
}
