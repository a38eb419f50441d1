package share

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/share/sharestate"
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

// ResetShareState is AlterShareGroupOffsets' re-initialization of one share partition
// (Kafka's alterShareGroupOffsets followed by InitializeShareGroupState with the new start
// offset): the share partition's state is replaced by an empty one starting at
// startOffset, durable on return. -1 resolves share.auto.offset.reset now, as
// InitializeShareState does; below -1 is INVALID_REQUEST.
//
// The stored state epoch is bumped (at least stateEpoch, and above the stored one), so a
// write of the previous instance that reaches the store after the reset is fenced with
// FENCED_STATE_EPOCH instead of overwriting the new state. The live share partition is
// dropped first, after its pending writes; the next fetch loads the new state, so it starts
// at startOffset with nothing in flight.
func (m *Manager) ResetShareState(ctx context.Context, groupID string, topicID [16]byte, partition, stateEpoch int32, startOffset int64) error {
	key := sharestate.Key{GroupID: groupID, TopicID: topicID, Partition: partition}
	if startOffset < -1 {
		return errorf(kerr.InvalidRequest, "start offset %d of %s is not an offset", startOffset, key)
	}
	logStart, err := m.logs.ListOffset(topicID, partition, -2)
	if err != nil {
		return logError(err)
	}
	if startOffset == -1 {
		if startOffset, err = m.resolveReset(key, m.cfg.Groups(groupID), logStart); err != nil {
			return err
		}
	}
	m.dropLive(key)
	_, err = m.store.Reinitialize(ctx, key, stateEpoch, startOffset)
	return err
}

// DeleteShareState deletes one share partition's state (DeleteShareGroupState, for
// DeleteShareGroupOffsets and DeleteGroups), durable on return. The live share partition
// is dropped first, after its pending writes, so nothing of it is written afterwards; a
// later fetch of the key finds no state (the group coordinator re-initializes it when the
// group next assigns the partition).
func (m *Manager) DeleteShareState(ctx context.Context, groupID string, topicID [16]byte, partition int32) error {
	key := sharestate.Key{GroupID: groupID, TopicID: topicID, Partition: partition}
	m.dropLive(key)
	return m.store.Delete(ctx, key)
}

// DeleteTopics deletes the share state of deleted topics, durable on return (Kafka's share
// coordinator on a topic deletion): the live share partitions of those topics are dropped
// first, after their pending writes, then every group's state of them is tombstoned in the
// store. deleted reports whether a topic id is gone.
func (m *Manager) DeleteTopics(ctx context.Context, deleted func(topicID [16]byte) bool) error {
	m.mu.Lock()
	var keys []sharestate.Key
	for k := range m.parts {
		if deleted(k.TopicID) {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	for _, k := range keys {
		m.dropLive(k)
	}
	_, err := m.store.DeleteTopics(ctx, deleted)
	return err
}

// DropAll closes every share session without releasing records and drops every live share
// partition after its pending writes: what Kafka's SharePartitionManager.onShareVersionToggle
// does when share.version is lowered below 1. Acquired records come back AVAILABLE on the
// next load, as after a restart.
func (m *Manager) DropAll() {
	m.mu.Lock()
	clear(m.sessions.sessions)
	keys := make([]sharestate.Key, 0, len(m.parts))
	for k := range m.parts {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	for _, k := range keys {
		m.dropLive(k)
	}
}

func errorf(code *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{code}, args...)...)
}
