package broker

import (
	"context"
	"errors"

	"github.com/exactq/exactq/wire"
)

// ProposeMetadataForTest appends records to the node's metadata log directly, past the
// controller (as a change another node's controller made arrives), and returns once the
// broker's publisher has applied them or has stopped.
func ProposeMetadataForTest(b *Broker, records ...wire.MetadataRecord) error {
	ctx, cancel := context.WithTimeout(context.Background(), metadataProposeTimeout)
	defer cancel()
	idx, err := b.meta.Propose(ctx, records)
	if err != nil {
		return err
	}
	if err := b.pub.wait(ctx, idx); err != nil && !errors.Is(err, errPublisherStopped) {
		return err
	}
	return nil
}

// DeleteTopicForTest deletes a topic without a request: its RemoveTopicRecord proposed
// to the node, applied by the publisher unless the broker is closing.
func DeleteTopicForTest(b *Broker, name string) error {
	t := b.topics.get(name)
	if t == nil {
		return errors.New("no such topic")
	}
	return ProposeMetadataForTest(b, &wire.RemoveTopicRecord{TopicID: t.id})
}

// PublishedIndexForTest is the metadata index the broker's registries match.
func PublishedIndexForTest(b *Broker) uint64 { return b.pub.applied() }
