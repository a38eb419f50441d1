package broker

import "errors"

// DeleteTopicForTest deletes a topic as DeleteTopics does, without a request.
func DeleteTopicForTest(b *Broker, name string) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.topics.get(name)
	if t == nil {
		return errors.New("no such topic")
	}
	return b.deleteTopic(t)
}
