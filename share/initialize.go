package share

import (
	"context"

	"github.com/exactq/exactq/share/sharestate"
)

// InitializeShareState is the share-group coordinator's InitializeShareState hook
// (sharegroup.Config.InitializeShareState, kip-932 3.3): it writes the share partition's
// initial state (InitializeShareGroupState) and returns once it is durable.
//
// A start offset of -1 (a topic new to the group) is resolved here with the group's
// share.auto.offset.reset, so records produced between the assignment and the member's
// first fetch are not skipped by `latest`. Kafka stores -1 and resolves it when the
// leader first loads the partition; a load still resolves -1 the same way (state written
// by another path). 0 (new partitions of a known topic) is stored as is.
//
// Initialization replaces any previous state, so a live share partition of the key is
// dropped first, after its pending writes, and reloads from the new state on next use.
func (m *Manager) InitializeShareState(ctx context.Context, groupID string, topicID [16]byte, partition, stateEpoch int32, startOffset int64) error {
	key := sharestate.Key{GroupID: groupID, TopicID: topicID, Partition: partition}
	if startOffset < 0 {
		logStart, err := m.logs.ListOffset(topicID, partition, -2)
		if err != nil {
			return logError(err)
		}
		if startOffset, err = m.resolveReset(key, m.cfg.Groups(groupID), logStart); err != nil {
			return err
		}
	}
	m.dropLive(key)
	return m.store.Initialize(ctx, key, stateEpoch, startOffset)
}

// dropLive retires the live share partition of key, if any, and waits for its pending
// writes, so none lands after a state replacement.
func (m *Manager) dropLive(key sharestate.Key) {
	m.mu.Lock()
	p := m.parts[key]
	if p != nil {
		delete(m.parts, key)
	}
	m.mu.Unlock()
	if p == nil {
		return
	}
	m.timers.remove(p)
	p.mu.Lock()
	p.dropped = true
	tail := p.tail
	p.wake()
	p.mu.Unlock()
	<-tail
}
