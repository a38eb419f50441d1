package broker

import "context"

// deleteTopicShareState deletes a deleted topic's share state with it, durably, as Kafka's
// share coordinator (maybeCleanupShareState: tombstones for every group's share partitions
// of the topic) and group coordinator (maybeCleanupShareGroupState: the topic leaves each
// group's share-partition state metadata) do. A topic re-created with the same name gets a
// new id and starts clean; nothing of the old one comes back after a restart. deleteTopic
// calls it after the topic record is gone; a crash before it leaves orphan state that the
// share stack's start removes (see shares).
func (b *Broker) deleteTopicShareState(t *topic) {
	if s := b.loadedShares(); s != nil { // nil: no share state exists
		id := t.id
		b.deleteShareStateOf(s, func(topicID [16]byte) bool { return topicID == id })
	}
}

// deleteShareStateOf deletes the share state of the topics deleted reports gone. Failures
// are logged: the state of a deleted topic is unreachable (its id is never reused), and the
// next start of the share stack removes what is left.
func (b *Broker) deleteShareStateOf(s *shareStack, deleted func(topicID [16]byte) bool) {
	ctx, cancel := context.WithTimeout(context.Background(), offsetTombstonesTimeout)
	defer cancel()
	if err := s.fetch.DeleteTopics(ctx, deleted); err != nil {
		b.logger.Error("deleting share state of deleted topics", "err", err)
	}
	if err := s.members.DeleteTopics(deleted); err != nil {
		b.logger.Error("deleting deleted topics from share groups", "err", err)
	}
}

// unknownTopic reports whether no topic has this id: its share state is an orphan.
func (b *Broker) unknownTopic(topicID [16]byte) bool { return b.topics.getByID(topicID) == nil }
