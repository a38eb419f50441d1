package metadata

import (
	"errors"
	"testing"

	"github.com/exactq/exactq/wire"
)

func mustApply(t *testing.T, im *Image, recs ...wire.MetadataRecord) (*Image, *Delta) {
	t.Helper()
	next, d, err := Apply(im, recs)
	if err != nil {
		t.Fatal(err)
	}
	return next, d
}

// TestKRaftRules: the replay rules that are Kafka's meaning of a record, one by one.
func TestKRaftRules(t *testing.T) {
	id := [16]byte{1}
	im, _ := mustApply(t, Empty(),
		&wire.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 10, Fenced: true},
		&wire.TopicRecord{Name: "t", TopicID: id},
		&wire.PartitionRecord{TopicID: id, PartitionID: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: -1},
		&wire.ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t", Name: "retention.ms", Value: new(string)})

	// BrokerRegistrationChangeRecord's Fenced: -1 unfences, 1 fences, 0 leaves it.
	im, d := mustApply(t, im, &wire.BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 10, Fenced: -1})
	if im.Brokers[1].Fenced || len(d.Brokers()) != 1 {
		t.Fatalf("Fenced -1: fenced %v, %d broker changes", im.Brokers[1].Fenced, len(d.Brokers()))
	}
	if im, _ = mustApply(t, im, &wire.BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 10}); im.Brokers[1].Fenced {
		t.Fatal("Fenced 0 fenced the broker")
	}
	if _, _, err := Apply(im, []wire.MetadataRecord{&wire.BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 9, Fenced: 1}}); !errors.Is(err, ErrRefused) {
		t.Fatalf("a stale broker epoch: %v", err)
	}

	// A leader set, even to the same broker, bumps the leader epoch; any change bumps the
	// partition epoch.
	for i, leader := range []int32{1, 1, -2} {
		im, _ = mustApply(t, im, &wire.PartitionChangeRecord{TopicID: id, Leader: leader, LeaderRecoveryState: -1})
		p := im.TopicsByID[id].Partitions[0]
		wantLeaderEpoch := int32(min(i+1, 2))
		if p.Leader != 1 || p.LeaderEpoch != wantLeaderEpoch || p.PartitionEpoch != int32(i+1) {
			t.Fatalf("change %d: leader %d, epochs %d/%d", i, p.Leader, p.LeaderEpoch, p.PartitionEpoch)
		}
	}

	// A batch whose last record does not fit applies nothing.
	before := im
	if _, _, err := Apply(im, []wire.MetadataRecord{
		&wire.PartitionChangeRecord{TopicID: id, Leader: -1, LeaderRecoveryState: -1},
		&wire.PartitionChangeRecord{TopicID: id, Leader: 5, LeaderRecoveryState: -1}, // not a replica
	}); !errors.Is(err, ErrRefused) || before.TopicsByID[id].Partitions[0].Leader != 1 {
		t.Fatalf("half a batch: %v, leader %d", err, before.TopicsByID[id].Partitions[0].Leader)
	}

	// RemoveTopicRecord takes the topic's configs with it; the delta reports both.
	im, d = mustApply(t, im, &wire.RemoveTopicRecord{TopicID: id})
	if im.Topic("t") != nil || len(im.Configs) != 0 || len(d.Topics()) != 1 || len(d.Partitions()) != 1 || len(d.Configs()) != 1 {
		t.Fatalf("after RemoveTopic: topic %v, configs %v, delta %d/%d/%d", im.Topic("t"), im.Configs, len(d.Topics()), len(d.Partitions()), len(d.Configs()))
	}

	// FeatureLevel 0 removes a feature; producer ids must grow.
	im, _ = mustApply(t, im, &wire.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 27}, &wire.FeatureLevelRecord{Name: "metadata.version"})
	if len(im.Features) != 0 {
		t.Fatalf("features %v", im.Features)
	}
	im, _ = mustApply(t, im, &wire.ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 10, NextProducerID: 1000})
	if _, _, err := Apply(im, []wire.MetadataRecord{&wire.ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 10, NextProducerID: 1000}}); !errors.Is(err, ErrRefused) {
		t.Fatalf("a producer-id block that does not grow: %v", err)
	}
}
